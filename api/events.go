package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/events"
	"github.com/utxo-cache/utxo-cache/query"
)

// Events is the event-stream side (events.Hub). Nil: the node keeps no
// change log, and the event routes answer 503 events_unavailable.
type Events interface {
	Subscribe(keys []*events.Key, after uint64, resume bool) (*events.Stream, error)
	// SubscribePending is Subscribe for a stream that reports pending
	// transactions too.
	SubscribePending(keys []*events.Key, after uint64, resume bool) (*events.Stream, error)
}

var (
	errEventsUnavailable = errors.New("api: event streams need the change log, which this node does not keep (--replication-retention)")
)

// maxEventsBody bounds a POST /v1/events body: 10,000 keys of the longest
// address fit.
const maxEventsBody = 8 << 20

// eventKeyParsers are the keys a stream takes, by query parameter and JSON
// member: the address, and the index values the store may keep.
var eventKeyParsers = []struct {
	field string
	parse func(string) (query.IndexKey, error)
}{
	{"address", parseAddressKey},
	{"payment_credential", parsePaymentKey},
	{"stake_credential", parseStakeKey},
	{"policy", parsePolicyKey},
	{"asset", parseUnitKey},
}

func parseAddressKey(s string) (query.IndexKey, error) {
	if len(s) < chain.MinAddressLen || len(s) > query.MaxAddressLen {
		return query.IndexKey{}, fmt.Errorf("address of %d bytes: %d..%d: %w", len(s), chain.MinAddressLen, query.MaxAddressLen, chain.ErrInvalidArgument)
	}
	return query.IndexKey{Dim: query.DimAddress, Value: []byte(s), Field: "address", Label: s}, nil
}

// eventKey parses value as the key of field.
func eventKey(field, value string) (*events.Key, error) {
	for _, p := range eventKeyParsers {
		if p.field == field {
			k, err := p.parse(value)
			if err != nil {
				return nil, err
			}
			return events.NewKey(k.Dim, k.Value, field, k.Label), nil
		}
	}
	return nil, fmt.Errorf("unknown key %q: %w", clip(field), chain.ErrInvalidArgument)
}

// getEvents answers GET /v1/events?address=…&payment_credential=…&after_seq=S.
func (a *API) getEvents(c *gin.Context) {
	q, err := url.ParseQuery(c.Request.URL.RawQuery)
	if err != nil {
		a.fail(c, fmt.Errorf("query string: %v: %w", err, chain.ErrInvalidArgument))
		return
	}
	var keys []*events.Key
	var after, pending string
	for name, values := range q {
		switch name {
		case "after_seq":
			after = values[len(values)-1]
		case "pending":
			pending = values[len(values)-1]
		default:
			for _, v := range values {
				k, err := eventKey(name, v)
				if err != nil {
					a.fail(c, err)
					return
				}
				keys = append(keys, k)
			}
		}
	}
	withPending := false
	switch pending {
	case "", "false", "exclude":
	case "true", "include":
		withPending = true
	default:
		a.fail(c, fmt.Errorf("pending %q: true or false: %w", clip(pending), chain.ErrInvalidArgument))
		return
	}
	a.serveEvents(c, keys, after, withPending)
}

// postEvents answers POST /v1/events with {"keys":[{"address":…},…],
// "pending":bool}; the resume point is Last-Event-ID or ?after_seq=S.
func (a *API) postEvents(c *gin.Context) {
	body, err := a.readBody(c, maxEventsBody)
	if err != nil {
		a.fail(c, err)
		return
	}
	var req struct {
		Keys    []map[string]string `json:"keys"`
		Pending *bool               `json:"pending"`
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(&req); err != nil || d.More() {
		a.fail(c, fmt.Errorf("body: want {\"keys\": [{\"address\": \"…\"}, …], \"pending\": false}: %v: %w", err, chain.ErrInvalidArgument))
		return
	}
	keys := make([]*events.Key, 0, len(req.Keys))
	for i, m := range req.Keys {
		if len(m) != 1 {
			a.fail(c, fmt.Errorf("keys[%d]: one member, such as {\"address\": \"…\"}: %w", i, chain.ErrInvalidArgument))
			return
		}
		for field, v := range m {
			k, err := eventKey(field, v)
			if err != nil {
				a.fail(c, fmt.Errorf("keys[%d]: %w", i, err))
				return
			}
			keys = append(keys, k)
		}
	}
	q, err := url.ParseQuery(c.Request.URL.RawQuery)
	if err != nil {
		a.fail(c, fmt.Errorf("query string: %v: %w", err, chain.ErrInvalidArgument))
		return
	}
	a.serveEvents(c, keys, q.Get("after_seq"), req.Pending != nil && *req.Pending)
}

// serveEvents subscribes and streams. Last-Event-ID (an EventSource's
// reconnection) wins over after_seq.
func (a *API) serveEvents(c *gin.Context, keys []*events.Key, after string, pending bool) {
	if a.opts.Events == nil {
		a.fail(c, errEventsUnavailable)
		return
	}
	resume := false
	var seq uint64
	if id := c.GetHeader("Last-Event-ID"); id != "" {
		after = id
	}
	if after != "" {
		var err error
		if seq, err = parseDecimalUint64(after); err != nil {
			a.fail(c, fmt.Errorf("resume point %q: a seq, as an event's id: %w", clipHeader(after), chain.ErrInvalidArgument))
			return
		}
		resume = true
	}
	subscribe := a.opts.Events.Subscribe
	if pending {
		subscribe = a.opts.Events.SubscribePending
	}
	s, err := subscribe(keys, seq, resume)
	if err != nil {
		a.fail(c, err)
		return
	}
	h := c.Writer.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // proxies that buffer must not hold events back
	if c.Request.Method != http.MethodHead && c.Request.ProtoMajor == 1 && hijackable(c.Writer) {
		if conn, rw, err := c.Writer.Hijack(); err == nil {
			a.streamHijacked(c, s, conn, rw)
			return
		}
	}
	defer s.Close()
	c.Writer.WriteHeader(http.StatusOK)
	if c.Request.Method == http.MethodHead {
		return
	}
	rc := http.NewResponseController(c.Writer)
	// No read deadline while streaming; each write must go out within the
	// stall timeout, or the client is dropped.
	_ = rc.SetReadDeadline(time.Time{})
	w := &deadlineWriter{w: c.Writer, rc: rc, timeout: a.opts.StallTimeout}
	if err := s.Run(c.Request.Context(), w, rc.Flush); err != nil && !errors.Is(err, c.Request.Context().Err()) {
		a.opts.Logger.Debug("event stream ended", "err", err)
	}
}

// hijackable reports whether the connection under w can be taken (an
// HTTP/1 server's; not a recorder's, nor HTTP/2's): gin's writer asserts it
// without checking.
func hijackable(w gin.ResponseWriter) bool {
	u, ok := w.(interface{ Unwrap() http.ResponseWriter })
	if !ok {
		return false
	}
	_, ok = u.Unwrap().(http.Hijacker)
	return ok
}

// streamHijacked serves an HTTP/1 stream on its own connection, taken from
// net/http: the response head, then the events, the body ending when the
// connection closes (Connection: close; no chunking). The handler returns
// at once, so the stream holds neither the request's goroutine (deep in
// the router, with its grown stack) nor net/http's connection buffers: one
// goroutine writes the stream and one waits for the client to close. The
// stream ends when the client closes, a write misses the stall timeout,
// the hub ends it, or the API drains.
func (a *API) streamHijacked(c *gin.Context, s *events.Stream, conn net.Conn, _ *bufio.ReadWriter) {
	head := append(make([]byte, 0, 256), "HTTP/1.1 200 OK\r\n"...)
	hdr := c.Writer.Header().Clone()
	hdr.Set("Connection", "close")
	hdr.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	var b bytes.Buffer
	_ = hdr.Write(&b)
	head = append(append(head, b.Bytes()...), "\r\n"...)
	ctx, cancel := context.WithCancel(a.drain)
	go func() {
		// The client sends nothing more: a read returns when it closes.
		var one [1]byte
		_ = conn.SetReadDeadline(time.Time{})
		_, _ = conn.Read(one[:])
		cancel()
	}()
	go func() {
		defer cancel()
		defer conn.Close()
		defer s.Close()
		w := &connWriter{conn: conn, timeout: a.opts.StallTimeout}
		if _, err := w.Write(head); err != nil {
			return
		}
		if err := s.Run(ctx, w, func() error { return nil }); err != nil && ctx.Err() == nil {
			a.opts.Logger.Debug("event stream ended", "err", err)
		}
	}()
}

// connWriter writes to a hijacked connection, each write within timeout.
type connWriter struct {
	conn    net.Conn
	timeout time.Duration
}

func (w *connWriter) Write(p []byte) (int, error) {
	_ = w.conn.SetWriteDeadline(time.Now().Add(w.timeout))
	return w.conn.Write(p)
}

// deadlineWriter sets the write deadline before each write.
type deadlineWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	_ = d.rc.SetWriteDeadline(time.Now().Add(d.timeout)) // http.ErrNotSupported: none
	return d.w.Write(p)
}
