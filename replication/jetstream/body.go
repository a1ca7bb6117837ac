package jetstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/replication"
)

// Changes too large for one message (see the package doc, "Large changes").
//
// A stream message whose change is in the object store has no body and
// these headers, beside the block limits every message carries:
//
//	Utxo-Body-Object  the object's name: the change's seq in 20 digits
//	Utxo-Body-Bytes   the record's length, decimal, 1 or more
//	Utxo-Body-Sha256  the SHA-256 of the record, 64 lowercase hex digits
//
// Example, change 1234 whose record is 3 MiB of zero bytes (body_test.go):
//
//	Utxo-Body-Object: 00000000000000001234
//	Utxo-Body-Bytes: 3145728
//	Utxo-Body-Sha256: bbd05cf6097ac9b1f89ea29d2542c1b7b67ee46848393895f5a9e43fa1f621e5
const (
	headerBodyObject = "Utxo-Body-Object"
	headerBodyBytes  = "Utxo-Body-Bytes"
	headerBodySha256 = "Utxo-Body-Sha256"

	// headerRoom is what a change's message needs beside its record: its
	// headers and the protocol's. A record that does not fit in the
	// connection's max payload with it goes to the object store.
	headerRoom = 4096
	// maxChunk bounds the object store's chunks (its default); smaller
	// when the servers' max payload is.
	maxChunk = 128 << 10
	// maxRecordSlack is what a change record may hold beyond twice the
	// largest block (its spent outputs), as an HTTP replica allows.
	maxRecordSlack = 8 << 20
)

// errBody is a pointer message, or the object it names, that is not what
// the writer publishes.
var errBody = errors.New("jetstream: bad change body")

func changeObject(seq uint64) string { return fmt.Sprintf("%020d", seq) }

// bodyRef is where a pointer message says its change is.
type bodyRef struct {
	name string
	size int64
	sum  [sha256.Size]byte
}

// setPointer sets the headers of a pointer message for rec, change seq.
func setPointer(h nats.Header, seq uint64, rec []byte) {
	sum := sha256.Sum256(rec)
	h.Set(headerBodyObject, changeObject(seq))
	h.Set(headerBodyBytes, strconv.Itoa(len(rec)))
	h.Set(headerBodySha256, hex.EncodeToString(sum[:]))
}

// parsePointer reads the headers of stream message seq: ok false when the
// change is in the message itself. A pointer must name seq's object, a
// length from 1 to maxBytes and a digest; its body must be empty (dataLen).
func parsePointer(get func(string) string, seq uint64, dataLen int, maxBytes int64) (ref bodyRef, ok bool, err error) {
	name, size, sum := get(headerBodyObject), get(headerBodyBytes), get(headerBodySha256)
	if name == "" && size == "" && sum == "" {
		return bodyRef{}, false, nil
	}
	if name != changeObject(seq) {
		return bodyRef{}, true, fmt.Errorf("message %d names object %q: %w", seq, name, errBody)
	}
	n, perr := strconv.ParseInt(size, 10, 64)
	if perr != nil || n < 1 || n > maxBytes || strconv.FormatInt(n, 10) != size {
		return bodyRef{}, true, fmt.Errorf("message %d: %s %q (at most %d): %w", seq, headerBodyBytes, size, maxBytes, errBody)
	}
	if len(sum) != 2*sha256.Size || hex.EncodeToString(mustHex(sum)) != sum {
		return bodyRef{}, true, fmt.Errorf("message %d: %s %q: %w", seq, headerBodySha256, sum, errBody)
	}
	if dataLen != 0 {
		return bodyRef{}, true, fmt.Errorf("message %d: a pointer with a body of %d bytes: %w", seq, dataLen, errBody)
	}
	ref = bodyRef{name: name, size: n}
	copy(ref.sum[:], mustHex(sum))
	return ref, true, nil
}

// mustHex decodes s, or returns nil.
func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil
	}
	return b
}

// maxRecordBytes is the largest change record a replica reads under lim.
func maxRecordBytes(lim chain.Limits) int64 {
	return 2*int64(lim.EnsureDefaults().MaxBlockBytes) + maxRecordSlack
}

// chunkSize is the object store chunk for a connection whose max payload
// is maxPayload.
func chunkSize(maxPayload int64) uint32 {
	if maxPayload <= 0 {
		return maxChunk
	}
	return uint32(max(min(maxChunk, maxPayload/2), 1024))
}

// readBody reads the object ref names from obs and checks its length and
// digest. An object that is gone is ErrNeedBootstrap and ErrLogTruncated
// (the stream moved on without this replica); one that is not what the
// pointer says is errBody.
func readBody(ctx context.Context, obs jetstream.ObjectStore, ref bodyRef) ([]byte, error) {
	res, err := obs.Get(ctx, ref.name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("change object %s is gone: %w: %w", ref.name, replication.ErrNeedBootstrap, replication.ErrLogTruncated)
	}
	if err != nil {
		return nil, fmt.Errorf("change object %s: %w", ref.name, err)
	}
	defer res.Close()
	data, err := io.ReadAll(io.LimitReader(res, ref.size+1))
	if errors.Is(err, jetstream.ErrDigestMismatch) {
		return nil, fmt.Errorf("change object %s: %v: %w", ref.name, err, errBody)
	}
	if err != nil {
		return nil, fmt.Errorf("change object %s: %w", ref.name, err)
	}
	if int64(len(data)) != ref.size {
		return nil, fmt.Errorf("change object %s: %d bytes or more, the pointer says %d: %w", ref.name, len(data), ref.size, errBody)
	}
	if sha256.Sum256(data) != ref.sum {
		return nil, fmt.Errorf("change object %s: its SHA-256 is not the pointer's: %w", ref.name, errBody)
	}
	return data, nil
}
