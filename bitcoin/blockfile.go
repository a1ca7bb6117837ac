package bitcoin

import (
	"bufio"
	"bytes"
	"compress/bzip2"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/btcsuite/btcd/wire"
)

// BlockReader reads blocks one at a time from a block file, holding at most
// one record (4 MB) in memory. Two layouts are accepted, told apart by the
// first four bytes:
//
//   - Bitcoin Core's blk*.dat: records [magic u32 LE][length u32 LE][block],
//     for example the genesis record starts
//     f9beb4d9 1d010000 01000000 0000…  (mainnet magic, 285 bytes, version 1);
//     reading ends at end of file or at a zero word where a magic is expected,
//     after which every remaining byte must be zero (Core's preallocation);
//   - a single raw block with no header (the first word is not the network's
//     magic), which must end exactly at end of file.
//
// A record with another network's magic fails with ErrWrongNetwork; any other
// departure from the format, truncation or undecodable bzip2 data included,
// fails with ErrCorrupt; an error of the underlying reader is returned
// wrapped. Errors are sticky. A BlockReader is not safe for concurrent use.
//
// Bitcoin Core 28 and later XOR-obfuscate block files with the key in
// blocks/xor.dat; such files must be de-obfuscated before reading (or the node
// run with -blocksxor=0), or every record fails with ErrCorrupt.
type BlockReader struct {
	r      *bufio.Reader
	closer io.Closer // the file, when opened by OpenBlockFile
	net    Network
	magic  uint32
	state  readerState
	offset int64  // bytes consumed, for error messages
	buf    []byte // record buffer, reused
	err    error  // sticky: io.EOF after the last block
}

type readerState uint8

const (
	stateStart   readerState = iota // layout not yet known
	stateRecords                    // blk*.dat records
	stateRaw                        // one raw block, not yet read
	stateDone                       // the raw block was returned
)

// NewBlockReader reads blocks of net from r. It does no I/O until Next.
func NewBlockReader(r io.Reader, net Network) *BlockReader {
	br := &BlockReader{r: bufio.NewReaderSize(r, 1<<16), net: net}
	br.magic, br.err = net.magic()
	return br
}

// OpenBlockFile opens the block file at path, decompressing it on the fly
// when its name ends in ".bz2". Close releases the file.
func OpenBlockFile(path string, net Network) (*BlockReader, error) {
	if _, err := net.magic(); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open block file: %w", err)
	}
	var r io.Reader = f
	if strings.HasSuffix(path, ".bz2") {
		r = bzip2.NewReader(f)
	}
	br := NewBlockReader(r, net)
	br.closer = f
	return br, nil
}

// Close closes the file opened by OpenBlockFile; otherwise it does nothing.
func (br *BlockReader) Close() error {
	if br.closer == nil {
		return nil
	}
	c := br.closer
	br.closer = nil
	return c.Close()
}

// Next returns the next block, or io.EOF after the last one.
func (br *BlockReader) Next() (*wire.MsgBlock, error) {
	if br.err != nil {
		return nil, br.err
	}
	blk, err := br.next()
	if err != nil {
		br.err = err
		return nil, err
	}
	return blk, nil
}

func (br *BlockReader) next() (*wire.MsgBlock, error) {
	switch br.state {
	case stateStart:
		head, err := br.r.Peek(4)
		if len(head) == 0 && errors.Is(err, io.EOF) {
			return nil, io.EOF // an empty file holds no blocks
		}
		br.state = stateRaw
		if len(head) == 4 {
			switch word := binary.LittleEndian.Uint32(head); {
			case word == br.magic, word == 0: // records, or a preallocated file with none yet
				br.state = stateRecords
			case networkOfMagic(word) != "":
				return nil, fmt.Errorf("%w: records of %s, want %s", ErrWrongNetwork, networkOfMagic(word), br.net)
			}
		}
		return br.next()
	case stateRecords:
		return br.nextRecord()
	case stateRaw:
		return br.rawBlock()
	}
	return nil, io.EOF
}

func (br *BlockReader) nextRecord() (*wire.MsgBlock, error) {
	var hdr [8]byte
	n, err := io.ReadFull(br.r, hdr[:4])
	switch {
	case err == nil:
	case n == 0 && errors.Is(err, io.EOF):
		return nil, io.EOF
	case !errors.Is(err, io.ErrUnexpectedEOF) || !bytes.Equal(hdr[:n], make([]byte, n)):
		return nil, br.readErr("record header", err)
	}
	magic := binary.LittleEndian.Uint32(hdr[:4])
	if magic == 0 {
		// Padding runs from the last record to the end of the
		// preallocated file, so it may be shorter than a magic.
		return nil, br.zeroPadding()
	}
	if magic != br.magic {
		if other := networkOfMagic(magic); other != "" {
			return nil, fmt.Errorf("%w: record of %s at offset %d, want %s", ErrWrongNetwork, other, br.offset, br.net)
		}
		return nil, br.corrupt(fmt.Sprintf("bad magic %08x", magic), nil)
	}
	if _, err := io.ReadFull(br.r, hdr[4:]); err != nil {
		return nil, br.readErr("record header", err)
	}
	length := binary.LittleEndian.Uint32(hdr[4:])
	if length < 80 || length > wire.MaxBlockPayload {
		return nil, br.corrupt(fmt.Sprintf("record length %d out of range", length), nil)
	}
	if cap(br.buf) < int(length) {
		br.buf = make([]byte, length)
	}
	body := br.buf[:length]
	if _, err := io.ReadFull(br.r, body); err != nil {
		return nil, br.readErr(fmt.Sprintf("record of %d bytes", length), err)
	}
	blk, err := decodeBlock(body)
	if err != nil {
		return nil, br.corrupt("record", err)
	}
	br.offset += int64(len(hdr)) + int64(length)
	return blk, nil
}

// zeroPadding consumes the rest of the file, which must be zeros, and
// returns io.EOF.
func (br *BlockReader) zeroPadding() error {
	var chunk [4096]byte
	for {
		n, err := br.r.Read(chunk[:])
		for _, c := range chunk[:n] {
			if c != 0 {
				return br.corrupt("non-zero byte after zero padding", nil)
			}
		}
		if errors.Is(err, io.EOF) {
			return io.EOF
		}
		if err != nil {
			return br.readErr("zero padding", err)
		}
	}
}

func (br *BlockReader) rawBlock() (*wire.MsgBlock, error) {
	body, err := io.ReadAll(io.LimitReader(br.r, wire.MaxBlockPayload+1))
	if err != nil {
		return nil, br.readErr("raw block", err)
	}
	if len(body) > wire.MaxBlockPayload {
		return nil, br.corrupt("raw block over 4,000,000 bytes", nil)
	}
	blk, err := decodeBlock(body)
	if err != nil {
		return nil, br.corrupt("raw block", err)
	}
	br.state = stateDone
	return blk, nil
}

// readErr classifies a read failure: a file that ends inside a record, or
// compressed data that does not decompress, is corrupt; anything else is an
// I/O error, returned wrapped.
func (br *BlockReader) readErr(what string, err error) error {
	var bzErr bzip2.StructuralError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return br.corrupt("truncated "+what, err)
	case errors.As(err, &bzErr):
		return br.corrupt(what, err)
	}
	return fmt.Errorf("read block file at offset %d: %w", br.offset, err)
}

func (br *BlockReader) corrupt(what string, err error) error {
	if err != nil {
		return fmt.Errorf("%w: %s at offset %d: %v", ErrCorrupt, what, br.offset, err)
	}
	return fmt.Errorf("%w: %s at offset %d", ErrCorrupt, what, br.offset)
}

// decodeBlock decodes one serialized block (witness included) that must use
// every byte of b. The block does not retain b.
func decodeBlock(b []byte) (*wire.MsgBlock, error) {
	r := bytes.NewReader(b)
	blk := new(wire.MsgBlock)
	if err := blk.Deserialize(r); err != nil {
		return nil, err
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%d trailing bytes after the block", r.Len())
	}
	return blk, nil
}

// LoadBlockFile reads every block of the file at path (see BlockReader for
// the layouts), decompressing ".bz2". It holds them all in memory: about the
// file's uncompressed size again in decoded form, so it suits test fixtures
// and single blk*.dat files (128 MiB), not a whole chain; use OpenBlockFile
// to stream.
func LoadBlockFile(path string, net Network) ([]*wire.MsgBlock, error) {
	br, err := OpenBlockFile(path, net)
	if err != nil {
		return nil, err
	}
	blocks, err := readAll(br)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close block file: %w", cerr)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return blocks, nil
}

func readAll(br *BlockReader) ([]*wire.MsgBlock, error) {
	var blocks []*wire.MsgBlock
	for {
		blk, err := br.Next()
		if errors.Is(err, io.EOF) {
			return blocks, nil
		}
		if err != nil {
			return nil, err
		}
		blocks = append(blocks, blk)
	}
}
