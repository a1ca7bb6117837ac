package cardano

import (
	"bytes"
	"crypto/sha3"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strconv"

	"golang.org/x/crypto/blake2b"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/textenc"
)

// ErrBadGenesis: a genesis file that does not parse, or holds a balance or an
// address the ledger would not accept.
var ErrBadGenesis = errors.New("cardano: bad genesis file")

// MainnetProtocolMagic is mainnet's Byron protocol magic: its Byron
// addresses carry no network magic attribute; every other network's do.
const MainnetProtocolMagic = 764824073

// # Genesis outputs
//
// The ledger's initial UTxO has one output per genesis balance, each the
// only output (index 0) of a pseudo-transaction whose id is blake2b-256 of
// the output's address bytes (the address's CBOR for Byron addresses, the
// raw address bytes for Shelley's). ByronGenesisTxs and ShelleyGenesisTxs
// return them as chain.Txs with that hash, no inputs and the one output;
// GenesisBlock makes them the block a store applies before the chain's
// first block.
//
// Byron's balances are of two kinds:
//
//	avvmDistr        redeem key (base64url, 32 bytes) → lovelace; the
//	                 address is the key's redeem address (redeemAddress)
//	nonAvvmBalances  Byron address (base58) → lovelace
//
// Shelley's initialFunds map an address (hex of its raw bytes) to lovelace
// (empty on mainnet; local and some test networks use them).

// byronGenesis is the part of a Byron genesis file the outputs need.
type byronGenesis struct {
	AvvmDistr       map[string]string `json:"avvmDistr"`
	NonAvvmBalances map[string]string `json:"nonAvvmBalances"`
	ProtocolConsts  *struct {
		ProtocolMagic *uint32 `json:"protocolMagic"`
	} `json:"protocolConsts"`
}

// ByronGenesisTxs reads a Byron genesis file (JSON) and returns its
// outputs as pseudo-transactions (see above), sorted by hash. An error wraps
// ErrBadGenesis and names the entry.
func ByronGenesisTxs(r io.Reader) ([]chain.Tx, error) {
	var g byronGenesis
	if err := decodeGenesisJSON(r, &g); err != nil {
		return nil, err
	}
	if g.AvvmDistr == nil || g.NonAvvmBalances == nil || g.ProtocolConsts == nil || g.ProtocolConsts.ProtocolMagic == nil {
		return nil, fmt.Errorf("%w: not a Byron genesis file (want avvmDistr, nonAvvmBalances and protocolConsts.protocolMagic)", ErrBadGenesis)
	}
	magic := *g.ProtocolConsts.ProtocolMagic
	txs := make([]chain.Tx, 0, len(g.AvvmDistr)+len(g.NonAvvmBalances))
	for key, amount := range g.AvvmDistr {
		pk, err := base64.URLEncoding.DecodeString(key)
		if err != nil || len(pk) != 32 {
			return nil, fmt.Errorf("%w: avvmDistr key %q: not a base64url 32-byte redeem key", ErrBadGenesis, key)
		}
		value, err := lovelace(amount)
		if err != nil {
			return nil, fmt.Errorf("%w: avvmDistr %q: %v", ErrBadGenesis, key, err)
		}
		tx, err := genesisTx(redeemAddress(pk, magic), value)
		if err != nil {
			return nil, fmt.Errorf("%w: avvmDistr %q: %v", ErrBadGenesis, key, err)
		}
		txs = append(txs, tx)
	}
	for addr, amount := range g.NonAvvmBalances {
		raw, err := textenc.DecodeBase58(addr)
		if err == nil {
			err = checkByronAddress(raw)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: nonAvvmBalances address %q: %v", ErrBadGenesis, addr, err)
		}
		value, err := lovelace(amount)
		if err != nil {
			return nil, fmt.Errorf("%w: nonAvvmBalances %q: %v", ErrBadGenesis, addr, err)
		}
		tx, err := genesisTx(raw, value)
		if err != nil {
			return nil, fmt.Errorf("%w: nonAvvmBalances %q: %v", ErrBadGenesis, addr, err)
		}
		txs = append(txs, tx)
	}
	return sortGenesis(txs)
}

// shelleyGenesis is the part of a Shelley genesis file the outputs need.
type shelleyGenesis struct {
	InitialFunds map[string]json.RawMessage `json:"initialFunds"`
	NetworkMagic *uint32                    `json:"networkMagic"`
}

// ShelleyGenesisTxs reads a Shelley genesis file (JSON) and returns its
// initialFunds as pseudo-transactions (see above), sorted by hash; none
// when it has none. An error wraps ErrBadGenesis and names the entry.
func ShelleyGenesisTxs(r io.Reader) ([]chain.Tx, error) {
	var g shelleyGenesis
	if err := decodeGenesisJSON(r, &g); err != nil {
		return nil, err
	}
	if g.NetworkMagic == nil {
		return nil, fmt.Errorf("%w: not a Shelley genesis file (no networkMagic)", ErrBadGenesis)
	}
	txs := make([]chain.Tx, 0, len(g.InitialFunds))
	for addr, amount := range g.InitialFunds {
		raw, err := hex.DecodeString(addr)
		if err != nil || len(raw) == 0 {
			return nil, fmt.Errorf("%w: initialFunds address %q: not hex address bytes", ErrBadGenesis, addr)
		}
		if raw[0]>>4 == 8 {
			err = checkByronAddress(raw)
		} else if raw[0]>>4 > 7 {
			err = fmt.Errorf("address of header type %d cannot hold an output", raw[0]>>4)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: initialFunds address %q: %v", ErrBadGenesis, addr, err)
		}
		value, err := lovelace(string(amount)) // a JSON number: a quoted one fails
		if err != nil {
			return nil, fmt.Errorf("%w: initialFunds %q: %v", ErrBadGenesis, addr, err)
		}
		tx, err := genesisTx(raw, value)
		if err != nil {
			return nil, fmt.Errorf("%w: initialFunds %q: %v", ErrBadGenesis, addr, err)
		}
		txs = append(txs, tx)
	}
	return sortGenesis(txs)
}

// GenesisBlock is the block that seeds a store with the genesis outputs of
// txs (ByronGenesisTxs and ShelleyGenesisTxs, together): height 0, hash
// hash, no parent, the transactions sorted by hash. hash must be the Byron
// genesis hash, which the chain's first main block (block number 1, after
// the epoch-0 boundary block, Linker) names as its parent: the genesis block
// takes the place of the chain's origin, so that block links to it. Two
// outputs with one address (so one pseudo-transaction id) are an error.
func GenesisBlock(hash chain.Hash, txs ...[]chain.Tx) (*chain.Block, error) {
	all, err := sortGenesis(slices.Concat(txs...))
	if err != nil {
		return nil, err
	}
	return &chain.Block{Height: 0, Hash: hash, Txs: all}, nil
}

func sortGenesis(txs []chain.Tx) ([]chain.Tx, error) {
	slices.SortFunc(txs, func(a, b chain.Tx) int { return bytes.Compare(a.Hash[:], b.Hash[:]) })
	for i := 1; i < len(txs); i++ {
		if txs[i].Hash == txs[i-1].Hash {
			return nil, fmt.Errorf("%w: address %s has two genesis balances", ErrBadGenesis, txs[i].Outputs[0].Address)
		}
	}
	return txs, nil
}

// decodeGenesisJSON decodes one JSON object and refuses trailing data.
func decodeGenesisJSON(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrBadGenesis, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: data after the JSON object", ErrBadGenesis)
	}
	return nil
}

// lovelace parses a balance: a decimal uint64.
func lovelace(s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("balance %q is not a lovelace amount", s)
	}
	return v, nil
}

// genesisTx is the pseudo-transaction of one genesis balance: id
// blake2b-256 of the address bytes, one output.
func genesisTx(addrBytes []byte, value uint64) (chain.Tx, error) {
	addr, err := RenderAddress(addrBytes)
	if err != nil {
		return chain.Tx{}, err
	}
	if len(addr) > chain.MaxAddressLen {
		return chain.Tx{}, fmt.Errorf("address of %d bytes renders longer than %d", len(addrBytes), chain.MaxAddressLen)
	}
	return chain.Tx{
		Hash:    chain.Hash(blake2b.Sum256(addrBytes)),
		Inputs:  []chain.OutPoint{},
		Outputs: []chain.Output{{Address: addr, Value: value}},
	}, nil
}

// redeemAddress returns the CBOR bytes of the Byron redeem address of
// redeem key pk, as cardano-ledger's makeRedeemAddress builds it:
//
//	attributes  {} on mainnet; else {2: bytes(cbor(uint32 magic))}
//	root        blake2b-224(sha3-256(cbor([2, [2, bytes(pk)], attributes])))
//	payload     cbor([bytes(root), attributes, 2])
//	address     cbor([24(bytes(payload)), crc32(payload)])
func redeemAddress(pk []byte, magic uint32) []byte {
	attrs := []byte{0xa0} // empty map
	if magic != MainnetProtocolMagic {
		attrs = []byte{0xa1, 0x02}
		attrs = cborBytes(attrs, cborUint(nil, 0, uint64(magic)))
	}
	spend := []byte{0x83, 0x02, 0x82, 0x02}
	spend = cborBytes(spend, pk)
	spend = append(spend, attrs...)
	sum := sha3.Sum256(spend)
	h, _ := blake2b.New(28, nil)
	h.Write(sum[:])
	root := h.Sum(nil)
	payload := cborBytes([]byte{0x83}, root)
	payload = append(payload, attrs...)
	payload = append(payload, 0x02)
	addr := []byte{0x82, 0xd8, 0x18}
	addr = cborBytes(addr, payload)
	return cborUint(addr, 0, uint64(crc32.ChecksumIEEE(payload)))
}

// checkByronAddress checks that raw is a Byron address's CBOR:
// [24(bytes payload), crc32(payload)], nothing after it.
func checkByronAddress(raw []byte) error {
	if len(raw) < 4 || raw[0] != 0x82 || raw[1] != 0xd8 || raw[2] != 0x18 {
		return errors.New("not a Byron address: want [24(bytes), crc]")
	}
	payload, rest, ok := cborReadBytes(raw[3:])
	if !ok {
		return errors.New("not a Byron address: bad payload")
	}
	crc, rest, ok := cborReadUint(rest)
	if !ok || len(rest) != 0 || crc > 0xffffffff {
		return errors.New("not a Byron address: bad checksum field")
	}
	if uint32(crc) != crc32.ChecksumIEEE(payload) {
		return fmt.Errorf("checksum %08x does not match its payload's %08x", crc, crc32.ChecksumIEEE(payload))
	}
	return nil
}

// cborUint appends the head of major type major with argument v.
func cborUint(dst []byte, major byte, v uint64) []byte {
	m := major << 5
	switch {
	case v < 24:
		return append(dst, m|byte(v))
	case v <= 0xff:
		return append(dst, m|24, byte(v))
	case v <= 0xffff:
		return binary.BigEndian.AppendUint16(append(dst, m|25), uint16(v))
	case v <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(dst, m|26), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, m|27), v)
}

func cborBytes(dst, b []byte) []byte { return append(cborUint(dst, 2, uint64(len(b))), b...) }

// cborReadUint reads the head of a CBOR item of major type 0 (definite,
// canonical or not).
func cborReadUint(b []byte) (v uint64, rest []byte, ok bool) { return cborHead(b, 0) }

func cborReadBytes(b []byte) (v, rest []byte, ok bool) {
	n, rest, ok := cborHead(b, 2)
	if !ok || uint64(len(rest)) < n {
		return nil, nil, false
	}
	return rest[:n], rest[n:], true
}

func cborHead(b []byte, major byte) (uint64, []byte, bool) {
	if len(b) == 0 || b[0]>>5 != major {
		return 0, nil, false
	}
	info := b[0] & 0x1f
	b = b[1:]
	size := 0
	switch {
	case info < 24:
		return uint64(info), b, true
	case info == 24:
		size = 1
	case info == 25:
		size = 2
	case info == 26:
		size = 4
	case info == 27:
		size = 8
	default:
		return 0, nil, false
	}
	if len(b) < size {
		return 0, nil, false
	}
	var v uint64
	for _, c := range b[:size] {
		v = v<<8 | uint64(c)
	}
	return v, b[size:], true
}
