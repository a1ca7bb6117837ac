// Package pgref is the load harness's PostgreSQL-backed reference: the
// design a team would build first for the reads the service answers, to
// compare the service's cold reads with at the same size. One table holds
// the live UTXOs; a covering index on (address, chain order) INCLUDE (the
// columns a balance and a page read) answers the address reads with
// index-only scans, the primary key (tx_hash, idx) the outpoint reads.
//
// Load streams a chain file (JSONL or CBOR sequence, as `utxo-cache ingest`
// reads it) into that table with COPY, in batches of bounded size, and
// applies spends as deletes; Server serves the three reads with the JSON
// shapes of the service's /v1 answers (see api/bare.NewReadsHandler for the
// HTTP layer). It is part of the loadtest module and never of the service.
package pgref

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/utxo-cache/utxo-cache/chain"
)

// DefaultDSN is the database the harness and its tests use unless told
// otherwise: the local server's database test over TCP, user postgres.
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// DB is a connection pool to the reference's database.
type DB struct{ pool *pgxpool.Pool }

// Open connects to dsn with a pool of at most conns connections (at least
// 1) and checks that the server answers.
func Open(ctx context.Context, dsn string, conns int) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgref: dsn: %w", err)
	}
	cfg.MaxConns = int32(max(1, conns))
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgref: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgref: %s: %w", cfg.ConnConfig.Host, err)
	}
	return &DB{pool: pool}, nil
}

// Close closes the pool.
func (db *DB) Close() { db.pool.Close() }

// ErrValueRange marks an output value above the int64 the value column
// holds (no chain's supply comes near it).
var ErrValueRange = errors.New("pgref: value above 2^63-1")

// ErrSchema marks a schema name that is not a plain lower-case identifier.
var ErrSchema = errors.New("pgref: schema must match [a-z_][a-z0-9_]{0,62}")

var schemaRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// copyBatch bounds the rows held in memory before each COPY.
const copyBatch = 20_000

// LoadStats describe a load.
type LoadStats struct {
	Blocks  int     `json:"blocks"`
	Created int64   `json:"created"` // outputs copied in
	Spent   int64   `json:"spent"`   // spends applied as deletes
	Live    int64   `json:"live"`    // rows at the end
	Bytes   int64   `json:"bytes"`   // table and indexes on disk
	Seconds float64 `json:"seconds"` // whole load, indexes and VACUUM included
	// CopySeconds is the COPY of the chain's outputs and spends; the rest
	// is the deletes, the indexes and VACUUM ANALYZE.
	CopySeconds float64 `json:"copy_seconds"`
}

// Load creates schema (which must not exist) in the database of pool and
// loads the chain file at path into it: every created output and every
// spend are copied into two tables in batches of copyBatch rows, then the
// spends delete their outputs, the spend table is dropped, the primary key
// and the address index are built and the table is vacuumed and analyzed
// (so that index-only scans need no heap visit). Memory stays bounded by
// one block and one batch, whatever the chain's size.
func (db *DB) Load(ctx context.Context, schema, path string) (LoadStats, error) {
	pool := db.pool
	var st LoadStats
	if !schemaRE.MatchString(schema) {
		return st, fmt.Errorf("%w: %q", ErrSchema, schema)
	}
	start := time.Now()
	format, err := chain.FormatFromPath(path)
	if err != nil {
		return st, fmt.Errorf("pgref: chain file %s: %w", path, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return st, err
	}
	defer f.Close()
	var next func() (*chain.Block, error)
	if format == chain.FormatCBOR {
		next = chain.NewCBORSeqReader(f, chain.Limits{}.EnsureDefaults()).Next
	} else {
		next = chain.NewJSONLReader(f, chain.Limits{}.EnsureDefaults()).Next
	}
	s := pgx.Identifier{schema}.Sanitize()
	ddl := []string{
		"CREATE SCHEMA " + s,
		"CREATE TABLE " + s + `.utxo (
			tx_hash bytea NOT NULL, idx integer NOT NULL,
			address text NOT NULL, height bigint NOT NULL, tx_pos integer NOT NULL,
			value bigint NOT NULL, flags smallint NOT NULL,
			extra boolean NOT NULL,
			asset_policy bytea[], asset_name bytea[], asset_qty text[],
			datum_hash bytea, datum bytea, script_ref bytea)`,
		"CREATE TABLE " + s + ".spent (tx_hash bytea NOT NULL, idx integer NOT NULL)",
		"CREATE TABLE " + s + ".tip (height bigint NOT NULL, hash bytea NOT NULL)",
	}
	for _, q := range ddl {
		if _, err := pool.Exec(ctx, q); err != nil {
			return st, fmt.Errorf("pgref: %s: %w", q, err)
		}
	}
	utxoCols := []string{"tx_hash", "idx", "address", "height", "tx_pos", "value", "flags", "extra",
		"asset_policy", "asset_name", "asset_qty", "datum_hash", "datum", "script_ref"}
	var rows, spends [][]any
	flush := func() error {
		if len(rows) > 0 {
			if _, err := pool.CopyFrom(ctx, pgx.Identifier{schema, "utxo"}, utxoCols, pgx.CopyFromRows(rows)); err != nil {
				return fmt.Errorf("pgref: copy outputs: %w", err)
			}
			st.Created += int64(len(rows))
			rows = rows[:0]
		}
		if len(spends) > 0 {
			if _, err := pool.CopyFrom(ctx, pgx.Identifier{schema, "spent"}, []string{"tx_hash", "idx"}, pgx.CopyFromRows(spends)); err != nil {
				return fmt.Errorf("pgref: copy spends: %w", err)
			}
			st.Spent += int64(len(spends))
			spends = spends[:0]
		}
		return nil
	}
	var tip *chain.Block
	for {
		b, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return st, fmt.Errorf("pgref: read %s: %w", path, err)
		}
		st.Blocks++
		for pos := range b.Txs {
			tx := &b.Txs[pos]
			var tooLarge error
			tx.Creates(func(index uint32, out *chain.Output, _ bool) {
				if out.Value > math.MaxInt64 && tooLarge == nil {
					tooLarge = fmt.Errorf("%w: output %s:%d has value %d", ErrValueRange, tx.Hash, index, out.Value)
				}
			})
			if tooLarge != nil {
				return st, tooLarge
			}
			for _, op := range tx.Spends() {
				spends = append(spends, []any{op.TxHash[:], int32(op.Index)})
			}
			tx.Creates(func(index uint32, out *chain.Output, cr bool) {
				var flags int16
				if tx.Coinbase && !cr {
					flags |= int16(chain.FlagCoinbase)
				}
				if cr {
					flags |= int16(chain.FlagCollateralReturn)
				}
				rows = append(rows, outputRow(tx.Hash, index, out, b.Height, uint32(pos), flags))
			})
		}
		tip = b
		if len(rows)+len(spends) >= copyBatch {
			if err := flush(); err != nil {
				return st, err
			}
		}
	}
	if err := flush(); err != nil {
		return st, err
	}
	st.CopySeconds = time.Since(start).Seconds()
	post := []string{
		"DELETE FROM " + s + ".utxo u USING " + s + ".spent p WHERE u.tx_hash = p.tx_hash AND u.idx = p.idx",
		"DROP TABLE " + s + ".spent",
		"ALTER TABLE " + s + ".utxo ADD PRIMARY KEY (tx_hash, idx)",
		"CREATE INDEX utxo_address ON " + s + ".utxo (address, height, tx_pos, idx) INCLUDE (tx_hash, value, flags, extra)",
		"VACUUM (ANALYZE) " + s + ".utxo",
	}
	for _, q := range post {
		if _, err := pool.Exec(ctx, q); err != nil {
			return st, fmt.Errorf("pgref: %s: %w", q, err)
		}
	}
	if tip != nil {
		if _, err := pool.Exec(ctx, "INSERT INTO "+s+".tip VALUES ($1, $2)", int64(tip.Height), tip.Hash[:]); err != nil {
			return st, fmt.Errorf("pgref: tip: %w", err)
		}
	}
	err = pool.QueryRow(ctx, "SELECT count(*), pg_total_relation_size($1) FROM "+s+".utxo", s+".utxo").Scan(&st.Live, &st.Bytes)
	if err != nil {
		return st, fmt.Errorf("pgref: count: %w", err)
	}
	st.Seconds = time.Since(start).Seconds()
	return st, nil
}

// outputRow is the utxo table's row of one created output. extra is set
// when the output has assets, a datum hash, a datum or a script reference:
// the columns the address index does not include.
func outputRow(h chain.Hash, index uint32, out *chain.Output, height uint64, pos uint32, flags int16) []any {
	var policy, name [][]byte
	var qty []string
	for _, a := range out.Assets {
		policy, name = append(policy, a.Policy), append(name, a.Name)
		qty = append(qty, strconv.FormatUint(a.Quantity, 10))
	}
	var dh []byte
	if out.DatumHash != nil {
		dh = out.DatumHash[:]
	}
	var datum, script []byte
	if len(out.Datum) > 0 {
		datum = out.Datum
	}
	if len(out.ScriptRef) > 0 {
		script = out.ScriptRef
	}
	extra := len(out.Assets) > 0 || dh != nil || datum != nil || script != nil
	return []any{h[:], int32(index), out.Address, int64(height), int32(pos), int64(out.Value), flags, extra,
		policy, name, qty, dh, datum, script}
}

// Drop removes schema and everything in it.
func (db *DB) Drop(ctx context.Context, schema string) error {
	pool := db.pool
	if !schemaRE.MatchString(schema) {
		return fmt.Errorf("%w: %q", ErrSchema, schema)
	}
	_, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	return err
}
