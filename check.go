package extension

// The conformance checker (PROTOCOL.md §1.2): Check runs one plugin's
// sidecar through every scenario that applies to what it declared and
// judges it by the rules that bind a sidecar, each result naming its
// ruling, its section and the frames involved.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// CheckOptions configures [Check]; a zero field takes the default it names.
type CheckOptions struct {
	// Name is the plugin ID the plugin is installed as; "" means the
	// manifest's name.
	Name string
	// Env is the sidecar's base environment; nil means os.Environ().
	Env []string
	// Timeout bounds each wait for the sidecar: an answer, the end of a
	// stream, a shutdown; the exit after an oversized frame may take three
	// times as long. Default 5 s.
	Timeout time.Duration
}

// CheckResult is the outcome of one scenario. Rule is the ruling it
// checks (D1 to D31 of PROTOCOL.md); Detail names the section and shows
// the frames involved, redacted and escaped. A scenario whose behaviour
// the sidecar never showed is Skipped, neither passed nor failed.
type CheckResult struct {
	Name    string `json:"name"`
	Rule    string `json:"rule"`
	OK      bool   `json:"ok"`
	Skipped bool   `json:"skipped"`
	Detail  string `json:"detail"`
}

// CheckReport is what [Check] found, scenario by scenario, in the order
// they ran.
type CheckReport struct {
	Plugin  string        `json:"plugin"`
	Passed  int           `json:"passed"`
	Failed  int           `json:"failed"`
	Skipped int           `json:"skipped"`
	Results []CheckResult `json:"results"`
}

// Check installs the plugin in pluginDir into a temporary home, starts its
// sidecar through the launch gate (D8) and runs every conformance
// scenario that applies to what it declared: the handshake and the
// barrier from the sidecar's side, strict envelopes, error data, every
// subscribed point, events, content refs, its own request ids, provider
// catalogs and streams, UI actions and publishes, shutdown and an
// oversized frame. A sidecar is judged by the rules that bind a sidecar,
// as an upstream one follows them, not by where this module is stricter
// (PROTOCOL.md §11). It returns the report and an error joining every
// failed scenario; the error is nil when none failed. Nothing it started
// is left running. When ctx ends first, the scenarios in progress end with
// it, those after them are not run, the sidecars are stopped as usual (a
// hosted one is asked to shut down, within Timeout, then killed) and the
// error says the check stopped.
func Check(ctx context.Context, pluginDir string, opts CheckOptions) (*CheckReport, error) {
	opts.Timeout = orDefault(opts.Timeout, 5*time.Second)
	work, err := os.MkdirTemp("", "reasonix-check-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	// One configuration for the raw sessions and the generation: the
	// host's defaults (D10, D11, D13), every wait for an answer bounded by
	// Timeout.
	// What it shows from the sidecar is redacted as the host's other
	// sinks are (D25): the secrets of the sidecar's environment, and the
	// values its manifest gives it once setUp has read the manifest.
	c := &checker{ctx: ctx, opts: opts, redactor: &Redactor{}}
	if opts.Env != nil {
		c.redactor.Environ = func() []string { return opts.Env }
	}
	c.host = *Host{Home: filepath.Join(work, "home"), Env: opts.Env, ShutdownTimeout: opts.Timeout, InitializeTimeout: opts.Timeout,
		FastInterceptTimeout: opts.Timeout, InterceptTimeout: opts.Timeout,
		Session: SessionContext{SessionID: "check-session", WorkspaceRoot: work, Generation: 1}}.withDefaults()
	if c.setUp(pluginDir) {
		for _, phase := range []func(){c.protocol, c.oversized, c.hosted} {
			if ctx.Err() == nil {
				phase()
			}
		}
	}
	if ctx.Err() != nil {
		// What ran is reported; each wait ended with ctx, the sidecars
		// were stopped all the same.
		c.failed = append(c.failed, fmt.Errorf("the check stopped before its end: %w", context.Cause(ctx)))
	}
	return &c.report, errors.Join(c.failed...)
}

// checker is one run of Check.
type checker struct {
	ctx      context.Context
	opts     CheckOptions
	host     Host // the configuration, its defaults filled in: Home, and the workspace root in Session
	spec     *launchSpec
	redactor *Redactor        // for all it shows (D25)
	decl     InitializeResult // the declaration of the first raw session
	requests atomic.Int64     // requests the sidecar sent, in every session
	report   CheckReport
	failed   []error // one a failed scenario, its detail's first line
}

// setUp installs the plugin and runs the launch gate; it reports whether
// a sidecar can be started.
func (c *checker) setUp(dir string) bool {
	c.report.Plugin = cmp.Or(c.opts.Name, filepath.Base(dir))
	entry, err := Install(c.host.Home, dir, InstallOptions{Name: c.opts.Name, Link: true})
	if err == nil {
		c.spec, err = launchGate(c.host.Home, entry, c.host.Session.WorkspaceRoot)
	}
	if err == nil {
		c.report.Plugin = entry.Name
		c.redactor = c.redactor.withValues(slices.Sorted(maps.Values(c.spec.Runtime.Env)))
	}
	c.record("install/launch-gate", "D8", "§3.1", nil, errText(err))
	return err == nil
}

// judge records a scenario: problem "" passes it.
func (c *checker) record(name, rule, section string, frames []seenFrame, problem string) {
	detail := "PROTOCOL.md " + section
	if problem == "" {
		c.report.Passed++
	} else {
		detail += ": " + c.safe(problem) // it may quote the sidecar
		c.report.Failed++
		first, _, _ := strings.Cut(detail, "\n")
		c.failed = append(c.failed, fmt.Errorf("%s (%s): %s", name, rule, first))
	}
	c.report.Results = append(c.report.Results, CheckResult{Name: name, Rule: rule, OK: problem == "", Detail: detail + c.showFrames(frames)})
}

// skip records a scenario the sidecar gave no occasion to check.
func (c *checker) skip(name, rule, section, why string) {
	c.report.Skipped++
	c.report.Results = append(c.report.Results, CheckResult{Name: name, Rule: rule, Skipped: true, Detail: "PROTOCOL.md " + section + ": skipped: " + why})
}

// safe is text from the sidecar as the checker shows it: redacted, then
// escaped (D25, D27).
func (c *checker) safe(text string) string { return TerminalSafe(c.redactor.Redact(text)) }

// showFrames renders the last frames of a scenario, one per line,
// redacted, escaped and cut at 400 bytes.
func (c *checker) showFrames(frames []seenFrame) string {
	const most, width = 12, 400
	var b strings.Builder
	if len(frames) > most {
		fmt.Fprintf(&b, "\n  … %d earlier frames", len(frames)-most)
		frames = frames[len(frames)-most:]
	}
	for _, f := range frames {
		arrow := "→"
		if f.in {
			arrow = "←"
		}
		text := TerminalSafe(c.redactor.RedactJSON(f.raw)) // whole, so no secret is cut in two
		if len(text) > width {
			text = TerminalSafe(text[:width]) + fmt.Sprintf("… (%d bytes)", f.size) // a rune cut in two shows escaped
		}
		b.WriteString("\n  " + arrow + " " + text)
	}
	return b.String()
}

// seenFrame is one frame of a session, read as the host reads it
// (decodeMessage): the checker judges what the host would see.
type seenFrame struct {
	in     bool        // written by the sidecar
	raw    string      // the frame, or its first frameKeep bytes
	size   int         // the frame's length
	m      message     // the envelope, when it is a valid one
	fe     *frameError // why it is not a valid envelope, or nil
	nullID bool        // a valid response but for its id null: the answer to a frame whose id could not be read
}

// frameKeep bounds what a log keeps of one frame, and logFrames how many
// frames it keeps: a hostile sidecar cannot fill the checker's memory.
const (
	frameKeep = 1 << 20
	logFrames = 20000
)

func (w seenFrame) kind() msgKind {
	if w.fe != nil {
		return w.fe.kind
	}
	return w.m.kind
}

// id returns w's id, valid envelope or not, and false when it has no
// integer one.
func (w seenFrame) id() (msgID, bool) {
	if w.fe != nil {
		return w.fe.id, w.fe.hasID
	}
	return w.m.id, !w.nullID && w.m.kind != kindNotification
}

// answers reports whether w is a response to request id, valid or not.
func (w seenFrame) answers(id msgID) bool {
	got, ok := w.id()
	return w.kind() == kindResponse && ok && got == id
}

// request reports whether w is a valid request for method ("" for any).
func (w seenFrame) request(method string) bool {
	return w.fe == nil && w.m.kind == kindRequest && (method == "" || w.m.method == method)
}

// wireError returns the error of a valid error response.
func (w seenFrame) wireError() (e *Error, ok bool) {
	return w.m.err, w.fe == nil && w.m.err != nil
}

// frameLog is every frame of one session, in the order read or written,
// filled by a Conn's Tap.
type frameLog struct {
	ended    <-chan struct{} // closed when nothing more will be logged; nil for never
	requests *atomic.Int64   // counts the requests the sidecar sent

	mu     sync.Mutex // protects frames and grew
	frames []seenFrame
	grew   chan struct{} // closed and replaced when a frame is added
}

// newLog returns an empty log that counts the sidecar's requests in
// c.requests, across every session.
func (c *checker) newLog() *frameLog {
	return &frameLog{requests: &c.requests, grew: make(chan struct{})}
}

// add records a frame; line is copied.
func (l *frameLog) add(in bool, line []byte) {
	w := seenFrame{in: in, size: len(line), raw: string(line[:min(len(line), frameKeep)])}
	if len(line) <= frameKeep { // a larger one is the checker's own oversized line
		w.m, w.fe = decodeMessage(line)
		if w.fe != nil && w.fe.kind == kindResponse && !w.fe.hasID {
			// PROTOCOL.md §2.4: an answer to a frame whose id could not
			// be read carries id null; the rest must still be a response.
			if m, fe := decodeMessage(bytes.Replace(line, []byte(`"id":null`), []byte(`"id":0`), 1)); fe == nil {
				w.m, w.fe, w.nullID = m, nil, true
			}
		}
	}
	if in && w.kind() == kindRequest {
		l.requests.Add(1)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.frames) < logFrames {
		l.frames = append(l.frames, w)
		close(l.grew)
		l.grew = make(chan struct{})
	}
}

func (l *frameLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.frames)
}

func (l *frameLog) since(i int) []seenFrame {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.frames[i:])
}

// wait returns the first frame from index from on that match accepts,
// waiting for it until d passes, the log ends or ctx does.
func (l *frameLog) wait(ctx context.Context, d time.Duration, from int, match func(seenFrame) bool) (seenFrame, bool) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		l.mu.Lock()
		frames, grew := l.frames[from:], l.grew // logged frames never change: read outside the lock
		l.mu.Unlock()
		if i := slices.IndexFunc(frames, match); i >= 0 {
			return frames[i], true
		}
		from += len(frames)
		select {
		case <-grew:
		case <-l.ended:
			if l.mark() == from {
				return seenFrame{}, false
			}
		case <-ctx.Done():
			return seenFrame{}, false
		}
	}
}

// session is a sidecar the checker starts itself through the launch
// gate's spec, and speaks to through a Conn that keeps no barrier, so it
// can send what a host would not (a request before extension/initialized),
// and through the Conn's writer the frames a Conn refuses to build. The
// Conn answers the sidecar's own requests unknown_method.
type session struct {
	c    *checker
	proc *process
	conn *Conn
	log  *frameLog
}

// launch starts a sidecar for a session.
func (c *checker) launch() (*session, error) {
	proc, _, err := startProcess(c.spec, c.spec.env(c.host.Env), &tail{})
	if err != nil {
		return nil, err
	}
	s := &session{c: c, proc: proc, log: c.newLog()}
	s.conn = NewConn(proc.stdout, proc.stdin, nil, ConnOptions{Tap: s.log.add, WriteStallTimeout: c.opts.Timeout})
	s.log.ended = s.conn.Done() // the reader logs every frame it reads before the connection ends
	return s, nil
}

// call sends a request through the Conn and returns the sidecar's answer
// as the log holds it, valid or not, and the frames of the exchange.
func (s *session) call(method string, params any) (answer seenFrame, frames []seenFrame, ok bool) {
	frames, _ = s.c.attempt(s.c.ctx, s.log, func(ctx context.Context) error {
		_, err := s.conn.Call(ctx, method, params) // the answer, whatever it is, was logged before the call returned
		return err
	})
	if i := slices.IndexFunc(frames, func(w seenFrame) bool { return !w.in && w.request(method) }); i >= 0 {
		if j := slices.IndexFunc(frames, func(w seenFrame) bool { return w.in && w.answers(frames[i].m.id) }); j >= 0 {
			return frames[j], frames, true
		}
	}
	return seenFrame{}, frames, false
}

// stop ends the session as D11 prescribes: stdin closed, grace to exit,
// then the group is killed. It reports what had to be killed and the
// exit error.
func (s *session) stop(grace time.Duration) (killedWhat, error) {
	killed, _ := s.proc.stop(grace, s.c.host.ReapTimeout, s.c.host.ExitDrain)
	s.conn.Close()
	return killed, s.proc.waitErr
}

// death says how the session's process ended, once the connection has
// ended with it, for a call of method it left unanswered: its exit status
// or signal and the end of its stderr; "" while it runs.
func (s *session) death(method string) string {
	if !waitClosed(s.conn.Done(), 0) || !waitClosed(s.proc.exited, s.c.host.ExitDrain) {
		return ""
	}
	waitClosed(s.proc.drained, s.c.host.ExitDrain) // the last of its stderr
	death := fmt.Sprintf("the sidecar exited (%v) without answering %s", cmp.Or(s.proc.waitErr, errors.New("exit status 0")), method)
	if i := slices.IndexFunc(s.c.spec.Args, func(a string) bool { return strings.Contains(a, rootVariable) }); i >= 0 {
		death += fmt.Sprintf(" (args[%d] holds the literal %s: args are passed verbatim, §3.1)", i, rootVariable)
	}
	if tail := s.proc.tail.redacted(); tail != "" {
		death += "; its stderr ends: " + tail
	}
	return death
}

// handshake runs extension/initialize on a session; with judge set it
// records the handshake scenarios. It reports whether the sidecar
// answered a valid declaration.
func (c *checker) handshake(s *session, judge bool) bool {
	answer, frames, ok := s.call(MethodInitialize, c.host.initializeParams(c.spec.Runtime))
	var res InitializeResult
	problem := c.answerProblem(answer, ok, MethodInitialize, &res)
	if !ok {
		problem = cmp.Or(s.death(MethodInitialize), problem) // the first cause first
	}
	if !judge {
		return problem == ""
	}
	answered := problemIf(!strings.HasPrefix(problem, strictProblem), problem) // a result that does not decode strictly was answered
	// Each stage is judged once the one before it passed.
	for _, st := range [...]struct{ name, rule, section, problem string }{
		{"handshake/answered", "D10", "§3.5", answered},
		{"handshake/strict-result", "D3", "§3.3", problem},
		{"handshake/declaration", "D9", "§3.3", errText(checkDeclaration(c.report.Plugin, c.spec.Runtime, &res))},
	} {
		c.record(st.name, st.rule, st.section, frames, st.problem)
		if st.problem != "" {
			return false
		}
	}
	c.decl = res
	return true
}

// strictProblem starts the problem of a result that is not decoded.
const strictProblem = "the result does not decode strictly: "

// answerProblem says what is wrong with the answer to a call of method,
// decoding its result into result; "" for a valid result.
func (c *checker) answerProblem(answer seenFrame, ok bool, method string, result any) string {
	e, isErr := answer.wireError()
	switch {
	case !ok:
		return fmt.Sprintf("no answer to %s within %v", method, c.opts.Timeout)
	case answer.fe != nil:
		return "the answer is not a valid JSON-RPC response: " + answer.fe.err.Message
	case isErr:
		return fmt.Sprintf("%s was refused: %d %s", method, e.Code, e.Message)
	}
	if err := Decode(method, answer.m.result, result); err != nil {
		return strictProblem + err.Error()
	}
	return ""
}

// protocol is the first session: the handshake, the barrier from the
// sidecar's side, strict envelopes, error data, notifications and a
// bounded shutdown.
func (c *checker) protocol() {
	s, err := c.launch()
	if err != nil {
		c.record("handshake/answered", "D10", "§3.5", nil, "the sidecar did not start: "+err.Error())
		return
	}
	defer s.stop(0)
	if !c.handshake(s, true) {
		return
	}
	point := InputReceive
	if len(c.decl.Subscriptions) > 0 {
		point = Point(c.decl.Subscriptions[0])
	}
	payload, _ := samplePayload(point, false)
	answer, frames, ok := s.call(MethodIntercept, InterceptParams{Event: point, Seq: 1, Payload: payload, TimeoutMillis: 1000})
	c.recordErrorAnswer("barrier/request-before-initialized", "D6", "§3.4", answer, frames, ok, codeInvalidRequest, ReasonProtocolError, 2, true)
	early := slices.ContainsFunc(s.log.since(0), func(w seenFrame) bool { return w.in && !w.answers(1) && !w.answers(2) })
	if !early && !ok {
		// Only an answer shows that what came before it has been read.
		c.skip("barrier/nothing-before-initialized", "D6", "§3.4", "the sidecar answered nothing after its initialize answer; answer the request sent before extension/initialized for this to be judged")
	} else {
		c.record("barrier/nothing-before-initialized", "D6", "§3.4", s.log.since(0), problemIf(early, "the sidecar sent a frame before extension/initialized other than its initialize answer"))
	}
	s.conn.Notify(c.ctx, MethodInitialized, InitializedParams{})

	// Hand-written frames and the answers they must get. The probes' ids
	// are clear of the Conn's own: 3 is the shutdown's. A frame's ID is
	// its id, which the answer must echo; a frame without one has an id
	// that cannot be read (or is not JSON), answered with id null.
	probes := []struct {
		name, rule, section, frame string
		code                       int    // the error code it must be answered with
		reason                     Reason // the reason in the error's data
	}{
		// First a well-formed one: its answer shows that whatever the
		// sidecar wrote before it (an answer to extension/initialized)
		// has been read, and is not taken for a later probe's.
		{"errors/unknown-method", "D7", "§8.1", `{"jsonrpc":"2.0","id":ID,"method":"extension/no-such-method","params":{}}`, codeMethodNotFound, ReasonUnknownMethod},
		{"envelope/string-id", "D4", "§2.3", `{"jsonrpc":"2.0","id":"7","method":"extension/provider/catalog","params":{}}`, codeInvalidRequest, ReasonProtocolError},
		{"envelope/fractional-id", "D4", "§2.3", `{"jsonrpc":"2.0","id":7.5,"method":"extension/provider/catalog","params":{}}`, codeInvalidRequest, ReasonProtocolError},
		{"envelope/wrong-jsonrpc", "D3", "§2.4", `{"jsonrpc":"1.0","id":ID,"method":"extension/provider/catalog","params":{}}`, codeInvalidRequest, ReasonProtocolError},
		{"envelope/missing-jsonrpc", "D3", "§2.4", `{"id":ID,"method":"extension/provider/catalog","params":{}}`, codeInvalidRequest, ReasonProtocolError},
		{"envelope/array-params", "D5", "§2.3", `{"jsonrpc":"2.0","id":ID,"method":"extension/provider/catalog","params":[]}`, codeInvalidRequest, ReasonProtocolError},
		{"envelope/scalar-params", "D5", "§2.3", `{"jsonrpc":"2.0","id":ID,"method":"extension/provider/catalog","params":"{}"}`, codeInvalidRequest, ReasonProtocolError},
		{"envelope/not-json", "D3", "§2.4", `{"jsonrpc":"2.0","id":7,"method":`, codeParseError, ReasonProtocolError},
		{"errors/notification-method-as-request", "D7", "§2.4", `{"jsonrpc":"2.0","id":ID,"method":"extension/initialized","params":{}}`, codeMethodNotFound, ReasonUnknownMethod},
		{"params/refused-strictly", "D3", "§2.2", `{"jsonrpc":"2.0","id":ID,"method":"extension/intercept","params":{"event":"input.receive","seq":0,"payload":{},"timeoutMillis":1000}}`, codeInvalidParams, ReasonInvalidParams},
		{"errors/unserved-method", "D7", "§2.6", `{"jsonrpc":"2.0","id":ID,"method":"extension/provider/catalog","params":{}}`, codeMethodNotFound, ReasonUnknownMethod},
	}
	if len(c.decl.Providers) > 0 {
		probes = probes[:len(probes)-1] // the last one needs a sidecar without providers
		c.skip("errors/unserved-method", "D7", "§2.6", "the sidecar serves every method class it could be asked (it declares providers)")
	}
	survived := true
	for i, pr := range probes {
		id := firstProbeID + msgID(i)
		from := s.log.mark()
		s.conn.sendRaw([]byte(strings.ReplaceAll(pr.frame, "ID", strconv.Itoa(int(id)))))
		answer, ok := s.log.wait(c.ctx, c.opts.Timeout, from, func(w seenFrame) bool {
			got, hasID := w.id()
			return w.in && w.kind() == kindResponse && (!hasID || got == id || got < firstProbeID || got > id) // not a late answer to an earlier probe
		})
		survived = survived && ok
		c.recordErrorAnswer(pr.name, pr.rule, pr.section, answer, s.log.since(from), ok, pr.code, pr.reason, id, strings.Contains(pr.frame, "ID"))
	}
	c.record("envelope/connection-survives", "D2", "§2.4", nil, problemIf(!survived, "a malformed frame went unanswered: the connection did not survive it"))

	// Events, resources/changed and an unknown notification get no answer.
	from := s.log.mark()
	for _, sub := range c.decl.Subscriptions {
		payload, _ := samplePayload(Point(sub), false)
		s.conn.Notify(c.ctx, MethodEvent, EventParams{Event: Point(sub), Payload: payload})
	}
	s.conn.Notify(c.ctx, MethodResourcesChanged, ResourcesChangedParams{Paths: []string{"skills/review.md"}})
	s.conn.Notify(c.ctx, "extension/no-such-notification", struct{}{})
	answer, _, ok = s.call(MethodShutdown, ShutdownParams{TimeoutMillis: c.opts.Timeout.Milliseconds()}) // id 3

	// D11: the shutdown is answered accepted, then stdin's end stops the
	// sidecar with status 0.
	var res ShutdownResult
	problem := c.answerProblem(answer, ok, MethodShutdown, &res)
	if problem == "" && !res.Accepted {
		problem = `the answer is not {"accepted":true}`
	}
	c.record("shutdown/answered", "D11", "§3.6", s.log.since(from), problem)
	killed, exitErr := s.stop(c.host.StdinGrace)
	problem = ""
	switch {
	case killed == killedChild:
		problem = fmt.Sprintf("the sidecar was still running %v after its stdin closed and was killed", c.host.StdinGrace)
	case exitErr != nil:
		problem = fmt.Sprintf("the sidecar %v; a clean stop exits with status 0", exitErr)
	}
	c.record("shutdown/exit-0", "D11", "§3.6", nil, problem)
	// Judged once the log has ended: an answer to a notification may come late.
	answered := slices.ContainsFunc(s.log.since(from), func(w seenFrame) bool { return w.in && w.kind() == kindResponse && !w.answers(3) })
	if !answered && !ok {
		c.skip("events/no-reply", "D20", "§2.6", "the sidecar answered nothing after the notifications, not even extension/shutdown, so whether it would answer one is not known")
		return
	}
	c.record("events/no-reply", "D20", "§2.6", s.log.since(from), problemIf(answered, "the sidecar answered a notification"))
}

// firstProbeID is the id of the first hand-written probe, the next ones
// following it: clear of the ids the session's Conn numbers itself.
const firstProbeID msgID = 101

// recordErrorAnswer records a scenario whose frame must be answered with an
// error of code and reason, carrying id when echo is set, and id null
// otherwise (a peer that cannot trust a faulty frame may answer it with
// id null in any case, PROTOCOL.md §2.4).
func (c *checker) recordErrorAnswer(name, rule, section string, answer seenFrame, frames []seenFrame, ok bool, code int, reason Reason, id msgID, echo bool) {
	e, isErr := answer.wireError()
	problem := ""
	switch {
	case !ok:
		problem = fmt.Sprintf("no answer within %v", c.opts.Timeout)
	case answer.fe != nil:
		problem = "the answer is not a valid JSON-RPC response: " + answer.fe.err.Message
	case !isErr:
		problem = fmt.Sprintf("answered with a result; want error %d with data reason %s", code, reason)
	case e.Code != code || e.Reason != reason && !(e.Reason == "" && e.Data == nil && (code == codeInvalidRequest || code == codeParseError)):
		// A -32600 or -32700 without data passes: data there is this
		// module's addition (PROTOCOL.md §11), which upstream peers omit.
		problem = fmt.Sprintf("answered error %d with data reason %q; want %d with %s (and data {\"reason\",\"retryable\"}, D7)", e.Code, e.Reason, code, reason)
	case !answer.nullID && !(echo && answer.m.id == id):
		want := "null"
		if echo {
			want = strconv.FormatInt(int64(id), 10)
		}
		problem = fmt.Sprintf("answered with id %d; want %s", answer.m.id, want)
	}
	c.record(name, rule, section, frames, problem)
}

// oversized is the second session: one line over the frame limit is
// fatal to the sidecar's connection, which exits non-zero (D2, §3.6).
func (c *checker) oversized() {
	const name, rule, section = "framing/oversized-frame-is-fatal", "D2", "§2.1"
	s, err := c.launch()
	if err != nil {
		c.record(name, rule, section, nil, "the sidecar did not start: "+err.Error())
		return
	}
	defer s.stop(0)
	if !c.handshake(s, false) {
		c.skip(name, rule, section, "the handshake failed")
		return
	}
	s.conn.Notify(c.ctx, MethodInitialized, InitializedParams{})
	const head, tail = `{"jsonrpc":"2.0","method":"extension/resources/changed","params":{"paths":["`, `"]}}`
	line := []byte(head + strings.Repeat("a", FrameBytes+1023-len(head)-len(tail)) + tail)
	from := s.log.mark()
	s.conn.sendRaw(line) // its writing fails once the sidecar stops reading
	problem := ""
	ctx, cancel := context.WithTimeout(c.ctx, 3*c.opts.Timeout)
	defer cancel()
	select {
	case <-s.proc.exited:
	case <-ctx.Done(): // the bound, or the check stopped
		if !waitClosed(s.proc.exited, 0) { // an exit at the bound still counts
			problem = fmt.Sprintf("the sidecar was still running %v after an inbound line of 8 MiB + 1 KiB", 3*c.opts.Timeout)
		}
	}
	if problem == "" && s.proc.waitErr == nil {
		problem = "the sidecar exited with status 0; a fatal connection failure exits non-zero (§3.6)"
	}
	c.record(name, rule, section, s.log.since(from), problem)
}

// samplePayloads holds a valid payload document of each point; a %s
// marks the free text member that a large payload fills with 100 KiB.
var samplePayloads = map[Point]string{
	AgentBeforeStart:      `{"model":"fake","toolCount":2,"sessionId":"check-session"}`,
	CompactionComplete:    `{"summary":"the user said hello%s"}`,
	CompactionPrepare:     `{"messages":[{"role":"user","content":"hello"}],"guidance":"keep the decisions"}`,
	ContextPrepare:        `{"messages":[{"role":"user","content":"hello"}]}`,
	FrontendEvent:         `{"kind":"key","text":"enter%s"}`,
	InputReceive:          `{"text":"hello from the conformance check%s"}`,
	PermissionDecision:    `{"name":"write","arguments":"{\"path\":\"notes.txt\"}","hostDecision":"allow"}`,
	ProviderRequestPoint:  `{"request":{"messages":[{"role":"user","content":"hello"}],"tools":[],"maxTokens":64}}`,
	ProviderResponsePoint: `{"text":"hello%s"}`,
	SessionEnd:            `{"sessionPath":"/workspace/session.jsonl","phase":"end"}`,
	SessionLoad:           `{"sessionPath":"/workspace/session.jsonl","phase":"load"}`,
	SessionRotate:         `{"sessionPath":"/workspace/session.jsonl","phase":"rotate"}`,
	SessionSave:           `{"sessionPath":"/workspace/session.jsonl","phase":"save"}`,
	SessionStart:          `{"sessionPath":"/workspace/session.jsonl","phase":"start"}`,
	SystemPromptBuild:     `{"prompt":"You are a coding agent.%s","workspaceRoot":"/workspace"}`,
	ToolAfter:             `{"name":"read","arguments":"{\"path\":\"README.md\"}","result":"# README%s"}`,
	ToolBefore:            `{"name":"read","arguments":"{\"path\":\"README.md\"}"}`,
}

// samplePayload returns the sample payload of p, with large a payload
// over ExternalizeFieldBytes; ok is false when p has no free text to make
// large.
func samplePayload(p Point, large bool) (doc json.RawMessage, ok bool) {
	text, ok := "", strings.Contains(samplePayloads[p], "%s")
	if large {
		text = strings.Repeat(" conformance", 100<<10/12)
	}
	return json.RawMessage(strings.Replace(samplePayloads[p], "%s", text, 1)), ok
}

// checkFrontend answers every prompt and remembers the first form it saw.
type checkFrontend struct {
	form atomic.Pointer[string] // the surface id of the first form published or asked
}

func (f *checkFrontend) Show(s Surface) {
	if s.Form != nil {
		f.form.CompareAndSwap(nil, &s.SurfaceID)
	}
}

// Ask answers a prompt as a user would: every field filled.
func (f *checkFrontend) Ask(ctx context.Context, p Prompt) (map[string]json.RawMessage, bool, error) {
	f.Show(Surface{SurfaceID: p.SurfaceID, Form: &p.Form})
	values := map[string]json.RawMessage{}
	for _, field := range p.Form.Fields {
		values[field.Key], _ = json.Marshal(slices.Concat(field.Options, []string{"Ada"})[0]) // the first option, or a name
		switch field.Kind {
		case PromptConfirm:
			values[field.Key] = json.RawMessage("true")
		case PromptMultiselect:
			values[field.Key] = json.RawMessage("[" + string(values[field.Key]) + "]")
		}
	}
	if len(p.Form.Fields) == 0 {
		values["value"] = json.RawMessage(`"Ada"`)
	}
	return values, false, nil
}

// hosted runs the scenarios of a real generation: every subscribed
// point, content refs, provider catalogs and streams, UI, the ids of the
// sidecar's own requests and the host's shutdown.
func (c *checker) hosted() {
	log := c.newLog()
	fe := &checkFrontend{}
	h := c.host
	h.Frontend, h.Conn.Tap = fe, log.add
	rt, err := h.Start(c.ctx)
	if err == nil && rt.byID[c.report.Plugin] == nil {
		err = fmt.Errorf("plugin %s did not start", c.report.Plugin)
		for _, w := range rt.Warnings() {
			err = w.Err // the optional plugin's start error
		}
		rt.Close()
	}
	if err != nil {
		c.record("host/start", startRule(err), "§3.5", log.since(0), err.Error())
		return
	}
	s := rt.byID[c.report.Plugin]
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	if slices.Contains(s.result.Subscriptions, string(SessionStart)) {
		payload, _ := samplePayload(SessionStart, false)
		rt.Observe(SessionStart, payload) // a sidecar may publish its UI now
	}
	for _, sub := range s.result.Subscriptions {
		payload, _ := samplePayload(Point(sub), false)
		c.intercept(ctx, rt, s, log, Point(sub), payload, "intercept/"+sub)
	}
	c.content(ctx, rt, s, log)
	c.providers(ctx, rt, s, log)
	c.ui(ctx, rt, s, log, fe)
	c.ids(log)
	c.framing(log)
	c.try(ctx, log, "shutdown/through-the-host", "D11", "§3.6", func(context.Context) error { return rt.Close() })
}

// startRule names the ruling a failed start broke.
func startRule(err error) string {
	switch {
	case errors.Is(err, errPreBarrier):
		return "D6"
	case errors.Is(err, ReasonCapabilityNotDeclared):
		return "D9"
	case errors.Is(err, ReasonProtocolError):
		return "D3"
	}
	return "D10"
}

// intercept asks the sidecar one intercept as the owner of the point
// would be asked, so that every failure is reported rather than skipped
// (D19), and judges the verdict (D16). It returns the frames of the exchange.
func (c *checker) intercept(ctx context.Context, rt *Runtime, s *sidecar, log *frameLog, p Point, payload json.RawMessage, name string) []seenFrame {
	from := log.mark()
	host := ""
	if p == PermissionDecision {
		host = "allow" // the sample's hostDecision
	}
	_, err := rt.rule(ctx, s, p, &InterceptOutcome{Payload: payload}, host, true)
	frames := log.since(from)
	rule, problem := "D16", ""
	switch {
	case err == nil || errors.Is(err, errSlotOwnerBlocked):
	case errors.Is(err, ReasonInterceptTimeout):
		rule, problem = "D18", err.Error()
	case failsStrictly(frames, MethodIntercept, &InterceptResult{}):
		rule, problem = "D3", err.Error() // the verdict itself does not decode strictly
	case errors.Is(err, errExternalized):
		rule, problem = "D22", err.Error() // its replacement by reference did not read back
	default:
		problem = err.Error()
	}
	c.record(name, rule, "§4.4", frames, problem)
	return frames
}

// failsStrictly reports whether an answer of the sidecar among frames, to
// a request for method, has a result that does not decode strictly into
// v (D3).
func failsStrictly(frames []seenFrame, method string, v any) bool {
	return slices.ContainsFunc(frames, func(w seenFrame) bool {
		return w.in && w.kind() == kindResponse && w.fe == nil && w.m.result != nil && Decode(method, w.m.result, v) != nil
	})
}

// content sends a payload over 64 KiB, which travels by reference (D22),
// at the first subscribed point with a free text member.
func (c *checker) content(ctx context.Context, rt *Runtime, s *sidecar, log *frameLog) {
	const name, rule, section = "content/large-payload-read-back", "D22", "§6.3"
	for _, sub := range s.result.Subscriptions {
		payload, ok := samplePayload(Point(sub), true)
		if !ok {
			continue
		}
		frames := c.intercept(ctx, rt, s, log, Point(sub), payload, "content/verdict-on-a-large-payload")
		reads, problem := sidecarRequests(frames, func(_ seenFrame, e *Error) string {
			return fmt.Sprintf("a read was refused: %s: %s", e.Reason, e.Message)
		}, MethodContentRead)
		if len(reads) == 0 {
			c.skip(name, rule, section, "the sidecar answered without reading the externalized payload")
		} else {
			c.record(name, rule, section, frames, problem)
		}
		return
	}
	c.skip(name, rule, section, "no subscribed point has a free text member to make large")
}

// providers checks the catalog and, for the first declared provider, a
// stream and a cancel (D21).
func (c *checker) providers(ctx context.Context, rt *Runtime, s *sidecar, log *frameLog) {
	if len(s.result.Providers) == 0 {
		for _, n := range []string{"provider/catalog", "provider/stream", "provider/cancel"} {
			c.skip(n, "D21", "§5", "the sidecar declares no provider")
		}
		return
	}
	frames, err := c.attempt(ctx, log, func(ctx context.Context) error {
		var res ProviderCatalogResult
		err := s.call(ctx, MethodProviderCatalog, ProviderCatalogParams{}, &res)
		for _, d := range res.Providers {
			if !slices.ContainsFunc(s.result.Providers, func(p ProviderDescriptor) bool { return p.Ref == d.Ref }) {
				err = fmt.Errorf("the catalog lists %q, which the handshake did not declare", d.Ref)
			}
		}
		return err
	})
	catalogRule := "D21"
	if failsStrictly(frames, MethodProviderCatalog, &ProviderCatalogResult{}) {
		catalogRule = "D3"
	}
	c.record("provider/catalog", catalogRule, "§5.1", frames, errText(err))

	ref := s.result.Providers[0].Ref
	req := ProviderRequest{Messages: []ProviderMessage{{Role: RoleUser, Content: "hello"}}, Tools: []ProviderToolSchema{}, MaxTokens: 64}
	var st *Stream
	frames, err = c.attempt(ctx, log, func(ctx context.Context) (err error) {
		if st, err = rt.OpenStream(ctx, ref, "", req); err != nil {
			return err
		}
		for err == nil {
			_, err = st.Recv()
		}
		if errors.Is(err, io.EOF) || errors.Is(err, ReasonProviderFailed) {
			roundTrip(ctx, s)
			return nil // an end the sidecar chose; streamProblem judges it
		}
		return err
	})
	if errors.Is(err, ReasonProviderFailed) {
		// §5.2: a sidecar may decline a stream; then none is there to judge.
		c.skip("provider/stream", "D21", "§5.4", "the sidecar declined the stream: "+err.Error())
		c.skip("provider/cancel", "D21", "§5.5", "the sidecar declined the stream")
		return
	}
	problem := errText(err)
	if st != nil {
		problem = cmp.Or(streamProblem(frames, st.ID()), problem)
	}
	c.record("provider/stream", "D21", "§5.4", frames, problem)

	cctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	from := log.mark()
	st, err = rt.OpenStream(cctx, ref, "", req)
	if err != nil {
		c.record("provider/cancel", "D21", "§5.5", log.since(from), err.Error())
		return
	}
	_, err = st.Recv()
	st.Close()
	if err != nil {
		c.skip("provider/cancel", "D21", "§5.5", "the stream ended before its first chunk could be cancelled")
		return
	}
	id, _ := json.Marshal(st.ID())
	isEnd := func(w seenFrame) bool {
		return w.in && w.fe == nil && w.m.method == MethodStreamEnd && bytes.Contains(w.m.params, id)
	}
	_, ended := log.wait(ctx, c.opts.Timeout, from, isEnd)
	if ended {
		roundTrip(ctx, s)
	}
	frames = log.since(from)
	cancelAt := slices.IndexFunc(frames, func(w seenFrame) bool { return !w.in && w.request(MethodStreamCancel) })
	endAt := slices.IndexFunc(frames, isEnd)
	late := false // the cancel found the stream already over: {"cancelled":false}
	if cancelAt >= 0 {
		answer, ok := log.wait(ctx, c.opts.Timeout, from, func(w seenFrame) bool { return w.in && w.answers(frames[cancelAt].m.id) })
		var res StreamCancelResult
		late = ok && Decode(MethodStreamCancel, answer.m.result, &res) == nil && !res.Cancelled
	}
	problem = ""
	var end StreamEndParams
	switch {
	case !ended:
		problem = fmt.Sprintf("no stream/end within %v of the cancel", c.opts.Timeout)
	case cancelAt < 0 || endAt < cancelAt || late:
		c.skip("provider/cancel", "D21", "§5.5", "the stream ended before the cancel reached it")
		return
	case Decode(MethodStreamEnd, frames[endAt].m.params, &end) != nil || !end.Interrupted:
		problem = `the end after a cancel must say "interrupted":true`
	default:
		problem = streamProblem(frames, st.ID())
	}
	c.record("provider/cancel", "D21", "§5.5", frames, problem)
}

// roundTrip asks the sidecar for its catalog once more. Once it has
// answered, everything it wrote before the answer (a chunk after a
// stream's end) has been read and logged: a stream is judged whole, not
// as far as it had come when its end arrived (D21).
func roundTrip(ctx context.Context, s *sidecar) {
	s.call(ctx, MethodProviderCatalog, ProviderCatalogParams{}, &ProviderCatalogResult{})
}

// streamProblem checks the chunk and end frames of stream id: seqs from 1
// with no gap or repeat, one end whose lastSeq is the last chunk, nothing
// after it, every frame strictly decodable.
func streamProblem(frames []seenFrame, id string) string {
	quoted, _ := json.Marshal(id)
	next, ends := int64(1), 0
	for _, w := range frames {
		if !w.in || w.fe != nil || !bytes.Contains(w.m.params, quoted) {
			continue
		}
		switch w.m.method {
		case MethodStreamChunk:
			var ch StreamChunkParams
			switch err := Decode(w.m.method, w.m.params, &ch); {
			case err != nil:
				return "a chunk does not decode strictly: " + err.Error()
			case ends > 0:
				return fmt.Sprintf("chunk %d came after the stream's end", ch.Seq)
			case ch.Seq != next:
				return fmt.Sprintf("chunk seq %d where %d was next: seqs start at seqBase 1 and have no gap or repeat", ch.Seq, next)
			}
			next++
		case MethodStreamEnd:
			var end StreamEndParams
			ends++
			switch err := Decode(w.m.method, w.m.params, &end); {
			case err != nil:
				return "the end does not decode strictly: " + err.Error()
			case ends > 1:
				return "the stream has two ends"
			case end.LastSeq != next-1:
				return fmt.Sprintf("the end says lastSeq %d after %d chunks", end.LastSeq, next-1)
			}
		}
	}
	if ends == 0 {
		return "the stream has no end"
	}
	return ""
}

// ui invokes every declared action, submits the first form it saw, and judges
// every publish and request the sidecar made (D23, D24).
func (c *checker) ui(ctx context.Context, rt *Runtime, s *sidecar, log *frameLog, fe *checkFrontend) {
	for _, a := range s.result.UIActions {
		c.try(ctx, log, "ui/action/"+a.ActionID, "D24", "§7.4", func(ctx context.Context) error {
			_, err := rt.Action(ctx, "check-session", "/"+c.report.Plugin+":"+a.ActionID, nil)
			return err
		})
	}
	if form := fe.form.Load(); form == nil {
		c.skip("ui/submit", "D24", "§7.4", "the sidecar published and asked no form")
	} else {
		frames, err := c.attempt(ctx, log, func(ctx context.Context) error {
			_, err := rt.Submit(ctx, "check-session", c.report.Plugin, *form, map[string]json.RawMessage{"value": json.RawMessage(`"Ada"`)})
			return err
		})
		if errors.Is(err, ReasonUnknownMethod) {
			c.skip("ui/submit", "D24", "§7.4", "the sidecar takes no submits (it answered unknown_method)")
		} else {
			c.record("ui/submit", "D24", "§7.4", frames, errText(err))
		}
	}
	seen, problem := sidecarRequests(log.since(0), func(w seenFrame, e *Error) string {
		return fmt.Sprintf("the host refused a %s: %s: %s", w.m.method, e.Reason, e.Message)
	}, MethodUIPublish, MethodUIRequest)
	if len(seen) == 0 {
		c.skip("ui/structured-only", "D23", "§7.5", "the sidecar published nothing and asked nothing")
		c.skip("ui/current-generation", "D24", "§7.1", "the sidecar published nothing and asked nothing")
		return
	}
	c.record("ui/structured-only", "D23", "§7.5", seen, problem)
	bound, stale := rt.cfg.Session, ""
	for _, w := range seen {
		var p UIPublishParams
		var q UIRequestParams
		switch {
		case w.in && w.m.method == MethodUIPublish && Decode(w.m.method, w.m.params, &p) == nil:
			q.SessionID, q.Generation = p.SessionID, p.Generation
		case !w.in || w.m.method != MethodUIRequest || Decode(w.m.method, w.m.params, &q) != nil:
			continue // an answer, or a request refused as it is: ui/structured-only judges it
		}
		if q.SessionID != bound.SessionID || q.Generation != bound.Generation {
			stale = fmt.Sprintf("a %s names session %q, generation %d; the host gave session %q, generation %d in extension/initialize, and never shows what another one publishes or asks", w.m.method, c.safe(q.SessionID), q.Generation, bound.SessionID, bound.Generation)
		}
	}
	c.record("ui/current-generation", "D24", "§7.1", seen, stale)
}

// ids judges the ids of what the sidecar sent in the generation: its own
// requests have integer ids, and its answers the ids of the host's
// requests (D4).
func (c *checker) ids(log *frameLog) {
	var mine []seenFrame
	sent, answered, used := map[msgID]bool{}, map[msgID]bool{}, map[msgID]bool{}
	badRequest, badAnswer := "", ""
	lowest := msgID(math.MaxInt64)
	for _, w := range log.since(0) { // the tap logs a request before any answer to it
		id, ok := w.id()
		switch {
		case !w.in:
			sent[id] = sent[id] || w.request("")
		case w.kind() == kindRequest:
			mine = append(mine, w)
			switch {
			case badRequest != "":
			case !ok:
				badRequest = "a request's id is not an integer that fits in int64; ids are integers numbered from 1"
			case w.fe == nil && w.m.id < 1:
				badRequest = fmt.Sprintf("a %s request has id %d; ids are integers numbered from 1", w.m.method, w.m.id)
			case used[id]:
				badRequest = fmt.Sprintf("two requests have id %d; each side numbers its own requests from 1, adding 1 per request", id)
			}
			used[id], lowest = true, min(lowest, id)
		case w.kind() == kindResponse:
			switch {
			case badAnswer != "":
			case !ok:
				badAnswer = "an answer has id that is not an integer, which is no request the host sent"
			case !sent[id]:
				badAnswer = fmt.Sprintf("an answer has id %d, which is no request the host sent", id)
			case answered[id]:
				badAnswer = fmt.Sprintf("request %d was answered twice", id)
			}
			answered[id] = true
		}
	}
	if badRequest == "" && len(used) > 0 && lowest != 1 {
		// Written in any order, ids used up by requests that failed before
		// they were written excepted, the lowest is the first one.
		badRequest = fmt.Sprintf("the lowest id of the sidecar's %d requests is %d; each side numbers its own requests from 1, adding 1 per request", len(used), lowest)
	}
	if c.requests.Load() == 0 {
		c.skip("ids/own-requests-are-integers", "D4", "§2.3", "the sidecar sent no request of its own")
	} else {
		c.record("ids/own-requests-are-integers", "D4", "§2.3", mine, badRequest)
	}
	if badAnswer == "" && len(answered) <= 1 {
		c.skip("ids/answers-match-requests", "D4", "§2.3", "the sidecar answered no request after its initialize answer")
		return
	}
	c.record("ids/answers-match-requests", "D4", "§2.3", nil, badAnswer)
}

// framing judges every line the sidecar wrote in the generation: each is
// one JSON object (D2). A debug print on stdout is a line the host cannot
// read, which it answers -32700 and otherwise ignores.
func (c *checker) framing(log *frameLog) {
	written := 0
	for _, w := range log.since(0) {
		switch {
		case w.in && w.fe != nil && w.fe.kind == 0:
			c.record("framing/every-line-a-frame", "D2", "§2.1", []seenFrame{w}, "the sidecar wrote a line that is not one JSON object ("+w.fe.err.Message+"): stdout carries protocol frames only; write logs to stderr")
			return
		case w.in:
			written++
		}
	}
	if written <= 1 {
		c.skip("framing/every-line-a-frame", "D2", "§2.1", "the sidecar wrote nothing after its initialize answer")
		return
	}
	c.record("framing/every-line-a-frame", "D2", "§2.1", nil, "")
}

// sidecarRequests returns the sidecar's requests for methods among
// frames, each followed by the host's error answer when the host refused
// it, and the last refusal as say tells it ("" for none).
func sidecarRequests(frames []seenFrame, say func(request seenFrame, e *Error) string, methods ...string) (seen []seenFrame, problem string) {
	refused := map[msgID]seenFrame{}
	for _, a := range frames {
		if _, isErr := a.wireError(); !a.in && isErr && !a.nullID {
			refused[a.m.id] = a
		}
	}
	for _, w := range frames {
		if !w.in || !slices.ContainsFunc(methods, w.request) {
			continue
		}
		seen = append(seen, w)
		if a, ok := refused[w.m.id]; ok {
			seen = append(seen, a)
			problem = say(w, a.m.err)
		}
	}
	return seen, problem
}

// attempt runs op bounded by Timeout and returns the frames logged
// meanwhile and op's error.
func (c *checker) attempt(ctx context.Context, log *frameLog, op func(context.Context) error) ([]seenFrame, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	from := log.mark()
	err := op(ctx)
	return log.since(from), err
}

// try records a scenario that passes when op, run by attempt, succeeds.
func (c *checker) try(ctx context.Context, log *frameLog, name, rule, section string, op func(context.Context) error) {
	frames, err := c.attempt(ctx, log, op)
	c.record(name, rule, section, frames, errText(err))
}

// problemIf is problem when bad holds, else "" (a pass).
func problemIf(bad bool, problem string) string {
	if bad {
		return problem
	}
	return ""
}

// errText is err's text, or "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
