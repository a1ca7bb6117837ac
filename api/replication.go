package api

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/replication"
)

// Replication is the writer's side of replication (replication.Source): the
// change log and checkpoints of the published state.
type Replication interface {
	OpenChanges(after uint64, maxBytes int) (*replication.ChangeStream, error)
	Checkpoint(ctx context.Context) (*replication.Checkpoint, error)
}

// ReplicaStatus is what a replica adds to GET /v1/tip and /readyz.
type ReplicaStatus struct {
	Seq, WriterSeq uint64
	LagBlocks      uint64
	LastContact    time.Duration // since the writer last answered; negative: never
}

// Errors of the replication endpoints.
var (
	errReplicationDisabled = errors.New("api: replication is disabled: no replication token is configured")
	// errReplicaServesNoLog: a replica's replication token is the one it
	// sends to its writer; it serves no change log or checkpoint itself.
	errReplicaServesNoLog = errors.New("api: this server is a read replica: it follows its writer " +
		"and serves no change log or checkpoints of its own; ask the writer")
)

// maxWaitChanges bounds a change-log long poll.
const maxWaitChanges = 30 * time.Second

// maxChangesBytes bounds one change-log answer (one change may exceed it).
// The answer is streamed from the store, not built: the bound is on what a
// replica takes in one go, not on the writer's memory.
const maxChangesBytes = 4 << 20

// authorizeReplication enforces the replication token: a replica (which
// has a token, to follow its writer, but no log of its own to serve) or no
// token configured → 403 replication_disabled, each saying which; two
// Authorization headers → 400; a wrong or missing bearer → 401.
func (a *API) authorizeReplication(c *gin.Context) error {
	if a.opts.ReadOnly {
		return errReplicaServesNoLog
	}
	if a.opts.ReplicationToken == "" || a.opts.Replication == nil {
		return errReplicationDisabled
	}
	return checkBearer(c, a.opts.ReplicationToken)
}

// bearerIs compares a bearer header with token in constant time.
func bearerIs(h, token string) bool {
	const prefix = "bearer " // the scheme is case-insensitive (RFC 9110 §11.1)
	return len(h) >= len(prefix) && strings.EqualFold(h[:len(prefix)], prefix) &&
		subtle.ConstantTimeCompare([]byte(h[len(prefix):]), []byte(token)) == 1
}

// getChanges answers GET /v1/replication/changes?after=S&wait=SECONDS: the
// published changes after S as a CBOR sequence (application/cbor-seq), at
// least one when any exists; with none, it waits up to wait seconds (at most
// 30) for one, then answers an empty 200. X-Commit-Seq and X-Tip-* give the
// published state the answer was read at (the writer's seq, for lag).
//
// The answer is written record by record from the store under the stall
// deadline (stallWriter), and only once the wait is over does it take one of
// the Source's stream slots: beyond them it is 429 too_many_requests, which
// a replica retries after a backoff.
func (a *API) getChanges(c *gin.Context) {
	if err := a.authorizeReplication(c); err != nil {
		a.fail(c, err)
		return
	}
	q, err := parseQuery(c.Request.URL.RawQuery, "after", paramWait)
	if err != nil {
		a.fail(c, err)
		return
	}
	raw, ok := q.lookup("after")
	if !ok {
		a.fail(c, fmt.Errorf("after is required: %w", chain.ErrInvalidArgument))
		return
	}
	after, err := parseDecimalUint64(raw)
	if err != nil {
		a.fail(c, fmt.Errorf("after %q is not a uint64: %w", raw, chain.ErrInvalidArgument))
		return
	}
	var wait time.Duration
	if s, ok := q.lookup(paramWait); ok {
		if wait, err = parseWait(s, maxWaitChanges); err != nil {
			a.fail(c, err)
			return
		}
	}
	if wait > 0 && a.r.Published().Seq == after {
		// Woken by the next publish, not by polling the store; cut short by
		// Drain (a stopping server), then answered with what there is.
		ctx, cancel := context.WithCancel(c.Request.Context())
		stopDrain := context.AfterFunc(a.drain, cancel)
		_, err := a.r.WaitFor(ctx, after+1, 0, wait)
		stopDrain()
		cancel()
		switch {
		case err == nil, errors.Is(err, query.ErrBehind), a.drain.Err() != nil:
		case c.Request.Context().Err() != nil:
			return // the replica hung up: nobody to answer
		default:
			a.fail(c, err)
			return
		}
	}
	cs, err := a.opts.Replication.OpenChanges(after, maxChangesBytes)
	if err != nil {
		a.fail(c, err)
		return
	}
	defer cs.Close()
	setTipHeaders(c.Writer.Header(), cs.Tip, cs.Seq)
	replication.WriterLimitsHeaders(c.Writer.Header(), a.opts.BlockLimits)
	c.Header("Content-Type", "application/cbor-seq")
	c.Status(http.StatusOK)
	sw := newStallWriter(c.Writer, a.opts.StallTimeout)
	n, err := cs.WriteTo(sw)
	switch {
	case err == nil:
		c.Writer.WriteHeaderNow() // an empty answer has written nothing yet
		sw.extend()
	case !c.Writer.Written():
		a.fail(c, err) // nothing is out yet: the answer can still be an error
	case sw.stalled:
		a.opts.Logger.Warn("change-log answer dropped: its reader stopped reading",
			"remote", c.Request.RemoteAddr, "after", after, "bytes_sent", n, "stall_timeout", a.opts.StallTimeout)
	default:
		// The status is out, the records before the failure whole: the
		// replica applies them and asks again from there.
		a.opts.Logger.Warn("change-log answer cut short", "remote", c.Request.RemoteAddr, "after", after, "bytes_sent", n, "err", err)
	}
}

// Drain ends the change-log long polls in flight, answering them at once
// with what they have (usually nothing), and keeps later ones from waiting.
// A stopping server calls it before http.Server.Shutdown, which waits for
// every request in flight: a replica's long poll would otherwise hold the
// writer's shutdown for its whole wait. Safe to call more than once.
func (a *API) Drain() { a.stopDrain() }

// getCheckpoint answers GET /v1/replication/checkpoint: a tar stream of a
// checkpoint of the published state, its figures in the headers, written
// under the stall deadline (stallWriter): a reader that stops reading is
// dropped within StallTimeout, and its slot and staged files freed.
func (a *API) getCheckpoint(c *gin.Context) {
	if err := a.authorizeReplication(c); err != nil {
		a.fail(c, err)
		return
	}
	if _, err := parseQuery(c.Request.URL.RawQuery); err != nil {
		a.fail(c, err)
		return
	}
	cp, err := a.opts.Replication.Checkpoint(c.Request.Context())
	if err != nil {
		a.fail(c, err)
		return
	}
	defer cp.Close()
	m := cp.Manifest
	h := c.Writer.Header()
	h.Set("X-Commit-Seq", strconv.FormatUint(m.Seq, 10))
	if m.Tip != nil {
		h.Set("X-Tip-Height", strconv.FormatUint(m.Tip.Height, 10))
		h.Set("X-Tip-Hash", m.Tip.Hash)
	}
	h.Set("X-Utxo-Count", strconv.FormatUint(m.UtxoCount, 10))
	h.Set("X-Utxo-Digest", m.Digest.String())
	// The store files' bytes, also listed in the archive's manifest: a
	// replica checks its free space before it reads anything.
	h.Set("X-Checkpoint-Bytes", strconv.FormatInt(m.StoreBytes(), 10))
	h.Set("Content-Type", "application/x-tar")
	c.Status(http.StatusOK)
	if c.Request.Method == http.MethodHead {
		return // the headers are the answer: no archive to build and drop
	}
	sw := newStallWriter(c.Writer, a.opts.StallTimeout)
	switch err := cp.Stream(sw); {
	case err == nil:
		sw.extend()
	case sw.stalled:
		// Returning frees the slot and the staged files (cp.Close).
		a.opts.Logger.Warn("checkpoint stream dropped: its reader stopped reading",
			"remote", c.Request.RemoteAddr, "seq", m.Seq, "stall_timeout", a.opts.StallTimeout)
	default:
		// The status is out: the client sees a truncated archive, which
		// its extraction refuses.
		a.opts.Logger.Warn("checkpoint stream failed", "remote", c.Request.RemoteAddr, "err", err)
	}
}

// replicationMember renders `"replication":{…}` for GET /v1/tip on a replica.
func replicationMember(st ReplicaStatus) []byte {
	last := int64(-1)
	if st.LastContact >= 0 {
		last = st.LastContact.Milliseconds()
	}
	return fmt.Appendf(nil, `"replication":{"seq":%d,"writer_seq":%d,"lag_blocks":%d,"last_contact_ms":%d}`,
		st.Seq, st.WriterSeq, st.LagBlocks, last)
}
