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
// numbers them and ends the stream (the package's Provider example, in
// its documentation on pkg.go.dev or in example_test.go). Payloads the
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
	stopping  bool                          // shutdown has cancelled the streams: no stream opens
	pumps     sync.WaitGroup                // the streams' pumps, joined by shutdown and close
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

// shutdownRequest answers extension/shutdown (D11): every open stream
// ends interrupted (D30), then the Shutdown callback runs, both bounded by
// timeoutMillis; the answer is written, then the sidecar's side closes
// and Serve returns nil (PROTOCOL.md §3.6).
func (s *server) shutdownRequest(ctx context.Context, p *extension.ShutdownParams) (any, error) {
	if d := millis(p.TimeoutMillis); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	// The answer ends the connection (D11), so each stream's pump, its
	// producer stopped, sends its one stream/end before it: the streams
	// cancelled here, and those whose cancel or end is on its way.
	s.streamsMu.Lock()
	s.stopping = true
	for _, cancel := range s.streams {
		cancel()
	}
	s.streamsMu.Unlock()
	done := make(chan error, 1)
	go func() {
		s.pumps.Wait()
		if s.opts.Shutdown == nil {
			done <- nil
			return
		}
		done <- s.opts.Shutdown(ctx)
	}()
	select {
	case err := <-done:
		if err != nil {
			s.logf("Shutdown: %v", err)
		}
	case <-ctx.Done():
		s.logf("the streams' ends or the Shutdown callback overran timeoutMillis=%d", p.TimeoutMillis)
	}
	return extension.ShutdownResult{Accepted: true}, nil
}
