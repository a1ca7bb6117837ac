package main

import (
	"errors"
	"fmt"

	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// The chains a store can hold (disk.Chain), named after what feeds it:
// import-bitcoin and serve --follow-bitcoin-rest feed bitcoin, import-cardano
// feeds cardano, ingest and blocks posted to serve (POST /v1/blocks without a
// follower) feed generic: the block format of docs/blocks.md, whose
// addresses and hashes are whatever the producer wrote. The store records the
// first one and refuses the others (docs/settings.md, "The store's chain").
const (
	chainBitcoin disk.Chain = "bitcoin"
	chainCardano disk.Chain = "cardano"
	chainGeneric disk.Chain = "generic"
)

// wrongChainError is the refusal of a command that would feed one chain's
// blocks into a store of another. It matches disk.ErrWrongChain.
type wrongChainError struct {
	command, dir, hint string
	mm                 *disk.ChainMismatchError
}

func (e *wrongChainError) Error() string {
	msg := fmt.Sprintf("store in %s holds %s blocks; %s feeds %s (nothing was applied", e.dir, e.mm.Have, e.command, e.mm.Want)
	if e.hint != "" {
		return msg + "; " + e.hint + ")"
	}
	return msg + "; use a store of that chain: another --data-dir)"
}

func (e *wrongChainError) Unwrap() error { return e.mm }

// chainRefused turns disk's refusal of a chain into the command's message,
// naming both chains; any other error is returned as it is.
func chainRefused(command, dir, hint string, err error) error {
	var mm *disk.ChainMismatchError
	if errors.As(err, &mm) {
		return &wrongChainError{command: command, dir: dir, hint: hint, mm: mm}
	}
	return err
}
