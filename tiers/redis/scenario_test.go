package redis

import (
	"bufio"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestScenarios runs the scripts in testdata/*.txt against a real Redis:
// one command a line, "-> answer" where the answer is checked. The format is
// described at the top of testdata/guard.txt and testdata/outage.txt.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			s := startRedis(t)
			tier := newTier(t, s, func(o *Options) { o.CallTimeout = outageCallTimeout })
			runScenario(t, file, s, tier)
		})
	}
}

func runScenario(t *testing.T, file string, s *redisServer, tier *Tier) {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx := context.Background()
	raw := s.Client()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		cmdText, want, checked := strings.Cut(line, "->")
		args := strings.Fields(cmdText)
		if len(args) == 0 {
			continue
		}
		want = strings.TrimSpace(want)
		seq := func(i int) uint64 {
			if len(args) <= i {
				t.Fatalf("%s:%d: missing argument", file, n)
			}
			v, err := strconv.ParseUint(args[i], 10, 64)
			if err != nil {
				t.Fatalf("%s:%d: %v", file, n, err)
			}
			return v
		}
		var got string
		switch args[0] {
		case "set":
			e := entryAt(seq(3))
			got = [...]string{fillSkipped: "skipped", fillStored: "stored", fillRefused: "refused",
				fillFailed: "failed"}[tier.set(ctx, args[1], args[2], &e)]
		case "get":
			if e, ok := tier.Get(ctx, args[1], args[2]); ok {
				got = "hit " + strconv.FormatUint(e.Seq, 10)
			} else {
				got = "miss"
			}
		case "invalidate":
			got = "ok"
			if err := tier.Invalidate(ctx, seq(1), args[2:]); err != nil {
				got = err.Error()
			}
		case "floor":
			got = rawGet(t, raw, testNS+":f:"+args[1])
		case "global":
			got = rawGet(t, raw, testNS+":F")
		case "entry":
			got = rawGet(t, raw, testNS+":e:"+args[1])
			if got != "<nil>" {
				got = "seq " + strconv.FormatUint(binary.BigEndian.Uint64([]byte(got[1:9])), 10)
			}
		case "healthy":
			got = strconv.FormatBool(tier.Healthy())
		case "maxseen":
			seen, _ := tier.maxSeen()
			got = strconv.FormatUint(seen, 10)
		case "pause":
			s.Pause()
		case "resume":
			s.Resume()
		case "kill":
			s.Kill()
		case "restart":
			s.Restart()
		case "wait-healthy":
			waitFor(t, 5*time.Second, file+":"+strconv.Itoa(n), tier.Healthy)
		default:
			t.Fatalf("%s:%d: unknown command %q", file, n, args[0])
		}
		if checked && got != want {
			t.Fatalf("%s:%d: %s\n got: %s\nwant: %s", file, n, strings.TrimSpace(cmdText), got, want)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}
