package bitcoin

import (
	"math/rand/v2"
	"testing"

	"github.com/btcsuite/btcd/btcutil/base58"

	"github.com/utxo-cache/utxo-cache/internal/textenc"
)

// TestBase58AgainstBtcutil compares the encoder with btcutil's on random
// inputs of every length up to 80 bytes, with and without leading zeros.
func TestBase58AgainstBtcutil(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 1))
	for n := 0; n <= 80; n++ {
		for round := range 50 {
			in := make([]byte, n)
			for i := range in {
				in[i] = byte(rng.Uint32())
			}
			switch round % 5 {
			case 1:
				for i := 0; i < len(in) && i < 3; i++ {
					in[i] = 0
				}
			case 2:
				clear(in) // all zeros
			case 3:
				for i := range in {
					in[i] = 0xff
				}
			}
			if got, want := textenc.Base58(in), base58.Encode(in); got != want {
				t.Fatalf("seed %d: textenc.Base58(%x) = %s, want %s", seed, in, got, want)
			}
		}
	}
	for _, version := range []byte{0x00, 0x05, 0x6f, 0xc4, 0xff} {
		payload := make([]byte, 20)
		for i := range payload {
			payload[i] = byte(rng.Uint32())
		}
		if got, want := base58Check(version, payload), base58.CheckEncode(payload, version); got != want {
			t.Fatalf("seed %d: base58Check(%x, %x) = %s, want %s", seed, version, payload, got, want)
		}
	}
}
