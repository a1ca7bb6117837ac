// Package workload generates seeded, realistic chains of blocks for tests and
// benchmarks: linked blocks whose transactions spend outputs that are live at
// that point of the chain, with the shapes of Bitcoin or Cardano traffic
// (inputs and outputs per transaction, Zipf-popular addresses, a few
// exchange-like hot addresses that pile up outputs, spends skewed towards young
// outputs, Cardano multi-asset outputs, datum hashes and phase-2-invalid
// transactions with collateral).
//
// It owns nothing persistent and imports only the chain domain types: a
// Generator is a pure function of its Options, so the same seed gives the same
// blocks, byte for byte, on every run and platform (math/rand/v2's PCG and
// Zipf are specified algorithms).
//
// # Live set
//
// The Generator tracks every output it created and has not spent yet in
// O(live) memory, 36 bytes an output: the youngWindow newest in a ring, the
// older ones in a dense slice with swap-delete (see liveset.go for why there
// is no map), so adding an output, spending a uniformly random one and
// spending a random young one are all O(1). Generating a 300-transaction
// block costs about a millisecond or less whatever the live-set size
// (BenchmarkNext: 0.5 to 1.3 ms with a million live outputs on a busy 2-core
// VM), some fifty times less than applying it with Sync commits.
//
// # Bounded live set
//
// A chain of tens of millions of live outputs would take gigabytes that way,
// so Options.Spendable bounds what is kept: at most Spendable ordinary
// outputs older than the young window (a uniform reservoir sample of them,
// algorithm R, refilled as outputs age out of the window and as spends empty
// it) and Spendable/4 hot ones. An output left out of the sample is frozen:
// live in the chain for good (the dust every real chain carries), never
// spent, only counted. The chain stays valid (every input spends a live
// output, once) and deterministic, the shapes of its blocks do not change,
// and the generator's memory is O(Spendable + addressCache) whatever the
// chain's length: uniform spends then choose among the kept outputs, which
// skews them towards the outputs that aged out of the window lately, as
// real spends are. Ordinary addresses are derived from their rank (a hash of
// seed and rank), and only the most popular ones keep their string, so
// Options.Addresses costs no memory either. TestGeneratorMemoryBounded
// measures the heap at two chain sizes.
//
// # What it does not model
//
// Values are plausible but not conserved (outputs are not funded by the
// inputs' values), scripts are not modelled beyond address kinds, and coinbase
// maturity is ignored: the store checks none of these.
package workload
