package query

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"

	"github.com/utxo-cache/utxo-cache/cache"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/workload"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
	"github.com/utxo-cache/utxo-cache/writer"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomized tests (0: a random one, printed)")

// The reference encoding is the one the read path used before answers were
// encoded in place: the output decoded into a chain.Utxo (disk.View.Utxo and
// List), then encoded from its fields. appendUtxo and appendSpent, which read
// the stored bytes (disk.UtxoRef), must give the same bytes.

func referenceUtxo(dst []byte, u *chain.Utxo) []byte {
	dst = append(dst, `{"tx_hash":`...)
	dst = appendHexString(dst, u.TxHash[:])
	dst = append(dst, `,"index":`...)
	dst = strconv.AppendUint(dst, uint64(u.Index), 10)
	dst = append(dst, `,"address":`...)
	dst = appendString(dst, u.Address)
	dst = append(dst, `,"value":"`...)
	dst = strconv.AppendUint(dst, u.Value, 10)
	dst = append(dst, `","assets":[`...)
	for i, a := range u.Assets {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"policy":`...)
		dst = appendHexString(dst, a.Policy)
		dst = append(dst, `,"name":`...)
		dst = appendHexString(dst, a.Name)
		dst = append(dst, `,"quantity":"`...)
		dst = strconv.AppendUint(dst, a.Quantity, 10)
		dst = append(dst, `"}`...)
	}
	dst = append(dst, ']')
	if u.DatumHash != nil {
		dst = append(dst, `,"datum_hash":`...)
		dst = appendHexString(dst, u.DatumHash[:])
	}
	if u.Datum != nil {
		dst = append(dst, `,"datum":`...)
		dst = appendHexString(dst, u.Datum)
	}
	if u.ScriptRef != nil {
		dst = append(dst, `,"script_ref":`...)
		dst = appendHexString(dst, u.ScriptRef)
	}
	dst = append(dst, `,"height":`...)
	dst = strconv.AppendUint(dst, u.Height, 10)
	if u.Coinbase() {
		dst = append(dst, `,"coinbase":true,"spendable_at_height":`...)
		dst = strconv.AppendUint(dst, u.Height+100, 10) // Bitcoin's maturity, written out
	}
	if u.CollateralReturn() {
		dst = append(dst, `,"collateral_return":true`...)
	}
	return append(dst, '}')
}

func referenceSpent(dst []byte, s *chain.Spent) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, `{"tx_hash":`...)
	dst = appendHexString(dst, s.TxHash[:])
	dst = append(dst, `,"height":`...)
	dst = strconv.AppendUint(dst, s.Height, 10)
	return append(dst, '}')
}

// referenceOutPoint is the reference body and status of GET /v1/utxos/{op}.
func referenceOutPoint(t *testing.T, v *disk.View, op chain.OutPoint) ([]byte, int) {
	u, spent, err := v.Utxo(op)
	if errors.Is(err, chain.ErrNotFound) {
		return appendErrorBody(nil, "not_found", "outpoint "+op.String()+" is not known at this tip"), 404
	}
	if err != nil {
		t.Fatal(err)
	}
	body := append([]byte(nil), `"utxo":`...)
	body = referenceUtxo(body, &u)
	body = append(body, `,"spent":`...)
	body = referenceSpent(body, spent)
	return append(body, '}'), 200
}

// referencePage is the reference body of a page, and its cursor.
func referencePage(t *testing.T, s *Server, v *disk.View, address string, desc bool, limit int, after *chain.Position) ([]byte, *chain.Position) {
	items, next, err := v.List(disk.ListQuery{Dim: disk.DimAddress, Value: []byte(address), After: after, Desc: desc, Limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	body := append([]byte(nil), `"address":`...)
	body = appendString(body, address)
	body = append(body, `,"utxos":[`...)
	for i := range items {
		if i > 0 {
			body = append(body, ',')
		}
		body = referenceUtxo(body, &items[i])
	}
	body = append(body, `],"next_cursor":`...)
	if next == nil {
		body = append(body, "null"...)
	} else {
		body = append(body, '"')
		body = s.cursors.append(body, address, desc, *next)
		body = append(body, '"')
	}
	return append(body, '}'), next
}

func referenceLookup(t *testing.T, v *disk.View, ops []chain.OutPoint) []byte {
	body := append([]byte(nil), `"results":[`...)
	for i, op := range ops {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, `{"tx_hash":`...)
		body = appendHexString(body, op.TxHash[:])
		body = append(body, `,"index":`...)
		body = strconv.AppendUint(body, uint64(op.Index), 10)
		u, spent, err := v.Utxo(op)
		if errors.Is(err, chain.ErrNotFound) {
			body = append(body, `,"utxo":null,"spent":null}`...)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		body = append(body, `,"utxo":`...)
		body = referenceUtxo(body, &u)
		body = append(body, `,"spent":`...)
		body = referenceSpent(body, spent)
		body = append(body, '}')
	}
	return append(body, "]}"...)
}

// oddAddresses are addresses whose JSON needs every escape: quote,
// backslash, control characters, multi-byte runes.
var oddAddresses = []string{
	`q"uote`, `back\slash`, "ctl\x01\x1f\t\n\r", "ünïcødé €𝄞", "<tag>&\u2028\u2029", "\x7f del",
}

// mapTier is a cache.Tier that keeps every entry: it makes the server copy
// answers out of its pooled buffers, and serves them back.
type mapTier struct {
	mu      sync.Mutex
	entries map[string]cache.Entry
	floors  map[string]uint64
}

func newMapTier() *mapTier {
	return &mapTier{entries: map[string]cache.Entry{}, floors: map[string]uint64{}}
}

func (m *mapTier) Name() string { return "map" }

func (m *mapTier) Get(_ context.Context, key, guard string) (cache.Entry, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	return e, ok && e.Seq >= m.floors[guard]
}

func (m *mapTier) Set(_ context.Context, key, guard string, e cache.Entry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.Seq >= m.floors[guard] {
		m.entries[key] = e
	}
}

func (m *mapTier) Invalidate(_ context.Context, seq uint64, guards []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, g := range guards {
		m.floors[g] = max(m.floors[g], seq)
	}
	return nil
}

// TestAnswersMatchReference builds randomized chains (both workload
// profiles: assets, datums, datum hashes, script refs, coinbase and
// collateral-return outputs, script refs, spent records within the prune depth; some
// outputs moved to addresses that need JSON escapes), then compares every
// answer of the in-place read path, byte for byte, with the reference
// encoding: every outpoint ever created (live, spent, pruned away) and a few
// unknown ones, lookups of random batches, and every page of every address
// in both orders at several limits. Servers with no tier (pooled buffers) and
// with a memory tier (entries copied out) both answer; every answer is
// released, so reused buffers are compared too.
func TestAnswersMatchReference(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay with -run '%s$' -seed=%d)", seed, t.Name(), seed)
	for _, profile := range []workload.Profile{workload.Bitcoin, workload.Cardano} {
		rng := rand.New(rand.NewPCG(seed, uint64(profile)))
		store, err := disk.Open(t.TempDir(), disk.Options{PruneDepth: 8, RollbackWindow: 16, CacheBytes: 8 << 20, MemTableBytes: 4 << 20})
		if err != nil {
			t.Fatal(err)
		}
		bare := New(store, Options{HotAddresses: -1})
		cached := New(store, Options{Tiers: []cache.Tier{newMapTier()}, HotAddresses: -1})
		w := writer.New(store, writer.Options{})
		w.Subscribe(bare)
		w.Subscribe(cached)

		gen, err := workload.New(workload.Options{Seed: int64(rng.Uint64() >> 1), Profile: profile, TxsPerBlock: 20, Addresses: 50})
		if err != nil {
			t.Fatal(err)
		}
		var created []chain.OutPoint
		addresses := map[string]bool{}
		ctx := context.Background()
		for h := range 30 {
			var blk *chain.Block
			if h == 0 {
				blk = gen.NextSeed(300)
			} else {
				blk = gen.Next()
			}
			for i := range blk.Txs {
				tx := &blk.Txs[i]
				for j := range tx.Outputs {
					if rng.IntN(6) == 0 {
						tx.Outputs[j].Address = oddAddresses[rng.IntN(len(oddAddresses))]
					}
					if rng.IntN(8) == 0 { // the workload makes no script refs
						tx.Outputs[j].ScriptRef = []byte{byte(rng.Uint32()), 0x82, 0x01}
					}
				}
				tx.Creates(func(index uint32, out *chain.Output, _ bool) {
					created = append(created, chain.OutPoint{TxHash: tx.Hash, Index: index})
					addresses[out.Address] = true
				})
			}
			if _, err := w.Apply(ctx, blk); err != nil {
				t.Fatalf("block %d: %v", blk.Height, err)
			}
		}
		for range 5 {
			var h chain.Hash
			h[0], h[1] = 0xee, byte(rng.Uint32())
			created = append(created, chain.OutPoint{TxHash: h, Index: rng.Uint32()})
		}

		v, err := store.PublishedView()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []*Server{bare, cached} {
			for _, op := range created {
				want, status := referenceOutPoint(t, v, op)
				for range 2 { // the second read of the cached server may hit
					ans, err := s.Utxo(ctx, op)
					if err != nil {
						t.Fatal(err)
					}
					if ans.Status != status || !bytes.Equal(ans.Body, want) || ans.ETag != etagOf(want) {
						t.Fatalf("outpoint %s: %d %s (etag %s)\nreference %d %s", op, ans.Status, ans.Body, ans.ETag, status, want)
					}
					ans.Release()
				}
			}
			for range 20 {
				ops := make([]chain.OutPoint, 1+rng.IntN(40))
				for i := range ops {
					ops[i] = created[rng.IntN(len(created))]
				}
				ans, err := s.Lookup(ctx, ops)
				if err != nil {
					t.Fatal(err)
				}
				if want := referenceLookup(t, v, ops); !bytes.Equal(ans.Body, want) {
					t.Fatalf("lookup %v:\n%s\nreference\n%s", ops, ans.Body, want)
				}
				ans.Release()
			}
			for a := range addresses {
				for _, desc := range []bool{false, true} {
					limit := []int{1, 3, 7, 100}[rng.IntN(4)]
					cursor := ""
					var after *chain.Position
					for pages := 0; ; pages++ {
						want, next := referencePage(t, s, v, a, desc, limit, after)
						ans, err := s.AddressUtxos(ctx, a, desc, limit, cursor)
						if err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(ans.Body, want) || ans.ETag != etagOf(want) {
							t.Fatalf("address %q desc %v limit %d page %d:\n%s\nreference\n%s", a, desc, limit, pages, ans.Body, want)
						}
						ans.Release()
						if next == nil {
							break
						}
						after = next
						cursor = string(s.cursors.append(nil, a, desc, *next))
					}
				}
			}
		}
		v.Close()
		w.Close()
		bare.Close()
		cached.Close()
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzUtxoEncoding: any stored bytes that read as a record encode, in
// place, to the bytes the reference encoding gives for the decoded record.
func FuzzUtxoEncoding(f *testing.F) {
	for _, g := range []string{
		// record.go's example: a live coinbase output of 50 BTC to "1A1z".
		"0101000000000000000900000000018" + "0e497d012043141317a00000000",
		// spent, with an asset, a datum hash, a datum and a script ref.
		"0102" + "0000000000000001" + "00000002" + "02" + "05" + "02" + "2261" + "01" + "01aa" + "02bbcc" + "07" +
			"01" + "1111111111111111111111111111111111111111111111111111111111111111" + "01dd" + "02eeff" +
			"2222222222222222222222222222222222222222222222222222222222222222" + "0000000000000009",
	} {
		b, err := hex.DecodeString(g)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	op := chain.OutPoint{TxHash: chain.Hash{7}, Index: 2}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r disk.UtxoRef
		if err := disk.ParseRecord(op, b, &r); err != nil {
			return
		}
		u, spent := r.Utxo()
		if got, want := appendUtxo(nil, &r), referenceUtxo(nil, &u); !bytes.Equal(got, want) {
			t.Fatalf("in place %s\nreference %s", got, want)
		}
		if got, want := appendSpent(nil, &r), referenceSpent(nil, spent); !bytes.Equal(got, want) {
			t.Fatalf("spent in place %s\nreference %s", got, want)
		}
		if got, want := appendChainUtxo(nil, &u), appendUtxo(nil, &r); !bytes.Equal(got, want) {
			t.Fatalf("from chain.Utxo %s\nin place %s", got, want)
		}
		if got, want := appendPendingUtxoRef(nil, &r, 1764300000), appendPendingUtxo(nil, &u, 1764300000); !bytes.Equal(got, want) {
			t.Fatalf("unconfirmed in place %s\nfrom chain.Utxo %s", got, want)
		}
	})
}

// TestChainUtxoEncodingMatchesStored: for random outputs, with every field
// empty, nil, at its size limit or one past it, appendChainUtxo gives the
// bytes appendUtxo gives for the output's stored form (the index row a
// listing reads, disk.IndexRef), as appendPendingUtxo gives the bytes of
// appendPendingUtxoRef for an unconfirmed one, and storable holds exactly when the store
// reads that form back. Kept pages append added outputs with the first and
// skip the outputs storable refuses (patchedPage), so they hold what a disk
// read of the listing encodes.
func TestChainUtxoEncodingMatchesStored(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay with -run '%s$' -seed=%d)", seed, t.Name(), seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	// blob returns nil, empty, short, at max or one past it, or random.
	blob := func(max int) []byte {
		switch rng.IntN(6) {
		case 0:
			return nil
		case 1:
			return []byte{}
		case 2:
			return []byte{byte(rng.Uint32())}
		case 3:
			return make([]byte, max)
		case 4:
			if rng.IntN(4) == 0 {
				return make([]byte, max+1)
			}
		}
		b := make([]byte, rng.IntN(max/4+1))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	var buf []byte
	var r disk.UtxoRef
	stored := 0
	for i := range 1000 {
		u := chain.Utxo{
			OutPoint: chain.OutPoint{TxHash: chain.Hash{byte(i), byte(i >> 8)}, Index: rng.Uint32()},
			Height:   rng.Uint64() >> rng.IntN(64),
			TxPos:    rng.Uint32() >> rng.IntN(32),
			Flags:    uint8(rng.IntN(4)),
		}
		u.Value = rng.Uint64() >> rng.IntN(64)
		switch rng.IntN(4) {
		case 0:
			u.Address = oddAddresses[rng.IntN(len(oddAddresses))]
		case 1:
			u.Address = string(blob(chain.MaxAddressLen))
		default:
			u.Address = "addr" + strconv.Itoa(rng.IntN(100))
		}
		if rng.IntN(50) == 0 {
			u.Flags |= 1 << (2 + rng.IntN(6)) // a flag the store does not know
		}
		for range rng.IntN(4) {
			u.Assets = append(u.Assets, chain.Asset{Policy: blob(chain.MaxPolicyLen), Name: blob(chain.MaxAssetNameLen), Quantity: rng.Uint64() >> rng.IntN(64)})
		}
		if rng.IntN(3) == 0 {
			u.DatumHash = &chain.Hash{byte(rng.Uint32()), 1}
		}
		u.Datum = blob(chain.MaxDatumLen)
		u.ScriptRef = blob(chain.MaxScriptRefLen)

		var err error
		buf, err = disk.IndexRef(buf, &u, &r)
		if ok := storable(&u); ok != (err == nil) {
			t.Fatalf("output %d: storable %v, but the stored form reads back with error %v", i, ok, err)
		}
		if err != nil {
			continue
		}
		stored++
		if got, want := appendChainUtxo(nil, &u), appendUtxo(nil, &r); !bytes.Equal(got, want) {
			t.Fatalf("output %d from chain.Utxo %s\nstored form %s", i, got, want)
		}
		since := rng.Uint64() >> rng.IntN(64)
		if got, want := appendPendingUtxo(nil, &u, since), appendPendingUtxoRef(nil, &r, since); !bytes.Equal(got, want) {
			t.Fatalf("output %d unconfirmed, from chain.Utxo %s\nstored form %s", i, got, want)
		}
	}
	if stored < 200 {
		t.Fatalf("only %d of the outputs were storable: the generator is off", stored)
	}
}
