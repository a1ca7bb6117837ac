package bitcoin

import (
	"bytes"
	"compress/bzip2"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"testing"
)

// rawFixture returns the decompressed bytes of a fixture file.
func rawFixture(tb testing.TB, name string) []byte {
	tb.Helper()
	f, err := os.Open(fixturePath(name))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if len(name) > 4 && name[len(name)-4:] == ".bz2" {
		r = bzip2.NewReader(f)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestReadBlockFileFixtures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		count int
		first string // hash of the first block
	}{
		{fixtureChain14131, 14132, "000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f"},
		{fixtureBlocks1256, 255, "00000000839a8e6886ab5951d76f411475428afc90947ee320161bbf18eb6048"},
		{fixture0To4, 5, "000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f"},
		{fixture3A, 1, "00000000474284d20067a4d33f6a02284e6ef70764a3a26d6a5b9df52ef663dd"},
		{fixture4A, 1, "00000000551dc04c148242d1f648802577df8cf7d4e1b469211016280204a2bf"},
		{fixture5A, 1, "00000000195f85184e77c18914bd0febd11278d950f5e4731a38f71ed79f044e"},
		{fixture277647, 1, "0000000000000000054a714e580b16c583701712ab91060e92dbde6eb1e052a8"},
		{fixtureLarge, 1, "0000000000000000001602407ac49862a7bca9d00f7f402db20b7be2f5de59d2"},
		{fixtureSmall, 1, "00000000000000000021868c2cefc52a480d173c849412fe81c4e5ab806f94ab"},
	} {
		blocks := loadFixture(t, tc.name)
		if len(blocks) != tc.count || blocks[0].BlockHash().String() != tc.first {
			t.Errorf("%s: %d blocks starting %s; want %d starting %s", tc.name, len(blocks), blocks[0].BlockHash(), tc.count, tc.first)
		}
	}
	if n := len(loadFixture(t, fixtureLarge)[0].Transactions); n != 3315 {
		t.Errorf("large block has %d txs", n)
	}
}

// record frames a serialized block as a blk*.dat record.
func record(magic uint32, block []byte) []byte {
	var hdr [8]byte
	binary.LittleEndian.PutUint32(hdr[:4], magic)
	binary.LittleEndian.PutUint32(hdr[4:], uint32(len(block)))
	return append(hdr[:], block...)
}

func TestBlockReaderLayouts(t *testing.T) {
	records := rawFixture(t, fixture0To4)
	genesisLen := int(binary.LittleEndian.Uint32(records[4:8]))
	genesis := records[8 : 8+genesisLen]
	raw := rawFixture(t, fixtureSmall)
	mainMagic, _ := Mainnet.magic()
	testMagic, _ := Testnet.magic()

	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	zeros := make([]byte, 10000)
	for _, tc := range []struct {
		name  string
		data  []byte
		net   Network
		count int
		err   error
	}{
		{"records", records, Mainnet, 5, nil},
		{"records, zero network means mainnet", records, "", 5, nil},
		{"records then zero padding", cat(records, zeros), Mainnet, 5, nil},
		{"records then three zero bytes", cat(records, zeros[:3]), Mainnet, 5, nil},
		{"records then a partial non-zero word", cat(records, []byte{0, 1}), Mainnet, 5, ErrCorrupt},
		{"padding then garbage", cat(records, zeros, []byte{1}), Mainnet, 5, ErrCorrupt},
		{"preallocated empty file", zeros, Mainnet, 0, nil},
		{"empty file", nil, Mainnet, 0, nil},
		{"raw block", raw, Mainnet, 1, nil},
		{"raw genesis", genesis, Mainnet, 1, nil},
		{"raw block with trailing byte", cat(raw, []byte{0}), Mainnet, 0, ErrCorrupt},
		{"truncated raw block", raw[:len(raw)-1], Mainnet, 0, ErrCorrupt},
		{"truncated record", records[:len(records)-1], Mainnet, 4, ErrCorrupt},
		{"truncated record header", cat(records, []byte{0xf9, 0xbe}), Mainnet, 5, ErrCorrupt},
		{"record with trailing bytes inside", record(mainMagic, cat(genesis, []byte{0})), Mainnet, 0, ErrCorrupt},
		{"record length too small", record(mainMagic, genesis[:10]), Mainnet, 0, ErrCorrupt},
		{"record length too large", cat(record(mainMagic, nil)[:4], []byte{0x01, 0x09, 0x3d, 0x00}), Mainnet, 0, ErrCorrupt},
		{"bad magic after records", cat(records, record(0x01020304, genesis)), Mainnet, 5, ErrCorrupt},
		{"testnet file read as mainnet", record(testMagic, genesis), Mainnet, 0, ErrWrongNetwork},
		{"mainnet file read as testnet", records, Testnet, 0, ErrWrongNetwork},
		{"testnet record amid mainnet ones", cat(records, record(testMagic, genesis)), Mainnet, 5, ErrWrongNetwork},
		{"unknown network", records, "simnet", 0, ErrUnknownNetwork},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := NewBlockReader(bytes.NewReader(tc.data), tc.net)
			var n int
			var err error
			for {
				if _, err = br.Next(); err != nil {
					break
				}
				n++
			}
			if n != tc.count {
				t.Errorf("read %d blocks, want %d", n, tc.count)
			}
			if tc.err == nil && err != io.EOF {
				t.Errorf("ended with %v, want io.EOF", err)
			}
			if tc.err != nil && !errors.Is(err, tc.err) {
				t.Errorf("ended with %v, want %v", err, tc.err)
			}
			if _, again := br.Next(); again != err {
				t.Errorf("error not sticky: %v then %v", err, again)
			}
		})
	}
}

func TestLoadBlockFileErrors(t *testing.T) {
	if _, err := LoadBlockFile(fixturePath("missing.dat"), Mainnet); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	// A .bz2 name on data that is not bzip2.
	path := t.TempDir() + "/blk.dat.bz2"
	if err := os.WriteFile(path, rawFixture(t, fixture0To4), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadBlockFile(path, Mainnet); !errors.Is(err, ErrCorrupt) {
		t.Errorf("plain file named .bz2: %v, want ErrCorrupt", err)
	}
	// The same bytes under a plain name read fine, and Close is idempotent.
	plain := t.TempDir() + "/blk00000.dat"
	if err := os.WriteFile(plain, rawFixture(t, fixture0To4), 0o644); err != nil {
		t.Fatal(err)
	}
	br, err := OpenBlockFile(plain, Mainnet)
	if err != nil {
		t.Fatal(err)
	}
	if blocks, err := readAll(br); err != nil || len(blocks) != 5 {
		t.Errorf("plain file: %d blocks, %v", len(blocks), err)
	}
	if err := br.Close(); err != nil {
		t.Error(err)
	}
	if err := br.Close(); err != nil {
		t.Error(err)
	}
}

// FuzzBlockReader checks that no input makes the reader panic or loop, and
// that every failure is classified.
func FuzzBlockReader(f *testing.F) {
	records := rawFixture(f, fixture0To4)
	f.Add(records)
	f.Add(records[:100])
	f.Add(records[8:293]) // the raw genesis block
	f.Add([]byte{0xf9, 0xbe, 0xb4, 0xd9, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		br := NewBlockReader(bytes.NewReader(data), Mainnet)
		for range 1000 {
			_, err := br.Next()
			if err == nil {
				continue
			}
			if err != io.EOF && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrWrongNetwork) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		t.Fatal("reader did not end")
	})
}

func TestDecodeAppendBlock(t *testing.T) {
	for _, name := range []string{fixture0To4, fixtureLarge} {
		for _, blk := range loadFixture(t, name) {
			raw := AppendBlock([]byte("prefix"), blk)
			got, err := DecodeBlock(raw[len("prefix"):])
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got.BlockHash() != blk.BlockHash() || len(got.Transactions) != len(blk.Transactions) {
				t.Fatalf("%s: round trip changed block %s", name, blk.BlockHash())
			}
			if _, err := DecodeBlock(raw[len("prefix") : len(raw)-1]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("truncated block: %v", err)
			}
			if _, err := DecodeBlock(append(raw[len("prefix"):len(raw):len(raw)], 0)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("trailing byte: %v", err)
			}
		}
	}
	if _, err := DecodeBlock(make([]byte, MaxBlockBytes+1)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("oversized block: %v", err)
	}
}

func TestBlockHashes(t *testing.T) {
	blk := loadFixture(t, fixtureChain14131)[170]
	h, prev := BlockHashes(blk)
	if h.String() != "00000000d1145790a8694403d4063f323d499e655c83426834d4ce2f8dd4a2ee" ||
		prev.String() != "000000002a22cfee1f2c846adbd12b3e183d4f97683f85dad08a79780a84bd55" {
		t.Fatalf("block 170: %s parent %s", h, prev)
	}
}
