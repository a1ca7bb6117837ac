//go:build race

package memory

// raceEnabled reports a -race build, whose sync.Pool drops items at random
// and whose operations are several times slower.
const raceEnabled = true
