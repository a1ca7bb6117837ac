package disk

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/utxo-cache/utxo-cache/chain"
)

// Balance row (0x04) layout, version 1:
//
//	version   1 byte = 0x01
//	count     uvarint   live outputs
//	value     uint64 hi, uint64 lo   (a Uint128: sums never overflow)
//	assets    uvarint count, then per asset in (policy, name) byte order:
//	          uvarint len, policy, uvarint len, name, uint64 hi, uint64 lo
//
// Version 2 is the row of a value whose address counters (counters.go) are
// not all zero: version 0x02, the fields of version 1, then the counters:
//
//	tx_count, funded_count  uvarint, uvarint
//	funded_sum              uvarint high 64 bits, uvarint low 64 bits
//	spent_count             uvarint
//	spent_sum               uvarint high 64 bits, uvarint low 64 bits
//
// A block that touches an address rewrites its balance row anyway, so the
// counters ride along and cost no row of their own. A row with all-zero
// counters is written as version 1 (the layout of a store that keeps no
// counters), and version 1 reads as all-zero counters.
//
// Version 3 is the row of a value whose assets are in asset rows of their
// own (balanceasset.go): version 0x03, count, value, then in place of the
// assets the number of asset rows (uvarint, at least 1), then the counters
// of version 2 (which may all be zero). A change writes version 3 for a
// value that holds assets and version 1 or 2 for one that holds none; it
// never writes an asset list any more, and splits one it finds into asset
// rows (a store written before asset rows), which raises the schema
// (meta.go).
//
// A row exists while count > 0 or its counters are not all zero; a row of
// count 0 holds no value and no assets.
//
// Example, version 2: 1 live output of 5,000 (0x1388); 2 transactions
// funding 3 outputs of 6,000 in all, spending 2 of 1,000:
//
//	02 01 0000000000000000 0000000000001388 00 02 03 00 f02e 02 00 e807
const (
	balanceVersion          byte = 0x01
	balanceVersionCounters  byte = 0x02
	balanceVersionAssetRows byte = 0x03
)

// balanceRow is a balance row decoded: the balance and the value's counters
// (zero for a version 1 row). A version 3 row has no bal.Assets: assetRows
// counts its asset rows. A version 1 or 2 row lists its assets in
// bal.Assets and has assetRows 0.
type balanceRow struct {
	bal       chain.Balance
	ctr       counterFigures
	assetRows uint64
}

// appendRow appends r as a row of the version its fields call for: 3 when
// it has asset rows, else 1 or 2 (appendBalanceRow).
func appendRow(dst []byte, r *balanceRow) []byte {
	if r.assetRows == 0 {
		return appendBalanceRow(dst, &r.bal, &r.ctr)
	}
	dst = append(dst, balanceVersionAssetRows)
	dst = binary.AppendUvarint(dst, r.bal.Count)
	dst = binary.BigEndian.AppendUint64(dst, r.bal.Value.Hi)
	dst = binary.BigEndian.AppendUint64(dst, r.bal.Value.Lo)
	dst = binary.AppendUvarint(dst, r.assetRows)
	return appendCounterFigures(dst, &r.ctr)
}

func appendBalance(dst []byte, b *chain.Balance) []byte {
	return appendBalanceRow(dst, b, nil)
}

// appendBalanceRow appends the row of balance b and counters c (nil or all
// zero: a version 1 row).
func appendBalanceRow(dst []byte, b *chain.Balance, c *counterFigures) []byte {
	counters := c != nil && !c.zero()
	if counters {
		dst = append(dst, balanceVersionCounters)
	} else {
		dst = append(dst, balanceVersion)
	}
	dst = binary.AppendUvarint(dst, b.Count)
	dst = binary.BigEndian.AppendUint64(dst, b.Value.Hi)
	dst = binary.BigEndian.AppendUint64(dst, b.Value.Lo)
	dst = binary.AppendUvarint(dst, uint64(len(b.Assets)))
	for _, a := range b.Assets {
		dst = appendLenBytes(dst, a.Policy)
		dst = appendLenBytes(dst, a.Name)
		dst = binary.BigEndian.AppendUint64(dst, a.Quantity.Hi)
		dst = binary.BigEndian.AppendUint64(dst, a.Quantity.Lo)
	}
	if counters {
		dst = appendCounterFigures(dst, c)
	}
	return dst
}

func decodeBalance(b []byte) (chain.Balance, error) {
	r, err := decodeBalanceRow(b)
	return r.bal, err
}

// decodeBalanceRow decodes a balance row of any version, strictly: a
// version 2 row of all-zero counters, or of count 0 with a value or assets
// left, and a version 3 row of no asset rows or of count 0, are corrupt.
func decodeBalanceRow(b []byte) (balanceRow, error) {
	d := decbuf{b: b, ctx: "balance"}
	var r balanceRow
	bal := &r.bal
	v := d.byte1()
	if d.err() == nil && v != balanceVersion && v != balanceVersionCounters && v != balanceVersionAssetRows {
		d.fail("unknown version")
	}
	bal.Count = d.uvarint()
	bal.Value = chain.Uint128{Hi: d.u64(), Lo: d.u64()}
	if v == balanceVersionAssetRows {
		r.assetRows = d.uvarint()
		r.ctr = parseCounterFigures(&d)
		if d.err() == nil && (r.assetRows == 0 || bal.Count == 0) {
			d.fail("version 3 with no asset rows or no outputs")
		}
		if err := d.done(); err != nil {
			return balanceRow{}, err
		}
		return r, nil
	}
	if n := d.count(18); n > 0 {
		bal.Assets = make([]chain.AssetSum, n)
		for i := range bal.Assets {
			bal.Assets[i] = chain.AssetSum{
				Policy:   d.lenBytes(maxAssetField),
				Name:     d.lenBytes(maxAssetField),
				Quantity: chain.Uint128{Hi: d.u64(), Lo: d.u64()},
			}
			if i > 0 && d.err() == nil && compareAsset(bal.Assets[i-1].Policy, bal.Assets[i-1].Name, bal.Assets[i].Policy, bal.Assets[i].Name) >= 0 {
				d.fail("assets out of order")
			}
		}
	}
	if v == balanceVersionCounters && d.err() == nil {
		r.ctr = parseCounterFigures(&d)
		if d.err() == nil && r.ctr.zero() {
			d.fail("version 2 with all-zero counters")
		}
		if d.err() == nil && bal.Count == 0 && (!bal.Value.IsZero() || len(bal.Assets) != 0) {
			d.fail("no outputs but a value left")
		}
	}
	if err := d.done(); err != nil {
		return balanceRow{}, err
	}
	return r, nil
}

// compareAsset orders assets by policy, then name, bytewise: the order of
// a balance row's assets.
func compareAsset(policyX, nameX, policyY, nameY []byte) int {
	if c := bytes.Compare(policyX, policyY); c != 0 {
		return c
	}
	return bytes.Compare(nameX, nameY)
}

// balanceDelta accumulates one block's changes to one balance row. Additions
// and subtractions are kept apart so the result is exact whatever the order.
type balanceDelta struct {
	addCount, subCount uint64
	add, sub           chain.Uint128
	assets             map[string]*assetDelta // key: len(policy)||policy||name
	// ctr is the key's counter delta in the batch (derived.setCounters),
	// nil when none.
	ctr *counterFigures
	// address: the key is an address's (DimAddress).
	address bool
}

type assetDelta struct {
	policy, name []byte
	add, sub     chain.Uint128
	// flushBalances' reading of the asset's row, for a value with asset
	// rows: its key, and its quantity if found.
	key   []byte
	cur   chain.Uint128
	found bool
}

func (d *balanceDelta) apply(u *chain.Utxo, sign int, f *assetFilter) {
	if sign > 0 {
		d.addCount++
		d.add = d.add.AddU64(u.Value)
	} else {
		d.subCount++
		d.sub = d.sub.AddU64(u.Value)
	}
	for i := range u.Assets {
		a := &u.Assets[i]
		if !f.keep(a) {
			continue
		}
		if d.assets == nil {
			d.assets = make(map[string]*assetDelta)
		}
		var kb [1 + 2*maxAssetField]byte // the lookup allocates nothing
		k := append(append(append(kb[:0], byte(len(a.Policy))), a.Policy...), a.Name...)
		ad := d.assets[string(k)]
		if ad == nil {
			ad = &assetDelta{policy: a.Policy, name: a.Name}
			d.assets[string(k)] = ad
		}
		if sign > 0 {
			ad.add = ad.add.AddU64(a.Quantity)
		} else {
			ad.sub = ad.sub.AddU64(a.Quantity)
		}
	}
}

// applyFigures returns b with the delta's count and value applied, its
// assets as they were. A result below zero is ErrCorrupt.
func (d *balanceDelta) applyFigures(b chain.Balance) (chain.Balance, error) {
	var ok bool
	if b.Count+d.addCount < d.subCount {
		return b, fmt.Errorf("balance count below zero: %w", ErrCorrupt)
	}
	b.Count = b.Count + d.addCount - d.subCount
	if b.Value, ok = b.Value.Add(d.add).Sub(d.sub); !ok {
		return b, fmt.Errorf("balance value below zero: %w", ErrCorrupt)
	}
	return b, nil
}

// applyTo returns b with the delta applied. A result below zero means the
// stored balance disagrees with the UTXO set: ErrCorrupt.
func (d *balanceDelta) applyTo(b chain.Balance) (chain.Balance, error) {
	b, err := d.applyFigures(b)
	if err != nil || len(d.assets) == 0 {
		return b, err
	}
	var ok bool
	// Merge the delta's assets, sorted, into the row's, which are in
	// (policy, name) order (decodeBalanceRow checks it): linear in the
	// row's assets, however many the address holds, and never writing to
	// b.Assets, which the balance cache may share.
	ds := make([]*assetDelta, 0, len(d.assets))
	for _, ad := range d.assets {
		ds = append(ds, ad)
	}
	slices.SortFunc(ds, func(x, y *assetDelta) int { return compareAsset(x.policy, x.name, y.policy, y.name) })
	out := make([]chain.AssetSum, 0, len(b.Assets)+len(ds))
	i := 0
	for _, ad := range ds {
		for i < len(b.Assets) && compareAsset(b.Assets[i].Policy, b.Assets[i].Name, ad.policy, ad.name) < 0 {
			out = append(out, b.Assets[i])
			i++
		}
		s := chain.AssetSum{Policy: ad.policy, Name: ad.name}
		if i < len(b.Assets) && compareAsset(b.Assets[i].Policy, b.Assets[i].Name, ad.policy, ad.name) == 0 {
			s = b.Assets[i]
			i++
		}
		if s.Quantity, ok = s.Quantity.Add(ad.add).Sub(ad.sub); !ok {
			return b, fmt.Errorf("asset quantity below zero: %w", ErrCorrupt)
		}
		if !s.Quantity.IsZero() {
			out = append(out, s)
		}
	}
	b.Assets = append(out, b.Assets[i:]...)
	return b, nil
}
