package loadtest

import "github.com/utxo-cache/utxo-cache/chain"

// feedScript is the writer feed's writes after the preload, made once and
// replayed by every configuration: each starts on its own copy of the
// preloaded store (world.reset puts the model back in step with it), so
// each must be fed the same blocks and rollbacks, in the same order, from
// the same tip.
//
// The script is a pure function of the generator's seed and the rollback
// settings: every'th block is followed by a rollback of depth blocks, then
// by the undone blocks re-made as a new branch (world.rebranch), then by
// the generator's next blocks. Whether a rollback comes next depends only
// on the steps before it, never on timing, so a feed that stops mid-branch
// leaves nothing behind: the next configuration starts again at step 0.
// (Before the script, each configuration's feed went on from the previous
// one's tip and generator, and a feed that stopped with branch blocks still
// pending made the next one post the generator's next block over a gap: 409
// not_next_block.)
//
// Steps are made lazily (world.nextStep) and ahead of time
// (world.prepareScript), so that no configuration pays for generating
// blocks during its measurement.
type feedScript struct {
	every, depth  int // a rollback of depth blocks every `every` blocks; every <= 0: none
	steps         []feedStep
	pending       []*chain.Block // the new branch's blocks not yet in steps
	sinceRollback int            // blocks in steps since the last rollback
	blocks        int            // block steps in steps
}

// feedStep is one write: a block to post, or a rollback.
type feedStep struct {
	block      *chain.Block // nil: a rollback to rollbackTo
	rollbackTo uint64
}

// setScript starts the script with the rollback settings; call it once,
// after the preload and before any step.
func (w *world) setScript(rollbackEvery, rollbackDepth int) {
	w.script = feedScript{every: rollbackEvery, depth: rollbackDepth}
}

// extendScript appends one step to the script. Generating side only.
func (w *world) extendScript() {
	s := &w.script
	if len(s.pending) == 0 && s.every > 0 && s.depth > 0 && s.sinceRollback >= s.every && len(w.recent) >= s.depth {
		s.sinceRollback = 0
		target := w.recent[len(w.recent)-1].Height - uint64(s.depth)
		s.pending = w.rebranch(target)
		s.steps = append(s.steps, feedStep{rollbackTo: target})
		return
	}
	var b *chain.Block
	if len(s.pending) > 0 {
		b, s.pending = s.pending[0], s.pending[1:]
	} else {
		b = w.nextBlock()
	}
	w.extend(b)
	s.sinceRollback++
	s.blocks++
	s.steps = append(s.steps, feedStep{block: b})
}

// prepareScript makes steps until the script holds at least blocks blocks
// and the new branch of its last rollback.
func (w *world) prepareScript(blocks int) {
	for w.script.blocks < blocks || len(w.script.pending) > 0 {
		w.extendScript()
	}
}

// nextStep returns the step the feed posts next and moves past it.
func (w *world) nextStep() feedStep {
	for w.pos >= len(w.script.steps) {
		w.extendScript()
	}
	st := w.script.steps[w.pos]
	if w.forgetPosted {
		w.script.steps[w.pos] = feedStep{}
	}
	w.pos++
	return st
}
