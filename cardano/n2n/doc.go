// Package n2n keeps a store in step with a Cardano node over the
// node-to-node protocols: ChainSync announces headers and roll-backwards,
// BlockFetch downloads the blocks, package cardano converts and links them,
// and the single writer applies them. It is the Cardano counterpart of
// package follow (Bitcoin Core), and lives under cardano/ because it speaks
// the node's protocols through gouroboros, whose client it uses.
//
// Like that follower it owns nothing persistent: the store's chain is its
// only position. A restarted follower intersects at the store's recent
// points (disk.Store.RecentPoints: the tip, then exponentially further back
// within the rollback window), so any number of restarts neither skips nor
// repeats a block.
//
// # A session
//
// Each connection is one session: TCP connect and handshake (network magic:
// a node of another network refuses it), FindIntersect with the store's
// recent points (an empty store: Options.Start, or the origin), then the
// node's events. When the store's first block (height 0) is among its
// recent points, the origin is offered after them: that block may be the
// genesis block (cardano.GenesisBlock), which stands for the origin and
// which no node knows.
//
//   - roll forward: the header is collected. Headers are fetched in one
//     BlockFetch range and applied in one writer.ApplyBlocks once
//     Options.BatchBlocks are collected, once the header is the node's tip,
//     or after Options.FlushAfter without another header. Far below the
//     node's tip the writer applies them in catch-up windows; near it, one
//     by one. Before anything is applied every fetched block must be the
//     block its header announced (slot and hash) and the blocks must link
//     to the store's tip (cardano.Linker): otherwise nothing is applied and
//     the session ends with an error naming the point.
//   - roll backward to a point: collected headers are applied first, then
//     the store is rolled back exactly to the block at that point. The
//     first event of every session is a roll backward to the intersection.
//     A Byron boundary block is never stored (cardano.Linker): a roll
//     backward to one the session linked through goes to its parent, and
//     the boundary block is linked again. A roll backward to the origin
//     goes to the store's block at height 0 (the genesis block): a resume
//     when it is the tip; the next block must link to it.
//
// # Genesis outputs
//
// With Options.Genesis, an empty store following the chain from its origin
// is seeded before the chain's first main block (block number 1): the
// follower applies cardano.GenesisBlock, named by that block's parent hash
// (the Byron genesis hash), first in the same batch.
//
// # Failures
//
// Any failure ends the session: a dropped connection, bytes that do not
// decode, a protocol violation, a block that does not link, a refused
// block. The follower reconnects after a pause that starts at
// Options.BackoffMin and doubles up to BackoffMax, ±20% jitter; a session
// that changed the store resets it. Each is counted by reason
// (utxo_cache_cardano_follow_errors_total).
//
// A roll backward to a point the store does not hold, one the writer
// refuses as deeper than its rollback window, and a node that has none of
// the store's recent points are never papered over: the follower halts.
// It logs the reason, Ready reports it (the service's /readyz answers 503
// with it), it applies nothing, and it retries only at BackoffMax: a retry
// that finds the node back on the store's chain resumes. A store that starts
// mid-chain (Options.Start) cannot roll back below its first block: a roll
// backward to the start point is such a halt.
package n2n
