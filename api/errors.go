package api

import (
	"errors"
	"net/http"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/events"
	"github.com/utxo-cache/utxo-cache/query"
	"github.com/utxo-cache/utxo-cache/replication"
	"github.com/utxo-cache/utxo-cache/writer"
)

// Errors of the API itself (not of the domain).
var (
	errUnauthorized   = errors.New("api: missing or wrong bearer token")
	errWritesDisabled = errors.New("api: writes are disabled: no admin token is configured")
	errReadOnly       = errors.New("api: this server is a read-only replica: writes go to its writer")
	// errRequestTimeout: a request body that did not arrive in time
	// (Options.BodyTimeout).
	errRequestTimeout = errors.New("api: request timeout")
	// errUnsupportedMediaType: a block body that is neither JSON nor CBOR,
	// a rollback body that is not JSON.
	errUnsupportedMediaType = errors.New("api: unsupported media type")
)

// errorClass is one row of the contract's error table.
type errorClass struct {
	err    error
	status int
	code   string
	// message, when set, replaces the error's own text (which would name
	// internals such as file paths).
	message string
}

// errorTable maps every error the API answers to its status and code
// (docs/api.md, "Error codes"). Anything unmapped is a 500 "internal" whose message
// says nothing of the internals.
var errorTable = []errorClass{
	{chain.ErrInvalidBlock, http.StatusBadRequest, "invalid_block", ""},
	{chain.ErrInvalidArgument, http.StatusBadRequest, "invalid_argument", ""},
	{errUnauthorized, http.StatusUnauthorized, "unauthorized", ""},
	{errWritesDisabled, http.StatusForbidden, "writes_disabled", ""},
	{errReadOnly, http.StatusForbidden, "read_only", ""},
	{errWalletWritesDisabled, http.StatusForbidden, "wallet_writes_disabled", ""},
	{chain.ErrNotFound, http.StatusNotFound, "not_found", ""},
	{query.ErrNotIndexed, http.StatusNotFound, "not_indexed", ""},
	{chain.ErrNotNextBlock, http.StatusConflict, "not_next_block", ""},
	{chain.ErrRollbackTooDeep, http.StatusConflict, "rollback_too_deep", ""},
	{chain.ErrFrozen, http.StatusConflict, "frozen", ""},
	{chain.ErrLeased, http.StatusConflict, "leased", ""},
	{chain.ErrConflict, http.StatusConflict, "conflict", ""},
	{chain.ErrInsufficientStorage, http.StatusInsufficientStorage, "insufficient_storage", ""},
	{errRequestTimeout, http.StatusRequestTimeout, "request_timeout", ""},
	{chain.ErrTooLarge, http.StatusRequestEntityTooLarge, "too_large", ""},
	{errUnsupportedMediaType, http.StatusUnsupportedMediaType, "unsupported_media_type", ""},
	{chain.ErrUnknownInput, http.StatusUnprocessableEntity, "unknown_input", ""},
	{chain.ErrDoubleSpend, http.StatusUnprocessableEntity, "double_spend", ""},
	{chain.ErrDuplicateOutpoint, http.StatusUnprocessableEntity, "duplicate_outpoint", ""},
	{writer.ErrClosed, http.StatusServiceUnavailable, "unavailable", ""},
	// 507, not 503: the write was refused for want of room that only an
	// operator can make, not for a moment's unavailability; a client that
	// retries at once gets the same answer. docs/disk-full.md.
	{writer.ErrInsufficientStorage, http.StatusInsufficientStorage, "insufficient_storage", ""},
	{writer.ErrFailed, http.StatusServiceUnavailable, "unavailable",
		"the store failed a write (a full disk or an I/O error): writes are stopped until a restart; reads go on"},
	{errClientClosed, statusClientClosedRequest, "client_closed_request", ""},
	{query.ErrBehind, http.StatusServiceUnavailable, "behind", ""},
	{errReplicationDisabled, http.StatusForbidden, "replication_disabled", ""},
	{errReplicaServesNoLog, http.StatusForbidden, "replication_disabled", ""},
	{replication.ErrLogTruncated, http.StatusGone, "log_truncated", ""},
	{events.ErrLogTruncated, http.StatusGone, "log_truncated", ""},
	{events.ErrTooManyStreams, http.StatusServiceUnavailable, "too_many_streams", ""},
	{events.ErrTooManyKeys, http.StatusBadRequest, "invalid_argument", ""},
	{events.ErrClosed, http.StatusServiceUnavailable, "unavailable", ""},
	{errEventsUnavailable, http.StatusServiceUnavailable, "events_unavailable", ""},
	{replication.ErrAhead, http.StatusConflict, "ahead", ""},
	{replication.ErrBusy, http.StatusTooManyRequests, "too_many_requests", ""},
}

// classify returns the status, code and client-safe message of err.
func classify(err error) (status int, code, message string) {
	for _, c := range errorTable {
		if errors.Is(err, c.err) {
			if c.message != "" {
				return c.status, c.code, c.message
			}
			return c.status, c.code, err.Error()
		}
	}
	return http.StatusInternalServerError, "internal", "internal error"
}
