package disk

import (
	"errors"
	"fmt"
)

// Chain names the chain whose blocks a store holds ("bitcoin", "cardano",
// "generic": the callers choose the names; the store only records and
// compares them). The store records it in its settings row the first time it
// is opened with one, so a command that would feed blocks of another chain
// into it is refused before it applies anything.
//
// The empty Chain is "unset": Open with it neither checks nor records.
type Chain string

// maxChainName bounds a chain name, in bytes.
const maxChainName = 32

// ErrWrongChain matches the error of an Open whose Options.Chain differs from
// the chain the store holds (see ChainMismatchError).
var ErrWrongChain = errors.New("disk: store holds another chain")

// ChainMismatchError is Open's refusal of Options.Chain Want on a store that
// holds blocks of chain Have. It matches ErrWrongChain.
type ChainMismatchError struct {
	Have, Want Chain
}

func (e *ChainMismatchError) Error() string {
	return fmt.Sprintf("disk: store holds %s blocks; opened to take %s blocks", e.Have, e.Want)
}

// Is matches ErrWrongChain.
func (e *ChainMismatchError) Is(target error) bool { return target == ErrWrongChain }

// validate reports a name the settings row cannot hold: empty is fine
// (unset); otherwise 1 to 32 bytes of lower-case ASCII letters, digits and
// '-'.
func (c Chain) validate() error {
	if len(c) > maxChainName {
		return fmt.Errorf("disk: chain name %q longer than %d bytes", c, maxChainName)
	}
	for i := 0; i < len(c); i++ {
		b := c[i]
		if (b < 'a' || b > 'z') && (b < '0' || b > '9') && b != '-' {
			return fmt.Errorf("disk: chain name %q: want lower-case letters, digits and '-'", c)
		}
	}
	return nil
}

// resolveChain decides the chain the store records, from have (recorded;
// "" for a store that recorded none), want (Options.Chain), ifNone
// (Options.ChainIfNone) and whether the store holds anything (a block
// applied or reverted, ever). It refuses want when the store holds blocks of
// another recorded chain; otherwise the result is want, or have when want is
// unset, or ifNone when both are and the store holds nothing. A store that
// has never taken a block holds no chain's blocks, so it takes the new name.
func resolveChain(have, want, ifNone Chain, holdsBlocks bool) (Chain, error) {
	switch {
	case want == "" && have == "" && !holdsBlocks:
		return ifNone, nil
	case want == "":
		return have, nil
	case have == "" || have == want || !holdsBlocks:
		return want, nil
	}
	return "", &ChainMismatchError{Have: have, Want: want}
}
