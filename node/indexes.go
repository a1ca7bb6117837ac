package node

import (
	"fmt"
	"slices"
	"strings"

	"github.com/utxo-cache/utxo-cache/bitcoin"
	"github.com/utxo-cache/utxo-cache/cardano/credential"
	"github.com/utxo-cache/utxo-cache/cardano/script"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// The index set of a store, beyond addresses, which every store indexes: a
// setting the store fixes at its creation and records (disk.Options.
// Dimensions), so each later open reads it back. Config.Indexes and the
// --indexes flag of the commands that create stores name it:
//
//	""         the store's recorded set; a new store takes its chain's
//	           default (DefaultIndexes: all four for Cardano, none otherwise)
//	"none"     addresses only: no other index row is ever written
//	"a,b,…"    those of payment, stake, policy, asset, script (reference
//	           scripts by hash), datum (inline datums by hash), script_hash
//
// An explicit set that differs from what an existing store recorded is
// refused at open (disk.ErrIndexMismatch): adding an index needs a
// re-import into a new store.
var indexNames = []struct {
	name string
	dim  disk.Dimension
}{
	{"payment", disk.DimPaymentCredential},
	{"stake", disk.DimStakeCredential},
	{"policy", disk.DimAssetPolicy},
	{"asset", disk.DimAsset},
	{"script", disk.DimReferenceScriptHash},
	{"datum", disk.DimDatumHash},
	{"script_hash", disk.DimScriptHash},
}

// IndexNames lists the names Config.Indexes accepts, for help texts.
func IndexNames() []string {
	names := make([]string, len(indexNames))
	for i, n := range indexNames {
		names[i] = n.name
	}
	return names
}

// ParseIndexes reads an index set (see indexNames): given is false for ""
// (the store's own set, or the chain's default for a new store); dims is
// empty for "none".
func ParseIndexes(spec string) (dims []disk.Dimension, given bool, err error) {
	spec = strings.TrimSpace(spec)
	switch spec {
	case "":
		return nil, false, nil
	case "none":
		return []disk.Dimension{}, true, nil
	}
	for _, name := range strings.Split(spec, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(indexNames, func(n struct {
			name string
			dim  disk.Dimension
		}) bool {
			return n.name == name
		})
		if i < 0 {
			return nil, false, fmt.Errorf("node: unknown index %q: want none, or a comma-separated list of %s", name, strings.Join(IndexNames(), ", "))
		}
		if !slices.Contains(dims, indexNames[i].dim) {
			dims = append(dims, indexNames[i].dim)
		}
	}
	return dims, true, nil
}

// DefaultIndexes is the index set a new store of chain takes when none is
// given: all six for "cardano", where wallets list by credential, policy
// and asset and resolve reference scripts and inline datums by hash; none
// otherwise, so a Bitcoin store writes no row it never reads.
func DefaultIndexes(chain disk.Chain) []disk.Dimension {
	if chain == "cardano" {
		return []disk.Dimension{disk.DimPaymentCredential, disk.DimStakeCredential, disk.DimAssetPolicy, disk.DimAsset,
			disk.DimReferenceScriptHash, disk.DimDatumHash}
	}
	return nil
}

// IndexDerivers are the chain adapters' functions of the dimensions the
// store cannot compute itself: the credential dimensions (cardano/
// credential), the reference-script and datum dimensions (cardano/script)
// and the script hash of a Bitcoin address (bitcoin.ScriptHashValues).
// Each yields nothing for another chain's output.
// Every open of a store that may write passes them (a store that keeps a
// credential index refuses writes without them: disk.ErrNoDeriver).
func IndexDerivers() disk.Derivers {
	return disk.Derivers{
		disk.DimPaymentCredential:   credential.PaymentValues,
		disk.DimStakeCredential:     credential.StakeValues,
		disk.DimReferenceScriptHash: script.RefScriptValues,
		disk.DimDatumHash:           script.DatumValues,
		disk.DimScriptHash:          bitcoin.ScriptHashValues,
	}
}

// WithIndexes returns opts set to open a store fed chain's blocks with the
// index set spec (see indexNames), the derivers of every index, and, for
// "bitcoin", the address counters: the
// chain's default set applies to a store that takes its first chain now
// (disk.Options.DefaultDimensions).
func WithIndexes(opts disk.Options, spec string, chain disk.Chain) (disk.Options, error) {
	dims, given, err := ParseIndexes(spec)
	if err != nil {
		return opts, err
	}
	opts.Derivers = IndexDerivers()
	// A Bitcoin store keeps the address counters the Esplora front end's
	// chain_stats answer (disk.Options.Counters): recorded by the store,
	// so a later open without them keeps counting.
	opts.Counters = chain == "bitcoin"
	if given {
		// Addresses only is asked for as the address dimension alone: an
		// empty Dimensions would mean "the recorded set".
		opts.Dimensions = append([]disk.Dimension{disk.DimAddress}, dims...)
	} else {
		opts.DefaultDimensions = DefaultIndexes(chain)
	}
	return opts, nil
}
