package bitcoin

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/btcsuite/btcd/chaincfg/chainhash"
	"github.com/btcsuite/btcd/wire"

	"github.com/utxo-cache/utxo-cache/chain"
)

func TestConvertGenesis(t *testing.T) {
	a := mainnetAdapter(t)
	genesis := loadFixture(t, fixture0To4)[0]
	b, err := a.Convert(genesis, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b.Hash.String() != "000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f" || !b.PrevHash.IsZero() {
		t.Fatalf("genesis hash %s prev %s", b.Hash, b.PrevHash)
	}
	if b.Time != 1231006505 {
		t.Errorf("genesis time %d", b.Time)
	}
	if len(b.Txs) != 1 {
		t.Fatalf("%d txs", len(b.Txs))
	}
	cb := b.Txs[0]
	if cb.Hash.String() != "4a5e1e4baab89f3a32518a88c31bc87f618f76673e2cc77ab2127b7afdeda33b" || !cb.Coinbase {
		t.Fatalf("genesis coinbase %s coinbase=%v", cb.Hash, cb.Coinbase)
	}
	if len(cb.Inputs) != 0 || len(cb.Outputs) != 1 {
		t.Fatalf("genesis coinbase has %d inputs, %d outputs; want 0 and 1", len(cb.Inputs), len(cb.Outputs))
	}
	if o := cb.Outputs[0]; !o.Unspendable || o.Address != "" || o.Value != 50*satoshisPerBTC {
		t.Fatalf("genesis coinbase output %+v: want 50 BTC marked unspendable (never in the UTXO set)", o)
	}
	if n := countCreates(&cb); n != 0 {
		t.Fatalf("genesis coinbase creates %d outputs", n)
	}

	// Height 0 is the genesis block, and the genesis block is height 0.
	if _, err := a.Convert(genesis, 1); !errors.Is(err, ErrInvalidBlock) {
		t.Errorf("genesis at height 1: %v", err)
	}
	if _, err := a.Convert(loadFixture(t, fixture0To4)[1], 0); !errors.Is(err, ErrInvalidBlock) {
		t.Errorf("block 1 at height 0: %v", err)
	}
	// Another network's adapter sees an ordinary block (whose coinbase output
	// counts). Testnet, because below its BIP34 height (21111) a coinbase need
	// not begin with the height; on regtest it must from height 1.
	other, _ := NewAdapter(Options{Network: Testnet})
	if _, err := other.Convert(genesis, 0); !errors.Is(err, ErrInvalidBlock) {
		t.Errorf("mainnet genesis at testnet height 0: %v", err)
	}
	if b, err := other.Convert(genesis, 5); err != nil || countCreates(&b.Txs[0]) != 1 {
		t.Errorf("mainnet genesis as a testnet block: %v", err)
	}
}

func TestConvertBlock170(t *testing.T) {
	blk := loadFixture(t, fixtureChain14131)[170]
	b, err := mainnetAdapter(t).Convert(blk, 170)
	if err != nil {
		t.Fatal(err)
	}
	if b.Hash.String() != "00000000d1145790a8694403d4063f323d499e655c83426834d4ce2f8dd4a2ee" {
		t.Fatalf("block 170 hash %s", b.Hash)
	}
	if b.PrevHash.String() != "000000002a22cfee1f2c846adbd12b3e183d4f97683f85dad08a79780a84bd55" {
		t.Fatalf("block 170 prev %s", b.PrevHash)
	}
	if len(b.Txs) != 2 {
		t.Fatalf("%d txs", len(b.Txs))
	}
	tx := b.Txs[1]
	if tx.Hash.String() != "f4184fc596403b9d638783cf57adfe4c75c605f6356fbc91338530e9831e9e16" || tx.Coinbase {
		t.Fatalf("tx 1 = %s", tx.Hash)
	}
	want := []chain.OutPoint{{TxHash: mustHash("0437cd7f8525ceed2324359c2d0ba26006d92d856a9c20fa0241106ee5a597c9"), Index: 0}}
	if !slices.Equal(tx.Inputs, want) {
		t.Fatalf("inputs %v, want %v", tx.Inputs, want)
	}
	// 10 BTC to Hal Finney, 40 BTC back to Satoshi, both P2PK.
	wantOut := []chain.Output{
		{Address: "1Q2TWHE3GMdB6BZKafqwxXtWAWgFt5Jvm3", Value: 10 * satoshisPerBTC},
		{Address: "12cbQLTFMXRnSzktFkuoG3eHoMeFtpTu3S", Value: 40 * satoshisPerBTC},
	}
	if len(tx.Outputs) != 2 || tx.Outputs[0].Address != wantOut[0].Address || tx.Outputs[0].Value != wantOut[0].Value ||
		tx.Outputs[1].Address != wantOut[1].Address || tx.Outputs[1].Value != wantOut[1].Value {
		t.Fatalf("outputs %+v, want %+v", tx.Outputs, wantOut)
	}
}

// TestConvertModernBlocks converts the two recent blocks (and 277647) and
// checks that every Bitcoin output keeps its index and that exactly the
// unspendable ones are marked so.
func TestConvertModernBlocks(t *testing.T) {
	a := mainnetAdapter(t)
	for _, tc := range []struct {
		file     string
		height   uint64
		txs      int
		interior int                       // unspendable outputs before a spendable one
		trailing int                       // unspendable outputs after the last spendable one
		addrs    map[chain.OutPoint]string // real outputs with known addresses
	}{
		{fixtureLarge, 574200, 3315, 502, 474, map[chain.OutPoint]string{
			{TxHash: mustHash("57233bf44b82ef3662479e5c80f71ba00c1ae82e8c9739213841f27a2f3d0d79"), Index: 0}: "bc1qjl8uwezzlech723lpnyuza0h2cdkvxvh54v3dn",
			{TxHash: mustHash("a80bb6aea647e2ba69d0c5189b0976734d3918d4e9d6e0cb5bef07549706c8d1"), Index: 0}: "3QGenMj5hD4LBp24xow1hsagmMDjgnDpoo",
			{TxHash: mustHash("a80bb6aea647e2ba69d0c5189b0976734d3918d4e9d6e0cb5bef07549706c8d1"), Index: 1}: "33UtQHkmLcSzWe5TXizcnLgGA4puvDEDmY",
			{TxHash: mustHash("0ed31a69f6ceca5ed3444fc1eba41cd23c7a9476211cb64d8448423809569901"), Index: 1}: "bc1qwqdg6squsna38e46795at95yu9atm8azzmyvckulcc7kytlcckxswvvzej",
			{TxHash: mustHash("0d1e55aa5919aa363755890339c58cb8ee880ef16daa60d33631aa49fc70ebdd"), Index: 0}: "13XpsmJszDj3GA7rg59pP2bqovU6gk3tLU",
		}},
		{fixtureSmall, 540107, 230, 4, 11, map[chain.OutPoint]string{
			{TxHash: mustHash("5301a7831d21d8395e511ba4786ddcd71b630148bd6bb902f4b1c71b7df563ed"), Index: 0}: "bc1qjl8uwezzlech723lpnyuza0h2cdkvxvh54v3dn",
			// RSK merge-mining tag without OP_RETURN: unparseable, but Core keeps it.
			{TxHash: mustHash("5301a7831d21d8395e511ba4786ddcd71b630148bd6bb902f4b1c71b7df563ed"), Index: 2}: "script:0dc310d4a2e72bdd3ed82ff0f0c0d5f56cf12b10e7d6707b239e17795e2c2e7f",
			{TxHash: mustHash("0686f5daff3b7df5eeee91f0a7b088b791d90eedaf5fe7a86caf0efa996397e5"), Index: 0}: "3Fh7xxk5BHEpS5LKUeSuZcvWtyj1vLhTCk",
		}},
		{fixture277647, 277647, 213, 0, 0, map[chain.OutPoint]string{
			{TxHash: mustHash("0fc1f998e6fc1fa43a879cea4a54fe9947e02b925ebc46237a2406c50e0f07ea"), Index: 0}: "14cZMQk89mRYQkDEj8Rn25AnGoBi5H6uer",
		}},
	} {
		t.Run(tc.file[:min(len(tc.file), 20)], func(t *testing.T) {
			blk := loadFixture(t, tc.file)[0]
			b, err := a.Convert(blk, tc.height)
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Txs) != tc.txs {
				t.Fatalf("%d txs, want %d (no pseudo-transaction)", len(b.Txs), tc.txs)
			}

			var interior, trailing int
			var unspendable []chain.OutPoint
			got := map[chain.OutPoint]string{}
			for i, mtx := range blk.Transactions {
				tx := &b.Txs[i]
				if tx.Hash != displayHash(ptr(mtx.TxHash())) || IsPseudoTx(b, tx) {
					t.Fatalf("tx %d hash %s", i, tx.Hash)
				}
				if len(tx.Inputs) != len(mtx.TxIn) && !(i == 0 && len(tx.Inputs) == 0) {
					t.Fatalf("tx %s: %d inputs, want %d", tx.Hash, len(tx.Inputs), len(mtx.TxIn))
				}
				if len(tx.Outputs) != len(mtx.TxOut) {
					t.Fatalf("tx %s: %d outputs, want %d", tx.Hash, len(tx.Outputs), len(mtx.TxOut))
				}
				spendableAfter := false
				for j := len(mtx.TxOut) - 1; j >= 0; j-- {
					out := mtx.TxOut[j]
					op := chain.OutPoint{TxHash: tx.Hash, Index: uint32(j)}
					o := tx.Outputs[j]
					if o.Value != uint64(out.Value) {
						t.Fatalf("%s value %d, want %d", op, o.Value, out.Value)
					}
					if o.Unspendable != isUnspendable(out.PkScript) {
						t.Fatalf("%s marked unspendable %v", op, o.Unspendable)
					}
					if o.Unspendable {
						if o.Address != "" {
							t.Fatalf("%s unspendable but listed under %s", op, o.Address)
						}
						unspendable = append(unspendable, op)
						if spendableAfter {
							interior++
						} else {
							trailing++
						}
						continue
					}
					spendableAfter = true
					if o.Address != a.Address(out.PkScript) || o.Address == "" {
						t.Fatalf("%s address %q", op, o.Address)
					}
					got[op] = o.Address
				}
			}
			if interior != tc.interior || trailing != tc.trailing {
				t.Fatalf("%d interior, %d trailing unspendable outputs; want %d, %d", interior, trailing, tc.interior, tc.trailing)
			}
			for op, want := range tc.addrs {
				if got[op] != want {
					t.Errorf("%s: address %q, want %q", op, got[op], want)
				}
			}

			// Applied to a set holding the block's outside inputs, the block
			// leaves exactly its spendable outputs live or spent in-block.
			m := newModel()
			if err := m.apply(seedInputs(b)); err != nil {
				t.Fatal(err)
			}
			if err := m.apply(b); err != nil {
				t.Fatal(err)
			}
			for op := range got {
				_, live := m.live[op]
				spent, spentHere := m.spentBy[op]
				if live == (spentHere && spent.Height == tc.height) {
					t.Fatalf("%s: live %v, spent %+v", op, live, spent)
				}
			}
			for op, u := range m.live {
				if _, ok := got[op]; u.Height == tc.height && !ok {
					t.Fatalf("%s live but not a spendable output of the block", op)
				}
			}
			for _, op := range unspendable {
				_, live := m.live[op]
				_, spent := m.spentBy[op]
				if live || spent {
					t.Fatalf("unspendable %s was created (live %v, spent %v)", op, live, spent)
				}
			}
		})
	}
}

// seedInputs returns a block, just before b, that creates every outpoint b
// spends but does not create itself.
func seedInputs(b *chain.Block) *chain.Block {
	created := map[chain.Hash]bool{}
	for _, tx := range b.Txs {
		created[tx.Hash] = true
	}
	maxIndex := map[chain.Hash]uint32{}
	var order []chain.Hash
	for _, tx := range b.Txs {
		for _, op := range tx.Inputs {
			if created[op.TxHash] {
				continue
			}
			if _, seen := maxIndex[op.TxHash]; !seen {
				order = append(order, op.TxHash)
			}
			maxIndex[op.TxHash] = max(maxIndex[op.TxHash], op.Index)
		}
	}
	seed := &chain.Block{Height: b.Height - 1, Hash: b.PrevHash, Txs: []chain.Tx{}}
	for _, h := range order {
		outs := make([]chain.Output, maxIndex[h]+1)
		for j := range outs {
			outs[j] = chain.Output{Address: "seed", Value: 1}
		}
		seed.Txs = append(seed.Txs, chain.Tx{Hash: h, Outputs: outs})
	}
	return seed
}

func ptr[T any](v T) *T { return &v }

// Synthetic blocks.

var (
	p2pkh1 = []byte{0x76, 0xa9, 0x14, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 0x88, 0xac}
	opRet  = []byte{0x6a, 0x04, 'd', 'a', 't', 'a'}
)

func coinbaseTx(tag byte, outs ...*wire.TxOut) *wire.MsgTx {
	tx := wire.NewMsgTx(1)
	tx.AddTxIn(wire.NewTxIn(wire.NewOutPoint(&chainhash.Hash{}, wire.MaxPrevOutIndex), []byte{0x01, tag}, nil))
	for _, o := range outs {
		tx.AddTxOut(o)
	}
	return tx
}

func spendTx(prev []wire.OutPoint, outs ...*wire.TxOut) *wire.MsgTx {
	tx := wire.NewMsgTx(1)
	for i := range prev {
		tx.AddTxIn(wire.NewTxIn(&prev[i], nil, nil))
	}
	for _, o := range outs {
		tx.AddTxOut(o)
	}
	return tx
}

func synthBlock(prev chainhash.Hash, txs ...*wire.MsgTx) *wire.MsgBlock {
	blk := wire.NewMsgBlock(wire.NewBlockHeader(1, &prev, &chainhash.Hash{}, 0x207fffff, 0))
	blk.Header.Timestamp = time.Unix(1_700_000_000, 0)
	ids := make([]chainhash.Hash, len(txs))
	for i, tx := range txs {
		_ = blk.AddTransaction(tx)
		ids[i] = tx.TxHash()
	}
	blk.Header.MerkleRoot = merkleRoot(ids)
	return blk
}

func TestConvertUnspendableSynthetic(t *testing.T) {
	cb := coinbaseTx(1, wire.NewTxOut(50e8, p2pkh1), wire.NewTxOut(0, opRet))
	// OP_RETURN first, then a payment, then two trailing unspendable
	// outputs: one OP_RETURN, one oversized.
	tx := spendTx([]wire.OutPoint{{Hash: chainhash.Hash{9}, Index: 3}},
		wire.NewTxOut(7, opRet), wire.NewTxOut(1000, p2pkh1),
		wire.NewTxOut(0, opRet), wire.NewTxOut(5, make([]byte, 10001)))
	// All outputs unspendable: nothing created.
	allUnspendable := spendTx([]wire.OutPoint{{Hash: chainhash.Hash{8}, Index: 0}}, wire.NewTxOut(3, opRet))
	blk := synthBlock(chainhash.Hash{1}, cb, tx, allUnspendable)
	b, err := mainnetAdapter(t).Convert(blk, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Txs) != 3 {
		t.Fatalf("%d txs, want 3 (no pseudo-transaction)", len(b.Txs))
	}
	unspendable := chain.Output{Unspendable: true}
	for _, tc := range []struct {
		tx   int
		want []chain.Output
	}{
		{0, []chain.Output{{Address: mainnetAdapter(t).Address(p2pkh1), Value: 50e8}, unspendable}},
		{1, []chain.Output{{Value: 7, Unspendable: true}, {Address: mainnetAdapter(t).Address(p2pkh1), Value: 1000}, unspendable, {Value: 5, Unspendable: true}}},
		{2, []chain.Output{{Value: 3, Unspendable: true}}},
	} {
		got := b.Txs[tc.tx].Outputs
		if len(got) != len(tc.want) {
			t.Fatalf("tx %d: outputs %+v, want %+v", tc.tx, got, tc.want)
		}
		for j := range got {
			g, w := got[j], tc.want[j]
			if g.Address != w.Address || g.Value != w.Value || g.Unspendable != w.Unspendable {
				t.Fatalf("tx %d output %d: %+v, want %+v", tc.tx, j, g, w)
			}
		}
		if IsPseudoTx(b, &b.Txs[tc.tx]) {
			t.Errorf("tx %d taken for a pseudo-transaction", tc.tx)
		}
	}

	// Applied, only the two payments are created, at their Bitcoin indexes.
	m := newModel()
	if err := m.apply(seedInputs(b)); err != nil {
		t.Fatal(err)
	}
	if err := m.apply(b); err != nil {
		t.Fatal(err)
	}
	var created []chain.OutPoint
	for op, u := range m.live {
		if u.Height == 1000 {
			created = append(created, op)
		}
	}
	slices.SortFunc(created, func(x, y chain.OutPoint) int { return bytes.Compare(x.TxHash[:], y.TxHash[:]) })
	want := []chain.OutPoint{{TxHash: b.Txs[0].Hash, Index: 0}, {TxHash: b.Txs[1].Hash, Index: 1}}
	slices.SortFunc(want, func(x, y chain.OutPoint) int { return bytes.Compare(x.TxHash[:], y.TxHash[:]) })
	if !slices.Equal(created, want) {
		t.Fatalf("created %v, want %v", created, want)
	}
}

// TestConvertBIP30 replays a synthetic repeat of a coinbase at a listed
// height: the earlier outputs are spent by the BIP30 pseudo-transaction and
// recreated at the later height, as in Bitcoin Core's UTXO set.
func TestConvertBIP30(t *testing.T) {
	cb := coinbaseTx(7, wire.NewTxOut(50e8, p2pkh1), wire.NewTxOut(0, opRet), wire.NewTxOut(1, p2pkh1))
	first := synthBlock(chainhash.Hash{1}, cb)
	second := synthBlock(first.BlockHash(), cb)
	txid := displayHash(ptr(cb.TxHash()))

	a := mainnetAdapter(t)
	a.duplicates = map[uint64]duplicateCoinbase{91842: {txid: txid, firstHeight: 91812}}

	m := newModel()
	// Stand-in for blocks 91813..91841, so the heights line up.
	m.tip = chain.Tip{Height: 91811, Hash: displayHash(&chainhash.Hash{1})}
	b1, err := a.Convert(first, 91812)
	if err != nil {
		t.Fatal(err)
	}
	if len(b1.Txs) != 1 || IsPseudoTx(b1, &b1.Txs[0]) {
		t.Fatalf("first occurrence: %d txs", len(b1.Txs))
	}
	if err := m.apply(b1); err != nil {
		t.Fatal(err)
	}
	m.tip.Height = 91841
	b2, err := a.Convert(second, 91842)
	if err != nil {
		t.Fatal(err)
	}
	if len(b2.Txs) != 2 {
		t.Fatalf("repeat: %d txs, want pseudo, coinbase", len(b2.Txs))
	}
	pseudo := b2.Txs[0]
	// Output 1 is unspendable: it was never created.
	want := []chain.OutPoint{{TxHash: txid, Index: 0}, {TxHash: txid, Index: 2}}
	if pseudo.Hash != BIP30TxHash(b2.Hash) || !IsPseudoTx(b2, &pseudo) || !slices.Equal(pseudo.Inputs, want) || len(pseudo.Outputs) != 0 {
		t.Fatalf("pseudo tx %s spends %v, want %v", pseudo.Hash, pseudo.Inputs, want)
	}
	if !b2.Txs[1].Coinbase || b2.Txs[1].Hash != txid {
		t.Fatalf("coinbase not second")
	}
	if err := m.apply(b2); err != nil {
		t.Fatal(err)
	}
	if len(m.live) != 2 {
		t.Fatalf("%d live, want 2", len(m.live))
	}
	for _, op := range want {
		if u := m.live[op]; u.Height != 91842 || !u.Coinbase() {
			t.Fatalf("%s: height %d coinbase %v, want the later coinbase", op, u.Height, u.Coinbase())
		}
	}

	// The same block at another height, or on the real table (its txid is
	// not listed), converts normally.
	for _, tc := range []struct {
		a      *Adapter
		height uint64
	}{{a, 91843}, {mainnetAdapter(t), 91842}} {
		b, err := tc.a.Convert(second, tc.height)
		if err != nil || IsPseudoTx(b, &b.Txs[0]) {
			t.Fatalf("height %d: %v, first tx pseudo=%v", tc.height, err, err == nil && IsPseudoTx(b, &b.Txs[0]))
		}
	}
}

func TestMainnetDuplicateCoinbases(t *testing.T) {
	a := mainnetAdapter(t)
	want := map[uint64]string{
		91842: "d5d27987d2a3dfc724e359870c6644b40e497bdc0589a033220fe15429d88599",
		91880: "e3bf3d07d4b0375638d5f1db5255fe07ba2c4cb067cd81b84ee974b6585fb468",
	}
	if len(a.duplicates) != len(want) {
		t.Fatalf("%d BIP30 exceptions", len(a.duplicates))
	}
	for h, txid := range want {
		if d, ok := a.duplicates[h]; !ok || d.txid.String() != txid {
			t.Errorf("height %d: %+v", h, d)
		}
	}
	for _, n := range []Network{Testnet, Signet, Regtest} {
		if o, _ := NewAdapter(Options{Network: n}); len(o.duplicates) != 0 {
			t.Errorf("%s has BIP30 exceptions", n)
		}
	}
}

func TestPseudoTxHashes(t *testing.T) {
	block := mustHash("000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f")
	want := sha256.Sum256(append([]byte("utxo-cache/bitcoin/bip30-replace\x00"), block[:]...))
	if BIP30TxHash(block) != chain.Hash(want) {
		t.Errorf("BIP30TxHash does not follow its documented formula")
	}
	other := block
	other[31] ^= 1
	if BIP30TxHash(block) == BIP30TxHash(other) {
		t.Errorf("pseudo-transaction hashes collide")
	}
}

// countCreates counts the outputs tx creates when applied.
func countCreates(tx *chain.Tx) int {
	var n int
	tx.Creates(func(uint32, *chain.Output, bool) { n++ })
	return n
}

func TestConvertRejects(t *testing.T) {
	a := mainnetAdapter(t)
	cb := coinbaseTx(1, wire.NewTxOut(50e8, p2pkh1))
	spend := spendTx([]wire.OutPoint{{Hash: chainhash.Hash{5}, Index: 0}}, wire.NewTxOut(1, p2pkh1))
	noInputs := spendTx(nil, wire.NewTxOut(1, p2pkh1))
	nullSpend := spendTx([]wire.OutPoint{{Hash: chainhash.Hash{5}}, {Index: wire.MaxPrevOutIndex}}, wire.NewTxOut(1, p2pkh1))
	for name, blk := range map[string]*wire.MsgBlock{
		"no transactions":     synthBlock(chainhash.Hash{1}),
		"no coinbase first":   synthBlock(chainhash.Hash{1}, spend, cb),
		"two coinbases":       synthBlock(chainhash.Hash{1}, cb, coinbaseTx(2)),
		"tx without inputs":   synthBlock(chainhash.Hash{1}, cb, noInputs),
		"null outpoint spent": synthBlock(chainhash.Hash{1}, cb, nullSpend),
		"negative value":      synthBlock(chainhash.Hash{1}, coinbaseTx(3, wire.NewTxOut(-1, p2pkh1))),
		"over 21M BTC":        synthBlock(chainhash.Hash{1}, coinbaseTx(4, wire.NewTxOut(21e14+1, p2pkh1))),
		"bad merkle root": func() *wire.MsgBlock {
			blk := synthBlock(chainhash.Hash{1}, cb, spend)
			blk.Header.MerkleRoot[0] ^= 1
			return blk
		}(),
	} {
		if _, err := a.Convert(blk, 1000); !errors.Is(err, ErrInvalidBlock) {
			t.Errorf("%s: error %v, want ErrInvalidBlock", name, err)
		}
	}
	if _, err := a.Convert(synthBlock(chainhash.Hash{1}, cb, spend), 1000); err != nil {
		t.Fatalf("valid synthetic block: %v", err)
	}
}
