// Package loadtest is the load-test harness behind `utxo-loadtest`
// (cmd/utxo-loadtest) and `make loadtest`: it generates a chain
// (internal/workload), preloads a store, starts the service once per tier
// configuration (and a bare Gin handler as the machine's ceiling), drives a
// mix of the contract's reads at it while a writer feed applies blocks and
// rollbacks, checks a sample of the answers against the reference model
// (internal/model), and writes a JSON, Markdown and HTML report. It owns no
// persistent state: everything it creates lives in the run's work and
// results directories.
//
// It is a Go module of its own, beside the service's: the service's binary,
// its image and its go.mod carry no load generator. It starts the service
// as a separate binary (Options.Bin).
//
// # Phases of one configuration
//
//	warmup  closed loop, not recorded: fills the caches
//	max     closed loop, Workers requests in flight, no pacing, under the
//	        writer feed (BlockRate blocks/s, a rollback every RollbackEvery
//	        blocks): requests/s at saturation while blocks arrive, as they
//	        always do (compared with the bare ceiling's)
//	settle  open loop at the rate phase's rate for RateDuration/4, not
//	        recorded: the hand-over from a saturated closed loop (queued
//	        flushes and compactions, the harness's own burst) is not the
//	        service at that load
//	rate    open loop at RateFraction of the max phase's requests/s, with
//	        the feed and the correctness sample: p99 at a sustainable load
//	        (held to the bare handler's at the same rate), block-apply
//	        latency, visibility of each block to the next read
//	hot     memory and bare only: closed loop on HotMix (no lookups, no
//	        cursors, 1000 addresses, 4096 outpoints) after its own warmup:
//	        cache hits against the ceiling, the memory tier's target
//	rate-as-NAME  bare only, last: open loop at configuration NAME's rate
//	        (after its own settle)
//
// The soak scenario (soak.go) replaces the phases with one open-loop run of
// the full configuration for Duration, with the feed, Redis kills and
// restarts, and samples of the service's RSS, open files, goroutines and
// Pebble figures; it fails when one of them grows (the last quarter's mean
// against the second quarter's) or on any 5xx or mismatch.
//
// With CPUProfile, the service's pprof endpoint records a CPU profile during
// the max and the rate phase (a 100 Hz sampler: about 1% of a core), so a
// missed target comes with where the time went under that very load.
//
// # Fair comparison
//
// Configurations run one after another, and each must meet the same
// conditions, or the comparison measures the order instead of the tiers:
//
//   - the same store: the preload is ingested once into a store that is
//     then only ever copied (storecopy.go); each configuration's service
//     runs on a fresh copy, made and synced before it starts and removed
//     after it, and must report the preload's tip, UTXO count and digest
//     before its first request;
//   - the same writes: the feed replays one script of blocks and rollbacks
//     (script.go), made before the first configuration, from its first
//     step, and the model is reset to the preload's state (world.reset);
//   - the same requests: fresh request generators with the same seeds;
//   - the same machine: an unmeasured machine warm-up against a service on
//     the preloaded store before the first configuration (it meets the cold
//     CPU, page cache and harness heap; any compaction the ingest left
//     happens here, before the copies), then each configuration's own
//     warmup; where there are two or more CPUs, the service on CPUs of its
//     own and the harness and redis-server on the others (cpus.go).
//
// Redis is flushed between configurations; the bare handler runs last (on
// the service's CPUs), serving bodies of the median size the first service
// answered per route. The report's comparability notes say what compares
// with what, and what did not hold (no pinning, a busy machine). A
// configuration that fails does not stop the others.
//
// # Coordinated omission
//
// The open-loop driver sends request i at start + i/rate whatever happened to
// earlier requests (see Schedule), from a bounded pool of workers, and
// measures each latency from the intended send time, not from when a worker
// got around to sending it. A stalled service therefore shows up as latency
// (the queue behind the stall) instead of as fewer, faster samples. vegeta's
// attacker measures from the actual send, which is why the harness has its
// own pacer; it also keeps vegeta's dependency tree (Prometheus' server
// module, a DNS library) out of go.mod.
//
// # Correctness sampling rule
//
// A fraction (CheckFraction, default 1%) of the 200/404 read answers is
// queued for checking; the queue is bounded and a full queue drops samples
// (counted). The checker compares an answer with the model only when the
// state the answer reports, its commit sequence (X-Commit-Seq), is the
// model's: the feed applies each block and rollback to the model right after
// the writer acknowledges it, under the model's lock, together with the seq
// the acknowledgement reported, so an answer at the model's seq must equal
// the model's answer, on the writer and on a replica alike (a replica at seq
// S is the writer at S), and its tip must be the model's. A tip alone would
// not do: after a rollback the writer is back at a tip it had changes ago,
// and a lagging replica may still answer from that earlier state. Answers at
// other seqs, older or newer, are counted as skipped, and so are
// the tip's UTXO count and digest while a feed moves the tip (computing them
// needs the whole model). The checker spends at most CheckBudget of one core
// (it sleeps in proportion to the time its checks take) and skips what is
// still queued when a phase ends; listings and balances are the model's
// answers for each outpoint the address ever received, in the model's chain
// order (model.List and model.Balance scan every row). Any mismatch fails
// the run.
//
// # Replicas
//
// The replica configuration (replicas.go) runs a writer on the store copy
// and one replica bootstrapped from it; the feed posts to the writer and the
// phases read from the replica. For each acknowledged write (seq S) a
// lagObserver asks the replica GET /v1/tip?min_seq=S, which it answers when
// it publishes S: the replication lag (lag.go). The replicas scenario runs
// no read load: it posts one script back to back to a writer with no
// replica and with Replicas replicas, each leg on a fresh copy, in ABBA
// rounds, and reports the ratio of the writer's blocks/s.
//
// # Scale
//
// The scale scenario (scale.go) measures a store of a real chain's size: it
// streams the chain to a file with a bounded generator (memory independent
// of the chain's size), imports it with `utxo-cache ingest`, times the
// import from ingest's progress lines, waits for Pebble's compactions to
// settle under a disk-only read load, compares the settled store's cold
// reads (balance, page, outpoint) side by side with the PostgreSQL reference
// loaded from the same file (reference.go, package pgref), then runs the
// read configurations on copies of the store. It keeps no model: no feed,
// no correctness sample.
// Compare (--compare) prints two reports' targets and figures in one table.
//
// # Rollbacks without a rewindable generator
//
// The workload generator only moves forward. The feed rolls the service and
// the model back a few blocks and re-applies the same transactions in blocks
// with new hashes: a different branch as far as the service, its cursors,
// ETags and caches can tell, and still consistent with the generator's
// live set, so the chain can go on from the new branch's tip.
package loadtest
