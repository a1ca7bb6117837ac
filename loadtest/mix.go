package loadtest

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/utxo-cache/utxo-cache/chain"
)

// kind is a request type of the mix; its name labels results.
type kind int

const (
	kindTip        kind = iota // GET /v1/tip
	kindPage                   // GET /v1/addresses/{a}/utxos, first page
	kindDeep                   // the same, following next_cursor page after page
	kindBalance                // GET /v1/addresses/{a}/balance
	kindOutpoint               // GET /v1/utxos/{tx}/{i}
	kindLookup                 // POST /v1/utxos/lookup
	kindRevalidate             // a GET again with If-None-Match: the ETag it answered before
	numKinds
)

var kindNames = [numKinds]string{"tip", "page", "deep", "balance", "outpoint", "lookup", "revalidate"}

func (k kind) String() string { return kindNames[k] }

// Mix is the share of each request kind, as relative weights.
type Mix [numKinds]int

// DefaultMix is a wallet backend's read traffic: mostly balances and first
// pages of popular addresses, some deep listings, single and batch outpoint
// lookups, and polling revalidations.
var DefaultMix = Mix{kindTip: 5, kindPage: 25, kindDeep: 10, kindBalance: 25, kindOutpoint: 20, kindLookup: 5, kindRevalidate: 10}

// HotMix is the hot phase's mix: reads a cache tier answers once warm (no
// lookups, which bypass the caches by design, and no deep pages, whose
// cursors make every key new), over a small set of popular addresses and
// young outpoints (see reqGen.hot).
var HotMix = Mix{kindTip: 5, kindPage: 30, kindBalance: 35, kindOutpoint: 20, kindRevalidate: 10}

// ParseMix parses "page=25,deep=10,balance=25,...": kinds not named get
// weight 0. Kinds: tip, page, deep, balance, outpoint, lookup, revalidate.
func ParseMix(s string) (Mix, error) {
	var m Mix
	total := 0
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, val, ok := strings.Cut(part, "=")
		if !ok {
			return m, fmt.Errorf("loadtest: mix %q: want kind=weight", part)
		}
		k := -1
		for i, n := range kindNames {
			if n == strings.TrimSpace(name) {
				k = i
			}
		}
		if k < 0 {
			return m, fmt.Errorf("loadtest: mix: unknown kind %q (want %s)", name, strings.Join(kindNames[:], ", "))
		}
		w, err := strconv.Atoi(strings.TrimSpace(val))
		if err != nil || w < 0 {
			return m, fmt.Errorf("loadtest: mix: weight of %s must be a non-negative integer", name)
		}
		m[k] = w
		total += w
	}
	if total == 0 {
		return m, fmt.Errorf("loadtest: mix %q has no weight", s)
	}
	return m, nil
}

// String renders the mix as ParseMix reads it.
func (m Mix) String() string {
	var parts []string
	for k, w := range m {
		if w > 0 {
			parts = append(parts, kindNames[k]+"="+strconv.Itoa(w))
		}
	}
	return strings.Join(parts, ",")
}

func (m Mix) pick(r *rand.Rand) kind {
	total := 0
	for _, w := range m {
		total += w
	}
	n := r.IntN(total)
	for k, w := range m {
		if n < w {
			return kind(k)
		}
		n -= w
	}
	return kindTip
}

// request is one request to send, with what the checker needs to know about
// what was asked.
type request struct {
	kind   kind
	method string
	path   string // with query
	body   []byte
	inm    string // If-None-Match

	address string
	desc    bool
	limit   int
	cursor  string
	depth   int              // pages followed so far (deep)
	prev    *pagePosition    // where the previous page of a deep walk ended
	ops     []chain.OutPoint // outpoint or lookup
}

// pagePosition is the end of a page a deep walk received: the last item and
// the tip of that answer.
type pagePosition struct {
	last chain.OutPoint
	tip  chain.Tip
}

// walk is an unfinished deep listing: the next page to ask for.
type walk struct {
	address string
	desc    bool
	cursor  string
	depth   int
	prev    *pagePosition
}

// reqGen makes the requests of a mix. Its pools are shared by every worker;
// each worker passes its own rand and Zipf.
type reqGen struct {
	mix      Mix
	w        *world
	limit    int // page size
	batch    int // lookup batch size
	maxDepth int // pages of one deep walk

	// hot narrows the keys to hotAddresses addresses and hotOutPoints
	// outpoints, which the hot phase's warmup puts in the caches.
	hot bool

	mu     sync.Mutex
	walks  []walk     // guarded by mu: LIFO of unfinished deep walks
	etags  []etagSeen // guarded by mu: ring of answers to revalidate
	etagAt int        // guarded by mu
}

type etagSeen struct{ path, etag string }

const (
	maxWalks      = 1024
	etagRing      = 2048
	exchangeShare = 50 // per mille of address reads that go to an exchange address
	hotAddresses  = 1000
	hotOutPoints  = 4096
)

// workerRand is a worker's private randomness.
type workerRand struct {
	r    *rand.Rand
	zipf *rand.Zipf
}

func newWorkerRand(seed int64, worker int, addrs int) *workerRand {
	r := rand.New(rand.NewPCG(uint64(seed), uint64(worker)+1))
	return &workerRand{r: r, zipf: rand.NewZipf(r, 1.1, 20, uint64(max(addrs-1, 1)))}
}

// address picks an address to read: Zipf-popular among the ordinary ones,
// and now and then an exchange address with its pile of outputs.
func (g *reqGen) address(wr *workerRand, exchangePerMille int) string {
	if len(g.w.exchange) > 0 && wr.r.IntN(1000) < exchangePerMille {
		return g.w.exchange[wr.r.IntN(len(g.w.exchange))]
	}
	i := int(wr.zipf.Uint64())
	if g.hot {
		i %= hotAddresses
	}
	return g.w.addrs[min(i, len(g.w.addrs)-1)]
}

func (g *reqGen) next(wr *workerRand) request {
	k := g.mix.pick(wr.r)
	switch k {
	case kindTip:
		return request{kind: k, method: "GET", path: "/v1/tip"}
	case kindPage:
		desc := wr.r.IntN(5) == 0
		return g.page(kindPage, walk{address: g.address(wr, exchangeShare), desc: desc})
	case kindDeep:
		g.mu.Lock()
		var wk walk
		if n := len(g.walks); n > 0 {
			wk = g.walks[n-1]
			g.walks = g.walks[:n-1]
		} else {
			// A new walk: an exchange address half of the time.
			wk = walk{address: g.address(wr, 500), desc: wr.r.IntN(4) == 0}
		}
		g.mu.Unlock()
		return g.page(kindDeep, wk)
	case kindBalance:
		a := g.address(wr, exchangeShare)
		return request{kind: k, method: "GET", path: "/v1/addresses/" + url.PathEscape(a) + "/balance", address: a}
	case kindOutpoint:
		var op chain.OutPoint
		if pool := g.w.ops.Load(); g.hot {
			op = pool.base[len(pool.base)-1-wr.r.IntN(min(len(pool.base), hotOutPoints))]
		} else {
			op = pool.pick(wr.r)
		}
		return request{kind: k, method: "GET", path: "/v1/utxos/" + op.TxHash.String() + "/" + strconv.FormatUint(uint64(op.Index), 10),
			ops: []chain.OutPoint{op}}
	case kindLookup:
		pool := g.w.ops.Load()
		ops := make([]chain.OutPoint, g.batch)
		body := []byte(`{"outpoints":[`)
		for i := range ops {
			ops[i] = pool.pick(wr.r)
			if i > 0 {
				body = append(body, ',')
			}
			body = append(body, `{"tx_hash":"`...)
			body = append(body, ops[i].TxHash.String()...)
			body = append(body, `","index":`...)
			body = strconv.AppendUint(body, uint64(ops[i].Index), 10)
			body = append(body, '}')
		}
		body = append(body, "]}"...)
		return request{kind: k, method: "POST", path: "/v1/utxos/lookup", body: body, ops: ops}
	case kindRevalidate:
		g.mu.Lock()
		var seen etagSeen
		if n := len(g.etags); n > 0 {
			seen = g.etags[wr.r.IntN(n)]
		}
		g.mu.Unlock()
		if seen.path == "" { // nothing seen yet: a plain balance read
			a := g.address(wr, exchangeShare)
			return request{kind: kindBalance, method: "GET", path: "/v1/addresses/" + url.PathEscape(a) + "/balance", address: a}
		}
		return request{kind: k, method: "GET", path: seen.path, inm: seen.etag}
	}
	panic("unreachable")
}

func (g *reqGen) page(k kind, wk walk) request {
	q := url.Values{}
	q.Set("limit", strconv.Itoa(g.limit))
	if wk.desc {
		q.Set("order", "desc")
	}
	if wk.cursor != "" {
		q.Set("cursor", wk.cursor)
	}
	return request{
		kind: k, method: "GET", path: "/v1/addresses/" + url.PathEscape(wk.address) + "/utxos?" + q.Encode(),
		address: wk.address, desc: wk.desc, limit: g.limit, cursor: wk.cursor, depth: wk.depth, prev: wk.prev,
	}
}

// continueWalk queues the next page of a deep walk.
func (g *reqGen) continueWalk(req *request, cursor string, end *pagePosition) {
	if req.depth+1 >= g.maxDepth {
		return
	}
	g.mu.Lock()
	if len(g.walks) < maxWalks {
		g.walks = append(g.walks, walk{address: req.address, desc: req.desc, cursor: cursor, depth: req.depth + 1, prev: end})
	}
	g.mu.Unlock()
}

// sawETag remembers an answer to revalidate later.
func (g *reqGen) sawETag(path, etag string) {
	g.mu.Lock()
	if len(g.etags) < etagRing {
		g.etags = append(g.etags, etagSeen{path, etag})
	} else {
		g.etags[g.etagAt] = etagSeen{path, etag}
		g.etagAt = (g.etagAt + 1) % etagRing
	}
	g.mu.Unlock()
}
