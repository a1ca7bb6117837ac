package api

import (
	"fmt"
	"mime"

	"github.com/utxo-cache/utxo-cache/chain"
)

// blockFormat returns the block encoding a POST /v1/blocks Content-Type
// names: application/json or application/cbor, with any parameters (charset),
// compared case-insensitively (mime.ParseMediaType lowercases the type).
// Anything else, a missing or malformed header included, is
// errUnsupportedMediaType (415, CONTRACT §1), answered before the body is
// read: a text/plain or form-encoded body is not guessed to be JSON, so a
// producer that forgot the header learns it at once instead of when its
// first CBOR block fails to parse as JSON.
func blockFormat(header string) (chain.Format, error) {
	if header == "" {
		// curl -d/--data-binary without -H sends the form type; say what to do.
		return 0, fmt.Errorf("no content type: send application/json or application/cbor "+
			"(with curl: -H 'Content-Type: application/json'): %w", errUnsupportedMediaType)
	}
	mt, _, err := mime.ParseMediaType(header)
	if err != nil {
		return 0, fmt.Errorf("content type %q does not parse (%v): send application/json or application/cbor: %w",
			clipHeader(header), err, errUnsupportedMediaType)
	}
	switch mt {
	case chain.FormatJSON.ContentType():
		return chain.FormatJSON, nil
	case chain.FormatCBOR.ContentType():
		return chain.FormatCBOR, nil
	}
	return 0, fmt.Errorf("content type %q: send application/json or application/cbor: %w", clipHeader(mt), errUnsupportedMediaType)
}

// jsonBody checks that a Content-Type names application/json (parameters
// allowed, any case), as blockFormat does for blocks: POST /v1/rollback
// takes no other, and a missing or form-encoded type is
// errUnsupportedMediaType, answered before the body is read.
func jsonBody(header string) error {
	if header == "" {
		return fmt.Errorf("no content type: send application/json "+
			"(with curl: -H 'Content-Type: application/json'): %w", errUnsupportedMediaType)
	}
	mt, _, err := mime.ParseMediaType(header)
	if err != nil {
		return fmt.Errorf("content type %q does not parse (%v): send application/json: %w",
			clipHeader(header), err, errUnsupportedMediaType)
	}
	if mt != chain.FormatJSON.ContentType() {
		return fmt.Errorf("content type %q: send application/json: %w", clipHeader(mt), errUnsupportedMediaType)
	}
	return nil
}

// clipHeader shortens a header value quoted in an error message.
func clipHeader(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}
