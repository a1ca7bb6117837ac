package query

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
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

type cursorCodec struct{ secret []byte }

func (c cursorCodec) encode(address string, desc bool, p disk.Position) string {
	var b [cursorBody + cursorMAC]byte
	b[0] = cursorVersion
	if desc {
		b[1] = 1
	}
	binary.BigEndian.PutUint64(b[2:], p.Height)
	binary.BigEndian.PutUint32(b[10:], p.TxPos)
	binary.BigEndian.PutUint32(b[14:], p.Index)
	copy(b[cursorBody:], c.mac(address, b[:cursorBody]))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// decode returns the position of a cursor issued for address and order, or
// an error matching chain.ErrInvalidArgument.
func (c cursorCodec) decode(s, address string, desc bool) (disk.Position, error) {
	var b [cursorBody + cursorMAC]byte
	if base64.RawURLEncoding.DecodedLen(len(s)) != len(b) {
		return disk.Position{}, fmt.Errorf("cursor was not issued by this service: %w", chain.ErrInvalidArgument)
	}
	if _, err := base64.RawURLEncoding.Decode(b[:], []byte(s)); err != nil {
		return disk.Position{}, fmt.Errorf("cursor was not issued by this service: %w", chain.ErrInvalidArgument)
	}
	if b[0] != cursorVersion || !hmac.Equal(b[cursorBody:], c.mac(address, b[:cursorBody])) {
		return disk.Position{}, fmt.Errorf("cursor was not issued by this service for this address: %w", chain.ErrInvalidArgument)
	}
	if (b[1] == 1) != desc {
		return disk.Position{}, fmt.Errorf("cursor was issued for the other order: %w", chain.ErrInvalidArgument)
	}
	return disk.Position{
		Height: binary.BigEndian.Uint64(b[2:]),
		TxPos:  binary.BigEndian.Uint32(b[10:]),
		Index:  binary.BigEndian.Uint32(b[14:]),
	}, nil
}

func (c cursorCodec) mac(address string, body []byte) []byte {
	m := hmac.New(sha256.New, c.secret)
	m.Write([]byte(address))
	m.Write(body)
	return m.Sum(nil)[:cursorMAC]
}
