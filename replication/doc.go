// Package replication copies a writer's store to read replicas, and
// installs verified checkpoint archives (a replica's bootstrap, the restore
// command's backups); docs/replication.md describes both for operators. On
// the writer it serves the change log and checkpoints of the published state
// (Source); on a replica it bootstraps a store from a checkpoint, verifies
// it, and applies the writer's changes one by one through the same writer
// code, checking the figures after each (Tail). It knows no HTTP
// framework: the api package serves Source, and the Tail speaks plain
// net/http to the writer.
package replication
