package disk

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/utxo-cache/utxo-cache/chain"
	"github.com/utxo-cache/utxo-cache/changeset"
)

// # Frozen outputs
//
// A freeze marks live outputs frozen; an unfreeze clears the mark. Each is
// one change of the commit sequence, like a block: one synced batch that
// holds the rows, the change-log record (chain.ChangeFreeze or
// ChangeUnfreeze, so replicas apply it through the same code) and the state
// row with Seq raised. Tip, count and digest stay as they are: they describe
// the confirmed outputs, which a freeze does not change.
//
// Where the mark lives: in the output's own rows. The 0x02 record and every
// 0x03 index row of a frozen output carry state 0x03 (record.go) instead of
// 0x01, so the reads that already fetch those bytes (outpoint lookups,
// listings) see the mark at no extra cost, from the same snapshot as the
// rest of the answer. The reason and the change that froze it live beside,
// in a freeze row:
//
//	prefix  key                     value                                 kept
//	0x0a    tx_hash[32] index[4]    version 0x01, seq uint64 (the freeze   while the output
//	                                change), uvarint length, reason        is live and frozen
//
// Example: frozen by change 7 for "fraud":
//
//	01 0000000000000007 05 6672617564
//
// How a freeze ends, besides an unfreeze: a block that spends the output
// (the service follows its chain: the block is applied) writes the spent
// record without the mark and deletes the freeze row in its own batch, and
// the store logs the lapse; a rollback of that block brings the output back
// live and unfrozen (the undo data restores it as the block found it, less
// the mark; the freeze row is gone). A rollback that removes a frozen output
// (it undoes the block that created it) deletes its freeze row too. So a
// freeze row exists exactly while its output is live and frozen, and spent
// records never carry one: pruning has nothing of a freeze left to remove.

const prefixFrozen byte = 0x0a

const freezeRowVersion byte = 0x01

// FreezeInfo is what the store keeps of a frozen output beside its mark.
type FreezeInfo struct {
	Seq    uint64 // the change that froze it (or last set its reason)
	Reason string
}

func appendFrozenKey(dst []byte, op chain.OutPoint) []byte {
	dst = append(dst, prefixFrozen)
	dst = append(dst, op.TxHash[:]...)
	return binary.BigEndian.AppendUint32(dst, op.Index)
}

func appendFreezeRow(dst []byte, fi *FreezeInfo) []byte {
	dst = append(dst, freezeRowVersion)
	dst = binary.BigEndian.AppendUint64(dst, fi.Seq)
	return appendLenBytes(dst, []byte(fi.Reason))
}

func decodeFreezeRow(b []byte) (FreezeInfo, error) {
	d := decbuf{b: b, ctx: "freeze row"}
	var fi FreezeInfo
	if v := d.byte1(); d.err() == nil && v != freezeRowVersion {
		d.fail("unknown version")
	}
	fi.Seq = d.u64()
	fi.Reason = string(d.lenBytes(chain.MaxFreezeReasonLen))
	return fi, d.done()
}

// Frozen returns what the view's store keeps of op's freeze; found is false
// when op is not frozen at this view's state.
func (v *View) Frozen(op chain.OutPoint) (fi FreezeInfo, found bool, err error) {
	raw, closer, err := v.snap.Get(appendFrozenKey(nil, op))
	if errors.Is(err, pebble.ErrNotFound) {
		return fi, false, nil
	}
	if err != nil {
		return fi, false, fmt.Errorf("disk: read freeze of %s: %w", op, err)
	}
	defer closer.Close()
	fi, err = decodeFreezeRow(raw)
	return fi, err == nil, err
}

// FreezeResult says what a Freeze or Unfreeze did.
type FreezeResult struct {
	// Changes is nil when the request changed nothing (every outpoint
	// already in the asked state): no change was committed.
	Changes *changeset.Set
	// Changed lists the outpoints whose state the change set, in request
	// order: what its change-log record names.
	Changed []chain.OutPoint
}

// Freeze freezes the live outputs f names, with f's reason, as one change,
// or changes nothing when each is already frozen with that reason. Every
// outpoint must name a live output (chain.ErrUnknownInput otherwise, and
// nothing changes); f must pass Validate(true). Writer goroutine only;
// nothing is published (see Publish).
func (s *Store) Freeze(f chain.Freeze) (FreezeResult, error) {
	return s.setFrozen(f, true)
}

// Unfreeze clears the freeze of each outpoint of f that is frozen, as one
// change; outpoints that are not frozen (unknown, spent, or live and not
// frozen) are left alone, and a request with none frozen changes nothing.
// f must pass Validate(false). Writer goroutine only.
func (s *Store) Unfreeze(f chain.Freeze) (FreezeResult, error) {
	return s.setFrozen(f, false)
}

func (s *Store) setFrozen(f chain.Freeze, freeze bool) (FreezeResult, error) {
	if err := s.canWrite(); err != nil {
		return FreezeResult{}, err
	}
	if s.State().RollingBack {
		return FreezeResult{}, fmt.Errorf("disk: a rollback is in progress: %w", ErrFailed)
	}
	if err := f.Validate(freeze); err != nil {
		return FreezeResult{}, err
	}
	type target struct {
		op  chain.OutPoint
		rec Record
	}
	var todo []target
	for _, op := range f.OutPoints {
		rec, found, err := s.readRecord(op)
		if err != nil {
			return FreezeResult{}, err
		}
		live := found && rec.Spent == nil
		if freeze && !live {
			return FreezeResult{}, fmt.Errorf("%s is not a live output: %w", op, chain.ErrUnknownInput)
		}
		if !freeze && (!live || !rec.Frozen) {
			continue // not frozen: nothing to unfreeze
		}
		if freeze && rec.Frozen {
			fi, err := s.frozenRow(op)
			if err != nil {
				return FreezeResult{}, err
			}
			if fi.Reason == f.Reason {
				continue // frozen already, for that reason
			}
		}
		todo = append(todo, target{op, rec})
	}
	if len(todo) == 0 {
		return FreezeResult{}, nil
	}
	prev := s.State()
	st := prev
	st.Seq++
	b := s.writeBatch()
	defer s.releaseScratch()
	s.dropLapses()
	ch := newChanges(prev.Tip, len(todo))
	changed := make([]chain.OutPoint, len(todo))
	var key, val []byte
	var dimKeys []DimKey
	var filters []assetFilter
	for i := range todo {
		t := &todo[i]
		changed[i] = t.op
		t.rec.Frozen = freeze
		key = appendOutPointKey(key[:0], t.op)
		val = appendRecord(val[:0], &t.rec)
		_ = b.Set(key, val, nil)
		// Every index row of the output carries the mark too.
		val = append(val[:0], t.op.TxHash[:]...)
		val = appendRecord(val, &t.rec)
		pos := t.rec.Utxo.Position()
		dimKeys, filters = appendDimKeys(dimKeys[:0], filters[:0], s.dims, s.dimFuncs, &t.rec.Utxo)
		for _, k := range dimKeys {
			key = appendIndexKey(key[:0], k, pos)
			_ = b.Set(key, val, nil)
		}
		key = appendFrozenKey(key[:0], t.op)
		if freeze {
			val = appendFreezeRow(val[:0], &FreezeInfo{Seq: st.Seq, Reason: f.Reason})
			_ = b.Set(key, val, nil)
		} else {
			_ = b.Delete(key, nil)
		}
		ch.outPoint(t.op)
		ch.address(t.rec.Utxo.Address)
		// The listings by its other index values (credentials, policies,
		// assets) show the mark too: their cached pages go as well.
		ch.indexKeys(dimKeys[1:])
	}
	if freeze && s.schemaVersion < schemaFrozen {
		// The first frozen record: from now on a binary that does not know
		// state 0x03 must refuse the store rather than call it corrupt.
		sc := schema{version: schemaFrozen, dims: s.dims}
		_ = b.Set(keySchema, appendSchema(nil, &sc), nil)
	}
	kind := chain.ChangeUnfreeze
	logged := chain.Freeze{OutPoints: changed}
	if freeze {
		kind, logged.Reason = chain.ChangeFreeze, f.Reason
	}
	logFloor, err := s.logChange(b, &st, &chain.Change{Kind: kind, Freeze: &logged})
	if err != nil {
		return FreezeResult{}, err
	}
	_ = b.Set(keyState, appendState(nil, &st), nil)
	if err := s.commitKeys(b); err != nil {
		return FreezeResult{}, fmt.Errorf("disk: commit %s %d: %w", kind, st.Seq, err)
	}
	s.afterCommit(b)
	s.logFloor = logFloor
	if freeze && s.schemaVersion < schemaFrozen {
		s.schemaVersion = schemaFrozen
	}
	for _, op := range changed {
		// The young-output view holds outputs without their mark: a later
		// spend must read the row, and see the freeze it ends.
		s.recent.remove(op)
	}
	s.state.Store(&st)
	ch.cs.NewTip, ch.cs.Seq = st.Tip, st.Seq
	return FreezeResult{Changes: &ch.cs, Changed: changed}, nil
}

// frozenRow reads op's committed freeze row. Writer goroutine.
func (s *Store) frozenRow(op chain.OutPoint) (FreezeInfo, error) {
	raw, err := s.get(appendFrozenKey(nil, op))
	if err != nil {
		return FreezeInfo{}, fmt.Errorf("disk: freeze row of frozen %s: %w", op, errors.Join(err, ErrCorrupt))
	}
	return decodeFreezeRow(raw)
}

// lapse is a freeze that ended because its output left the live set.
type lapse struct {
	op     chain.OutPoint
	height uint64 // the block that spent it, or whose rollback removed it
	why    string
}

// lapseFreeze adds to b the end of op's freeze, which the block at height
// spent or whose rollback removed op (why); the caller writes op's row
// without the mark. The lapse is logged once the batch commits
// (reportLapses). Writer goroutine only.
func (s *Store) lapseFreeze(b *keyBatch, op chain.OutPoint, height uint64, why string) {
	_ = b.Delete(appendFrozenKey(nil, op), nil)
	s.lapses = append(s.lapses, lapse{op, height, why})
}

// reportLapses logs the lapses of the batch that just committed; dropLapses
// forgets those of one that did not. Writer goroutine only.
func (s *Store) reportLapses() {
	for _, l := range s.lapses {
		s.opts.Logger.Warn("a frozen output left the live set: its freeze lapses",
			"outpoint", l.op.String(), "height", l.height, "by", l.why)
	}
	s.lapses = s.lapses[:0]
	s.leases.commit()
	s.pending.commit()
}

func (s *Store) dropLapses() {
	s.lapses = s.lapses[:0]
	s.leases.reset()
	s.pending.reset()
}
