package redis

import (
	"context"
	"errors"

	goredis "github.com/redis/go-redis/v9"

	"github.com/utxo-cache/utxo-cache/cache"
)

// Concurrent Gets are coalesced. At most getPipelines MGETs are in flight
// (a semaphore of slots). A Get that finds a free slot sends its own MGET at
// once, on its own goroutine: an idle tier costs one round trip and no
// goroutine hand-off. A Get that finds every slot taken queues its call; a
// few pipeline goroutines take every call waiting, wait for a slot, and send
// them as one MGET (entry and guard floor of each call, then the global
// floor and the marker once). Under load one round trip and one Redis
// command serve many reads, which is most of the cost of a Redis hit on a
// small machine (two syscalls on each side per round trip). Every read is judged exactly as
// before, against its own floor and the global floor and marker of the same
// reply, so the guard invariant does not depend on how calls are grouped.
//
// Bounds: a Get waits at most CallTimeout in all (a full queue is a miss at
// once), and a batch holds at most maxGetBatch calls, so that one batch's
// replies (pages of up to a few hundred KiB each) still fit the same
// CallTimeout that bounds a single call.
const (
	getPipelines = 4  // concurrent MGETs in flight
	maxGetBatch  = 32 // calls per MGET
	getQueue     = 1024
)

// getCall is one queued Get, or one key of GetMany. The sender sets vals
// (entry, floor, global, marker) and need (the marker needed when the MGET
// was sent), or err, then closes done (a queued Get's; GetMany's calls have
// none: their sender is their reader).
type getCall struct {
	entry, floor string
	bucket       int
	vals         [4]any
	need         uint64
	err          error
	done         chan struct{}
}

// startGetPipelines starts the goroutines that serve t.gets until t.ctx ends.
func (t *Tier) startGetPipelines() {
	t.gets = make(chan *getCall, getQueue)
	t.slots = make(chan struct{}, getPipelines)
	for range getPipelines {
		t.pipes.Go(t.getPipeline)
	}
}

func (t *Tier) getPipeline() {
	batch := make([]*getCall, 0, maxGetBatch)
	keys := make([]string, 0, 2*maxGetBatch+2)
	for {
		clear(batch) // drop the last batch's calls and their replies
		select {
		case c := <-t.gets:
			batch = append(batch[:0], c)
		case <-t.ctx.Done():
			return
		}
		select {
		case t.slots <- struct{}{}:
		case <-t.ctx.Done():
			finishGets(batch, ErrClosed)
			return
		}
		if !t.up.Load() {
			// Degraded meanwhile: a degraded tier does not touch the network.
			<-t.slots
			finishGets(batch, errDegraded)
			continue
		}
	more:
		for len(batch) < maxGetBatch {
			select {
			case c := <-t.gets:
				batch = append(batch, c)
			default:
				break more
			}
		}
		t.mgetCalls(t.ctx, batch, t.need(), &keys)
	}
}

// mgetCalls answers calls, whose slot the caller took, and releases it.
// Each call gets its entry, its guard's floor and its MGET's global floor
// and marker (judged later against need, the marker needed when they were
// sent), or an error: a miss. On a single server the calls go in one MGET
// (keys is its reused key slice); on a cluster, where one MGET must stay in
// one slot, in one MGET per bucket (its calls' entries and floors, then
// the bucket's global floor and marker), all in one pipeline, which
// go-redis sends to each bucket's master at once.
func (t *Tier) mgetCalls(ctx context.Context, calls []*getCall, need uint64, keys *[]string) {
	if !t.cluster {
		ks := (*keys)[:0]
		for _, c := range calls {
			ks = append(ks, c.entry, c.floor)
		}
		b := &t.buckets[0]
		ks = append(ks, b.global, b.marker)
		*keys = ks
		cctx, cancel := context.WithTimeout(ctx, t.opts.CallTimeout)
		vals, err := t.mget(cctx, ks...).Result()
		cancel()
		<-t.slots
		switch {
		case err != nil:
			t.counters.errGet.Add(uint64(len(calls) - 1)) // failed counts one
			t.failed(ctx, opGet, err)
			finishGets(calls, err)
		case len(vals) != len(ks):
			// A protocol surprise, not an outage: misses, counted.
			t.counters.errGet.Add(uint64(len(calls)))
			finishGets(calls, errShortReply)
		default:
			answerGets(calls, vals, need)
		}
		return
	}
	byBucket := make(map[int][]*getCall, len(calls))
	for _, c := range calls {
		byBucket[c.bucket] = append(byBucket[c.bucket], c)
	}
	cctx, cancel := context.WithTimeout(ctx, t.opts.CallTimeout)
	pipe := t.rdb.Pipeline()
	type group struct {
		calls []*getCall
		cmd   *goredis.SliceCmd
		keys  int
	}
	groups := make([]group, 0, len(byBucket))
	for bi, calls := range byBucket {
		keys := make([]string, 0, 2*len(calls)+2)
		for _, c := range calls {
			keys = append(keys, c.entry, c.floor)
		}
		b := &t.buckets[bi]
		keys = append(keys, b.global, b.marker)
		groups = append(groups, group{calls: calls, cmd: pipe.MGet(cctx, keys...), keys: len(keys)})
	}
	_, err := pipe.Exec(cctx)
	cancel()
	<-t.slots
	if err != nil && !isReply(err) {
		t.counters.errGet.Add(uint64(len(calls) - 1)) // failed counts one
		t.failed(ctx, opGet, err)
		finishGets(calls, err)
		return
	}
	for _, g := range groups {
		vals, err := g.cmd.Result()
		switch {
		case err != nil:
			// A reply error (TRYAGAIN while the bucket's slot migrates,
			// CLUSTERDOWN): misses, counted.
			t.counters.errGet.Add(uint64(len(g.calls)))
			finishGets(g.calls, err)
		case len(vals) != g.keys:
			t.counters.errGet.Add(uint64(len(g.calls)))
			finishGets(g.calls, errShortReply)
		default:
			answerGets(g.calls, vals, need)
		}
	}
}

// answerGets gives each call its entry and floor from vals, an MGET's reply
// to the calls' keys in order followed by the global floor and the marker.
func answerGets(calls []*getCall, vals []any, need uint64) {
	for i, c := range calls {
		c.vals = [4]any{vals[2*i], vals[2*i+1], vals[len(vals)-2], vals[len(vals)-1]}
		c.need = need
		c.finish()
	}
}

func (c *getCall) finish() {
	if c.done != nil {
		close(c.done)
	}
}

// finishGets answers every call of batch with err (a miss).
func finishGets(batch []*getCall, err error) {
	for _, c := range batch {
		c.err = err
		c.finish()
	}
}

// coalescedGet queues one Get and waits for its reply, the caller's ctx, or
// the tier's end.
func (t *Tier) coalescedGet(ctx context.Context, key, guard string) (cache.Entry, bool) {
	bi := t.bucketOf(guard)
	b := &t.buckets[bi]
	entry, floor := b.entry+key, b.floor+guard
	select {
	case t.slots <- struct{}{}: // a free slot: no queue, no hand-off
		need := t.need()
		cctx, cancel := context.WithTimeout(ctx, t.opts.CallTimeout)
		vals, err := t.mget(cctx, entry, floor, b.global, b.marker).Result()
		cancel()
		<-t.slots
		if err != nil {
			t.failed(ctx, opGet, err)
			return cache.Entry{}, false
		}
		return t.judge(vals, need)
	default:
	}
	c := &getCall{entry: entry, floor: floor, bucket: bi, done: make(chan struct{})}
	select {
	case t.gets <- c:
		t.counters.coalesced.Add(1)
	default: // the queue is full: the tier is overloaded, read the disk
		return cache.Entry{}, false
	}
	wctx, cancel := context.WithTimeout(ctx, t.opts.CallTimeout)
	defer cancel()
	select {
	case <-c.done:
	case <-wctx.Done(): // the caller gave up, or CallTimeout passed
		return cache.Entry{}, false
	case <-t.ctx.Done():
		return cache.Entry{}, false
	}
	if c.err != nil {
		return cache.Entry{}, false
	}
	return t.judge(c.vals[:], c.need)
}

// GetMany looks up keys[i] under guards[i] for every i, as Get does, in one
// round trip: the keys' entries and guard floors with the global floor and
// the marker in one MGET (on a cluster, one MGET per bucket, in one
// pipeline), each entry judged against its own floor and the global floor
// and marker of the same reply. It sets out[i] and hit[i] (len(keys) each).
// It does not queue behind single Gets: a batch is one reader's whole need,
// sent at once when one of the getPipelines slots is free, and counted a
// miss for every key when none frees within CallTimeout.
func (t *Tier) GetMany(ctx context.Context, keys, guards []string, out []cache.Entry, hit []bool) {
	clear(hit)
	if !t.up.Load() {
		t.counters.misses.Add(uint64(len(keys)))
		return
	}
	calls := make([]getCall, len(keys))
	ptrs := make([]*getCall, len(keys))
	for i := range keys {
		bi := t.bucketOf(guards[i])
		b := &t.buckets[bi]
		calls[i] = getCall{entry: b.entry + keys[i], floor: b.floor + guards[i], bucket: bi}
		ptrs[i] = &calls[i]
	}
	wctx, cancel := context.WithTimeout(ctx, t.opts.CallTimeout)
	select {
	case t.slots <- struct{}{}:
		cancel()
	case <-wctx.Done():
		cancel()
		t.counters.misses.Add(uint64(len(keys)))
		return
	}
	var scratch []string
	t.mgetCalls(ctx, ptrs, t.need(), &scratch)
	hits := 0
	for i := range calls {
		c := &calls[i]
		if c.err != nil {
			continue
		}
		if out[i], hit[i] = t.judge(c.vals[:], c.need); hit[i] {
			hits++
		}
	}
	t.counters.hits.Add(uint64(hits))
	t.counters.misses.Add(uint64(len(keys) - hits))
}

// isReply reports whether err is an error Redis replied with (not the
// network's).
func isReply(err error) bool {
	var reply goredis.Error
	return errors.As(err, &reply)
}

// mget is MGET on the concrete client: through the UniversalClient
// interface the compiler cannot see that the key slice stays on the stack,
// and every Get would allocate it.
func (t *Tier) mget(ctx context.Context, keys ...string) *goredis.SliceCmd {
	if t.cluster {
		return t.rdb.(*goredis.ClusterClient).MGet(ctx, keys...)
	}
	return t.rdb.(*goredis.Client).MGet(ctx, keys...) // a single server, or Sentinel's failover client
}
