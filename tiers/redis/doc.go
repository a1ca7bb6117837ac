// Package redis is the shared cache tier of utxo-cache: prepared answers
// (cache.Entry) kept in Redis (one server, a primary behind Sentinels, or a
// Redis Cluster) for every process of a deployment, behind the in-process
// memory tier and in front of the disk. It owns the
// tier's keyspace in Redis, the Lua scripts that keep fills and
// invalidations atomic, and the tier's health: a tier that cannot reach Redis
// degrades to answering nothing, never something stale. See Tier for the
// design.
//
// It is the only package that imports go-redis.
package redis
