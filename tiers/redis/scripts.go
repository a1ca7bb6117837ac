package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"
)

// The tier's Lua scripts. Each runs atomically on the server, which is what
// makes "check the floors, then write" one step that no invalidation can
// fall between.
//
// Sequence numbers travel and are stored as canonical decimal strings
// (strconv.FormatUint: no sign, no leading zeros) and are compared as strings,
// never converted to Lua numbers: Lua 5.1 numbers are doubles, exact only
// below 2^53, and tostring would write large ones in exponent form. Among
// canonical decimals the shorter is smaller, and equal lengths compare byte
// by byte (not with Lua's <, which uses the server's collation locale).
const luaBelow = `
local function below(a, b)
  if #a ~= #b then return #a < #b end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return false
end
`

// Results of the scripts.
const (
	scriptUnfenced   = -1 // the global floor or the marker is missing: Redis lost its data
	scriptBehind     = -2 // the marker is below what the caller knows it reached: Redis went back in time
	scriptIncomplete = -3 // raiseFloorsScript: an earlier chunk of the same invalidation did not run
	scriptRefused    = 0  // setScript: the entry is below a floor, nothing written
	scriptStored     = 1  // setScript: the entry is written
)

// setScript stores an entry unless it is below its guard's floor or the
// global floor, or above the sequence marker (a Redis that has not seen the
// invalidations up to the entry's seq: see Tier, "Rewinds").
//
//	KEYS[1] entry key   KEYS[2] guard floor key   KEYS[3] global floor key
//	KEYS[4] marker key
//	ARGV[1] entry seq   ARGV[2] entry bytes       ARGV[3] TTL in ms
//
// Returns scriptStored, scriptRefused, scriptUnfenced or scriptBehind (the
// last two write nothing).
var setScript = goredis.NewScript(setLua)

const setLua = luaBelow + `
local g = redis.call('GET', KEYS[3])
local s = redis.call('GET', KEYS[4])
if not g or not s then return -1 end
if below(s, ARGV[1]) then return -2 end
if below(ARGV[1], g) then return 0 end
local f = redis.call('GET', KEYS[2])
if f and below(ARGV[1], f) then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
`

// raiseFloorsScript raises each guard floor to max(current, seq) and renews
// its lifetime. Taking the maximum keeps floors monotonic whatever order
// invalidations execute in, including a timed-out call that the server runs
// after a later one.
//
// One invalidation is one or more calls (chunks of at most maxKeysPerScript
// guards), sent in order, up to maxScriptsPerRoundTrip in one pipeline. The last call, and only it, also
// raises the marker to max(marker, seq), after its floors, so that a marker
// at seq means every floor of the invalidation was raised: it checks first
// that the marker is at least what the tier last saw it reach (expected; a
// lower one means Redis went back in time, and raising it would hide that),
// and that each earlier chunk ran, through one witness per chunk (its last
// guard's floor, which that chunk's atomic run raised to at least seq).
//
//	KEYS[1] global floor key   KEYS[2] marker key
//	KEYS[3..2+w] witnesses (the last call only)   then the guard floor keys
//	ARGV[1] seq   ARGV[2] floor TTL in ms
//	ARGV[3] '-' for a call that is not the last, else w
//	ARGV[4] expected marker (the last call only)
//
// Returns the number of floors raised, scriptUnfenced when the global floor
// or the marker is missing, scriptBehind when the marker is below expected,
// scriptIncomplete when a witness is below seq. The floors are raised all
// the same; the marker only on success.
var raiseFloorsScript = goredis.NewScript(raiseFloorsLua)

const raiseFloorsLua = luaBelow + `
local seq, ttl = ARGV[1], ARGV[2]
local first = 3
if ARGV[3] ~= '-' then first = 3 + tonumber(ARGV[3]) end
for i = first, #KEYS do
  local cur = redis.call('GET', KEYS[i])
  local v = seq
  if cur and below(seq, cur) then v = cur end
  redis.call('SET', KEYS[i], v, 'PX', ttl)
end
local n = #KEYS - first + 1
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if ARGV[3] == '-' then return n end
local s = redis.call('GET', KEYS[2])
if not s then return -1 end
if below(s, ARGV[4]) then return -2 end
for i = 3, first - 1 do
  local f = redis.call('GET', KEYS[i])
  if not f or below(f, seq) then return -3 end
end
if below(s, seq) then redis.call('SET', KEYS[2], seq) end
return n
`

// fenceScript raises the global floor and the marker to max(current,
// target), creating them if missing: the writer's tier recovering from an
// outage (see Tier, "Outages"). Neither key has a lifetime: both are needed
// for as long as any entry may exist.
//
//	KEYS[1] global floor key   KEYS[2] marker key
//	ARGV[1] target
//
// Returns 1.
var fenceScript = goredis.NewScript(fenceLua)

const fenceLua = luaBelow + `
for i = 1, 2 do
  local cur = redis.call('GET', KEYS[i])
  if not cur or below(cur, ARGV[1]) then redis.call('SET', KEYS[i], ARGV[1]) end
end
return 1
`

// advanceScript raises the global floor to max(current, seq), requiring it
// and the marker to exist and the marker to be at least expected: the
// healthy writer tier's periodic check that Redis still holds its keys and
// has not gone back in time, and the global floor's advance (see Tier,
// "Floor lifetime").
//
//	KEYS[1] global floor key   KEYS[2] marker key
//	ARGV[1] seq   ARGV[2] expected marker
//
// Returns 1 when raised, 0 when already at or above seq, scriptUnfenced or
// scriptBehind (nothing written).
var advanceScript = goredis.NewScript(advanceLua)

const advanceLua = luaBelow + `
local g = redis.call('GET', KEYS[1])
local s = redis.call('GET', KEYS[2])
if not g or not s then return -1 end
if below(s, ARGV[2]) then return -2 end
if not below(g, ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1
`

// scriptCall is one call of a script: its keys and arguments.
type scriptCall struct {
	keys []string
	args []any
}

// runPipelined sends calls of script as one pipeline of EVALSHA; after a
// Redis restart or SCRIPT FLUSH (NOSCRIPT) it sends the pipeline once more
// with the script text. The replies are in the order of calls.
func (t *Tier) runPipelined(ctx context.Context, script *goredis.Script, calls []scriptCall) ([]*goredis.Cmd, error) {
	run := func(eval bool) ([]*goredis.Cmd, error) {
		pipe := t.rdb.Pipeline()
		cmds := make([]*goredis.Cmd, len(calls))
		for i, c := range calls {
			if eval {
				cmds[i] = script.Eval(ctx, pipe, c.keys, c.args...)
			} else {
				cmds[i] = script.EvalSha(ctx, pipe, c.keys, c.args...)
			}
		}
		_, err := pipe.Exec(ctx)
		return cmds, err
	}
	cmds, err := run(false)
	if goredis.HasErrorPrefix(err, "NOSCRIPT") {
		cmds, err = run(true)
	}
	return cmds, err
}
