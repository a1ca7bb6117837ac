package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
)

// ChangeSource is where a replica reads its writer's changes (Tail) and
// checkpoints (Bootstrap): the writer's own HTTP endpoints (the default,
// built from TailOptions.URL), or a log that fans them out to many replicas
// (package replication/jetstream). A source only carries what the writer
// wrote; everything a replica promises (each change verified before it is
// published, divergence, read-your-writes, monotonic reads) is the Tail's,
// whatever the source. Its methods are called from one goroutine at a time.
type ChangeSource interface {
	// Changes returns the writer's changes after seq req.After, in order:
	// at least one when any exists within req.Wait, at most the source's
	// own bound of them, and none when the wait passed without one. Its
	// errors: one matching ErrNeedBootstrap and ErrLogTruncated when a
	// change after req.After is no longer kept, ErrNeedBootstrap and
	// ErrAhead when req.After is beyond the writer's state, ErrBusy when
	// the source is up but refuses more readers for now, ErrRelayFailed
	// when a source that relays the writer's changes cannot read them from
	// the relay (the writer itself may be up); any other error is an
	// outage of the writer. The Tail retries all but those matching
	// ErrNeedBootstrap.
	Changes(ctx context.Context, req ChangesRequest) (*ChangeBatch, error)
	// Checkpoint opens a checkpoint of a state of the writer's, with the
	// figures of the state it announces; the caller closes its Body. A
	// ctx that ends aborts the download (the idle timeout of Bootstrap).
	Checkpoint(ctx context.Context) (*CheckpointDownload, error)
}

// ErrRelayFailed marks an error of a ChangeSource that relays the writer's
// changes (package replication/jetstream) rather than asking the writer:
// the relay did not deliver them, and nothing is known of the writer. The
// Tail retries, as for any outage, and says the relay failed.
var ErrRelayFailed = errors.New("replication: the change relay failed")

// ChangesRequest is a Tail's request of a ChangeSource.
type ChangesRequest struct {
	// After is the seq the changes follow.
	After uint64
	// Wait is how long to wait for a change when there is none yet.
	Wait time.Duration
	// Limits are the replica's own block limits; a source may raise them to
	// the limits its writer announces (LimitsFrom).
	Limits chain.Limits
	// Published is the replica's published seq, and Coming, when set, is
	// called at most once, as soon as the source knows a change after it
	// is on its way and before the change is read: the apply priority
	// holds new reads from then on.
	Published uint64
	Coming    func()
}

// ChangeBatch is what a ChangeSource returns: consecutive changes as the
// writer recorded them, and the writer's state as the source knows it.
type ChangeBatch struct {
	Changes []*chain.Change
	// DecodeErr is the error of the change after Changes, which ends the
	// batch (nil when every change decoded): the replica diverges there.
	DecodeErr error
	// WriterSeq and WriterHeight are the writer's seq and tip height, as
	// last announced (0: unknown).
	WriterSeq, WriterHeight uint64
	// Bytes is the size of the changes received.
	Bytes int
	// Relayed is set by a source that relays the writer's figures rather
	// than hearing them from the writer itself; Heard is then when the
	// writer last announced them (zero: never), which is the replica's
	// last contact with its writer. Unset, the batch is the writer's own
	// answer: the contact is now.
	Relayed bool
	Heard   time.Time
}

// CheckpointDownload is a checkpoint archive being received.
type CheckpointDownload struct {
	// Body is the tar archive (Checkpoint.Stream's); close it.
	Body io.ReadCloser
	// Want is the state the source announced: the archive must hold it.
	Want Manifest
	// Bytes is the announced size of the store's files; -1: not announced.
	Bytes int64
}

// LimitsFrom returns the limits to decode a writer's changes with: own,
// each raised to the writer's when get (a header lookup) announces a larger
// one under HeaderMaxBlockBytes or HeaderMaxBlockMemory. Every block in the
// writer's change log passed the writer's limits, so a replica with smaller
// ones would refuse a block its writer accepted and stop following for good.
func LimitsFrom(own chain.Limits, get func(string) string) chain.Limits {
	own = own.EnsureDefaults()
	own.MaxBlockMemory = own.BlockMemoryLimit()
	lim := own
	announced := func(name string, own int) int {
		v, err := strconv.Atoi(get(name))
		if err != nil || v <= own {
			return own
		}
		return v
	}
	lim.MaxBlockBytes = announced(HeaderMaxBlockBytes, lim.MaxBlockBytes)
	lim.MaxBlockMemory = announced(HeaderMaxBlockMemory, lim.MaxBlockMemory)
	return lim
}

// LimitsLog logs, once per new value, that a source follows its writer
// with larger block limits than the replica's own. Not safe for concurrent
// use (a source's goroutine).
type LimitsLog struct {
	Logger *slog.Logger
	raised chain.Limits
}

// Note logs lim when it is above own and differs from what was logged last.
func (l *LimitsLog) Note(own, lim chain.Limits) {
	own = own.EnsureDefaults()
	own.MaxBlockMemory = own.BlockMemoryLimit()
	if lim != own && lim != l.raised {
		l.raised = lim
		if l.Logger != nil {
			l.Logger.Warn("the writer accepts larger blocks than this replica's limits: following it with the writer's, so that every block it accepted applies here",
				"max_block_bytes", lim.MaxBlockBytes, "max_block_memory", lim.MaxBlockMemory,
				"own_max_block_bytes", own.MaxBlockBytes, "own_max_block_memory", own.MaxBlockMemory)
		}
	}
}

// DecodeChanges decodes a CBOR sequence of change records into batch, up to
// the first that does not decode (batch.DecodeErr).
func DecodeChanges(data []byte, lim chain.Limits, batch *ChangeBatch) {
	for rest := data; len(rest) > 0; {
		c, r, err := chain.DecodeChangeCBOR(rest, lim)
		if err != nil {
			batch.DecodeErr = err
			return
		}
		rest = r
		batch.Changes = append(batch.Changes, c)
	}
}

// httpSource is the writer's own change log and checkpoint endpoints
// (docs/replication.md, the change log).
type httpSource struct {
	base   *url.URL
	token  string
	client *http.Client
	limits LimitsLog
}

func newHTTPSource(opts TailOptions) (*httpSource, error) {
	base, err := url.Parse(opts.URL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("replication: writer URL %q: want http://host:port", opts.URL)
	}
	return &httpSource{base: base, token: opts.Token, client: opts.Client, limits: LimitsLog{Logger: opts.Logger}}, nil
}

// Changes asks the writer for the changes after req.After with a long poll
// of req.Wait; an announced change (X-Commit-Seq above the replica's) is
// Coming before its body is read.
func (s *httpSource) Changes(ctx context.Context, req ChangesRequest) (*ChangeBatch, error) {
	u := s.base.JoinPath("/v1/replication/changes")
	u.RawQuery = "after=" + strconv.FormatUint(req.After, 10) + "&wait=" + strconv.FormatFloat(req.Wait.Seconds(), 'f', -1, 64)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.client.Do(hreq)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK && req.Coming != nil {
		if seq, err := strconv.ParseUint(resp.Header.Get("X-Commit-Seq"), 10, 64); err == nil && seq > req.Published {
			req.Coming()
		}
	}
	lim := LimitsFrom(req.Limits, resp.Header.Get)
	s.limits.Note(req.Limits, lim)
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(lim.MaxBlockBytes)*2+maxChangesResponse))
	if err != nil {
		return nil, fmt.Errorf("read changes: %w", err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusGone:
		return nil, fmt.Errorf("changes after %d: writer answered %d %s: %w: %w", req.After, resp.StatusCode, bytes.TrimSpace(body), ErrNeedBootstrap, ErrLogTruncated)
	case http.StatusConflict:
		return nil, fmt.Errorf("changes after %d: writer answered %d %s: %w: %w", req.After, resp.StatusCode, bytes.TrimSpace(body), ErrNeedBootstrap, ErrAhead)
	case http.StatusTooManyRequests:
		// The writer is up but serves its most change streams: another
		// contact, not an outage.
		return nil, fmt.Errorf("changes after %d: writer answered %d %s: %w", req.After, resp.StatusCode, bytes.TrimSpace(body), ErrBusy)
	default:
		return nil, fmt.Errorf("changes after %d: writer answered %d %s", req.After, resp.StatusCode, bytes.TrimSpace(body))
	}
	batch := &ChangeBatch{Bytes: len(body)}
	batch.WriterSeq, _ = strconv.ParseUint(resp.Header.Get("X-Commit-Seq"), 10, 64)
	batch.WriterHeight, _ = strconv.ParseUint(resp.Header.Get("X-Tip-Height"), 10, 64)
	DecodeChanges(body, lim, batch)
	return batch, nil
}

// Checkpoint asks the writer for GET /v1/replication/checkpoint.
func (s *httpSource) Checkpoint(ctx context.Context) (*CheckpointDownload, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base.JoinPath("/v1/replication/checkpoint").String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("checkpoint: writer answered %d %s", resp.StatusCode, bytes.TrimSpace(msg))
	}
	want, err := manifestFromHeaders(resp.Header)
	if err != nil {
		resp.Body.Close()
		return nil, err
	}
	announced := int64(-1)
	if v := resp.Header.Get("X-Checkpoint-Bytes"); v != "" {
		if announced, err = strconv.ParseInt(v, 10, 64); err != nil || announced < 0 {
			resp.Body.Close()
			return nil, fmt.Errorf("checkpoint header X-Checkpoint-Bytes %q: %w", v, ErrBadArchive)
		}
	}
	return &CheckpointDownload{Body: resp.Body, Want: want, Bytes: announced}, nil
}

// ManifestFromHeaders reads the state a checkpoint announces from its
// headers (X-Commit-Seq, X-Tip-Height, X-Tip-Hash, X-Utxo-Count,
// X-Utxo-Digest); errors match ErrBadArchive.
func ManifestFromHeaders(get func(string) string) (Manifest, error) {
	return manifestFromHeaders(headerFunc(get))
}

// ManifestHeaders sets the headers ManifestFromHeaders reads, with set.
func ManifestHeaders(m Manifest, set func(name, value string)) {
	set("X-Commit-Seq", strconv.FormatUint(m.Seq, 10))
	set("X-Utxo-Count", strconv.FormatUint(m.UtxoCount, 10))
	set("X-Utxo-Digest", m.Digest.String())
	if m.Tip != nil {
		set("X-Tip-Height", strconv.FormatUint(m.Tip.Height, 10))
		set("X-Tip-Hash", m.Tip.Hash)
	}
}

// headerFunc is a header lookup.
type headerFunc func(string) string

func (h headerFunc) Get(name string) string { return h(name) }
