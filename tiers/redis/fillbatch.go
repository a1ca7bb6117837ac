package redis

import (
	"context"
	"strconv"

	"github.com/utxo-cache/utxo-cache/cache"
)

// Fills off the read path. SetAsync queues a fill and returns; a few fill
// goroutines take every fill waiting and send them as one pipeline of
// setScript calls. A reader that computed an answer from the disk thus
// answers without waiting for Redis, and many fills share a round trip.
//
// Safety does not depend on when a fill runs: setScript compares the entry's
// Seq with its guard's floor, the global floor and the marker when Redis
// executes it, the same check a synchronous Set makes, so a fill that
// arrives after the invalidation of its guard (or after an outage's
// fencing) is refused. A full queue drops the fill (counted): Set is best
// effort.
//
// Bounds: the queue holds at most fillQueue fills and fillQueueBytes of
// bodies; a batch carries at most maxFillBatch fills and maxFillBatchBytes
// (one larger fill goes alone), so that it fits the CallTimeout that bounds
// a single call.
const (
	fillPipelines     = 2
	maxFillBatch      = 64
	maxFillBatchBytes = 1 << 20
	fillQueue         = 4096
	fillQueueBytes    = 64 << 20
)

type fillCall struct {
	key, guard string
	e          cache.Entry // Body is shared, never written
}

func (t *Tier) startFillPipelines() {
	t.fills = make(chan fillCall, fillQueue)
	for range fillPipelines {
		t.pipes.Go(t.fillPipeline)
	}
}

// SetAsync stores e like Set, later: it queues the fill and returns at once.
// query.Server uses it for fills when the tier offers it.
func (t *Tier) SetAsync(key, guard string, e cache.Entry) {
	if !t.up.Load() {
		return
	}
	size := int64(len(e.Body))
	if t.fillBytes.Add(size) > fillQueueBytes {
		t.fillBytes.Add(-size)
		t.counters.fillsDropped.Add(1)
		return
	}
	select {
	case t.fills <- fillCall{key, guard, e}:
	default:
		t.fillBytes.Add(-size)
		t.counters.fillsDropped.Add(1)
	}
}

func (t *Tier) fillPipeline() {
	batch := make([]fillCall, 0, maxFillBatch)
	var next *fillCall // taken from the queue, for the next batch
	for {
		if next != nil {
			batch = append(batch[:0], *next)
			next = nil
		} else {
			select {
			case c := <-t.fills:
				batch = append(batch[:0], c)
			case <-t.ctx.Done():
				return
			}
		}
		bytes := len(batch[0].e.Body)
	more:
		for len(batch) < maxFillBatch {
			select {
			case c := <-t.fills:
				if bytes+len(c.e.Body) > maxFillBatchBytes {
					next = &c
					break more
				}
				bytes += len(c.e.Body)
				batch = append(batch, c)
			default:
				break more
			}
		}
		t.fillBytes.Add(-int64(bytes))
		if t.up.Load() {
			t.runFills(batch)
		} else {
			t.counters.fillsDropped.Add(uint64(len(batch))) // degraded meanwhile
		}
		clear(batch) // drop the bodies
	}
}

// runFills sends batch as one pipeline of setScript calls (again with the
// script text after a Redis restart: NOSCRIPT) and counts the outcomes as
// set does.
func (t *Tier) runFills(batch []fillCall) {
	ctx, cancel := context.WithTimeout(t.ctx, t.opts.CallTimeout)
	defer cancel()
	calls := make([]scriptCall, len(batch))
	for i := range batch {
		c := &batch[i]
		buf := appendEntry(make([]byte, 0, entryHeaderMax+len(c.e.ETag)+len(c.e.Body)), &c.e)
		calls[i] = scriptCall{
			keys: t.fillKeys(c.key, c.guard),
			args: []any{strconv.FormatUint(c.e.Seq, 10), buf, t.ttlMillis},
		}
	}
	cmds, err := t.runPipelined(ctx, setScript, calls)
	if err != nil {
		t.counters.errSet.Add(uint64(len(batch) - 1)) // failed counts one
		t.failed(t.ctx, opSet, err)
		return
	}
	for i, cmd := range cmds {
		res, _ := cmd.Int64()
		if t.filled(res, batch[i].e.Seq) == fillFailed {
			return
		}
	}
}
