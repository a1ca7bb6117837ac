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

// getCall is one queued Get. The pipeline sets vals (entry, floor, global,
// marker) and need (the marker needed when the MGET was sent), or err, then
// closes done.
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
		need := t.need()
		if t.cluster {
			t.mgetByBucket(batch, need)
			continue
		}
		keys = keys[:0]
		for _, c := range batch {
			keys = append(keys, c.entry, c.floor)
		}
		b := &t.buckets[0]
		keys = append(keys, b.global, b.marker)
		cctx, cancel := context.WithTimeout(t.ctx, t.opts.CallTimeout)
		vals, err := t.mget(cctx, keys...).Result()
		cancel()
		<-t.slots
		switch {
		case err != nil:
			t.counters.errGet.Add(uint64(len(batch) - 1)) // failed counts one
			t.failed(t.ctx, opGet, err)
			finishGets(batch, err)
			continue
		case len(vals) != len(keys):
			// A protocol surprise, not an outage: misses, counted.
			t.counters.errGet.Add(uint64(len(batch)))
			finishGets(batch, errShortReply)
			continue
		}
		for i, c := range batch {
			c.vals = [4]any{vals[2*i], vals[2*i+1], vals[len(vals)-2], vals[len(vals)-1]}
			c.need = need
			close(c.done)
		}
	}
}

// mgetByBucket answers batch on a cluster, where one MGET must stay in one
// slot: one MGET per bucket of the batch (its calls' entries and floors,
// then the bucket's global floor and marker), all in one pipeline, which
// go-redis sends to each bucket's master at once. It releases the slot
// taken for the batch.
func (t *Tier) mgetByBucket(batch []*getCall, need uint64) {
	byBucket := make(map[int][]*getCall, len(batch))
	for _, c := range batch {
		byBucket[c.bucket] = append(byBucket[c.bucket], c)
	}
	cctx, cancel := context.WithTimeout(t.ctx, t.opts.CallTimeout)
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
		t.counters.errGet.Add(uint64(len(batch) - 1)) // failed counts one
		t.failed(t.ctx, opGet, err)
		finishGets(batch, err)
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
			continue
		case len(vals) != g.keys:
			t.counters.errGet.Add(uint64(len(g.calls)))
			finishGets(g.calls, errShortReply)
			continue
		}
		for i, c := range g.calls {
			c.vals = [4]any{vals[2*i], vals[2*i+1], vals[len(vals)-2], vals[len(vals)-1]}
			c.need = need
			close(c.done)
		}
	}
}

// finishGets answers every call of batch with err (a miss).
func finishGets(batch []*getCall, err error) {
	for _, c := range batch {
		c.err = err
		close(c.done)
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
