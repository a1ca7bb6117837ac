//go:build race

package query

import "testing"

// TestAnswerReleasedTwicePanics: under the race detector, releasing two
// copies of one Answer (each holds the buffer's pointer) panics at the
// second release instead of putting the buffer back into the pool twice,
// which would hand it to two later answers at once. The Esplora front end
// did that for every answer it wrote until 2026-11-28.
func TestAnswerReleasedTwicePanics(t *testing.T) {
	buf := getAnswerBuf()
	a := Answer{Status: 200, Body: append(*buf, "x"...), buf: buf}
	b := a // a copy, as a write function receives it
	b.Release()
	defer func() {
		if recover() == nil {
			t.Fatal("the second release of one buffer went unnoticed")
		}
	}()
	a.Release()
}
