package jetstream

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrOptions marks options that cannot work.
var ErrOptions = errors.New("jetstream: bad options")

// Options configure a Publisher (the writer) or a Source (a replica).
type Options struct {
	// URLs are the NATS servers, nats://host:port (or tls://), comma
	// separated; a user and password in the URL authenticate. Required.
	URLs string
	// Name names the stream, subjects and bucket (see the package doc):
	// letters, digits, '_' and '-'. Default DefaultName.
	Name string
	// Replicas is how many servers of the cluster keep the stream and the
	// checkpoints (the Publisher creates them). Default 1; 3 on a cluster
	// of three or more survives the loss of one server.
	Replicas int
	// Retention is how many changes the stream keeps (the writer's
	// --replication-retention). Required by the Publisher.
	Retention uint64
	// CheckpointInterval is how often the Publisher puts a checkpoint of
	// the store in the bucket when the writer has changed since the last.
	// It also puts one when there is none, when the newest is half the
	// retention behind, and when a replica asks for one newer than the
	// newest (at most once per CheckpointInterval/10). Default 10 minutes.
	CheckpointInterval time.Duration
	// Logger. Default: discard.
	Logger *slog.Logger

	// afterPut, for tests, runs between a change object's put and its
	// pointer's publish; an error stops the session there, as a crash
	// would.
	afterPut func(seq uint64) error
	// consumerStart, for tests, moves where a Source's consumer starts:
	// past the stream's end, a consumer that delivers nothing; a little
	// ahead, one that skips messages (see Source.readLeader).
	consumerStart func(next uint64) uint64
	// consumerFault, for tests, runs on each consumer a Source starts: an
	// error fails the start, as a consumer placed on a server out of the
	// replica's reach does; stopping it makes its Next fail, as the
	// consumer's server going out of reach does.
	consumerFault func(it jetstream.MessagesContext) error
}

// DefaultName is Options.Name's default.
const DefaultName = "utxo_cache"

var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// EnsureDefaults returns o with its zero fields filled.
func (o Options) EnsureDefaults() Options {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = 10 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate reports the first setting that cannot work.
func (o Options) Validate() error {
	if !validName.MatchString(o.Name) {
		return fmt.Errorf("name %q: letters, digits, '_' and '-' only: %w", o.Name, ErrOptions)
	}
	if o.Replicas > 5 {
		return fmt.Errorf("replicas %d: at most 5: %w", o.Replicas, ErrOptions)
	}
	return ValidURLs(o.URLs)
}

// IsURL reports whether s names NATS servers (nats:// or tls://), as
// --replica-of may.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "nats://") || strings.HasPrefix(s, "tls://")
}

// ValidURLs reports whether urls is a comma-separated list of NATS server
// URLs.
func ValidURLs(urls string) error {
	if urls == "" {
		return fmt.Errorf("no NATS server: %w", ErrOptions)
	}
	for _, s := range strings.Split(urls, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Host == "" || u.Port() == "" {
			return fmt.Errorf("NATS server %q: want nats://host:port: %w", s, ErrOptions)
		}
	}
	return nil
}

func (o Options) stream() string         { return o.Name }
func (o Options) changesSubject() string { return o.Name + ".changes" }
func (o Options) statusSubject() string  { return o.Name + ".status" }
func (o Options) requestSubject() string { return o.Name + ".checkpoint" }
func (o Options) bucket() string         { return o.Name + "_checkpoints" }
func (o Options) changesBucket() string  { return o.Name + "_changes" }
func checkpointObject(seq uint64) string { return fmt.Sprintf("checkpoint-%020d", seq) }

// connect opens a connection that keeps reconnecting, to any of the
// servers, for as long as it is open; it fails only on a bad URL (a server
// down at start is retried like one lost later).
func (o Options) connect(role string) (*nats.Conn, error) {
	log := o.Logger
	return nats.Connect(o.URLs,
		nats.Name("utxo-cache "+role),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.ReconnectWait(250*time.Millisecond),
		nats.ReconnectJitter(250*time.Millisecond, time.Second),
		nats.Timeout(5*time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("NATS connection lost: reconnecting", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("NATS connection back", "server", nc.ConnectedUrlRedacted())
		}),
	)
}

// Headers of the messages: the stream's carry the writer's block limits
// (replication.HeaderMaxBlockBytes, HeaderMaxBlockMemory) as the HTTP change
// log's answers do; the status carries the writer's state.
const (
	headerSeq       = "Utxo-Seq"
	headerHeight    = "Utxo-Tip-Height"
	headerStreamSeq = "Utxo-Stream-Seq"
	headerMinSeq    = "Utxo-Min-Seq"
	headerBytes     = "X-Checkpoint-Bytes"
)
