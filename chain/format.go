package chain

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Format is a block encoding of docs/blocks.md. A single block (an HTTP body)
// is one JSON document or one CBOR data item; a file or pipe of blocks is
// JSON lines or an RFC 8742 CBOR sequence. The values are explicit because
// they may be persisted or logged; the zero value is no format.
type Format uint8

const (
	// FormatJSON is JSON: application/json, files *.jsonl (or *.json) with
	// one block per line.
	FormatJSON Format = 1
	// FormatCBOR is CBOR: application/cbor, files *.cbor holding a CBOR
	// sequence.
	FormatCBOR Format = 2
)

// String returns "json", "cbor", or "Format(n)" for an unknown value.
func (f Format) String() string {
	switch f {
	case FormatJSON:
		return "json"
	case FormatCBOR:
		return "cbor"
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// ContentType returns the HTTP media type of one block in format f.
func (f Format) ContentType() string {
	switch f {
	case FormatJSON:
		return "application/json"
	case FormatCBOR:
		return "application/cbor"
	}
	return ""
}

// ParseFormat parses a format name as given to a command-line flag: "json"
// or "jsonl" for JSON, "cbor" for CBOR, in any case. Other names wrap
// ErrInvalidArgument.
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(s) {
	case "json", "jsonl":
		return FormatJSON, nil
	case "cbor":
		return FormatCBOR, nil
	}
	return 0, fmt.Errorf("chain: unknown block format %q (want json, jsonl or cbor): %w", s, ErrInvalidArgument)
}

// FormatFromPath picks the format of a block file from its extension, in any
// case: .jsonl and .json are JSON lines, .cbor is a CBOR sequence. Other
// extensions wrap ErrInvalidArgument.
func FormatFromPath(path string) (Format, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".json":
		return FormatJSON, nil
	case ".cbor":
		return FormatCBOR, nil
	}
	return 0, fmt.Errorf("chain: cannot tell the block format of %q from its extension (want .jsonl, .json or .cbor): %w", path, ErrInvalidArgument)
}
