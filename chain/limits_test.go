package chain

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestBlockMemoryLimit checks the memory budget at its boundary: a block
// whose estimate is exactly the limit decodes, one byte less of limit
// refuses it as too large (413, not 400), with a message that says why, in
// both encodings and in ValidateBlock; and the decoders stop at the item
// that goes over, not reading the rest of the block (here: garbage after
// it, which would be an invalid_block otherwise).
func TestBlockMemoryLimit(t *testing.T) {
	b := &Block{Height: 7, Hash: Hash{7}}
	for i := range 3 {
		tx := Tx{Hash: Hash{byte(i + 1)}, Inputs: []OutPoint{{TxHash: Hash{9}, Index: uint32(i)}}}
		for j := range 4 {
			tx.Outputs = append(tx.Outputs, Output{Address: fmt.Sprintf("addr%d", j), Value: 1, Datum: []byte{1, 2, 3}})
		}
		b.Txs = append(b.Txs, tx)
	}
	need := BlockMemory(b)
	if want := int64(3*(BlockMemoryPerTx+BlockMemoryPerInput) + 12*(BlockMemoryPerOutput+8*BlockMemoryPerByte)); need != want {
		t.Fatalf("BlockMemory %d, want %d", need, want)
	}
	fits, over := Limits{MaxBlockMemory: int(need)}, Limits{MaxBlockMemory: int(need) - 1}
	js, cb := AppendBlockJSON(nil, b), AppendBlockCBOR(nil, b)
	for _, c := range []struct {
		name   string
		decode func([]byte, Limits) (*Block, error)
		data   []byte
	}{{"json", DecodeBlockJSON, js}, {"cbor", DecodeBlockCBOR, cb}} {
		if _, err := c.decode(c.data, fits); err != nil {
			t.Fatalf("%s: a block of exactly the limit: %v", c.name, err)
		}
		_, err := c.decode(c.data, over)
		if !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrInvalidBlock) || !strings.Contains(err.Error(), "of memory to apply, over the limit of") {
			t.Fatalf("%s: a block one byte over the limit: %v", c.name, err)
		}
		// The last output is where it goes over: nothing after it is read.
		cut := Limits{MaxBlockMemory: int(need - 1)}
		trunc := c.data[:len(c.data)-1]
		if _, err := c.decode(trunc, cut); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("%s: the block cut short after the item over the limit: %v", c.name, err)
		}
	}
	// Over the limit early: the first transaction's outputs already are.
	early := Limits{MaxBlockMemory: BlockMemoryPerTx + BlockMemoryPerInput + 2*BlockMemoryPerOutput}
	bad := append(append([]byte(nil), js[:len(js)/2]...), "!garbage"...)
	if _, err := DecodeBlockJSON(bad, early); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "txs[0].outputs[") {
		t.Fatalf("refused early: %v", err)
	}
	if err := ValidateBlock(b, fits); err != nil {
		t.Fatal(err)
	}
	if err := ValidateBlock(b, over); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ValidateBlock over the limit: %v", err)
	}
	if got := (Limits{}).BlockMemoryLimit(); got != DefaultMaxBlockMemory {
		t.Fatalf("default block memory limit %d", got)
	}
}
