package follow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/utxo-cache/utxo-cache/bitcoin"
	"github.com/utxo-cache/utxo-cache/chain"
)

// maxJSONBytes bounds a JSON answer of the node (chaininfo is about 1 KiB,
// plus the warnings field).
const maxJSONBytes = 1 << 20

// chainInfo is the part of /rest/chaininfo.json the follower reads.
type chainInfo struct {
	Chain         string `json:"chain"`         // "main", "test", "signet", "regtest"
	Blocks        uint64 `json:"blocks"`        // height of the node's best block
	BestBlockHash string `json:"bestblockhash"` // display order
}

// node is a client of one Bitcoin Core REST interface. Safe for concurrent
// use (it holds no state but the HTTP client).
type node struct {
	base   string // URL without a trailing slash
	client *http.Client
}

// chainInfo fetches the node's chain, height and best block.
func (n *node) chainInfo(ctx context.Context) (chainInfo, chain.Hash, error) {
	var ci chainInfo
	if err := n.getJSON(ctx, "/rest/chaininfo.json", &ci); err != nil {
		return ci, chain.Hash{}, err
	}
	best, err := chain.ParseHash(ci.BestBlockHash)
	if err != nil {
		return ci, chain.Hash{}, &kindError{kind: KindDecode, err: fmt.Errorf("chaininfo bestblockhash %q: %w", ci.BestBlockHash, err)}
	}
	return ci, best, nil
}

// hashAt fetches the hash of the node's block at height.
func (n *node) hashAt(ctx context.Context, height uint64) (chain.Hash, error) {
	var v struct {
		BlockHash string `json:"blockhash"`
	}
	if err := n.getJSON(ctx, "/rest/blockhashbyheight/"+strconv.FormatUint(height, 10)+".json", &v); err != nil {
		return chain.Hash{}, err
	}
	h, err := chain.ParseHash(v.BlockHash)
	if err != nil {
		return chain.Hash{}, &kindError{kind: KindDecode, err: fmt.Errorf("block hash at height %d %q: %w", height, v.BlockHash, err)}
	}
	return h, nil
}

// block fetches the serialized block with hash h.
func (n *node) block(ctx context.Context, h chain.Hash) ([]byte, error) {
	return n.get(ctx, "/rest/block/"+h.String()+".bin", bitcoin.MaxBlockBytes)
}

func (n *node) getJSON(ctx context.Context, path string, v any) error {
	body, err := n.get(ctx, path, maxJSONBytes)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return &kindError{kind: KindDecode, err: fmt.Errorf("GET %s: %w", path, err)}
	}
	return nil
}

// get fetches path and returns its body, at most limit bytes. A transport
// failure (or a body cut short) is KindNetwork, a status other than 200 is
// KindHTTP with the start of the node's message.
func (n *node) get(ctx context.Context, path string, limit int) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.base+path, nil)
	if err != nil {
		return nil, &kindError{kind: KindConfig, err: err}
	}
	resp, err := n.client.Do(req)
	if err != nil {
		return nil, &kindError{kind: KindNetwork, err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		return nil, &kindError{kind: KindHTTP, status: resp.StatusCode, err: fmt.Errorf("GET %s: %s: %q", path, resp.Status, strings.TrimSpace(string(msg)))}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil {
		return nil, &kindError{kind: KindNetwork, err: fmt.Errorf("GET %s: read body: %w", path, err)}
	}
	if len(body) > limit {
		return nil, &kindError{kind: KindDecode, err: fmt.Errorf("GET %s: answer over %d bytes", path, limit)}
	}
	return body, nil
}

// Error kinds: the label of errors_total and what Error.Kind reports.
const (
	KindNetwork     = "network"       // connection refused or reset, timeout, a body cut short
	KindHTTP        = "http"          // a status other than 200 (503 while the node starts, 404 -rest off)
	KindDecode      = "decode"        // an answer that does not parse, a block with the wrong hash
	KindConfig      = "config"        // the node is on another network; a bad URL
	KindRejected    = "rejected"      // the writer refused a block (unknown input, double spend…)
	KindForkTooDeep = "fork_too_deep" // a reorganisation the store cannot roll back
	KindWriter      = "writer"        // the writer or store failed otherwise
	KindMempool     = "mempool"       // the pending set refused a transaction of the node's mempool (counted, not a failed poll)
)

// kindError tags an error of one poll with its kind.
type kindError struct {
	kind   string
	status int // KindHTTP: the node's status code
	err    error
}

func (e *kindError) Error() string { return e.err.Error() }
func (e *kindError) Unwrap() error { return e.err }

// errorKind returns the kind err was tagged with, KindWriter if none.
func errorKind(err error) string {
	var ke *kindError
	if errors.As(err, &ke) {
		return ke.kind
	}
	return KindWriter
}
