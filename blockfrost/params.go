package blockfrost

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/utxo-cache/utxo-cache/cardano/credential"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/textenc"
)

// Paging limits, as Blockfrost's: count 1..100 (default 100), page
// 1..21474836 (default 1).
const (
	MaxCount     = 100
	DefaultCount = 100
	MaxPage      = 21474836
)

// Page is an offset page of a listing: items (Page-1)·Count+1 to
// Page·Count, in chain order (reverse when Desc).
type Page struct {
	Count, Page int
	Desc        bool
}

// skip is the number of items before the page.
func (p Page) skip() int { return (p.Page - 1) * p.Count }

// appendKey appends the page's part of a cache key: the order, the count
// and the page.
func (p Page) appendKey(dst []byte) []byte {
	o := byte('a')
	if p.Desc {
		o = 'd'
	}
	dst = append(dst, o, '|')
	dst = strconv.AppendInt(dst, int64(p.Count), 10)
	dst = append(dst, '|')
	return strconv.AppendInt(dst, int64(p.Page), 10)
}

// Lookup returns a query parameter's value and whether it was given.
type Lookup func(name string) (string, bool)

// PageParams are the query parameters ParsePage reads.
var PageParams = []string{"count", "page", "order"}

// ParsePage reads count, page and order (Blockfrost's names and ranges);
// a bad value is an error matching chain.ErrInvalidArgument.
func ParsePage(q Lookup) (Page, error) {
	p := Page{Count: DefaultCount, Page: 1}
	var err error
	if s, ok := q("count"); ok {
		if p.Count, err = boundedInt(s, MaxCount); err != nil {
			return p, fmt.Errorf("count %q: an integer in 1..%d: %w", clip(s), MaxCount, chain.ErrInvalidArgument)
		}
	}
	if s, ok := q("page"); ok {
		if p.Page, err = boundedInt(s, MaxPage); err != nil {
			return p, fmt.Errorf("page %q: an integer in 1..%d: %w", clip(s), MaxPage, chain.ErrInvalidArgument)
		}
	}
	if s, ok := q("order"); ok {
		switch s {
		case "asc":
		case "desc":
			p.Desc = true
		default:
			return p, fmt.Errorf("order %q: asc or desc: %w", clip(s), chain.ErrInvalidArgument)
		}
	}
	return p, nil
}

// boundedInt parses a plain decimal integer in 1..max.
func boundedInt(s string, max int) (int, error) {
	if s == "" || len(s) > 9 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("not a plain decimal integer")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, fmt.Errorf("out of range")
	}
	return n, nil
}

// clip shortens a value quoted in an error message.
func clip(s string) string {
	const max = 128
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// Subject is what an address route names: an address, or a payment
// credential (Blockfrost's /addresses routes take both).
type Subject struct {
	// Address is set for an address: the string the store indexes it by.
	Address string
	// Hash is set for a payment credential: its 28-byte hash, whatever the
	// prefix named it with; Kind is the kind the prefix names (addr_vkh: a
	// key hash, script: a script hash), which the lookup tries first.
	Hash []byte
	Kind credential.Kind
	// Raw is the address's bytes (nil for a credential).
	Raw []byte
	// Byron is set for a Byron (base58) address.
	Byron bool
}

// shelleyForm reports whether s is what ParseSubject reads as a Shelley
// address, by its prefix and length alone (ParseSubject still decides
// whether it is a valid one).
func shelleyForm(s string) bool {
	return len(s) > 0 && len(s) <= chain.MaxAddressLen &&
		(strings.HasPrefix(s, "addr1") || strings.HasPrefix(s, "addr_test1"))
}

// ParseSubject reads an /addresses route's {address}: a Shelley address
// (bech32, "addr1…" or "addr_test1…"), a Byron address (base58), or a
// payment credential ("addr_vkh1…" or "script1…", bech32 of a 28-byte
// hash). Anything else is an error matching chain.ErrInvalidArgument.
func ParseSubject(s string) (Subject, error) {
	if len(s) == 0 || len(s) > chain.MaxAddressLen {
		return Subject{}, fmt.Errorf("address of %d bytes: %w", len(s), chain.ErrInvalidArgument)
	}
	if strings.HasPrefix(s, "addr_vkh1") || strings.HasPrefix(s, "script1") {
		hrp, hash, err := textenc.DecodeBech32(s, textenc.Bech32Const, nil)
		if err != nil || len(hash) != credential.HashLen {
			return Subject{}, fmt.Errorf("payment credential %q: bech32 of a 28-byte hash: %w", clip(s), chain.ErrInvalidArgument)
		}
		kind := credential.KeyHash
		if hrp == "script" {
			kind = credential.ScriptHash
		}
		return Subject{Hash: hash, Kind: kind}, nil
	}
	if strings.HasPrefix(s, "addr1") || strings.HasPrefix(s, "addr_test1") {
		// Sized once: 5 bits a character at most.
		hrp, raw, err := textenc.DecodeBech32(s, textenc.Bech32Const, make([]byte, 0, len(s)*5/8))
		if err != nil || (hrp != "addr" && hrp != "addr_test") || len(raw) < 1 || raw[0]>>4 > 7 {
			return Subject{}, fmt.Errorf("address %q: not a valid Shelley address: %w", clip(s), chain.ErrInvalidArgument)
		}
		return Subject{Address: s, Raw: raw}, nil
	}
	// A Byron address is the base58 of its CBOR: [#6.24(bytes), crc32],
	// which starts 82 d8 18.
	raw, err := textenc.DecodeBase58(s)
	if err != nil || len(raw) < 3 || raw[0] != 0x82 || raw[1] != 0xd8 || raw[2] != 0x18 {
		return Subject{}, fmt.Errorf("address %q: neither a Shelley address (addr1…, addr_test1…), a Byron address (base58), nor a payment credential (addr_vkh1…, script1…): %w",
			clip(s), chain.ErrInvalidArgument)
	}
	return Subject{Address: s, Raw: raw, Byron: true}, nil
}

// stakeAddress returns the reward address of a Shelley base address's
// stake credential ("stake1…" on mainnet, "stake_test1…" elsewhere), or ""
// for any other address: a pointer address names its stake credential by a
// certificate's position, which this store does not resolve.
func stakeAddress(raw []byte) string {
	if len(raw) < 1+2*credential.HashLen || raw[0]>>4 > 3 {
		return ""
	}
	net := raw[0] & 0x0f
	header := 0xe0 | (raw[0]>>5&1)<<4 | net
	data := append([]byte{header}, raw[1+credential.HashLen:1+2*credential.HashLen]...)
	hrp := "stake_test"
	if net == 1 {
		hrp = "stake"
	}
	return textenc.Bech32(hrp, textenc.ConvertBits(data), textenc.Bech32Const)
}

// paymentIsScript reports whether a Shelley address's payment credential is
// a script hash (header types 1, 3, 5, 7).
func paymentIsScript(raw []byte) bool {
	return len(raw) > 0 && raw[0]>>4 <= 7 && raw[0]>>4&1 == 1
}
