package chain

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchBlock is a deterministic block shaped like a busy Cardano block:
// txs transactions of 2 inputs and 2 outputs with ~100-byte addresses, a
// third of the outputs carrying two assets and a fifth an inline datum.
func benchBlock(txs int) *Block {
	rng := rand.New(rand.NewPCG(1, 2))
	hash := func() (h Hash) {
		for i := range h {
			h[i] = byte(rng.Uint32())
		}
		return h
	}
	addr := func() string {
		const alphabet = "023456789acdefghjklmnpqrstuvwxyz"
		b := []byte("addr1q")
		for range 98 {
			b = append(b, alphabet[rng.IntN(len(alphabet))])
		}
		return string(b)
	}
	b := &Block{Height: 10_000_000, Hash: hash(), PrevHash: hash(), Time: 1_700_000_000}
	for i := range txs {
		tx := Tx{Hash: hash()}
		for range 2 {
			tx.Inputs = append(tx.Inputs, OutPoint{TxHash: hash(), Index: uint32(rng.IntN(4))})
		}
		for j := range 2 {
			o := Output{Address: addr(), Value: rng.Uint64N(1e12)}
			if (i+j)%3 == 0 {
				policy := hash()
				o.Assets = []Asset{
					{Policy: policy[:28], Name: []byte("TokenA"), Quantity: rng.Uint64N(1e9) + 1},
					{Policy: policy[:28], Name: []byte("TokenB"), Quantity: rng.Uint64N(1e9) + 1},
				}
			}
			if (i+j)%5 == 0 {
				o.Datum = make([]byte, 100)
				for k := range o.Datum {
					o.Datum[k] = byte(rng.Uint32())
				}
			}
			tx.Outputs = append(tx.Outputs, o)
		}
		b.Txs = append(b.Txs, tx)
	}
	return b
}

// BenchmarkDecodeBlock decodes a 300-transaction block:
//
//	go test -run=^$ -bench=DecodeBlock -benchmem ./chain/
func BenchmarkDecodeBlock(b *testing.B) {
	blk := benchBlock(300)
	for _, c := range codecs {
		data := c.append(nil, blk)
		b.Run(fmt.Sprintf("format=%s", c.name), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := c.decode(data, Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodeBlock encodes the same block into a reused buffer.
func BenchmarkEncodeBlock(b *testing.B) {
	blk := benchBlock(300)
	for _, c := range codecs {
		b.Run(fmt.Sprintf("format=%s", c.name), func(b *testing.B) {
			b.ReportAllocs()
			buf := c.append(nil, blk)
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				buf = c.append(buf[:0], blk)
			}
		})
	}
}

func TestBenchBlockRoundTrips(t *testing.T) {
	b := benchBlock(30)
	for i := range b.Txs {
		for j := range b.Txs[i].Outputs {
			SortAssets(b.Txs[i].Outputs[j].Assets)
		}
	}
	checkRoundTrip(t, b, Limits{})
}

// BenchmarkDecodeBlockCBOR compares the CBOR decoders on the block of
// BenchmarkDecodeBlock, the figures behind keeping the hand walker (see
// decode.go):
//
//	go test -run='^$' -bench=DecodeBlockCBOR -benchmem ./chain/
//
// decoder=walker is DecodeBlockCBOR; decoder=fxamacker the strict reference
// of codec_cbor_fxamacker_test.go; decoder=fxamacker-lenient is fxamacker
// decoding into plain tagged structs (lenientBlock) with the same DecOptions:
// not a usable decoder (none of the contract's checks), but the floor of any
// decoder built on fxamacker's struct decoding.
func BenchmarkDecodeBlockCBOR(b *testing.B) {
	data := AppendBlockCBOR(nil, benchBlock(300))
	lenient, err := fxDecOptions(DefaultMaxTxs).DecMode()
	if err != nil {
		b.Fatal(err)
	}
	decoders := []struct {
		name   string
		decode func([]byte) error
	}{
		{"walker", func(d []byte) error { _, err := DecodeBlockCBOR(d, Limits{}); return err }},
		{"fxamacker", func(d []byte) error { _, err := decodeBlockCBORFxamacker(d, Limits{}); return err }},
		{"fxamacker-lenient", func(d []byte) error { var lb lenientBlock; return lenient.Unmarshal(d, &lb) }},
	}
	for _, dec := range decoders {
		b.Run("decoder="+dec.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if err := dec.decode(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// lenientBlock and the types below it are the block as plain structs for
// fxamacker: a null is a zero, a short hash is zero-filled, nothing is
// required. Only BenchmarkDecodeBlockCBOR uses them.
type (
	lenientBlock struct {
		Height   uint64      `cbor:"height"`
		Hash     Hash        `cbor:"hash"`
		PrevHash Hash        `cbor:"prev_hash"`
		Time     int64       `cbor:"time"`
		Txs      []lenientTx `cbor:"txs"`
	}
	lenientTx struct {
		Hash             Hash              `cbor:"hash"`
		Inputs           []lenientOutPoint `cbor:"inputs"`
		Outputs          []lenientOutput   `cbor:"outputs"`
		CollateralInputs []lenientOutPoint `cbor:"collateral_inputs"`
		CollateralReturn *lenientOutput    `cbor:"collateral_return"`
		Valid            *bool             `cbor:"valid"`
		Coinbase         bool              `cbor:"coinbase"`
	}
	lenientOutPoint struct {
		TxHash Hash   `cbor:"tx_hash"`
		Index  uint32 `cbor:"index"`
	}
	lenientOutput struct {
		Address   string         `cbor:"address"`
		Value     uint64         `cbor:"value"`
		Assets    []lenientAsset `cbor:"assets"`
		DatumHash *Hash          `cbor:"datum_hash"`
		Datum     []byte         `cbor:"datum"`
		ScriptRef []byte         `cbor:"script_ref"`
	}
	lenientAsset struct {
		Policy   []byte `cbor:"policy"`
		Name     []byte `cbor:"name"`
		Quantity uint64 `cbor:"quantity"`
	}
)
