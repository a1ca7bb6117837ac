//go:build race

package query

import (
	"sync"
	"weak"
)

// Under the race detector (every CI run of the tests), a buffer returned
// to the pool twice panics at the second return: two later answers would
// otherwise be encoded into one buffer, which the race detector sees only
// when both happen to be computed at once. Weak pointers identify the
// buffers without keeping those the pool drops alive.
var pooledBufs sync.Map // weak.Pointer[[]byte] → struct{}: buffers in the pool

func taken(p *[]byte) { pooledBufs.Delete(weak.Make(p)) }

func returned(p *[]byte) {
	if _, twice := pooledBufs.LoadOrStore(weak.Make(p), struct{}{}); twice {
		panic("query: an answer's buffer was released twice (Answer.Release on two copies of one Answer)")
	}
}
