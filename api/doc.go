// Package api is the HTTP face of utxo-cache (docs/api.md): Gin routes for
// the reads, the bearer-protected writes, health, readiness, metrics and the
// OpenAPI document. It is the only package that imports Gin (with api/bare,
// the load harness's ceiling, which the service does not link), and the only
// place that maps errors to HTTP statuses (errors.go).
package api
