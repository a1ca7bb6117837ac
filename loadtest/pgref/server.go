package pgref

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/utxo-cache/utxo-cache/api/bare"
	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/query"
)

// Server answers the reads of the reference from a loaded schema
// (bare.Reads). Its answers have the service's JSON shapes, encoded by the
// service's own encoders: a balance ({"tip","address","value","assets",
// "utxo_count"}), a page of an address's outputs in chain order
// ({"tip","address","utxos","next_cursor"}) and an outpoint
// ({"tip","utxo","spent":null}, or 404 not_found). Its cursors are its
// own (height.tx_pos.idx of the last item), resumed with a keyset scan.
// The tip is the loaded chain's, read once: the reference is not fed.
type Server struct {
	pool *pgxpool.Pool
	tip  chain.Tip

	// The SQL of each read, on the schema's tables.
	qBalance, qAssets, qPage, qPageDesc, qPageAfter, qPageBefore, qExtra, qOutpoint string
}

// NewServer returns the server of schema, loaded by Load.
func (db *DB) NewServer(ctx context.Context, schema string) (*Server, error) {
	pool := db.pool
	if !schemaRE.MatchString(schema) {
		return nil, fmt.Errorf("%w: %q", ErrSchema, schema)
	}
	s := pgx.Identifier{schema}.Sanitize()
	srv := &Server{pool: pool, tip: chain.Tip{Empty: true}}
	var height int64
	var hash []byte
	switch err := pool.QueryRow(ctx, "SELECT height, hash FROM "+s+".tip").Scan(&height, &hash); err {
	case nil:
		srv.tip = chain.Tip{Height: uint64(height)}
		copy(srv.tip.Hash[:], hash)
	case pgx.ErrNoRows:
	default:
		return nil, fmt.Errorf("pgref: tip: %w", err)
	}
	const cols = "tx_hash, idx, height, tx_pos, value, flags, extra"
	srv.qBalance = "SELECT count(*), coalesce(sum(value), 0)::text, coalesce(bool_or(extra), false) FROM " + s + ".utxo WHERE address = $1"
	srv.qAssets = "SELECT asset_policy, asset_name, asset_qty FROM " + s + ".utxo WHERE address = $1 AND extra AND asset_policy IS NOT NULL"
	srv.qPage = "SELECT " + cols + " FROM " + s + ".utxo WHERE address = $1 ORDER BY height, tx_pos, idx LIMIT $2"
	srv.qPageDesc = "SELECT " + cols + " FROM " + s + ".utxo WHERE address = $1 ORDER BY height DESC, tx_pos DESC, idx DESC LIMIT $2"
	srv.qPageAfter = "SELECT " + cols + " FROM " + s + ".utxo WHERE address = $1 AND (height, tx_pos, idx) > ($3, $4, $5) ORDER BY height, tx_pos, idx LIMIT $2"
	srv.qPageBefore = "SELECT " + cols + " FROM " + s + ".utxo WHERE address = $1 AND (height, tx_pos, idx) < ($3, $4, $5) ORDER BY height DESC, tx_pos DESC, idx DESC LIMIT $2"
	srv.qExtra = "SELECT asset_policy, asset_name, asset_qty, datum_hash, datum, script_ref FROM " + s + ".utxo WHERE tx_hash = $1 AND idx = $2"
	srv.qOutpoint = "SELECT address, height, tx_pos, value, flags, asset_policy, asset_name, asset_qty, datum_hash, datum, script_ref FROM " + s + ".utxo WHERE tx_hash = $1 AND idx = $2"
	return srv, nil
}

// Handler is the reference's HTTP handler: the service's Gin layer for the
// three reads (bare.NewReadsHandler) over s.
func (s *Server) Handler() http.Handler { return bare.NewReadsHandler(s) }

var _ bare.Reads = (*Server)(nil)

func (s *Server) head() []byte {
	b := make([]byte, 0, 512)
	b = append(b, `{"tip":`...)
	b = query.AppendTip(b, s.tip)
	return append(b, ',')
}

func (s *Server) fail(status int, code, msg string) (int, []byte) {
	return status, query.AppendError(nil, s.tip, code, msg)
}

func (s *Server) internal(err error) (int, []byte) {
	return s.fail(http.StatusInternalServerError, "internal", err.Error())
}

// Balance answers GET /v1/addresses/{address}/balance.
func (s *Server) Balance(ctx context.Context, address string) (int, []byte) {
	if len(address) > chain.MaxAddressLen {
		return s.fail(http.StatusBadRequest, "invalid_argument", "address too long")
	}
	var count int64
	var value string
	var extra bool
	if err := s.pool.QueryRow(ctx, s.qBalance, address).Scan(&count, &value, &extra); err != nil {
		return s.internal(err)
	}
	var sums []chain.AssetSum
	if extra {
		rows, err := s.pool.Query(ctx, s.qAssets, address)
		if err != nil {
			return s.internal(err)
		}
		var policy, name [][]byte
		var qty []string
		_, err = pgx.ForEachRow(rows, []any{&policy, &name, &qty}, func() error {
			for i := range policy {
				q, err := strconv.ParseUint(qty[i], 10, 64)
				if err != nil {
					return err
				}
				sums = addAsset(sums, policy[i], name[i], q)
			}
			return nil
		})
		if err != nil {
			return s.internal(err)
		}
	}
	b := s.head()
	b = append(b, `"address":`...)
	b = query.AppendJSONString(b, address)
	b = append(b, `,"value":"`...)
	b = append(b, value...)
	b = append(b, `","assets":[`...)
	for i, a := range sums {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"policy":`...)
		b = query.AppendHexString(b, a.Policy)
		b = append(b, `,"name":`...)
		b = query.AppendHexString(b, a.Name)
		b = append(b, `,"quantity":"`...)
		b = append(b, a.Quantity.String()...)
		b = append(b, `"}`...)
	}
	b = append(b, `],"utxo_count":`...)
	b = strconv.AppendInt(b, count, 10)
	return http.StatusOK, append(b, '}')
}

// addAsset adds q of (policy, name) to sums, kept in (policy, name) byte
// order.
func addAsset(sums []chain.AssetSum, policy, name []byte, q uint64) []chain.AssetSum {
	i, found := slices.BinarySearchFunc(sums, [2][]byte{policy, name}, func(a chain.AssetSum, k [2][]byte) int {
		if c := bytes.Compare(a.Policy, k[0]); c != 0 {
			return c
		}
		return bytes.Compare(a.Name, k[1])
	})
	if found {
		sums[i].Quantity = sums[i].Quantity.AddU64(q)
		return sums
	}
	return slices.Insert(sums, i, chain.AssetSum{Policy: slices.Clone(policy), Name: slices.Clone(name), Quantity: chain.U128(q)})
}

// Page answers the first page, or a later one by the reference's own
// cursor, of GET /v1/addresses/{address}/utxos.
func (s *Server) Page(ctx context.Context, address, limitS, order, cursor string) (int, []byte) {
	if len(address) > chain.MaxAddressLen {
		return s.fail(http.StatusBadRequest, "invalid_argument", "address too long")
	}
	limit := query.DefaultPageLimit
	if limitS != "" {
		n, err := strconv.Atoi(limitS)
		if err != nil || n < 1 || n > query.MaxPageLimit {
			return s.fail(http.StatusBadRequest, "invalid_argument", "limit must be an integer in 1..1000")
		}
		limit = n
	}
	desc := false
	switch order {
	case "", "asc":
	case "desc":
		desc = true
	default:
		return s.fail(http.StatusBadRequest, "invalid_argument", "order must be asc or desc")
	}
	var rows pgx.Rows
	var err error
	if cursor != "" {
		var h uint64
		var pos, idx uint32
		if _, err := fmt.Sscanf(cursor, "%d.%d.%d", &h, &pos, &idx); err != nil {
			return s.fail(http.StatusBadRequest, "invalid_argument", "bad cursor")
		}
		q := s.qPageAfter
		if desc {
			q = s.qPageBefore
		}
		rows, err = s.pool.Query(ctx, q, address, limit+1, int64(h), int32(pos), int32(idx))
	} else {
		q := s.qPage
		if desc {
			q = s.qPageDesc
		}
		rows, err = s.pool.Query(ctx, q, address, limit+1)
	}
	if err != nil {
		return s.internal(err)
	}
	var us []chain.Utxo
	var extras []int
	var hash []byte
	var idx, pos int32
	var height, value int64
	var flags int16
	var extra bool
	_, err = pgx.ForEachRow(rows, []any{&hash, &idx, &height, &pos, &value, &flags, &extra}, func() error {
		u := chain.Utxo{Height: uint64(height), TxPos: uint32(pos), Flags: uint8(flags)}
		copy(u.TxHash[:], hash)
		u.Index, u.Address, u.Value = uint32(idx), address, uint64(value)
		if extra {
			extras = append(extras, len(us))
		}
		us = append(us, u)
		return nil
	})
	if err != nil {
		return s.internal(err)
	}
	more := len(us) > limit
	if more {
		us = us[:limit]
	}
	for _, i := range extras {
		if i >= len(us) {
			break
		}
		u := &us[i]
		if err := s.readExtra(ctx, s.pool.QueryRow(ctx, s.qExtra, u.TxHash[:], int32(u.Index)), &u.Output); err != nil {
			return s.internal(err)
		}
	}
	b := s.head()
	b = append(b, `"address":`...)
	b = query.AppendJSONString(b, address)
	b = append(b, `,"utxos":[`...)
	for i := range us {
		if i > 0 {
			b = append(b, ',')
		}
		b = query.AppendChainUtxo(b, &us[i])
	}
	b = append(b, `],"next_cursor":`...)
	if more {
		last := us[len(us)-1]
		b = append(b, '"')
		b = strconv.AppendUint(b, last.Height, 10)
		b = append(b, '.')
		b = strconv.AppendUint(b, uint64(last.TxPos), 10)
		b = append(b, '.')
		b = strconv.AppendUint(b, uint64(last.Index), 10)
		b = append(b, '"')
	} else {
		b = append(b, "null"...)
	}
	return http.StatusOK, append(b, '}')
}

// readExtra scans the columns the address index leaves out into out.
func (s *Server) readExtra(_ context.Context, row pgx.Row, out *chain.Output) error {
	var policy, name [][]byte
	var qty []string
	var dh, datum, script []byte
	if err := row.Scan(&policy, &name, &qty, &dh, &datum, &script); err != nil {
		return err
	}
	return fillExtra(out, policy, name, qty, dh, datum, script)
}

func fillExtra(out *chain.Output, policy, name [][]byte, qty []string, dh, datum, script []byte) error {
	for i := range policy {
		q, err := strconv.ParseUint(qty[i], 10, 64)
		if err != nil {
			return err
		}
		out.Assets = append(out.Assets, chain.Asset{Policy: policy[i], Name: name[i], Quantity: q})
	}
	if dh != nil {
		var h chain.Hash
		copy(h[:], dh)
		out.DatumHash = &h
	}
	out.Datum, out.ScriptRef = datum, script
	return nil
}

// Outpoint answers GET /v1/utxos/{tx_hash}/{index}: a live output, or 404
// (the reference keeps no spent outputs).
func (s *Server) Outpoint(ctx context.Context, txHash, index string) (int, []byte) {
	h, err := chain.ParseHash(txHash)
	if err != nil {
		return s.fail(http.StatusBadRequest, "invalid_argument", "tx_hash: "+err.Error())
	}
	i, err := strconv.ParseUint(index, 10, 32)
	if err != nil || (len(index) > 1 && index[0] == '0') || strings.HasPrefix(index, "+") {
		return s.fail(http.StatusBadRequest, "invalid_argument", "index must be a decimal uint32")
	}
	u := chain.Utxo{OutPoint: chain.OutPoint{TxHash: h, Index: uint32(i)}}
	var height, value int64
	var pos int32
	var flags int16
	var policy, name [][]byte
	var qty []string
	var dh, datum, script []byte
	err = s.pool.QueryRow(ctx, s.qOutpoint, h[:], int32(i)).Scan(&u.Address, &height, &pos, &value, &flags, &policy, &name, &qty, &dh, &datum, &script)
	if err == pgx.ErrNoRows {
		return s.fail(http.StatusNotFound, "not_found", fmt.Sprintf("outpoint %s is not known at this tip", u.OutPoint))
	}
	if err != nil {
		return s.internal(err)
	}
	u.Height, u.TxPos, u.Value, u.Flags = uint64(height), uint32(pos), uint64(value), uint8(flags)
	if err := fillExtra(&u.Output, policy, name, qty, dh, datum, script); err != nil {
		return s.internal(err)
	}
	b := s.head()
	b = append(b, `"utxo":`...)
	b = query.AppendChainUtxo(b, &u)
	return http.StatusOK, append(b, `,"spent":null}`...)
}
