// Package jetstream fans a writer's change log and checkpoints out through
// NATS JetStream, so that any number of replicas follow the writer without
// asking it for anything; docs/replication.md (replicas over JetStream) is
// the operator's side. It alone imports the NATS client.
//
// On the writer, a Publisher copies each published change from the store's
// change log to a stream, and checkpoints of the store to an object store.
// On a replica, a Source is a replication.ChangeSource over them: the
// replica's Tail applies and verifies what it reads exactly as it does the
// writer's HTTP change log, so every promise of a replica holds whatever it
// follows.
//
// # Names
//
// One Options.Name (default "utxo_cache") names everything of one writer:
//
//	stream  NAME              subject NAME.changes: one message per change
//	subject NAME.status       core NATS: the writer's state, every second
//	subject NAME.checkpoint   core NATS: a replica asks for a newer checkpoint
//	bucket  NAME_checkpoints  object store: checkpoint-<seq, 20 digits>
//	bucket  NAME_changes      object store: <seq, 20 digits>, changes too
//	                          large for one message
//
// # Stream sequence = commit sequence
//
// The message of change S is stream message S: the Publisher sends it with
// the message id S (the duplicate window drops a second copy, so a change
// sent again after a crash or a lost ack is stored once) and, but for the
// first of a session, the expectation that the stream's last message id is
// S-1 (a change never lands after a gap); it checks that the stream's ack
// names S, and replaces a stream that stored a change anywhere else. A new or emptied stream is first moved to start at the seq the
// Publisher resumes from (a purge up to it), and after any failure the
// Publisher resumes from the stream's last message. So a replica at seq
// S consumes from stream message S+1, and a message whose stream sequence is
// not the one it asked for means the stream lost changes it needs: like the
// HTTP log's 410, it bootstraps again.
//
// # Large changes
//
// A change whose record does not fit in one message (the connection's max
// payload, the servers' max_payload, less 4 KiB for headers: a Bitcoin
// block with its spent outputs can be several MiB) is put in the bucket
// NAME_changes as the object named by its seq (the object store chunks it),
// and only then is a pointer published in its place: stream message S, with
// the message id S and the same expectations as any change, no body, and
// headers naming the object, its length and its SHA-256 (body.go). So the
// stream's sequence is still the commit sequence, and a pointer is never in
// the stream before its object is whole. A writer that stops between the
// put and the publish puts the object again when it resumes (the same name
// replaces it), then publishes the pointer. A replica that meets a pointer
// reads the object and checks its length and digest (a mismatch is a
// change that does not decode: it diverges); an object that is gone means
// the stream moved on without it, and it bootstraps again, as for a gap.
// After each window the Publisher deletes the objects of changes before the
// stream's first message, so the bucket keeps what the stream keeps.
//
// # The Publisher never holds the writer back
//
// The writer only stores the new published seq in an atomic and signals a
// channel of capacity one (AfterPublish, on the writer goroutine; it never
// blocks). The Publisher's own goroutine reads the records from the store's
// change log, which is durable and already holds them, and publishes them in
// windows (at most MaxWindowBytes in flight), waiting for the stream's acks
// before the next window. So its memory is bounded whatever the writer's
// pace, and a NATS outage only leaves the stream behind the writer: the
// Publisher retries, resynchronises from the stream's last message, and sends
// what it is missing from the change log (as long as the log keeps it: a
// stream further behind than --replication-retention restarts at the log's
// first kept change, and replicas that needed the lost ones bootstrap).
//
// Worked example: the writer is at seq 120, the stream at 117, NATS goes
// away. The writer applies 121..130 as usual; the Publisher's sends fail, it
// logs, counts, and retries with backoff. NATS returns with the stream at
// 118 (a send whose ack was lost was stored): the Publisher reads the
// stream's last sequence, 118, and sends 119..130 from the change log.
// Replicas see the stream grow from 118 on, in order, with no gap.
//
// # A restored writer
//
// A writer that starts behind the stream (restored from a backup) deletes the
// stream and starts a new one from its own change log: the messages beyond
// its seq were changes of a history it does not have. A replica beyond the
// new stream waits for it; the first change it then reads is of the new
// history and does not match its state, so it diverges and bootstraps.
package jetstream
