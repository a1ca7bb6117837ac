// Package events serves event streams (docs/events.md): for a set of
// watched keys (addresses, and the index values the store keeps), one event
// per change of the commit sequence that touched them, read from the change
// log, so that a client resumes after any event id, on the writer or on a
// replica, and gets exactly the later events.
//
// Invariants:
//   - Events come only from published views' change logs: an event for seq
//     S is sent once S is published.
//   - One dispatcher goroutine per Hub reads and decodes each published
//     change once, in seq order, finds the live streams it touched through
//     the hub's key → streams map, and queues its event on each, under the
//     hub's lock; it moves Hub.next past the change under the same lock.
//     Streams listing the same touched keys share one encoded event. Each
//     stream's queue has its own lock (taken after the hub's), so a stream
//     writing its events never waits for the dispatcher's pass over the
//     others, and the dispatcher signals each stream as soon as its event
//     is queued. A stream that resumes reads the log itself (Stream.readLog) until
//     its position reaches the dispatcher's, then joins under that lock: the
//     dispatcher skips the seqs a stream already read, so no event is sent
//     twice or skipped.
//   - An apply's event lists the block's outputs and the outputs it spent
//     (from the record's chain.Change.Spent), following the block's
//     transactions in order as the writer applied them; a rollback's lists
//     the net inverse of the applies it undid, which it reads back from the
//     log and replays in order. An outpoint spent and then created again in
//     the same block (a duplicate transaction id) keeps the watcher's rule
//     exact: see effects.create and undoneSets.
//     Freezes and unfreezes change no live set and send nothing.
//   - A live stream queues at most Options.Queue events; the one more ends
//     it with an overflow event whose id is the last seq queued.
//
// The package knows no HTTP framework: the api package parses requests and
// hands Stream.Run its response writer.
package events
