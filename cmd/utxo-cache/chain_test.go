package main

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
)

// The tests' chain: a small deterministic chain that touches every feature
// ingest must carry through (coinbase flags, assets, datums, reference
// scripts, in-block spends, phase-2-invalid transactions with collateral),
// and a model of the UTXO set written from docs/blocks.md alone, independent of
// the writer, to compute the expected count and digest.

func testHash(parts ...any) chain.Hash {
	return sha256.Sum256(fmt.Append(nil, parts...))
}

// utxoModel is the live UTXO set as the contract defines it.
type utxoModel map[chain.OutPoint]chain.Utxo

// applyTx applies one transaction of block b at position pos.
func (m utxoModel) applyTx(b *chain.Block, pos int, tx *chain.Tx) {
	if tx.Invalid {
		for _, in := range tx.CollateralInputs {
			delete(m, in)
		}
		if tx.CollateralReturn != nil {
			op := chain.OutPoint{TxHash: tx.Hash, Index: uint32(len(tx.Outputs))}
			m[op] = chain.Utxo{OutPoint: op, Output: *tx.CollateralReturn, Height: b.Height,
				TxPos: uint32(pos), Flags: chain.FlagCollateralReturn}
		}
		return
	}
	for _, in := range tx.Inputs {
		delete(m, in)
	}
	for i, out := range tx.Outputs {
		op := chain.OutPoint{TxHash: tx.Hash, Index: uint32(i)}
		u := chain.Utxo{OutPoint: op, Output: out, Height: b.Height, TxPos: uint32(pos)}
		if tx.Coinbase {
			u.Flags |= chain.FlagCoinbase
		}
		m[op] = u
	}
}

func (m utxoModel) apply(b *chain.Block) {
	for pos := range b.Txs {
		m.applyTx(b, pos, &b.Txs[pos])
	}
}

func (m utxoModel) digest() chain.Digest {
	var d chain.Digest
	for _, u := range m {
		d.Add(&u)
	}
	return d
}

// oldest returns the live outpoints in chain order.
func (m utxoModel) oldest() []chain.OutPoint {
	us := slices.Collect(maps.Values(m))
	slices.SortFunc(us, func(a, b chain.Utxo) int {
		return cmp.Or(cmp.Compare(a.Height, b.Height), cmp.Compare(a.TxPos, b.TxPos),
			cmp.Compare(a.Index, b.Index), bytes.Compare(a.TxHash[:], b.TxHash[:]))
	})
	ops := make([]chain.OutPoint, len(us))
	for i, u := range us {
		ops[i] = u.OutPoint
	}
	return ops
}

// testChain is a chain of blocks 1..n with the expected UTXO set after each:
// states[h] is the set after block h (states[0] is empty).
type testChain struct {
	blocks []*chain.Block
	states []utxoModel
}

// stats is the line of docs/digest.md for the state after block h, as stats --json
// prints it.
func (c *testChain) stats(h int) string {
	if h == 0 {
		return fmt.Sprintf(`{"tip":null,"utxo_count":0,"utxo_digest":"%s"}`, chain.Digest{})
	}
	m := c.states[h]
	d := m.digest()
	return fmt.Sprintf(`{"tip":{"height":%d,"hash":"%s"},"utxo_count":%d,"utxo_digest":"%s"}`,
		h, c.blocks[h-1].Hash, len(m), d)
}

func newTestChain(n int) *testChain {
	c := &testChain{states: []utxoModel{{}}}
	m := utxoModel{}
	var prev chain.Hash
	for h := uint64(1); h <= uint64(n); h++ {
		b := &chain.Block{Height: h, Hash: testHash("block", h), PrevHash: prev, Time: 1_700_000_000 + int64(h)}
		live := m.oldest()
		add := func(tx chain.Tx) {
			b.Txs = append(b.Txs, tx)
			m.applyTx(b, len(b.Txs)-1, &b.Txs[len(b.Txs)-1])
		}
		datumHash := testHash("datum", h)
		add(chain.Tx{Hash: testHash("coinbase", h), Coinbase: true, Outputs: []chain.Output{
			{Address: "miner", Value: 50_0000_0000 + h},
			{Address: fmt.Sprintf("addr_test1q%d", h), Value: 1 << 40, // beyond 2^53 sums soon
				Assets: []chain.Asset{
					{Policy: bytes.Repeat([]byte{0xbb}, 28), Name: []byte("token"), Quantity: h},
					{Policy: bytes.Repeat([]byte{0xaa}, 28), Name: nil, Quantity: 1},
				},
				DatumHash: &datumHash, Datum: []byte{0xd8, 0x79, byte(h)}, ScriptRef: []byte{0x82, 0x01, byte(h)}},
		}})
		if len(live) >= 2 {
			pay := testHash("pay", h)
			add(chain.Tx{Hash: pay, Inputs: live[:2], Outputs: []chain.Output{
				{Address: "alice", Value: 7 * h},
				{Address: "bob", Value: 11 * h},
			}})
			// Spends an output created earlier in the same block.
			add(chain.Tx{Hash: testHash("chained", h), Inputs: []chain.OutPoint{{TxHash: pay, Index: 1}},
				Outputs: []chain.Output{{Address: "carol", Value: 11 * h}}})
		}
		if len(live) >= 3 && h%2 == 1 {
			// Phase-2-invalid: its inputs (even an unknown one) are neither
			// checked nor spent; its collateral is.
			add(chain.Tx{Hash: testHash("invalid", h), Invalid: true,
				Inputs:           []chain.OutPoint{{TxHash: testHash("nowhere"), Index: 9}},
				Outputs:          []chain.Output{{Address: "never", Value: 1}},
				CollateralInputs: live[2:3],
				CollateralReturn: &chain.Output{Address: "alice", Value: 3},
			})
		}
		c.blocks = append(c.blocks, b)
		c.states = append(c.states, maps.Clone(m))
		prev = b.Hash
	}
	return c
}

// writeJSONL writes blocks as JSON lines to a new file in dir.
func writeJSONL(t *testing.T, dir, name string, blocks []*chain.Block) string {
	t.Helper()
	var buf bytes.Buffer
	w := chain.NewJSONLWriter(&buf)
	for _, b := range blocks {
		if err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, name, buf.Bytes())
}

// writeCBOR writes blocks as a CBOR sequence to a new file in dir.
func writeCBOR(t *testing.T, dir, name string, blocks []*chain.Block) string {
	t.Helper()
	var buf bytes.Buffer
	w := chain.NewCBORSeqWriter(&buf)
	for _, b := range blocks {
		if err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, name, buf.Bytes())
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
