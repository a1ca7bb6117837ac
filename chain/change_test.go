package chain_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
)

func changeHash(b byte) chain.Hash {
	var h chain.Hash
	for i := range h {
		h[i] = b
	}
	return h
}

// TestChangeRoundTrip: every kind of record encodes deterministically and
// decodes to what was encoded, one after another in a CBOR sequence.
func TestChangeRoundTrip(t *testing.T) {
	block := &chain.Block{Height: 7, Hash: changeHash(7), PrevHash: changeHash(6), Txs: []chain.Tx{{
		Hash: changeHash(0x70), Outputs: []chain.Output{{Address: "alice", Value: 5}},
	}}}
	changes := []*chain.Change{
		{Seq: 1, Kind: chain.ChangeApply, Block: block,
			After: chain.Summary{Tip: chain.Tip{Height: 7, Hash: changeHash(7)}, UtxoCount: 1, Digest: chain.Digest(changeHash(0xdd))}},
		{Seq: 2, Kind: chain.ChangeRollback, Target: chain.Tip{Height: 6, Hash: changeHash(6)},
			After: chain.Summary{Tip: chain.Tip{Height: 6, Hash: changeHash(6)}}},
		{Seq: 3, Kind: chain.ChangeRollback, Target: chain.Tip{Empty: true, Height: 2},
			After: chain.Summary{Tip: chain.Tip{Empty: true}}},
		{Seq: 4, Kind: chain.ChangeFreeze, Freeze: &chain.Freeze{Reason: "fraud report",
			OutPoints: []chain.OutPoint{{TxHash: changeHash(0x70), Index: 0}, {TxHash: changeHash(0x71), Index: 3}}},
			After: chain.Summary{Tip: chain.Tip{Height: 6, Hash: changeHash(6)}, UtxoCount: 1}},
		{Seq: 5, Kind: chain.ChangeUnfreeze, Freeze: &chain.Freeze{
			OutPoints: []chain.OutPoint{{TxHash: changeHash(0x71), Index: 3}}},
			After: chain.Summary{Tip: chain.Tip{Height: 6, Hash: changeHash(6)}, UtxoCount: 1}},
		{Seq: 6, Kind: chain.ChangeApply, Block: block, SpentKnown: true,
			After: chain.Summary{Tip: chain.Tip{Height: 7, Hash: changeHash(7)}, UtxoCount: 1}},
		{Seq: 7, Kind: chain.ChangeApply, Block: block, SpentKnown: true, Spent: []chain.Utxo{
			{OutPoint: chain.OutPoint{TxHash: changeHash(0x50), Index: 1}, Height: 5, TxPos: 2, Flags: chain.FlagCoinbase,
				Output: chain.Output{Address: "bob", Value: 9, Assets: []chain.Asset{{Policy: []byte{1}, Name: []byte("n"), Quantity: 3}}}},
			{OutPoint: chain.OutPoint{TxHash: changeHash(0x50), Index: 2}, Height: 5, Output: chain.Output{Address: "carol", Value: 1}},
		}, After: chain.Summary{Tip: chain.Tip{Height: 7, Hash: changeHash(7)}, UtxoCount: 1}},
	}
	var seq []byte
	for _, c := range changes {
		var err error
		if seq, err = chain.AppendChangeCBOR(seq, c); err != nil {
			t.Fatal(err)
		}
	}
	again, _ := chain.AppendChangeCBOR(nil, changes[1])
	if !bytes.Contains(seq, again) {
		t.Fatal("a record encodes differently twice")
	}
	rest := seq
	for i, want := range changes {
		got, r, err := chain.DecodeChangeCBOR(rest, chain.Limits{})
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		rest = r
		if got.Seq != want.Seq || got.Kind != want.Kind || got.Target != want.Target || got.After != want.After {
			t.Fatalf("record %d: got %+v, want %+v", i, got, want)
		}
		if want.Block != nil && !bytes.Equal(chain.AppendBlockCBOR(nil, got.Block), chain.AppendBlockCBOR(nil, want.Block)) {
			t.Fatalf("record %d: block differs", i)
		}
		if (want.Freeze == nil) != (got.Freeze == nil) || want.Freeze != nil &&
			(got.Freeze.Reason != want.Freeze.Reason || fmt.Sprint(got.Freeze.OutPoints) != fmt.Sprint(want.Freeze.OutPoints)) {
			t.Fatalf("record %d: freeze %+v, want %+v", i, got.Freeze, want.Freeze)
		}
		if got.SpentKnown != want.SpentKnown || fmt.Sprint(got.Spent) != fmt.Sprint(want.Spent) {
			t.Fatalf("record %d: spent %v %+v, want %v %+v", i, got.SpentKnown, got.Spent, want.SpentKnown, want.Spent)
		}
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes left", len(rest))
	}
}

// TestFreezeChangeGolden writes the record of an unfreeze of one outpoint
// field by field (docs/replication.md, change records).
func TestFreezeChangeGolden(t *testing.T) {
	c := &chain.Change{Seq: 5, Kind: chain.ChangeUnfreeze, Freeze: &chain.Freeze{
		OutPoints: []chain.OutPoint{{TxHash: changeHash(0x71), Index: 3}}},
		After: chain.Summary{Tip: chain.Tip{Height: 6, Hash: changeHash(6)}, UtxoCount: 1, Digest: chain.Digest(changeHash(0xdd))}}
	got, err := chain.AppendChangeCBOR(nil, c)
	if err != nil {
		t.Fatal(err)
	}
	want := "a4" + // a map of 4 pairs
		"63736571" + "05" + // "seq": 5
		"646b696e64" + "68756e667265657a65" + // "kind": "unfreeze"
		"656166746572" + "a3" + // "after": {
		"63746970" + "a2" + "6468617368" + "5820" + strings.Repeat("06", 32) + "66686569676874" + "06" + // "tip": {"hash": …, "height": 6}
		"6a7574786f5f636f756e74" + "01" + // "utxo_count": 1
		"6b7574786f5f646967657374" + "5820" + strings.Repeat("dd", 32) + // "utxo_digest": …}
		"66667265657a65" + "a1" + // "freeze": {
		"696f7574706f696e7473" + "81" + "82" + "5820" + strings.Repeat("71", 32) + "03" // "outpoints": [[hash, 3]]}
	if hex.EncodeToString(got) != want {
		t.Fatalf("unfreeze record\n got %x\nwant %s", got, want)
	}
}

// TestFreezeChangeRejects: freeze records that break the rules are
// ErrInvalidChange: no outpoints, a reason on an unfreeze, none on a freeze,
// a short hash, a freeze beside a block.
func TestFreezeChangeRejects(t *testing.T) {
	after := chain.Summary{Tip: chain.Tip{Height: 6, Hash: changeHash(6)}}
	for _, c := range []*chain.Change{
		{Seq: 1, Kind: chain.ChangeFreeze, Freeze: &chain.Freeze{Reason: "r"}, After: after},
		{Seq: 1, Kind: chain.ChangeFreeze, Freeze: &chain.Freeze{OutPoints: []chain.OutPoint{{}}}, After: after},
		{Seq: 1, Kind: chain.ChangeUnfreeze, Freeze: &chain.Freeze{Reason: "r", OutPoints: []chain.OutPoint{{}}}, After: after},
		{Seq: 1, Kind: chain.ChangeFreeze, After: after},
	} {
		if _, err := chain.AppendChangeCBOR(nil, c); !errors.Is(err, chain.ErrInvalidChange) {
			t.Errorf("encode %+v: %v, want ErrInvalidChange", c, err)
		}
	}
	good, err := chain.AppendChangeCBOR(nil, &chain.Change{Seq: 1, Kind: chain.ChangeFreeze, After: after,
		Freeze: &chain.Freeze{Reason: "r", OutPoints: []chain.OutPoint{{Index: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{
		bytes.Replace(good, []byte("freeze"), []byte("unfreeze"[:6]), 1), // still "unfree": an unknown field
		bytes.Replace(good, []byte{0x61, 0x72}, []byte{0x61, 0x00}, 1),   // a reason with a control character
		bytes.Replace(good, []byte{0x58, 0x20}, []byte{0x58, 0x1f}, 1),   // a 31-byte hash (then trailing garbage)
	} {
		if _, _, err := chain.DecodeChangeCBOR(bad, chain.Limits{}); !errors.Is(err, chain.ErrInvalidChange) {
			t.Errorf("%x: %v, want ErrInvalidChange", bad, err)
		}
	}
}

// TestChangeRejects: malformed records are ErrInvalidChange, never a panic.
func TestChangeRejects(t *testing.T) {
	good, err := chain.AppendChangeCBOR(nil, &chain.Change{Seq: 2, Kind: chain.ChangeRollback,
		Target: chain.Tip{Height: 1, Hash: changeHash(1)}, After: chain.Summary{Tip: chain.Tip{Height: 1, Hash: changeHash(1)}}})
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(good) {
		if _, _, err := chain.DecodeChangeCBOR(good[:n], chain.Limits{}); !errors.Is(err, chain.ErrInvalidChange) {
			t.Fatalf("cut to %d bytes: %v", n, err)
		}
	}
	for _, bad := range [][]byte{
		{0xa0},                            // {}
		{0xf6},                            // null
		{0xa1, 0x63, 's', 'e', 'q', 0x01}, // seq alone
	} {
		if _, _, err := chain.DecodeChangeCBOR(bad, chain.Limits{}); !errors.Is(err, chain.ErrInvalidChange) {
			t.Fatalf("%x: %v", bad, err)
		}
	}
}

func FuzzDecodeChangeCBOR(f *testing.F) {
	good, _ := chain.AppendChangeCBOR(nil, &chain.Change{Seq: 2, Kind: chain.ChangeRollback,
		Target: chain.Tip{Height: 1, Hash: changeHash(1)}, After: chain.Summary{Tip: chain.Tip{Height: 1, Hash: changeHash(1)}}})
	f.Add(good)
	frozen, _ := chain.AppendChangeCBOR(nil, &chain.Change{Seq: 3, Kind: chain.ChangeFreeze,
		Freeze: &chain.Freeze{Reason: "r", OutPoints: []chain.OutPoint{{Index: 1}, {Index: 2}}}})
	f.Add(frozen)
	wallet, _ := chain.AppendChangeCBOR(nil, &chain.Change{Seq: 4, Kind: chain.ChangeWallet, Wallet: []chain.WalletOp{
		{Kind: chain.WalletLease, LeaseID: "w1", OutPoints: []chain.OutPoint{{Index: 1}, {Index: 2}}, ExpiresAt: 1_800_000_600},
		{Kind: chain.WalletRelease, LeaseID: "w0"}, {Kind: chain.WalletExpire, LeaseID: "old"}}})
	f.Add(wallet)
	pending, _ := chain.AppendChangeCBOR(nil, &chain.Change{Seq: 6, Kind: chain.ChangeWallet, Wallet: pendingOps()})
	f.Add(pending)
	spent, _ := chain.AppendChangeCBOR(nil, &chain.Change{Seq: 5, Kind: chain.ChangeApply, SpentKnown: true,
		Block: &chain.Block{Height: 1, Hash: changeHash(1), Txs: []chain.Tx{{Hash: changeHash(2), Outputs: []chain.Output{{Address: "a", Value: 1}}}}},
		Spent: []chain.Utxo{{OutPoint: chain.OutPoint{Index: 1}, Output: chain.Output{Address: "b", Value: 2}}}})
	f.Add(spent)
	f.Add(movesRecord(f))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, _, err := chain.DecodeChangeCBOR(data, chain.Limits{})
		if err != nil {
			return
		}
		// What decodes re-encodes and decodes to the same change.
		enc, err := chain.AppendChangeCBOR(nil, c)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", c, err)
		}
		again, _, err := chain.DecodeChangeCBOR(enc, chain.Limits{})
		if err != nil || again.Seq != c.Seq || again.Kind != c.Kind || again.Target != c.Target || again.After != c.After ||
			fmt.Sprint(again.Freeze) != fmt.Sprint(c.Freeze) || !reflect.DeepEqual(again.Wallet, c.Wallet) ||
			again.SpentKnown != c.SpentKnown || fmt.Sprint(again.Spent) != fmt.Sprint(c.Spent) || !reflect.DeepEqual(again.Pending, c.Pending) {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, c)
		}
	})
}

// TestWalletChangeRecord: a wallet change's record round-trips, and records
// whose operations make no sense are refused.
func TestWalletChangeRecord(t *testing.T) {
	c := &chain.Change{Seq: 9, Kind: chain.ChangeWallet, Wallet: []chain.WalletOp{
		{Kind: chain.WalletLease, LeaseID: "a", OutPoints: []chain.OutPoint{{TxHash: changeHash(1), Index: 3}}, ExpiresAt: 1_800_000_000},
		{Kind: chain.WalletRelease, LeaseID: "b"},
		{Kind: chain.WalletExpire, LeaseID: "c"},
	}, After: chain.Summary{Tip: chain.Tip{Height: 1, Hash: changeHash(1)}, UtxoCount: 4}}
	c.Wallet = append(c.Wallet, pendingOps()...)
	enc, err := chain.AppendChangeCBOR(nil, c)
	if err != nil {
		t.Fatal(err)
	}
	got, rest, err := chain.DecodeChangeCBOR(enc, chain.Limits{})
	if err != nil || len(rest) != 0 || got.Kind != chain.ChangeWallet || !reflect.DeepEqual(got.Wallet, c.Wallet) || got.After != c.After {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for name, ops := range map[string][]chain.WalletOp{
		"none":                  nil,
		"lease without expiry":  {{Kind: chain.WalletLease, LeaseID: "a", OutPoints: []chain.OutPoint{{Index: 1}}}},
		"lease without ops":     {{Kind: chain.WalletLease, LeaseID: "a", ExpiresAt: 1}},
		"release with ops":      {{Kind: chain.WalletRelease, LeaseID: "a", OutPoints: []chain.OutPoint{{Index: 1}}}},
		"bad id":                {{Kind: chain.WalletRelease, LeaseID: "a b"}},
		"unknown kind":          {{Kind: 9, LeaseID: "a"}},
		"post without tx":       {{Kind: chain.WalletPost, Since: 1, ExpiresAt: 2}},
		"post with a lease id":  {{Kind: chain.WalletPost, LeaseID: "a", Tx: pendingOps()[0].Tx, Since: 1, ExpiresAt: 2}},
		"post expiring early":   {{Kind: chain.WalletPost, Tx: pendingOps()[0].Tx, Since: 2, ExpiresAt: 2}},
		"withdraw without hash": {{Kind: chain.WalletWithdraw, Since: 1}},
		"expire with both":      {{Kind: chain.WalletExpire, LeaseID: "a", TxHash: changeHash(1)}},
	} {
		if _, err := chain.AppendChangeCBOR(nil, &chain.Change{Seq: 1, Kind: chain.ChangeWallet, Wallet: ops}); !errors.Is(err, chain.ErrInvalidChange) {
			t.Errorf("%s: encoded (%v)", name, err)
		}
	}
}

// pendingOps are one of each pending operation.
func pendingOps() []chain.WalletOp {
	tx := &chain.Tx{Hash: changeHash(5), Inputs: []chain.OutPoint{{TxHash: changeHash(1), Index: 0}},
		Outputs: []chain.Output{{Address: "a", Value: 1, Assets: []chain.Asset{{Policy: []byte{1}, Name: []byte{2}, Quantity: 3}}}}}
	return []chain.WalletOp{
		{Kind: chain.WalletPost, Tx: tx, Replace: true, Since: 1_800_000_000, ExpiresAt: 1_801_209_600},
		{Kind: chain.WalletWithdraw, TxHash: changeHash(5), Since: 1_800_000_001},
		{Kind: chain.WalletExpire, TxHash: changeHash(6)},
	}
}

// pendingMoves are a transaction entering the pending set and one leaving
// it (conflicting), each with the outputs its inputs spend.
func pendingMoves() []chain.PendingMove {
	tx := pendingOps()[0].Tx
	spent := []chain.Utxo{{OutPoint: tx.Inputs[0], Height: 3, TxPos: 1, Output: chain.Output{Address: "b", Value: 7}}}
	return []chain.PendingMove{
		{Tx: tx, Status: chain.PendingActive, Since: 1_800_000_000, Spent: spent},
		{Tx: tx, Status: chain.PendingConflicting, Since: 1_800_000_000, Spent: spent},
	}
}

func movesRecord(tb testing.TB) []byte {
	rec, err := chain.AppendChangeCBOR(nil, &chain.Change{Seq: 9, Kind: chain.ChangeWallet, Wallet: pendingOps()[1:2], Pending: pendingMoves()})
	if err != nil {
		tb.Fatal(err)
	}
	return rec
}

// TestPendingMovesRecord: the "pending" member of apply, rollback and
// wallet records round-trips, is written as docs/replication.md says (the
// member's head and fields checked byte by byte), is absent when there are
// no moves (older records decode as before), and bad moves are refused.
func TestPendingMovesRecord(t *testing.T) {
	block := &chain.Block{Height: 7, Hash: changeHash(7), Txs: []chain.Tx{{Hash: changeHash(0x70), Outputs: []chain.Output{{Address: "a", Value: 5}}}}}
	for _, c := range []*chain.Change{
		{Seq: 1, Kind: chain.ChangeApply, Block: block, SpentKnown: true, Pending: pendingMoves()},
		{Seq: 2, Kind: chain.ChangeRollback, Target: chain.Tip{Height: 6, Hash: changeHash(6)}, Pending: pendingMoves()[:1]},
		{Seq: 3, Kind: chain.ChangeWallet, Wallet: pendingOps()[1:2], Pending: pendingMoves()},
	} {
		enc, err := chain.AppendChangeCBOR(nil, c)
		if err != nil {
			t.Fatal(err)
		}
		got, rest, err := chain.DecodeChangeCBOR(enc, chain.Limits{})
		if err != nil || len(rest) != 0 || !reflect.DeepEqual(got.Pending, c.Pending) {
			t.Fatalf("%s: %+v, %v", c.Kind, got, err)
		}
		// "pending" (7 letters), an array of len(c.Pending) maps of 4 pairs,
		// the first key "tx".
		head := append([]byte{0x67}, "pending"...)
		head = append(head, 0x80|byte(len(c.Pending)), 0xa4, 0x62, 't', 'x')
		if !bytes.Contains(enc, head) {
			t.Fatalf("%s: no pending member head %x in %x", c.Kind, head, enc)
		}
		// "since": 1800000000, "spent": [[tx_hash, 0, 3, 1, 0, output]]
		since := append(append([]byte{0x65}, "since"...), 0x1a, 0x6b, 0x49, 0xd2, 0x00, 0x65)
		since = append(append(append(since, "spent"...), 0x81, 0x86, 0x58, 0x20), func() []byte { h := changeHash(1); return h[:] }()...)
		since = append(since, 0x00, 0x03, 0x01, 0x00)
		if !bytes.Contains(enc, since) {
			t.Fatalf("%s: no since and spent %x in %x", c.Kind, since, enc)
		}
		status := append(append([]byte{0x66}, "status"...), 0x67)
		if !bytes.Contains(enc, append(status, "pending"...)) {
			t.Fatalf("%s: no status", c.Kind)
		}
		c.Pending = nil
		plain, _ := chain.AppendChangeCBOR(nil, c)
		if bytes.Contains(plain, []byte("pending\x81")) || bytes.Contains(plain, head[:8]) {
			t.Fatalf("%s: a pending member without moves", c.Kind)
		}
	}
	bad := map[string]func(mv *chain.PendingMove){
		"no tx":          func(mv *chain.PendingMove) { mv.Tx = nil },
		"no status":      func(mv *chain.PendingMove) { mv.Status = 0 },
		"unknown status": func(mv *chain.PendingMove) { mv.Status = 9 },
		"spent missing":  func(mv *chain.PendingMove) { mv.Spent = nil },
	}
	for name, f := range bad {
		mv := pendingMoves()
		f(&mv[0])
		if _, err := chain.AppendChangeCBOR(nil, &chain.Change{Seq: 1, Kind: chain.ChangeWallet, Wallet: pendingOps()[1:2], Pending: mv}); !errors.Is(err, chain.ErrInvalidChange) {
			t.Errorf("%s: encoded (%v)", name, err)
		}
	}
	frozen := &chain.Change{Seq: 1, Kind: chain.ChangeFreeze, Freeze: &chain.Freeze{Reason: "r", OutPoints: []chain.OutPoint{{Index: 1}}}, Pending: pendingMoves()}
	if _, err := chain.AppendChangeCBOR(nil, frozen); !errors.Is(err, chain.ErrInvalidChange) {
		t.Errorf("a freeze with moves: %v", err)
	}
	// A spent output that is not the input's is refused by the decoder.
	mv := pendingMoves()
	mv[0].Spent = []chain.Utxo{{OutPoint: chain.OutPoint{TxHash: changeHash(2)}, Output: chain.Output{Address: "b", Value: 7}}}
	enc, err := chain.AppendChangeCBOR(nil, &chain.Change{Seq: 1, Kind: chain.ChangeWallet, Wallet: pendingOps()[1:2], Pending: mv})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := chain.DecodeChangeCBOR(enc, chain.Limits{}); !errors.Is(err, chain.ErrInvalidChange) {
		t.Errorf("a spent output of another outpoint: %v", err)
	}
}
