// Package memory is the in-process cache tier: prepared query answers
// (cache.Entry) held in a Ristretto cache in front of Redis and the disk, with
// per-guard floors that keep a slow reader's stale fill from ever being
// served. It implements cache.Tier and is the only package that imports
// Ristretto.
//
// It owns nothing durable: a restart starts empty, and its floors start at
// zero, which is safe because an empty cache has nothing stale to serve and
// every fill after the restart is computed from the disk as it is then.
package memory
