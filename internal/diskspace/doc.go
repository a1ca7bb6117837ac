// Package diskspace owns what the service knows about the file system under
// its data directory: how many bytes are available (statfs), and the ballast
// file, an emergency reserve the operator deletes to get room back when the
// disk fills up (docs/disk-full.md).
//
// It imports no storage library: the writer's free-space guard, the start-up
// check of serve and the ballast command all go through it.
package diskspace
