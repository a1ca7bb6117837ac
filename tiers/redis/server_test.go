package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/utxo-cache/utxo-cache/internal/testredis"
)

// redisServer is a real redis-server for this package's tests: the shared
// helper of internal/testredis (start on a free loopback port, Kill,
// Restart, Pause, Resume) plus a go-redis client, which only this package
// may import.
type redisServer struct {
	*testredis.Server
	t testing.TB
}

func startRedis(t testing.TB) *redisServer {
	return &redisServer{Server: testredis.Start(t), t: t}
}

func (s *redisServer) ping(d time.Duration) error { return s.Ping(d) }

// Client returns a plain go-redis client on the server, for inspecting and
// disturbing it behind the tier's back; closed on cleanup.
func (s *redisServer) Client() *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr(), Protocol: 2, DisableIdentity: true,
		MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 5 * time.Second})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestRedisServerHelper checks the helper itself: restart on the same port
// loses the data, and pause/resume keeps it.
func TestRedisServerHelper(t *testing.T) {
	s := startRedis(t)
	c := s.Client()
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Pause()
	if err := s.ping(50 * time.Millisecond); err == nil {
		t.Fatal("a paused server answered PING")
	}
	s.Resume()
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("after pause/resume: %q, %v", v, err)
	}
	s.Restart()
	err := c.Get(ctx, "k").Err()
	if err != nil && !errors.Is(err, goredis.Nil) {
		err = c.Get(ctx, "k").Err() // the first call may meet the pool's dead connection
	}
	if !errors.Is(err, goredis.Nil) {
		t.Fatalf("after restart: %v, want redis.Nil (the data gone)", err)
	}
}

// TestRedisConfOfDeploy starts redis-server with deploy/redis.conf, the
// settings recommended for the tier, and checks the ones the tier's
// assumptions rest on: no eviction, no persistence.
func TestRedisConfOfDeploy(t *testing.T) {
	s := &redisServer{Server: testredis.StartConfig(t, "../../deploy/redis.conf"), t: t}
	ctx := context.Background()
	c := s.Client()
	for name, want := range map[string]string{
		"maxmemory-policy": "noeviction",
		"save":             "",
		"appendonly":       "no",
		"maxmemory":        "2147483648",
	} {
		got, err := c.ConfigGet(ctx, name).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got[name] != want {
			t.Errorf("%s = %q, want %q", name, got[name], want)
		}
	}
	tier := newTier(t, s, nil)
	publish(t, tier, 1)
	tier.Set(ctx, "k", "g", entryAt(1))
	if _, ok := tier.Get(ctx, "k", "g"); !ok {
		t.Fatal("the tier does not work on the recommended settings")
	}
}
