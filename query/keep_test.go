package query

import (
	"testing"

	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// TestPageUnchangedOddBodies: pageUnchanged runs on the writer goroutine over
// whatever the memory tier holds (on a replica, entries copied from the
// shared Redis tier, written by other nodes): a body it cannot read is a
// page it does not keep, never a panic.
func TestPageUnchangedOddBodies(t *testing.T) {
	s := &Server{cursors: newCursorCodec([]byte("secret"))}
	span := disk.PositionSpan{Lo: disk.Position{Height: 9}, Hi: disk.Position{Height: 9}}
	for _, body := range []string{
		``,
		`"}`,
		`null}`,
		`"address":"a","utxos":[],"next_cursor":null}`,
		`"address":"a","utxos":[],"next_cursor":""}`,
		`"address":"a","utxos":[],"next_cursor":"}`,
		`],"next_cursor":"}`,
		`x],"next_cursor":"}`,
	} {
		for _, desc := range []bool{false, true} {
			e := Entry{Status: 200, Body: []byte(body)}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("body %q, desc %v: panic: %v", body, desc, r)
					}
				}()
				if s.pageUnchanged("a", desc, &e, span) {
					t.Errorf("body %q, desc %v: kept", body, desc)
				}
			}()
		}
	}
}
