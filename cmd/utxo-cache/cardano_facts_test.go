package main

import (
	encbin "encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/blake2b"

	"github.com/utxo-cache/utxo-cache/chain"
)

// This file derives facts about Cardano chunks straight from their bytes,
// with a CBOR reader of its own (neither gouroboros nor the cardano
// package), to check what import-cardano stored.

func cardanoFixture(name string) string {
	return filepath.Join("..", "..", "testdata", "cardano", name)
}

// rawCBOR walks CBOR items.
type rawCBOR struct {
	b   []byte
	pos int
}

// head reads an item's head: major type, and its argument (-1 for an
// indefinite length).
func (r *rawCBOR) head() (major byte, arg int64) {
	c := r.b[r.pos]
	r.pos++
	major, info := c>>5, c&0x1f
	switch {
	case info < 24:
		return major, int64(info)
	case info == 31:
		return major, -1
	}
	n := 1 << (info - 24)
	var v uint64
	for _, x := range r.b[r.pos : r.pos+n] {
		v = v<<8 | uint64(x)
	}
	r.pos += n
	return major, int64(v)
}

func (r *rawCBOR) isBreak() bool {
	if r.b[r.pos] == 0xff {
		r.pos++
		return true
	}
	return false
}

// skip passes one item and returns its bytes.
func (r *rawCBOR) skip() []byte {
	start := r.pos
	major, arg := r.head()
	switch major {
	case 2, 3:
		if arg < 0 {
			for !r.isBreak() {
				r.skip()
			}
		} else {
			r.pos += int(arg)
		}
	case 4, 5:
		per := 1
		if major == 5 {
			per = 2
		}
		if arg < 0 {
			for !r.isBreak() {
				for range per {
					r.skip()
				}
			}
		} else {
			for range int(arg) * per {
				r.skip()
			}
		}
	case 6:
		r.skip()
	}
	return r.b[start:r.pos]
}

// array reads an array's head (a tag 258 set included) and calls fn per
// element.
func (r *rawCBOR) array(fn func(i int)) {
	major, arg := r.head()
	if major == 6 {
		major, arg = r.head()
	}
	if major != 4 {
		panic(fmt.Sprintf("array expected at %d, major %d", r.pos, major))
	}
	for i := 0; arg < 0 && !r.isBreak() || arg >= 0 && i < int(arg); i++ {
		fn(i)
	}
}

func (r *rawCBOR) uint() uint64 {
	major, arg := r.head()
	if major != 0 {
		panic(fmt.Sprintf("uint expected at %d", r.pos))
	}
	return uint64(arg)
}

// output reads a transaction output (array or map form): its lovelace.
func (r *rawCBOR) output() uint64 {
	var value uint64
	readValue := func() {
		if r.b[r.pos]>>5 == 0 {
			value = r.uint()
			return
		}
		r.array(func(i int) {
			if i == 0 {
				value = r.uint()
			} else {
				r.skip()
			}
		})
	}
	if r.b[r.pos]>>5 == 4 {
		r.array(func(i int) {
			if i == 1 {
				readValue()
			} else {
				r.skip()
			}
		})
		return value
	}
	_, n := r.head()
	for range n {
		if k := r.uint(); k == 1 {
			readValue()
		} else {
			r.skip()
		}
	}
	return value
}

// chunkFacts is what applying a chunk's complete blocks to an empty store,
// unknown inputs skipped, must leave.
type chunkFacts struct {
	blocks             int
	firstHeight        uint64
	tip                chain.Hash // the last complete block's header hash, from the .secondary
	tipHeight          uint64
	live               map[chain.OutPoint]uint64 // outpoint → lovelace
	created, spent     int                       // net of each block: an output created and spent in one block is neither
	inBlock            map[chain.OutPoint]bool
	skipped            int
	txs                int
	completeByIndexEnd []int // end offset of each complete block
}

// chunkFactsOf reads chunk (and its .secondary) and runs the UTXO rules.
func chunkFactsOf(t *testing.T, chunkPath string) chunkFacts {
	t.Helper()
	data, err := os.ReadFile(chunkPath)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := os.ReadFile(chunkPath[:len(chunkPath)-len(".chunk")] + ".secondary")
	if err != nil {
		t.Fatal(err)
	}
	f := chunkFacts{live: map[chain.OutPoint]uint64{}}
	n := len(sec) / 56
	for i := range n {
		off := encbin.BigEndian.Uint64(sec[i*56:])
		end := uint64(len(data))
		if i+1 < n {
			end = encbin.BigEndian.Uint64(sec[(i+1)*56:])
		}
		if end > uint64(len(data)) {
			break // listed past the chunk's end
		}
		f.blocks++
		f.tip = chain.Hash(sec[i*56+16 : i*56+48])
		f.completeByIndexEnd = append(f.completeByIndexEnd, int(end))
		f.applyBlock(t, data[off:end], i == 0)
	}
	return f
}

func (f *chunkFacts) applyBlock(t *testing.T, blk []byte, first bool) {
	f.inBlock = map[chain.OutPoint]bool{}
	r := &rawCBOR{b: blk}
	var era uint64
	r.array(func(i int) {
		if i == 0 {
			era = r.uint()
			return
		}
		if era < 2 {
			t.Fatalf("chunk block of era %d: this reader knows Shelley on", era)
		}
		var bodies [][]byte
		invalid := map[int]bool{}
		r.array(func(j int) {
			switch j {
			case 0: // header: [header_body, signature]; header_body starts with the block number
				r.array(func(k int) {
					if k != 0 {
						r.skip()
						return
					}
					r.array(func(l int) {
						if l == 0 {
							h := r.uint()
							if first {
								f.firstHeight = h
							}
							f.tipHeight = h
						} else {
							r.skip()
						}
					})
				})
			case 1:
				r.array(func(int) { bodies = append(bodies, r.skip()) })
			case 4:
				r.array(func(int) { invalid[int(r.uint())] = true })
			default:
				r.skip()
			}
		})
		for k, body := range bodies {
			f.applyTx(body, invalid[k])
		}
	})
}

func (f *chunkFacts) applyTx(body []byte, invalid bool) {
	f.txs++
	id := chain.Hash(blake2b.Sum256(body))
	r := &rawCBOR{b: body}
	var inputs, collateral []chain.OutPoint
	var outputs []uint64
	var collRet *uint64
	readInputs := func() (ops []chain.OutPoint) {
		r.array(func(int) {
			var op chain.OutPoint
			r.array(func(i int) {
				if i == 0 {
					_, n := r.head()
					copy(op.TxHash[:], r.b[r.pos:r.pos+int(n)])
					r.pos += int(n)
				} else {
					op.Index = uint32(r.uint())
				}
			})
			ops = append(ops, op)
		})
		return ops
	}
	_, n := r.head()
	for range n {
		switch r.uint() {
		case 0:
			inputs = readInputs()
		case 1:
			r.array(func(int) { outputs = append(outputs, r.output()) })
		case 13:
			collateral = readInputs()
		case 16:
			v := r.output()
			collRet = &v
		default:
			r.skip()
		}
	}
	spend := func(ops []chain.OutPoint) {
		for _, op := range ops {
			if _, ok := f.live[op]; ok {
				delete(f.live, op)
				if f.inBlock[op] {
					f.created--
				} else {
					f.spent++
				}
			} else {
				f.skipped++
			}
		}
	}
	if invalid {
		spend(collateral)
		if collRet != nil {
			op := chain.OutPoint{TxHash: id, Index: uint32(len(outputs))}
			f.live[op] = *collRet
			f.inBlock[op] = true
			f.created++
		}
		return
	}
	spend(inputs)
	for i, v := range outputs {
		op := chain.OutPoint{TxHash: id, Index: uint32(i)}
		f.live[op] = v
		f.inBlock[op] = true
		f.created++
	}
}
