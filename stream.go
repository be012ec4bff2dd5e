package extension

import (
	"strconv"
	"strings"
	"time"
)

// The bounds of stream reassembly (D21, PROTOCOL.md §5.4). They are
// constants of this host for now; they are meant to become fields of the
// host's configuration, so the reassembler names them and nothing else
// repeats their values.
const (
	// streamWindow is how far ahead of the next expected seq a chunk may
	// be: a chunk with seq >= next+streamWindow fails the stream as
	// interrupted (rule 2). So at most streamWindow-1 chunks ever wait.
	streamWindow = 256

	// streamGapTimeout is how long a seq may stay missing, counted from
	// the moment the gap it is in first appeared (rule 5).
	streamGapTimeout = 5 * time.Second

	// streamEndGapTimeout is how long a gap may stay open after the
	// stream's first stream/end (rule 5).
	streamEndGapTimeout = time.Second
)

// streamStep is what one call of a [reassembler] released: chunks to be
// delivered as they are, in order, and, in exactly one call of a stream's
// life, the stream's terminal outcome.
type streamStep struct {
	chunks []ProviderChunk // released by this call, in seq order
	done   bool            // the stream ended with this call
	err    error           // when done: nil for a clean end
}

// reassembler puts the chunks of one provider stream back in order and
// decides how the stream ends, by the host's ordering rules of D21
// (PROTOCOL.md §5.4, rules 1-7; rule 8 as far as a malformed end goes).
// It is a pure unit: it starts no goroutine and arms no timer. Its owner
// feeds it the stream's chunks and ends, keeps one timer armed for
// [reassembler.deadline] and calls [reassembler.expire] when it fires;
// time is read only from now. Every call returns what became
// deliverable; after the step that is done, every call returns an empty
// step.
//
// One goroutine owns a reassembler: it holds no lock. The zero value is
// ready to use; now and redact must not change after the first call.
//
// Memory is bounded by the window whatever the sidecar sends: at most
// streamWindow-1 waiting chunks and streamWindow+1 gap marks. (The bytes
// of a waiting chunk are bounded by the frame limit, D2.)
type reassembler struct {
	// now is the clock; nil means time.Now. Tests inject their own. It
	// must not go back (time.Now's monotonic reading does not).
	now func() time.Time
	// redact redacts the error text of a stream/end before it becomes an
	// error's message (D21: the host redacts provider error text again,
	// D25); nil means a default Redactor.
	redact func(string) string

	delivered int64      // seqs 1..delivered have been released; next expected is delivered+1
	win       []waitSlot // the window, indexed by seq % streamWindow; nil until a chunk waits
	waiting   int        // chunks waiting in win
	high      int64      // the highest waiting seq, when waiting > 0
	known     int64      // the highest seq known to exist: seen in a chunk, or the end's lastSeq
	marks     []gapMark  // when the seqs above delivered became known, oldest first
	ended     bool       // the first stream/end has come
	last      StreamEndParams
	endAt     time.Time // when the first stream/end came
	finished  bool      // the terminal outcome has been returned
}

// waitSlot is one place of the window.
type waitSlot struct {
	chunk ProviderChunk
	ok    bool
}

// gapMark records that at time at, known rose to upTo: every seq up to
// upTo that is still missing has been missing since at, or earlier.
// Marks have increasing upTo; the first one with upTo above delivered
// dates the oldest missing seq, which is always the next expected one.
type gapMark struct {
	upTo int64
	at   time.Time
}

func (r *reassembler) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

// chunk takes the chunk numbered seq (rules 1, 2 and 4). A seq below the
// next expected one, or one already waiting, is a replay and is dropped;
// the first copy is the one delivered.
func (r *reassembler) chunk(seq int64, c ProviderChunk) streamStep {
	now := r.clock()
	st := r.expire(now)
	if r.finished {
		return st
	}
	next := r.delivered + 1
	switch {
	case seq < next: // rule 1 (a seq below 1 is malformed and dropped too, rule 8)
		return st
	case r.ended && seq > r.last.LastSeq: // rule 4
		return r.finish(st, pastEnd(seq, r.last.LastSeq))
	case seq-next >= streamWindow: // rule 2; no overflow, as next >= 1
		return r.finish(st, Errorf(ReasonProviderInterrupted,
			"chunk %d is outside the window of %d chunks from chunk %d", seq, streamWindow, next))
	case seq == next:
		st.chunks = append(st.chunks, c)
		r.delivered = seq
		r.release(&st)
	default:
		if r.win == nil {
			r.win = make([]waitSlot, streamWindow)
		}
		slot := &r.win[seq%streamWindow]
		if slot.ok { // rule 1: a replay of a waiting chunk
			return st
		}
		*slot = waitSlot{chunk: c, ok: true}
		r.waiting++
		r.high = max(r.high, seq)
	}
	r.learn(seq, now)
	r.settle(&st)
	return st
}

// end takes a stream/end (rules 3, 4, 6 and 7). An end with a negative
// lastSeq is malformed and dropped (rule 8); the decoder drops it first.
func (r *reassembler) end(p StreamEndParams) streamStep {
	now := r.clock()
	st := r.expire(now)
	if r.finished || p.LastSeq < 0 {
		return st
	}
	if r.ended { // rule 3
		if p.LastSeq == r.last.LastSeq && p.Error == r.last.Error && p.Interrupted == r.last.Interrupted {
			return st
		}
		return r.finish(st, Errorf(ReasonProviderInterrupted,
			"a second stream/end (lastSeq %d) differs from the first (lastSeq %d)", p.LastSeq, r.last.LastSeq))
	}
	r.ended, r.last, r.endAt = true, p, now
	if r.waiting > 0 && r.high > p.LastSeq { // rule 4: a waiting chunk past the end
		return r.finish(st, pastEnd(r.high, p.LastSeq))
	}
	r.learn(p.LastSeq, now)
	r.settle(&st)
	return st
}

// pastEnd is the interruption of rule 4.
func pastEnd(seq, lastSeq int64) *Error {
	return Errorf(ReasonProviderInterrupted, "chunk %d is past the stream's last chunk %d", seq, lastSeq)
}

// deadline returns when the gap timers of rule 5 fail the stream unless the
// gap closes first, and false when no seq is missing (or the stream is
// over). Its owner keeps one timer armed for it, re-reading it after every
// call, and calls [reassembler.expire] when it fires.
func (r *reassembler) deadline() (time.Time, bool) {
	if r.finished || r.known <= r.delivered {
		return time.Time{}, false
	}
	// The next expected seq is missing (were it here, it would have been
	// released) and, being the lowest, has been missing the longest.
	d := r.marks[0].at.Add(streamGapTimeout)
	if r.ended {
		d = earlier(d, r.endAt.Add(streamEndGapTimeout))
	}
	return d, true
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// expire fails the stream with stream_gap when now has reached its
// deadline with the gap still open (rule 5). chunk and end call it first,
// so that a chunk that comes at or after the deadline is too late even if
// it beats the owner's timer.
func (r *reassembler) expire(now time.Time) streamStep {
	d, ok := r.deadline()
	if !ok || now.Before(d) {
		return streamStep{}
	}
	return r.finish(streamStep{}, r.gapError())
}

// abort ends the stream with err, which its owner decides (the caller's
// cancellation, stream_cancelled; the sidecar's crash, an interruption;
// PROTOCOL.md §5.5): waiting chunks are discarded. It returns the
// terminal step, or an empty one when the stream was already over.
func (r *reassembler) abort(err error) streamStep {
	if r.finished {
		return streamStep{}
	}
	return r.finish(streamStep{}, err)
}

// release moves the chunks that now follow on from the window into st.
func (r *reassembler) release(st *streamStep) {
	for r.waiting > 0 {
		slot := &r.win[(r.delivered+1)%streamWindow]
		if !slot.ok {
			break
		}
		st.chunks = append(st.chunks, slot.chunk)
		*slot = waitSlot{}
		r.waiting--
		r.delivered++
	}
	drop := 0
	for drop < len(r.marks) && r.marks[drop].upTo <= r.delivered {
		drop++
	}
	r.marks = append(r.marks[:0], r.marks[drop:]...)
}

// learn records that seq exists (a chunk came with it, or it is the end's
// lastSeq): every seq below it that is missing is missing from now on, if
// it was not already (rule 5).
func (r *reassembler) learn(seq int64, now time.Time) {
	if seq <= r.known {
		return
	}
	r.known = seq
	if seq > r.delivered {
		r.marks = append(r.marks, gapMark{upTo: seq, at: now})
	}
}

// settle ends the stream when chunks 1 to lastSeq have all been delivered
// (rules 6 and 7). Chunks delivered past lastSeq before the end came do
// not change that (rule 4 names only chunks waiting or arriving later).
func (r *reassembler) settle(st *streamStep) {
	if r.ended && r.delivered >= r.last.LastSeq {
		*st = r.finish(*st, r.outcome())
	}
}

// outcome is the terminal outcome of rule 7: an interruption when the end
// says interrupted, a failure when it carries error text, else a clean
// end. The text is redacted; a blank one becomes the reason's frozen
// message, which is also the interruption's default.
func (r *reassembler) outcome() error {
	reason := ReasonProviderFailed
	switch {
	case r.last.Interrupted:
		reason = ReasonProviderInterrupted
	case r.last.Error == "":
		return nil
	}
	text := ""
	if strings.TrimSpace(r.last.Error) != "" {
		redact := r.redact
		if redact == nil {
			redact = defaultRedactor().Redact
		}
		text = strings.TrimSpace(redact(r.last.Error))
	}
	return NewError(reason, text)
}

// finish makes st the terminal step with err and lets go of the window.
func (r *reassembler) finish(st streamStep, err error) streamStep {
	r.finished = true
	r.win, r.marks, r.waiting = nil, nil, 0
	st.done, st.err = true, err
	return st
}

// gapError is the stream_gap failure of rule 5, naming every missing seq
// as ranges ("missing chunks 2, 5-7"). The caller sees an interruption:
// the error matches ReasonProviderInterrupted as well as ReasonStreamGap
// under errors.Is.
func (r *reassembler) gapError() *Error {
	var b strings.Builder
	var lo, hi int64 = 0, -1 // the open range; none while hi < lo
	flush := func() {
		if hi < lo {
			return
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(lo, 10))
		if hi > lo {
			b.WriteByte('-')
			b.WriteString(strconv.FormatInt(hi, 10))
		}
	}
	add := func(from, to int64) {
		if hi >= lo && from == hi+1 {
			hi = to
			return
		}
		flush()
		lo, hi = from, to
	}
	next := r.delivered + 1
	top := min(r.known, next+streamWindow-1) // no chunk waits above the window
	for s := next; s <= top; s++ {
		if r.win == nil || !r.win[s%streamWindow].ok {
			add(s, s)
		}
	}
	if r.known > top {
		add(top+1, r.known)
	}
	flush()
	return causedError(ReasonProviderInterrupted, ReasonStreamGap, "missing chunks %s", b.String())
}
