package loadtest

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/model"
)

// CheckResult counts the correctness sample of a phase (see the package
// doc for the sampling rule).
type CheckResult struct {
	Sampled    int64    `json:"sampled"`     // answers queued for checking
	Dropped    int64    `json:"dropped"`     // sampled while the queue was full
	Checked    int64    `json:"checked"`     // compared with the model
	SkippedTip int64    `json:"skipped_tip"` // answered at another state (seq) than the model's
	Mismatches int64    `json:"mismatches"`
	Examples   []string `json:"examples,omitempty"` // the first few mismatches
}

// sample is one answer to check.
type sample struct {
	req        request
	status     int
	headHeight string // X-Tip-Height
	commitSeq  string // X-Commit-Seq
	body       []byte
}

// checker compares sampled answers with the model, from one goroutine that
// spends at most budget of one core.
//
// The model lock is shared while an answer is compared, which holds up the
// feed's next model update: every comparison is kept proportional to the
// answer (see world.addressUtxosLocked), except the tip's UTXO count and
// digest, which need the whole model and are compared only in phases
// without a feed (stable), where one computation serves every sample.
type checker struct {
	w      *world
	budget float64
	stable bool // no feed: the model's tip does not move in this phase
	queue  chan sample
	stop   chan struct{} // closed by finish: skip what is still queued
	done   chan struct{}

	mu  sync.Mutex
	res CheckResult // guarded by mu

	// The checker goroutine's caches, valid at cacheTip: the tip's figures
	// and the listings of the addresses checked (an exchange address's is
	// 100k+ outputs long).
	cacheTip      chain.Tip
	figuresCount  uint64
	figuresDigest string
	lists         map[string][]chain.Utxo // by "a|" or "d|" + address
}

const maxCachedLists = 256

// listLocked returns the model's listing of address at its tip; w.mu is held.
func (c *checker) listLocked(tip chain.Tip, address string, desc bool) []chain.Utxo {
	c.resetCacheLocked(tip)
	key := "a|" + address
	if desc {
		key = "d|" + address
	}
	if l, ok := c.lists[key]; ok {
		return l
	}
	if len(c.lists) >= maxCachedLists {
		clear(c.lists)
	}
	l := c.w.addressUtxosLocked(address, desc)
	c.lists[key] = l
	return l
}

func (c *checker) resetCacheLocked(tip chain.Tip) {
	if c.cacheTip != tip || c.lists == nil {
		c.cacheTip, c.figuresDigest = tip, ""
		c.lists = map[string][]chain.Utxo{}
	}
}

const (
	checkQueue  = 64
	maxExamples = 10
)

func newChecker(w *world, budget float64, stable bool) *checker {
	c := &checker{w: w, budget: budget, stable: stable, queue: make(chan sample, checkQueue),
		stop: make(chan struct{}), done: make(chan struct{})}
	go c.loop()
	return c
}

// offer queues s unless the queue is full. Safe for concurrent use.
func (c *checker) offer(s sample) {
	select {
	case c.queue <- s:
		c.count(func(r *CheckResult) { r.Sampled++ })
	default:
		c.count(func(r *CheckResult) { r.Sampled++; r.Dropped++ })
	}
}

func (c *checker) count(f func(*CheckResult)) {
	c.mu.Lock()
	f(&c.res)
	c.mu.Unlock()
}

// finish stops the checker and returns the counts. Samples still queued
// are counted as dropped: draining them could take longer than the phase.
func (c *checker) finish() CheckResult {
	close(c.stop)
	close(c.queue)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.res
}

func (c *checker) loop() {
	defer close(c.done)
	for s := range c.queue {
		select {
		case <-c.stop:
			c.count(func(r *CheckResult) { r.Dropped++ })
			continue
		default:
		}
		start := time.Now()
		checked, err := c.check(&s)
		c.count(func(r *CheckResult) {
			switch {
			case err != nil:
				r.Checked++
				r.Mismatches++
				if len(r.Examples) < maxExamples {
					r.Examples = append(r.Examples, fmt.Sprintf("%s %s: %v", s.req.method, s.req.path, err))
				}
			case checked:
				r.Checked++
			default:
				r.SkippedTip++
			}
		})
		if c.budget > 0 && c.budget < 1 {
			rest := time.NewTimer(time.Duration(float64(time.Since(start)) * (1/c.budget - 1)))
			select {
			case <-rest.C:
			case <-c.stop:
				rest.Stop()
			}
		}
	}
}

// Answer shapes of docs/api.md, as the checker decodes them.
type (
	wireTip struct {
		Height uint64 `json:"height"`
		Hash   string `json:"hash"`
	}
	wireAsset struct {
		Policy   string `json:"policy"`
		Name     string `json:"name"`
		Quantity string `json:"quantity"`
	}
	wireUtxo struct {
		TxHash           string      `json:"tx_hash"`
		Index            uint32      `json:"index"`
		Address          string      `json:"address"`
		Value            string      `json:"value"`
		Assets           []wireAsset `json:"assets"`
		DatumHash        *string     `json:"datum_hash"`
		Datum            *string     `json:"datum"`
		ScriptRef        *string     `json:"script_ref"`
		Height           uint64      `json:"height"`
		Coinbase         bool        `json:"coinbase"`
		SpendableAt      *uint64     `json:"spendable_at_height"`
		CollateralReturn bool        `json:"collateral_return"`
	}
	wireSpent struct {
		TxHash string `json:"tx_hash"`
		Height uint64 `json:"height"`
	}
	wireOutpoint struct {
		TxHash string     `json:"tx_hash,omitempty"`
		Index  uint32     `json:"index,omitempty"`
		Utxo   *wireUtxo  `json:"utxo"`
		Spent  *wireSpent `json:"spent"`
	}
	wireAnswer struct {
		Tip        *wireTip       `json:"tip"`
		Address    string         `json:"address"`
		Utxos      []wireUtxo     `json:"utxos"`
		NextCursor *string        `json:"next_cursor"`
		Value      string         `json:"value"`
		Assets     []wireAsset    `json:"assets"`
		UtxoCount  uint64         `json:"utxo_count"`
		Digest     string         `json:"utxo_digest"`
		Results    []wireOutpoint `json:"results"`
		wireOutpoint
	}
)

func (t *wireTip) tip() (chain.Tip, error) {
	h, err := chain.ParseHash(t.Hash)
	return chain.Tip{Height: t.Height, Hash: h}, err
}

func toWire(u *chain.Utxo) wireUtxo {
	w := wireUtxo{
		TxHash: u.TxHash.String(), Index: u.Index, Address: u.Address,
		Value: strconv.FormatUint(u.Value, 10), Height: u.Height,
		Coinbase: u.Coinbase(), CollateralReturn: u.CollateralReturn(),
	}
	if u.Coinbase() {
		at := u.Height + 100 // Bitcoin's maturity, written out
		w.SpendableAt = &at
	}
	for _, a := range u.Assets {
		w.Assets = append(w.Assets, wireAsset{hex.EncodeToString(a.Policy), hex.EncodeToString(a.Name), strconv.FormatUint(a.Quantity, 10)})
	}
	if u.DatumHash != nil {
		s := u.DatumHash.String()
		w.DatumHash = &s
	}
	if u.Datum != nil {
		s := hex.EncodeToString(u.Datum)
		w.Datum = &s
	}
	if u.ScriptRef != nil {
		s := hex.EncodeToString(u.ScriptRef)
		w.ScriptRef = &s
	}
	return w
}

func normalize(u wireUtxo) wireUtxo {
	if len(u.Assets) == 0 {
		u.Assets = nil
	}
	return u
}

func sameUtxo(got wireUtxo, want *chain.Utxo) bool {
	return reflect.DeepEqual(normalize(got), normalize(toWire(want)))
}

// check compares one answer with the model. It returns checked == false when
// the answer's state is not the model's, and an error describing a mismatch.
//
// The state is named by its commit sequence (X-Commit-Seq, CONTRACT §7),
// not by its tip, because a tip names no single state: after a rollback to
// height H the writer is back at the tip (H, hash) it had several changes
// earlier, and a replica that lags, or an answer that waited in the
// checker's queue, may come from that earlier state. The seq the feed
// records with each acknowledged write, under the model's lock, names that
// write's state and no other, on the writer and on every replica (a
// replica at seq S is the writer at S): an answer at the model's seq must
// equal the model's answer, and one at any other seq, older or newer, is
// skipped. At the model's seq the answer's tip must be the model's: any
// other is a mismatch, not a skip.
func (c *checker) check(s *sample) (checked bool, err error) {
	var a wireAnswer
	if err := json.Unmarshal(s.body, &a); err != nil {
		return true, fmt.Errorf("undecodable answer: %v", err)
	}
	if a.Tip == nil {
		return true, errors.New("answer without a tip")
	}
	tip, err := a.Tip.tip()
	if err != nil {
		return true, fmt.Errorf("answer tip: %v", err)
	}
	if s.headHeight != strconv.FormatUint(tip.Height, 10) {
		return true, fmt.Errorf("X-Tip-Height %q but body tip %d", s.headHeight, tip.Height)
	}
	seq, err := strconv.ParseUint(s.commitSeq, 10, 64)
	if err != nil {
		return true, fmt.Errorf("X-Commit-Seq %q: %v", s.commitSeq, err)
	}
	if s.req.kind == kindTip && !c.stable {
		return false, nil
	}
	c.w.mu.RLock()
	defer c.w.mu.RUnlock()
	m := c.w.model
	if c.w.seq == 0 || seq != c.w.seq {
		return false, nil
	}
	if m.Tip() != tip {
		return true, fmt.Errorf("at seq %d the tip is %s, the model's %s", seq, tip, m.Tip())
	}
	return true, c.checkLocked(s, &a, tip)
}

// checkLocked compares an answer at the model's tip; w.mu is held.
func (c *checker) checkLocked(s *sample, a *wireAnswer, tip chain.Tip) error {
	m := c.w.model
	switch s.req.kind {
	case kindTip:
		c.resetCacheLocked(tip)
		if c.figuresDigest == "" {
			c.figuresCount, c.figuresDigest = m.Count(), m.Digest().String()
		}
		if a.UtxoCount != c.figuresCount {
			return fmt.Errorf("utxo_count %d, model %d", a.UtxoCount, c.figuresCount)
		}
		if a.Digest != c.figuresDigest {
			return fmt.Errorf("utxo_digest %s, model %s", a.Digest, c.figuresDigest)
		}
	case kindPage, kindDeep:
		return checkPage(c.listLocked(tip, s.req.address, s.req.desc), s, a, tip)
	case kindBalance:
		b := balanceOf(c.listLocked(tip, s.req.address, false))
		var want []wireAsset
		for _, x := range b.Assets {
			want = append(want, wireAsset{hex.EncodeToString(x.Policy), hex.EncodeToString(x.Name), x.Quantity.String()})
		}
		got := a.Assets
		if len(got) == 0 {
			got = nil
		}
		if a.Address != s.req.address || a.Value != b.Value.String() || a.UtxoCount != b.Count || !reflect.DeepEqual(got, want) {
			return fmt.Errorf("balance %s/%d/%v, model %s/%d/%v", a.Value, a.UtxoCount, got, b.Value, b.Count, want)
		}
	case kindOutpoint:
		return checkOutpoint(m, s.req.ops[0], s.status, &a.wireOutpoint, tip)
	case kindLookup:
		if len(a.Results) != len(s.req.ops) {
			return fmt.Errorf("%d results for %d outpoints", len(a.Results), len(s.req.ops))
		}
		for i, op := range s.req.ops {
			r := &a.Results[i]
			if r.TxHash != op.TxHash.String() || r.Index != op.Index {
				return fmt.Errorf("result %d is %s:%d, asked %s", i, r.TxHash, r.Index, op)
			}
			status := 200
			if r.Utxo == nil {
				status = 404
			}
			if err := checkOutpoint(m, op, status, r, tip); err != nil {
				return fmt.Errorf("result %d: %w", i, err)
			}
		}
	}
	return nil
}

func checkOutpoint(m *model.Model, op chain.OutPoint, status int, got *wireOutpoint, tip chain.Tip) error {
	u, spent, err := m.Utxo(op)
	if errors.Is(err, chain.ErrNotFound) {
		// The model forgets a spent record prune_depth blocks after the
		// spend; the service may keep it a while longer (docs/rollback-and-retention.md).
		if status == 200 && got.Spent != nil && tip.Height-got.Spent.Height > m.PruneDepth() {
			return nil
		}
		if status != 404 {
			return fmt.Errorf("outpoint %s: status %d, model: not found", op, status)
		}
		return nil
	}
	if status != 200 || got.Utxo == nil {
		return fmt.Errorf("outpoint %s: status %d, model: found", op, status)
	}
	if !sameUtxo(*got.Utxo, &u) {
		return fmt.Errorf("outpoint %s: utxo %+v, model %+v", op, *got.Utxo, toWire(&u))
	}
	var want *wireSpent
	if spent != nil {
		want = &wireSpent{TxHash: spent.TxHash.String(), Height: spent.Height}
	}
	if !reflect.DeepEqual(got.Spent, want) {
		return fmt.Errorf("outpoint %s: spent %+v, model %+v", op, got.Spent, want)
	}
	return nil
}

// checkPage checks a listing page against the model's listing at its tip:
// its items are consecutive items of the listing, starting at the front for a first page and right after
// the previous page's last item when that page was answered at the same tip;
// a null next_cursor means the listing ended. (A cursor on the last page is
// allowed: the contract does not promise null exactly at the end.)
func checkPage(list []chain.Utxo, s *sample, a *wireAnswer, tip chain.Tip) error {
	if a.Address != s.req.address {
		return fmt.Errorf("address %q, asked %q", a.Address, s.req.address)
	}
	if len(a.Utxos) > s.req.limit {
		return fmt.Errorf("%d items over the limit %d", len(a.Utxos), s.req.limit)
	}
	index := func(op chain.OutPoint) int {
		for i := range list {
			if list[i].OutPoint == op {
				return i
			}
		}
		return -1
	}
	start := -1
	switch {
	case s.req.cursor == "":
		start = 0
	case s.req.prev != nil && s.req.prev.tip == tip:
		if i := index(s.req.prev.last); i >= 0 {
			start = i + 1
		}
	}
	if start < 0 && len(a.Utxos) > 0 {
		op, err := parseOutPoint(a.Utxos[0].TxHash, a.Utxos[0].Index)
		if err != nil {
			return err
		}
		if start = index(op); start < 0 {
			return fmt.Errorf("item %s is not live at the tip", op)
		}
	}
	if start < 0 { // an empty page after a cursor: only possible at the end
		if a.NextCursor != nil {
			return errors.New("empty page with a next_cursor")
		}
		return nil
	}
	if start+len(a.Utxos) > len(list) {
		return fmt.Errorf("page of %d from position %d, model lists %d", len(a.Utxos), start, len(list))
	}
	for i := range a.Utxos {
		if !sameUtxo(a.Utxos[i], &list[start+i]) {
			return fmt.Errorf("item %d (position %d): %+v, model %+v", i, start+i, a.Utxos[i], toWire(&list[start+i]))
		}
	}
	if a.NextCursor == nil && start+len(a.Utxos) != len(list) {
		return fmt.Errorf("next_cursor null after position %d of %d", start+len(a.Utxos), len(list))
	}
	if a.NextCursor != nil && len(a.Utxos) == 0 {
		return errors.New("empty page with a next_cursor")
	}
	return nil
}

func parseOutPoint(txHash string, index uint32) (chain.OutPoint, error) {
	h, err := chain.ParseHash(txHash)
	if err != nil {
		return chain.OutPoint{}, fmt.Errorf("tx_hash %q: %v", txHash, err)
	}
	return chain.OutPoint{TxHash: h, Index: index}, nil
}
