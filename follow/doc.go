// Package follow keeps a store in step with a Bitcoin Core node: it polls the
// node's REST interface, converts each new block with package bitcoin and
// hands it to the single writer, and follows the node through chain
// reorganisations by rolling back to the fork point.
//
// It owns nothing persistent: the store's tip is the follower's only
// position, so a restarted follower resumes where the store is, and any
// number of restarts neither skips nor repeats a block.
//
// # Protocol
//
// The node must run with -rest. The follower uses three endpoints, all
// unauthenticated GETs under Options.URL, with hashes in display order (the
// hex an explorer shows, which is also chain.Hash.String() of the adapter's
// hashes):
//
//	/rest/chaininfo.json               {"chain": "main", "blocks": 880000, "bestblockhash": "…"}
//	/rest/blockhashbyheight/<h>.json   {"blockhash": "…"}
//	/rest/block/<hash>.bin             the serialized block, witness included
//
// # The loop
//
// Each poll reads chaininfo, then, while the node is ahead, applies height
// tip+1 (never any other height first): hash by height, block by hash, check
// that the block has that hash, convert it. While the node is further ahead
// it fetches the next blocks the same way into a batch (Options.BatchBlocks,
// BatchBytes; the batch ends early at a block whose parent is not the one
// before it, or at a failed fetch) and hands the batch to the writer's
// ApplyBlocks, which applies the blocks far below the node's height in
// catch-up windows and the last ones alone. The writer refuses anything
// that is not the next block, and answers "already applied" for a block it
// has, so neither a retried request nor a second follower can apply a block
// twice.
//
// A reorganisation shows as a block at tip+1 whose parent is not our tip, or
// a node whose block at our tip's height is not ours. The follower then walks
// back from that height, comparing the store's hash (Hashes.HashAt) with the
// node's at each height, until they agree: that height is the fork point. It
// rolls the store back to it and applies the node's branch from there. A fork
// deeper than Options.MaxReorgDepth, or one the writer refuses as deeper than
// its rollback window, is never papered over: the follower logs it, counts it
// (errors_total{kind="fork_too_deep"}) and retries with backoff, applying
// nothing, until an operator intervenes (or the node returns to our chain).
//
// Worked example (the test fixture): the store holds 0..4; the node switches
// to 0,1,2,3A,4A,5A. Block 5A at height 5 has parent 4A ≠ our 4: walk back,
// height 4 (4 vs 4A) and 3 (3 vs 3A) differ, 2 agrees; roll back to 2, apply
// 3A, 4A, 5A.
//
// # Mempool
//
// With Options.Mempool set, each poll that leaves the store at the node's
// best block also mirrors the node's mempool into the store's pending set:
//
//	/rest/mempool/contents.json?verbose=false&mempool_sequence=true   {"txids": [...], "mempool_sequence": N}
//	/rest/tx/<txid>.bin                                              a mempool transaction, serialized
//
// (a node before Core 25 answers the first with its verbose listing, which
// serves as well). Mempool transactions need no -txindex. The mirror posts
// what the node added, withdraws what left without a block settling it,
// follows replacements, and lets blocks confirm and conflict; the rules and
// their corner cases are on the mirror type in mempool.go.
//
// # Failures
//
// Transport errors, timeouts, HTTP statuses other than 200, undecodable
// answers and refused blocks end the poll; the next one starts after an
// exponential backoff (Options.BackoffMin doubling up to BackoffMax, with
// ±20% jitter), and the first successful poll resets it. Every failure is
// counted by kind (see Metrics) and logged; nothing is skipped.
package follow
