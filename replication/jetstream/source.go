package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/replication"
)

// Batch bounds of a Source: at most this many changes, and this many bytes
// of them (at least one change), in one batch handed to the Tail.
const (
	maxBatch      = 64
	maxBatchBytes = 8 << 20
	// minWait is the shortest wait for a change: a Tail that asks without
	// waiting (until its first contact) polls no faster than this.
	minWait = 100 * time.Millisecond
	// stallWait is the shortest wait after which a consumer that delivered
	// nothing while the stream held its next message is recreated.
	stallWait = time.Second
	// consumerHeartbeat is how often an idle consumer's server says it is
	// there; two missed, and the consumer's read fails (its server is out
	// of reach) and the Source reads from the stream's leader.
	consumerHeartbeat = 2 * time.Second
	// consumerTimeout bounds the creation and the deletion of a consumer:
	// nats-server may place a consumer on a server that the replica's own
	// server cannot reach, and then never answers the creation.
	consumerTimeout = 5 * time.Second
	// consumerIdle is how long a consumer the Source lost track of (its
	// deletion failed) outlives its last read on the server.
	consumerIdle = time.Minute
)

// Source is a replication.ChangeSource over a writer's stream and
// checkpoint bucket (see the package doc). Changes and Checkpoint are called
// from one goroutine at a time (a Tail's, then a bootstrap's); Close from
// any.
//
// # What it checks
//
// Stream message S holds change S. The Source consumes from the message
// after the replica's seq with a consumer of its own (ephemeral, one
// replica, in memory, no acks), which it replaces, from where it was, when
// the consumer fails, skips a message or stalls; meanwhile it reads what
// the writer announced from the stream's leader. A message the stream no
// longer holds means the stream lost changes the replica needs, which it
// reports as replication.ErrLogTruncated, as the writer's 410. Everything
// else (that the change at S is change S, that it applies and leaves the
// writer's figures) is the Tail's verification.
type Source struct {
	opts   Options
	nc     *nats.Conn
	js     jetstream.JetStream
	sub    *nats.Subscription
	limits replication.LimitsLog

	mu struct {
		sync.Mutex
		seq, height uint64    // the writer's, from its last status
		streamSeq   uint64    // the stream's last message, from the same
		heard       time.Time // when; zero: never
	}

	// The consumer (one goroutine at a time).
	bodies   jetstream.ObjectStore // the change objects; nil: not opened yet
	it       jetstream.MessagesContext
	consumer string // its name, to delete it once stopped
	next     uint64 // the stream sequence it delivers next
	deleting sync.WaitGroup
}

// NewSource connects to opts.URLs and listens to the writer's status. It
// returns at once: servers that are down are retried in the background.
func NewSource(opts Options) (*Source, error) {
	opts = opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	nc, err := opts.connect("replica")
	if err != nil {
		return nil, fmt.Errorf("jetstream: connect: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	s := &Source{opts: opts, nc: nc, js: js, limits: replication.LimitsLog{Logger: opts.Logger}}
	s.sub, err = nc.Subscribe(opts.statusSubject(), s.status)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: subscribe: %w", err)
	}
	return s, nil
}

// status records the writer's announced state.
func (s *Source) status(msg *nats.Msg) {
	seq, err := strconv.ParseUint(msg.Header.Get(headerSeq), 10, 64)
	if err != nil {
		return
	}
	height, _ := strconv.ParseUint(msg.Header.Get(headerHeight), 10, 64)
	streamSeq, _ := strconv.ParseUint(msg.Header.Get(headerStreamSeq), 10, 64)
	s.mu.Lock()
	s.mu.seq, s.mu.height, s.mu.streamSeq, s.mu.heard = seq, height, streamSeq, time.Now()
	s.mu.Unlock()
}

// Close stops the consumer and closes the connection.
func (s *Source) Close() {
	s.stopConsumer()
	s.deleting.Wait()
	s.nc.Close()
}

// stopConsumer stops the consumer and deletes it from the stream in the
// background (within consumerTimeout; past it, the server drops the
// consumer after consumerIdle).
func (s *Source) stopConsumer() {
	if s.it != nil {
		s.it.Stop()
		s.it = nil
	}
	if s.consumer == "" {
		return
	}
	name := s.consumer
	s.consumer = ""
	s.deleting.Add(1)
	go func() {
		defer s.deleting.Done()
		ctx, cancel := context.WithTimeout(context.Background(), consumerTimeout)
		defer cancel()
		_ = s.js.DeleteConsumer(ctx, s.opts.stream(), name)
	}()
}

// Changes implements replication.ChangeSource. Its errors, but for those
// that make the replica bootstrap again and a ctx that ended, match
// replication.ErrRelayFailed: the stream failed, not the writer.
func (s *Source) Changes(ctx context.Context, req replication.ChangesRequest) (*replication.ChangeBatch, error) {
	batch, err := s.changes(ctx, req)
	if err != nil && ctx.Err() == nil && !errors.Is(err, replication.ErrNeedBootstrap) {
		return nil, fmt.Errorf("%w: %w", replication.ErrRelayFailed, err)
	}
	return batch, err
}

// changes is Changes, its errors unmarked.
func (s *Source) changes(ctx context.Context, req replication.ChangesRequest) (*replication.ChangeBatch, error) {
	batch := &replication.ChangeBatch{Relayed: true}
	var lastChange *chain.Change
	if s.it == nil || s.next != req.After+1 {
		if err := s.start(ctx, req.After+1); err != nil {
			if err := s.fromLeader(ctx, err, req, batch, &lastChange); err != nil {
				return nil, err
			}
			return s.finish(batch, lastChange), nil
		}
	}
	wait := max(req.Wait, minWait)
	s.mu.Lock()
	held := s.mu.streamSeq // what the stream held, as the writer last said
	s.mu.Unlock()
	for len(batch.Changes) < maxBatch && batch.Bytes < maxBatchBytes && batch.DecodeErr == nil {
		msg, err := s.nextMsg(ctx, wait)
		if err != nil {
			s.stopConsumer()
			if err := s.fromLeader(ctx, err, req, batch, &lastChange); err != nil {
				return nil, err
			}
			break
		}
		if msg == nil {
			if len(batch.Changes) == 0 && wait >= stallWait && held >= s.next {
				// The stream held the next message before this wait began,
				// and the consumer delivered nothing for all of it: it is
				// stalled. Either its server lost, then regained, its
				// cluster and the consumer did not notice, or the consumer
				// was placed on a server whose copy of the stream stopped
				// short of it (a server that was cut off and has not caught
				// up). What the writer said the stream holds is read from
				// the stream's leader, and the next call creates a new
				// consumer after it.
				s.opts.Logger.Info("the stream has changes its consumer does not deliver: reading them from the stream's leader and recreating the consumer",
					"next", s.next, "stream_seq", held, "waited", wait)
				s.stopConsumer()
				if err := s.readLeader(ctx, held, req, batch, &lastChange); err != nil {
					return nil, err
				}
			}
			break // the wait passed
		}
		meta, err := msg.Metadata()
		if err != nil {
			s.stopConsumer()
			return nil, fmt.Errorf("stream message: %w", err)
		}
		if got := meta.Sequence.Stream; got < s.next {
			// A consumer asked to start beyond a stream's end may start at
			// its end: changes the replica has.
			continue
		} else if got > s.next {
			// The stream no longer holds s.next, or the consumer lost the
			// messages between (a pull whose answer was lost with its
			// connection: the consumer takes no acks). The leader tells
			// which.
			s.stopConsumer()
			if err := s.fromLeader(ctx, fmt.Errorf("stream %s: the consumer's next message after %d is %d", s.opts.stream(), s.next-1, got), req, batch, &lastChange); err != nil {
				return nil, err
			}
			break
		}
		if err := s.take(ctx, meta.Sequence.Stream, msg.Headers(), msg.Data(), req, batch, &lastChange); err != nil {
			s.stopConsumer()
			return nil, err
		}
		batch.WriterSeq = max(batch.WriterSeq, meta.Sequence.Stream+meta.NumPending)
		if meta.NumPending == 0 {
			break // nothing more for now: apply these
		}
		wait = ackTimeout // already in the stream: on its way
	}
	return s.finish(batch, lastChange), nil
}

// finish completes batch, whose last change is last (nil: none), with what
// the writer last announced: when, and its seq and height.
func (s *Source) finish(batch *replication.ChangeBatch, last *chain.Change) *replication.ChangeBatch {
	s.mu.Lock()
	batch.Heard = s.mu.heard
	writerSeq, writerHeight := s.mu.seq, s.mu.height
	s.mu.Unlock()
	switch {
	case writerSeq > batch.WriterSeq:
		batch.WriterSeq, batch.WriterHeight = writerSeq, writerHeight
	case last != nil && last.Seq >= writerSeq:
		batch.WriterHeight = last.After.Tip.Height
	default:
		batch.WriterHeight = writerHeight
	}
	return batch
}

// fromLeader adds to batch, when the consumer failed (cause: it could not
// be created, or its Next failed), the changes the writer has announced
// since, read from the stream's leader: nats-server places a replica's
// consumer on any server of the stream, one the replica's own server cannot
// reach among them, and the replica then follows through the leader until
// a new consumer lands where it can be reached. It returns cause when there
// is nothing to read (the writer announced nothing past the batch, the
// replica must bootstrap, or ctx ended), and both errors when the leader
// does not answer either.
func (s *Source) fromLeader(ctx context.Context, cause error, req replication.ChangesRequest, batch *replication.ChangeBatch, last **chain.Change) error {
	if errors.Is(cause, replication.ErrNeedBootstrap) || ctx.Err() != nil {
		return cause
	}
	s.mu.Lock()
	held := s.mu.streamSeq // now: the consumer is out of the way
	s.mu.Unlock()
	if held < s.next {
		if len(batch.Changes) > 0 || batch.DecodeErr != nil {
			return nil // what the consumer delivered; the next call starts a new one
		}
		return cause
	}
	s.opts.Logger.Warn("the stream's consumer failed: reading the changes from the stream's leader",
		"next", s.next, "stream_seq", held, "err", cause)
	if err := s.readLeader(ctx, held, req, batch, last); err != nil {
		return fmt.Errorf("%w; reading from the stream's leader: %w", cause, err)
	}
	return nil
}

// take adds stream message seq (the next one, s.next), of headers hdr and
// data, to batch, and moves s.next past it. A record that is not what the
// writer publishes ends the batch as a change that does not decode.
func (s *Source) take(ctx context.Context, seq uint64, hdr nats.Header, data []byte, req replication.ChangesRequest, batch *replication.ChangeBatch, last **chain.Change) error {
	s.next++
	if len(batch.Changes) == 0 && req.Coming != nil && seq > req.Published {
		req.Coming()
	}
	lim := replication.LimitsFrom(req.Limits, hdr.Get)
	s.limits.Note(req.Limits, lim)
	rec, err := s.body(ctx, hdr, data, seq, lim)
	if errors.Is(err, errBody) {
		batch.DecodeErr = err // not what the writer publishes: as a change that does not decode
	} else if err != nil {
		return err
	}
	n := len(batch.Changes)
	if batch.DecodeErr == nil {
		replication.DecodeChanges(rec, lim, batch)
	}
	if len(batch.Changes) != n+1 && batch.DecodeErr == nil {
		batch.DecodeErr = fmt.Errorf("stream message %d holds %d changes, not one", seq, len(batch.Changes)-n)
	}
	batch.Bytes += len(rec)
	if len(batch.Changes) > n {
		*last = batch.Changes[len(batch.Changes)-1]
	}
	return nil
}

// readLeader adds to batch the stream messages from s.next through held
// (at most a batch), each asked of the stream's leader by its sequence: the
// messages a stalled consumer did not deliver.
func (s *Source) readLeader(ctx context.Context, held uint64, req replication.ChangesRequest, batch *replication.ChangeBatch, last **chain.Change) error {
	st, err := s.js.Stream(ctx, s.opts.stream())
	if err != nil {
		return fmt.Errorf("stream %s: %w", s.opts.stream(), err)
	}
	for s.next <= held && len(batch.Changes) < maxBatch && batch.Bytes < maxBatchBytes && batch.DecodeErr == nil {
		seq := s.next
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("the stream no longer holds message %d: %w: %w", seq, replication.ErrNeedBootstrap, replication.ErrLogTruncated)
		}
		if err != nil {
			return fmt.Errorf("stream %s: message %d: %w", s.opts.stream(), seq, err)
		}
		if m.Sequence != seq {
			return fmt.Errorf("stream %s: asked for message %d, got %d", s.opts.stream(), seq, m.Sequence)
		}
		if err := s.take(ctx, seq, m.Header, m.Data, req, batch, last); err != nil {
			return err
		}
		batch.WriterSeq = max(batch.WriterSeq, held)
	}
	return nil
}

// body returns the record of stream message seq, of headers hdr and data:
// its data, or the object a pointer names (see body.go), checked against
// the pointer.
func (s *Source) body(ctx context.Context, hdr nats.Header, data []byte, seq uint64, lim chain.Limits) ([]byte, error) {
	ref, ok, err := parsePointer(hdr.Get, seq, len(data), maxRecordBytes(lim))
	if err != nil || !ok {
		return data, err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*ackTimeout)
	defer cancel()
	if s.bodies == nil {
		obs, err := s.js.ObjectStore(ctx, s.opts.changesBucket())
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, fmt.Errorf("change %d is in bucket %s, which is gone: %w: %w", seq, s.opts.changesBucket(), replication.ErrNeedBootstrap, replication.ErrLogTruncated)
		}
		if err != nil {
			return nil, fmt.Errorf("bucket %s: %w", s.opts.changesBucket(), err)
		}
		s.bodies = obs
	}
	return readBody(ctx, s.bodies, ref)
}

// nextMsg waits up to wait for the consumer's next message (nil, nil when
// the wait passes). It fails when the consumer's heartbeats stop (its
// server is out of reach) or the consumer is gone.
func (s *Source) nextMsg(ctx context.Context, wait time.Duration) (jetstream.Msg, error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	msg, err := s.it.Next(jetstream.NextContext(wctx))
	if err != nil {
		if ctx.Err() == nil && wctx.Err() != nil {
			return nil, nil
		}
		return nil, fmt.Errorf("stream %s: %w", s.opts.stream(), err)
	}
	return msg, nil
}

// start (re)creates the consumer at stream message next, after checking
// that the stream still holds it.
func (s *Source) start(ctx context.Context, next uint64) error {
	s.stopConsumer()
	s.next = next
	st, err := s.js.Stream(ctx, s.opts.stream())
	if err != nil {
		return fmt.Errorf("stream %s: %w", s.opts.stream(), err)
	}
	info := st.CachedInfo().State
	if info.FirstSeq > next {
		return fmt.Errorf("the stream starts at change %d, after %d: %w: %w", info.FirstSeq, next-1, replication.ErrNeedBootstrap, replication.ErrLogTruncated)
	}
	start := next
	if s.opts.consumerStart != nil {
		start = s.opts.consumerStart(next)
	}
	cctx, cancel := context.WithTimeout(ctx, consumerTimeout)
	defer cancel()
	c, err := s.js.CreateConsumer(cctx, s.opts.stream(), jetstream.ConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start,
		AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: consumerIdle,
		Replicas: 1, MemoryStorage: true,
	})
	if err != nil {
		return fmt.Errorf("stream %s: consumer: %w", s.opts.stream(), err)
	}
	s.consumer = c.CachedInfo().Name // from here on, stopConsumer deletes it
	it, err := c.Messages(jetstream.PullMaxMessagesWithBytesLimit(maxBatch, maxBatchBytes),
		jetstream.PullHeartbeat(consumerHeartbeat), jetstream.WithMessagesErrOnMissingHeartbeat(true))
	if err != nil {
		s.stopConsumer()
		return fmt.Errorf("stream %s: consumer: %w", s.opts.stream(), err)
	}
	s.it = it
	if s.opts.consumerFault != nil {
		if err := s.opts.consumerFault(it); err != nil {
			s.stopConsumer()
			return fmt.Errorf("stream %s: consumer: %w", s.opts.stream(), err)
		}
	}
	return nil
}

// Checkpoint implements replication.ChangeSource: the newest checkpoint of
// the bucket.
func (s *Source) Checkpoint(ctx context.Context) (*replication.CheckpointDownload, error) {
	obs, err := s.js.ObjectStore(ctx, s.opts.bucket())
	if err != nil {
		return nil, fmt.Errorf("checkpoint bucket %s: %w", s.opts.bucket(), err)
	}
	names, err := checkpoints(ctx, obs)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("checkpoint bucket %s: no checkpoint yet", s.opts.bucket())
	}
	res, err := obs.Get(ctx, names[len(names)-1].name)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", names[len(names)-1].name, err)
	}
	info, err := res.Info()
	if err != nil {
		_ = res.Close()
		return nil, fmt.Errorf("checkpoint %s: %w", names[len(names)-1].name, err)
	}
	want, err := replication.ManifestFromHeaders(info.Headers.Get)
	if err != nil {
		_ = res.Close()
		return nil, err
	}
	size := int64(-1)
	if v := info.Headers.Get(headerBytes); v != "" {
		if size, err = strconv.ParseInt(v, 10, 64); err != nil || size < 0 {
			_ = res.Close()
			return nil, fmt.Errorf("checkpoint header %s %q: %w", headerBytes, v, replication.ErrBadArchive)
		}
	}
	return &replication.CheckpointDownload{Body: res, Want: want, Bytes: size}, nil
}

// RequestCheckpoint asks the writer for a checkpoint above seq (a replica
// that already served seq cannot go back to an older one). The writer takes
// one when it has passed seq, at most once per tenth of its checkpoint
// interval.
func (s *Source) RequestCheckpoint(seq uint64) {
	msg := nats.NewMsg(s.opts.requestSubject())
	msg.Header.Set(headerMinSeq, strconv.FormatUint(seq, 10))
	_ = s.nc.PublishMsg(msg)
}
