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
// # What it does not model
//
// Values are plausible but not conserved (outputs are not funded by the
// inputs' values), scripts are not modelled beyond address kinds, and coinbase
// maturity is ignored: the store checks none of these.
package workload
