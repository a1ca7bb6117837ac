package chain

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"math/rand/v2"
	"strings"
	"testing"
)

// goldenUtxo sets every field of enc(u), with its assets out of order.
func goldenUtxo() *Utxo {
	dh := fillHash(0xdd)
	return &Utxo{
		OutPoint: OutPoint{TxHash: fillHash(0xaa), Index: 0x01020304},
		Output: Output{
			Address: "addr1",
			Value:   0x1122334455667788,
			Assets: []Asset{
				{Policy: []byte{0xbb, 0xbb}, Name: []byte("n2"), Quantity: 7},
				{Policy: []byte{0xbb, 0xbb}, Name: []byte("n1"), Quantity: 0x100},
			},
			DatumHash: &dh,
			Datum:     []byte{0xde, 0xad},
		},
		Height: 0x0a0b0c0d0e0f1011,
		TxPos:  9, // not part of the digest
		Flags:  FlagCoinbase | FlagCollateralReturn,
	}
}

// goldenEnc is enc(goldenUtxo()) of docs/digest.md, written out by hand.
var goldenEnc = strings.Join([]string{
	strings.Repeat("aa", 32),  // tx hash
	"01020304",                // output index
	"00000005" + "6164647231", // bytes32("addr1")
	"1122334455667788",        // value
	"00000002",                // asset count, then assets in (policy, name) order:
	"00000002bbbb" + "000000026e31" + "0000000000000100", // bbbb / "n1" / 256
	"00000002bbbb" + "000000026e32" + "0000000000000007", // bbbb / "n2" / 7
	"00000020" + strings.Repeat("dd", 32),                // datum_hash
	"00000002dead",                                       // datum
	"00000000",                                           // script_ref absent
	"0a0b0c0d0e0f1011",                                   // created height
	"03",                                                 // flags: coinbase | collateral return
}, "")

// goldenDigest is SHA-256(goldenEnc), the digest of the set {goldenUtxo()}.
const goldenDigest = "01b5e106b26aa186c410770e9f65edd7331776329e57c08661cad5ed0d35aba2"

func TestDigestGolden(t *testing.T) {
	want, err := hex.DecodeString(goldenEnc)
	if err != nil {
		t.Fatal(err)
	}
	u := goldenUtxo()
	if got := AppendDigestEncoding(nil, u); !bytes.Equal(got, want) {
		t.Fatalf("enc(u):\n got %x\nwant %x", got, want)
	}
	if u.Assets[0].Quantity != 7 {
		t.Fatal("AppendDigestEncoding reordered the caller's assets")
	}
	if sum := sha256.Sum256(want); hex.EncodeToString(sum[:]) != goldenDigest {
		t.Fatalf("goldenDigest is not SHA-256(goldenEnc): %x", sum)
	}
	var d Digest
	d.Add(u)
	if d.String() != goldenDigest {
		t.Fatalf("digest = %s, want %s", d, goldenDigest)
	}
	d.Sub(u)
	if d != (Digest{}) || d.String() != strings.Repeat("0", 64) {
		t.Fatalf("digest after Sub = %s", d)
	}
}

var seedFlag = flag.Uint64("seed", 0, "seed of the randomized tests (0: a random one, printed)")

// testSeed returns -seed, or a random seed, and logs it for replay.
func testSeed(t *testing.T) uint64 {
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	return seed
}

// TestDigestOrderIndependent adds a set of UTXOs in one random order and
// removes them in another (interleaved with re-adds), checking that the sum
// depends only on the set. The seed is printed so a failure can be replayed.
func TestDigestOrderIndependent(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed))
	var utxos []*Utxo
	for i := range 200 {
		u := goldenUtxo()
		u.Index = uint32(i)
		u.Value = rng.Uint64()
		u.Flags = uint8(rng.IntN(4))
		if rng.IntN(2) == 0 {
			u.Assets, u.DatumHash, u.Datum = nil, nil, nil
		}
		utxos = append(utxos, u)
	}
	var all Digest
	for _, u := range utxos {
		all.Add(u)
	}
	for range 5 {
		var d Digest
		for _, i := range rng.Perm(len(utxos)) {
			d.Add(utxos[i])
		}
		if d != all {
			t.Fatalf("sum depends on order: %s vs %s", d, all)
		}
		// Remove half, re-add them in another order, then remove all.
		perm := rng.Perm(len(utxos))
		for _, i := range perm[:100] {
			d.Sub(utxos[i])
		}
		for _, i := range rng.Perm(100) {
			d.Add(utxos[perm[i]])
		}
		if d != all {
			t.Fatalf("sub and re-add changed the digest")
		}
		for _, i := range rng.Perm(len(utxos)) {
			d.Sub(utxos[i])
		}
		if d != (Digest{}) {
			t.Fatalf("digest of the empty set is %s", d)
		}
	}
}

// TestDigestWraps checks the carry and borrow across all four 64-bit limbs,
// modulo 2^256.
func TestDigestWraps(t *testing.T) {
	var one, max [32]byte
	one[31] = 1
	for i := range max {
		max[i] = 0xff
	}
	var d Digest
	d.addTerm(max, false) // 2^256 - 1
	d.addTerm(one, false) // wraps to 0
	if d != (Digest{}) {
		t.Fatalf("2^256-1 + 1 = %s", d)
	}
	d.addTerm(one, true) // 0 - 1 = 2^256 - 1
	if d != Digest(max) {
		t.Fatalf("0 - 1 = %s", d)
	}
	var mid [32]byte
	mid[23] = 1 // 2^64
	d = Digest{}
	d.addTerm(max, false)
	d.addTerm(mid, false) // 2^256 - 1 + 2^64 = 2^64 - 1
	var want Digest
	for i := 24; i < 32; i++ {
		want[i] = 0xff
	}
	if d != want {
		t.Fatalf("got %s, want %s", d, want)
	}
}

func TestDigestText(t *testing.T) {
	var d Digest
	for i := range d {
		d[i] = byte(i * 7)
	}
	b, err := d.MarshalText()
	if err != nil || string(b) != d.String() {
		t.Fatalf("MarshalText = %q, %v; want %q", b, err, d.String())
	}
	var back Digest
	if err := back.UnmarshalText(b); err != nil || back != d {
		t.Fatalf("UnmarshalText(%q) = %v, %x", b, err, back)
	}
	for _, bad := range []string{"", "00", d.String() + "00", "zz" + d.String()[2:]} {
		if err := back.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("UnmarshalText(%q) accepted", bad)
		}
	}
}
