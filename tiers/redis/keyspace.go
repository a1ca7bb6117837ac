package redis

import (
	"strconv"
)

// clusterBuckets is the number of buckets of the keyspace on a Redis
// Cluster: each bucket's keys share one hash slot (its hash tag), and the
// buckets' slots spread over the masters. It is part of the key names
// (the tag), so processes that disagreed on it would share no key: the
// follower of a writer built with another count sees no global floor and
// serves nothing.
const clusterBuckets = 64

// bucket holds the names of one bucket's keys: the prefixes of its entries
// and guard floors, its copy of the global floor and of the marker.
type bucket struct {
	entry, floor, global, marker string
}

// bucketsOf lays out the keyspace of namespace ns (see Tier, "Keys" and
// "Cluster"): on a single server, one bucket with the names ns:e:…, ns:f:…,
// ns:F and ns:S; on a cluster, clusterBuckets buckets whose names start
// with the hash tag {ns:64.N}, N = 0…63.
func bucketsOf(ns string, cluster bool) []bucket {
	if !cluster {
		return []bucket{{entry: ns + ":e:", floor: ns + ":f:", global: ns + ":F", marker: ns + ":S"}}
	}
	bs := make([]bucket, clusterBuckets)
	for i := range bs {
		p := "{" + ns + ":" + strconv.Itoa(clusterBuckets) + "." + strconv.Itoa(i) + "}:"
		bs[i] = bucket{entry: p + "e:", floor: p + "f:", global: p + "F", marker: p + "S"}
	}
	return bs
}

// bucketOf is the bucket of guard: FNV-1a of the guard modulo the number of
// buckets. Every entry of a guard lives in its guard's bucket, beside the
// guard's floor.
func (t *Tier) bucketOf(guard string) int {
	if len(t.buckets) == 1 {
		return 0
	}
	h := uint32(2166136261) // FNV-1a, 32 bits
	for i := 0; i < len(guard); i++ {
		h ^= uint32(guard[i])
		h *= 16777619
	}
	return int(h % uint32(len(t.buckets)))
}

// groupGuards splits guards by bucket, keeping their order within each.
func (t *Tier) groupGuards(guards []string) [][]string {
	if len(t.buckets) == 1 {
		return [][]string{guards}
	}
	groups := make([][]string, len(t.buckets))
	for _, g := range guards {
		b := t.bucketOf(g)
		groups[b] = append(groups[b], g)
	}
	return groups
}
