//go:build race

package api_test

// raceEnabled: allocation figures mean nothing under the race detector
// (sync.Pool drops items at random, instrumentation allocates).
const raceEnabled = true
