package redis

import (
	"context"

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
		keys = keys[:0]
		for _, c := range batch {
			keys = append(keys, c.entry, c.floor)
		}
		keys = append(keys, t.globalKey, t.markerKey)
		need := t.need()
		cctx, cancel := context.WithTimeout(t.ctx, t.opts.CallTimeout)
		vals, err := t.rdb.MGet(cctx, keys...).Result()
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
	entry, floor := t.entryPrefix+key, t.floorPrefix+guard
	select {
	case t.slots <- struct{}{}: // a free slot: no queue, no hand-off
		need := t.need()
		cctx, cancel := context.WithTimeout(ctx, t.opts.CallTimeout)
		vals, err := t.rdb.MGet(cctx, entry, floor, t.globalKey, t.markerKey).Result()
		cancel()
		<-t.slots
		if err != nil {
			t.failed(ctx, opGet, err)
			return cache.Entry{}, false
		}
		return t.judge(vals, need)
	default:
	}
	c := &getCall{entry: entry, floor: floor, done: make(chan struct{})}
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
