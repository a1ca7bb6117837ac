package loadtest

import (
	"fmt"
	"os"

	"github.com/utxo-cache/utxo-cache/chain"
)

// blockFile writes blocks to a JSONL or CBOR-sequence file (by extension),
// the formats `utxo-cache ingest` reads.
type blockFile struct {
	f     *os.File
	write func(*chain.Block) error
	flush func() error
}

func createBlockFile(path string) (*blockFile, error) {
	format, err := chain.FormatFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("loadtest: chain file %s: %w", path, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	bf := &blockFile{f: f}
	// The chain writers buffer by themselves.
	switch format {
	case chain.FormatCBOR:
		w := chain.NewCBORSeqWriter(f)
		bf.write, bf.flush = w.Write, w.Flush
	default:
		w := chain.NewJSONLWriter(f)
		bf.write, bf.flush = w.Write, w.Flush
	}
	return bf, nil
}

// Close flushes and syncs the file.
func (bf *blockFile) Close() error {
	err := bf.flush()
	if err == nil {
		err = bf.f.Sync()
	}
	if cerr := bf.f.Close(); err == nil {
		err = cerr
	}
	return err
}
