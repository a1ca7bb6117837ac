// Package api is the HTTP face of utxo-cache (docs/api.md): Gin routes for
// the reads, the bearer-protected writes, health, readiness, metrics and the
// OpenAPI document. It is the only package that imports Gin (with api/bare,
// the load harness's ceiling, which the service does not link).
//
// Errors become HTTP statuses in one table (errors.go): every error a
// handler fails with goes through it. The other error answers are not
// errors of the domain: the router's 404 and 405 for a path or method no
// route has, the 500 of a recovered panic and /readyz's 503 not_ready
// (server.go); and a read of an outpoint that is not there is an answer
// of package query, cached like any other, with status 404.
package api
