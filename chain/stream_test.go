package chain

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// blockReader is what both stream readers offer.
type blockReader interface{ Next() (*Block, error) }

// readAll reads blocks until the first error, which it returns (io.EOF at a
// clean end).
func readAll(r blockReader) ([]*Block, error) {
	var out []*Block
	for {
		b, err := r.Next()
		if err != nil {
			return out, err
		}
		out = append(out, b)
	}
}

func testBlocks() []*Block {
	a := fullBlock()
	b := &Block{Height: 43, Hash: fillHash(0xb2), PrevHash: a.Hash}
	c := fullBlock()
	c.Height, c.Hash, c.PrevHash = 44, fillHash(0xb3), b.Hash
	return []*Block{a, b, c}
}

func TestStreamRoundTrip(t *testing.T) {
	type writer interface {
		Write(*Block) error
		Flush() error
	}
	streams := []struct {
		name      string
		newWriter func(io.Writer) writer
		newReader func(io.Reader) blockReader
	}{
		{"jsonl", func(w io.Writer) writer { return NewJSONLWriter(w) }, func(r io.Reader) blockReader { return NewJSONLReader(r, Limits{}) }},
		{"cbor", func(w io.Writer) writer { return NewCBORSeqWriter(w) }, func(r io.Reader) blockReader { return NewCBORSeqReader(r, Limits{}) }},
	}
	want := testBlocks()
	for _, s := range streams {
		var buf bytes.Buffer
		w := s.newWriter(&buf)
		for _, b := range want {
			if err := w.Write(b); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		// Every way of delivering the bytes gives the same blocks, and a
		// clean io.EOF (also on a second call).
		readers := map[string]func() io.Reader{
			"whole":    func() io.Reader { return bytes.NewReader(buf.Bytes()) },
			"one byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(buf.Bytes())) },
			"half":     func() io.Reader { return iotest.HalfReader(bytes.NewReader(buf.Bytes())) },
			"data+EOF": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(buf.Bytes())) },
		}
		for rname, newR := range readers {
			r := s.newReader(newR())
			got, err := readAll(r)
			if err != io.EOF {
				t.Fatalf("%s/%s: %v", s.name, rname, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s/%s: blocks differ", s.name, rname)
			}
			if _, err := r.Next(); err != io.EOF {
				t.Fatalf("%s/%s: second io.EOF: %v", s.name, rname, err)
			}
		}
		if got, err := readAll(s.newReader(strings.NewReader(""))); len(got) != 0 || err != io.EOF {
			t.Fatalf("%s: empty stream: %v", s.name, err)
		}
	}
}

func TestWriterValidates(t *testing.T) {
	b := fullBlock()
	b.Txs[0].Outputs[0].Address = ""
	var buf bytes.Buffer
	if err := NewJSONLWriter(&buf).Write(b); !errors.Is(err, ErrInvalidBlock) {
		t.Fatalf("JSONL: %v", err)
	}
	if err := NewCBORSeqWriter(&buf).Write(b); !errors.Is(err, ErrInvalidBlock) {
		t.Fatalf("CBOR: %v", err)
	}
	if buf.Len() != 0 {
		t.Fatal("an invalid block was written")
	}
}

func TestJSONLReader(t *testing.T) {
	good := string(AppendBlockJSON(nil, testBlocks()[1]))
	bad := `{"height":1}`
	input := "\n" + good + "\r\n  \t\n" + bad + "\n" + good + "\n\n" + good // last line unterminated
	r := NewJSONLReader(strings.NewReader(input), Limits{})
	type step struct {
		ok   bool
		want string // error substring
	}
	for i, s := range []step{{ok: true}, {want: "line 4: hash: missing: invalid block"}, {ok: true}, {ok: true}} {
		b, err := r.Next()
		if s.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), s.want)) {
			t.Fatalf("step %d: %v, %v", i, b, err)
		}
		if err != nil && !errors.Is(err, ErrInvalidBlock) {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

func TestJSONLReaderOversizeLine(t *testing.T) {
	good := string(AppendBlockJSON(nil, testBlocks()[1]))
	lim := Limits{MaxBlockBytes: len(good)}
	for _, size := range []int{len(good) + 1, 3 * streamBufferSize} { // within and beyond the bufio buffer
		input := good + "\n" + strings.Repeat(" ", size-1) + "x\n" + good + "\n"
		r := NewJSONLReader(strings.NewReader(input), lim)
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		_, err := r.Next()
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "line 2:") {
			t.Fatalf("size %d: %v", size, err)
		}
		if cap(r.long) > lim.MaxBlockBytes+streamBufferSize {
			t.Fatalf("size %d: buffered %d bytes", size, cap(r.long))
		}
		// The reader goes on with the next line.
		if b, err := r.Next(); err != nil || b.Height != 43 {
			t.Fatalf("size %d: after the long line: %v", size, err)
		}
	}
	// A long line that is exactly MaxBlockBytes, beyond the bufio buffer, is fine.
	lim = Limits{MaxBlockBytes: 3 * streamBufferSize}
	line := good + strings.Repeat(" ", lim.MaxBlockBytes-len(good))
	if _, err := NewJSONLReader(strings.NewReader(line+"\r\n"), lim).Next(); err != nil {
		t.Fatal(err)
	}
}

func TestJSONLReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	good := string(AppendBlockJSON(nil, testBlocks()[1])) + "\n"
	r := NewJSONLReader(io.MultiReader(strings.NewReader(good+good[:10]), iotest.ErrReader(boom)), Limits{})
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	for range 2 { // sticky
		if _, err := r.Next(); !errors.Is(err, boom) || !strings.Contains(err.Error(), "line 2") {
			t.Fatalf("read error: %v", err)
		}
	}
}

func cborSeq(blocks ...*Block) []byte {
	var out []byte
	for _, b := range blocks {
		out = AppendBlockCBOR(out, b)
	}
	return out
}

func TestCBORSeqReaderTruncated(t *testing.T) {
	blocks := testBlocks()
	seq := cborSeq(blocks...)
	last := len(AppendBlockCBOR(nil, blocks[2]))
	for _, cut := range []int{1, last / 2, last - 1} {
		data := seq[:len(seq)-cut]
		r := NewCBORSeqReader(iotest.HalfReader(bytes.NewReader(data)), Limits{})
		got, err := readAll(r)
		if len(got) != 2 {
			t.Fatalf("cut %d: %d blocks before the error", cut, len(got))
		}
		if !errors.Is(err, ErrInvalidBlock) || !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "record 3") {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if _, err2 := r.Next(); err2 == nil || err2.Error() != err.Error() {
			t.Fatalf("cut %d: error is not sticky: %v", cut, err2)
		}
	}
}

func TestCBORSeqReaderErrors(t *testing.T) {
	blocks := testBlocks()
	good := AppendBlockCBOR(nil, blocks[1])
	missing, _ := encCBOR(del(minimalDoc(), "height"))

	// A framed record that does not decode is skipped over.
	r := NewCBORSeqReader(bytes.NewReader(append(append(append([]byte{}, good...), missing...), good...)), Limits{})
	b, err := r.Next()
	if err != nil || b.Height != 43 {
		t.Fatal(err)
	}
	_, err = r.Next()
	if !errors.Is(err, ErrInvalidBlock) || !strings.Contains(err.Error(), fmt.Sprintf("record 2 (offset %d): height: missing", len(good))) {
		t.Fatalf("missing height: %v", err)
	}
	if b, err := r.Next(); err != nil || b.Height != 43 {
		t.Fatalf("after a bad record: %v", err)
	}

	// Framing errors stop the reader.
	for name, tail := range map[string][]byte{
		"break":      {0xff},
		"reserved":   {0x1c},
		"indefinite": {0x9f, 0xff},
	} {
		r := NewCBORSeqReader(bytes.NewReader(append(append([]byte{}, good...), tail...)), Limits{})
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		_, err := r.Next()
		if !errors.Is(err, ErrInvalidBlock) || !strings.Contains(err.Error(), "record 2") {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err2 := r.Next(); err2 != err {
			t.Fatalf("%s: not sticky: %v", name, err2)
		}
	}
}

func TestCBORSeqReaderOversize(t *testing.T) {
	small := AppendBlockCBOR(nil, testBlocks()[1])
	lim := Limits{MaxBlockBytes: len(small)}
	// A complete record over the limit.
	r := NewCBORSeqReader(bytes.NewReader(cborSeq(testBlocks()[1], fullBlock())), lim)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	_, err := r.Next()
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "record 2 (offset") {
		t.Fatalf("big record: %v", err)
	}
	if _, err2 := r.Next(); err2 != err {
		t.Fatalf("big record: not sticky: %v", err2)
	}
	// A string announced longer than the limit fails at once, without
	// reading the rest of the stream.
	header := []byte{0xa1, 0x64, 'h', 'a', 's', 'h', 0x5a, 0x10, 0, 0, 0}
	src := io.MultiReader(bytes.NewReader(header), neverEnding{})
	if _, err := NewCBORSeqReader(src, lim).Next(); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "record 1") {
		t.Fatalf("announced string: %v", err)
	}
	// A record longer than MaxBlockBytes (array(2^20) of zeros) stops the
	// reader after MaxBlockBytes+1 buffered bytes.
	src = io.MultiReader(bytes.NewReader([]byte{0x9a, 0x00, 0x10, 0x00, 0x00}), neverEnding{})
	r = NewCBORSeqReader(src, Limits{MaxBlockBytes: 1 << 20})
	if _, err := r.Next(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("endless record: %v", err)
	}
	if len(r.buf) > 1<<20+1 {
		t.Fatalf("buffered %d bytes", len(r.buf))
	}
}

// neverEnding yields CBOR zeros (unsigned 0) forever.
type neverEnding struct{}

func (neverEnding) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestCBORSeqReaderNoProgress(t *testing.T) {
	r := NewCBORSeqReader(zeroReader{}, Limits{})
	if _, err := r.Next(); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("got %v", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

// TestReaderOffsets: a reader of the stream from the Position before a
// Next, told where it resumes, reads the same blocks from there, and its errors name the
// records (lines) and offsets of the whole stream. JSON lines with blank
// lines and CRLF, and lines longer than the reader's buffer.
func TestReaderOffsets(t *testing.T) {
	blocks := testBlocks()
	long := fullBlock()
	long.Height, long.Hash, long.PrevHash = 45, fillHash(0xb4), blocks[2].Hash
	long.Txs[0].Outputs[0].Datum = bytes.Repeat([]byte{0x5a}, 40_000) // 80,000 hex digits: longer than the buffer
	blocks = append(blocks, long)
	type resumer interface {
		blockReader
		Position() (int, int64)
		ResumeAt(int, int64)
	}
	var jsonl bytes.Buffer
	jw := NewJSONLWriter(&jsonl)
	for i, b := range blocks {
		if err := jw.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := jw.Flush(); err != nil {
			t.Fatal(err)
		}
		if i == 1 { // a blank line, and a line ending in CRLF
			jsonl.Truncate(jsonl.Len() - 1)
			jsonl.WriteString("\r\n\n")
		}
	}
	jsonl.WriteString("not json\n")
	var cbor bytes.Buffer
	cw := NewCBORSeqWriter(&cbor)
	for _, b := range blocks {
		if err := cw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := cw.Flush(); err != nil {
		t.Fatal(err)
	}
	cbor.WriteByte(0xff) // a framing error after the last record
	streams := []struct {
		name string
		data []byte
		open func(io.Reader) resumer
		// where is how the stream's error names the bad record, n of them
		// before it at offset off.
		where func(n int, off int64) string
	}{
		{"jsonl", jsonl.Bytes(), func(r io.Reader) resumer { return NewJSONLReader(r, Limits{}) },
			func(n int, off int64) string { return fmt.Sprintf("line %d:", n+2) }}, // +1 blank line
		{"cbor", cbor.Bytes(), func(r io.Reader) resumer { return NewCBORSeqReader(r, Limits{}) },
			func(n int, off int64) string { return fmt.Sprintf("record %d (offset %d)", n+1, off) }},
	}
	for _, s := range streams {
		r := s.open(bytes.NewReader(s.data))
		type position struct {
			n   int
			off int64
		}
		var at []position
		for range blocks {
			n, off := r.Position()
			at = append(at, position{n, off})
			if _, err := r.Next(); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
		}
		_, end := r.Position()
		for i := range blocks {
			r := s.open(bytes.NewReader(s.data[at[i].off:]))
			r.ResumeAt(at[i].n, at[i].off)
			got, err := readAll(r)
			if err == nil || err == io.EOF {
				t.Fatalf("%s from block %d: no error at the bad record", s.name, i)
			}
			if want := s.where(len(blocks), end); !strings.Contains(err.Error(), want) {
				t.Fatalf("%s from block %d: error %q does not name %q", s.name, i, err, want)
			}
			if !reflect.DeepEqual(got, blocks[i:]) {
				t.Fatalf("%s from block %d: read %d blocks, not the stream's from there", s.name, i, len(got))
			}
		}
	}
}
