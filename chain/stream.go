package chain

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// Block streams for files and pipes: JSON lines (one block per line) and RFC
// 8742 CBOR sequences (blocks back to back, no framing). Readers and writers
// are not safe for concurrent use; each belongs to one goroutine.

const streamBufferSize = 64 << 10

// JSONLReader reads blocks from JSON lines. Blank lines (whitespace only)
// are skipped; a line may end in "\n" or "\r\n", and the last line needs no
// terminator. A line longer than Limits.MaxBlockBytes fails with ErrTooLarge
// without being buffered whole.
//
// Errors name the line number ("line 7: txs[0].hash: missing: invalid
// block"). A bad line does not stop the reader: the next call reads the line
// after it. A read error from the underlying reader does, and is returned by
// every later call.
type JSONLReader struct {
	br   *bufio.Reader
	lim  Limits
	line int    // lines consumed so far
	off  int64  // bytes consumed so far (the offset of the next line)
	long []byte // a line that did not fit the bufio buffer
	err  error  // sticky read error
}

// NewJSONLReader returns a reader of the JSON lines in r, decoding each with
// lim (zero fields mean defaults).
func NewJSONLReader(r io.Reader, lim Limits) *JSONLReader {
	return &JSONLReader{br: bufio.NewReaderSize(r, streamBufferSize), lim: lim.EnsureDefaults()}
}

// Next returns the next block, or io.EOF after the last one.
func (r *JSONLReader) Next() (*Block, error) {
	for r.err == nil {
		line, tooLong, err := r.readLine()
		if err != nil {
			if err != io.EOF {
				err = fmt.Errorf("chain: read line %d: %w", r.line+1, err)
			}
			r.err = err
			break
		}
		r.line++
		if tooLong {
			return nil, fmt.Errorf("line %d: longer than %d bytes: %w", r.line, r.lim.MaxBlockBytes, ErrTooLarge)
		}
		if len(bytes.Trim(line, " \t\r\n")) == 0 {
			continue
		}
		b, err := DecodeBlockJSON(line, r.lim)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", r.line, err)
		}
		return b, nil
	}
	return nil, r.err
}

// Position returns how many lines the reader has consumed and the byte
// offset of what the next Next reads: just past the last line read.
// ResumeAt takes it.
func (r *JSONLReader) Position() (lines int, offset int64) { return r.line, r.off }

// ResumeAt tells the reader that its stream is the rest of a longer one,
// from byte offset, after lines lines (as Position gave them): its errors
// then name the lines of the whole, and Position counts from its start. Call it before the first
// Next.
func (r *JSONLReader) ResumeAt(lines int, offset int64) { r.line, r.off = lines, offset }

// readLine returns the next line without its terminator, valid until the
// next call, or io.EOF when no bytes are left. A line over MaxBlockBytes is
// consumed but not kept: it reports tooLong.
func (r *JSONLReader) readLine() (line []byte, tooLong bool, err error) {
	frag, err := r.br.ReadSlice('\n')
	if err == nil { // the common case: the line fits the bufio buffer
		r.off += int64(len(frag))
		line = trimEOL(frag)
		return line, len(line) > r.lim.MaxBlockBytes, nil
	}
	r.long = r.long[:0]
	total := 0
	for {
		total += len(frag)
		if !tooLong {
			if len(r.long)+len(frag) > r.lim.MaxBlockBytes+len("\r\n") {
				tooLong, r.long = true, r.long[:0]
			} else {
				r.long = append(r.long, frag...)
			}
		}
		if err == io.EOF && total == 0 {
			return nil, false, io.EOF
		}
		if err == nil || err == io.EOF {
			break
		}
		if err != bufio.ErrBufferFull {
			return nil, false, err
		}
		frag, err = r.br.ReadSlice('\n')
	}
	r.off += int64(total)
	if tooLong {
		return nil, true, nil
	}
	line = trimEOL(r.long)
	return line, len(line) > r.lim.MaxBlockBytes, nil
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// CBORSeqReader reads blocks from an RFC 8742 CBOR sequence.
//
// # Framing
//
// A CBOR sequence has no delimiters, so the reader finds the end of each data
// item by walking its heads as bytes arrive (a resumable scan that keeps the
// count of items still owed), then decodes the complete item once. Reading
// from a slow pipe therefore costs linear time, and a block is returned as
// soon as its last byte arrives. At most MaxBlockBytes+1 bytes of one record
// are buffered before it fails with ErrTooLarge.
//
// Errors name the record number (1-based) and its byte offset. A record that
// was framed but does not decode (a missing field, say) does not stop the
// reader. A framing error (malformed or indefinite-length item, a record over
// MaxBlockBytes, a sequence truncated inside a record, which also wraps
// io.ErrUnexpectedEOF) or a read error does: the position of the next record
// is unknown, so every later call returns the same error.
type CBORSeqReader struct {
	r   io.Reader
	lim Limits

	buf        []byte // buffered input; buf[start:end] is not yet consumed
	start, end int
	// The scan of the record at buf[start]: the next head is at buf[scan],
	// and pending items are still owed (0: scan not started).
	scan    int
	pending uint64

	record int   // records consumed so far
	offset int64 // stream offset of buf[start]
	eof    bool
	err    error // sticky
}

// NewCBORSeqReader returns a reader of the CBOR sequence in r, decoding each
// block with lim (zero fields mean defaults).
func NewCBORSeqReader(r io.Reader, lim Limits) *CBORSeqReader {
	lim = lim.EnsureDefaults()
	return &CBORSeqReader{r: r, lim: lim, buf: make([]byte, min(streamBufferSize, lim.MaxBlockBytes+1))}
}

// Next returns the next block, or io.EOF at a clean end of the sequence.
func (r *CBORSeqReader) Next() (*Block, error) {
	for r.err == nil {
		if r.start < r.end {
			n, done, err := r.frame()
			if err != nil {
				r.err = r.recordErr(err)
				break
			}
			if done && n > r.lim.MaxBlockBytes {
				r.err = r.recordErr(fmt.Errorf("%d bytes over limit %d: %w", n, r.lim.MaxBlockBytes, ErrTooLarge))
				break
			}
			if done {
				item := r.buf[r.start : r.start+n]
				r.record++
				off := r.offset
				r.start += n
				r.offset += int64(n)
				r.scan, r.pending = r.start, 0
				b, err := DecodeBlockCBOR(item, r.lim)
				if err != nil {
					return nil, fmt.Errorf("record %d (offset %d): %w", r.record, off, err)
				}
				return b, nil
			}
			if r.end-r.start > r.lim.MaxBlockBytes {
				r.err = r.recordErr(fmt.Errorf("longer than %d bytes: %w", r.lim.MaxBlockBytes, ErrTooLarge))
				break
			}
			if r.eof {
				r.err = r.recordErr(fmt.Errorf("%w: %w", errCBORTruncated, ErrInvalidBlock))
				break
			}
		} else if r.eof {
			return nil, io.EOF
		}
		if err := r.fill(); err != nil {
			r.err = fmt.Errorf("chain: read record %d: %w", r.record+1, err)
		}
	}
	return nil, r.err
}

// Position returns how many records the reader has consumed and the byte
// offset of the next one: just past the last one returned. ResumeAt takes
// it.
func (r *CBORSeqReader) Position() (records int, offset int64) { return r.record, r.offset }

// ResumeAt tells the reader that its stream is the rest of a longer one,
// from byte offset, after records records (as Position gave them): its
// errors then name the records and offsets of the whole, and Position
// counts from its start. Call
// it before the first Next.
func (r *CBORSeqReader) ResumeAt(records int, offset int64) { r.record, r.offset = records, offset }

func (r *CBORSeqReader) recordErr(err error) error {
	return fmt.Errorf("record %d (offset %d): %w", r.record+1, r.offset, err)
}

// frame continues the scan of the record at buf[start]. Once the record's
// last byte is buffered it returns the record's length and done.
func (r *CBORSeqReader) frame() (n int, done bool, err error) {
	max := uint64(r.lim.MaxBlockBytes)
	if r.pending == 0 {
		r.scan, r.pending = r.start, 1
	}
	for r.pending > 0 {
		p := r.scan
		if p >= r.end {
			return 0, false, nil
		}
		ib := r.buf[p]
		major, ai := ib>>5, ib&0x1f
		next := p + 1
		var arg uint64
		switch {
		case ai < 24:
			arg = uint64(ai)
		case ai <= 27:
			k := 1 << (ai - 24)
			if r.end-next < k {
				return 0, false, nil
			}
			switch k {
			case 1:
				arg = uint64(r.buf[next])
			case 2:
				arg = uint64(binary.BigEndian.Uint16(r.buf[next:]))
			case 4:
				arg = uint64(binary.BigEndian.Uint32(r.buf[next:]))
			default:
				arg = binary.BigEndian.Uint64(r.buf[next:])
			}
			next += k
		case ai == 31 && major >= cborBytes && major <= cborMap:
			return 0, false, fmt.Errorf("indefinite-length %s at offset %d (not supported): %w",
				describeCBOR(ib), r.offset+int64(p-r.start), ErrInvalidBlock)
		default:
			return 0, false, fmt.Errorf("malformed initial byte %#02x at offset %d: %w",
				ib, r.offset+int64(p-r.start), ErrInvalidBlock)
		}
		owed := r.pending - 1
		switch major {
		case cborBytes, cborText:
			if arg > max {
				return 0, false, fmt.Errorf("string of %d bytes over limit %d: %w", arg, max, ErrTooLarge)
			}
			if uint64(r.end-next) < arg {
				return 0, false, nil
			}
			next += int(arg)
		case cborArray, cborMap, cborTag:
			if arg > max {
				return 0, false, fmt.Errorf("%s of %d entries over limit %d bytes: %w", describeCBOR(ib), arg, max, ErrTooLarge)
			}
			switch major {
			case cborArray:
				owed += arg
			case cborMap:
				owed += 2 * arg
			default:
				owed++
			}
			if owed > max { // every owed item takes at least a byte
				return 0, false, fmt.Errorf("record over limit %d bytes: %w", max, ErrTooLarge)
			}
		}
		r.scan, r.pending = next, owed
	}
	return r.scan - r.start, true, nil
}

// fill reads more input, first making room: it drops consumed bytes and
// grows the buffer (to at most MaxBlockBytes+1, which Next never fills
// without failing the record).
func (r *CBORSeqReader) fill() error {
	if r.start > 0 && (r.end == len(r.buf) || r.start >= len(r.buf)/2) {
		copy(r.buf, r.buf[r.start:r.end])
		r.scan -= r.start
		r.end -= r.start
		r.start = 0
	}
	if r.end == len(r.buf) {
		grown := make([]byte, min(2*len(r.buf), r.lim.MaxBlockBytes+1))
		copy(grown, r.buf[:r.end])
		r.buf = grown
	}
	for range 100 {
		n, err := r.r.Read(r.buf[r.end:])
		r.end += n
		if err == io.EOF {
			r.eof = true
			return nil
		}
		if err != nil || n > 0 {
			return err
		}
	}
	return io.ErrNoProgress
}

// JSONLWriter writes blocks as JSON lines in canonical form. Output is
// buffered: call Flush when done.
type JSONLWriter struct {
	bw  *bufio.Writer
	buf []byte
}

// NewJSONLWriter returns a writer of JSON lines to w.
func NewJSONLWriter(w io.Writer) *JSONLWriter {
	return &JSONLWriter{bw: bufio.NewWriterSize(w, streamBufferSize)}
}

// Write appends b as one line. It first checks b with ValidateBlock and
// default Limits, and the encoded size against DefaultMaxBlockBytes, so that
// everything it writes can be read back by a reader with default Limits.
func (w *JSONLWriter) Write(b *Block) error {
	if err := ValidateBlock(b, Limits{}); err != nil {
		return fmt.Errorf("chain: write block %d: %w", b.Height, err)
	}
	w.buf = AppendBlockJSON(w.buf[:0], b)
	if err := checkEncodedSize(b, len(w.buf)); err != nil {
		return err
	}
	w.buf = append(w.buf, '\n')
	_, err := w.bw.Write(w.buf)
	return err
}

// Flush writes any buffered blocks to the underlying writer.
func (w *JSONLWriter) Flush() error { return w.bw.Flush() }

// CBORSeqWriter writes blocks as a CBOR sequence in canonical form. Output
// is buffered: call Flush when done.
type CBORSeqWriter struct {
	bw  *bufio.Writer
	buf []byte
}

// NewCBORSeqWriter returns a writer of a CBOR sequence to w.
func NewCBORSeqWriter(w io.Writer) *CBORSeqWriter {
	return &CBORSeqWriter{bw: bufio.NewWriterSize(w, streamBufferSize)}
}

// Write appends b as one data item, with the same checks as JSONLWriter.Write.
func (w *CBORSeqWriter) Write(b *Block) error {
	if err := ValidateBlock(b, Limits{}); err != nil {
		return fmt.Errorf("chain: write block %d: %w", b.Height, err)
	}
	w.buf = AppendBlockCBOR(w.buf[:0], b)
	if err := checkEncodedSize(b, len(w.buf)); err != nil {
		return err
	}
	_, err := w.bw.Write(w.buf)
	return err
}

// Flush writes any buffered blocks to the underlying writer.
func (w *CBORSeqWriter) Flush() error { return w.bw.Flush() }

func checkEncodedSize(b *Block, n int) error {
	if n > DefaultMaxBlockBytes {
		return fmt.Errorf("chain: write block %d: %d bytes over limit %d: %w", b.Height, n, DefaultMaxBlockBytes, ErrTooLarge)
	}
	return nil
}
