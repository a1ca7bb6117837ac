package n2n

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/writer"
)

// The network magics of the public networks (the handshake refuses a node of
// another network).
const (
	MagicMainnet uint32 = 764824073
	MagicPreprod uint32 = 1
	MagicPreview uint32 = 2
)

// ParseNetwork returns the magic of a network named mainnet, preprod or
// preview, or given as its decimal magic (1 to 2^32-1).
func ParseNetwork(s string) (uint32, error) {
	switch strings.ToLower(s) {
	case "mainnet":
		return MagicMainnet, nil
	case "preprod":
		return MagicPreprod, nil
	case "preview":
		return MagicPreview, nil
	}
	m, err := strconv.ParseUint(s, 10, 32)
	if err != nil || m == 0 {
		return 0, fmt.Errorf("n2n: network %q: want mainnet, preprod, preview or a magic number", s)
	}
	return uint32(m), nil
}

// Point is a chain point as a node names it: a slot and a block hash.
type Point struct {
	Slot uint64
	Hash chain.Hash
}

// String renders the point as "slot.hash", as ParsePoint reads it.
func (p Point) String() string { return fmt.Sprintf("%d.%s", p.Slot, p.Hash) }

// ParsePoint reads "SLOT.HASH": a decimal slot, a dot, and the block's hash
// in 64 hex characters.
func ParsePoint(s string) (Point, error) {
	slot, hash, ok := strings.Cut(s, ".")
	if !ok {
		return Point{}, fmt.Errorf("n2n: point %q: want SLOT.HASH", s)
	}
	n, err := strconv.ParseUint(slot, 10, 64)
	if err != nil {
		return Point{}, fmt.Errorf("n2n: point %q: slot: %w", s, err)
	}
	h, err := chain.ParseHash(hash)
	if err != nil {
		return Point{}, fmt.Errorf("n2n: point %q: %w", s, err)
	}
	return Point{Slot: n, Hash: h}, nil
}

// Writer is what the follower needs of the single writer; *writer.Writer has
// it.
type Writer interface {
	Apply(ctx context.Context, b *chain.Block) (writer.Result, error)
	// ApplyBlocks applies consecutive blocks on the way to height target,
	// those far below it in catch-up windows (writer.Writer.ApplyBlocks).
	ApplyBlocks(ctx context.Context, blocks []*chain.Block, target uint64) (writer.BatchResult, error)
	Rollback(ctx context.Context, height uint64) (writer.Result, error)
	Tip() chain.Tip
}

// Points is what the follower reads of the store's chain; *disk.Store has
// it.
type Points interface {
	// RecentPoints returns the points to intersect at, newest first.
	RecentPoints() ([]chain.Point, error)
	// HeightOfHash returns the height of the block with hash h on the
	// store's chain (found false: none).
	HeightOfHash(h chain.Hash) (height uint64, found bool, err error)
}

// Dialer opens the TCP connection to the node; *net.Dialer has it.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Defaults of Options.
const (
	DefaultBatchBlocks  = 500
	DefaultBackoffMin   = 500 * time.Millisecond
	DefaultBackoffMax   = 30 * time.Second
	DefaultDialTimeout  = 10 * time.Second
	DefaultFetchTimeout = 60 * time.Second
	DefaultFlushAfter   = 50 * time.Millisecond
)

// Options configure a Follower. Zero values take their defaults.
type Options struct {
	// Address is the node's node-to-node endpoint, HOST:PORT. Required.
	Address string
	// Magic is the network's magic (ParseNetwork). Required.
	Magic uint32
	// Start is where an empty store joins the chain: the follower
	// intersects there and applies the blocks after it (the block at Start
	// itself is not applied). nil: the chain's origin. A store that starts
	// mid-chain needs a writer that skips unknown inputs.
	Start *Point
	// Genesis are the chain's genesis outputs (cardano.ByronGenesisTxs and
	// cardano.ShelleyGenesisTxs, together). nil: none. Given, an empty store
	// that follows the chain from its origin is seeded with them: before the
	// chain's first main block (block number 1) the follower applies
	// cardano.GenesisBlock, named by that block's parent hash (the Byron
	// genesis hash), in the same batch. Not with Start; a chain whose first
	// block has block number 0 has no room for it and is refused.
	Genesis []chain.Tx
	// BatchBlocks bounds the headers the follower collects before it
	// fetches their blocks in one range and hands them to the writer in one
	// ApplyBlocks (which applies those far below the node's tip in catch-up
	// windows). Near the node's tip every block goes alone. Default 500.
	BatchBlocks int
	// FlushAfter is how long collected headers wait for the next one before
	// they are fetched and applied anyway (the node paused). Default 50ms.
	FlushAfter time.Duration
	// BackoffMin and BackoffMax bound the pause before a reconnection: it
	// starts at BackoffMin and doubles up to BackoffMax, ±20% jitter; a
	// session that applied something resets it. Defaults 500ms and 30s.
	BackoffMin, BackoffMax time.Duration
	// DialTimeout bounds the TCP connect and the handshake. Default 10s.
	DialTimeout time.Duration
	// FetchTimeout bounds one block-fetch range, from the request to its
	// last block. Default 60s.
	FetchTimeout time.Duration
	// Writer applies blocks and rollbacks. Required.
	Writer Writer
	// Points reads the store's chain. Required.
	Points Points
	// Dialer opens connections. Default: a net.Dialer.
	Dialer Dialer
	// Metrics receives the follower's figures. Default: none.
	Metrics prometheus.Registerer
	// Logger. Default: discard.
	Logger *slog.Logger
}

// EnsureDefaults returns o with every unset field set to its default.
func (o Options) EnsureDefaults() Options {
	if o.BatchBlocks <= 0 {
		o.BatchBlocks = DefaultBatchBlocks
	}
	if o.FlushAfter <= 0 {
		o.FlushAfter = DefaultFlushAfter
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = DefaultBackoffMin
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = DefaultBackoffMax
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.FetchTimeout <= 0 {
		o.FetchTimeout = DefaultFetchTimeout
	}
	if o.Dialer == nil {
		o.Dialer = &net.Dialer{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate reports a setting the follower cannot work with.
func (o Options) Validate() error {
	if _, _, err := net.SplitHostPort(o.Address); err != nil || o.Address == "" {
		return fmt.Errorf("n2n: node address %q: want HOST:PORT", o.Address)
	}
	if o.Magic == 0 {
		return errors.New("n2n: no network magic")
	}
	if o.Writer == nil || o.Points == nil {
		return errors.New("n2n: Options.Writer and Options.Points are required")
	}
	if o.Start != nil && o.Genesis != nil {
		return errors.New("n2n: genesis outputs seed a store that starts at the origin, not at a start point")
	}
	if o.BackoffMax < o.BackoffMin {
		return fmt.Errorf("n2n: backoff max %s below min %s", o.BackoffMax, o.BackoffMin)
	}
	return nil
}
