package events

import (
	"strconv"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/query"
)

// The wire form of a stream (docs/events.md): Server-Sent Events, each event
// one "id:", one "event:" and one "data:" line of compact JSON, then a blank
// line. The JSON holds no newline (strings are escaped), so one data line
// always carries the whole object.

// appendFragment appends the members of e after "key": for an apply
// `"created":[Utxo…],"spent":[…]}` and for a rollback
// `"removed":[…],"restored":[Utxo…]}`.
func appendFragment(dst []byte, kind chain.ChangeKind, e *effects) []byte {
	if kind == chain.ChangeApply {
		dst = append(dst, `"created":[`...)
		for i, u := range e.created {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = query.AppendChainUtxo(dst, u)
		}
		dst = append(dst, `],"spent":[`...)
		for i, s := range e.spent {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendOutPoint(dst, s.op)
			dst = append(dst[:len(dst)-1], `,"by":{"tx_hash":`...)
			dst = query.AppendHexString(dst, s.tx[:])
			dst = append(dst, `,"input":`...)
			dst = strconv.AppendUint(dst, uint64(s.input), 10)
			dst = append(dst, `}}`...)
		}
		return append(dst, `]}`...)
	}
	dst = append(dst, `"removed":[`...)
	for i, op := range e.removed {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendOutPoint(dst, op)
	}
	dst = append(dst, `],"restored":[`...)
	for i, u := range e.restored {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = query.AppendChainUtxo(dst, u)
	}
	return append(dst, `]}`...)
}

func appendOutPoint(dst []byte, op chain.OutPoint) []byte {
	dst = append(dst, `{"tx_hash":`...)
	dst = query.AppendHexString(dst, op.TxHash[:])
	dst = append(dst, `,"index":`...)
	dst = strconv.AppendUint(dst, uint64(op.Index), 10)
	return append(dst, '}')
}

// appendPoint appends {"height":…,"hash":…}; the hash is null for the
// target of a rollback that emptied the store.
func appendPoint(dst []byte, t chain.Tip) []byte {
	dst = append(dst, `{"height":`...)
	dst = strconv.AppendUint(dst, t.Height, 10)
	dst = append(dst, `,"hash":`...)
	if t.Empty {
		dst = append(dst, "null"...)
	} else {
		dst = query.AppendHexString(dst, t.Hash[:])
	}
	return append(dst, '}')
}

// appendEventHead appends the id and event lines and the start of the data
// line: `data: {"seq":S,` .
func appendEventHead(dst []byte, seq uint64, event string) []byte {
	dst = append(dst, "id: "...)
	dst = strconv.AppendUint(dst, seq, 10)
	dst = append(dst, "\nevent: "...)
	dst = append(dst, event...)
	dst = append(dst, "\ndata: {\"seq\":"...)
	dst = strconv.AppendUint(dst, seq, 10)
	return dst
}

// appendEvent appends the event of digest d for a stream whose touched keys
// are keys (in the stream's order), each with its effects.
func appendEvent(dst []byte, d *digest, keys []*Key, effs []*effects) []byte {
	name, member := "apply", `,"block":`
	if d.kind == chain.ChangeRollback {
		name, member = "rollback", `,"target":`
	}
	dst = appendEventHead(dst, d.seq, name)
	dst = append(dst, member...)
	dst = appendPoint(dst, d.point)
	dst = append(dst, `,"keys":[`...)
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"key":`...)
		dst = append(dst, k.json...)
		dst = append(dst, ',')
		e := effs[i]
		if e.frag == nil {
			e.frag = appendFragment(nil, d.kind, e)
		}
		dst = append(dst, e.frag...)
	}
	return append(dst, "]}\n\n"...)
}

// appendOverflow appends the last event of a stream that fell behind: its id
// is the seq to resume after.
func appendOverflow(dst []byte, resume uint64) []byte {
	dst = appendEventHead(dst, resume, "overflow")
	return append(dst, `,"reason":"the client did not keep up: resume with Last-Event-ID"}`+"\n\n"...)
}

// appendTruncated appends the last event of a stream whose next event needs
// changes the log no longer holds: re-read the state, then subscribe again.
func appendTruncated(dst []byte, after uint64) []byte {
	dst = appendEventHead(dst, after, "log_truncated")
	return append(dst, `,"reason":"the change log no longer holds what the next event needs: re-read the state, then subscribe from its X-Commit-Seq"}`+"\n\n"...)
}

// heartbeat is the comment line a stream sends when idle.
var heartbeat = []byte(": heartbeat\n\n")
