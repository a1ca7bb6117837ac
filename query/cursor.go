package query

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash"
	"sync"

	"github.com/utxo-cache/utxo-cache/chain"
)

// A cursor is the position of the last item of a page, bound to the address
// and order it was issued for and authenticated with the store's secret, so
// a cursor the service did not issue is refused (docs/api.md).
//
// Layout, then base64url without padding (32 characters):
//
//	version  1 byte = 0x01
//	order    1 byte (0 asc, 1 desc)
//	height   uint64
//	tx_pos   uint32
//	index    uint32
//	mac      first 6 bytes of HMAC-SHA256(secret, address || the bytes above)
//
// Positions are stable across blocks, so a cursor stays valid as the chain
// grows; after a rollback it resumes at the same place in chain order.
const (
	cursorVersion byte = 0x01
	cursorBody         = 1 + 1 + 8 + 4 + 4
	cursorMAC          = 6
)

// cursorCodec issues and checks cursors. Safe for concurrent use.
type cursorCodec struct {
	secret []byte
	// macs holds *cursorMACState: HMAC-SHA256 keyed with secret, reset and
	// reused, so a cursor costs no allocation to issue or check.
	macs sync.Pool
}

type cursorMACState struct {
	h   hash.Hash
	in  []byte // address || cursor body, the MAC's message
	sum [sha256.Size]byte
}

func newCursorCodec(secret []byte) *cursorCodec {
	c := &cursorCodec{secret: secret}
	c.macs.New = func() any { return &cursorMACState{h: hmac.New(sha256.New, secret)} }
	return c
}

// append appends the cursor of position p, for address and order, to dst.
func (c *cursorCodec) append(dst []byte, address string, desc bool, p chain.Position) []byte {
	var b [cursorBody + cursorMAC]byte
	b[0] = cursorVersion
	if desc {
		b[1] = 1
	}
	binary.BigEndian.PutUint64(b[2:], p.Height)
	binary.BigEndian.PutUint32(b[10:], p.TxPos)
	binary.BigEndian.PutUint32(b[14:], p.Index)
	c.mac(b[cursorBody:], address, b[:cursorBody])
	return base64.RawURLEncoding.AppendEncode(dst, b[:])
}

// decode returns the position of a cursor issued for address and order, or
// an error matching chain.ErrInvalidArgument.
func (c *cursorCodec) decode(s, address string, desc bool) (chain.Position, error) {
	var b [cursorBody + cursorMAC]byte
	if base64.RawURLEncoding.DecodedLen(len(s)) != len(b) {
		return chain.Position{}, fmt.Errorf("cursor was not issued by this service: %w", chain.ErrInvalidArgument)
	}
	if _, err := base64.RawURLEncoding.Decode(b[:], []byte(s)); err != nil {
		return chain.Position{}, fmt.Errorf("cursor was not issued by this service: %w", chain.ErrInvalidArgument)
	}
	var want [cursorMAC]byte
	c.mac(want[:], address, b[:cursorBody])
	if b[0] != cursorVersion || !hmac.Equal(b[cursorBody:], want[:]) {
		return chain.Position{}, fmt.Errorf("cursor was not issued by this service for this address: %w", chain.ErrInvalidArgument)
	}
	if (b[1] == 1) != desc {
		return chain.Position{}, fmt.Errorf("cursor was issued for the other order: %w", chain.ErrInvalidArgument)
	}
	return chain.Position{
		Height: binary.BigEndian.Uint64(b[2:]),
		TxPos:  binary.BigEndian.Uint32(b[10:]),
		Index:  binary.BigEndian.Uint32(b[14:]),
	}, nil
}

// mac fills out (cursorMAC bytes) with the first bytes of
// HMAC-SHA256(secret, address || body).
func (c *cursorCodec) mac(out []byte, address string, body []byte) {
	st := c.macs.Get().(*cursorMACState)
	st.h.Reset()
	st.in = append(append(st.in[:0], address...), body...)
	st.h.Write(st.in)
	copy(out, st.h.Sum(st.sum[:0]))
	c.macs.Put(st)
}
