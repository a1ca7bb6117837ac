package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/api"
	"github.com/utxo-cache/utxo-cache/chain"
)

// TestBlockOverMemoryBudget: a block within the body size and count limits
// whose estimated memory is over the block memory budget is refused as
// too large (413 too_large, in JSON and CBOR), with a message that says so,
// and nothing changes; a block within the budget is applied.
func TestBlockOverMemoryBudget(t *testing.T) {
	t.Parallel()
	var outs []chain.Output
	for i := range 40 {
		outs = append(outs, out(fmt.Sprintf("address-%03d", i), uint64(i)+1))
	}
	budget := int(chain.BlockMemory(&chain.Block{Txs: []chain.Tx{tx("x", nil, outs[:20]...)}}))
	s := newStack(t, stackConfig{api: api.Options{BlockLimits: chain.Limits{MaxBlockMemory: budget}}})
	s.apply(tx("a", nil, out("alice", 5)))
	before := s.state()

	big := s.next(tx("big", nil, outs...))
	for _, r := range []*response{s.postBlock(big), s.postBlockCBOR(big)} {
		wantError(t, r, 413, "too_large")
		if !strings.Contains(string(r.body), "of memory to apply, over the limit of") {
			t.Fatalf("the answer does not say why: %s", r.body)
		}
	}
	s.unchanged(before, "a block over the memory budget")

	fits := s.next(tx("fits", nil, outs[:20]...))
	wantApplied(t, s.postBlock(fits), true, fits)
}
