package cardano

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/blinklabs-io/gouroboros/ledger"
	"github.com/blinklabs-io/gouroboros/ledger/common"

	"github.com/utxo-cache/utxo-cache/chain"
)

// TestDecodeEveryFixture is the package's first test (first in the first
// file): every fixture block, single and in the chunks, decodes with the
// pinned library, body hash checked, and converts.
func TestDecodeEveryFixture(t *testing.T) {
	a := newAdapter(t)
	for _, f := range allBlocks(t) {
		b, err := a.Convert(f.tagged)
		if err != nil {
			t.Errorf("%s: %v", f.name, err)
			continue
		}
		if strings.Contains(f.name, "#") {
			continue // a chunk block: decoded, not logged
		}
		outs := 0
		for _, tx := range b.Chain.Txs {
			outs += len(tx.Outputs)
		}
		t.Logf("%-10s %-14s height %8d slot %9d txs %3d outputs %4d %s", f.name, b.Era, b.Chain.Height, b.Slot, len(b.Chain.Txs), outs, b.Chain.Hash)
	}
}

func fixtureNamed(tb testing.TB, name string) []byte {
	tb.Helper()
	for _, f := range loadFixtures(tb) {
		if f.name == name {
			return f.tagged
		}
	}
	tb.Fatalf("no fixture %s", name)
	return nil
}

// The real 219-byte pointer address whose pointer fields overflow renders as
// bech32 of its exact bytes; the library's parse-and-reserialise does not.
func TestPointerAddressKeepsItsBytes(t *testing.T) {
	tagged := fixtureNamed(t, "alonzo27")
	b, err := newAdapter(t).Convert(tagged)
	if err != nil {
		t.Fatal(err)
	}
	f, err := readFacts(tagged)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := chain.ParseHash("95a5ef2f1121a197fc9bedb039787eb723e98825b4fd4df86c17ec0e3f4dc722")
	for i, tx := range b.Chain.Txs {
		if tx.Hash != want {
			continue
		}
		raw := f.txs[i].outputs[1].addr
		if len(raw) != 219 || raw[0]>>4 != 4 && raw[0]>>4 != 5 {
			t.Fatalf("output 1: %d-byte address of type %d, want the 219-byte pointer address", len(raw), raw[0]>>4)
		}
		got := tx.Outputs[1].Address // a test network's: addr_test
		dec, err := bech32Decode("addr_test", strings.TrimPrefix(got, "addr_test1"))
		if !strings.HasPrefix(got, "addr_test1") || err != nil || !bytes.Equal(dec, raw) {
			t.Fatalf("address %q is not bech32 of the raw bytes %x (%v)", got, raw, err)
		}
		if lib, err := common.NewAddressFromBytes(raw); err == nil {
			if s := lib.String(); s == got {
				t.Logf("the library now renders the pointer address byte-exactly too")
			} else {
				t.Logf("library renders %d characters, we render %d", len(s), len(got))
			}
		}
		return
	}
	t.Fatal("transaction 95a5ef2f… not in alonzo27")
}

func TestRenderAddress(t *testing.T) {
	for _, tc := range []struct {
		raw  []byte
		want string // prefix, or "" for an error
	}{
		{append([]byte{0x61}, make([]byte, 28)...), "addr1v"},      // enterprise, mainnet
		{append([]byte{0x60}, make([]byte, 28)...), "addr_test1v"}, // enterprise, testnet
		{append([]byte{0x02}, make([]byte, 56)...), "addr_test1q"}, // base, network 2
		{append([]byte{0xe1}, make([]byte, 28)...), ""},            // reward address
		{append([]byte{0x91}, make([]byte, 28)...), ""},            // undefined type 9
		{nil, ""},
	} {
		got, err := RenderAddress(tc.raw)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%x: %q, want an error", tc.raw, got)
		case tc.want != "" && (err != nil || !strings.HasPrefix(got, tc.want)):
			t.Errorf("%x: %q, %v; want prefix %q", tc.raw, got, err, tc.want)
		}
	}
}

// The longest addresses the chain model holds, and one byte more.
func TestAddressLimit(t *testing.T) {
	for _, tc := range []struct {
		header byte
		n      int
		ok     bool
	}{
		{0x60, 630, true}, {0x60, 631, false}, // addr_test: 10 + ceil(8n/5) + 6 characters
		{0x61, 633, true}, {0x61, 634, false}, // addr: 5 + ceil(8n/5) + 6
	} {
		raw := append([]byte{tc.header}, bytes.Repeat([]byte{0xff}, tc.n-1)...)
		s, err := outputAddress(raw)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, errAddressTooLong)) {
			t.Errorf("%d bytes, header %02x: %d characters, %v; want ok=%v", tc.n, tc.header, len(s), err, tc.ok)
		}
	}
}

func TestBadInput(t *testing.T) {
	a := newAdapter(t)
	good := fixtureNamed(t, "babbage9")
	for _, tc := range []struct {
		name  string
		input []byte
		want  error
	}{
		{"empty", nil, ErrCorrupt},
		{"not an array", []byte{0x01}, ErrCorrupt},
		{"one element", []byte{0x81, 0x06}, ErrCorrupt},
		{"unknown era 8", append([]byte{0x82, 0x08}, good[2:]...), ErrUnknownEra},
		{"unknown era 200", append([]byte{0x82, 0x18, 200}, good[2:]...), ErrUnknownEra},
		{"wrong era", append([]byte{0x82, 0x02}, good[2:]...), ErrCorrupt},
		{"trailing byte", append(append([]byte(nil), good...), 0), ErrCorrupt},
	} {
		_, err := a.Convert(tc.input)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := DecodeHex([]byte("82zz")); !errors.Is(err, ErrCorrupt) {
		t.Errorf("bad hex: %v, want ErrCorrupt", err)
	}
	// Every truncation of a few small blocks of different eras is an error,
	// never a panic (the fuzz target covers the rest).
	for _, name := range []string{"byron4", "alonzo10", "babbage1", "conway2"} {
		blk := fixtureNamed(t, name)
		for n := range len(blk) {
			if _, err := a.Convert(blk[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s cut to %d bytes: %v, want ErrCorrupt", name, n, err)
			}
		}
	}
}

// A changed byte inside a transaction body no longer matches the header's
// body hash: refused, naming the era; the same bytes pass with the check off.
func TestBodyHashMismatch(t *testing.T) {
	good := fixtureNamed(t, "babbage4")
	f, _ := parseItem(good)
	body0 := f.elems[1].elems[1].elems[0]
	outs, _ := body0.get(1)
	addr := outs.elems[0].untag()
	addrRaw := addr.raw
	if addr.major == 5 {
		a, _ := addr.get(0)
		addrRaw = a.raw
	}
	at := bytes.Index(good, addrRaw) + len(addrRaw) - 1
	bad := append([]byte(nil), good...)
	bad[at] ^= 0x01
	_, err := newAdapter(t).Convert(bad)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "63528520/2023c3706be3f8822c79f5e65e5d2aa561ceaa6330d412c3341aed45630294a2") {
		t.Fatalf("patched body: %v, want ErrCorrupt naming the block", err)
	}
	t.Logf("patched body: %v", err)
	if _, err := (&Adapter{opts: Options{skipBodyHash: true}}).Convert(bad); err != nil {
		t.Fatalf("patched body, check off: %v", err)
	}
}

// A panic inside the library is an error naming the block, not a crash.
func TestLibraryPanicIsAnError(t *testing.T) {
	saved := decodeLedgerBlock
	t.Cleanup(func() { decodeLedgerBlock = saved })
	decodeLedgerBlock = func(uint, []byte, common.VerifyConfig) (ledger.Block, error) {
		panic("index out of range")
	}
	_, err := newAdapter(t).Convert(fixtureNamed(t, "conway1"))
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "panicked") || !strings.Contains(err.Error(), "9b51ccd4f161c08382a445684ff3eb788923608acbea283081fa5ccf663fef8d") {
		t.Fatalf("%v, want ErrCorrupt naming the block and saying the decoder panicked", err)
	}
}

// No fixture has a phase-2-invalid transaction: mark a real one with a
// collateral return invalid (the block's invalid_transactions list; the body
// hash then no longer matches, so the check is off for this block only).
func TestPhaseTwoInvalidTransaction(t *testing.T) {
	a := newAdapter(t)
	for _, fx := range allBlocks(t) {
		b, err := a.Convert(fx.tagged)
		if err != nil {
			t.Fatal(err)
		}
		if b.Era < EraBabbage {
			continue
		}
		for i, tx := range b.Chain.Txs {
			if tx.CollateralReturn == nil || len(tx.CollateralInputs) == 0 || i > 23 {
				continue
			}
			top, _ := parseItem(fx.tagged)
			blk := top.elems[1]
			patched := []byte{0x82, top.elems[0].raw[0], 0x85}
			for _, e := range blk.elems[:4] {
				patched = append(patched, e.raw...)
			}
			patched = append(patched, 0x81, byte(i)) // invalid_transactions = [i]
			if _, err := a.Convert(patched); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s patched, body hash checked: %v, want ErrCorrupt", fx.name, err)
			}
			pb, err := (&Adapter{opts: Options{skipBodyHash: true}}).Convert(patched)
			if err != nil {
				t.Fatal(err)
			}
			inv := &pb.Chain.Txs[i]
			if !inv.Invalid {
				t.Fatalf("%s tx %d: not marked invalid", fx.name, i)
			}
			for j := range pb.Chain.Txs {
				if j != i && pb.Chain.Txs[j].Invalid {
					t.Errorf("tx %d also invalid", j)
				}
			}
			if got := inv.Spends(); len(got) != len(tx.CollateralInputs) || got[0] != tx.CollateralInputs[0] {
				t.Errorf("invalid tx spends %v, want its collateral %v", got, tx.CollateralInputs)
			}
			var created []uint32
			inv.Creates(func(idx uint32, o *chain.Output, cr bool) {
				if !cr || o.Address != tx.CollateralReturn.Address || o.Value != tx.CollateralReturn.Value {
					t.Errorf("created %d: %+v (collateral return %v)", idx, o, cr)
				}
				created = append(created, idx)
			})
			if len(created) != 1 || created[0] != uint32(len(tx.Outputs)) {
				t.Errorf("invalid tx creates %v, want only index %d", created, len(tx.Outputs))
			}
			// The same transaction, valid: its collateral return is not created.
			tx.Creates(func(idx uint32, _ *chain.Output, cr bool) {
				if cr || idx >= uint32(len(tx.Outputs)) {
					t.Errorf("valid tx creates %d (collateral return %v)", idx, cr)
				}
			})
			t.Logf("%s tx %d (%s) marked invalid: spends %d collateral inputs, creates #%d", fx.name, i, inv.Hash, len(inv.Spends()), created[0])
			return
		}
	}
	t.Fatal("no Babbage transaction with collateral and a collateral return")
}

func TestLinkerAcrossBoundary(t *testing.T) {
	h := func(b byte) chain.Hash { return chain.Hash{b} }
	main := func(height uint64, hash, prev byte) *Block {
		return &Block{Era: EraByron, Chain: chain.Block{Height: height, Hash: h(hash), PrevHash: h(prev)}}
	}
	ebb := &Block{Era: EraByronBoundary, Boundary: true, Chain: chain.Block{Height: 99, Hash: h(0xEB), PrevHash: h(99)}}

	l := NewLinker(chain.Tip{Empty: true})
	steps := []struct {
		b     *Block
		apply bool
		prev  chain.Hash
	}{
		{main(99, 99, 98), true, h(98)},
		{ebb, false, chain.Hash{}},
		{main(100, 100, 0xEB), true, h(99)},
		{main(101, 101, 100), true, h(100)},
	}
	for i, s := range steps {
		out, apply, err := l.Next(s.b)
		if err != nil || apply != s.apply || (apply && out.PrevHash != s.prev) {
			t.Fatalf("step %d: %v apply=%v prev=%s; want apply=%v prev=%s", i, err, apply, out.PrevHash, s.apply, s.prev)
		}
	}
	if tip := l.Tip(); tip.Height != 101 || tip.Hash != h(101) {
		t.Fatalf("tip %s", tip)
	}
	// Blocks that do not link, and a boundary with the wrong number.
	for _, b := range []*Block{
		main(102, 102, 77),  // wrong parent
		main(103, 103, 101), // skips a height
		{Era: EraByronBoundary, Boundary: true, Chain: chain.Block{Height: 102, Hash: h(0xEC), PrevHash: h(101)}},
	} {
		if _, _, err := l.Next(b); !errors.Is(err, ErrNotLinked) {
			t.Errorf("block %s: %v, want ErrNotLinked", b.Name(), err)
		}
	}
	// The epoch-0 boundary block first: the next block links to its parent.
	l = NewLinker(chain.Tip{Empty: true})
	genesis, err := newAdapter(t).Convert(fixtureNamed(t, "genesis"))
	if err != nil {
		t.Fatal(err)
	}
	if _, apply, err := l.Next(genesis); err != nil || apply {
		t.Fatalf("genesis boundary block: apply=%v %v", apply, err)
	}
	first := &Block{Era: EraByron, Chain: chain.Block{Height: 1, Hash: h(1), PrevHash: genesis.Chain.Hash}}
	out, apply, err := l.Next(first)
	if err != nil || !apply || out.PrevHash != genesis.Chain.PrevHash {
		t.Fatalf("block 1: apply=%v prev=%s %v; want prev %s (the boundary's parent)", apply, out.PrevHash, err, genesis.Chain.PrevHash)
	}
}
