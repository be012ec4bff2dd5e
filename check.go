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
// checks (D1 to D28 of PROTOCOL.md); Detail names the section and shows
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
// is left running.
func Check(ctx context.Context, pluginDir string, opts CheckOptions) (*CheckReport, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	work, err := os.MkdirTemp("", "reasonix-check-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	// One configuration for the raw sessions and the generation: the
	// host's defaults (D10, D11, D13), every wait for an answer bounded by
	// Timeout.
	c := &checker{ctx: ctx, opts: opts, work: work, home: filepath.Join(work, "home")}
	c.host = *Host{Home: c.home, Env: opts.Env, ShutdownTimeout: opts.Timeout, InitializeTimeout: opts.Timeout,
		FastInterceptTimeout: opts.Timeout, InterceptTimeout: opts.Timeout,
		Session: SessionContext{SessionID: "check-session", WorkspaceRoot: work, Generation: 1}}.withDefaults()
	if c.setUp(pluginDir) {
		c.protocol()
		c.oversized()
		c.hosted()
	}
	var errs []error
	for _, r := range c.report.Results {
		switch {
		case r.Skipped:
			c.report.Skipped++
		case r.OK:
			c.report.Passed++
		default:
			c.report.Failed++
			first, _, _ := strings.Cut(r.Detail, "\n")
			errs = append(errs, fmt.Errorf("%s (%s): %s", r.Name, r.Rule, first))
		}
	}
	return &c.report, errors.Join(errs...)
}

// checker is one run of Check.
type checker struct {
	ctx        context.Context
	opts       CheckOptions
	host       Host // the configuration, its defaults filled in
	work, home string
	spec       *launchSpec
	decl       InitializeResult // the declaration of the first raw session
	requests   atomic.Int64     // requests the sidecar sent, in every session
	report     CheckReport
}

// setUp installs the plugin and runs the launch gate; it reports whether
// a sidecar can be started.
func (c *checker) setUp(dir string) bool {
	entry, err := Install(c.home, dir, InstallOptions{Name: c.opts.Name, Link: true})
	if err == nil {
		c.report.Plugin = entry.Name
		c.spec, err = launchGate(c.home, entry, c.work)
	}
	if err != nil {
		c.report.Plugin = cmp.Or(c.opts.Name, filepath.Base(dir))
		c.judge("install/launch-gate", "D8", "§3.1", nil, err.Error())
		return false
	}
	c.judge("install/launch-gate", "D8", "§3.1", nil, "")
	return true
}

// judge records a scenario: problem "" passes it.
func (c *checker) judge(name, rule, section string, frames []seenFrame, problem string) {
	r := CheckResult{Name: name, Rule: rule, OK: problem == ""}
	r.Detail = "PROTOCOL.md " + section
	if problem != "" {
		r.Detail += ": " + TerminalSafe(problem) // D27: it may quote the sidecar
	}
	r.Detail += showFrames(frames)
	c.report.Results = append(c.report.Results, r)
}

// skip records a scenario the sidecar gave no occasion to check.
func (c *checker) skip(name, rule, section, why string) {
	c.report.Results = append(c.report.Results, CheckResult{Name: name, Rule: rule, Skipped: true, Detail: "PROTOCOL.md " + section + ": skipped: " + why})
}

// showFrames renders the last frames of a scenario, one per line,
// escaped (D27) and cut at 400 bytes.
func showFrames(frames []seenFrame) string {
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
		text := f.raw
		if len(text) > width {
			text = text[:width] + fmt.Sprintf("… (%d bytes)", f.size)
		}
		b.WriteString("\n  " + arrow + " " + TerminalSafe(text))
	}
	return b.String()
}

// seenFrame is one frame the checker saw, parsed leniently so that a
// faulty one can still be described; in is true for the sidecar's.
type seenFrame struct {
	in     bool
	raw    string // the frame, or its first frameKeep bytes
	size   int    // the frame's length
	f      looseFrame
	json   bool   // the frame is one JSON object
	envErr string // why the frame is not a valid envelope (PROTOCOL.md §2.4), or ""
}

// frameKeep bounds what a log keeps of one frame, and logFrames how many
// frames it keeps: a hostile sidecar cannot fill the checker's memory.
const (
	frameKeep = 1 << 20
	logFrames = 20000
)

type looseFrame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func (w seenFrame) response() bool {
	return w.json && w.f.Method == "" && (w.f.Result != nil || w.f.Error != nil)
}

// answers reports whether w is a response with id (a JSON literal).
func (w seenFrame) answers(id string) bool { return w.response() && string(w.f.ID) == id }

// request reports whether w is a request for method ("" for any).
func (w seenFrame) request(method string) bool {
	return w.json && w.f.ID != nil && w.f.Method != "" && (method == "" || w.f.Method == method)
}

// wireError decodes the error of a response; ok is false for a result.
func (w seenFrame) wireError() (e *Error, ok bool) {
	if w.f.Error == nil {
		return nil, false
	}
	e, valid := decodeWireError(w.f.Error)
	if !valid {
		e = &Error{Code: -1, Message: "malformed error member"}
	}
	return e, true
}

// frameLog is every frame of one session, in the order read or written.
type frameLog struct {
	mu     sync.Mutex
	frames []seenFrame
	grew   chan struct{} // closed and replaced when a frame is added
	ended  bool
}

func newFrameLog() *frameLog { return &frameLog{grew: make(chan struct{})} }

// add records a frame; line is copied.
func (l *frameLog) add(in bool, line []byte) {
	w := seenFrame{in: in, size: len(line)}
	w.raw = string(line[:min(len(line), frameKeep)])
	w.json = json.Unmarshal(line, &w.f) == nil && bytes.HasPrefix(bytes.TrimSpace(line), []byte("{"))
	_, fe := decodeMessage(line)
	if fe != nil && string(w.f.ID) == "null" {
		// An answer to a frame whose id could not be read carries id null
		// (PROTOCOL.md §2.4): the rest of it must still be a response.
		_, fe = decodeMessage(bytes.Replace(line, []byte(`"id":null`), []byte(`"id":0`), 1))
	}
	if fe != nil {
		w.envErr = fe.err.Message
	}
	if len(line) > frameKeep {
		w.f.Params, w.f.Result = nil, nil // too large to keep; never needed whole
	}
	l.mu.Lock()
	if len(l.frames) >= logFrames {
		l.mu.Unlock()
		return
	}
	l.frames = append(l.frames, w)
	close(l.grew)
	l.grew = make(chan struct{})
	l.mu.Unlock()
}

// end marks the log complete: nothing more will be read.
func (l *frameLog) end() {
	l.mu.Lock()
	l.ended = true
	close(l.grew)
	l.grew = make(chan struct{})
	l.mu.Unlock()
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
// waiting for it until d passes or the log ends.
func (l *frameLog) wait(ctx context.Context, d time.Duration, from int, match func(seenFrame) bool) (seenFrame, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		l.mu.Lock()
		for ; from < len(l.frames); from++ {
			if match(l.frames[from]) {
				w := l.frames[from]
				l.mu.Unlock()
				return w, true
			}
		}
		grew, ended := l.grew, l.ended
		l.mu.Unlock()
		if ended {
			return seenFrame{}, false
		}
		select {
		case <-grew:
		case <-t.C:
			return seenFrame{}, false
		case <-ctx.Done():
			return seenFrame{}, false
		}
	}
}

// rawPeer is the checker speaking hand-written frames to a sidecar it
// started itself through the launch gate's spec.
type rawPeer struct {
	c      *checker
	proc   *process
	log    *frameLog
	wmu    sync.Mutex
	read   chan struct{} // closed when the reader ends
	lastID int64
}

// launch starts a sidecar for a raw session.
func (c *checker) launch() (*rawPeer, error) {
	proc, _, err := startProcess(c.spec, c.spec.env(c.host.Env), &tail{})
	if err != nil {
		return nil, err
	}
	p := &rawPeer{c: c, proc: proc, log: newFrameLog(), read: make(chan struct{})}
	go p.reader()
	return p, nil
}

// reader logs every frame; a request of the sidecar is answered
// unknown_method, since the raw sessions serve nothing.
func (p *rawPeer) reader() {
	defer close(p.read)
	defer p.log.end()
	fr := newFrameReader(p.proc.stdout)
	for {
		line, err := fr.readFrame()
		if err != nil {
			return
		}
		p.log.add(true, line)
		if m, fe := decodeMessage(line); fe == nil && m.kind == kindRequest {
			p.c.requests.Add(1)
			p.write(encodeError(&m.id, Errorf(ReasonUnknownMethod, "the conformance checker's raw session serves no %s", m.method)))
		}
	}
}

// write sends one frame (with or without its "\n") within the timeout.
func (p *rawPeer) write(frame []byte) error {
	frame = bytes.TrimSuffix(frame, []byte("\n"))
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.log.add(false, frame)
	p.proc.stdin.SetWriteDeadline(time.Now().Add(p.c.opts.Timeout))
	_, err := p.proc.stdin.Write(append(frame, '\n'))
	return err
}

// send writes a request with the next id and returns its id as JSON.
func (p *rawPeer) send(method string, params any) string {
	p.lastID++
	p.write(mustFrame((*msgID)(&p.lastID), method, params))
	return strconv.FormatInt(p.lastID, 10)
}

// call sends a request and waits for its answer.
func (p *rawPeer) call(method string, params any) (answer seenFrame, frames []seenFrame, ok bool) {
	from := p.log.mark()
	id := p.send(method, params)
	answer, ok = p.log.wait(p.c.ctx, p.c.opts.Timeout, from, func(w seenFrame) bool { return w.in && w.answers(id) })
	return answer, p.log.since(from), ok
}

// stop ends the session as D11 prescribes: stdin closed, grace to exit,
// then the group is killed. It reports what had to be killed and the
// exit error.
func (p *rawPeer) stop(grace time.Duration) (killedWhat, error) {
	killed, _ := p.proc.stop(grace, p.c.host.ReapTimeout, p.c.host.ExitDrain)
	<-p.read
	return killed, p.proc.waitErr
}

// handshake runs extension/initialize on a raw session; with judge set it
// records the handshake scenarios. It reports whether the sidecar
// answered a valid declaration.
func (c *checker) handshake(p *rawPeer, judge bool) bool {
	answer, frames, ok := p.call(MethodInitialize, c.host.initializeParams(c.spec.Runtime))
	var res InitializeResult
	answered, problem := c.answerProblem(answer, ok, MethodInitialize, &res), ""
	if strings.HasPrefix(answered, strictProblem) {
		answered, problem = "", answered
	}
	if !judge {
		return answered == "" && problem == ""
	}
	c.judge("handshake/answered", "D10", "§3.5", frames, answered)
	if answered != "" {
		return false
	}
	c.judge("handshake/strict-result", "D3", "§3.3", frames, problem)
	if problem != "" {
		return false
	}
	c.decl = res
	problem = ""
	if err := checkDeclaration(c.report.Plugin, c.spec.Runtime, &res); err != nil {
		problem = err.Error()
	}
	c.judge("handshake/declaration", "D9", "§3.3", frames, problem)
	return problem == ""
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
	case answer.envErr != "":
		return "the answer is not a valid JSON-RPC response: " + answer.envErr
	case isErr:
		return fmt.Sprintf("%s was refused: %d %s", method, e.Code, e.Message)
	}
	if err := DecodeResult(method, answer.f.Result, result); err != nil {
		return strictProblem + err.Error()
	}
	return ""
}

// probe is one hand-written frame and the answer it must get.
type probe struct {
	name, rule, section string
	frame               string
	code                int    // the error code it must be answered with
	reason              Reason // the reason in the error's data
	echo                bool   // the answer carries the frame's id (else null)
}

// protocol is the first raw session: the handshake, the barrier from the
// sidecar's side, strict envelopes, error data, notifications and a
// bounded shutdown.
func (c *checker) protocol() {
	p, err := c.launch()
	if err != nil {
		c.judge("handshake/answered", "D10", "§3.5", nil, "the sidecar did not start: "+err.Error())
		return
	}
	defer p.stop(0)
	if !c.handshake(p, true) {
		return
	}
	point := InputReceive
	if len(c.decl.Subscriptions) > 0 {
		point = Point(c.decl.Subscriptions[0])
	}
	payload, _ := json.Marshal(samplePayload(point, c.work))
	early := InterceptParams{Event: point, Seq: 1, Payload: payload, TimeoutMillis: 1000}
	answer, frames, ok := p.call(MethodIntercept, early)
	c.judgeErrorID("barrier/request-before-initialized", "D6", "§3.4", answer, frames, ok, codeInvalidRequest, ReasonProtocolError, "2")
	problem := ""
	for _, w := range p.log.since(0) {
		if w.in && !w.answers("1") && !w.answers("2") {
			problem = "the sidecar sent a frame before extension/initialized other than its initialize answer"
			break
		}
	}
	c.judge("barrier/nothing-before-initialized", "D6", "§3.4", p.log.since(0), problem)
	p.write(mustFrame(nil, MethodInitialized, InitializedParams{}))

	p.lastID = 100 // the probes' ids: clear of the handshake's
	probes := []probe{
		{"envelope/string-id", "D4", "§2.3", `{"jsonrpc":"2.0","id":"7","method":"extension/provider/catalog","params":{}}`, codeInvalidRequest, ReasonProtocolError, false},
		{"envelope/fractional-id", "D4", "§2.3", `{"jsonrpc":"2.0","id":7.5,"method":"extension/provider/catalog","params":{}}`, codeInvalidRequest, ReasonProtocolError, false},
		{"envelope/wrong-jsonrpc", "D3", "§2.4", `{"jsonrpc":"1.0","id":%d,"method":"extension/provider/catalog","params":{}}`, codeInvalidRequest, ReasonProtocolError, true},
		{"envelope/missing-jsonrpc", "D3", "§2.4", `{"id":%d,"method":"extension/provider/catalog","params":{}}`, codeInvalidRequest, ReasonProtocolError, true},
		{"envelope/array-params", "D5", "§2.3", `{"jsonrpc":"2.0","id":%d,"method":"extension/provider/catalog","params":[]}`, codeInvalidRequest, ReasonProtocolError, true},
		{"envelope/scalar-params", "D5", "§2.3", `{"jsonrpc":"2.0","id":%d,"method":"extension/provider/catalog","params":"{}"}`, codeInvalidRequest, ReasonProtocolError, true},
		{"envelope/not-json", "D3", "§2.4", `{"jsonrpc":"2.0","id":%d,"method":`, codeParseError, ReasonProtocolError, false},
		{"errors/unknown-method", "D7", "§8.1", `{"jsonrpc":"2.0","id":%d,"method":"extension/no-such-method","params":{}}`, codeMethodNotFound, ReasonUnknownMethod, true},
		{"errors/notification-method-as-request", "D7", "§2.4", `{"jsonrpc":"2.0","id":%d,"method":"extension/initialized","params":{}}`, codeMethodNotFound, ReasonUnknownMethod, true},
		{"params/refused-strictly", "D3", "§2.2", `{"jsonrpc":"2.0","id":%d,"method":"extension/intercept","params":{"event":"input.receive","seq":0,"payload":{},"timeoutMillis":1000}}`, codeInvalidParams, ReasonInvalidParams, true},
	}
	if len(c.decl.Providers) == 0 {
		probes = append(probes, probe{"errors/unserved-method", "D7", "§2.6", `{"jsonrpc":"2.0","id":%d,"method":"extension/provider/catalog","params":{}}`, codeMethodNotFound, ReasonUnknownMethod, true})
	} else {
		c.skip("errors/unserved-method", "D7", "§2.6", "the sidecar serves every method class it could be asked (it declares providers)")
	}
	survived := true
	for _, pr := range probes {
		from := p.log.mark()
		p.lastID++
		id := strconv.FormatInt(p.lastID, 10)
		frame := pr.frame
		if strings.Contains(frame, "%d") {
			frame = fmt.Sprintf(frame, p.lastID)
		}
		p.write([]byte(frame))
		want := "null"
		if pr.echo {
			want = id
		}
		answer, ok := p.log.wait(c.ctx, c.opts.Timeout, from, func(w seenFrame) bool { return w.in && w.response() })
		survived = survived && ok
		c.judgeErrorID(pr.name, pr.rule, pr.section, answer, p.log.since(from), ok, pr.code, pr.reason, want)
	}
	problem = ""
	if !survived {
		problem = "a malformed frame went unanswered: the connection did not survive it"
	}
	c.judge("envelope/connection-survives", "D2", "§2.4", nil, problem)

	// Events, resources/changed and an unknown notification get no answer.
	from := p.log.mark()
	for _, s := range c.decl.Subscriptions {
		payload, _ := json.Marshal(samplePayload(Point(s), c.work))
		p.write(mustFrame(nil, MethodEvent, EventParams{Event: Point(s), Payload: payload}))
	}
	p.write(mustFrame(nil, MethodResourcesChanged, ResourcesChangedParams{Paths: []string{"skills/review.md"}}))
	p.write([]byte(`{"jsonrpc":"2.0","method":"extension/no-such-notification","params":{}}`))
	answer, _, ok = p.call(MethodShutdown, ShutdownParams{TimeoutMillis: c.opts.Timeout.Milliseconds()})
	shutdownID := strconv.FormatInt(p.lastID, 10)

	// D11: the shutdown is answered accepted, then stdin's end stops the
	// sidecar with status 0.
	var res ShutdownResult
	if problem = c.answerProblem(answer, ok, MethodShutdown, &res); problem == "" && !res.Accepted {
		problem = `the answer is not {"accepted":true}`
	}
	c.judge("shutdown/answered", "D11", "§3.6", p.log.since(from), problem)
	killed, exitErr := p.stop(c.host.StdinGrace)
	problem = ""
	switch {
	case killed == killedChild:
		problem = fmt.Sprintf("the sidecar was still running %v after its stdin closed and was killed", c.host.StdinGrace)
	case exitErr != nil:
		problem = fmt.Sprintf("the sidecar %v; a clean stop exits with status 0", exitErr)
	}
	c.judge("shutdown/exit-0", "D11", "§3.6", nil, problem)
	// Judged once the log has ended: an answer to a notification may come late.
	problem = ""
	for _, w := range p.log.since(from) {
		if w.in && w.response() && !w.answers(shutdownID) {
			problem = "the sidecar answered a notification"
		}
	}
	c.judge("events/no-reply", "D20", "§2.6", p.log.since(from), problem)
}

// judgeErrorID records a scenario whose frame must be answered with an
// error of code and reason, carrying id (or null).
func (c *checker) judgeErrorID(name, rule, section string, answer seenFrame, frames []seenFrame, ok bool, code int, reason Reason, id string) {
	e, isErr := answer.wireError()
	problem := ""
	switch {
	case !ok:
		problem = fmt.Sprintf("no answer within %v", c.opts.Timeout)
	case answer.envErr != "":
		problem = "the answer is not a valid JSON-RPC response: " + answer.envErr
	case !isErr:
		problem = fmt.Sprintf("answered with a result; want error %d with data reason %s", code, reason)
	case e.Code != code || e.Reason != reason && !(e.Reason == "" && e.Data == nil && (code == codeInvalidRequest || code == codeParseError)):
		// A -32600 or -32700 without data passes: data there is this
		// module's addition (PROTOCOL.md §11), which upstream peers omit.
		problem = fmt.Sprintf("answered error %d with data reason %q; want %d with %s (and data {\"reason\",\"retryable\"}, D7)", e.Code, e.Reason, code, reason)
	case string(answer.f.ID) != id && string(answer.f.ID) != "null":
		// A peer that cannot trust a faulty frame may answer it with id
		// null (PROTOCOL.md §2.4); any other id answers something else.
		problem = fmt.Sprintf("answered with id %s; want %s", answer.f.ID, id)
	}
	c.judge(name, rule, section, frames, problem)
}

// mustFrame encodes a frame of the checker's own; they always encode.
func mustFrame(id *msgID, method string, params any) []byte {
	frame, err := encodeRequest(id, method, params)
	if err != nil {
		panic(err)
	}
	return frame
}

// oversized is the second raw session: one line over the frame limit is
// fatal to the sidecar's connection, which exits non-zero (D2, §3.6).
func (c *checker) oversized() {
	const name, rule, section = "framing/oversized-frame-is-fatal", "D2", "§2.1"
	p, err := c.launch()
	if err != nil {
		c.judge(name, rule, section, nil, "the sidecar did not start: "+err.Error())
		return
	}
	defer p.stop(0)
	if !c.handshake(p, false) {
		c.skip(name, rule, section, "the handshake failed")
		return
	}
	p.write(mustFrame(nil, MethodInitialized, InitializedParams{}))
	line := make([]byte, 0, FrameBytes+1024)
	line = append(line, `{"jsonrpc":"2.0","method":"extension/resources/changed","params":{"paths":["`...)
	line = append(line, bytes.Repeat([]byte("a"), FrameBytes+1024-len(line)-5)...)
	line = append(line, `"]}}`...)
	from := p.log.mark()
	p.log.add(false, line[:200]) // the log keeps its head only
	p.proc.stdin.SetWriteDeadline(time.Now().Add(c.opts.Timeout))
	p.proc.stdin.Write(append(line, '\n')) // fails once the sidecar stops reading
	problem := ""
	if bound := 3 * c.opts.Timeout; !waitClosed(p.proc.exited, bound) {
		problem = fmt.Sprintf("the sidecar was still running %v after an inbound line of 8 MiB + 1 KiB", bound)
	} else if p.proc.waitErr == nil {
		problem = "the sidecar exited with status 0; a fatal connection failure exits non-zero (§3.6)"
	}
	c.judge(name, rule, section, p.log.since(from), problem)
}

// samplePayload returns a valid payload document of p.
func samplePayload(p Point, root string) any {
	messages := []ProviderMessage{{Role: RoleUser, Content: "hello"}}
	switch p {
	case InputReceive:
		return InputPayload{Text: "hello from the conformance check"}
	case AgentBeforeStart:
		return AgentStartPayload{Model: "fake", ToolCount: 2, SessionID: "check-session"}
	case SystemPromptBuild:
		return SystemPromptPayload{Prompt: "You are a coding agent.", WorkspaceRoot: root}
	case ContextPrepare:
		return ContextPayload{Messages: messages}
	case ProviderRequestPoint:
		return ProviderRequestPayload{Request: ProviderRequest{Messages: messages, Tools: []ProviderToolSchema{}, MaxTokens: 64}}
	case ProviderResponsePoint:
		return ProviderResponsePayload{Text: "hello"}
	case ToolBefore:
		return ToolPayload{Name: "read", Arguments: `{"path":"README.md"}`}
	case ToolAfter:
		return ToolResultPayload{Name: "read", Arguments: `{"path":"README.md"}`, Result: "# README"}
	case PermissionDecision:
		return PermissionPayload{Name: "write", Arguments: `{"path":"notes.txt"}`, HostDecision: "allow"}
	case CompactionPrepare:
		return CompactionPreparePayload{Messages: messages, Guidance: "keep the decisions"}
	case CompactionComplete:
		return CompactionCompletePayload{Summary: "the user said hello"}
	case FrontendEvent:
		return FrontendPayload{Kind: "key", Text: "enter"}
	}
	return SessionPayload{SessionPath: filepath.Join(root, "session.jsonl"), Phase: strings.TrimPrefix(string(p), "session.")}
}

// largePayload returns a payload of p over ExternalizeFieldBytes, for the
// points with a free text member.
func largePayload(p Point, root string) (any, bool) {
	text := strings.Repeat("conformance ", 100<<10/12)
	switch p {
	case InputReceive:
		return InputPayload{Text: text}, true
	case SystemPromptBuild:
		return SystemPromptPayload{Prompt: text, WorkspaceRoot: root}, true
	case ToolAfter:
		return ToolResultPayload{Name: "read", Arguments: `{"path":"README.md"}`, Result: text}, true
	case CompactionComplete:
		return CompactionCompletePayload{Summary: text}, true
	case FrontendEvent:
		return FrontendPayload{Kind: "paste", Text: text}, true
	case ProviderResponsePoint:
		return ProviderResponsePayload{Text: text}, true
	}
	return nil, false
}

// sampleAnswers answers a prompt as a user would: every field filled.
func sampleAnswers(form UIFormPayload) map[string]json.RawMessage {
	values := map[string]json.RawMessage{}
	for _, f := range form.Fields {
		first := "Ada"
		if len(f.Options) > 0 {
			first = f.Options[0]
		}
		quoted, _ := json.Marshal(first)
		switch f.Kind {
		case PromptConfirm:
			values[f.Key] = json.RawMessage("true")
		case PromptMultiselect:
			values[f.Key] = json.RawMessage("[" + string(quoted) + "]")
		default:
			values[f.Key] = quoted
		}
	}
	if len(form.Fields) == 0 {
		values["value"] = json.RawMessage(`"Ada"`)
	}
	return values
}

// checkFrontend answers every prompt and remembers the forms it saw.
type checkFrontend struct {
	mu    sync.Mutex
	forms []string // surface ids of forms published or asked
}

func (f *checkFrontend) Show(s Surface) {
	if s.Form != nil {
		f.mu.Lock()
		f.forms = append(f.forms, s.SurfaceID)
		f.mu.Unlock()
	}
}

func (f *checkFrontend) Ask(ctx context.Context, p Prompt) (map[string]json.RawMessage, bool, error) {
	f.mu.Lock()
	f.forms = append(f.forms, p.SurfaceID)
	f.mu.Unlock()
	return sampleAnswers(p.Form), false, nil
}

// hosted runs the scenarios of a real generation: every subscribed
// point, content refs, provider catalogs and streams, UI, the ids of the
// sidecar's own requests and the host's shutdown.
func (c *checker) hosted() {
	log := newFrameLog()
	fe := &checkFrontend{}
	h := c.host
	h.Frontend, h.Conn.Tap = fe, log.add
	rt, err := h.Start(c.ctx)
	var s *sidecar
	if err == nil {
		if s = rt.byID[c.report.Plugin]; s == nil {
			err = fmt.Errorf("plugin %s did not start", c.report.Plugin)
			for _, w := range rt.Warnings() {
				err = w.Err // the optional plugin's start error
			}
			rt.Close()
		}
	}
	if err != nil {
		c.judge("host/start", startRule(err), "§3.5", log.since(0), err.Error())
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	if slices.Contains(s.result.Subscriptions, string(SessionStart)) {
		rt.Observe(SessionStart, samplePayload(SessionStart, c.work)) // a sidecar may publish its UI now
	}
	for _, sub := range s.result.Subscriptions {
		c.intercept(ctx, rt, s, log, Point(sub), samplePayload(Point(sub), c.work), "intercept/"+sub)
	}
	c.content(ctx, rt, s, log)
	c.providers(ctx, rt, s, log)
	c.ui(ctx, rt, s, log, fe)
	c.ids(log)
	from := log.mark()
	problem := ""
	if err := rt.Close(); err != nil {
		problem = err.Error()
	}
	c.judge("shutdown/through-the-host", "D11", "§3.6", log.since(from), problem)
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
// (D19), and judges the verdict (D16).
func (c *checker) intercept(ctx context.Context, rt *Runtime, s *sidecar, log *frameLog, p Point, payload any, name string) bool {
	raw, _ := json.Marshal(payload)
	from := log.mark()
	host := ""
	if pp, ok := payload.(PermissionPayload); ok {
		host = pp.HostDecision
	}
	out := &InterceptOutcome{Payload: raw}
	_, err := rt.rule(ctx, s, p, out, host, true)
	frames := log.since(from)
	rule, problem := "D16", ""
	switch {
	case err == nil || errors.Is(err, errSlotOwnerBlocked):
	case errors.Is(err, ReasonInterceptTimeout):
		rule, problem = "D18", err.Error()
	default:
		problem = err.Error()
		for _, w := range frames {
			if w.in && w.response() && w.f.Result != nil && DecodeResult(MethodIntercept, w.f.Result, &InterceptResult{}) != nil {
				rule = "D3" // the verdict itself does not decode strictly
			}
		}
	}
	c.judge(name, rule, "§4.4", frames, problem)
	return problem == ""
}

// content sends a payload over 64 KiB, which travels by reference (D22),
// at the first subscribed point with a free text member.
func (c *checker) content(ctx context.Context, rt *Runtime, s *sidecar, log *frameLog) {
	const name, rule, section = "content/large-payload-read-back", "D22", "§6.3"
	for _, sub := range s.result.Subscriptions {
		payload, ok := largePayload(Point(sub), c.work)
		if !ok {
			continue
		}
		from := log.mark()
		c.intercept(ctx, rt, s, log, Point(sub), payload, "content/verdict-on-a-large-payload")
		frames := log.since(from)
		refused := hostRefusals(frames)
		reads, problem := 0, ""
		for _, w := range frames {
			if w.in && w.request(MethodContentRead) {
				reads++
				if a, ok := refused[string(w.f.ID)]; ok {
					e, _ := a.wireError()
					problem = fmt.Sprintf("a read was refused: %s: %s", e.Reason, e.Message)
				}
			}
		}
		if reads == 0 {
			c.skip(name, rule, section, "the sidecar answered without reading the externalized payload")
			return
		}
		c.judge(name, rule, section, frames, problem)
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
	from := log.mark()
	var res ProviderCatalogResult
	problem := ""
	if err := s.call(ctx, c.opts.Timeout, MethodProviderCatalog, ProviderCatalogParams{}, &res); err != nil {
		problem = err.Error()
	}
	for _, d := range res.Providers {
		if !slices.ContainsFunc(s.result.Providers, func(p ProviderDescriptor) bool { return p.Ref == d.Ref }) {
			problem = fmt.Sprintf("the catalog lists %q, which the handshake did not declare", d.Ref)
		}
	}
	c.judge("provider/catalog", "D21", "§5.1", log.since(from), problem)

	ref := s.result.Providers[0].Ref
	req := ProviderRequest{Messages: []ProviderMessage{{Role: RoleUser, Content: "hello"}}, Tools: []ProviderToolSchema{}, MaxTokens: 64}
	sctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	from = log.mark()
	st, err := rt.OpenStream(sctx, ref, "", req)
	problem = ""
	if errors.Is(err, ReasonProviderFailed) {
		// §5.2: a sidecar may decline a stream; then none is there to judge.
		c.skip("provider/stream", "D21", "§5.4", "the sidecar declined the stream: "+err.Error())
		c.skip("provider/cancel", "D21", "§5.5", "the sidecar declined the stream")
		return
	}
	if err != nil {
		problem = err.Error()
	} else {
		for err == nil {
			_, err = st.Recv()
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, ReasonProviderFailed) {
			problem = err.Error()
		}
		if p := streamProblem(log.since(from), st.ID()); p != "" {
			problem = p
		}
	}
	c.judge("provider/stream", "D21", "§5.4", log.since(from), problem)

	cctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	from = log.mark()
	st, err = rt.OpenStream(cctx, ref, "", req)
	if err != nil {
		c.judge("provider/cancel", "D21", "§5.5", log.since(from), err.Error())
		return
	}
	if _, err := st.Recv(); err != nil {
		st.Close()
		c.skip("provider/cancel", "D21", "§5.5", "the stream ended before its first chunk could be cancelled")
		return
	}
	st.Close()
	id, _ := json.Marshal(st.ID())
	isEnd := func(w seenFrame) bool {
		return w.in && w.f.Method == MethodStreamEnd && bytes.Contains(w.f.Params, id)
	}
	_, ended := log.wait(ctx, c.opts.Timeout, from, isEnd)
	frames := log.since(from)
	cancelAt := slices.IndexFunc(frames, func(w seenFrame) bool { return !w.in && w.request(MethodStreamCancel) })
	endAt := slices.IndexFunc(frames, isEnd)
	late := false // the cancel found the stream already over: {"cancelled":false}
	if cancelAt >= 0 {
		answer, ok := log.wait(ctx, c.opts.Timeout, from, func(w seenFrame) bool { return w.in && w.answers(string(frames[cancelAt].f.ID)) })
		var res StreamCancelResult
		late = ok && json.Unmarshal(answer.f.Result, &res) == nil && !res.Cancelled
	}
	problem = ""
	var end StreamEndParams
	switch {
	case !ended:
		problem = fmt.Sprintf("no stream/end within %v of the cancel", c.opts.Timeout)
	case cancelAt < 0 || endAt < cancelAt || late:
		c.skip("provider/cancel", "D21", "§5.5", "the stream ended before the cancel reached it")
		return
	case DecodeParams(MethodStreamEnd, frames[endAt].f.Params, &end) != nil || !end.Interrupted:
		problem = `the end after a cancel must say "interrupted":true`
	default:
		problem = streamProblem(frames, st.ID())
	}
	c.judge("provider/cancel", "D21", "§5.5", frames, problem)
}

// streamProblem checks the chunk and end frames of stream id: seqs from 1
// with no gap or repeat, one end whose lastSeq is the last chunk, nothing
// after it, every frame strictly decodable.
func streamProblem(frames []seenFrame, id string) string {
	quoted, _ := json.Marshal(id)
	next, ends := int64(1), 0
	for _, w := range frames {
		if !w.in || !bytes.Contains(w.f.Params, quoted) {
			continue
		}
		switch w.f.Method {
		case MethodStreamChunk:
			var ch StreamChunkParams
			if err := DecodeParams(w.f.Method, w.f.Params, &ch); err != nil {
				return "a chunk does not decode strictly: " + err.Error()
			}
			if ends > 0 {
				return fmt.Sprintf("chunk %d came after the stream's end", ch.Seq)
			}
			if ch.Seq != next {
				return fmt.Sprintf("chunk seq %d where %d was next: seqs start at seqBase 1 and have no gap or repeat", ch.Seq, next)
			}
			next++
		case MethodStreamEnd:
			var end StreamEndParams
			if err := DecodeParams(w.f.Method, w.f.Params, &end); err != nil {
				return "the end does not decode strictly: " + err.Error()
			}
			if ends++; ends > 1 {
				return "the stream has two ends"
			}
			if end.LastSeq != next-1 {
				return fmt.Sprintf("the end says lastSeq %d after %d chunks", end.LastSeq, next-1)
			}
		}
	}
	if ends == 0 {
		return "the stream has no end"
	}
	return ""
}

// ui invokes every declared action, submits the forms it saw, and judges
// every publish and request the sidecar made (D23, D24).
func (c *checker) ui(ctx context.Context, rt *Runtime, s *sidecar, log *frameLog, fe *checkFrontend) {
	for _, a := range s.result.UIActions {
		actx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
		from := log.mark()
		problem := ""
		if _, err := rt.Action(actx, "check-session", "/"+c.report.Plugin+":"+a.ActionID, nil); err != nil {
			problem = err.Error()
		}
		cancel()
		c.judge("ui/action/"+a.ActionID, "D24", "§7.4", log.since(from), problem)
	}
	fe.mu.Lock()
	forms := slices.Clone(fe.forms)
	fe.mu.Unlock()
	if len(forms) == 0 {
		c.skip("ui/submit", "D24", "§7.4", "the sidecar published and asked no form")
	} else {
		sctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
		from := log.mark()
		_, err := rt.Submit(sctx, "check-session", c.report.Plugin, forms[0], map[string]json.RawMessage{"value": json.RawMessage(`"Ada"`)})
		cancel()
		if errors.Is(err, ReasonUnknownMethod) {
			c.skip("ui/submit", "D24", "§7.4", "the sidecar takes no submits (it answered unknown_method)")
		} else {
			c.judge("ui/submit", "D24", "§7.4", log.since(from), errText(err))
		}
	}
	frames := log.since(0)
	refused := hostRefusals(frames)
	seen, problem := []seenFrame{}, ""
	for _, w := range frames {
		if !w.in || (!w.request(MethodUIPublish) && !w.request(MethodUIRequest)) {
			continue
		}
		seen = append(seen, w)
		if a, ok := refused[string(w.f.ID)]; ok {
			e, _ := a.wireError()
			seen = append(seen, a)
			problem = fmt.Sprintf("the host refused a %s: %s: %s", w.f.Method, e.Reason, e.Message)
		}
	}
	if len(seen) == 0 {
		c.skip("ui/structured-only", "D23", "§7.5", "the sidecar published nothing and asked nothing")
		return
	}
	c.judge("ui/structured-only", "D23", "§7.5", seen, problem)
}

// ids judges the ids of what the sidecar sent in the generation: its own
// requests have integer ids, and its answers the ids of the host's
// requests (D4).
func (c *checker) ids(log *frameLog) {
	frames := log.since(0)
	var mine []seenFrame
	sent, answered := map[string]bool{}, map[string]bool{}
	for _, w := range frames {
		if !w.in && w.request("") {
			sent[string(w.f.ID)] = true
		}
	}
	badRequest, badAnswer := "", ""
	for _, w := range frames {
		if !w.in {
			continue
		}
		if w.json && w.f.Method != "" && w.f.ID != nil {
			mine = append(mine, w)
			if id, ok := parseID(w.f.ID); (!ok || id < 1) && badRequest == "" {
				badRequest = fmt.Sprintf("a %s request has id %s; ids are integers numbered from 1", w.f.Method, w.f.ID)
			}
		}
		if w.response() {
			id := string(w.f.ID)
			switch _, ok := parseID(w.f.ID); {
			case badAnswer != "":
			case !ok || !sent[id]:
				badAnswer = fmt.Sprintf("an answer has id %s, which is no request the host sent", id)
			case answered[id]:
				badAnswer = fmt.Sprintf("request %s was answered twice", id)
			}
			answered[id] = true
		}
	}
	if c.requests.Add(int64(len(mine))) == 0 {
		c.skip("ids/own-requests-are-integers", "D4", "§2.3", "the sidecar sent no request of its own")
	} else {
		c.judge("ids/own-requests-are-integers", "D4", "§2.3", mine, badRequest)
	}
	c.judge("ids/answers-match-requests", "D4", "§2.3", nil, badAnswer)
}

// hostRefusals indexes the host's error answers to the sidecar's requests
// by id.
func hostRefusals(frames []seenFrame) map[string]seenFrame {
	out := map[string]seenFrame{}
	for _, a := range frames {
		if _, isErr := a.wireError(); !a.in && isErr && a.response() {
			out[string(a.f.ID)] = a
		}
	}
	return out
}

// errText is err's text, or "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
