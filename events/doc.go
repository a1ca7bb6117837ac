// Package events serves event streams (docs/events.md): for a set of
// watched keys (addresses, and the index values the store keeps), one event
// per change of the commit sequence that touched them, read from the change
// log, so that a client resumes after any event id, on the writer or on a
// replica, and gets exactly the later events.
//
// Invariants:
//   - Events come only from published views' change logs: an event for seq
//     S is sent once S is published.
//   - One dispatcher goroutine per Hub reads each published change once, in
//     seq order, and queues its event on every live stream it touched,
//     under the hub's lock; it moves Hub.next past the change under the same
//     lock. A stream that resumes reads the log itself (Stream.readLog) until
//     its position reaches the dispatcher's, then joins under that lock: the
//     dispatcher skips the seqs a stream already read, so no event is sent
//     twice or skipped.
//   - An apply's event lists the block's outputs and the outputs it spent
//     (from the record's chain.Change.Spent); a rollback's lists the net
//     inverse of the applies it undid, which it reads back from the log.
//     Freezes and unfreezes change no live set and send nothing.
//   - A live stream queues at most Options.Queue events; the one more ends
//     it with an overflow event whose id is the last seq queued.
//
// The package knows no HTTP framework: the api package parses requests and
// hands Stream.Run its response writer.
package events
