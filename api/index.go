package api

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/utxo-cache/utxo-cache/cardano/credential"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/query"
)

// IndexReader is the read side of the index routes (query.Server): the
// outputs and balance of a payment credential, a stake credential, a policy
// or an asset. A Reader that is not one answers those routes 404
// not_indexed.
type IndexReader interface {
	IndexUtxosFiltered(ctx context.Context, k query.IndexKey, desc bool, limit int, cursor string, f query.Filter) (query.Answer, error)
	IndexBalance(ctx context.Context, k query.IndexKey) (query.Answer, error)
	IndexBalancePending(ctx context.Context, k query.IndexKey) (query.Answer, error)
}

// policyHexLen is the length of a policy in a unit: Cardano's 28-byte
// policy id, in hex (a unit is the policy's hex then the name's).
const policyHexLen = 2 * 28

// indexRoutes registers the routes of the index dimensions, each as the
// address routes are: /utxos (pages, cursors, order) and /balance.
func (a *API) indexRoutes() {
	for _, r := range []struct {
		path  string
		param string
		parse func(string) (query.IndexKey, error)
	}{
		{"/v1/payment-credentials/:credential", "credential", parsePaymentKey},
		{"/v1/stake-credentials/:credential", "credential", parseStakeKey},
		{"/v1/policies/:policy", "policy", parsePolicyKey},
		{"/v1/assets/:unit", "unit", parseUnitKey},
	} {
		a.route(http.MethodGet, r.path+"/utxos", a.read(a.getIndexUtxos(r.param, r.parse)))
		a.route(http.MethodGet, r.path+"/balance", a.read(a.getIndexBalance(r.param, r.parse)))
	}
}

func parsePaymentKey(s string) (query.IndexKey, error) {
	v, err := credential.ParsePayment(s)
	if err != nil {
		return query.IndexKey{}, fmt.Errorf("payment credential: %v: %w", err, chain.ErrInvalidArgument)
	}
	return query.IndexKey{Dim: query.DimPaymentCredential, Value: v, Field: "payment_credential", Label: s}, nil
}

func parseStakeKey(s string) (query.IndexKey, error) {
	v, err := credential.ParseStake(s)
	if err != nil {
		return query.IndexKey{}, fmt.Errorf("stake credential: %v: %w", err, chain.ErrInvalidArgument)
	}
	return query.IndexKey{Dim: query.DimStakeCredential, Value: v, Field: "stake_credential", Label: s}, nil
}

// parsePolicyKey reads a policy id: hex (either case) of 1..chain.MaxPolicyLen
// bytes (Cardano's are 28). The answer names it in lower case.
func parsePolicyKey(s string) (query.IndexKey, error) {
	p, err := hex.DecodeString(s)
	if err != nil || len(p) < 1 || len(p) > chain.MaxPolicyLen {
		return query.IndexKey{}, fmt.Errorf("policy %q: hex of 1..%d bytes: %w", clip(s), chain.MaxPolicyLen, chain.ErrInvalidArgument)
	}
	return query.IndexKey{Dim: query.DimAssetPolicy, Value: p, Field: "policy", Label: hex.EncodeToString(p)}, nil
}

// parseUnitKey reads a unit: the hex (either case) of a 28-byte policy id
// followed by the hex of the asset name (0..chain.MaxAssetNameLen bytes).
// The answer names it in lower case.
func parseUnitKey(s string) (query.IndexKey, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(s) < policyHexLen || len(b) > policyHexLen/2+chain.MaxAssetNameLen {
		return query.IndexKey{}, fmt.Errorf("unit %q: the hex of a 28-byte policy id then of a name of 0..%d bytes: %w",
			clip(s), chain.MaxAssetNameLen, chain.ErrInvalidArgument)
	}
	policy, name := b[:policyHexLen/2], b[policyHexLen/2:]
	return query.IndexKey{Dim: query.DimAsset, Value: query.AssetValue(policy, name), Field: "unit", Label: hex.EncodeToString(b)}, nil
}

// clip shortens a parameter quoted in an error message.
func clip(s string) string {
	const max = 128
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

func (a *API) indexReader() (IndexReader, error) {
	ir, ok := a.r.(IndexReader)
	if !ok {
		return nil, fmt.Errorf("this server reads no index: %w", query.ErrNotIndexed)
	}
	return ir, nil
}

func (a *API) getIndexUtxos(param string, parse func(string) (query.IndexKey, error)) gin.HandlerFunc {
	return func(c *gin.Context) {
		q, rc, ok := a.readQuery(c, pageParamNames)
		if !ok {
			return
		}
		desc, limit, cursor, err := pageParams(&q)
		if err != nil {
			a.fail(c, err)
			return
		}
		f, ok := a.listFilter(c, &q)
		if !ok {
			return
		}
		k, err := parse(c.Param(param))
		if err != nil {
			a.fail(c, err)
			return
		}
		ir, err := a.indexReader()
		if err != nil {
			a.fail(c, err)
			return
		}
		a.serveRead(c, rc, true, func(ctx context.Context) (query.Answer, error) {
			return ir.IndexUtxosFiltered(ctx, k, desc, limit, cursor, f)
		})
	}
}

func (a *API) getIndexBalance(param string, parse func(string) (query.IndexKey, error)) gin.HandlerFunc {
	return func(c *gin.Context) {
		q, rc, ok := a.readQuery(c, balanceParamNames)
		if !ok {
			return
		}
		pending, ok := a.pendingMode(c, &q)
		if !ok {
			return
		}
		k, err := parse(c.Param(param))
		if err != nil {
			a.fail(c, err)
			return
		}
		ir, err := a.indexReader()
		if err != nil {
			a.fail(c, err)
			return
		}
		a.serveRead(c, rc, true, func(ctx context.Context) (query.Answer, error) {
			if pending {
				return ir.IndexBalancePending(ctx, k)
			}
			return ir.IndexBalance(ctx, k)
		})
	}
}
