package redis

import (
	"bufio"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// TestScenarios runs the scripts in testdata/*.txt against a real Redis:
// one command a line, "-> answer" where the answer is checked. The commands
// are described at the top of testdata/guard.txt, outage.txt and rewind.txt.
// The prober does not tick by itself: "probe" and "wait-healthy" run its
// rounds, so that every step happens where the script says.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			s := startRedis(t)
			sc := &scenario{t: t, file: file, s: s}
			// testOptions' generous CallTimeout: a call that times out on a
			// loaded machine would degrade the tier where the script does
			// not expect it; a paused server costs a second per call.
			sc.writer = newTier(t, s, func(o *Options) {
				o.ProbeInterval = 2 * time.Minute
				o.PublishedSeq = sc.writerSeq.Load
			})
			sc.run()
		})
	}
}

// scenario is one script's run: the writer's tier, and the tier of a
// replica sharing its Redis once the script starts one.
type scenario struct {
	t      *testing.T
	file   string
	s      *redisServer
	writer *Tier
	// replica is a follower tier, started by the first "replica SEQ".
	replica               *Tier
	writerSeq, replicaSeq atomic.Uint64 // the nodes' published seqs
}

func (sc *scenario) run() {
	t := sc.t
	f, err := os.Open(sc.file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raw := sc.s.Client()
	lines := bufio.NewScanner(f)
	for n := 1; lines.Scan(); n++ {
		line := lines.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		cmdText, want, checked := strings.Cut(line, "->")
		args := strings.Fields(cmdText)
		if len(args) == 0 {
			continue
		}
		where := sc.file + ":" + strconv.Itoa(n)
		tier := sc.writer
		if args[0] == "replica" && len(args) > 1 && !isDigits(args[1]) {
			if sc.replica == nil {
				t.Fatalf("%s: no replica yet (start one with replica SEQ)", where)
			}
			tier, args = sc.replica, args[1:]
		}
		got := sc.do(where, tier, raw, args)
		if want = strings.TrimSpace(want); checked && got != want {
			t.Fatalf("%s: %s\n got: %s\nwant: %s", where, strings.TrimSpace(cmdText), got, want)
		}
	}
	if err := lines.Err(); err != nil {
		t.Fatal(err)
	}
}

// do runs one command on tier and returns its answer.
func (sc *scenario) do(where string, tier *Tier, raw *goredis.Client, args []string) string {
	t := sc.t
	ctx := context.Background()
	seq := func(i int) uint64 {
		if len(args) <= i {
			t.Fatalf("%s: missing argument", where)
		}
		v, err := strconv.ParseUint(args[i], 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		return v
	}
	switch args[0] {
	case "set":
		e := entryAt(seq(3))
		return [...]string{fillSkipped: "skipped", fillStored: "stored", fillRefused: "refused",
			fillFailed: "failed"}[tier.set(ctx, args[1], args[2], &e)]
	case "get":
		if e, ok := tier.Get(ctx, args[1], args[2]); ok {
			return "hit " + strconv.FormatUint(e.Seq, 10)
		}
		return "miss"
	case "invalidate":
		if err := tier.Invalidate(ctx, seq(1), args[2:]); err != nil {
			return err.Error()
		}
		if tier == sc.writer {
			sc.writerSeq.Store(max(sc.writerSeq.Load(), seq(1))) // the writer publishes the change
		}
		return "ok"
	case "replica":
		sc.replicaSeq.Store(seq(1))
		if sc.replica == nil {
			o := testOptions(t, sc.s)
			o.ProbeInterval, o.Follower, o.PublishedSeq = 2*time.Minute, true, sc.replicaSeq.Load
			o.Logger = o.Logger.With("node", "replica")
			sc.replica = openTier(t, o)
		}
		return ""
	case "floor":
		return rawGet(t, raw, testNS+":f:"+args[1])
	case "global":
		return rawGet(t, raw, testNS+":F")
	case "marker":
		return rawGet(t, raw, testNS+":S")
	case "entry":
		got := rawGet(t, raw, testNS+":e:"+args[1])
		if got != "<nil>" {
			got = "seq " + strconv.FormatUint(binary.BigEndian.Uint64([]byte(got[1:9])), 10)
		}
		return got
	case "healthy":
		return strconv.FormatBool(tier.Healthy())
	case "maxseen":
		seen, _ := tier.maxSeen()
		return strconv.FormatUint(seen, 10)
	case "rewinds":
		return strconv.FormatUint(tier.Stats().Rewinds, 10)
	case "restarts":
		return strconv.FormatUint(tier.Stats().Restarts, 10)
	case "probe":
		probe(tier)
		if tier.Healthy() {
			return "healthy"
		}
		return "degraded"
	case "pause":
		sc.s.Pause()
	case "resume":
		sc.s.Resume()
	case "kill":
		sc.s.Kill()
	case "restart":
		sc.s.Restart()
	case "save":
		sc.s.Save()
	case "crash-restore":
		sc.s.RestartFromDump()
	case "wait-healthy":
		waitFor(t, 5*time.Second, where, func() bool {
			probe(tier)
			return tier.Healthy()
		})
	default:
		t.Fatalf("%s: unknown command %q", where, args[0])
	}
	return ""
}

// probe runs one round of tier's prober, as its ticker would: fence while
// degraded, check (and advance) while healthy.
func probe(tier *Tier) {
	if tier.Healthy() {
		tier.advance(time.Now())
	} else {
		tier.fence()
	}
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
