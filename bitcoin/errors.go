package bitcoin

import "errors"

// Errors of this package; match them with errors.Is.
var (
	// ErrCorrupt: a block file that does not follow its format (bad record
	// header, truncated record, a block that does not decode or has trailing
	// bytes, non-zero bytes after zero padding).
	ErrCorrupt = errors.New("bitcoin: corrupt block file")
	// ErrWrongNetwork: a block file whose records carry another network's magic.
	ErrWrongNetwork = errors.New("bitcoin: block file of another network")
	// ErrUnknownNetwork: a network name that is not supported.
	ErrUnknownNetwork = errors.New("bitcoin: unknown network")
	// ErrInvalidBlock: a decoded block the adapter cannot convert (no coinbase
	// first, a second coinbase, a transaction without inputs, an output value
	// out of range, a merkle root that does not match its transactions, a
	// height that contradicts the genesis block or the height the block's
	// coinbase carries, BIP34).
	ErrInvalidBlock = errors.New("bitcoin: invalid block")
	// ErrInvalidTx: a serialized loose transaction that does not decode
	// (or has trailing bytes), or one that cannot be outside a block (a
	// coinbase, no inputs, the null outpoint, an output value out of range).
	ErrInvalidTx = errors.New("bitcoin: invalid transaction")
	// ErrNotConnected: blocks that do not form one tree of parent links.
	ErrNotConnected = errors.New("bitcoin: blocks do not connect")
)
