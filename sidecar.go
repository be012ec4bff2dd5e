package extension

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// sidecarState is where a sidecar is in its life; the state only moves
// forward: starting → ready → crashed → stopping → stopped, skipping any
// step.
type sidecarState uint8

const (
	stateStarting sidecarState = iota
	stateReady
	stateCrashed
	stateStopping
	stateStopped
)

// sidecar is one started extension process and its connection, created
// by [Host.Start] and stopped by [Runtime.Close].
//
// Goroutines: watch (turns the end of the connection or of the process
// into a crash, D13), plus those of its [Conn] and process; stop joins all.
type sidecar struct {
	spec  *launchSpec
	cfg   *Host
	rt    *Runtime // its generation, for the operations it starts (a prompt, D14)
	proc  *process
	conn  *Conn
	tail  *tail
	start time.Time

	// redactor is the host's, with the values of the environment the
	// manifest gives this sidecar added (D25): every string the sidecar
	// says goes through it.
	redactor *Redactor

	result InitializeResult // set before ready, read-only after
	seq    atomic.Int64     // the last intercept seq sent; chain and slot-owner calls share it

	mu         sync.Mutex // protects state, failure
	state      sidecarState
	failure    error         // why the sidecar crashed
	classified chan struct{} // closed once watch has classified the end (crash or stop)
	watched    chan struct{} // closed when watch returns, after OnCrash
	live       atomic.Bool   // the start succeeded: crashes are reported from now on
	stop       func() error  // doStop, run once: stop is idempotent

	streamsMu sync.Mutex         // protects streams
	streams   map[string]*Stream // the open provider streams, by id

	content contentStore // the payloads externalized to this sidecar (D22)

	catMu sync.Mutex    // protects cat
	cat   *catalogFetch // the provider catalog, fetched or being fetched; nil before, or after a failure

	bg inflight // background calls (catalog fetches, stream cancels), joined by stop
}

// launchSidecar starts one sidecar through the handshake. On failure
// nothing is left running and the error is a *StartError.
func launchSidecar(ctx context.Context, spec *launchSpec, cfg *Host, rt *Runtime) (*sidecar, error) {
	s := &sidecar{spec: spec, cfg: cfg, rt: rt, start: time.Now(), classified: make(chan struct{}), watched: make(chan struct{}), streams: map[string]*Stream{}}
	s.content.maxObjects, s.content.maxBytes = cfg.MaxContentObjects, cfg.MaxContentBytes
	s.redactor = cfg.Redactor.withValues(slices.Sorted(maps.Values(spec.Runtime.Env)))
	s.tail = &tail{size: cfg.StderrTailBytes, redactor: s.redactor}
	if cfg.OnStderr != nil {
		s.tail.onLine = func(line string) { cfg.OnStderr(spec.ID, line) }
	}
	s.stop = sync.OnceValue(s.doStop)
	proc, stage, err := startProcess(spec, spec.env(cfg.Env), s.tail)
	if err != nil {
		return nil, s.startError(stage, err)
	}
	s.proc = proc
	// D6: the Conn keeps the host's side of the barrier from its first read.
	s.conn = NewConn(proc.stdout, proc.stdin, s, cfg.Conn)
	go s.watch()
	if err := s.handshake(ctx); err != nil {
		s.abort()
		return nil, s.startError("handshake", err)
	}
	s.live.Store(true)
	return s, nil
}

func (s *sidecar) startError(stage string, err error) *StartError {
	return &StartError{Plugin: s.spec.ID, Stage: stage, Elapsed: time.Since(s.start), Stderr: s.tail.redacted(), Err: err}
}

// abort stops a sidecar that failed its start and joins everything. The
// connection is closed first, so an answer the barrier queued (D6) is
// flushed, within the writer's drain bound, before the group is killed.
func (s *sidecar) abort() {
	s.setState(stateStopping)
	s.conn.Close()
	s.proc.stop(0, s.cfg.ReapTimeout, s.cfg.ExitDrain) // no grace: kill the group and reap it
	<-s.watched
	s.bg.join()
}

// HandleRequest answers the sidecar's requests: host/content/read from
// its store (D22), host/ui/publish and host/ui/request (PROTOCOL.md §7);
// any other is answered unknown_method, with data like every protocol
// error (D7).
func (s *sidecar) HandleRequest(ctx context.Context, method string, params json.RawMessage) (any, error) {
	if method == MethodUIPublish || method == MethodUIRequest {
		return s.ui(ctx, method, params)
	}
	if method != MethodContentRead {
		return nil, NewError(ReasonUnknownMethod, "method not found: "+method)
	}
	var p ContentReadParams
	if err := Decode(method, params, &p); err != nil {
		return nil, err // a negative offset among them: invalid_params
	}
	return s.content.answer(p)
}

// HandleNotification takes the sidecar's stream notifications to their
// streams. Traffic for a stream that is not open and malformed
// notifications are dropped, never failing the connection (PROTOCOL.md
// §5.4 rule 8).
func (s *sidecar) HandleNotification(ctx context.Context, method string, params json.RawMessage) {
	var chunk StreamChunkParams
	var end StreamEndParams
	var err error
	switch method {
	case MethodStreamChunk:
		err = Decode(method, params, &chunk)
	case MethodStreamEnd:
		err = Decode(method, params, &end)
	default:
		return
	}
	id := cmp.Or(chunk.StreamID, end.StreamID) // one of them is decoded
	s.streamsMu.Lock()
	st := s.streams[id]
	s.streamsMu.Unlock()
	switch {
	case err != nil:
		s.conn.opts.Logf("extension %s: dropped a malformed %s: %v", s.spec.ID, method, err)
	case st == nil:
		s.conn.opts.Logf("extension %s: ignored %s for stream %q, which is closed or was never opened (a stream the host has cancelled may still end this way)", s.spec.ID, method, s.safe(id))
	case method == MethodStreamChunk:
		st.chunk(chunk.Seq, weigh(s.safeChunk(chunk.Chunk), len(params)))
	default:
		st.end(end)
	}
}

// safeChunk returns c as a host caller may see it: every string escaped
// (D27; a decoded string could carry raw escape sequences, which a JSON
// payload cannot), and an error's message redacted again (D21, D25).
func (s *sidecar) safeChunk(c ProviderChunk) ProviderChunk {
	c.Text, c.Signature = TerminalSafe(c.Text), TerminalSafe(c.Signature)
	if t := c.ToolCall; t != nil {
		t.ID, t.Name, t.Arguments, t.ThoughtSignature = TerminalSafe(t.ID), TerminalSafe(t.Name), TerminalSafe(t.Arguments), TerminalSafe(t.ThoughtSignature)
	}
	if c.Usage != nil {
		c.Usage.FinishReason = TerminalSafe(c.Usage.FinishReason)
	}
	if c.Error != nil {
		c.Error.Message = s.safe(c.Error.Message)
	}
	return c
}

// background runs f on a goroutine that stop joins, unless the sidecar is
// stopping already, and reports whether it did.
func (s *sidecar) background(f func()) bool {
	if !s.bg.enter() {
		return false
	}
	go func() {
		defer s.bg.leave()
		f()
	}()
	return true
}

func (s *sidecar) setState(st sidecarState) {
	s.mu.Lock()
	s.state = max(s.state, st) // the state only moves forward
	s.mu.Unlock()
}

// handshake runs extension/initialize, checks the declaration against the
// manifest (D9) and opens the barrier (D6).
func (s *sidecar) handshake(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.InitializeTimeout)
	defer cancel()
	rt := s.spec.Runtime
	var res InitializeResult
	raw, err := s.conn.Call(ctx, MethodInitialize, s.cfg.initializeParams(rt))
	if err == nil {
		err = Decode(MethodInitialize, raw, &res)
	}
	if err == nil {
		err = checkDeclaration(s.spec.ID, rt, &res)
		// D27: the declaration's free text reaches host callers.
		res.Name, res.Version = TerminalSafe(res.Name), TerminalSafe(res.Version)
		for i := range res.Providers {
			res.Providers[i].DisplayName = s.safe(res.Providers[i].DisplayName)
		}
		for i := range res.UIActions {
			res.UIActions[i].Label = s.safe(res.UIActions[i].Label) // PROTOCOL.md §7.4: redacted when registered
		}
	}
	if err == nil {
		s.mu.Lock()
		if s.state == stateStarting {
			s.result, s.state = res, stateReady
		} else if err = s.failure; err == nil {
			err = errorf(ReasonProtocolError, "extension sidecar %s ended during the handshake", s.spec.ID)
		}
		s.mu.Unlock()
	}
	if err == nil {
		err = s.conn.Notify(ctx, MethodInitialized, InitializedParams{})
	}
	if err == nil {
		// D6: a frame read before the barrier opened may not be judged
		// yet; once it is, the connection says so, and the start fails
		// instead of the sidecar crashing right after it.
		s.conn.barrierSettled(ctx)
	}
	var e *Error
	if errors.As(s.conn.Err(), &e) && errors.Is(e, errPreBarrier) {
		// D6: the barrier poisoned the connection, whatever the handshake
		// saw of it; the start fails naming the plugin and what it sent.
		return causedError(e, ReasonProtocolError, "extension sidecar %s %s", s.spec.ID, e.Message)
	}
	return s.redactErr(err)
}

// initializeParams are what the host sends to a sidecar of runtime rt
// (PROTOCOL.md §3.3, D9).
func (cfg *Host) initializeParams(rt *RuntimeSpec) InitializeParams {
	return InitializeParams{
		ProtocolVersion: ProtocolVersion,
		ProtocolID:      ProtocolID,
		Manifest:        rt.expectation(),
		Session:         cfg.Session,
		Capabilities:    HostCapabilities{ContentRefs: true, UIHost: cfg.UIHost, ProtocolVersion: ProtocolVersion},
	}
}

// checkDeclaration applies the host's checks of PROTOCOL.md §3.3 (D9).
func checkDeclaration(id string, rt *RuntimeSpec, res *InitializeResult) error {
	if err := checkVersion(res.ProtocolVersion); err != nil {
		return fmt.Errorf("extension %s: %w", id, err)
	}
	undeclared := func(format string, args ...any) error {
		return errorf(ReasonCapabilityNotDeclared, "extension %s: "+format, append([]any{id}, args...)...)
	}
	for _, sub := range res.Subscriptions {
		if !slices.Contains(rt.Intercepts, Point(sub)) {
			return undeclared("subscription %q is not in the manifest's runtime.intercepts", sub)
		}
	}
	for _, slot := range res.Replaces {
		if !slices.Contains(rt.Replaces, slot) {
			return undeclared("replaces %q but the manifest's runtime.replaces does not declare it", slot)
		}
	}
	prefix := "plugin/" + id + "/"
	for _, p := range res.Providers {
		switch {
		case !slices.Contains(rt.Capabilities, "providers"):
			return undeclared("declares provider %q without the providers capability", p.Ref)
		case !strings.HasPrefix(p.Ref, prefix) || len(p.Ref) == len(prefix):
			return undeclared("provider %q is outside its namespace %s", p.Ref, prefix)
		case rt.Providers != nil && !slices.Contains(rt.Providers, p.Ref):
			return undeclared("provider %q is not in the manifest's runtime.providers", p.Ref)
		}
	}
	for _, a := range res.UIActions {
		switch {
		case !slices.Contains(rt.Capabilities, "ui"):
			return undeclared("declares UI action %q without the ui capability", a.ActionID)
		case !validActionID(a.ActionID):
			return undeclared("UI action id %q must match ^[a-z0-9][a-z0-9-]*$", a.ActionID)
		case rt.UIActions != nil && !slices.Contains(rt.UIActions, a.ActionID):
			return undeclared("UI action %q is not in the manifest's runtime.uiActions", a.ActionID)
		}
	}
	return nil
}

// watch turns the end of the connection or of the process into a crash
// (D13): the process tree is killed, pending calls fail with the terminal
// error, and the crash is reported once, only for a sidecar that started.
// During a stop it only records the end: the stop owns the teardown.
func (s *sidecar) watch() {
	defer close(s.watched)
	var cause error
	select {
	case <-s.conn.Done():
		cause = s.conn.Err()
	case <-s.proc.exited:
		// The process wrote its last frames before it exited; let the
		// reader get to them (an answer may still be in the pipe), but
		// not forever: a grandchild may hold stdout open (D12).
		waitClosed(s.conn.Done(), s.cfg.ExitDrain)
		cause = fmt.Errorf("the process %v", cmp.Or(s.proc.waitErr, errors.New("exited with status 0")))
	}
	s.mu.Lock()
	wasReady := s.state == stateReady
	stopping := s.state >= stateStopping
	if s.state < stateCrashed {
		s.state, s.failure = stateCrashed, cause
	}
	s.mu.Unlock()
	if !stopping {
		s.conn.fail(cause) // D13: every pending call fails at once
	}
	if wasReady {
		s.proc.kill()
	}
	s.streamsMu.Lock()
	open := slices.Collect(maps.Values(s.streams))
	s.streamsMu.Unlock()
	for _, st := range open {
		st.disconnected(cause) // PROTOCOL.md §5.5
	}
	s.content.close() // D22: refs die with the connection
	close(s.classified)
	if wasReady && s.live.Load() && s.cfg.OnCrash != nil {
		s.cfg.OnCrash(s.spec.ID, s.interrupted(cause))
	}
}

// interrupted is the error of every call on a crashed sidecar (D13).
func (s *sidecar) interrupted(cause error) *Error {
	return causedError(cause, ReasonProviderInterrupted, "extension sidecar %s crashed: %s", s.spec.ID, s.safe(fmt.Sprint(cause)))
}

// usable fails fast without touching the wire when the sidecar cannot take
// calls (PROTOCOL.md §3.8).
func (s *sidecar) usable() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case stateReady:
		return nil
	case stateCrashed:
		return s.interrupted(s.failure)
	case stateStopping, stateStopped:
		return errorf(ReasonProviderInterrupted, "extension sidecar %s is shut down", s.spec.ID)
	}
	return errorf(ReasonProtocolError, "extension sidecar %s is not initialized", s.spec.ID)
}

// call sends one request to the sidecar and strictly decodes its result
// into result, a pointer to the method's result DTO. Errors: the peer's
// protocol error (message redacted); provider_interrupted naming the plugin
// when the sidecar crashed or is shut down (D13); protocol_error for a
// malformed result; the context's error when ctx ends first.
func (s *sidecar) call(ctx context.Context, method string, params, result any) error {
	if err := s.usable(); err != nil {
		return err
	}
	raw, err := s.conn.Call(ctx, method, params)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		if waitClosed(s.conn.Done(), 0) {
			<-s.classified // the watcher has classified the end
			if uerr := s.usable(); uerr != nil {
				return uerr
			}
		}
		return s.redactErr(err)
	}
	return s.redactErr(Decode(method, raw, result))
}

// doStop shuts the sidecar down as D11 prescribes; s.stop runs it once. The
// error has reason shutdown_timeout when the sidecar did not answer
// extension/shutdown in time or anything had to be killed, and is a
// *PluginError with Op "shutdown" when a sidecar that was running exited
// with a status other than 0.
func (s *sidecar) doStop() error {
	s.mu.Lock()
	// A connection that has ended crashed a moment ago: nothing to ask.
	wasReady := s.state == stateReady && !waitClosed(s.conn.Done(), 0)
	s.state = max(s.state, stateStopping)
	s.mu.Unlock()
	var late error
	if wasReady {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		var raw json.RawMessage
		if raw, late = s.conn.Call(ctx, MethodShutdown, ShutdownParams{TimeoutMillis: s.cfg.ShutdownTimeout.Milliseconds()}); late == nil {
			late = Decode(MethodShutdown, raw, &ShutdownResult{})
		}
		cancel()
	}
	killed, reapErr := s.proc.stop(s.cfg.StdinGrace, s.cfg.ReapTimeout, s.cfg.ExitDrain)
	s.conn.Close()
	<-s.watched // joins the watcher, OnCrash included
	s.bg.join()
	s.setState(stateStopped)
	switch {
	case reapErr != nil:
		return errorf(ReasonShutdownTimeout, "extension sidecar %s: %w", s.spec.ID, reapErr)
	case late != nil && errors.Is(late, context.DeadlineExceeded):
		return errorf(ReasonShutdownTimeout, "extension sidecar %s did not answer extension/shutdown within %v", s.spec.ID, s.cfg.ShutdownTimeout)
	case late != nil && errors.Is(late, s.conn.Err()) && killed == killedNothing && s.proc.waitErr == nil:
		// The connection ended under the call, not the sidecar's answer:
		// it answered and exited while the host was still writing to it
		// (an answer to its last request, say) and the write found the
		// pipe closed. It exited cleanly, as asked (D11).
	case late != nil:
		return fmt.Errorf("extension sidecar %s: extension/shutdown: %w", s.spec.ID, s.redactErr(late))
	case killed == killedChild:
		return errorf(ReasonShutdownTimeout, "extension sidecar %s did not exit cleanly within %v of stdin closing; its process group was killed", s.spec.ID, s.cfg.StdinGrace)
	case killed == killedLeftovers:
		return errorf(ReasonShutdownTimeout, "extension sidecar %s exited but left processes in its group (D12), which were killed", s.spec.ID)
	case wasReady && s.proc.waitErr != nil:
		// D11: a sidecar that was asked to stop exits with status 0.
		return &PluginError{Plugin: s.spec.ID, Op: "shutdown", Err: fmt.Errorf("the sidecar %v after extension/shutdown; a clean stop exits with status 0", s.proc.waitErr)}
	}
	return nil
}

// safe returns text the sidecar supplied as a host caller, a log or a
// terminal may see it: redacted (D25), then with control characters and
// escape sequences shown escaped (D27).
func (s *sidecar) safe(text string) string {
	return TerminalSafe(s.redactor.Redact(text))
}

// redactErr returns err with the text of a peer's *Error redacted and
// escaped (safe), its raw data escaped, keeping its reason (whatever the
// sidecar says is untrusted).
func (s *sidecar) redactErr(err error) error {
	if err == nil {
		return nil // before e, which escapes: no allocation on success
	}
	var e *Error
	if errors.As(err, &e) {
		c := *e
		c.Message = s.safe(e.Message)
		c.Data = jsonSafe(e.Data) // D27; a raw member, kept valid JSON
		return &c
	}
	return err
}

// process is one running sidecar: the child in its own process group (D12),
// the two protocol pipes, and the stderr tail.
//
// Goroutines: reap (waits for the child and closes exited) and drain (copies
// stderr into the tail until every writer of the pipe is gone or release
// closes it). release joins drain; reap ends when the child is reaped,
// which stop waits for.
type process struct {
	cmd    *exec.Cmd
	pid    int
	stdin  *os.File // our write end of the child's stdin
	stdout *os.File // our read end of the child's stdout
	stderr *os.File // our read end of the child's stderr
	tail   *tail

	exited  chan struct{} // closed once the child has been reaped
	waitErr error         // valid after exited is closed
	drained chan struct{} // closed when the stderr drain ends

	groupGone atomic.Bool // the group was seen empty after the leader exited: never signal it again
}

// startProcess spawns spec in exec form (never through a shell, D8) with
// env, and returns the stage that failed on error: "pipes" or "spawn".
func startProcess(spec *launchSpec, env []string, tail *tail) (*process, string, error) {
	var files []*os.File // the read and write ends of stdin, stdout and stderr, in order
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	for range 3 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			return nil, "pipes", err
		}
		files = append(files, r, w)
	}
	inR, inW, outR, outW, errR, errW := files[0], files[1], files[2], files[3], files[4], files[5]
	growPipe(inW)
	cmd := exec.Command(spec.Command, spec.Args...)
	cmd.Env = env
	cmd.Dir = spec.Root
	// The child gets the pipes' *os.File ends directly, so exec starts no
	// copying goroutine and Wait cannot hang on a grandchild that keeps a
	// pipe open (D12).
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, "spawn", interpreterError(spec.Command, err)
	}
	inR.Close()
	outW.Close()
	errW.Close()
	p := &process{
		cmd: cmd, pid: cmd.Process.Pid,
		stdin: inW, stdout: outR, stderr: errR, tail: tail,
		exited: make(chan struct{}), drained: make(chan struct{}),
	}
	go p.reap()
	go p.drain()
	return p, "", nil
}

// interpreterError explains a failed exec of a script that is there: a
// #! line naming a program that does not exist fails the exec with "no
// such file or directory", which is what a CRLF line end does to it.
func interpreterError(command string, err error) error {
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, ferr := os.Open(command)
	if ferr != nil {
		return err // the command itself is missing
	}
	defer f.Close()
	line, _ := bufio.NewReader(io.LimitReader(f, 256)).ReadString('\n')
	interpreter, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "#!")
	switch {
	case !ok:
		return err
	case strings.HasSuffix(interpreter, "\r"):
		return fmt.Errorf("%w: its #! line names %q, which does not exist: the script has CRLF line ends; save it with LF ones", err, interpreter)
	}
	return fmt.Errorf("%w: its #! line names %q, which does not exist", err, interpreter)
}

func (p *process) reap() {
	p.waitErr = p.cmd.Wait()
	close(p.exited)
}

// drain keeps reading stderr so that a chatty sidecar never blocks on a full
// pipe (D10: only the tail is kept).
func (p *process) drain() {
	defer close(p.drained)
	io.Copy(p.tail, p.stderr)
	p.tail.flush() // a last line without its "\n"
}

// kill terminates the whole process group, unless the group is known to be
// gone: its id could belong to another process by now.
func (p *process) kill() error {
	if p.groupGone.Load() {
		return nil
	}
	return killGroup(p.cmd)
}

// waitClosed waits up to d for ch to be closed and reports whether it was;
// with d <= 0 it only looks.
func waitClosed(ch <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// stop ends the process as D11 prescribes after the protocol part of a
// shutdown: close stdin, give the child grace to exit on its own, then
// kill the group and wait up to reap for the child to be reaped. Leftover
// members of the group (a grandchild holding a pipe) are killed too. It
// reports what had to be killed: the child itself (it overran grace), or
// only members it left behind. Once the group is gone, stderr is still
// read for up to drain, so the last lines the sidecar wrote reach the tail.
func (p *process) stop(grace, reap, drain time.Duration) (killed killedWhat, err error) {
	p.stdin.Close()
	if !waitClosed(p.exited, grace) {
		killed = killedChild
		p.kill()
		if !waitClosed(p.exited, reap) {
			err = fmt.Errorf("process %d was not reaped within %v of SIGKILL", p.pid, reap)
		}
	}
	if !p.groupGone.Load() && groupAlive(p.pid) {
		// D12: the sidecar is gone but members of its group live on.
		killed = max(killed, killedLeftovers)
		p.kill()
		// Wait for the kernel to tear down every member of the killed
		// group, so that nothing of it runs once stop returns.
		deadline := time.Now().Add(reap)
		for groupAlive(p.pid) && time.Now().Before(deadline) {
			time.Sleep(groupPoll)
		}
		if groupAlive(p.pid) && err == nil {
			err = fmt.Errorf("process group %d still has live members %v after SIGKILL", p.pid, reap)
		}
	}
	if err == nil {
		p.groupGone.Store(true)
		// No member of the group holds stderr any more: what is left in
		// the pipe is read up to EOF, unless a process that left the group
		// (D12) still holds it, which drain bounds.
		waitClosed(p.drained, drain)
	}
	p.release()
	return killed, err
}

// killedWhat is what stop had to kill.
type killedWhat uint8

const (
	killedNothing   killedWhat = iota
	killedLeftovers            // members the child left in its group; it had exited
	killedChild                // the child itself, and its group
)

// groupPoll is how often stop looks at a killed group again.
const groupPoll = 5 * time.Millisecond

// release closes our pipe ends, which ends the stderr drain even when a
// grandchild still holds the write end, and joins it. It may run again
// (a check session stops twice): closing a closed *os.File only fails.
func (p *process) release() {
	p.stdin.Close()
	p.stdout.Close()
	p.stderr.Close()
	<-p.drained
}

// defaultTailSize is how many of the most recent bytes of a sidecar's
// stderr a tail keeps unless told otherwise: 16 KiB (D10).
const defaultTailSize = 16384

// tail is an io.Writer that keeps the most recent bytes written to it, for
// a sidecar's stderr (D10, D25). Memory stays at size bytes whatever is
// written. Writes never fail, so a chatty sidecar cannot block on its
// stderr pipe because of the host. What it kept is surfaced only
// redacted and escaped (D25, D27). It is safe for concurrent use; size and redactor must not
// change after the first Write.
type tail struct {
	size     int       // bytes kept; zero means defaultTailSize
	redactor *Redactor // nil means a default Redactor

	// onLine, when set, receives each line as it is completed, redacted
	// and escaped (Host.OnStderr); only the drain goroutine writes, so
	// lines arrive in order.
	onLine func(line string)
	line   []byte // the line being written, at most stderrLineBytes
	cut    bool   // the line being written is longer and was cut
	inPEM  bool   // inside a PEM private key block: its lines are redacted whole

	mu      sync.Mutex // protects the following
	buf     []byte     // grows to size, then used as a ring
	next    int        // once len(buf) == size: offset of the oldest byte, where the next byte goes
	written int64      // bytes written in total
}

// stderrLineBytes is where a stderr line passed to Host.OnStderr is cut.
const stderrLineBytes = 4096

// Write keeps the last bytes of p and passes each completed line to
// onLine. It always returns len(p), nil.
func (t *tail) Write(p []byte) (int, error) {
	if t.onLine != nil {
		t.lines(p)
	}
	size := orDefault(t.size, defaultTailSize)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.written += int64(len(p))
	if t.buf == nil {
		t.buf = make([]byte, 0, size)
	}
	q := p[max(0, len(p)-size):]      // only the last size bytes of p stay
	k := min(size-len(t.buf), len(q)) // while still filling, appended
	t.buf = append(t.buf, q[:k]...)
	for q = q[k:]; len(q) > 0; q = q[k:] { // ring: overwrite the oldest bytes
		k = copy(t.buf[t.next:], q)
		t.next = (t.next + k) % size
	}
	return len(p), nil
}

// redacted returns the kept text, trimmed of surrounding white space and
// credential-redacted, such that a secret cut by the tail's start leaves
// nothing behind (D25). Once older bytes have been dropped, the kept text
// starts mid-line, so everything up to and including the first line break
// is dropped. When no line break was kept, the cut may have split a key from
// its value ("...word hunter2" of "--password hunter2", "...rer abc..." of
// "Bearer abc...") or a value in two, so the first two blank-separated runs
// are dropped: the fragment and what may be its value. The whole text is
// dropped instead when the value may run to the end of the line: when the
// fragment ends in ':' or '=', or the second run is only separators (=, :,
// :=, =>, quotes, as in `ss_key = ...` or `y" : "..."`) or an HTTP
// authentication scheme (Basic, Bearer, Digest, ...). The rest is redacted
// as a whole, so a PEM private key whose BEGIN line was cut off still loses
// its base64 lines before END.
func (t *tail) redacted() string {
	t.mu.Lock()
	text := string(t.buf[t.next:]) + string(t.buf[:t.next]) // oldest first
	truncated := t.written > int64(len(t.buf))
	t.mu.Unlock()
	if truncated {
		text = tailDropFragment(text)
	}
	// D25, then D27 before the trim: TrimSpace would drop a trailing
	// vertical tab or form feed unseen.
	return strings.TrimSpace(TerminalSafe(cmp.Or(t.redactor, defaultRedactor()).Redact(text)))
}

// tailDropFragment drops what is left of the line that the tail's start cut
// (see tail.redacted).
func tailDropFragment(text string) string {
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		return text[i+1:]
	}
	i := tailRun(text, 0, false) // the fragment, possibly empty
	j := tailRun(text, i, true)
	k := tailRun(text, j, false) // what may be the fragment's value, none when k == j
	if i > 0 && (text[i-1] == ':' || text[i-1] == '=') || strings.Trim(text[j:k], `=:"'\>`) == "" ||
		slices.ContainsFunc(tailAuthSchemes, func(scheme string) bool { return strings.EqualFold(text[j:k], scheme) }) {
		return "" // the value may run to the end of the line
	}
	return text[k:]
}

// tailRun returns the end of the run of blank (or, if not blank, non-blank)
// bytes at i.
func tailRun(text string, i int, blank bool) int {
	return redactRun(text, i, len(text), func(c byte) bool { return (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') == blank })
}

// tailAuthSchemes are the HTTP authentication schemes, whose credentials
// follow them to the end of the line.
var tailAuthSchemes = []string{"basic", "bearer", "digest", "token", "bot", "apikey", "negotiate",
	"ntlm", "oauth", "hoba", "mutual", "vapid", "hawk", "aws4-hmac-sha256", "scram-sha-1", "scram-sha-256"}

// lines splits p into lines for onLine, cutting each at stderrLineBytes.
func (t *tail) lines(p []byte) {
	for line := range bytes.Lines(p) {
		chunk, ended := bytes.CutSuffix(line, []byte{'\n'})
		room := stderrLineBytes - len(t.line)
		t.cut = t.cut || len(chunk) > room
		t.line = append(t.line, chunk[:min(len(chunk), room)]...)
		if ended {
			t.flush()
		}
	}
}

// flush passes the line being written, if any, to onLine: redacted (D25),
// the lines of a PEM private key replaced whole since the redactor sees
// one line at a time, then escaped (D27).
func (t *tail) flush() {
	if t.onLine == nil || (len(t.line) == 0 && !t.cut) {
		return
	}
	text := strings.TrimSuffix(string(t.line), "\r")
	if t.inPEM || strings.Contains(text, "-----BEGIN ") && strings.Contains(text, "PRIVATE KEY") {
		t.inPEM = !strings.Contains(text, "-----END ")
		text = RedactedMarker
	} else {
		text = cmp.Or(t.redactor, defaultRedactor()).Redact(text)
	}
	if t.cut {
		text += " …(cut)"
	}
	t.line, t.cut = t.line[:0], false
	t.onLine(TerminalSafe(text))
}
