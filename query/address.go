package query

import (
	"fmt"
	"unicode/utf8"

	"github.com/utxo-cache/utxo-cache/chain"
)

// checkAddress validates an address a read names: 1..MaxAddressLen bytes of
// valid UTF-8, the rule blocks obey (chain.ValidateBlock), so no address
// that cannot hold an output is looked up. Invalid UTF-8 would otherwise be
// looked up as raw bytes and echoed as "\ufffd" by the JSON encoder: a 200
// for an address the client never sent. It matches chain.ErrInvalidArgument.
func checkAddress(a string) error {
	if len(a) < 1 || len(a) > MaxAddressLen {
		return fmt.Errorf("address of %d bytes outside 1..%d: %w", len(a), MaxAddressLen, chain.ErrInvalidArgument)
	}
	if !utf8.ValidString(a) {
		return fmt.Errorf("address %q is not valid UTF-8: %w", clipAddress(a), chain.ErrInvalidArgument)
	}
	return nil
}

// clipAddress shortens an address quoted in an error message.
func clipAddress(a string) string {
	const max = 64
	if len(a) > max {
		return a[:max] + "…"
	}
	return a
}
