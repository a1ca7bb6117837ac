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
	scriptUnfenced = -1 // the global floor key is missing: Redis lost its data
	scriptRefused  = 0  // setScript: the entry is below a floor, nothing written
	scriptStored   = 1  // setScript: the entry is written
)

// setScript stores an entry unless it is below its guard's floor or the
// global floor.
//
//	KEYS[1] entry key   KEYS[2] guard floor key   KEYS[3] global floor key
//	ARGV[1] entry seq   ARGV[2] entry bytes       ARGV[3] TTL in ms
//
// Returns scriptStored, scriptRefused, or scriptUnfenced (nothing written).
var setScript = goredis.NewScript(setLua)

const setLua = luaBelow + `
local g = redis.call('GET', KEYS[3])
if not g then return -1 end
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
//	KEYS[1] global floor key   KEYS[2..] guard floor keys
//	ARGV[1] seq                ARGV[2] floor TTL in ms
//
// Returns the number of floors raised, or scriptUnfenced when the global
// floor is missing (the floors are raised all the same).
var raiseFloorsScript = goredis.NewScript(raiseFloorsLua)

const raiseFloorsLua = luaBelow + `
local seq, ttl = ARGV[1], ARGV[2]
for i = 2, #KEYS do
  local cur = redis.call('GET', KEYS[i])
  local v = seq
  if cur and below(seq, cur) then v = cur end
  redis.call('SET', KEYS[i], v, 'PX', ttl)
end
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
return #KEYS - 1
`

// raiseGlobalScript raises the global floor to max(current, seq). It has no
// lifetime: one key, needed for as long as any entry may exist.
//
//	KEYS[1] global floor key
//	ARGV[1] seq   ARGV[2] '1' to create the key if missing (fencing after an
//	              outage), '0' to require it (advancing while healthy)
//
// Returns 1 when raised, 0 when already at or above seq, scriptUnfenced when
// the key is missing and ARGV[2] is '0' (nothing written).
var raiseGlobalScript = goredis.NewScript(raiseGlobalLua)

const raiseGlobalLua = luaBelow + `
local cur = redis.call('GET', KEYS[1])
if not cur then
  if ARGV[2] ~= '1' then return -1 end
elseif not below(cur, ARGV[1]) then
  return 0
end
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
