package cardano

import "errors"

// Errors of this package; match them with errors.Is. Every error the package
// returns names the block it is about (a file, a position, or the block's
// slot and hash once the header is known).
var (
	// ErrCorrupt: bytes that are not an era-tagged block: truncated or
	// malformed CBOR, trailing bytes, a body that does not decode, a body
	// whose hash does not match its header, a value out of range.
	ErrCorrupt = errors.New("cardano: corrupt block")
	// ErrUnknownEra: an era tag outside 0 (Byron boundary) .. 7 (Conway).
	ErrUnknownEra = errors.New("cardano: unknown era tag")
	// ErrUnsupported: a well-formed block the chain model cannot hold (an
	// address whose string is over chain.MaxAddressLen bytes).
	ErrUnsupported = errors.New("cardano: block the chain model cannot hold")
	// ErrNotLinked: a block that does not follow the one before it (Linker).
	ErrNotLinked = errors.New("cardano: block does not link")
)
