package disk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"maps"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/utxo-cache/utxo-cache/chain"
)

var (
	goldenHash2 = chain.Hash{0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22,
		0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22}
	goldenHex2 = strings.Repeat("22", 32)
)

// TestPendingRowGoldens pins the layouts of pending.go's rows, written field
// by field as the comments there document them, and feeds every truncation
// to the decoders.
func TestPendingRowGoldens(t *testing.T) {
	tx := &chain.Tx{Hash: goldenHash2, Inputs: []chain.OutPoint{{TxHash: chain.Hash{1}, Index: 1}}, Outputs: []chain.Output{{Address: "a", Value: 5}}}
	e := pendingEntry{order: 0x30000, since: 1764300000, expires: 1764300000 + chain.DefaultPendingTTL, tx: tx}
	want := unhex(t, "01 0000000000030000 00000000692914e0 00000000693b89e0 00")
	want = chain.AppendTxCBOR(want, tx)
	got := appendPendingRow(nil, &e)
	if !bytes.Equal(got, want) {
		t.Fatalf("pending row %x, want %x", got, want)
	}
	back, err := decodePendingRow(got)
	if err != nil || back.order != e.order || back.since != e.since || back.expires != e.expires || back.replace || !reflect.DeepEqual(back.tx, tx) {
		t.Fatalf("pending row decodes as %+v, %v", back, err)
	}

	spend := unhex(t, "01"+goldenHex2+"00000001")
	if got := appendSpendRow(nil, spendRef{goldenHash2, 1}); !bytes.Equal(got, spend) {
		t.Fatalf("spend row %x, want %x", got, spend)
	}
	u := chain.Utxo{OutPoint: chain.OutPoint{TxHash: goldenHash2}, Output: chain.Output{Address: "a", Value: 5}}
	out := unhex(t, "01 00000000692914e0"+goldenHex2+"01 01 0000000000000000 00000000 00 05 01 61 00 00 00 00")
	if got := appendPendingOutRow(nil, 1764300000, &u); !bytes.Equal(got, out) {
		t.Fatalf("pending output row %x, want %x", got, out)
	}
	status := statusRow{info: chain.PendingInfo{TxHash: goldenHash2, Status: chain.PendingConfirmed, Since: 1764300000, Height: 7, Order: 0x30000}, forgetAt: 7}
	stat := unhex(t, "01 02 00000000692914e0 0000000000000007"+strings.Repeat("00", 32)+"0000000000000007 0000000000030000")
	if got := appendStatusRow(nil, &status); !bytes.Equal(got, stat) {
		t.Fatalf("status row %x, want %x", got, stat)
	}
	items := []blockPendingItem{{status: chain.PendingConfirmed, hash: goldenHash2, row: want}}
	blk := binary.AppendUvarint(unhex(t, "01 01 02"+goldenHex2), uint64(len(want))) // 97 01
	blk = append(blk, want...)
	if got := appendBlockPendingRow(nil, items); !bytes.Equal(got, blk) {
		t.Fatalf("block pending row %x, want %x", got, blk)
	}
	for kind, g := range [][]byte{want, spend, out, append(spend, out[9:]...), stat, blk} {
		for n := range len(g) {
			if err := decodePendingKind(byte(kind), g[:n]); err == nil {
				t.Errorf("kind %d: a truncation to %d of %d bytes decodes", kind, n, len(g))
			}
		}
		if err := decodePendingKind(byte(kind), g); err != nil {
			t.Errorf("kind %d: the golden does not decode: %v", kind, err)
		}
	}
}

// decodePendingKind decodes b as the kind-th pending row and checks that
// it encodes back to b (or, for the 0x0b row, whose CBOR the decoder may
// accept in more than one spelling, to an encoding that decodes the same).
func decodePendingKind(kind byte, b []byte) error {
	var got []byte
	switch kind % pendingKinds {
	case 0:
		e, err := decodePendingRow(b)
		if err != nil {
			return err
		}
		again, err := decodePendingRow(appendPendingRow(nil, &e))
		if err != nil || again.order != e.order || again.since != e.since || again.expires != e.expires || again.replace != e.replace || !reflect.DeepEqual(again.tx, e.tx) {
			return errors.New("the pending row does not encode back")
		}
		return nil
	case 1:
		r, err := decodeSpendRow(b)
		if err != nil {
			return err
		}
		got = appendSpendRow(nil, r)
	case 2:
		since, u, err := decodePendingOutRow(0, b)
		if err != nil {
			return err
		}
		got = appendPendingOutRow(nil, since, &u)
	case 3:
		r, u, err := decodePendingSpentRow(0, b)
		if err != nil {
			return err
		}
		got = appendPendingSpentRow(nil, r, &u)
	case 4:
		r, err := decodeStatusRow(goldenHash2, b)
		if err != nil {
			return err
		}
		got = appendStatusRow(nil, &r)
	case 5:
		items, err := decodeBlockPendingRow(b)
		if err != nil {
			return err
		}
		got = appendBlockPendingRow(nil, items)
	}
	if !bytes.Equal(got, b) {
		return errors.New("encodes back differently")
	}
	return nil
}

const pendingKinds = 6

// FuzzPendingRows feeds arbitrary bytes to the decoders of the pending
// rows: none may panic, a failure must be ErrCorrupt, and what decodes
// encodes back (decodePendingKind).
func FuzzPendingRows(f *testing.F) {
	tx := &chain.Tx{Hash: goldenHash2, Inputs: []chain.OutPoint{{TxHash: chain.Hash{1}, Index: 1}}, Outputs: []chain.Output{{Address: "a", Value: 5, Assets: []chain.Asset{{Policy: []byte{1}, Name: []byte{2}, Quantity: 3}}}}}
	row := appendPendingRow(nil, &pendingEntry{order: 1, since: 2, expires: 3, replace: true, tx: tx})
	u := chain.Utxo{OutPoint: chain.OutPoint{TxHash: goldenHash2}, Output: tx.Outputs[0]}
	for kind, g := range [][]byte{row, appendSpendRow(nil, spendRef{goldenHash2, 4}), appendPendingOutRow(nil, 9, &u),
		appendPendingSpentRow(nil, spendRef{goldenHash2, 4}, &u),
		appendStatusRow(nil, &statusRow{info: chain.PendingInfo{Status: chain.PendingConflicting, ConflictsWith: goldenHash2, Since: 5}, forgetAt: 3}),
		appendBlockPendingRow(nil, []blockPendingItem{{status: chain.PendingConflicting, hash: goldenHash2, row: row}})} {
		f.Add(byte(kind), g)
	}
	f.Fuzz(func(t *testing.T, kind byte, b []byte) {
		err := decodePendingKind(kind, b)
		if err != nil && !errors.Is(err, ErrCorrupt) && err.Error() != "encodes back differently" && err.Error() != "the pending row does not encode back" {
			t.Fatalf("kind %d: error %v is not ErrCorrupt", kind%pendingKinds, err)
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("kind %d: %x: %v", kind%pendingKinds, b, err)
		}
	})
}

// TestSpenderShardsCount: after random additions, replacements and
// removals (of present and absent outpoints), a spender map holds exactly
// the expected entries, counts them, keeps no transaction without one,
// and every earlier map is unchanged.
func TestSpenderShardsCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m := new(spenderShards)
	want := map[chain.OutPoint]spendRef{}
	check := func(m *spenderShards, want map[chain.OutPoint]spendRef) {
		t.Helper()
		total := 0
		for _, sh := range m.shard {
			for h, tx := range sh {
				if len(tx) == 0 {
					t.Fatalf("transaction %s kept with no spender", h)
				}
				total += len(tx)
			}
		}
		if m.n != len(want) || total != len(want) {
			t.Fatalf("count %d, %d entries, want %d", m.n, total, len(want))
		}
		for op, r := range want {
			if got, ok := m.get(op); !ok || got != r {
				t.Fatalf("%s: %v %v, want %v", op, got, ok, r)
			}
		}
	}
	for range 300 {
		changes := map[chain.OutPoint]spendChange{}
		for range rng.IntN(20) {
			// A small space of outpoints, so that changes hit present ones.
			op := chain.OutPoint{TxHash: chain.Hash{byte(rng.IntN(4)), byte(rng.IntN(16))}, Index: uint32(rng.IntN(4))}
			changes[op] = spendChange{ref: spendRef{tx: chain.Hash{byte(rng.Uint32())}, input: rng.Uint32()}, del: rng.IntN(3) == 0}
		}
		prev, prevWant := m, maps.Clone(want)
		m = m.with(changes)
		for op, c := range changes {
			if c.del {
				delete(want, op)
			} else {
				want[op] = c.ref
			}
		}
		check(m, want)
		check(prev, prevWant)
	}
}
