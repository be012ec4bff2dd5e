// Package sdk writes Reasonix extension sidecars: programs that the
// Reasonix host starts and talks to over Extension Protocol v1 on their
// standard input and output.
//
// A complete sidecar that blocks one tool:
//
//	func main() {
//		err := sdk.Serve(context.Background(), sdk.Options{
//			Name: "no-rm", Version: "0.1.0",
//			Intercept: map[extension.Point]sdk.InterceptFunc{
//				extension.ToolBefore: func(ctx context.Context, c *sdk.Call) (sdk.Verdict, error) {
//					var tool extension.ToolPayload
//					if err := c.Decode(&tool); err != nil {
//						return sdk.Verdict{}, err
//					}
//					if tool.Name == "rm" {
//						return sdk.Block("rm is not allowed here"), nil
//					}
//					return sdk.Continue(), nil
//				},
//			},
//		})
//		if err != nil {
//			log.Fatal(err)
//		}
//	}
//
// A sidecar that serves models declares them in [Options.Providers] and
// serves them with a [Provider], whose Stream yields chunks built with
// [Text], [ToolCall], [Usage], [Done] and the other helpers; the SDK
// numbers them and ends the stream (see ExampleProvider). Payloads the
// host sent by reference (over 64 KiB) are read and verified before a
// callback sees them.
//
// [Serve] owns stdin and stdout: the sidecar must never write to stdout
// itself; stderr is free for logs. Serve answers the handshake from
// [Options], keeps its side of the barrier (D6), runs up to
// [Options.MaxHandlers] callbacks at once, and returns nil when the host
// shuts the sidecar down or closes stdin ([ErrCallbacksAbandoned] instead
// when a callback ignored its cancelled context).
package sdk

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reasonix-ext/extension"
)

// Options configures a sidecar. Only Name and Version are needed; every
// callback left nil gets the protocol's default answer.
type Options struct {
	// Name and Version are the sidecar's declaration in the handshake.
	// Blank values are refused with the internal error (PROTOCOL.md §3.3).
	Name, Version string

	// Subscriptions are the hook points declared in the handshake; nil
	// means the points that Intercept and Observe name. The "*" wildcard
	// subscribes to nothing by itself: the host sends a sidecar only the
	// points it subscribed to (and its manifest's runtime.intercepts must
	// list them, D9), so list the points when you use "*".
	Subscriptions []extension.Point
	// Replaces are the slots the sidecar owns (D17).
	Replaces []string
	// Providers are the models the sidecar serves (D9); Provider serves
	// them, and Serve refuses to start with Providers but no Provider.
	Providers []extension.ProviderDescriptor
	Provider  Provider
	// UIActions are the actions offered as /<plugin>:<action>; Action
	// answers them, and Serve refuses to start with UIActions but no
	// Action. Submit takes the values of submitted forms.
	UIActions []extension.UIActionDecl
	Action    ActionFunc
	Submit    SubmitFunc
	// StateSchemaVersion is declared in the handshake; it must be >= 0.
	StateSchemaVersion int64

	// Initialize, if set, sees the host's initialize params and may adjust
	// the declaration built from the fields above, or refuse to start.
	Initialize func(ctx context.Context, p *extension.InitializeParams, r *extension.InitializeResult) error

	// Intercept maps hook points to interceptors; the key "*" is the
	// fallback for every point without its own. A point with neither is
	// answered continue.
	Intercept map[extension.Point]InterceptFunc
	// Observe maps hook points to observers of extension/event; the key
	// "*" is the fallback for every point without its own. Events of a
	// point with neither are dropped.
	Observe map[extension.Point]ObserveFunc
	// ResourcesChanged, if set, receives extension/resources/changed.
	ResourcesChanged func(ctx context.Context, paths []string)
	// Shutdown, if set, runs when the host asks the sidecar to stop,
	// bounded by the host's timeoutMillis (no bound when it is 0).
	Shutdown func(ctx context.Context) error

	// ContentTimeout bounds reading an externalized payload from the host
	// (D22) when the call gives no deadline of its own: always for an
	// event, and for an intercept with timeoutMillis 0. Zero means 30 s.
	ContentTimeout time.Duration

	// MaxHandlers bounds the callbacks running at once; past it a request
	// is answered -32099 "server busy". It bounds the open provider
	// streams too: a stream/open past it is answered the same way. Zero
	// means 32.
	MaxHandlers int
	// StopGrace bounds how long Serve waits, once the connection has
	// ended, for running callbacks to return after their context was
	// cancelled. A callback still running then is abandoned and Serve
	// returns [ErrCallbacksAbandoned], so the process can exit before the
	// host's 750 ms stdin grace (D11) runs out and it is killed. Zero
	// means [DefaultStopGrace].
	StopGrace time.Duration
	// Stdin and Stdout replace os.Stdin and os.Stdout, for tests.
	Stdin  io.ReadCloser
	Stdout io.WriteCloser
	// Logf receives diagnostics, from several goroutines at once, so it
	// must be safe for concurrent use; nil means a line on stderr.
	Logf func(format string, args ...any)
}

// DefaultStopGrace is the default of [Options.StopGrace].
const DefaultStopGrace = 500 * time.Millisecond

// ErrCallbacksAbandoned is returned by Serve when a callback ignored the
// cancellation of its context and was still running StopGrace after the
// connection ended. Fix the callback: it must return once ctx is done.
var ErrCallbacksAbandoned = errors.New("sdk: a callback was still running after its context was cancelled; Serve returned without it")

// ErrStopTimeout is returned by Serve when, with no callback running, the
// connection still had not closed StopGrace after it ended: a read or
// write on stdin or stdout that closing cannot interrupt, such as one on
// a terminal in blocking mode.
var ErrStopTimeout = errors.New("sdk: stdin or stdout did not close in time; Serve returned without waiting for them")

// server is one Serve call.
type server struct {
	opts      Options
	conn      *extension.Conn
	connReady chan struct{} // closed once conn is set: NewConn serves before it returns
	logf      func(format string, args ...any)

	running atomic.Int64 // callbacks in progress, for close's report
	cbOnce  sync.Once
	cbCtx   context.Context                          // the callbacks' context, carrying the server
	session atomic.Pointer[extension.SessionContext] // from extension/initialize

	streamsMu sync.Mutex
	streams   map[string]context.CancelFunc // the open streams, by id
	pumps     sync.WaitGroup                // the streams' pumps, joined by close
}

// ErrProviderMissing is returned by Serve, before anything is read or
// written, when Options declares Providers but has no Provider to serve
// them: a sidecar never declares what it does not serve.
var ErrProviderMissing = errors.New("sdk: Options.Providers declares models but Options.Provider is nil; set Provider to serve them, or declare none")

// maxHandlers is Options.MaxHandlers with its default: zero or negative
// means 32. It bounds the handlers and the open streams alike.
func (s *server) maxHandlers() int { return cmp.Or(max(s.opts.MaxHandlers, 0), 32) }

// callbackContext returns ctx, the Conn's, carrying s, for ReadContent
// and UI. The Conn hands every handler its own context, so it is derived
// once, not once per event: an allocation per event slowed the observer
// of exthost bench's observe_throughput.
func (s *server) callbackContext(ctx context.Context) context.Context {
	s.cbOnce.Do(func() { s.cbCtx = context.WithValue(ctx, serverKey{}, s) })
	return s.cbCtx
}

// connection returns the Conn once Serve has set it: NewConn serves (a
// callback may run) before it returns.
func (s *server) connection() *extension.Conn {
	<-s.connReady
	return s.conn
}

// Serve runs the sidecar until the host shuts it down or closes stdin
// (nil), ctx ends (ctx's error), or the connection fails: an oversized
// frame, a refused handshake, a stalled or overflowing queue. Once the
// connection has ended it waits up to [Options.StopGrace] for running
// callbacks, then returns without them, reporting [ErrCallbacksAbandoned]
// (joined to any other error), or [ErrStopTimeout] when no callback but
// stdin or stdout would not close.
func Serve(ctx context.Context, opts Options) error {
	if len(opts.Providers) > 0 && opts.Provider == nil {
		return ErrProviderMissing
	}
	if len(opts.UIActions) > 0 && opts.Action == nil {
		return ErrActionMissing
	}
	s := &server{opts: opts, logf: opts.Logf, streams: map[string]context.CancelFunc{}, connReady: make(chan struct{})}
	if s.logf == nil {
		s.logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "sidecar: "+format+"\n", args...) }
	}
	in, out := opts.Stdin, opts.Stdout
	if in == nil {
		in = stdinReader(os.Stdin)
	}
	if out == nil {
		out = pollable(os.Stdout)
	}
	s.conn = extension.NewConn(in, out, s, extension.ConnOptions{
		Sidecar:                      true, // D6, and the handshake's end (D11)
		MaxHandlers:                  s.maxHandlers(),
		DropOverflowingNotifications: true, // PROTOCOL.md §2.5: a slow observer loses events, not the sidecar
		Logf:                         s.logf,
	})
	close(s.connReady)
	var err error
	select {
	case <-s.conn.Done():
		if err = s.conn.Err(); errors.Is(err, extension.ErrClosed) || errors.Is(err, io.EOF) {
			err = nil // an answered shutdown, or the host closed stdin
		}
	case <-ctx.Done():
		err = ctx.Err()
	}
	// The error of a stop that did not finish in time is added to err,
	// which is left as it is (and its type) when there is none.
	stopErr := s.close()
	if err == nil || stopErr == nil {
		return cmp.Or(err, stopErr)
	}
	return errors.Join(err, stopErr)
}

// close closes the connection and waits for its running callbacks, whose
// context is cancelled, for at most StopGrace. A callback that ignores
// its context is left behind and reported.
func (s *server) close() error {
	grace := cmp.Or(max(s.opts.StopGrace, 0), DefaultStopGrace) // zero or negative means the default
	closed := make(chan struct{})
	go func() {
		s.conn.Close()
		s.pumps.Wait() // their context ended with the connection
		close(closed)
	}()
	select {
	case <-closed:
		return nil
	case <-time.After(grace):
		if n := s.running.Load(); n > 0 {
			s.logf("%d callback(s) still running %v after their context was cancelled; abandoned", n, grace)
			return ErrCallbacksAbandoned
		}
		s.logf("stdin or stdout still not closed %v after the connection ended; abandoned", grace)
		return ErrStopTimeout
	}
}

// HandleRequest dispatches one host request.
func (s *server) HandleRequest(ctx context.Context, method string, params json.RawMessage) (any, error) {
	ctx = s.callbackContext(ctx)
	s.running.Add(1)
	defer s.running.Add(-1)
	// Without a Provider the provider methods, and without its callback
	// a UI method, are unknown_method (PROTOCOL.md §5.6, §7.4).
	switch {
	case method == extension.MethodInitialize:
		return decoded(ctx, method, params, s.initialize)
	case method == extension.MethodShutdown:
		return decoded(ctx, method, params, s.shutdownRequest)
	case method == extension.MethodIntercept:
		return decoded(ctx, method, params, s.intercept)
	case method == extension.MethodProviderCatalog && s.opts.Provider != nil:
		return decoded(ctx, method, params, s.catalog)
	case method == extension.MethodStreamOpen && s.opts.Provider != nil:
		return decoded(ctx, method, params, s.openStream)
	case method == extension.MethodStreamCancel && s.opts.Provider != nil:
		return decoded(ctx, method, params, s.cancelStream)
	case method == extension.MethodUIAction && s.opts.Action != nil:
		return decoded(ctx, method, params, s.action)
	case method == extension.MethodUISubmit && s.opts.Submit != nil:
		return decoded(ctx, method, params, s.submit)
	}
	// D7: the unknown-method answer carries data.
	return nil, extension.NewError(extension.ReasonUnknownMethod, "method not found: "+method)
}

// decoded strictly decodes the params of a request for method (D3) and
// hands them to answer; bad params are answered invalid_params.
func decoded[P any](ctx context.Context, method string, raw json.RawMessage, answer func(context.Context, *P) (any, error)) (any, error) {
	var p P
	if err := extension.Decode(method, raw, &p); err != nil {
		return nil, err
	}
	return answer(ctx, &p)
}

// HandleNotification dispatches one host notification; a malformed one is
// dropped with a log line (notifications are never answered).
func (s *server) HandleNotification(ctx context.Context, method string, params json.RawMessage) {
	ctx = s.callbackContext(ctx)
	s.running.Add(1)
	defer s.running.Add(-1)
	var err error
	switch method {
	case extension.MethodEvent:
		err = s.event(ctx, params)
	case extension.MethodResourcesChanged:
		var p extension.ResourcesChangedParams
		if err = extension.Decode(method, params, &p); err == nil && s.opts.ResourcesChanged != nil {
			s.opts.ResourcesChanged(ctx, p.Paths)
		}
	}
	if err != nil {
		s.logf("dropped %s: %v", method, err)
	}
}

// initialize answers extension/initialize (PROTOCOL.md §3.3). The Conn
// has already applied the version rule; a refusal here ends the
// connection once it is answered.
func (s *server) initialize(ctx context.Context, p *extension.InitializeParams) (any, error) {
	s.session.Store(&p.Session)
	res := extension.InitializeResult{
		ProtocolVersion:    extension.ProtocolVersion,
		Name:               s.opts.Name,
		Version:            s.opts.Version,
		Replaces:           s.opts.Replaces,
		Providers:          s.opts.Providers,
		UIActions:          s.opts.UIActions,
		StateSchemaVersion: s.opts.StateSchemaVersion,
	}
	for _, pt := range s.subscriptions() {
		res.Subscriptions = append(res.Subscriptions, string(pt))
	}
	if s.opts.Initialize != nil {
		if err := s.opts.Initialize(ctx, p, &res); err != nil {
			s.logf("Initialize refused: %v", err)
			return nil, extension.NewError(extension.ReasonInternal, "")
		}
	}
	res.ProtocolVersion = extension.ProtocolVersion
	if len(res.Providers) > 0 && s.opts.Provider == nil || len(res.UIActions) > 0 && s.opts.Action == nil {
		s.logf("refusing to start: the declaration names providers or UI actions that nothing serves (%v, %v)", ErrProviderMissing, ErrActionMissing)
		return nil, extension.NewError(extension.ReasonInternal, "")
	}
	if strings.TrimSpace(res.Name) == "" || strings.TrimSpace(res.Version) == "" || res.StateSchemaVersion < 0 {
		s.logf("refusing to start: the declaration needs a Name, a Version and StateSchemaVersion >= 0")
		return nil, extension.NewError(extension.ReasonInternal, "")
	}
	return res, nil
}

// subscriptions are the declared points: Options.Subscriptions, else the
// points Options.Intercept and Options.Observe name.
func (s *server) subscriptions() []extension.Point {
	if s.opts.Subscriptions != nil {
		return s.opts.Subscriptions
	}
	return slices.DeleteFunc(extension.Points(), func(pt extension.Point) bool {
		_, intercepts := s.opts.Intercept[pt]
		_, observes := s.opts.Observe[pt]
		return !intercepts && !observes
	})
}

// shutdownRequest answers extension/shutdown (D11): the Shutdown callback
// runs bounded by timeoutMillis, the answer is written, then the sidecar's
// side closes and Serve returns nil (PROTOCOL.md §3.6).
func (s *server) shutdownRequest(ctx context.Context, p *extension.ShutdownParams) (any, error) {
	if s.opts.Shutdown != nil {
		if d := millis(p.TimeoutMillis); d > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
		done := make(chan error, 1)
		go func() { done <- s.opts.Shutdown(ctx) }()
		select {
		case err := <-done:
			if err != nil {
				s.logf("Shutdown: %v", err)
			}
		case <-ctx.Done():
			s.logf("Shutdown callback overran timeoutMillis=%d", p.TimeoutMillis)
		}
	}
	// The Conn ends the connection once this answer is written (D11).
	return extension.ShutdownResult{Accepted: true}, nil
}

// InterceptFunc rules on one extension/intercept call. Its context ends at
// the host's timeoutMillis; returning after that is answered
// intercept_timeout. Any other error is answered with the internal error
// and logged, never sent.
type InterceptFunc func(ctx context.Context, c *Call) (Verdict, error)

// ObserveFunc receives one extension/event observation. Events are
// delivered one at a time, in the order the host sent them.
type ObserveFunc func(ctx context.Context, e *Event)

// Call is one extension/intercept call.
type Call struct {
	// Point is the hook point.
	Point extension.Point
	// Seq is the host's per-connection intercept sequence number.
	Seq int64
	// Payload is the point's payload document, already read from the
	// host and verified when it was externalized (D22).
	Payload json.RawMessage
	// Timeout is the host's budget for this call; 0 means none.
	Timeout time.Duration
}

// Decode strictly decodes the payload into v (D3): exact member names, no
// unknown or repeated members. Decode into the point's payload document,
// such as *extension.ToolPayload for tool.before (PROTOCOL.md §4.1).
func (c *Call) Decode(v any) error { return extension.Unmarshal(c.Payload, v) }

// Event is one extension/event observation.
type Event struct {
	// Point is the hook point observed.
	Point extension.Point
	// Payload is the point's payload document, read from the host when
	// it was externalized, as for a Call.
	Payload json.RawMessage
}

// Decode strictly decodes the payload into v, as [Call.Decode] does.
func (e *Event) Decode(v any) error { return extension.Unmarshal(e.Payload, v) }

// Verdict is an interceptor's ruling; build it with [Continue], [Block],
// [Replace], [Allow] or [Deny].
type Verdict struct {
	result extension.InterceptResult
	err    error // a replacement that could not be encoded
}

// verdict is the ruling d, with reason.
func verdict(d extension.Decision, reason string) Verdict {
	return Verdict{result: extension.InterceptResult{Decision: d, Reason: reason}}
}

// Continue passes the payload on unchanged.
func Continue() Verdict { return verdict(extension.DecisionContinue, "") }

// Block stops the operation with a reason the user sees (redacted by the
// host).
func Block(reason string) Verdict { return verdict(extension.DecisionBlock, reason) }

// Replace substitutes the payload with v: a json.RawMessage is sent
// verbatim, anything else is marshalled. The host re-validates it against
// the point's payload document (D16). Replacements always travel inline.
func Replace(v any) Verdict {
	raw, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return Verdict{err: err}
		}
	}
	if !json.Valid(raw) {
		return Verdict{err: errors.New("sdk: Replace needs valid JSON")}
	}
	return Verdict{result: extension.InterceptResult{Decision: extension.DecisionReplace, Replacement: raw}}
}

// Allow permits the operation; legal only at permission.decision, where it
// overrides a host deny (D16).
func Allow() Verdict { return verdict(extension.DecisionAllow, "") }

// Deny refuses the operation; legal only at permission.decision.
func Deny(reason string) Verdict { return verdict(extension.DecisionDeny, reason) }

// intercept answers extension/intercept (PROTOCOL.md §4.2).
func (s *server) intercept(ctx context.Context, p *extension.InterceptParams) (any, error) {
	fn := callback(s.opts.Intercept, p.Event)
	if fn == nil {
		return Continue().result, checkNull(p.Payload, p.Externalized)
	}
	c := &Call{Point: p.Event, Seq: p.Seq, Timeout: millis(p.TimeoutMillis)}
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	// D22: an externalized payload is read from the host, within the
	// call's deadline, before the callback sees it.
	var err error
	if c.Payload, err = s.rehydrate(ctx, p.Payload, p.Externalized); err != nil {
		if c.Timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, extension.NewError(extension.ReasonInterceptTimeout, "")
		}
		return nil, err
	}
	v, err := fn(ctx, c)
	if c.Timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// D18: past timeoutMillis the host has given up: whatever the
		// callback returned, the answer is intercept_timeout.
		return nil, extension.NewError(extension.ReasonInterceptTimeout, "")
	}
	if err = cmp.Or(err, v.err); err != nil {
		s.logf("interceptor for %s: %v", p.Event, err)
		return nil, extension.NewError(extension.ReasonInternal, "")
	}
	if v.result.Decision == "" {
		return Continue().result, nil // the zero Verdict continues
	}
	return v.result, nil
}

// event delivers extension/event, or returns why the event is dropped.
func (s *server) event(ctx context.Context, raw json.RawMessage) error {
	var p extension.EventParams
	err := extension.Decode(extension.MethodEvent, raw, &p)
	fn := callback(s.opts.Observe, p.Event)
	if err != nil || fn == nil {
		return err
	}
	if p.Payload, err = s.rehydrate(ctx, p.Payload, p.Externalized); err == nil {
		fn(ctx, &Event{Point: p.Event, Payload: p.Payload})
	}
	return err
}

// callback returns the callback m has for point p, else its "*" fallback,
// else nil.
func callback[F InterceptFunc | ObserveFunc](m map[extension.Point]F, p extension.Point) F {
	if fn := m[p]; fn != nil {
		return fn
	}
	return m["*"]
}

// millis is a timeoutMillis as a Duration; one too large for a Duration
// (about 292 years) is no deadline, not a wrapped one.
func millis(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// checkNull refuses a null payload without its descriptor (D22), which
// no callback could see.
func checkNull(payload json.RawMessage, ext []extension.ExternalizedField) error {
	if string(payload) == "null" && len(ext) == 0 {
		return extension.NewError(extension.ReasonInvalidParams, "payload is null without an externalized /payload descriptor")
	}
	return nil
}

// rehydrate returns the payload a callback sees: the inline one, or the
// externalized one read from the host and verified (PROTOCOL.md §6.2).
// Its errors carry the protocol reason.
func (s *server) rehydrate(ctx context.Context, payload json.RawMessage, ext []extension.ExternalizedField) (json.RawMessage, error) {
	if err := checkNull(payload, ext); err != nil || len(ext) == 0 {
		return payload, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmp.Or(max(s.opts.ContentTimeout, 0), 30*time.Second))
		defer cancel()
	}
	return extension.Rehydrate(ctx, payload, ext, "/payload", s.readPage)
}

// readPage asks the host for one page of a content object.
func (s *server) readPage(ctx context.Context, p extension.ContentReadParams) (extension.ContentReadResult, error) {
	return call[extension.ContentReadResult](ctx, s, extension.MethodContentRead, p)
}

// serverKey is the context key of the server whose callback a context
// belongs to.
type serverKey struct{}

// ReadContent reads the whole content object d names from the host and
// verifies it (PROTOCOL.md §6.3), for a callback that meets a descriptor
// of its own. ctx must be the context of a callback (or derived from
// it). Payloads are read for the callbacks already: Call.Payload and
// Event.Payload are never null placeholders.
func ReadContent(ctx context.Context, d extension.ExternalizedField) ([]byte, error) {
	s, ok := ctx.Value(serverKey{}).(*server)
	if !ok {
		return nil, errors.New("sdk: ReadContent needs the context of a callback")
	}
	return extension.Rehydrate(ctx, nil, []extension.ExternalizedField{d}, d.JSONPointer, s.readPage)
}

// ActionFunc answers one extension/ui/action. An error is answered
// {"accepted":false} with the error's text as the message.
type ActionFunc func(ctx context.Context, a *extension.UIActionParams) (extension.UIActionResult, error)

// SubmitFunc takes the values of one extension/ui/submit. An error is
// answered {"accepted":false}.
type SubmitFunc func(ctx context.Context, s *extension.UISubmitParams) error

// ErrActionMissing is returned by Serve, before anything is read or
// written, when Options declares UIActions but has no Action callback.
var ErrActionMissing = errors.New("sdk: Options.UIActions declares actions but Options.Action is nil; set Action to answer them, or declare none")

// ErrDismissed is the error of a prompt the user dismissed: distinct
// from an answer, even an empty one.
var ErrDismissed = errors.New("sdk: the user dismissed the prompt")

// ErrStale is the error of a publish the host did not accept: it is
// bound to another session or generation now (D24).
var ErrStale = errors.New("sdk: the host did not accept the surface: it shows another session or generation now")

// HostUI publishes surfaces and asks questions through the host's user
// interface (PROTOCOL.md §7). Get it with [UI] from a callback's context.
// Every payload is checked before it is sent, by the rules the host
// applies (D23): a refused one is never sent.
type HostUI struct{ s *server }

// UI returns the host UI of the connection whose callback ctx belongs to,
// or nil outside a callback.
func UI(ctx context.Context) *HostUI {
	s, ok := ctx.Value(serverKey{}).(*server)
	if !ok {
		return nil
	}
	return &HostUI{s}
}

// Publish shows payload as the surface surfaceID, replacing an earlier
// one of that id. payload is an extension.UIStatusPayload,
// UICardPayload, UIFormPayload or UINotificationPayload (or a pointer to
// one), which sets the surface's kind. A payload the host would refuse
// fails here with invalid_params; [ErrStale] when the host did not accept
// it.
func (u *HostUI) Publish(ctx context.Context, surfaceID string, payload any) error {
	var kind extension.SurfaceKind
	switch payload.(type) {
	case extension.UIStatusPayload, *extension.UIStatusPayload:
		kind = extension.SurfaceStatus
	case extension.UICardPayload, *extension.UICardPayload:
		kind = extension.SurfaceCard
	case extension.UIFormPayload, *extension.UIFormPayload:
		kind = extension.SurfaceForm
	case extension.UINotificationPayload, *extension.UINotificationPayload:
		kind = extension.SurfaceNotification
	default:
		return fmt.Errorf("sdk: Publish takes a UI payload document, not %T", payload)
	}
	session, raw, err := u.prepare(surfaceID, kind, payload)
	if err != nil {
		return err
	}
	res, err := call[extension.UIPublishResult](ctx, u.s, extension.MethodUIPublish, extension.UIPublishParams{SurfaceID: surfaceID, SessionID: session.SessionID, Generation: session.Generation, Kind: kind, Payload: raw})
	if err == nil && !res.Accepted {
		err = ErrStale
	}
	return err
}

// prepare checks a surface id and a payload the way the host will.
func (u *HostUI) prepare(surfaceID string, kind extension.SurfaceKind, payload any) (extension.SessionContext, json.RawMessage, error) {
	// The session and generation of the handshake.
	var session extension.SessionContext
	if u == nil {
		return session, nil, errors.New("sdk: no connection: use UI with the context of a callback")
	}
	p := u.s.session.Load()
	if p == nil {
		return session, nil, errors.New("sdk: not ready: the handshake has not happened")
	}
	session = *p
	if surfaceID == "" {
		return session, nil, extension.NewError(extension.ReasonInvalidParams, "a surface needs an id")
	}
	raw, err := json.Marshal(payload)
	var v any
	if err == nil {
		v, err = extension.DecodeSurface(kind, raw)
	}
	// A select or multiselect field without options no user could answer.
	if form, ok := v.(*extension.UIFormPayload); ok {
		for i, f := range form.Fields {
			if (f.Kind == extension.PromptSelect || f.Kind == extension.PromptMultiselect) && len(f.Options) == 0 {
				return session, nil, extension.NewError(extension.ReasonInvalidParams, fmt.Sprintf("/fields/%d is a %s field without options", i, f.Kind))
			}
		}
	}
	return session, raw, err
}

// Ask puts the form to the user as a prompt of kind and returns the
// answers by field key; [ErrDismissed] when the user dismissed it (or the
// host dropped a stale prompt, D24).
func (u *HostUI) Ask(ctx context.Context, surfaceID string, kind extension.PromptKind, form extension.UIFormPayload) (map[string]json.RawMessage, error) {
	if form.Fields == nil {
		form.Fields = []extension.UIFormField{}
	}
	session, raw, err := u.prepare(surfaceID, extension.SurfaceForm, form)
	if err != nil {
		return nil, err
	}
	res, err := call[extension.UIRequestResult](ctx, u.s, extension.MethodUIRequest, extension.UIRequestParams{SurfaceID: surfaceID, SessionID: session.SessionID, Generation: session.Generation, Kind: kind, Payload: raw})
	switch {
	case err != nil:
		return nil, err
	case res.Cancelled:
		return nil, ErrDismissed
	}
	return res.Values, nil
}

// ask asks a single question, field key "value", and decodes its answer.
func ask[T any](ctx context.Context, u *HostUI, surfaceID string, kind extension.PromptKind, message string, options []string) (T, error) {
	var v T
	values, err := u.Ask(ctx, surfaceID, kind, extension.UIFormPayload{Message: message, Fields: []extension.UIFormField{{Key: "value", Label: message, Kind: kind, Options: options, Required: true}}})
	if err != nil {
		return v, err
	}
	raw, ok := values["value"]
	if !ok {
		return v, ErrDismissed
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("sdk: the host answered %s with %s: %w", kind, raw, err)
	}
	return v, nil
}

// Confirm asks a yes-or-no question.
func (u *HostUI) Confirm(ctx context.Context, surfaceID, message string) (bool, error) {
	return ask[bool](ctx, u, surfaceID, extension.PromptConfirm, message, nil)
}

// Input asks for a line of text.
func (u *HostUI) Input(ctx context.Context, surfaceID, message string) (string, error) {
	return ask[string](ctx, u, surfaceID, extension.PromptInput, message, nil)
}

// Select asks for one of options.
func (u *HostUI) Select(ctx context.Context, surfaceID, message string, options []string) (string, error) {
	return ask[string](ctx, u, surfaceID, extension.PromptSelect, message, options)
}

// Multiselect asks for any of options.
func (u *HostUI) Multiselect(ctx context.Context, surfaceID, message string, options []string) ([]string, error) {
	return ask[[]string](ctx, u, surfaceID, extension.PromptMultiselect, message, options)
}

// call sends one request to the host and strictly decodes its result.
func call[R any](ctx context.Context, s *server, method string, params any) (R, error) {
	var res R
	raw, err := s.connection().Call(ctx, method, params)
	if err == nil {
		err = extension.Decode(method, raw, &res)
	}
	return res, err
}

// action answers extension/ui/action (PROTOCOL.md §7.4): accepted:false,
// with its text as the message, for the callback's error.
func (s *server) action(ctx context.Context, p *extension.UIActionParams) (any, error) {
	res, err := s.opts.Action(ctx, p)
	if err != nil {
		s.logf("Action %s: %v", p.ActionID, err)
		return extension.UIActionResult{Accepted: false, Message: err.Error()}, nil
	}
	return res, nil
}

// submit answers extension/ui/submit (PROTOCOL.md §7.4): accepted:false
// for the callback's error.
func (s *server) submit(ctx context.Context, p *extension.UISubmitParams) (any, error) {
	err := s.opts.Submit(ctx, p)
	if err != nil {
		s.logf("Submit %s: %v", p.SurfaceID, err)
	}
	return extension.UISubmitResult{Accepted: err == nil}, nil
}

// Provider serves the models a sidecar declares in [Options.Providers]
// (PROTOCOL.md §5). Its methods are called concurrently.
type Provider interface {
	// Catalog answers extension/provider/catalog with the full
	// descriptors of the served models. They must carry no credential.
	Catalog(ctx context.Context) ([]extension.ProviderDescriptor, error)
	// Stream starts one stream for open. An error refuses it before
	// anything is sent: an *extension.Error travels as it is, any other
	// error is answered provider_failed and logged. Otherwise the host is
	// answered {"accepted":true} and the chunks are sent as chunks
	// yields them, numbered from max(open.SeqBase, 1), then the one
	// stream/end: a chunk of type error is not sent but ends the stream
	// with its message (build it with [ErrorChunk]); an invalid chunk
	// ends it with an error too. ctx ends when the host cancels the
	// stream or the connection ends: stop yielding then, the stream ends
	// interrupted and nothing more is sent.
	Stream(ctx context.Context, open *extension.StreamOpenParams) (iter.Seq[extension.ProviderChunk], error)
}

// invalidChunkText is the error of a stream/end after an invalid chunk
// (PROTOCOL.md §5.6).
const invalidChunkText = "the extension provider produced an invalid chunk"

// Text, Reasoning, ToolCallStart, ToolCallArgsDelta, ToolCall, Usage,
// Done and ErrorChunk build the eight chunk types (PROTOCOL.md §5.3).

// Text is a piece of assistant text.
func Text(text string) extension.ProviderChunk {
	return extension.ProviderChunk{Type: extension.ChunkText, Text: text}
}

// Reasoning is a piece of reasoning with its optional signature.
func Reasoning(text, signature string) extension.ProviderChunk {
	return extension.ProviderChunk{Type: extension.ChunkReasoning, Text: text, Signature: signature}
}

// ToolCallStart reports that the tool call id of name began.
func ToolCallStart(id, name string) extension.ProviderChunk {
	return extension.ProviderChunk{Type: extension.ChunkToolCallStart, ToolCall: &extension.ProviderToolCall{ID: id, Name: name}}
}

// ToolCallArgsDelta reports that argChars characters of the call's
// arguments have arrived so far, in all.
func ToolCallArgsDelta(id, name string, argChars int64) extension.ProviderChunk {
	return extension.ProviderChunk{Type: extension.ChunkToolCallArgsDelta, ToolCall: &extension.ProviderToolCall{ID: id, Name: name}, ArgChars: argChars}
}

// ToolCall is one complete tool call; arguments is the JSON text of its
// arguments.
func ToolCall(call extension.ProviderToolCall) extension.ProviderChunk {
	return extension.ProviderChunk{Type: extension.ChunkToolCall, ToolCall: &call}
}

// Usage is the token accounting of the answer.
func Usage(u extension.ProviderUsage) extension.ProviderChunk {
	return extension.ProviderChunk{Type: extension.ChunkUsage, Usage: &u}
}

// Done is the logical end of the assistant turn.
func Done() extension.ProviderChunk { return extension.ProviderChunk{Type: extension.ChunkDone} }

// ErrorChunk reports a provider failure with a generic message, which must
// hold no secret; blank means the frozen provider_failed text. Yielded
// from a stream it ends the stream with that message.
func ErrorChunk(message string) extension.ProviderChunk {
	return extension.ProviderChunk{Type: extension.ChunkError, Error: &extension.ProviderError{Code: extension.ProviderErrorFailed, Message: cmp.Or(message, providerFailedText)}}
}

// errServerBusy is the Conn's answer to a request past its MaxHandlers
// (PROTOCOL.md §2.5), which the package extension does not export: the
// SDK gives it to a stream/open past the bound on open streams.
var errServerBusy = &extension.Error{Code: -32099, Message: "server busy"}

// providerFailedText is the frozen message of provider_failed.
var providerFailedText = extension.NewError(extension.ReasonProviderFailed, "").Message

// catalog answers extension/provider/catalog (PROTOCOL.md §5.6).
func (s *server) catalog(ctx context.Context, _ *extension.ProviderCatalogParams) (any, error) {
	descs, err := s.opts.Provider.Catalog(ctx)
	if err != nil {
		return nil, s.providerError("Catalog", err)
	}
	return extension.ProviderCatalogResult{Providers: append([]extension.ProviderDescriptor{}, descs...)}, nil
}

// cancelStream answers extension/provider/stream/cancel.
func (s *server) cancelStream(ctx context.Context, p *extension.StreamCancelParams) (any, error) {
	s.streamsMu.Lock()
	cancel := s.streams[p.StreamID]
	s.streamsMu.Unlock()
	if cancel != nil {
		cancel()
	}
	return extension.StreamCancelResult{Cancelled: cancel != nil}, nil
}

// openStream answers extension/provider/stream/open, and has the chunks
// sent after the answer.
func (s *server) openStream(ctx context.Context, p *extension.StreamOpenParams) (any, error) {
	sctx, cancel := context.WithCancel(ctx) // ctx is the connection's: it ends with it
	s.streamsMu.Lock()
	_, dup := s.streams[p.StreamID]
	busy := len(s.streams) >= s.maxHandlers()
	if !dup && !busy {
		s.streams[p.StreamID] = cancel
	}
	s.streamsMu.Unlock()
	switch {
	case dup:
		cancel()
		return nil, extension.NewError(extension.ReasonProtocolError, fmt.Sprintf("stream %q is already open", p.StreamID))
	case busy:
		// The streams' pumps are callbacks too: their number is bounded
		// like the handlers' (PROTOCOL.md §2.5).
		cancel()
		return nil, errServerBusy
	}
	chunks, err := s.opts.Provider.Stream(sctx, p)
	if err != nil {
		s.forget(p.StreamID, cancel)
		return nil, s.providerError("Stream", err)
	}
	// The chunks follow the answer on the wire (PROTOCOL.md §5.6).
	s.pumps.Add(1)
	return extension.AnswerThen{Result: extension.StreamOpenResult{Accepted: true}, Then: func() {
		go s.pump(sctx, cancel, p, chunks)
	}}, nil
}

// providerError is the answer to a Provider method that failed.
func (s *server) providerError(what string, err error) error {
	var e *extension.Error
	if errors.As(err, &e) {
		return e
	}
	s.logf("Provider.%s: %v", what, err)
	return extension.NewError(extension.ReasonProviderFailed, "")
}

// forget removes a stream from the table.
func (s *server) forget(id string, cancel context.CancelFunc) {
	cancel()
	s.streamsMu.Lock()
	delete(s.streams, id)
	s.streamsMu.Unlock()
}

// pump sends one stream's chunks and its one stream/end (PROTOCOL.md §5.4,
// §5.6).
func (s *server) pump(ctx context.Context, cancel context.CancelFunc, p *extension.StreamOpenParams, chunks iter.Seq[extension.ProviderChunk]) {
	defer s.pumps.Done()
	conn := s.connection()
	s.running.Add(1)
	defer s.running.Add(-1)
	base := max(p.SeqBase, 1)
	end := extension.StreamEndParams{StreamID: p.StreamID}
	var sent int64
	func() {
		defer func() {
			if v := recover(); v != nil {
				s.logf("Provider.Stream for %s panicked: %v", p.ProviderRef, v)
				end.Error = providerFailedText
			}
		}()
		if chunks == nil {
			return
		}
		for c := range chunks {
			if ctx.Err() != nil {
				return // cancelled: nothing more is sent
			}
			if base+sent < base { // a seqBase so large the seqs would wrap
				end.Error = invalidChunkText
				return
			}
			if c.Type == extension.ChunkError && c.Error != nil {
				end.Error = cmp.Or(c.Error.Message, providerFailedText)
				return
			}
			frame := extension.StreamChunkParams{StreamID: p.StreamID, Seq: base + sent, Chunk: c}
			b, err := json.Marshal(c)
			if err == nil {
				err = extension.Validate("ProviderChunk", b)
			}
			if err != nil {
				s.logf("Provider.Stream for %s produced an invalid chunk: %v", p.ProviderRef, err)
				end.Error = invalidChunkText
				return
			}
			if err := conn.Notify(ctx, extension.MethodStreamChunk, frame); err != nil {
				if ctx.Err() == nil && conn.Err() == nil { // not sent: over the frame limit (D2)
					s.logf("Provider.Stream for %s: %v", p.ProviderRef, err)
					end.Error = invalidChunkText
				}
				return // else cancelled while waiting for room, or the connection ended
			}
			sent++
		}
	}()
	if sent > 0 {
		end.LastSeq = base + sent - 1
	}
	if ctx.Err() != nil {
		end.Error, end.Interrupted = "", true
	}
	// Out of the table before its end is sent: a host that has seen the
	// end may open another stream at once.
	s.forget(p.StreamID, cancel)
	if err := conn.Notify(context.Background(), extension.MethodStreamEnd, end); err != nil && conn.Err() == nil {
		s.logf("stream/end of %s: %v", p.StreamID, err)
	}
}
