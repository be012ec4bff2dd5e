package extension

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// The tests of the reassembler (D21, PROTOCOL.md §5.4) share one shape: a
// schedule of timed events is run through a reassembler by runStream, and
// what it did is compared with what streamOracle, a model of the rules
// written without looking at the reassembler's bookkeeping, says it must
// do.

// streamEventKind is what happens to a stream in one event of a schedule.
type streamEventKind int

const (
	streamChunkEvent streamEventKind = iota // a stream/chunk with seq
	streamEndEvent                          // a stream/end with end
	streamTickEvent                         // the owner's timer fires (expire)
)

// streamEvent is one event of a schedule, at a moment counted from
// streamEpoch. The events of a schedule are in time order.
type streamEvent struct {
	at   time.Duration
	kind streamEventKind
	seq  int64
	end  StreamEndParams
}

func (e streamEvent) String() string {
	switch e.kind {
	case streamChunkEvent:
		return fmt.Sprintf("chunk %d @%v", e.seq, e.at)
	case streamEndEvent:
		return fmt.Sprintf("end {lastSeq %d, error %q, interrupted %t} @%v", e.end.LastSeq, e.end.Error, e.end.Interrupted, e.at)
	}
	return fmt.Sprintf("tick @%v", e.at)
}

func chunkAt(at time.Duration, seq int64) streamEvent {
	return streamEvent{at: at, kind: streamChunkEvent, seq: seq}
}

func endAt(at time.Duration, lastSeq int64, text string, interrupted bool) streamEvent {
	return streamEvent{at: at, kind: streamEndEvent, end: StreamEndParams{StreamID: "es_0123456789abcdef01234567", LastSeq: lastSeq, Error: text, Interrupted: interrupted}}
}

func tickAt(at time.Duration) streamEvent { return streamEvent{at: at, kind: streamTickEvent} }

// streamEpoch is the moment 0 of every schedule.
var streamEpoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// testReassembler is a reassembler with the default bounds, as a Host's
// stream has them, and redact.
func testReassembler(redact func(string) string) *reassembler {
	return &reassembler{redact: redact, window: streamWindow, gapTimeout: streamGapTimeout, endGapTimeout: streamEndGapTimeout}
}

// streamLabel is the text of the chunk that event i of a schedule carries
// with seq: each copy of a chunk is told apart, so that a test sees which
// copy was delivered.
func streamLabel(seq int64, i int) string { return fmt.Sprintf("%d#%d", seq, i) }

// testRedact stands in for the host's redactor: it marks what it was given,
// so that a test sees that the text went through it, once.
func testRedact(s string) string { return "<" + s + ">" }

// streamOutcome is how a stream ended, or did not.
type streamOutcome struct {
	at      int    // the event at (or just before) which the stream ended; len(events) for the final timer; -1 while still open
	reason  Reason // "" for a clean end
	message string
}

func (o streamOutcome) String() string {
	switch {
	case o.at < 0:
		return "still open"
	case o.reason == "":
		return fmt.Sprintf("clean end at event %d", o.at)
	}
	return fmt.Sprintf("%s %q at event %d", o.reason, o.message, o.at)
}

// streamRun is what a reassembler did with a schedule, or what the oracle
// says it must do.
type streamRun struct {
	delivered []string        // the labels of the chunks delivered, in order
	counts    []int           // after each event: how many chunks had been delivered
	deadlines []time.Duration // before each event, and after the last: the gap deadline, or -1
	outcome   streamOutcome
}

// runStream runs events through a reassembler as its owner would: the
// reassembler is told each event's moment, and when timer is true the owner's
// timer fires at the reassembler's deadline whenever an event comes at or
// after it (when timer is false, the chunk or end that comes late must
// notice by itself). After the last event, the timer fires if it is
// armed. The events go on after the stream ended, to see that nothing
// comes out. It returns what was delivered and how the stream ended, and
// the invariants it saw broken: anything delivered out of order, twice or
// after the end, a second outcome, or memory beyond the window.
func runStream(events []streamEvent, timer bool) (streamRun, []string) {
	r := testReassembler(testRedact)
	run := streamRun{counts: make([]int, len(events)), deadlines: make([]time.Duration, len(events)+1), outcome: streamOutcome{at: -1}}
	var problems []string
	take := func(i int, st streamStep) {
		for _, c := range st.chunks {
			if run.outcome.at >= 0 {
				problems = append(problems, fmt.Sprintf("event %d: chunk %s delivered after the stream ended", i, c.Text))
			}
			seq, _, _ := strings.Cut(c.Text, "#")
			if want := strconv.Itoa(len(run.delivered) + 1); seq != want {
				problems = append(problems, fmt.Sprintf("event %d: chunk %s delivered where chunk %s was due", i, c.Text, want))
			}
			run.delivered = append(run.delivered, c.Text)
		}
		switch {
		case st.done && run.outcome.at >= 0:
			problems = append(problems, fmt.Sprintf("event %d: a second outcome %v", i, st.err))
		case st.done:
			run.outcome = streamOutcome{at: i}
			if st.err != nil {
				var e *Error
				if !errors.As(st.err, &e) {
					problems = append(problems, fmt.Sprintf("event %d: outcome %v is not an *Error", i, st.err))
				}
				run.outcome.reason, run.outcome.message = e.Reason, e.Message
				if msg := outcomeIsProblem(st.err); msg != "" {
					problems = append(problems, fmt.Sprintf("event %d: %s", i, msg))
				}
			}
		case st.err != nil:
			problems = append(problems, fmt.Sprintf("event %d: an error %v in a step that is not done", i, st.err))
		}
		if r.waiting > streamWindow-1 || len(r.marks) > streamWindow+1 || r.win != nil && len(r.win) != streamWindow {
			problems = append(problems, fmt.Sprintf("event %d: memory beyond the window: %d waiting, %d marks, a window of %d", i, r.waiting, len(r.marks), len(r.win)))
		}
		if r.finished && (r.win != nil || r.marks != nil) {
			problems = append(problems, fmt.Sprintf("event %d: the window is kept after the end", i))
		}
	}
	deadline := func() time.Duration {
		if d, ok := r.deadline(); ok {
			return d.Sub(streamEpoch)
		}
		return -1
	}
	for i, e := range events {
		run.deadlines[i] = deadline()
		at := streamEpoch.Add(e.at)
		if d, ok := r.deadline(); timer && ok && !at.Before(d) {
			take(i, r.expire(d))
		}
		switch e.kind {
		case streamChunkEvent:
			take(i, r.chunk(e.seq, ProviderChunk{Type: ChunkText, Text: streamLabel(e.seq, i)}, at))
		case streamEndEvent:
			take(i, r.end(e.end, at))
		case streamTickEvent:
			take(i, r.expire(at))
		}
		run.counts[i] = len(run.delivered)
	}
	run.deadlines[len(events)] = deadline()
	if d, ok := r.deadline(); ok {
		take(len(events), r.expire(d))
	}
	if _, ok := r.deadline(); ok && r.finished {
		problems = append(problems, "a deadline after the end")
	}
	return run, problems
}

// outcomeIsProblem checks how an outcome classifies under errors.Is: a gap
// is also an interruption (D21), and nothing else is two things.
func outcomeIsProblem(err error) string {
	is := func(r Reason) bool { return errors.Is(err, r) }
	var e *Error
	errors.As(err, &e)
	switch e.Reason {
	case ReasonStreamGap:
		if !is(ReasonProviderInterrupted) || is(ReasonProviderFailed) {
			return fmt.Sprintf("stream_gap %v must match provider_interrupted and only it besides", err)
		}
	case ReasonProviderInterrupted:
		if is(ReasonStreamGap) || is(ReasonProviderFailed) {
			return fmt.Sprintf("provider_interrupted %v matches another reason", err)
		}
	case ReasonProviderFailed:
		if is(ReasonProviderInterrupted) || is(ReasonStreamGap) {
			return fmt.Sprintf("provider_failed %v matches another reason", err)
		}
	default:
		return fmt.Sprintf("outcome %v has reason %q", err, e.Reason)
	}
	return ""
}

// streamVerdict is the oracle's answer: the run the reassembler must make,
// and, for the coverage counts of the property test, what kind of ending
// it was and which chunks filled a hole when a gap timer was near.
type streamVerdict struct {
	streamRun
	kind  string   // clean, failed, interrupted, window, past-end, second-end, gap-5s, gap-1s, open
	bound []string // before each event: "5s" or "1s", the timer the deadline is from, or ""
	fills []bool   // each event: a chunk that came for a seq that was missing
}

// streamOracle says what a reassembler must do with events, reasoning
// from the rules of PROTOCOL.md §5.4 directly rather than from the
// reassembler's bookkeeping (no window, no marks, no running counts). It
// keeps only the set of seqs accepted so far (with the event that first
// brought each) and the first end, and recomputes everything else from
// them at each event by brute force:
//
//   - what has been delivered is the longest run 1, 2, ... of accepted
//     seqs, each delivered as its first copy;
//   - a seq is missing when it is above that run, not accepted, and some
//     accepted seq or the end's lastSeq is at or above it; it has been
//     missing since the first accepted chunk above it or the end, whichever
//     came first;
//   - the deadline is the earliest of each missing seq's moment plus 5 s
//     and, after the end, the end's moment plus 1 s; an event at or after
//     it finds the stream failed with every missing seq named. (Missing
//     seqs are kept as ranges, so that a lastSeq of 2^40 costs nothing.)
func streamOracle(events []streamEvent) streamVerdict {
	n := len(events)
	v := streamVerdict{
		streamRun: streamRun{counts: make([]int, n), deadlines: make([]time.Duration, n+1), outcome: streamOutcome{at: -1}},
		kind:      "open",
		bound:     make([]string, n+1),
		fills:     make([]bool, n),
	}
	first := map[int64]int{} // accepted seq -> the event that first brought it
	var order []int64        // the accepted seqs, in the order (so the time) they came
	var end *StreamEndParams
	var endTime time.Duration
	counted, run := -1, int64(0)
	delivered := func() int64 { // counted again whenever the set has grown
		if counted == len(order) {
			return run
		}
		counted, run = len(order), 0
		for {
			if _, ok := first[run+1]; !ok {
				return run
			}
			run++
		}
	}
	missing := func() [][2]int64 { // the missing seqs, as sorted ranges from-to
		d, top := delivered(), delivered()
		var above []int64
		for _, s := range order {
			top = max(top, s)
			if s > d {
				above = append(above, s)
			}
		}
		if end != nil {
			top = max(top, end.LastSeq)
		}
		slices.Sort(above)
		var out [][2]int64
		from := d + 1
		for _, s := range append(above, top+1) {
			if s > from {
				out = append(out, [2]int64{from, s - 1})
			}
			from = s + 1
		}
		return out
	}
	since := func(s int64) time.Duration { // when s was first known to be missing
		t := time.Duration(-1)
		for _, k := range order {
			if k > s {
				t = events[first[k]].at
				break
			}
		}
		if end != nil && end.LastSeq >= s && (t < 0 || endTime < t) {
			t = endTime
		}
		return t
	}
	// Within a range of missing seqs, the lowest has been missing the
	// longest: whatever is above a seq is above every lower one.
	deadline := func() (time.Duration, string) {
		best, bound := time.Duration(-1), ""
		for _, r := range missing() {
			if d := since(r[0]) + 5*time.Second; best < 0 || d < best {
				best, bound = d, "5s"
			}
		}
		if best >= 0 && end != nil && endTime+time.Second < best {
			best, bound = endTime+time.Second, "1s"
		}
		return best, bound
	}
	stop := func(i int, kind string, reason Reason, message string) {
		v.kind, v.outcome = kind, streamOutcome{at: i, reason: reason, message: message}
	}
	interrupted := func(i int, kind, format string, args ...any) {
		stop(i, kind, ReasonProviderInterrupted, fmt.Sprintf(format, args...))
	}
	gap := func(i int, bound string) {
		stop(i, "gap-"+bound, ReasonStreamGap, "missing chunks "+oracleRanges(missing()))
	}
	for i := range v.deadlines {
		v.deadlines[i] = -1
	}
	for i, e := range events {
		dl, bound := deadline()
		v.deadlines[i], v.bound[i] = dl, bound
		if i > 0 {
			v.counts[i] = v.counts[i-1]
		}
		if dl >= 0 && e.at >= dl {
			gap(i, bound)
			break
		}
		d := delivered()
		switch e.kind {
		case streamChunkEvent:
			switch {
			case e.seq <= d: // a replay, or malformed
			case end != nil && e.seq > end.LastSeq:
				interrupted(i, "past-end", "chunk %d is past the stream's last chunk %d", e.seq, end.LastSeq)
			case e.seq > d+256:
				interrupted(i, "window", "chunk %d is outside the window of 256 chunks from chunk %d", e.seq, d+1)
			default:
				if _, ok := first[e.seq]; !ok {
					v.fills[i] = slices.ContainsFunc(missing(), func(r [2]int64) bool { return r[0] <= e.seq && e.seq <= r[1] })
					first[e.seq] = i
					order = append(order, e.seq)
				}
			}
		case streamEndEvent:
			switch {
			case e.end.LastSeq < 0: // malformed
			case end != nil:
				if e.end.LastSeq != end.LastSeq || e.end.Error != end.Error || e.end.Interrupted != end.Interrupted {
					interrupted(i, "second-end", "a second stream/end (lastSeq %d) differs from the first (lastSeq %d)", e.end.LastSeq, end.LastSeq)
				}
			default:
				end, endTime = &e.end, e.at
				beyond := int64(-1)
				for _, s := range order {
					if s > d && s > end.LastSeq {
						beyond = max(beyond, s)
					}
				}
				if beyond >= 0 {
					interrupted(i, "past-end", "chunk %d is past the stream's last chunk %d", beyond, end.LastSeq)
				}
			}
		}
		if v.outcome.at >= 0 {
			break
		}
		v.counts[i] = int(delivered())
		if end != nil && delivered() >= end.LastSeq {
			switch text := end.Error; {
			case end.Interrupted && strings.TrimSpace(text) == "":
				stop(i, "interrupted", ReasonProviderInterrupted, ReasonProviderInterrupted.Message())
			case end.Interrupted:
				stop(i, "interrupted", ReasonProviderInterrupted, "<"+text+">")
			case text == "":
				stop(i, "clean", "", "")
			case strings.TrimSpace(text) == "":
				stop(i, "failed", ReasonProviderFailed, ReasonProviderFailed.Message())
			default:
				stop(i, "failed", ReasonProviderFailed, "<"+text+">")
			}
			break
		}
	}
	if v.outcome.at < 0 {
		dl, bound := deadline()
		v.deadlines[n], v.bound[n] = dl, bound
		if dl >= 0 {
			gap(n, bound)
		}
	}
	for s := int64(1); s <= delivered(); s++ {
		v.delivered = append(v.delivered, streamLabel(s, first[s]))
	}
	if v.outcome.at >= 0 {
		for i := v.outcome.at; i < n; i++ {
			v.counts[i] = len(v.delivered)
		}
	}
	return v
}

// oracleRanges writes ranges of seqs as "1, 3-5".
func oracleRanges(ranges [][2]int64) string {
	var parts []string
	for _, r := range ranges {
		if r[0] == r[1] {
			parts = append(parts, strconv.FormatInt(r[0], 10))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", r[0], r[1]))
		}
	}
	return strings.Join(parts, ", ")
}

// streamMismatch compares what a reassembler did with what the oracle
// said, and returns the first difference, or "".
func streamMismatch(got, want streamRun) string {
	switch {
	case !slices.Equal(got.delivered, want.delivered):
		return fmt.Sprintf("delivered %v, want %v", got.delivered, want.delivered)
	case got.outcome != want.outcome:
		return fmt.Sprintf("outcome: %v, want %v", got.outcome, want.outcome)
	case !slices.Equal(got.counts, want.counts):
		return fmt.Sprintf("delivered counts after each event %v, want %v", got.counts, want.counts)
	case !slices.Equal(got.deadlines, want.deadlines):
		return fmt.Sprintf("deadlines before each event %v, want %v", got.deadlines, want.deadlines)
	}
	return ""
}

// checkStream runs events with and without the owner's timer and compares
// both runs with the oracle.
func checkStream(events []streamEvent) (streamVerdict, string) {
	want := streamOracle(events)
	for _, timer := range []bool{true, false} {
		got, problems := runStream(events, timer)
		if len(problems) > 0 {
			return want, fmt.Sprintf("timer %t: %s", timer, strings.Join(problems, "; "))
		}
		if msg := streamMismatch(got, want.streamRun); msg != "" {
			return want, fmt.Sprintf("timer %t: %s", timer, msg)
		}
	}
	return want, ""
}

func scheduleString(events []streamEvent) string {
	var b strings.Builder
	for i, e := range events {
		fmt.Fprintf(&b, "\t%d: %v\n", i, e)
	}
	return b.String()
}

// TestStreamReassemblyRulesD21 is one or more hand-written cases for each
// numbered ordering rule of PROTOCOL.md §5.4 that the reassembler owns
// (rule 8 only for a malformed end; rule 9 is the owner's queue). Each case
// states the chunks delivered, by label ("seq#event", so that a replay is
// seen not to be delivered), and how and at which event the stream ends;
// the oracle must agree with the case too.
func TestStreamReassemblyRulesD21(t *testing.T) {
	const s = time.Second
	const ns = time.Nanosecond
	seqs := func(from, to int64, at time.Duration) []streamEvent {
		var out []streamEvent
		for q := from; q <= to; q++ {
			out = append(out, chunkAt(at, q))
		}
		return out
	}
	interrupted := ReasonProviderInterrupted
	// Chunk 256 first, then 1 to 255: chunk q is event q, but 256 is event 0.
	var window255 []string
	for q := int64(1); q <= 255; q++ {
		window255 = append(window255, streamLabel(q, int(q)))
	}
	window255 = append(window255, streamLabel(256, 0))
	cases := []struct {
		name      string
		events    []streamEvent
		delivered []string
		outcome   streamOutcome
	}{
		{"rule 1: in order from 1, then a clean end",
			[]streamEvent{chunkAt(0, 1), chunkAt(0, 2), chunkAt(0, 3), endAt(0, 3, "", false)},
			[]string{"1#0", "2#1", "3#2"}, streamOutcome{at: 3}},
		{"rule 1: a replay of a delivered chunk is dropped",
			[]streamEvent{chunkAt(0, 1), chunkAt(0, 1), chunkAt(0, 2), chunkAt(0, 1), endAt(0, 2, "", false)},
			[]string{"1#0", "2#2"}, streamOutcome{at: 4}},
		{"rule 1: a replay of a waiting chunk is dropped; the first copy is delivered",
			[]streamEvent{chunkAt(0, 2), chunkAt(0, 2), chunkAt(0, 1), endAt(0, 2, "", false)},
			[]string{"1#2", "2#0"}, streamOutcome{at: 3}},
		{"rule 1: seq 0 and below are dropped",
			[]streamEvent{chunkAt(0, 0), chunkAt(0, -7), chunkAt(0, 1), endAt(0, 1, "", false)},
			[]string{"1#2"}, streamOutcome{at: 3}},
		{"rule 2: chunks out of order wait and are released in order",
			[]streamEvent{chunkAt(0, 3), chunkAt(0, 2), chunkAt(0, 1), endAt(0, 3, "", false)},
			[]string{"1#2", "2#1", "3#0"}, streamOutcome{at: 3}},
		{"rule 2: seq next+255 waits",
			slices.Concat([]streamEvent{chunkAt(0, 256)}, seqs(1, 255, 0), []streamEvent{endAt(0, 256, "", false)}),
			window255, streamOutcome{at: 256}},
		{"rule 2: seq next+256 fails at once",
			[]streamEvent{chunkAt(0, 1), chunkAt(0, 258), chunkAt(0, 2)},
			[]string{"1#0"}, streamOutcome{1, interrupted, "chunk 258 is outside the window of 256 chunks from chunk 2"}},
		{"rule 2: the window moves with the next expected seq",
			[]streamEvent{chunkAt(0, 1), chunkAt(0, 2), chunkAt(0, 258), chunkAt(0, 259)},
			[]string{"1#0", "2#1"}, streamOutcome{3, interrupted, "chunk 259 is outside the window of 256 chunks from chunk 3"}},
		{"rule 2: a far seq fails even after the end",
			[]streamEvent{chunkAt(0, 2), endAt(0, 1000, "", false), chunkAt(0, 300)},
			nil, streamOutcome{2, interrupted, "chunk 300 is outside the window of 256 chunks from chunk 1"}},
		{"rule 3: an identical second end is harmless",
			[]streamEvent{chunkAt(0, 1), endAt(0, 2, "x", true), endAt(0, 2, "x", true), chunkAt(0, 2)},
			[]string{"1#0", "2#3"}, streamOutcome{3, interrupted, "<x>"}},
		{"rule 3: a second end with another lastSeq fails",
			[]streamEvent{chunkAt(0, 1), endAt(0, 2, "", false), endAt(0, 3, "", false), chunkAt(0, 2)},
			[]string{"1#0"}, streamOutcome{2, interrupted, "a second stream/end (lastSeq 3) differs from the first (lastSeq 2)"}},
		{"rule 3: a second end with another error fails",
			[]streamEvent{endAt(0, 1, "a", false), endAt(0, 1, "b", false)},
			nil, streamOutcome{1, interrupted, "a second stream/end (lastSeq 1) differs from the first (lastSeq 1)"}},
		{"rule 3: a second end with another interrupted fails",
			[]streamEvent{endAt(0, 1, "", false), endAt(0, 1, "", true)},
			nil, streamOutcome{1, interrupted, "a second stream/end (lastSeq 1) differs from the first (lastSeq 1)"}},
		{"rule 3: an end after the outcome changes nothing",
			[]streamEvent{chunkAt(0, 1), endAt(0, 1, "", false), endAt(0, 5, "", true), chunkAt(0, 2)},
			[]string{"1#0"}, streamOutcome{at: 1}},
		{"rule 4: a chunk past lastSeq after the end fails",
			[]streamEvent{chunkAt(0, 2), endAt(0, 2, "", false), chunkAt(0, 3), chunkAt(0, 1)},
			nil, streamOutcome{2, interrupted, "chunk 3 is past the stream's last chunk 2"}},
		{"rule 4: a chunk waiting past lastSeq fails at the end",
			[]streamEvent{chunkAt(0, 3), chunkAt(0, 4), endAt(0, 2, "", false)},
			nil, streamOutcome{2, interrupted, "chunk 4 is past the stream's last chunk 2"}},
		{"rule 4: chunks delivered past lastSeq before the end do not fail it",
			[]streamEvent{chunkAt(0, 1), chunkAt(0, 2), chunkAt(0, 3), endAt(0, 2, "", false)},
			[]string{"1#0", "2#1", "3#2"}, streamOutcome{at: 3}},
		{"rule 4: replays at or below lastSeq after the end are dropped",
			[]streamEvent{chunkAt(0, 2), endAt(0, 2, "", false), chunkAt(0, 2), chunkAt(0, 1)},
			[]string{"1#3", "2#0"}, streamOutcome{at: 3}},
		{"rule 5: a gap that closes 1 ns before 5 s",
			[]streamEvent{chunkAt(0, 2), chunkAt(5*s-ns, 1), endAt(5*s-ns, 2, "", false)},
			[]string{"1#1", "2#0"}, streamOutcome{at: 2}},
		{"rule 5: a gap still open at 5 s fails, naming the missing seq",
			[]streamEvent{chunkAt(0, 1), chunkAt(0, 3), tickAt(5*s - ns), tickAt(5 * s), chunkAt(5*s, 2)},
			[]string{"1#0"}, streamOutcome{3, ReasonStreamGap, "missing chunks 2"}},
		{"rule 5: a chunk that closes the gap exactly at 5 s is too late",
			[]streamEvent{chunkAt(0, 2), chunkAt(5*s, 1), endAt(5*s, 2, "", false)},
			nil, streamOutcome{1, ReasonStreamGap, "missing chunks 1"}},
		{"rule 5: a gap that closes 1 ns before 1 s after the end",
			[]streamEvent{chunkAt(0, 2), endAt(2*s, 2, "", false), chunkAt(3*s-ns, 1)},
			[]string{"1#2", "2#0"}, streamOutcome{at: 2}},
		{"rule 5: a gap still open 1 s after the end fails",
			[]streamEvent{chunkAt(0, 2), endAt(2*s, 2, "", false), chunkAt(3*s, 1)},
			nil, streamOutcome{2, ReasonStreamGap, "missing chunks 1"}},
		{"rule 5: the 5 s timer fires first when the end comes late",
			[]streamEvent{chunkAt(0, 2), endAt(4500*time.Millisecond, 2, "", false), tickAt(5 * s)},
			nil, streamOutcome{2, ReasonStreamGap, "missing chunks 1"}},
		{"rule 5: a gap that closed and opened again is timed from its new start",
			[]streamEvent{chunkAt(0, 2), chunkAt(4*s, 1), chunkAt(4*s, 4), tickAt(9*s - ns), tickAt(9 * s)},
			[]string{"1#1", "2#0"}, streamOutcome{4, ReasonStreamGap, "missing chunks 3"}},
		{"rule 5: a hole that closed does not time a hole that appeared later",
			[]streamEvent{chunkAt(0, 2), chunkAt(4*s, 5), chunkAt(4500*time.Millisecond, 1), tickAt(5 * s), chunkAt(9*s-ns, 3), chunkAt(9*s, 4)},
			[]string{"1#2", "2#0", "3#4"}, streamOutcome{5, ReasonStreamGap, "missing chunks 4"}},
		{"rule 5: a hole split in two keeps its start",
			[]streamEvent{chunkAt(0, 4), chunkAt(3*s, 2), tickAt(5 * s)},
			nil, streamOutcome{2, ReasonStreamGap, "missing chunks 1, 3"}},
		{"rule 5: the end's lastSeq opens a gap of its own",
			[]streamEvent{chunkAt(0, 1), endAt(0, 3, "", false), tickAt(s)},
			[]string{"1#0"}, streamOutcome{2, ReasonStreamGap, "missing chunks 2-3"}},
		{"rule 5: every missing seq is named, as ranges",
			[]streamEvent{chunkAt(0, 3), chunkAt(0, 5), chunkAt(0, 6), chunkAt(0, 10), endAt(0, 12, "", false), tickAt(s)},
			nil, streamOutcome{5, ReasonStreamGap, "missing chunks 1-2, 4, 7-9, 11-12"}},
		{"rule 5: missing seqs beyond the window are named too",
			[]streamEvent{chunkAt(0, 1), chunkAt(0, 5), endAt(0, 1<<40, "", false)},
			[]string{"1#0"}, streamOutcome{3, ReasonStreamGap, "missing chunks 2-4, 6-1099511627776"}},
		{"rule 5: without a chunk or an end, nothing is missing",
			[]streamEvent{tickAt(time.Hour)},
			nil, streamOutcome{at: -1}},
		{"rule 6: lastSeq 0 with nothing waiting completes at once",
			[]streamEvent{endAt(0, 0, "", false), chunkAt(0, 1)},
			nil, streamOutcome{at: 0}},
		{"rule 6: lastSeq 0 with a chunk waiting fails",
			[]streamEvent{chunkAt(0, 2), endAt(0, 0, "", false)},
			nil, streamOutcome{1, interrupted, "chunk 2 is past the stream's last chunk 0"}},
		{"rule 6 and 7: lastSeq 0 with an error is a failure at once",
			[]streamEvent{endAt(0, 0, "boom", false)},
			nil, streamOutcome{0, ReasonProviderFailed, "<boom>"}},
		{"rule 7: an error and not interrupted is a failure with the redacted text",
			[]streamEvent{chunkAt(0, 1), endAt(0, 1, "rate limited", false)},
			[]string{"1#0"}, streamOutcome{1, ReasonProviderFailed, "<rate limited>"}},
		{"rule 7: a blank error is a failure with the frozen message",
			[]streamEvent{endAt(0, 0, " \t", false)},
			nil, streamOutcome{0, ReasonProviderFailed, ReasonProviderFailed.Message()}},
		{"rule 7: interrupted with text is an interruption with the redacted text",
			[]streamEvent{chunkAt(0, 1), endAt(0, 1, "cut off", true)},
			[]string{"1#0"}, streamOutcome{1, interrupted, "<cut off>"}},
		{"rule 7: interrupted without text is an interruption with the default message",
			[]streamEvent{endAt(0, 0, "", true)},
			nil, streamOutcome{0, interrupted, ReasonProviderInterrupted.Message()}},
		{"rule 7: the outcome waits until chunks 1 to lastSeq are delivered",
			[]streamEvent{chunkAt(0, 2), endAt(0, 2, "boom", false), chunkAt(0, 1)},
			[]string{"1#2", "2#0"}, streamOutcome{2, ReasonProviderFailed, "<boom>"}},
		{"rule 8: a malformed end is dropped",
			[]streamEvent{chunkAt(0, 1), endAt(0, -1, "", false), endAt(0, 1, "", false)},
			[]string{"1#0"}, streamOutcome{at: 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := streamRun{delivered: tc.delivered, outcome: tc.outcome}
			if got := streamOracle(tc.events); !slices.Equal(got.delivered, want.delivered) || got.outcome != want.outcome {
				t.Errorf("the oracle says %v, %v; the case says %v, %v", got.delivered, got.outcome, want.delivered, want.outcome)
			}
			for _, timer := range []bool{true, false} {
				got, problems := runStream(tc.events, timer)
				for _, p := range problems {
					t.Errorf("timer %t: %s", timer, p)
				}
				if !slices.Equal(got.delivered, want.delivered) || got.outcome != want.outcome {
					t.Errorf("timer %t: delivered %v, %v; want %v, %v", timer, got.delivered, got.outcome, want.delivered, want.outcome)
				}
			}
			if _, msg := checkStream(tc.events); msg != "" {
				t.Errorf("against the oracle: %s\n%s", msg, scheduleString(tc.events))
			}
		})
	}
}

// randomStreamSchedule makes the schedule of one stream: the sidecar's
// chunks 1 to n and its end, then the trouble a schedule can be in:
// permutations, drops (some seqs sent again late, some never), replays,
// chunks past the end or far ahead, malformed traffic, a lastSeq 0 or off
// by one, an identical or a conflicting second end, the owner's timer
// ticking, and a clock that stands still, creeps, jumps, or lands 1 ns
// before, on or after 1 s and 5 s from an earlier event (the moments at
// which a gap timer fires).
func randomStreamSchedule(rng *rand.Rand) []streamEvent {
	var n int64
	switch rng.IntN(10) {
	case 0:
		n = 0
	case 1:
		n = 250 + rng.Int64N(12) // about the window
	default:
		n = 1 + rng.Int64N(24)
	}
	sends := make([]int64, n)
	for i := range sends {
		sends[i] = int64(i) + 1
	}
	swap := func(i, j int) { sends[i], sends[j] = sends[j], sends[i] }
	switch rng.IntN(6) {
	case 0: // in order
	case 1:
		rng.Shuffle(len(sends), swap)
	case 2:
		slices.Reverse(sends)
	default: // nearly in order
		w := 1 + rng.IntN(6)
		for i := range sends {
			swap(i, min(i+rng.IntN(w), len(sends)-1))
		}
	}
	var late []int64
	if p := rng.IntN(4); p > 0 {
		var kept []int64
		for _, s := range sends {
			if rng.IntN(24) < p*p {
				if rng.IntN(3) > 0 {
					late = append(late, s)
				}
				continue
			}
			kept = append(kept, s)
		}
		sends = kept
	}
	insert := func(s int64) { sends = slices.Insert(sends, rng.IntN(len(sends)+1), s) }
	if len(sends) > 0 && rng.IntN(3) == 0 {
		for range 1 + rng.IntN(4) {
			insert(sends[rng.IntN(len(sends))])
		}
	}
	if rng.IntN(10) == 0 {
		insert(n + 1 + rng.Int64N(3)) // past the end
	}
	if rng.IntN(10) == 0 {
		insert(1 + rng.Int64N(600)) // anywhere, often beyond the window
	}
	if rng.IntN(25) == 0 {
		insert(-rng.Int64N(2)) // malformed
	}

	last := n
	switch rng.IntN(12) {
	case 0:
		last = 0
	case 1:
		last = max(0, n-1-rng.Int64N(2))
	case 2:
		last = n + 1 + rng.Int64N(3)
	}
	end := endAt(0, last, "", false)
	switch rng.IntN(8) {
	case 0:
		end.end.Error = "boom"
	case 1:
		end.end.Interrupted = true
	case 2:
		end.end.Error, end.end.Interrupted = "cut off", true
	case 3:
		end.end.Error = " "
	}

	var events []streamEvent
	for _, s := range sends {
		events = append(events, chunkAt(0, s))
	}
	put := func(e streamEvent) { events = slices.Insert(events, rng.IntN(len(events)+1), e) }
	ends := rng.IntN(16) > 0 // else the stream has not ended yet
	switch {
	case !ends:
	case rng.IntN(4) == 0:
		put(end)
	default:
		events = append(events, end)
	}
	for _, s := range late {
		put(chunkAt(0, s))
	}
	switch k := rng.IntN(10); {
	case !ends:
	case k < 3: // a second end: identical, another lastSeq, another error or interrupted
		second := end
		switch k {
		case 1:
			second.end.LastSeq += 1 + rng.Int64N(2)
		case 2:
			if rng.IntN(2) == 0 {
				second.end.Error += "!"
			} else {
				second.end.Interrupted = !second.end.Interrupted
			}
		}
		put(second)
	}
	if rng.IntN(30) == 0 {
		put(endAt(0, -1, "", false)) // malformed
	}
	for range rng.IntN(4) {
		put(tickAt(0))
	}

	steps := []time.Duration{0, 0, 0, time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4750 * time.Millisecond, 5 * time.Second}
	mode := rng.IntN(4)
	var at time.Duration
	for i := range events {
		switch mode {
		case 0: // all at once
		case 1:
			at += steps[rng.IntN(len(steps))]
		case 2:
			at += steps[rng.IntN(5)]
		case 3:
			at += steps[rng.IntN(4)]
			if i > 0 && rng.IntN(4) == 0 {
				from := events[rng.IntN(i)].at
				near := []time.Duration{time.Second, 5 * time.Second}[rng.IntN(2)] + time.Duration(rng.IntN(3)-1)
				at = max(at, from+near)
			}
		}
		events[i].at = at
		if rng.IntN(10) == 0 { // 1 ns off, this event only
			events[i].at = max(0, at+time.Duration(rng.IntN(3)-1))
		}
		if i > 0 { // the clock never goes back
			events[i].at = max(events[i].at, events[i-1].at)
		}
	}
	return events
}

// TestStreamReassemblyPropertyD21 runs 10,000 seeded random schedules
// (randomStreamSchedule) through the reassembler, with the owner's timer
// and without, and requires exactly what the oracle says: the chunks
// delivered and when, the deadline before every event, and the outcome,
// its event, reason and message. A failure prints its seed and schedule:
// streamSchedule(seed) rebuilds it. The kinds of ending, and chunks that
// fill a hole 1 ns before, on and 1 ns after each timer, are counted, so
// that the schedules are seen to reach every rule.
func TestStreamReassemblyPropertyD21(t *testing.T) {
	kinds := map[string]int{}
	near := map[string]int{}
	for seed := uint64(1); seed <= 10000; seed++ {
		events := streamSchedule(seed)
		v, msg := checkStream(events)
		if msg != "" {
			t.Fatalf("seed %d: %s\nschedule:\n%s", seed, msg, scheduleString(events))
		}
		kinds[v.kind]++
		for i, e := range events {
			if v.fills[i] || v.outcome.at == i && v.outcome.reason == ReasonStreamGap && e.kind == streamChunkEvent {
				if d := e.at - v.deadlines[i]; v.deadlines[i] >= 0 && d >= -1 && d <= 1 {
					near[fmt.Sprintf("%s%+d", v.bound[i], d)]++
				}
			}
		}
	}
	t.Logf("endings: %v", kinds)
	t.Logf("holes filled next to a timer (timer, ns from it): %v", near)
	for _, k := range []string{"clean", "failed", "interrupted", "window", "past-end", "second-end", "gap-5s", "gap-1s", "open"} {
		if kinds[k] < 20 {
			t.Errorf("only %d schedules end %s", kinds[k], k)
		}
	}
	for _, k := range []string{"5s-1", "5s+0", "5s+1", "1s-1", "1s+0", "1s+1"} {
		if near[k] < 5 {
			t.Errorf("only %d chunks fill a hole at %s ns of a timer", near[k], k)
		}
	}
}

// streamSchedule is the schedule of a seed of the property test.
func streamSchedule(seed uint64) []streamEvent {
	return randomStreamSchedule(rand.New(rand.NewPCG(seed, 0xD21)))
}

// TestStreamAbortDiscardsWhatWaitsD21: the owner's cancellation (or the
// sidecar's crash) ends the stream with the owner's error, PROTOCOL.md
// §5.5: chunks already released stay delivered, those waiting behind a
// gap are dropped, and nothing follows, not even the timer.
func TestStreamAbortDiscardsWhatWaitsD21(t *testing.T) {
	r := testReassembler(testRedact)
	if st := r.chunk(1, ProviderChunk{Type: ChunkText, Text: "a"}, streamEpoch); len(st.chunks) != 1 || st.done {
		t.Fatalf("chunk 1: %+v", st)
	}
	r.chunk(3, ProviderChunk{Type: ChunkText, Text: "c"}, streamEpoch)
	if _, ok := r.deadline(); !ok {
		t.Fatal("no deadline with chunk 2 missing")
	}
	cancelled := NewError(ReasonStreamCancelled, "")
	if st := r.abort(cancelled); !st.done || st.err != cancelled || len(st.chunks) != 0 {
		t.Fatalf("abort: %+v, want done with %v and no chunk", st, cancelled)
	}
	if _, ok := r.deadline(); ok {
		t.Error("a deadline after abort")
	}
	for _, st := range []streamStep{
		r.chunk(2, ProviderChunk{Type: ChunkText, Text: "b"}, streamEpoch),
		r.end(StreamEndParams{LastSeq: 3}, streamEpoch),
		r.expire(streamEpoch.Add(time.Hour)),
		r.abort(cancelled),
	} {
		if st.done || st.err != nil || len(st.chunks) != 0 {
			t.Errorf("a step after abort: %+v", st)
		}
	}
	if r.win != nil || r.marks != nil {
		t.Error("the window is kept after abort")
	}
}

// TestStreamEndErrorTextIsRedactedD21: a reassembler redacts the end's
// error text with its owner's redactor, here the default Redactor (D25),
// before it becomes the outcome's message.
func TestStreamEndErrorTextIsRedactedD21(t *testing.T) {
	secret := "ghp_FAKE0123456789abcdefghijklmnopqrstuv"
	for _, interrupted := range []bool{false, true} {
		r := testReassembler(defaultRedactor().Redact)
		st := r.end(StreamEndParams{LastSeq: 0, Error: "upstream said: token " + secret, Interrupted: interrupted}, streamEpoch)
		var e *Error
		if !st.done || !errors.As(st.err, &e) {
			t.Fatalf("interrupted %t: %+v, want an *Error outcome", interrupted, st)
		}
		if strings.Contains(e.Message, secret) || !strings.Contains(e.Message, RedactedMarker) || !strings.Contains(e.Message, "upstream said") {
			t.Errorf("interrupted %t: message %q, want the text with the token redacted", interrupted, e.Message)
		}
	}
}

// streamFuzzSchedule decodes fuzz input as a schedule. The first byte
// chooses whether the owner's timer runs; then each pair of bytes (op, arg)
// is one event, by op's low three bits (the rest, flags, qualify it):
//
//	0, 6, 7  the sidecar's next chunk in order
//	1        a chunk near it: the next one plus int8(arg) (replays, gaps)
//	2        a chunk far off: arg + flags*256
//	3        an end: lastSeq = the last chunk sent + int8(arg); flags&3
//	         picks the error ("", "boom", " ", "other"), flags&4 interrupted
//	4        the clock moves on by one of eight steps (arg&7) and 0-2 ns
//	5        the owner's timer ticks
//
// A schedule has at most 512 events.
func streamFuzzSchedule(data []byte) ([]streamEvent, bool) {
	if len(data) == 0 {
		return nil, false
	}
	timer := data[0]&1 == 1
	steps := [8]time.Duration{0, time.Millisecond, 250 * time.Millisecond, time.Second - 1, time.Second, 5*time.Second - 1, 5 * time.Second, time.Hour}
	var events []streamEvent
	var at time.Duration
	var sent int64
	for i := 1; i+1 < len(data) && len(events) < 512; i += 2 {
		op, arg := data[i], data[i+1]
		flags := int64(op >> 3)
		switch op & 7 {
		case 0, 6, 7:
			sent++
			events = append(events, chunkAt(at, sent))
		case 1:
			events = append(events, chunkAt(at, sent+1+int64(int8(arg))))
		case 2:
			events = append(events, chunkAt(at, int64(arg)+flags*256))
		case 3:
			e := endAt(at, sent+int64(int8(arg)), [4]string{"", "boom", " ", "other"}[flags&3], flags&4 != 0)
			events = append(events, e)
		case 4:
			at += steps[arg&7] + time.Duration(arg>>3%3)
		case 5:
			events = append(events, tickAt(at))
		}
	}
	return events, timer
}

// FuzzStreamReassembly drives a reassembler with schedules decoded from
// the fuzz input (streamFuzzSchedule). It must never panic, and runStream
// checks the invariants: nothing delivered out of order, twice or after
// the end, one outcome at most, memory within the window. What it did must
// also be exactly what the oracle says.
func FuzzStreamReassembly(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 3, 0})                    // three chunks and their end
	f.Add([]byte{0, 0, 0, 1, 1, 4, 6, 1, 0})                    // a gap closed exactly at 5 s: too late
	f.Add([]byte{1, 1, 1, 3, 2, 4, 3, 0, 0})                    // a gap closed 1 ns before 1 s after the end
	f.Add([]byte{1, 2, 255, 26, 16})                            // a chunk that waits, one beyond the window
	f.Add([]byte{0, 1, 1, 3, 2, 3, 3})                          // conflicting ends
	f.Add([]byte{1, 1, 1, 35, 2, 35, 2, 1, 2})                  // identical interrupted ends, then a chunk past the end
	f.Add([]byte{1, 3, 0, 0, 0})                                // lastSeq 0 ends at once; a chunk after is ignored
	f.Add([]byte{0, 1, 5, 1, 3, 3, 10, 1, 0, 4, 7, 5, 0, 1, 1}) // holes, a lastSeq above them, an hour, a tick
	f.Fuzz(func(t *testing.T, data []byte) {
		events, timer := streamFuzzSchedule(data)
		got, problems := runStream(events, timer)
		if len(problems) > 0 {
			t.Fatalf("timer %t: %s\nschedule:\n%s", timer, strings.Join(problems, "; "), scheduleString(events))
		}
		if msg := streamMismatch(got, streamOracle(events).streamRun); msg != "" {
			t.Fatalf("timer %t: %s\nschedule:\n%s", timer, msg, scheduleString(events))
		}
	})
}

// TestStreamIdleBoundD21: a stream on which nothing arrives for the idle
// bound fails as interrupted, naming the bound; a chunk before it moves
// it. On the bubble's fake clock the timer fires when every goroutine
// waits, so the test takes no time and its times are exact.
func TestStreamIdleBoundD21(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := (&Host{StreamIdleTimeout: 2 * time.Minute}).withDefaults()
		s := &sidecar{cfg: cfg, spec: &launchSpec{ID: "fx"}, redactor: cfg.Redactor, streams: map[string]*Stream{}}
		rt := &Runtime{}
		if err := rt.begin(); err != nil { // as OpenStream does; conclude ends it
			t.Fatal(err)
		}
		opened := time.Now()
		st := &Stream{rt: rt, s: s, id: "es_1", ref: "plugin/fx/fx/m", out: make(chan ProviderChunk, 4), done: make(chan struct{}), aborted: make(chan struct{})}
		st.r = reassembler{redact: s.safe, window: 8, gapTimeout: cfg.GapTimeout, endGapTimeout: cfg.EndGapTimeout, idle: cfg.StreamIdleTimeout, heard: opened}
		st.mu.Lock()
		st.apply(streamStep{}) // arms the timer, as the first step after the open does
		st.mu.Unlock()
		time.Sleep(time.Minute) // fake time: a chunk a minute in moves the bound
		st.chunk(1, weigh(ProviderChunk{Type: ChunkText, Text: "a"}, 10))
		if c, err := st.Recv(); err != nil || c.Text != "a" {
			t.Fatalf("Recv = %+v, %v; want the chunk", c, err)
		}
		_, err := st.Recv()
		if waited := time.Since(opened); waited != 3*time.Minute {
			t.Errorf("the stream failed %v after it opened, want 3m0s: the idle bound from the last chunk", waited)
		}
		if !errors.Is(err, ReasonProviderInterrupted) || !strings.Contains(err.Error(), "nothing came on the stream for 2m0s") {
			t.Fatalf("Recv = %v; want an interruption naming the idle bound", err)
		}
	})
}

// TestStreamIdleBoundOffD21: a negative StreamIdleTimeout turns the idle
// bound off, and the default is 120 s.
func TestStreamIdleBoundOffD21(t *testing.T) {
	if d := (&Host{}).withDefaults().StreamIdleTimeout; d != 120*time.Second {
		t.Errorf("default StreamIdleTimeout = %v, want 2m0s", d)
	}
	r := reassembler{window: 8, gapTimeout: time.Second, endGapTimeout: time.Second, idle: max((&Host{StreamIdleTimeout: -1}).withDefaults().StreamIdleTimeout, 0)}
	if d, ok := r.deadline(); ok {
		t.Errorf("deadline = %v with the idle bound off and no gap, want none", d)
	}
	if st := r.expire(time.Now().Add(1000 * time.Hour)); st.done {
		t.Errorf("an idle stream failed with the bound off: %v", st.err)
	}
}

// TestChunkWeightCountsEveryMemberD21: a chunk weighs its whole encoded
// size, or the strings it holds when they are more, whichever members
// carry them.
func TestChunkWeightCountsEveryMemberD21(t *testing.T) {
	big := strings.Repeat("x", 1000)
	for _, c := range []ProviderChunk{
		{Type: ChunkText, Text: big},
		{Type: ChunkReasoning, Signature: big},
		{Type: ChunkToolCall, ToolCall: &ProviderToolCall{ID: big}},
		{Type: ChunkUsage, Usage: &ProviderUsage{FinishReason: big}},
		{Type: ChunkError, Error: &ProviderError{Code: ProviderErrorFailed, Message: big}},
	} {
		if w := weigh(c, 10).weight; w != 1000 {
			t.Errorf("%s chunk weighs %d, want its 1000 string bytes", c.Type, w)
		}
		if w := weigh(c, 5000).weight; w != 5000 {
			t.Errorf("%s chunk weighs %d, want its 5000 encoded bytes", c.Type, w)
		}
	}
}

// TestStreamHeldBytesBoundedWhateverMemberD21: chunks waiting behind a
// gap whose bytes are error messages and finish reasons (not text) are
// bounded too: measured on the heap after each chunk, the stream never
// holds more than MaxStreamBytes and one chunk, and it fails as
// interrupted once past the bound.
func TestStreamHeldBytesBoundedWhateverMemberD21(t *testing.T) {
	const bound, size = 4 << 20, 1 << 20
	cfg := (&Host{MaxStreamBytes: bound}).withDefaults()
	s := &sidecar{cfg: cfg, spec: &launchSpec{ID: "fx"}, redactor: cfg.Redactor, streams: map[string]*Stream{}}
	rt := &Runtime{}
	if err := rt.begin(); err != nil {
		t.Fatal(err)
	}
	st := &Stream{rt: rt, s: s, id: "es_1", ref: "plugin/fx/fx/m", out: make(chan ProviderChunk, 4), done: make(chan struct{}), aborted: make(chan struct{})}
	st.r = reassembler{redact: s.safe, window: 64, gapTimeout: time.Hour, endGapTimeout: time.Hour}
	heap := func() int64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	base, peak := heap(), int64(0)
	for seq := int64(2); seq <= 13; seq++ { // seq 1 never comes: everything waits
		c := ProviderChunk{Type: ChunkUsage, Usage: &ProviderUsage{FinishReason: strings.Repeat("u", size)}}
		if seq%2 == 0 {
			c = ProviderChunk{Type: ChunkError, Error: &ProviderError{Code: ProviderErrorFailed, Message: strings.Repeat("e", size)}}
		}
		st.chunk(seq, weigh(c, size+100))
		peak = max(peak, heap()-base)
	}
	if peak > bound+2*size {
		t.Errorf("the stream held %d bytes at its peak, want at most the bound %d and a chunk", peak, bound)
	}
	select {
	case <-st.done:
	default:
		t.Fatal("the stream still holds every chunk; want it interrupted past the bound")
	}
	if _, err := st.Recv(); !errors.Is(err, ReasonProviderInterrupted) || !strings.Contains(err.Error(), "holds over 4194304 bytes") {
		t.Fatalf("Recv = %v; want an interruption once the bound is passed", err)
	}
}
