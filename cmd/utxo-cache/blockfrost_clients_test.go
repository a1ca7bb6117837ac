package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/blake2b"

	"github.com/utxo-cache/utxo-cache/cardano"
	"github.com/utxo-cache/utxo-cache/cardano/script"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/internal/npmci"
	"github.com/utxo-cache/utxo-cache/internal/textenc"
)

// clientsDir holds the pinned npm install of Blockfrost's clients.
var clientsDir = filepath.Join("..", "..", "blockfrost", "testdata", "clients")

// bfOutput is one output of the model: what applying the chunk's blocks
// with the chain's rules leaves, computed from the Cardano adapter's blocks
// (not from the store).
type bfOutput struct {
	u         chain.Utxo
	block     chain.Hash
	spentBy   *chain.Hash
	spentAt   uint64
	paymentCr string // hex of the payment credential's hash, "" for none
	scriptPay bool
	stakeAddr string
}

// bfModel is the chunk's outputs, by outpoint, in chain order.
type bfModel struct {
	outs  map[chain.OutPoint]*bfOutput
	order []chain.OutPoint // creation order: chain order
	tip   chain.Tip
	prev  chain.Hash
}

func buildBlockfrostModel(t *testing.T, chunkPath string) *bfModel {
	t.Helper()
	data, err := os.ReadFile(chunkPath)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := os.ReadFile(strings.TrimSuffix(chunkPath, ".chunk") + ".secondary")
	if err != nil {
		t.Fatal(err)
	}
	c, err := cardano.SplitChunk(data, sec)
	if err != nil {
		t.Fatal(err)
	}
	a, err := cardano.NewAdapter(cardano.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := &bfModel{outs: map[chain.OutPoint]*bfOutput{}}
	for _, raw := range c.Blocks {
		b, err := a.Convert(raw)
		if err != nil {
			t.Fatal(err)
		}
		blk := b.Chain
		m.prev = m.tip.Hash
		m.tip = chain.Tip{Height: blk.Height, Hash: blk.Hash}
		for pos := range blk.Txs {
			tx := &blk.Txs[pos]
			for _, op := range tx.Spends() {
				if o := m.outs[op]; o != nil && o.spentBy == nil {
					h := tx.Hash
					o.spentBy, o.spentAt = &h, blk.Height
				}
			}
			tx.Creates(func(index uint32, out *chain.Output, cr bool) {
				op := chain.OutPoint{TxHash: tx.Hash, Index: index}
				o := &bfOutput{u: chain.Utxo{OutPoint: op, Output: *out, Height: blk.Height, TxPos: uint32(pos)}, block: blk.Hash}
				if cr {
					o.u.Flags |= chain.FlagCollateralReturn
				}
				if hrp, rawAddr, err := textenc.DecodeBech32(out.Address, textenc.Bech32Const, nil); err == nil && strings.HasPrefix(hrp, "addr") {
					typ := rawAddr[0] >> 4
					if typ <= 7 {
						o.paymentCr = hex.EncodeToString(rawAddr[1:29])
						o.scriptPay = typ&1 == 1
					}
					if typ <= 3 {
						header := 0xe0 | (typ>>1&1)<<4 | rawAddr[0]&0x0f
						sh := "stake_test"
						if rawAddr[0]&0x0f == 1 {
							sh = "stake"
						}
						o.stakeAddr = textenc.Bech32(sh, textenc.ConvertBits(append([]byte{header}, rawAddr[29:57]...)), textenc.Bech32Const)
					}
				}
				m.outs[op] = o
				m.order = append(m.order, op)
			})
		}
	}
	return m
}

// live returns the live outputs keep takes, in chain order.
func (m *bfModel) live(keep func(o *bfOutput) bool) []*bfOutput {
	var out []*bfOutput
	for _, op := range m.order {
		if o := m.outs[op]; o.spentBy == nil && keep(o) {
			out = append(out, o)
		}
	}
	return out
}

// bfAmount is Blockfrost's amount list.
type bfAmount struct {
	Unit     string `json:"unit"`
	Quantity string `json:"quantity"`
}

func amountOf(o *bfOutput) []bfAmount {
	am := []bfAmount{{"lovelace", strconv.FormatUint(o.u.Value, 10)}}
	for _, a := range o.u.Assets {
		am = append(am, bfAmount{hex.EncodeToString(a.Policy) + hex.EncodeToString(a.Name), strconv.FormatUint(a.Quantity, 10)})
	}
	return am
}

func datumHashOf(o *bfOutput) *string {
	switch {
	case o.u.DatumHash != nil:
		s := hex.EncodeToString(o.u.DatumHash[:])
		return &s
	case o.u.Datum != nil:
		h := blake2b.Sum256(o.u.Datum)
		s := hex.EncodeToString(h[:])
		return &s
	}
	return nil
}

func hexOrNil(b []byte) *string {
	if b == nil {
		return nil
	}
	s := hex.EncodeToString(b)
	return &s
}

// bfUtxo is an item of Blockfrost's address UTXO list.
type bfUtxo struct {
	Address             string     `json:"address"`
	TxHash              string     `json:"tx_hash"`
	TxIndex             uint32     `json:"tx_index"`
	OutputIndex         uint32     `json:"output_index"`
	Amount              []bfAmount `json:"amount"`
	Block               string     `json:"block"`
	DataHash            *string    `json:"data_hash"`
	InlineDatum         *string    `json:"inline_datum"`
	ReferenceScriptHash *string    `json:"reference_script_hash"`
}

// wantUtxo is the model's item of o; the reference script's hash is the
// one given (checked apart, against the clients' own hashing).
func wantUtxo(o *bfOutput, refHash *string) bfUtxo {
	return bfUtxo{Address: o.u.Address, TxHash: o.u.TxHash.String(), TxIndex: o.u.Index, OutputIndex: o.u.Index,
		Amount: amountOf(o), Block: o.block.String(), DataHash: datumHashOf(o), InlineDatum: hexOrNil(o.u.Datum),
		ReferenceScriptHash: refHash}
}

// clientResult is one read of a client: ok or error.
type clientResult struct {
	OK     json.RawMessage `json:"ok"`
	Error  string          `json:"error"`
	Status int             `json:"status"`
}

func (r clientResult) decode(t *testing.T, what string, dst any) {
	t.Helper()
	if r.Error != "" {
		t.Fatalf("%s: the client failed: %s", what, r.Error)
	}
	if err := json.Unmarshal(r.OK, dst); err != nil {
		t.Fatalf("%s: %v: %s", what, err, r.OK)
	}
}

// lucidUtxo is what clients.mjs keeps of a Lucid UTxO.
type lucidUtxo struct {
	TxHash             string            `json:"txHash"`
	OutputIndex        uint32            `json:"outputIndex"`
	Address            string            `json:"address"`
	Assets             map[string]string `json:"assets"`
	DatumHash          *string           `json:"datumHash"`
	Datum              *string           `json:"datum"`
	DatumHashComputed  *string           `json:"datumHashComputed"`
	ScriptType         *string           `json:"scriptType"`
	ScriptHashComputed *string           `json:"scriptHashComputed"`
}

// TestBlockfrostClients imports a real Cardano chunk, serves it, and runs
// Blockfrost's own clients (blockfrost-js, Lucid Evolution's and Mesh's
// Blockfrost providers, pinned in blockfrost/testdata/clients) on a sample
// of its addresses, credentials, units, accounts, out-refs, scripts and
// datums. Every answer is checked against a model of the chunk built from
// the Cardano adapter's blocks with the chain's rules, the chunk's raw-CBOR
// facts (live outpoints and lovelace), the /v1 answers, and the hashes the
// clients' own libraries compute of the scripts and datums they received.
func TestBlockfrostClients(t *testing.T) {
	npmci.Ensure(t, clientsDir, "the Blockfrost client test", "@blockfrost/blockfrost-js", "@lucid-evolution/lucid", "@meshsdk/core")
	chunk := cardanoFixture("01836.chunk")
	dir := filepath.Join(t.TempDir(), "store")
	mustImportCardano(t, "--data-dir", dir, "--skip-unknown-inputs", chunk)
	m := buildBlockfrostModel(t, chunk)
	facts := chunkFactsOf(t, chunk)
	all := m.live(func(*bfOutput) bool { return true })
	if len(all) != len(facts.live) {
		t.Fatalf("model: %d live outputs, the raw chunk %d", len(all), len(facts.live))
	}
	for _, o := range all {
		if v, ok := facts.live[o.u.OutPoint]; !ok || v != o.u.Value {
			t.Fatalf("model: %s live with %d lovelace; raw chunk: %d, %v", o.u.OutPoint, o.u.Value, v, ok)
		}
	}
	p := startServe(t, dir)
	base := p.base + "/api/v0"

	// The sample: addresses of each kind of output (few outputs each: Lucid
	// sleeps 0.5 s per ten), their payment credentials, stake addresses,
	// units, out-refs, scripts and datums.
	byAddr := map[string][]*bfOutput{}
	for _, o := range all {
		byAddr[o.u.Address] = append(byAddr[o.u.Address], o)
	}
	var addrs []string
	pick := func(keep func(o *bfOutput) bool) {
		for _, o := range all {
			if n := len(byAddr[o.u.Address]); n <= 9 && keep(o) && !slices.Contains(addrs, o.u.Address) {
				addrs = append(addrs, o.u.Address)
				return
			}
		}
	}
	pick(func(o *bfOutput) bool { return o.u.ScriptRef != nil })
	pick(func(o *bfOutput) bool { return o.u.Datum != nil })
	pick(func(o *bfOutput) bool { return o.u.DatumHash != nil })
	pick(func(o *bfOutput) bool { return len(o.u.Assets) > 0 })
	pick(func(o *bfOutput) bool { return o.scriptPay })
	pick(func(o *bfOutput) bool { return o.stakeAddr != "" })
	pick(func(o *bfOutput) bool { return o.paymentCr != "" && o.stakeAddr == "" })
	pick(func(o *bfOutput) bool { return len(byAddr[o.u.Address]) >= 3 })
	var paged string
	for a, outs := range byAddr {
		if len(outs) >= 7 && (paged == "" || a < paged) {
			paged = a
		}
	}
	if paged == "" {
		t.Fatal("no address with 7 outputs to page")
	}
	type credential struct {
		Type string `json:"type"`
		Hash string `json:"hash"`
	}
	var creds []credential
	var stakes []string
	var units []map[string]string
	var scriptHashes, datumHashes []string
	refHash := map[chain.OutPoint]string{}
	for _, o := range all {
		if o.u.ScriptRef != nil {
			r, err := script.ParseRef(o.u.ScriptRef)
			if err != nil {
				t.Fatalf("%s: reference script: %v", o.u.OutPoint, err)
			}
			refHash[o.u.OutPoint] = hex.EncodeToString(r.Hash[:])
		}
	}
	for _, a := range addrs {
		o := byAddr[a][0]
		if o.paymentCr != "" && len(creds) < 3 {
			typ := "Key"
			if o.scriptPay {
				typ = "Script"
			}
			creds = append(creds, credential{typ, o.paymentCr})
		}
		if o.stakeAddr != "" && !slices.Contains(stakes, o.stakeAddr) && len(stakes) < 2 {
			stakes = append(stakes, o.stakeAddr)
		}
		for _, x := range byAddr[a] {
			if len(x.u.Assets) > 0 && len(units) < 2 {
				units = append(units, map[string]string{"address": a, "unit": amountOf(x)[1].Unit})
			}
			if h, ok := refHash[x.u.OutPoint]; ok && !slices.Contains(scriptHashes, h) {
				scriptHashes = append(scriptHashes, h)
			}
			if x.u.Datum != nil && len(datumHashes) < 3 {
				datumHashes = append(datumHashes, *datumHashOf(x))
			}
		}
	}
	for _, o := range all { // every reference script kind the chunk has
		if h, ok := refHash[o.u.OutPoint]; ok && !slices.Contains(scriptHashes, h) && len(scriptHashes) < 6 {
			scriptHashes = append(scriptHashes, h)
		}
	}
	var outRefs []map[string]any
	for _, a := range addrs[:3] {
		o := byAddr[a][0]
		outRefs = append(outRefs, map[string]any{"txHash": o.u.TxHash.String(), "outputIndex": o.u.Index})
	}
	if len(scriptHashes) == 0 || len(datumHashes) == 0 || len(units) == 0 || len(stakes) == 0 {
		t.Fatalf("sample lacks a kind: %d scripts, %d datums, %d units, %d stake addresses", len(scriptHashes), len(datumHashes), len(units), len(stakes))
	}
	// An address of the chunk's network that holds nothing.
	empty := textenc.Bech32("addr_test", textenc.ConvertBits(append([]byte{0x60}, make([]byte, 28)...)), textenc.Bech32Const)
	sample := map[string]any{"url": base, "addresses": addrs, "credentials": creds, "stakeAddresses": stakes,
		"units": units, "outRefs": outRefs, "scriptHashes": scriptHashes, "datumHashes": datumHashes,
		"pagedAddress": paged, "emptyAddress": empty}
	sb, _ := json.Marshal(sample)
	samplePath := filepath.Join(t.TempDir(), "sample.json")
	if err := os.WriteFile(samplePath, sb, 0o644); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(samplePath)
	cmd := exec.Command("node", "clients.mjs", abs)
	cmd.Dir = clientsDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("node clients.mjs: %v\n%s", err, stderr.String())
	}
	t.Logf("clients ran in %s over %d addresses, %d credentials, %d units, %d accounts, %d out-refs, %d scripts, %d datums",
		time.Since(start).Round(time.Millisecond), len(addrs), len(creds), len(units), len(stakes), len(outRefs), len(scriptHashes), len(datumHashes))
	var out struct {
		BlockfrostJS struct {
			Addresses   map[string]clientResult `json:"addresses"`
			AddressInfo map[string]clientResult `json:"addressInfo"`
			Units       []clientResult          `json:"units"`
			Accounts    map[string]clientResult `json:"accounts"`
			Txs         map[string]clientResult `json:"txs"`
			Latest      clientResult            `json:"latest"`
			Scripts     map[string]struct {
				Info, CBOR, JSON clientResult
			} `json:"scripts"`
			Datums  map[string]clientResult `json:"datums"`
			Page2   clientResult            `json:"page2"`
			Missing clientResult            `json:"missing"`
		} `json:"blockfrostjs"`
		Lucid struct {
			Addresses      map[string]clientResult `json:"addresses"`
			Credentials    map[string]clientResult `json:"credentials"`
			Units          []clientResult          `json:"units"`
			OutRefs        clientResult            `json:"outRefs"`
			Datums         map[string]clientResult `json:"datums"`
			UnknownAddress clientResult            `json:"unknownAddress"`
		} `json:"lucid"`
		Mesh struct {
			Addresses map[string]clientResult `json:"addresses"`
			Units     []clientResult          `json:"units"`
		} `json:"mesh"`
	}
	if err := json.Unmarshal(outb, &out); err != nil {
		t.Fatalf("clients.mjs output: %v", err)
	}
	refOf := func(o *bfOutput) *string {
		if h, ok := refHash[o.u.OutPoint]; ok {
			return &h
		}
		return nil
	}
	wantList := func(outs []*bfOutput) []bfUtxo {
		w := []bfUtxo{}
		for _, o := range outs {
			w = append(w, wantUtxo(o, refOf(o)))
		}
		return w
	}
	checkList := func(what string, r clientResult, want []bfUtxo) {
		t.Helper()
		var got []bfUtxo
		r.decode(t, what, &got)
		if got == nil {
			got = []bfUtxo{}
		}
		if !jsonEqual(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", what, mustJSON(got), mustJSON(want))
		}
	}
	// The scripts' hashes, as Lucid's own libraries compute them from what
	// the service sent (its scripts resolved through /scripts/{hash}…).
	lucidRef := map[string]string{}

	// blockfrost-js.
	bj := out.BlockfrostJS
	for _, a := range addrs {
		want := wantList(byAddr[a])
		checkList("blockfrost-js addressesUtxosAll "+a, bj.Addresses[a], want)
		// The same outputs as /v1 lists.
		v1 := v1Outpoints(t, p, "/v1/addresses/"+url.PathEscape(a)+"/utxos")
		var got []string
		for _, w := range want {
			got = append(got, w.TxHash+"#"+strconv.FormatUint(uint64(w.OutputIndex), 10))
		}
		if !slices.Equal(got, v1) {
			t.Errorf("%s: Blockfrost lists %v, /v1 %v", a, got, v1)
		}
		var info struct {
			Address      string     `json:"address"`
			Amount       []bfAmount `json:"amount"`
			StakeAddress *string    `json:"stake_address"`
			Type         string     `json:"type"`
			Script       bool       `json:"script"`
		}
		bj.AddressInfo[a].decode(t, "blockfrost-js addresses "+a, &info)
		o := byAddr[a][0]
		sum := map[string]uint64{}
		var order []string
		for _, x := range byAddr[a] {
			for _, am := range amountOf(x) {
				q, _ := strconv.ParseUint(am.Quantity, 10, 64)
				if _, seen := sum[am.Unit]; !seen {
					order = append(order, am.Unit)
				}
				sum[am.Unit] += q
			}
		}
		slices.Sort(order[1:])
		wantAmount := []bfAmount{}
		for _, u := range order {
			wantAmount = append(wantAmount, bfAmount{u, strconv.FormatUint(sum[u], 10)})
		}
		var wantStake *string
		if o.stakeAddr != "" {
			wantStake = &o.stakeAddr
		}
		if info.Address != a || !jsonEqual(info.Amount, wantAmount) || !jsonEqual(info.StakeAddress, wantStake) ||
			info.Type != "shelley" || info.Script != o.scriptPay {
			t.Errorf("blockfrost-js addresses %s: %+v; want amount %v, stake %v, script %v", a, info, wantAmount, o.stakeAddr, o.scriptPay)
		}
	}
	for i, u := range units {
		want := wantList(m.live(func(o *bfOutput) bool {
			return o.u.Address == u["address"] && slices.ContainsFunc(amountOf(o)[1:], func(a bfAmount) bool { return a.Unit == u["unit"] })
		}))
		checkList("blockfrost-js addressesUtxosAssetAll "+u["unit"], bj.Units[i], want)
	}
	for _, s := range stakes {
		checkList("blockfrost-js accountsUtxosAll "+s, bj.Accounts[s], wantList(m.live(func(o *bfOutput) bool { return o.stakeAddr == s })))
	}
	for _, r := range outRefs {
		h := r["txHash"].(string)
		var got struct {
			Hash    string            `json:"hash"`
			Inputs  any               `json:"inputs"`
			Outputs []json.RawMessage `json:"outputs"`
		}
		bj.Txs[h].decode(t, "blockfrost-js txsUtxos "+h, &got)
		// The outputs the store holds: the live ones, and the spent ones
		// whose record the prune depth keeps (the service runs with
		// e2ePruneDepth); the others are absent.
		var want []string
		for _, op := range m.order {
			o := m.outs[op]
			if o.spentBy != nil && m.tip.Height-o.spentAt > e2ePruneDepth {
				continue
			}
			if op.TxHash.String() == h {
				spent := "null"
				if o.spentBy != nil {
					spent = `"` + o.spentBy.String() + `"`
				}
				dh, id, rh := "null", "null", "null"
				if d := datumHashOf(o); d != nil {
					dh = `"` + *d + `"`
				}
				if o.u.Datum != nil {
					id = `"` + hex.EncodeToString(o.u.Datum) + `"`
				}
				if x := refOf(o); x != nil {
					rh = `"` + *x + `"`
				}
				want = append(want, fmt.Sprintf(`{"address":%q,"amount":%s,"output_index":%d,"data_hash":%s,"inline_datum":%s,"reference_script_hash":%s,"collateral":%v,"consumed_by_tx":%s}`,
					o.u.Address, mustJSON(amountOf(o)), op.Index, dh, id, rh, o.u.CollateralReturn(), spent))
			}
		}
		var gotOuts []string
		for _, x := range got.Outputs {
			gotOuts = append(gotOuts, string(x))
		}
		if got.Hash != h || got.Inputs != nil || !slices.Equal(gotOuts, want) {
			t.Errorf("blockfrost-js txsUtxos %s:\n got %s %v\nwant %v", h, got.Hash, gotOuts, want)
		}
	}
	var latest struct {
		Hash          string `json:"hash"`
		Height        uint64 `json:"height"`
		PreviousBlock string `json:"previous_block"`
	}
	bj.Latest.decode(t, "blockfrost-js blocksLatest", &latest)
	if latest.Hash != m.tip.Hash.String() || latest.Height != m.tip.Height || latest.PreviousBlock != m.prev.String() {
		t.Errorf("blocksLatest %+v, want tip %s after %s", latest, m.tip, m.prev)
	}
	for _, h := range datumHashes {
		var got struct {
			CBOR string `json:"cbor"`
		}
		bj.Datums[h].decode(t, "blockfrost-js scriptsDatumCbor "+h, &got)
		b, _ := hex.DecodeString(got.CBOR)
		if sum := blake2b.Sum256(b); hex.EncodeToString(sum[:]) != h {
			t.Errorf("scriptsDatumCbor %s: %s hashes to %x", h, got.CBOR, sum)
		}
	}
	pagedAll := wantList(byAddr[paged])
	slices.Reverse(pagedAll)
	checkList("blockfrost-js addressesUtxos page 2, count 3, desc", bj.Page2, pagedAll[3:6])
	if bj.Missing.Status != 404 {
		t.Errorf("an unknown datum: %+v, want a 404 error", bj.Missing)
	}

	// Lucid.
	lu := out.Lucid
	wantLucid := func(outs []*bfOutput) []lucidUtxo {
		w := []lucidUtxo{}
		for _, o := range outs {
			assets := map[string]string{}
			for _, a := range amountOf(o) {
				assets[a.Unit] = a.Quantity
			}
			x := lucidUtxo{TxHash: o.u.TxHash.String(), OutputIndex: o.u.Index, Address: o.u.Address, Assets: assets,
				Datum: hexOrNil(o.u.Datum)}
			if o.u.Datum == nil {
				x.DatumHash = datumHashOf(o)
			} else {
				x.DatumHashComputed = datumHashOf(o)
			}
			w = append(w, x)
		}
		return w
	}
	checkLucid := func(what string, r clientResult, want []lucidUtxo) {
		t.Helper()
		var got []lucidUtxo
		r.decode(t, what, &got)
		if got == nil {
			got = []lucidUtxo{}
		}
		for i := range got { // the script is checked by its hash, below
			if got[i].ScriptHashComputed != nil {
				lucidRef[got[i].TxHash+"#"+strconv.Itoa(int(got[i].OutputIndex))] = *got[i].ScriptHashComputed
			}
			got[i].ScriptType, got[i].ScriptHashComputed = nil, nil
		}
		if !jsonEqual(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", what, mustJSON(got), mustJSON(want))
		}
	}
	for _, a := range addrs {
		checkLucid("lucid utxosAt "+a, lu.Addresses[a], wantLucid(byAddr[a]))
	}
	for _, c := range creds {
		checkLucid("lucid utxosAt credential "+c.Type+" "+c.Hash, lu.Credentials[c.Hash], wantLucid(m.live(func(o *bfOutput) bool { return o.paymentCr == c.Hash })))
	}
	for i, u := range units {
		checkLucid("lucid utxosAtWithUnit "+u["unit"], lu.Units[i], wantLucid(m.live(func(o *bfOutput) bool {
			return o.u.Address == u["address"] && slices.ContainsFunc(amountOf(o)[1:], func(a bfAmount) bool { return a.Unit == u["unit"] })
		})))
	}
	var refs []*bfOutput
	for _, a := range addrs[:3] {
		refs = append(refs, byAddr[a][0])
	}
	checkLucid("lucid utxosByOutRef", lu.OutRefs, wantLucid(refs))
	for _, h := range datumHashes {
		var got string
		lu.Datums[h].decode(t, "lucid datumOf "+h, &got)
		b, _ := hex.DecodeString(got)
		if sum := blake2b.Sum256(b); hex.EncodeToString(sum[:]) != h {
			t.Errorf("lucid datumOf %s: %s hashes to %x", h, got, sum)
		}
	}
	checkLucid("lucid utxosAt of an empty address", lu.UnknownAddress, []lucidUtxo{})
	// Every reference script Lucid resolved hashes, by Lucid's own
	// hashing, to the hash the service listed it under.
	for op, h := range refHash {
		if got, ok := lucidRef[op.String()]; ok && got != h {
			t.Errorf("%s: Lucid hashes the reference script it fetched to %s, the service lists %s", op, got, h)
		}
	}
	for _, h := range scriptHashes {
		s := bj.Scripts[h]
		var info struct {
			ScriptHash string  `json:"script_hash"`
			Type       string  `json:"type"`
			Size       *int    `json:"serialised_size"`
			CBOR       *string `json:"cbor"`
			JSON       any     `json:"json"`
		}
		s.Info.decode(t, "blockfrost-js scripts "+h, &info)
		s.CBOR.decode(t, "blockfrost-js scriptsCbor "+h, &info)
		s.JSON.decode(t, "blockfrost-js scriptsJson "+h, &info)
		native := info.Type == "timelock"
		if info.ScriptHash != h || native != (info.CBOR == nil) || native != (info.JSON != nil) ||
			(!native && (info.Size == nil || *info.Size != len(*info.CBOR)/2)) {
			t.Errorf("script %s: %+v", h, info)
		}
	}
	if len(lucidRef) == 0 {
		t.Error("Lucid resolved no reference script: the sample has none")
	}

	// Mesh.
	for _, a := range addrs {
		var got []struct {
			Input struct {
				TxHash      string `json:"txHash"`
				OutputIndex uint32 `json:"outputIndex"`
			} `json:"input"`
			Output struct {
				Address    string     `json:"address"`
				Amount     []bfAmount `json:"amount"`
				DataHash   *string    `json:"dataHash"`
				PlutusData *string    `json:"plutusData"`
				ScriptHash *string    `json:"scriptHash"`
			} `json:"output"`
		}
		out.Mesh.Addresses[a].decode(t, "mesh fetchAddressUTxOs "+a, &got)
		if len(got) != len(byAddr[a]) {
			t.Errorf("mesh fetchAddressUTxOs %s: %d UTxOs, want %d", a, len(got), len(byAddr[a]))
			continue
		}
		for i, o := range byAddr[a] {
			g := got[i]
			if g.Input.TxHash != o.u.TxHash.String() || g.Input.OutputIndex != o.u.Index || g.Output.Address != a ||
				!jsonEqual(g.Output.Amount, amountOf(o)) || !jsonEqual(g.Output.DataHash, datumHashOf(o)) ||
				!jsonEqual(g.Output.PlutusData, hexOrNil(o.u.Datum)) || !jsonEqual(g.Output.ScriptHash, refOf(o)) {
				t.Errorf("mesh fetchAddressUTxOs %s #%d: %+v", a, i, g)
			}
		}
	}
	for i, u := range units {
		var got []json.RawMessage
		out.Mesh.Units[i].decode(t, "mesh fetchAddressUTxOs with asset "+u["unit"], &got)
		want := m.live(func(o *bfOutput) bool {
			return o.u.Address == u["address"] && slices.ContainsFunc(amountOf(o)[1:], func(a bfAmount) bool { return a.Unit == u["unit"] })
		})
		if len(got) != len(want) {
			t.Errorf("mesh fetchAddressUTxOs %s %s: %d UTxOs, want %d", u["address"], u["unit"], len(got), len(want))
		}
	}

	// Errors in Blockfrost's shape; what the store does not keep is said.
	for path, want := range map[string]int{
		"/addresses/notanaddress/utxos":               400,
		"/addresses/" + addrs[0] + "/utxos?count=101": 400,
		"/addresses/" + addrs[0] + "/utxos?page=0":    400,
		"/scripts/" + strings.Repeat("00", 28):        404,
		"/txs/" + strings.Repeat("00", 32) + "/utxos": 404,
		"/no/such/route":                              404,
	} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			StatusCode int    `json:"status_code"`
			Error      string `json:"error"`
			Message    string `json:"message"`
		}
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if err != nil || resp.StatusCode != want || e.StatusCode != want || e.Error != http.StatusText(want) || e.Message == "" {
			t.Errorf("GET %s: %d %+v (%v), want %d in Blockfrost's shape", path, resp.StatusCode, e, err, want)
		}
	}
}

// v1Outpoints lists every outpoint of a /v1 listing, all pages.
func v1Outpoints(t *testing.T, p *serveProc, path string) []string {
	t.Helper()
	var ops []string
	cursor := ""
	for {
		q := path + "?limit=1000"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		r := p.get(q)
		if r.code != 200 {
			t.Fatalf("GET %s: %s", q, r)
		}
		var page struct {
			Utxos []struct {
				TxHash string `json:"tx_hash"`
				Index  uint32 `json:"index"`
			} `json:"utxos"`
			NextCursor *string `json:"next_cursor"`
		}
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatal(err)
		}
		for _, u := range page.Utxos {
			ops = append(ops, u.TxHash+"#"+strconv.FormatUint(uint64(u.Index), 10))
		}
		if page.NextCursor == nil {
			return ops
		}
		cursor = *page.NextCursor
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// jsonEqual compares two values by their JSON.
func jsonEqual(a, b any) bool { return mustJSON(a) == mustJSON(b) }
