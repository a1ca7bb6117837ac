package netlab

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ProxyOptions configure a Proxy. The zero value forwards faithfully.
type ProxyOptions struct {
	// Delay is added to every byte in each direction: a byte read from one
	// side is written to the other Delay later (a round trip gains twice
	// Delay). Bandwidth is not limited: bytes read meanwhile follow
	// without waiting for the earlier ones to be written.
	Delay time.Duration
	// DropMean, when positive, drops every connection at a random moment:
	// its lifetime is drawn from an exponential distribution of this mean.
	// A dropped connection is closed on both sides at once, half the time
	// with a reset (SO_LINGER 0), half with a plain close.
	DropMean time.Duration
	// Seed seeds the drop moments (0: random). Replaying a seed replays the
	// lifetimes drawn, in the order connections are accepted; the moments
	// they land in the traffic still depend on scheduling.
	Seed uint64
}

// ProxyStats counts what a Proxy did.
type ProxyStats struct {
	// Accepted counts the connections accepted; Dropped those the proxy
	// dropped on purpose (DropMean); DialFailed those closed because the
	// target could not be reached.
	Accepted, Dropped, DialFailed uint64
	// Bytes counts the bytes forwarded, both directions.
	Bytes uint64
}

// Proxy is a fault-injecting TCP proxy between two hosts, like toxiproxy:
// it listens inside one host and, for every connection accepted, dials the
// target from inside another (which may be the same host), then forwards
// both directions with an added delay, dropping connections at random
// moments. It runs in the test process. Close (or the test's cleanup) stops
// it and closes every connection. Safe for concurrent use.
type Proxy struct {
	t      testing.TB
	ln     net.Listener
	from   *Host
	target string
	opts   ProxyOptions
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	rngMu sync.Mutex
	rng   *rand.Rand

	accepted, dropped, dialFailed, bytes atomic.Uint64

	dropsMu sync.Mutex
	drops   []time.Time // when each drop happened, in order
}

// StartProxy listens on address inside listen (e.g. "127.0.0.1:0": the
// host's own loopback) and forwards every connection to target, dialed from
// inside from. It fails t if it cannot listen.
func StartProxy(t testing.TB, listen *Host, address string, from *Host, target string, opts ProxyOptions) *Proxy {
	t.Helper()
	ln, err := listen.Listen("tcp", address)
	if err != nil {
		t.Fatalf("netlab: proxy listen in %s on %s: %v", listen, address, err)
	}
	seed := opts.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{t: t, ln: ln, from: from, target: target, opts: opts, ctx: ctx, cancel: cancel,
		rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
	t.Logf("netlab: proxy %s (in %s) -> %s (from %s): delay %v, drop mean %v, seed %d",
		ln.Addr(), listen.Name, target, from.Name, opts.Delay, opts.DropMean, seed)
	t.Cleanup(p.Close)
	p.wg.Add(1)
	go p.accept()
	return p
}

// Addr is the address the proxy listens on, inside its listening host.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Stats returns the proxy's counts so far.
func (p *Proxy) Stats() ProxyStats {
	return ProxyStats{Accepted: p.accepted.Load(), Dropped: p.dropped.Load(), DialFailed: p.dialFailed.Load(), Bytes: p.bytes.Load()}
}

// DropsBetween counts the connections the proxy dropped on purpose at a
// moment in [from, to].
func (p *Proxy) DropsBetween(from, to time.Time) int {
	p.dropsMu.Lock()
	defer p.dropsMu.Unlock()
	n := 0
	for _, d := range p.drops {
		if !d.Before(from) && !d.After(to) {
			n++
		}
	}
	return n
}

// Close stops listening, closes every connection and waits for the proxy's
// goroutines. It may be called more than once.
func (p *Proxy) Close() {
	p.cancel()
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.serve(c.(*net.TCPConn))
	}
}

// lifetime draws a connection's lifetime (0: never dropped).
func (p *Proxy) lifetime() time.Duration {
	if p.opts.DropMean <= 0 {
		return 0
	}
	p.rngMu.Lock()
	defer p.rngMu.Unlock()
	return time.Duration(p.rng.ExpFloat64()*float64(p.opts.DropMean)) + 1
}

func (p *Proxy) reset() bool {
	p.rngMu.Lock()
	defer p.rngMu.Unlock()
	return p.rng.IntN(2) == 0
}

// serve forwards one connection until either side ends it, the drop moment
// comes, or the proxy closes.
func (p *Proxy) serve(client *net.TCPConn) {
	defer p.wg.Done()
	life := p.lifetime()
	ctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	sc, err := p.from.DialContext(ctx, "tcp", p.target)
	if err != nil {
		p.dialFailed.Add(1)
		_ = client.Close()
		return
	}
	server := sc.(*net.TCPConn)
	var once sync.Once
	closeBoth := func(rst bool) {
		once.Do(func() {
			if rst {
				_ = client.SetLinger(0)
				_ = server.SetLinger(0)
			}
			_ = client.Close()
			_ = server.Close()
			cancel()
		})
	}
	var pipes sync.WaitGroup
	pipes.Add(2)
	go func() { defer pipes.Done(); p.pipe(ctx, server, client, closeBoth) }()
	go func() { defer pipes.Done(); p.pipe(ctx, client, server, closeBoth) }()
	go func() { pipes.Wait(); cancel() }() // both sides ended by themselves
	var drop <-chan time.Time
	if life > 0 {
		tm := time.NewTimer(life)
		defer tm.Stop()
		drop = tm.C
	}
	select {
	case <-drop:
		p.dropped.Add(1)
		p.dropsMu.Lock()
		p.drops = append(p.drops, time.Now())
		p.dropsMu.Unlock()
		closeBoth(p.reset())
	case <-ctx.Done():
		closeBoth(false)
	}
	pipes.Wait()
}

// chunk is what one read took from a side, due at the other side at due.
type chunk struct {
	data []byte
	due  time.Time
	eof  bool
}

// pipe forwards src to dst with the added delay. When src ends cleanly it
// half-closes dst once everything before the end was delivered; on any
// error it ends the connection (closeBoth).
func (p *Proxy) pipe(ctx context.Context, dst, src *net.TCPConn, closeBoth func(bool)) {
	q := make(chan chunk, 256) // the bytes in flight; a full queue stops reading src
	var w sync.WaitGroup
	w.Add(1)
	go func() {
		defer w.Done()
		for {
			var c chunk
			select {
			case c = <-q:
			case <-ctx.Done():
				return
			}
			if d := time.Until(c.due); d > 0 {
				tm := time.NewTimer(d) // the delay itself
				select {
				case <-tm.C:
				case <-ctx.Done():
					tm.Stop()
					return
				}
			}
			if c.eof {
				_ = dst.CloseWrite()
				return
			}
			if _, err := dst.Write(c.data); err != nil {
				closeBoth(false)
				return
			}
			p.bytes.Add(uint64(len(c.data)))
		}
	}()
	defer w.Wait()
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 {
			select {
			case q <- chunk{data: buf[:n], due: time.Now().Add(p.opts.Delay)}:
			case <-ctx.Done():
				return
			}
		}
		if errors.Is(err, io.EOF) {
			select {
			case q <- chunk{eof: true, due: time.Now().Add(p.opts.Delay)}:
			case <-ctx.Done():
			}
			return
		}
		if err != nil {
			closeBoth(false)
			return
		}
	}
}
