package node_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/utxo-cache/utxo-cache/node"
	"github.com/utxo-cache/utxo-cache/tiers/disk"
)

// TestBlockfrostMountedForCardano: the Blockfrost front end is mounted for a
// Cardano store only, and checks the project token it is given.
func TestBlockfrostMountedForCardano(t *testing.T) {
	for _, c := range []struct {
		chain   string
		project string
		header  string
		want    int
		mounted bool
	}{
		{"cardano", "", "", 404, true}, // an empty store: no latest block, in Blockfrost's shape
		{"cardano", "tok", "", 403, true},
		{"cardano", "tok", "tok", 404, true},
		{"bitcoin", "", "", 404, false},
		{"generic", "", "", 404, false},
	} {
		n, err := node.Start(context.Background(), node.Config{DataDir: t.TempDir(), Chain: disk.Chain(c.chain), BlockfrostProjectID: c.project, MemTableBytes: 4 << 20})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodGet, "/api/v0/blocks/latest", nil)
		if c.header != "" {
			req.Header.Set("project_id", c.header)
		}
		rec := httptest.NewRecorder()
		n.Handler().ServeHTTP(rec, req)
		var bf struct {
			StatusCode int `json:"status_code"`
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &bf)
		if rec.Code != c.want || (bf.StatusCode == c.want) != c.mounted {
			t.Errorf("%s store, project %q, header %q: %d %s", c.chain, c.project, c.header, rec.Code, rec.Body)
		}
		if err := n.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
