package query

import "sync"

// Answers computed from the disk are encoded into pooled buffers, so a page
// of 100 outputs (about 20 KiB) costs no allocation of its size per request.
// A buffer goes back to the pool when the answer that holds it is released
// (Answer.Release, after the API has written it), or at once when its bytes
// were copied into an entry a cache tier keeps.
var answerBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, 16<<10)
	return &b
}}

// maxPooledAnswer is the largest buffer kept for reuse: the rare huge answer
// (a 1000-item page of big datums) is left to the collector rather than
// pinned in the pool.
const maxPooledAnswer = 1 << 20

func getAnswerBuf() *[]byte {
	p := answerBufs.Get().(*[]byte)
	taken(p)
	return p
}

// putAnswerBuf returns p, whose slice holds the buffer's current (possibly
// grown) backing array, to the pool.
func putAnswerBuf(p *[]byte) {
	if cap(*p) > maxPooledAnswer {
		return
	}
	*p = (*p)[:0]
	returned(p)
	answerBufs.Put(p)
}
