package workload

import (
	"fmt"
	"math"
)

// Profile selects the shape of the generated traffic. The values are part of
// recorded benchmark names and seeds: never renumber them.
type Profile uint8

const (
	// Bitcoin-like: a coinbase first in every block, 2 inputs and 2-3
	// outputs per transaction, base58 and bech32 addresses, no assets.
	Bitcoin Profile = 1
	// Cardano-like: no coinbase, 1-3 inputs and 1-4 outputs, Shelley bech32
	// addresses (some script addresses whose outputs carry datum hashes or
	// inline datums), multi-asset outputs, and a small fraction of
	// phase-2-invalid transactions that consume collateral inputs and create
	// a collateral return.
	Cardano Profile = 2
)

// String names the profile as benchmark names use it.
func (p Profile) String() string {
	switch p {
	case Bitcoin:
		return "bitcoin"
	case Cardano:
		return "cardano"
	default:
		return fmt.Sprintf("profile(%d)", uint8(p))
	}
}

// Range is an inclusive range of counts; each draw is uniform in [Min, Max].
type Range struct{ Min, Max int }

// Options configure a Generator. The zero value of every field means its
// default (some defaults depend on Profile); where a feature can be turned
// off, a negative value does it.
type Options struct {
	// Seed makes the run reproducible: the same Options give the same blocks.
	// Zero is a seed like any other.
	Seed int64
	// Profile chooses the traffic shape. Default Bitcoin.
	Profile Profile
	// TxsPerBlock is the number of transactions of a block from Next, the
	// coinbase included. Default 300.
	TxsPerBlock int
	// InputsPerTx is the number of outputs a transaction spends (for a
	// phase-2-invalid transaction, the inputs it lists but does not spend).
	// Default {2, 2} for Bitcoin, {1, 3} for Cardano.
	InputsPerTx Range
	// OutputsPerTx is the number of outputs a transaction creates.
	// Default {2, 3} for Bitcoin, {1, 4} for Cardano.
	OutputsPerTx Range
	// Addresses is the number of distinct ordinary addresses outputs go to,
	// ranked by popularity. Default 100_000.
	Addresses int
	// ZipfS and ZipfV shape address popularity: address rank k is chosen with
	// probability proportional to (ZipfV + k)^-ZipfS. ZipfS must be > 1
	// (default 1.1); ZipfV >= 1 (default 50) flattens the head so that the
	// most popular ordinary address takes well under 1% of the outputs, as on
	// real chains; the hot addresses below play the exchanges.
	ZipfS, ZipfV float64
	// HotAddresses is the number of exchange-like addresses that receive
	// HotOutputFraction of all outputs and are spent from only by
	// consolidations (hotInputFraction of inputs), so their outputs pile up:
	// with the Bitcoin defaults about 31 more per block, 8 per address, so
	// each holds 100k+ after some 13,000 blocks (or at once on a store seeded
	// by NextSeed with 2M+ outputs). Default 4; negative disables.
	HotAddresses int
	// HotOutputFraction is the fraction of outputs sent to a hot address.
	// Default 0.05; negative: none.
	HotOutputFraction float64
	// YoungProb is the probability that an input spends one of the
	// youngWindow youngest outputs (still live) rather than one chosen
	// uniformly from the whole live set. Default 0.5; negative: never.
	YoungProb float64
	// Spendable bounds the older live outputs the generator keeps to choose
	// spends from, and so its memory: 0 (the default) keeps every live
	// output, O(live) memory, 36 bytes an output; a positive bound keeps at
	// most Spendable ordinary outputs older than the young window and, apart,
	// at most Spendable/4 (at least 1) hot ones, so that the memory of a
	// chain of any length is O(Spendable) (see "Bounded live set" in the
	// package doc). Until a bound is reached the blocks are those of an
	// unbounded generator, byte for byte. Negative is invalid.
	Spendable int
}

// Fixed shapes of the workload.
const (
	// hotInputFraction is the fraction of inputs that consolidate a hot
	// output (chosen uniformly among live hot outputs).
	hotInputFraction = 0.01
	// youngWindow is the number of most recently created outputs that
	// Options.YoungProb picks from.
	youngWindow = 5000
	// invalidTxFraction is the fraction of phase-2-invalid transactions
	// (Cardano only).
	invalidTxFraction = 0.02
	// seedOutputsPerTx is the number of outputs of each transaction of a
	// block from NextSeed.
	seedOutputsPerTx = 500
)

// EnsureDefaults returns o with every zero field set to its default.
func (o Options) EnsureDefaults() Options {
	if o.Profile == 0 {
		o.Profile = Bitcoin
	}
	if o.TxsPerBlock == 0 {
		o.TxsPerBlock = 300
	}
	if o.InputsPerTx == (Range{}) {
		o.InputsPerTx = Range{2, 2}
		if o.Profile == Cardano {
			o.InputsPerTx = Range{1, 3}
		}
	}
	if o.OutputsPerTx == (Range{}) {
		o.OutputsPerTx = Range{2, 3}
		if o.Profile == Cardano {
			o.OutputsPerTx = Range{1, 4}
		}
	}
	if o.Addresses == 0 {
		o.Addresses = 100_000
	}
	if o.ZipfS == 0 {
		o.ZipfS = 1.1
	}
	if o.ZipfV == 0 {
		o.ZipfV = 50
	}
	if o.HotAddresses == 0 {
		o.HotAddresses = 4
	}
	if o.HotAddresses < 0 {
		o.HotAddresses = 0
	}
	if o.HotOutputFraction == 0 {
		o.HotOutputFraction = 0.05
	}
	o.HotOutputFraction = max(o.HotOutputFraction, 0)
	if o.YoungProb == 0 {
		o.YoungProb = 0.5
	}
	o.YoungProb = max(o.YoungProb, 0)
	return o
}

// Validate reports settings that cannot work. It expects EnsureDefaults to
// have run (New does both).
func (o Options) Validate() error {
	switch {
	case o.Profile != Bitcoin && o.Profile != Cardano:
		return fmt.Errorf("workload: unknown profile %d", o.Profile)
	case o.TxsPerBlock < 1:
		return fmt.Errorf("workload: txs per block %d must be positive", o.TxsPerBlock)
	case o.InputsPerTx.Min < 0 || o.InputsPerTx.Max < o.InputsPerTx.Min:
		return fmt.Errorf("workload: bad inputs per tx %+v", o.InputsPerTx)
	case o.OutputsPerTx.Min < 1 || o.OutputsPerTx.Max < o.OutputsPerTx.Min:
		return fmt.Errorf("workload: bad outputs per tx %+v: at least one output", o.OutputsPerTx)
	case o.Addresses < 1:
		return fmt.Errorf("workload: addresses %d must be positive", o.Addresses)
	case !(o.ZipfS > 1) || math.IsInf(o.ZipfS, 0):
		return fmt.Errorf("workload: zipf s %v must be > 1", o.ZipfS)
	case !(o.ZipfV >= 1) || math.IsInf(o.ZipfV, 0):
		return fmt.Errorf("workload: zipf v %v must be >= 1", o.ZipfV)
	case !fraction(o.HotOutputFraction) || !fraction(o.YoungProb):
		return fmt.Errorf("workload: fractions must be in [0, 1]")
	case o.Spendable < 0:
		return fmt.Errorf("workload: spendable bound %d must not be negative", o.Spendable)
	}
	return nil
}

func fraction(f float64) bool { return f >= 0 && f <= 1 }
