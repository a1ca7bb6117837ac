//go:build race

package node_test

// raceEnabled: the tests run under the race detector. Its instrumentation
// makes a step of the model tests (TestWalletStateModel, TestPendingModel,
// TestLeaseModel) ten to twenty times slower, so with it they take a fifth
// of their steps: the data races they can find are among the writer's and
// the replica's goroutines within any step. make test runs them again,
// whole, without it (the Makefile's NORACE_TESTS).
const raceEnabled = true
