// Package writer owns every mutation of the store: one goroutine applies
// blocks, rollbacks, freezes, unfreezes and lease changes in order, answering each request on its own reply
// channel once it is done, and after each commit hands a change-set to the
// registered listeners (the cache tiers).
//
// # Single writer
//
// Apply, ApplyBlocks, Rollback, RollbackToHash, Freeze, Unfreeze, ApplyWallet and
// Checkpoint send a request on a channel and wait for its reply; the writer goroutine takes
// them one at a time (lease requests, Lease, Release and ExpireLeases, have a
// queue of their own, from which it takes every waiting one at once and
// commits them as one change: lease.go), so the store's write path never runs concurrently and
// needs no lock. A request is answered only after its batch has been
// committed with Sync and the new tip published, so an acknowledged block
// survives a crash (docs/consistency.md). Listeners run on the writer
// goroutine after the commit, with no lock held, before the request is
// answered and the next one taken: by the time a block is acknowledged,
// every listener has seen its change-set.
//
// # Validation
//
// A block is checked before anything is written: linkage with the tip, then
// transaction by transaction against the store as the block has left it so
// far (so a transaction may spend an output created earlier in the block).
// Any rejection aborts the block with nothing written.
package writer
