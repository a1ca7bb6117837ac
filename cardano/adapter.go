package cardano

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"

	"github.com/blinklabs-io/gouroboros/cbor"
	"github.com/blinklabs-io/gouroboros/ledger"
	"github.com/blinklabs-io/gouroboros/ledger/common"

	"github.com/utxo-cache/utxo-cache/chain"
)

// Era is the tag of an era-tagged block, as a node serves it.
type Era uint8

// The eras, with the values of their tags (persisted nowhere, but fixed by
// the node's wire format: never renumber them).
const (
	EraByronBoundary Era = 0
	EraByron         Era = 1
	EraShelley       Era = 2
	EraAllegra       Era = 3
	EraMary          Era = 4
	EraAlonzo        Era = 5
	EraBabbage       Era = 6
	EraConway        Era = 7
)

var eraNames = [...]string{"byron-boundary", "byron", "shelley", "allegra", "mary", "alonzo", "babbage", "conway"}

// String returns the era's lower-case name, or "era(N)" for an unknown tag.
func (e Era) String() string {
	if int(e) < len(eraNames) {
		return eraNames[e]
	}
	return fmt.Sprintf("era(%d)", uint8(e))
}

// Block is one converted Cardano block: the chain model's block and what the
// model has no field for.
type Block struct {
	// Chain is the block in the chain model. Height is the header's block
	// number, Hash the header hash, PrevHash the header's parent hash (a
	// Linker rewrites it across a boundary block), Slot the header's slot
	// (the same as Block.Slot), Time zero (a slot becomes a time only with
	// the network's genesis parameters). A boundary block's Txs is empty.
	Chain chain.Block
	// Era is the block's era tag.
	Era Era
	// Slot is the header's absolute slot number (a boundary block's is the
	// first slot of its epoch). A chain point is (Slot, Chain.Hash).
	Slot uint64
	// Boundary marks a Byron epoch boundary block: a chain link with no
	// transactions that shares its block number with its parent. It is never
	// applied to a store (Linker; the package doc).
	Boundary bool
}

// Adapter converts era-tagged Cardano blocks of any network into the chain
// model. It holds no state; it is immutable after NewAdapter and safe for
// concurrent use.
type Adapter struct {
	opts Options
}

// NewAdapter returns an adapter with opts.
func NewAdapter(opts Options) (*Adapter, error) {
	opts = opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Adapter{opts: opts}, nil
}

// DecodeHex returns the binary block of a hex-text block file (surrounding
// white space allowed), as the fixtures and many tools store blocks.
func DecodeHex(text []byte) ([]byte, error) {
	text = bytes.TrimSpace(text)
	out := make([]byte, hex.DecodedLen(len(text)))
	if _, err := hex.Decode(out, text); err != nil {
		return nil, fmt.Errorf("%w: hex text: %v", ErrCorrupt, err)
	}
	return out, nil
}

// Convert maps one era-tagged block, the binary CBOR `[tag, block]` a node
// serves and an ImmutableDB chunk stores, to a Block. The result shares no
// memory with tagged. An error wraps ErrCorrupt or ErrUnknownEra and names
// the block by its slot and hash when the header could be read; callers add
// where the bytes came from (a file, an offset). Convert never panics: a panic
// inside the decoding library is turned into ErrCorrupt.
func (a *Adapter) Convert(tagged []byte) (*Block, error) {
	era, inner, err := splitTagged(tagged)
	if err != nil {
		return nil, err
	}
	return a.ConvertEra(era, inner)
}

// ConvertEra is Convert for a block whose era tag is already known (a chain
// sync message carries it apart from the block): inner is the block without
// its `[tag, …]` wrapper.
func (a *Adapter) ConvertEra(era Era, inner []byte) (b *Block, err error) {
	if era > EraConway {
		return nil, fmt.Errorf("%w: %d", ErrUnknownEra, era)
	}
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("%w: %s block%s: decoder panicked: %v", ErrCorrupt, era, headerName(era, inner), r)
		}
	}()
	lb, err := decodeLedgerBlock(uint(era), inner, common.VerifyConfig{SkipBodyHashValidation: a.opts.skipBodyHash})
	if err != nil {
		return nil, fmt.Errorf("%w: %s block%s: %v", ErrCorrupt, era, headerName(era, inner), err)
	}
	b = &Block{
		Era:      era,
		Slot:     lb.SlotNumber(),
		Boundary: era == EraByronBoundary,
		Chain: chain.Block{
			Height:   lb.BlockNumber(),
			Hash:     chain.Hash(lb.Hash()),
			PrevHash: chain.Hash(lb.PrevHash()),
			Slot:     lb.SlotNumber(),
		},
	}
	if b.Boundary {
		b.Chain.Txs = []chain.Tx{}
		return b, nil
	}
	txs := lb.Transactions()
	b.Chain.Txs = make([]chain.Tx, len(txs))
	for i, tx := range txs {
		if err := convertTx(&b.Chain.Txs[i], tx, era); err != nil {
			class := ErrCorrupt
			if errors.Is(err, errAddressTooLong) {
				class = ErrUnsupported
			}
			return nil, fmt.Errorf("%w: %s block %d/%s: tx %d (%s): %v", class, era, b.Slot, b.Chain.Hash, i, tx.Hash(), err)
		}
	}
	return b, nil
}

// headerName returns " slot/hash" of a block whose body failed to decode,
// when its header still decodes, so that the error names the block; "" when
// it does not.
func headerName(era Era, inner []byte) (name string) {
	defer func() {
		if recover() != nil {
			name = ""
		}
	}()
	var parts []cbor.RawMessage
	if _, err := cbor.Decode(inner, &parts); err != nil || len(parts) == 0 {
		return ""
	}
	h, err := ledger.NewBlockHeaderFromCbor(uint(era), parts[0])
	if err != nil {
		return ""
	}
	return fmt.Sprintf(" %d/%s", h.SlotNumber(), chain.Hash(h.Hash()))
}

// decodeLedgerBlock is the library's decoder; a variable so that a test can
// make it panic.
var decodeLedgerBlock = func(era uint, data []byte, cfg common.VerifyConfig) (ledger.Block, error) {
	return ledger.NewBlockFromCbor(era, data, cfg)
}

// Name returns "slot/hash", how errors and logs name the block.
func (b *Block) Name() string { return fmt.Sprintf("%d/%s", b.Slot, b.Chain.Hash) }

func convertTx(dst *chain.Tx, tx common.Transaction, era Era) error {
	dst.Hash = chain.Hash(tx.Hash())
	dst.Invalid = !tx.IsValid()
	dst.Inputs = outPoints(tx.Inputs())
	if c := tx.Collateral(); len(c) > 0 {
		dst.CollateralInputs = outPoints(c)
	}
	outs := tx.Outputs()
	dst.Outputs = make([]chain.Output, len(outs))
	for j, out := range outs {
		if err := convertOutput(&dst.Outputs[j], out, era); err != nil {
			return fmt.Errorf("output %d: %w", j, err)
		}
	}
	// The collateral return is kept on every transaction that has one; the
	// chain model creates it only when the transaction is invalid.
	if cr := tx.CollateralReturn(); cr != nil {
		dst.CollateralReturn = new(chain.Output)
		if err := convertOutput(dst.CollateralReturn, cr, era); err != nil {
			return fmt.Errorf("collateral return: %w", err)
		}
	}
	return nil
}

func outPoints(ins []common.TransactionInput) []chain.OutPoint {
	ops := make([]chain.OutPoint, len(ins))
	for i, in := range ins {
		ops[i] = chain.OutPoint{TxHash: chain.Hash(in.Id()), Index: in.Index()}
	}
	return ops
}

// convertOutput reads the address, datum hash, inline datum and reference
// script from the output's own CBOR bytes (rawOutput), so that they are
// byte-exact, and the value and assets from the library's decoding.
func convertOutput(dst *chain.Output, out common.TransactionOutput, era Era) error {
	raw, err := parseRawOutput(out.Cbor(), era)
	if err != nil {
		return err
	}
	if dst.Address, err = outputAddress(raw.address); err != nil {
		return err
	}
	if dst.Value, err = toUint64(out.Amount(), "value"); err != nil {
		return err
	}
	if raw.datumHash != nil {
		h := chain.Hash(*raw.datumHash)
		dst.DatumHash = &h
	}
	dst.Datum = raw.datum
	dst.ScriptRef = raw.scriptRef
	ma := out.Assets()
	if ma == nil {
		return nil
	}
	for _, policy := range ma.Policies() {
		for _, name := range ma.Assets(policy) {
			q, err := toUint64(ma.Asset(policy, name), "asset quantity")
			if err != nil {
				return err
			}
			if q == 0 {
				continue // a zero quantity holds nothing; the chain model refuses it
			}
			dst.Assets = append(dst.Assets, chain.Asset{
				Policy:   append([]byte(nil), policy[:]...),
				Name:     append([]byte(nil), name...),
				Quantity: q,
			})
		}
	}
	chain.SortAssets(dst.Assets)
	return nil
}

// errAddressTooLong makes convertTx's error ErrUnsupported.
var errAddressTooLong = errors.New("address too long")

// outputAddress renders an output's address and checks it against the chain
// model's limit. Bech32 reaches chain.MaxAddressLen (1024) characters at
// about 630 address bytes, base58 at about 750. Stored anyway, such an
// output could never be listed by address (the API refuses longer
// addresses), so the block is refused instead.
func outputAddress(raw []byte) (string, error) {
	s, err := RenderAddress(raw)
	if err != nil {
		return "", err
	}
	if len(s) > chain.MaxAddressLen {
		return "", fmt.Errorf("%w: %d-byte address renders to %d characters, over %d", errAddressTooLong, len(raw), len(s), chain.MaxAddressLen)
	}
	return s, nil
}

func toUint64(v *big.Int, what string) (uint64, error) {
	if v == nil {
		return 0, nil
	}
	if !v.IsUint64() {
		return 0, fmt.Errorf("%s %s out of range", what, v)
	}
	return v.Uint64(), nil
}
