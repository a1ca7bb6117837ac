package cardano

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/crypto/blake2b"

	"github.com/utxo-cache/utxo-cache/chain"
)

// The ImmutableDB chunks of testdata, in chain order, with the block counts
// of their secondary indexes and of their complete blocks.
var chunkFixtures = []struct {
	name           string
	listed, blocks int
	truncated      bool
}{
	{"01285", 864, 864, false},
	{"01836", 913, 913, false},
	{"02019", 15, 5, false}, // cut short at a block boundary
}

type loadedChunk struct {
	name      string
	data, sec []byte
	chunk     *Chunk
}

var (
	chunksOnce sync.Once
	chunksAll  []loadedChunk
	chunksErr  error
)

func loadChunks(tb testing.TB) []loadedChunk {
	tb.Helper()
	chunksOnce.Do(func() {
		for _, cf := range chunkFixtures {
			data, err := os.ReadFile(filepath.Join(fixtureDir(), cf.name+".chunk"))
			if err != nil {
				chunksErr = err
				return
			}
			sec, err := os.ReadFile(filepath.Join(fixtureDir(), cf.name+".secondary"))
			if err != nil {
				chunksErr = err
				return
			}
			c, err := SplitChunk(data, sec)
			if err != nil {
				chunksErr = err
				return
			}
			chunksAll = append(chunksAll, loadedChunk{name: cf.name, data: data, sec: sec, chunk: c})
		}
	})
	if chunksErr != nil {
		tb.Fatal(chunksErr)
	}
	return chunksAll
}

func TestChunkBlockCounts(t *testing.T) {
	for i, lc := range loadChunks(t) {
		cf := chunkFixtures[i]
		c := lc.chunk
		if len(c.Blocks) != cf.blocks || c.Listed != cf.listed || c.Truncated != cf.truncated {
			t.Errorf("%s: %s; want %d blocks of %d listed, truncated %v", lc.name, c.Summary(), cf.blocks, cf.listed, cf.truncated)
		}
		t.Logf("%s: %s", lc.name, c.Summary())
	}
}

// TestChunkAgreesWithSecondary reads the secondary index with its own code
// (not ParseSecondary) and checks every complete block against its entry:
// offset, CRC-32 of the block bytes, header hash (blake2b-256 of the header
// bytes at the entry's header offset and size, and the adapter's hash), slot.
// Within a chunk, each block's parent is the previous block's hash and its
// height the previous one's plus one (the three chunks are separate runs).
func TestChunkAgreesWithSecondary(t *testing.T) {
	a := newAdapter(t)
	for _, lc := range loadChunks(t) {
		var prev *Block
		for i, blk := range lc.chunk.Blocks {
			e := lc.sec[i*56 : (i+1)*56]
			off := binary.BigEndian.Uint64(e[0:])
			hdrOff, hdrSize := binary.BigEndian.Uint16(e[8:]), binary.BigEndian.Uint16(e[10:])
			crc := binary.BigEndian.Uint32(e[12:])
			hash := chain.Hash(e[16:48])
			slot := binary.BigEndian.Uint64(e[48:])
			if uint64(len(lc.data)) < off+uint64(len(blk)) || string(lc.data[off:off+uint64(len(blk))]) != string(blk) {
				t.Fatalf("%s block %d: not at offset %d", lc.name, i, off)
			}
			if got := crc32.ChecksumIEEE(blk); got != crc {
				t.Errorf("%s block %d: CRC %08x, index %08x", lc.name, i, got, crc)
			}
			if got := chain.Hash(blake2b.Sum256(blk[hdrOff : hdrOff+hdrSize])); got != hash {
				t.Errorf("%s block %d: header bytes hash to %s, index %s", lc.name, i, got, hash)
			}
			b, err := a.Convert(blk)
			if err != nil {
				t.Fatalf("%s block %d: %v", lc.name, i, err)
			}
			if b.Chain.Hash != hash || b.Slot != slot || b.Chain.Slot != slot {
				t.Errorf("%s block %d: %s, index %d/%s", lc.name, i, b.Name(), slot, hash)
			}
			if prev != nil && prev.Chain.Hash != b.Chain.PrevHash {
				t.Errorf("%s block %d: parent %s, previous block %s", lc.name, i, b.Chain.PrevHash, prev.Chain.Hash)
			}
			if prev != nil && b.Chain.Height != prev.Chain.Height+1 {
				t.Errorf("%s block %d: height %d after %d", lc.name, i, b.Chain.Height, prev.Chain.Height)
			}
			prev = b
		}
	}
}

func TestSplitChunkBadInput(t *testing.T) {
	lc := loadChunks(t)[2]
	// Without an index: the same 5 blocks.
	c, err := SplitChunk(lc.data, nil)
	if err != nil || len(c.Blocks) != 5 || c.Truncated || c.Listed != -1 {
		t.Fatalf("no index: %v, %s", err, c.Summary())
	}
	// Cut inside the fourth block: three blocks, the rest reported, with
	// the index and without.
	for _, sec := range [][]byte{lc.sec, nil} {
		cut := lc.data[:c.Offsets[3]+100]
		c3, err := SplitChunk(cut, sec)
		if err != nil || len(c3.Blocks) != 3 || !c3.Truncated || c3.TrailingBytes != 100 {
			t.Errorf("cut mid-block: %v, %s", err, c3.Summary())
		} else {
			t.Logf("cut mid-block: %s", c3.Summary())
		}
	}
	// A flipped byte inside block 2: its CRC no longer matches.
	bad := append([]byte(nil), lc.data...)
	bad[c.Offsets[2]+100] ^= 0xff
	if _, err := SplitChunk(bad, lc.sec); !errors.Is(err, ErrCorrupt) {
		t.Errorf("flipped byte: %v, want ErrCorrupt", err)
	}
	// An index one byte short.
	if _, err := SplitChunk(lc.data, lc.sec[:len(lc.sec)-1]); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short index: %v, want ErrCorrupt", err)
	}
	// An index listing fewer blocks than the chunk holds.
	if _, err := SplitChunk(lc.data, lc.sec[:2*56]); !errors.Is(err, ErrCorrupt) {
		t.Errorf("index of 2 entries: %v, want ErrCorrupt", err)
	}
	// A chunk of garbage (a CBOR break byte is never an item).
	if _, err := SplitChunk([]byte{0xff, 0, 0}, nil); !errors.Is(err, ErrCorrupt) {
		t.Errorf("garbage: %v, want ErrCorrupt", err)
	}
}
