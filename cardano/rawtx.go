package cardano

import (
	"errors"
	"fmt"

	"github.com/blinklabs-io/gouroboros/ledger"

	"github.com/utxo-cache/utxo-cache/chain"
)

// MaxTxBytes bounds one serialized transaction ConvertTx reads: 64 KiB, four
// times the protocol's maximum transaction size (16 KiB on mainnet since
// the Alonzo era), so that no parameter change the chain may still make is
// refused here, while a body far beyond any valid transaction is.
const MaxTxBytes = 64 << 10

// txEras maps the library's transaction types to the eras whose output
// formats convertOutput reads.
var txEras = map[uint]Era{
	ledger.TxTypeByron:   EraByron,
	ledger.TxTypeShelley: EraShelley,
	ledger.TxTypeAllegra: EraAllegra,
	ledger.TxTypeMary:    EraMary,
	ledger.TxTypeAlonzo:  EraAlonzo,
	ledger.TxTypeBabbage: EraBabbage,
	ledger.TxTypeConway:  EraConway,
}

// ConvertTx maps one serialized transaction, as a wallet submits it to a
// node (the transaction CBOR: body, witnesses, validity flag, auxiliary
// data; a Byron TxAux), to a chain.Tx as Convert maps a block's: its id (the
// hash of its body), inputs, collateral, outputs and collateral return. The
// era is the newest whose format the bytes decode as (the library's rule, as
// a node's mempool reads an untagged submission). Bytes that are no
// transaction of a known era fail with ErrCorrupt, an address the chain
// model cannot hold with ErrUnsupported. The result shares no memory with
// raw.
func (a *Adapter) ConvertTx(raw []byte) (tx *chain.Tx, err error) {
	if len(raw) > MaxTxBytes {
		return nil, fmt.Errorf("%w: transaction of %d bytes, over %d", ErrCorrupt, len(raw), MaxTxBytes)
	}
	defer func() {
		if r := recover(); r != nil {
			tx, err = nil, fmt.Errorf("%w: transaction: decoder panicked: %v", ErrCorrupt, r)
		}
	}()
	typ, err := ledger.DetermineTransactionType(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: not a transaction of a known era: %v", ErrCorrupt, err)
	}
	era, ok := txEras[typ]
	if !ok {
		return nil, fmt.Errorf("%w: a transaction of an era after %s (type %d)", ErrUnknownEra, EraConway, typ)
	}
	ltx, err := ledger.NewTransactionFromCbor(typ, raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s transaction: %v", ErrCorrupt, era, err)
	}
	tx = new(chain.Tx)
	if err := convertTx(tx, ltx, era); err != nil {
		class := ErrCorrupt
		if errors.Is(err, errAddressTooLong) {
			class = ErrUnsupported
		}
		return nil, fmt.Errorf("%w: %s transaction %s: %v", class, era, ltx.Hash(), err)
	}
	return tx, nil
}
