// Package disk is the durable tier of utxo-cache: the Pebble store that holds
// the live UTXO set, its indexes, spent records, undo deltas and the tip. It is
// the only package that imports Pebble.
//
// # Key layout
//
// Every key starts with a one-byte keyspace prefix; integers are big-endian and
// fixed-width so that byte order is numeric order. Values start with a format
// version byte (see record.go, balance.go, undo.go, meta.go for layouts).
//
//	prefix  key                                             value                         kept
//	0x01    'V'                                             schema version, dimensions     forever
//	0x01    'K'                                             random secret (cursor MACs)    forever
//	0x01    'T'                                             state: tip, count, digest,     forever
//	                                                        prune cursors, skipped inputs
//	0x01    'R'                                             pending moves of a rollback    while the rollback
//	                                                        in progress: a change record   is in progress
//	                                                        (rollback.go, rollbackMoves)
//	0x02    tx_hash[32] index[4]                            UTXO record: live, or spent    live: while unspent;
//	                                                        (+ spender tx, spent height)   spent: see Retention
//	0x03    dim_key[16] height[8] tx_pos[4] index[4]        tx_hash[32] + UTXO record      while live
//	0x04    dim_key[16]                                     balance: count, value, asset   while count > 0 or
//	                                                        rows or assets (schema < 4),   counters not all zero
//	                                                        address counters (balance.go)
//	0x04    dim_key[16] policy, 0-padded to 64 bytes[64]    asset row: the quantity of one while not zero
//	        len(policy)[1] name                             asset in the balance
//	                                                        (balanceasset.go)
//	0x05    height[8]                                       outpoints spent at height      with their records
//	0x06    height[8]                                       undo delta of the block        rollback_window blocks
//	0x07    height[8]                                       block hash, slot (keys.go)     while on the chain
//	0x08    block_hash[32]                                  height[8]                      while on the chain
//	0x09    seq[8]                                          change record (changelog.go)   LogRetention changes
//	0x0a    tx_hash[32] index[4]                            freeze: seq, reason            while live and frozen
//	                                                        (freeze.go)
//	0x10    tx_hash[32] index[4]                            lease: expiry, lease id        while live and leased
//	0x11    lease_id, zero-padded to 64 bytes               lease: expiry, outpoints       until released or
//	                                                        (lease.go)                     swept after expiry
//	0x14    'c' dim_key[16]                                 address counters of a store    moved into 0x04 at open
//	                                                        before version 2 balance rows
//	0x14    'u' height[8]                                   the block's counter delta      rollback_window blocks
//	0x14    'f'                                             height counters count from     forever
//	0x15    height[8]                                       block time (blocktime.go)      while on the chain
//
// A frozen output's 0x02 record and 0x03 index rows carry record state 0x03
// (live and frozen) instead of 0x01: reads see the mark in the bytes they
// already fetch.
//
// dim_key is the first 16 bytes of SHA-256(dimension id || value): an index
// dimension (the address, always; asset policy, asset, payment and stake
// credential as options a store fixes at creation and records in its schema
// row) is a row in the dimensions table of dims.go, not new code. The store
// knows no address format: the values of the credential dimensions come
// from functions the chain adapter provides (Options.Derivers), injected by
// the assembly. A store that indexes addresses only writes no other row and
// computes no other key. Listing a dimension value is a
// bounded prefix scan of 0x03 in (height, tx_pos, index) order, which is the
// contract's chain order, in either direction, from an exclusive position; its
// cost is O(page), never O(size of the value's set).
//
// # Retention
//
// A spent UTXO keeps its 0x02 record (now marked spent) so that outpoint
// lookups can say who spent it. Reads show a spent record only while
// tip - spent_height <= PruneDepth, so answers are a function of the tip
// alone, whatever the pruning backlog. Records are physically deleted once
// tip - spent_height > PruneDepth + RollbackWindow: a rollback can lower the
// tip by at most RollbackWindow, so every record that some reachable tip can
// show is still on disk, and compact undo deltas can rebuild spent outputs
// from them. Pruning runs inside each block's batch with a bounded budget.
//
// # Atomicity and crash safety
//
// A block's state changes, undo delta, block hash, pruning work and the state
// row (tip, count, digest) are one Pebble batch committed with Sync. After a
// crash the store is exactly the state after some committed block (a
// rollback of several blocks, one batch per block, is completed by Open).
// powerloss_test.go cuts the power at random points and keeps only what was
// synced; iofault_test.go fails writes and syncs of the log (see ErrFailed).
//
// # Write path and its cost
//
// A block's input lookups mostly avoid Pebble: the young-output view
// (recent.go) answers spends of recently created outputs from memory, the
// tx-hash Bloom filter (txfilter.go, rebuilt in the background as the store
// grows) answers "absent" for new outputs and unknown inputs, and the rest
// are read before the block is validated, on several goroutines at once
// (BlockTxn.Prefetch); balance rows not in the writer's cache are read the
// same way. What remains is the commit: per change the outpoint row and an
// index row, per touched address a balance row, plus the undo delta, the
// spent list and the state row, about 2.7 keys per UTXO change. Each optional
// index adds, per change, an index row for each of the output's values and a
// balance row per touched value (BenchmarkIndexCost measures them).
//
// Where fsync is cheap (0.2 ms here) a block is bound by CPU, and most of it
// is Pebble's: a committed batch goes into the memtable skiplist one key at a
// time, each a search from the top, and our keys are hashes, so each search
// is a chain of cache misses. keyBatch (batch.go) therefore hands a block's
// writes to Pebble in key order, where consecutive searches share their
// upper path (and a transaction's outputs, or an address's index rows, land
// in the splice Pebble keeps from the previous insert). A block's inputs and
// balance rows are read in key order too, each reading goroutine walking its
// share with one iterator (readSorted), so that a seek continues where the
// last one left the memtable and table iterators. A catch-up window's
// batch goes in key order too: one larger than half a memtable Pebble keeps
// aside as a table and sorts itself, and a sort of entries already in order
// is one pass (see keyBatch).
//
// Where a live block's CPU goes, from CPU profiles of the apply benchmark's
// writer (bench_apply_test.go: 1,000,995 live UTXOs, blocks of 300
// transactions; 2026-11-25, load average 1.4 to 5 on 2 CPUs), in ms a block,
// before the key order and after: memtable inserts 6.3 and 3.5-4.3; reading
// the 293 inputs the young-output view misses and the balance rows not in
// the cache 6.6 and 4.7-4.9; validating and filling the block 1.4 and
// 1.1-1.6; index rows and per-output hashes 1.2 and 0.4-1.3; the views and
// caches after the commit 0.7 and 0.9-1.1; the change record 0.7 and
// 0.2-0.4; sorting the batch 0.2-0.4; the rest under 1. The process's CPU
// per block, Pebble's background work and the GC included, went from 21.1
// to 15.3-16.7 ms (before and after interleaved on one fixture), against
// 6.5-6.6 ms for the naive read-delete-set floor: the writer's block costs
// the CPU of about 2.4 naive blocks. Wall-clock ratios to the floor swing
// with the machine's other load (0.38 to 0.64 across those runs). Where
// fsync costs milliseconds it is paid once per block by both, and the ratio
// grows with it.
//
// # Read path and its cost
//
// The read API never builds a chain.Utxo: View.UtxoFunc (one Pebble Get, no
// iterator), View.UtxosFunc (a lookup's Gets) and View.ListFunc (one
// iterator per page, bounded by the value's index keys and the resume
// position) hand the caller a UtxoRef, the record's fixed fields decoded and
// its variable ones aliasing Pebble's value bytes, which the caller encodes
// straight into its answer. The parse behind UtxoRef is the strict decoder's
// own (decodeRecord copies a UtxoRef out), so both accept the same values. A
// page of a hot address on a 1M-UTXO store that took 200 blocks of churn
// skips about 3 deleted keys per 100 live ones (Pebble's iterator stats:
// 104 internal points per 101 keys read), so the index needs no re-keying
// or forced compaction for its scans.
//
// # Concurrency
//
// One goroutine (the writer) builds and commits blocks and rollbacks; readers
// run concurrently on Pebble snapshots, each answer read from one snapshot so
// it is consistent with one tip.
package disk
