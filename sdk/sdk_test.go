package sdk_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reasonix-ext/extension"
	"github.com/reasonix-ext/extension/sdk"
)

// hangGuard bounds every wait in these tests. It is never an assertion:
// reaching it means the test hung, and the test fails saying so. Inside a
// synctest bubble it elapses on the bubble's fake clock, so a deadlock is
// reported at once.
const hangGuard = 15 * time.Second

// peer is the host's end of one sidecar connection, driven by hand with
// raw NDJSON frames: the sidecar's stdin, and the lines of its stdout.
type peer struct {
	t      *testing.T
	stdin  io.WriteCloser
	frames chan []byte // stdout lines, without "\n"; closed at EOF
	ended  chan error  // Serve's error, or the process's exit
	end    error
	endOK  bool
	kill   func() // ends a process that outlives the hang guard; nil in-process

	stdoutDone chan struct{} // closed when the stdout reader has returned
}

// newPeer starts the stdout reader of a peer.
func newPeer(t *testing.T, stdin io.WriteCloser, stdout io.Reader) *peer {
	p := &peer{t: t, stdin: stdin, frames: make(chan []byte, 64), ended: make(chan error, 1), stdoutDone: make(chan struct{})}
	go func() {
		defer close(p.stdoutDone)
		defer close(p.frames)
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				p.frames <- bytes.TrimSuffix(line, []byte("\n"))
			}
			if err != nil {
				return
			}
		}
	}()
	return p
}

// serve runs sdk.Serve over two in-memory pipes. The caller defers
// p.close, which ends Serve and joins every goroutine serve started.
func serve(t *testing.T, ctx context.Context, opts sdk.Options) *peer {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	opts.Stdin, opts.Stdout = inR, outW
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	p := newPeer(t, inW, outR)
	go func() { p.ended <- sdk.Serve(ctx, opts) }()
	return p
}

// started serves opts and completes the handshake; the peer closes when
// the test (or its synctest bubble) ends.
func started(t *testing.T, opts sdk.Options) *peer {
	t.Helper()
	p := serve(t, context.Background(), opts)
	t.Cleanup(p.close)
	p.handshake()
	return p
}

// withInterceptor is started with minimalOptions and fn as the
// interceptor of point.
func withInterceptor(t *testing.T, point extension.Point, fn sdk.InterceptFunc) *peer {
	t.Helper()
	opts := minimalOptions
	opts.Intercept = map[extension.Point]sdk.InterceptFunc{point: fn}
	return started(t, opts)
}

// send writes one frame.
func (p *peer) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("send %s: %v", line, err)
	}
}

// frame is one decoded frame the sidecar wrote.
type frame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
	raw string
}

// recv reads the next frame.
func (p *peer) recv() frame {
	p.t.Helper()
	select {
	case line, ok := <-p.frames:
		if !ok {
			p.t.Fatalf("stdout ended, want a frame (sidecar ended with %v)", p.wait())
		}
		f := frame{raw: string(line)}
		if err := json.Unmarshal(line, &f); err != nil {
			p.t.Fatalf("frame %s: %v", line, err)
		}
		return f
	case <-time.After(hangGuard):
		p.t.Fatalf("no frame within %v (hang guard)", hangGuard)
	}
	panic("unreachable")
}

// call sends a request and reads the next frame, which must answer it.
func (p *peer) call(line string) frame {
	p.t.Helper()
	p.send(line)
	return p.recv()
}

// wantEOF checks that the sidecar closed its stdout without another frame.
func (p *peer) wantEOF() {
	p.t.Helper()
	select {
	case line, ok := <-p.frames:
		if ok {
			p.t.Fatalf("got frame %s, want stdout closed", line)
		}
	case <-time.After(hangGuard):
		p.t.Fatalf("stdout still open after %v (hang guard)", hangGuard)
	}
}

// wait returns how the sidecar ended.
func (p *peer) wait() error {
	p.t.Helper()
	if !p.endOK {
		select {
		case p.end = <-p.ended:
			p.endOK = true
		case <-time.After(hangGuard):
			if p.kill != nil {
				p.kill()
			}
			p.t.Fatalf("the sidecar did not end within %v (hang guard)", hangGuard)
		}
	}
	return p.end
}

// close ends the host's side (stdin EOF), waits for the sidecar to end and
// drains its stdout, so that no goroutine of the peer is left.
func (p *peer) close() {
	p.stdin.Close()
	p.wait()
	for range p.frames {
	}
}

// wantResult checks that f answers id with a result equal to want as a
// JSON value.
func wantResult(t *testing.T, f frame, id, want string) {
	t.Helper()
	if string(f.ID) != id || f.Error != nil || !sameJSON(f.Result, want) {
		t.Fatalf("got %s, want id %s and result %s", f.raw, id, want)
	}
}

// wantError checks that f answers id ("null" for none) with code and, for a
// reason, exactly the D7 data {"reason","retryable"}; reason "" means no
// data at all.
func wantError(t *testing.T, f frame, id string, code int, reason extension.Reason) {
	t.Helper()
	if string(f.ID) != id || f.Error == nil || f.Error.Code != code {
		t.Fatalf("got %s, want id %s and error code %d", f.raw, id, code)
	}
	if reason == "" {
		if f.Error.Data != nil {
			t.Fatalf("got data %s in %s, want none", f.Error.Data, f.raw)
		}
		return
	}
	want := fmt.Sprintf(`{"reason":%q,"retryable":%t}`, reason, retryable(t, reason))
	if !sameJSON(f.Error.Data, want) {
		t.Fatalf("got data %s in %s, want %s", f.Error.Data, f.raw, want)
	}
}

// retryable reads the frozen retryable flag of reason from the canonical
// schema's error table.
func retryable(t *testing.T, reason extension.Reason) bool {
	t.Helper()
	var schema struct {
		Errors []struct {
			Reason    extension.Reason
			Retryable bool
		}
	}
	if err := json.Unmarshal(extension.CanonicalSchema(), &schema); err != nil {
		t.Fatal(err)
	}
	for _, row := range schema.Errors {
		if row.Reason == reason {
			return row.Retryable
		}
	}
	t.Fatalf("%s is not a frozen reason", reason)
	return false
}

func sameJSON(got json.RawMessage, want string) bool {
	var g, w any
	if json.Unmarshal(got, &g) != nil || json.Unmarshal([]byte(want), &w) != nil {
		return false
	}
	return reflect.DeepEqual(g, w)
}

// initParams are well-formed extension/initialize params with the given
// protocol id and version.
func initParams(protocolID, protocolVersion string) string {
	return fmt.Sprintf(`{"protocolVersion":%q,"protocolId":%q,"manifest":{},`+
		`"session":{"sessionId":"s-1","workspaceRoot":"/ws","generation":1},`+
		`"capabilities":{"contentRefs":true,"uiHost":"headless","protocolVersion":"1"}}`, protocolVersion, protocolID)
}

func request(id int, method, params string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
}

var (
	initializeRequest  = request(1, extension.MethodInitialize, initParams(extension.ProtocolID, "1"))
	initializedNotice  = `{"jsonrpc":"2.0","method":"extension/initialized","params":{}}`
	continueResult     = `{"decision":"continue"}`
	acceptedResult     = `{"accepted":true}`
	minimalOptions     = sdk.Options{Name: "t", Version: "1"}
	minimalDeclaration = `{"protocolVersion":"1","name":"t","version":"1","stateSchemaVersion":0}`
)

// intercept is an extension/intercept request for point with payload and
// no deadline.
func intercept(id int, point extension.Point, payload string) string {
	return request(id, extension.MethodIntercept, fmt.Sprintf(`{"event":%q,"seq":%d,"payload":%s,"timeoutMillis":0}`, point, id, payload))
}

// handshake initializes the sidecar and opens the barrier. The barrier
// opens on the read loop, so every frame sent afterwards is past it.
func (p *peer) handshake() frame {
	p.t.Helper()
	f := p.call(initializeRequest)
	if string(f.ID) != "1" || f.Error != nil {
		p.t.Fatalf("initialize answered %s, want a result", f.raw)
	}
	p.send(initializedNotice)
	return f
}

// wantAlive checks that the connection still serves: the barrier opens and
// an intercept is answered.
func (p *peer) wantAlive() {
	p.t.Helper()
	p.handshake()
	wantResult(p.t, p.call(intercept(99, extension.ToolBefore, `{"name":"ls"}`)), "99", continueResult)
}

func TestServeD6BarrierRefusesEarlyRequests(t *testing.T) {
	cases := []struct {
		name  string
		stage string // "new": nothing sent yet; "initialized": initialize answered
		req   string
	}{
		{"intercept before initialize", "new", intercept(7, extension.ToolBefore, `{}`)},
		{"unknown method before initialize", "new", request(7, "extension/bogus", `{}`)},
		{"initialized as a request before initialize", "new", request(7, extension.MethodInitialized, `{}`)},
		{"intercept before initialized", "initialized", intercept(7, extension.ToolBefore, `{}`)},
		{"second initialize before initialized", "initialized", request(7, extension.MethodInitialize, initParams(extension.ProtocolID, "1"))},
		{"unknown method before initialized", "initialized", request(7, "extension/bogus", `{}`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := serve(t, context.Background(), minimalOptions)
				defer p.close()
				if tc.stage == "initialized" {
					wantResult(t, p.call(initializeRequest), "1", minimalDeclaration)
				}
				// D6: only initialize and shutdown pass before the barrier,
				// and the refusal is not fatal.
				wantError(t, p.call(tc.req), "7", -32600, extension.ReasonProtocolError)
				if tc.stage == "new" {
					p.wantAlive()
					return
				}
				p.send(initializedNotice)
				wantResult(t, p.call(intercept(8, extension.ToolBefore, `{}`)), "8", continueResult)
			})
		})
	}
}

func TestServeD6BarrierRefusesInitializeAfterHandshake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := started(t, minimalOptions)
		// D6: the handshake happens once per connection.
		wantError(t, p.call(request(2, extension.MethodInitialize, initParams(extension.ProtocolID, "1"))), "2", -32600, extension.ReasonProtocolError)
		wantResult(t, p.call(intercept(3, extension.ToolBefore, `{}`)), "3", continueResult)
	})
}

func TestServeD6BarrierRefusesPipelinedSecondInitialize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}, 2), make(chan struct{})
		opts := minimalOptions
		opts.Initialize = func(context.Context, *extension.InitializeParams, *extension.InitializeResult) error {
			entered <- struct{}{}
			<-release
			return nil
		}
		p := serve(t, context.Background(), opts)
		defer p.close()
		p.send(initializeRequest)
		<-entered
		// D6: while the first initialize is being answered, a second one
		// is refused rather than run alongside it.
		wantError(t, p.call(request(2, extension.MethodInitialize, initParams(extension.ProtocolID, "1"))), "2", -32600, extension.ReasonProtocolError)
		close(release)
		wantResult(t, p.recv(), "1", minimalDeclaration)
		p.send(initializedNotice)
		wantResult(t, p.call(intercept(3, extension.ToolBefore, `{}`)), "3", continueResult)
	})
}

func TestServeD6BarrierServesShutdownEarly(t *testing.T) {
	for _, stage := range []string{"before initialize", "before initialized"} {
		t.Run(stage, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := serve(t, context.Background(), minimalOptions)
				defer p.close()
				if stage == "before initialized" {
					wantResult(t, p.call(initializeRequest), "1", minimalDeclaration)
				}
				wantResult(t, p.call(request(2, extension.MethodShutdown, `{"timeoutMillis":5000}`)), "2", acceptedResult)
				if err := p.wait(); err != nil {
					t.Fatalf("Serve = %v, want nil after an answered shutdown", err)
				}
			})
		})
	}
}

func TestServeD6BarrierDropsEarlyNotifications(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		observed := make(chan string, 8)
		opts := minimalOptions
		opts.Observe = map[extension.Point]sdk.ObserveFunc{"*": func(ctx context.Context, e *sdk.Event) { observed <- string(e.Payload) }}
		p := serve(t, context.Background(), opts)
		defer p.close()
		event := func(text string) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","method":"extension/event","params":{"event":"input.receive","payload":{"text":%q}}}`, text)
		}
		// D6: notifications before the barrier are dropped silently, and
		// an early initialized does not open it.
		p.send(event("before initialize"))
		p.send(`{"jsonrpc":"2.0","method":"extension/bogus"}`)
		p.send(initializedNotice)
		wantError(t, p.call(intercept(5, extension.ToolBefore, `{}`)), "5", -32600, extension.ReasonProtocolError)
		wantResult(t, p.call(initializeRequest), "1", minimalDeclaration)
		p.send(event("before initialized"))
		p.send(initializedNotice)
		p.send(event("after initialized"))
		// Notifications are handled in arrival order, so the first one the
		// observer sees is the first one that passed the barrier.
		select {
		case got := <-observed:
			if want := `{"text":"after initialized"}`; got != want {
				t.Fatalf("first observed payload = %s, want %s", got, want)
			}
		case <-time.After(hangGuard):
			t.Fatalf("no event observed within %v (hang guard)", hangGuard)
		}
	})
}

func TestServeHandshakeStrictDecodeFailureIsNotFatal(t *testing.T) {
	cases := map[string]string{
		"unknown member":   `{"protocolVersion":"1","protocolId":"reasonix.extension.v1","bogus":1}`,
		"missing session":  `{"protocolVersion":"1","protocolId":"reasonix.extension.v1","manifest":{},"capabilities":{"contentRefs":true,"uiHost":"headless","protocolVersion":"1"}}`,
		"folded member":    strings.Replace(initParams(extension.ProtocolID, "1"), `"protocolId"`, `"PROTOCOLID"`, 1),
		"absent params":    "",
		"null protocol id": strings.Replace(initParams(extension.ProtocolID, "1"), `"reasonix.extension.v1"`, `null`, 1),
	}
	for name, params := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := serve(t, context.Background(), minimalOptions)
				defer p.close()
				req := request(1, extension.MethodInitialize, params)
				if params == "" {
					req = `{"jsonrpc":"2.0","id":1,"method":"extension/initialize"}`
				}
				// PROTOCOL.md §3.3: invalid_params, and the connection stays.
				wantError(t, p.call(req), "1", -32602, extension.ReasonInvalidParams)
				p.wantAlive()
			})
		})
	}
}

func TestServeHandshakeFatalRefusals(t *testing.T) {
	refuse := errors.New("not today")
	cases := []struct {
		name   string
		params string
		opts   sdk.Options
		code   int
		reason extension.Reason
	}{
		{"wrong protocol id", initParams("reasonix.extension.v2", "1"), minimalOptions, -32000, extension.ReasonUnsupportedVersion},
		{"major 2", initParams(extension.ProtocolID, "2"), minimalOptions, -32000, extension.ReasonUnsupportedVersion},
		{"major 0", initParams(extension.ProtocolID, "0"), minimalOptions, -32000, extension.ReasonUnsupportedVersion},
		{"version v1", initParams(extension.ProtocolID, "v1"), minimalOptions, -32600, extension.ReasonProtocolError},
		{"blank name", initParams(extension.ProtocolID, "1"), sdk.Options{Name: " ", Version: "1"}, -32603, extension.ReasonInternal},
		{"blank version", initParams(extension.ProtocolID, "1"), sdk.Options{Name: "t"}, -32603, extension.ReasonInternal},
		{"negative state schema version", initParams(extension.ProtocolID, "1"), sdk.Options{Name: "t", Version: "1", StateSchemaVersion: -1}, -32603, extension.ReasonInternal},
		{"Initialize refuses", initParams(extension.ProtocolID, "1"), sdk.Options{Name: "t", Version: "1",
			Initialize: func(context.Context, *extension.InitializeParams, *extension.InitializeResult) error { return refuse }}, -32603, extension.ReasonInternal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs strings.Builder
				var mu sync.Mutex
				tc.opts.Logf = func(format string, args ...any) {
					mu.Lock()
					defer mu.Unlock()
					fmt.Fprintf(&logs, format+"\n", args...)
				}
				p := serve(t, context.Background(), tc.opts)
				defer p.close()
				// PROTOCOL.md §3.3: the error frame is written first,
				// then the connection ends and Serve returns the error.
				f := p.call(request(1, extension.MethodInitialize, tc.params))
				wantError(t, f, "1", tc.code, tc.reason)
				p.wantEOF()
				if err := p.wait(); !errors.Is(err, tc.reason) {
					t.Fatalf("Serve = %v, want reason %s", err, tc.reason)
				}
				mu.Lock()
				defer mu.Unlock()
				if strings.Contains(f.raw, refuse.Error()) || tc.opts.Initialize != nil && !strings.Contains(logs.String(), "refus") {
					t.Fatalf("frame %s, log %q: want the callback's error in the log only", f.raw, logs.String())
				}
			})
		})
	}
}

func TestServeHandshakeDeclaration(t *testing.T) {
	noop := func(context.Context, *sdk.Call) (sdk.Verdict, error) { return sdk.Continue(), nil }
	cases := []struct {
		name string
		opts sdk.Options
		want string
	}{
		{"subscriptions from the Intercept map in point order, without the wildcard",
			sdk.Options{Name: "t", Version: "1", Intercept: map[extension.Point]sdk.InterceptFunc{
				extension.ToolBefore: noop, extension.InputReceive: noop, "*": noop}},
			`{"protocolVersion":"1","name":"t","version":"1","subscriptions":["input.receive","tool.before"],"stateSchemaVersion":0}`},
		{"subscriptions from Observe too",
			sdk.Options{Name: "t", Version: "1", Intercept: map[extension.Point]sdk.InterceptFunc{extension.ToolBefore: noop},
				Observe: map[extension.Point]sdk.ObserveFunc{extension.SessionStart: func(context.Context, *sdk.Event) {}}},
			`{"protocolVersion":"1","name":"t","version":"1","subscriptions":["session.start","tool.before"],"stateSchemaVersion":0}`},
		{"explicit subscriptions win",
			sdk.Options{Name: "t", Version: "1", Subscriptions: []extension.Point{extension.SessionStart},
				Intercept: map[extension.Point]sdk.InterceptFunc{extension.ToolBefore: noop}},
			`{"protocolVersion":"1","name":"t","version":"1","subscriptions":["session.start"],"stateSchemaVersion":0}`},
		{"the whole declaration",
			sdk.Options{Name: "t", Version: "1", Replaces: []string{"system_prompt"}, StateSchemaVersion: 3,
				Providers: []extension.ProviderDescriptor{{Ref: "plugin/t/fake/echo", Model: "echo"}}, Provider: yielding(),
				Action: func(context.Context, *extension.UIActionParams) (extension.UIActionResult, error) {
					return extension.UIActionResult{}, nil
				},
				UIActions: []extension.UIActionDecl{{ActionID: "demo", Label: "Demo"}}},
			`{"protocolVersion":"1","name":"t","version":"1","replaces":["system_prompt"],"providers":[{"ref":"plugin/t/fake/echo","model":"echo"}],"uiActions":[{"actionId":"demo","label":"Demo"}],"stateSchemaVersion":3}`},
		{"protocolVersion forced to 1 after Initialize",
			sdk.Options{Name: "t", Version: "1", Initialize: func(_ context.Context, p *extension.InitializeParams, r *extension.InitializeResult) error {
				r.ProtocolVersion, r.Name = "7", p.Session.SessionID
				return nil
			}},
			`{"protocolVersion":"1","name":"s-1","version":"1","stateSchemaVersion":0}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := serve(t, context.Background(), tc.opts)
				defer p.close()
				wantResult(t, p.call(initializeRequest), "1", tc.want)
			})
		})
	}
}

func TestServeUnknownMethodCarriesData(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := started(t, minimalOptions)
		// PROTOCOL.md §2.6: unknown notifications are dropped, so the
		// next frame answers the request after it.
		p.send(`{"jsonrpc":"2.0","method":"extension/bogus","params":{}}`)
		f := p.call(request(2, "extension/bogus", `{}`))
		wantError(t, f, "2", -32601, extension.ReasonUnknownMethod)
		if want := "method not found: extension/bogus"; f.Error.Message != want {
			t.Fatalf("message = %q, want %q", f.Error.Message, want)
		}
		wantResult(t, p.call(intercept(3, extension.ToolBefore, `{}`)), "3", continueResult)
	})
}

func TestServeStrictEnvelopeErrorsKeepTheConnection(t *testing.T) {
	cases := []struct {
		name, line, id string
		code           int
	}{
		{"wrong jsonrpc", `{"jsonrpc":"1.0","id":5,"method":"extension/intercept","params":{}}`, "5", -32600},
		{"missing jsonrpc", `{"id":5,"method":"extension/intercept","params":{}}`, "5", -32600},
		{"string id", `{"jsonrpc":"2.0","id":"5","method":"extension/intercept","params":{}}`, "null", -32600},
		{"fractional id", `{"jsonrpc":"2.0","id":5.5,"method":"extension/intercept","params":{}}`, "null", -32600},
		{"array params", `{"jsonrpc":"2.0","id":5,"method":"extension/intercept","params":[1]}`, "5", -32600},
		{"scalar params", `{"jsonrpc":"2.0","id":5,"method":"extension/intercept","params":3}`, "5", -32600},
		{"result and method", `{"jsonrpc":"2.0","id":5,"method":"extension/intercept","params":{},"result":{}}`, "5", -32600},
		{"batch", `[{"jsonrpc":"2.0","id":5,"method":"extension/intercept","params":{}}]`, "null", -32600},
		{"scalar frame", `5`, "null", -32600},
		{"not JSON", `{"jsonrpc":`, "null", -32700},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := started(t, minimalOptions)
				// PROTOCOL.md §2.4, D4, D5, D7: answered, and survived.
				wantError(t, p.call(tc.line), tc.id, tc.code, extension.ReasonProtocolError)
				wantResult(t, p.call(intercept(6, extension.ToolBefore, `{}`)), "6", continueResult)
			})
		})
	}
}

func TestServePoolOf32AnswersTheThirtyThirdServerBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan int64, 32), make(chan struct{})
		opts := minimalOptions
		opts.Intercept = map[extension.Point]sdk.InterceptFunc{
			"*": func(ctx context.Context, c *sdk.Call) (sdk.Verdict, error) {
				entered <- c.Seq
				<-release
				return sdk.Continue(), nil
			},
		}
		p := started(t, opts)
		for id := 10; id < 42; id++ {
			p.send(intercept(id, extension.ToolBefore, `{}`))
		}
		for range 32 {
			select {
			case <-entered:
			case <-time.After(hangGuard):
				t.Fatalf("fewer than 32 interceptors running after %v (hang guard)", hangGuard)
			}
		}
		// PROTOCOL.md §2.5: with 32 callbacks held, the next request is
		// answered at once with -32099 and no data.
		f := p.call(intercept(42, extension.ToolBefore, `{}`))
		wantError(t, f, "42", -32099, "")
		if f.Error.Message != "server busy" {
			t.Fatalf("message = %q, want %q", f.Error.Message, "server busy")
		}
		close(release)
		answered := map[string]bool{}
		for range 32 {
			f := p.recv()
			if f.Error != nil || !sameJSON(f.Result, continueResult) || answered[string(f.ID)] {
				t.Fatalf("got %s, want one continue per held request", f.raw)
			}
			answered[string(f.ID)] = true
		}
		// Exactly one -32099: the next frame answers the next request.
		wantResult(t, p.call(request(50, extension.MethodShutdown, `{"timeoutMillis":0}`)), "50", acceptedResult)
	})
}

func TestServeD11ShutdownAnswersThenReturnsNil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ran := make(chan struct{}, 1)
		opts := minimalOptions
		opts.Shutdown = func(ctx context.Context) error { ran <- struct{}{}; return errors.New("cleanup failed") }
		p := started(t, opts)
		// PROTOCOL.md §3.6: accepted (even when the callback fails),
		// then the sidecar's side closes and Serve returns nil, with the
		// host's stdin still open.
		wantResult(t, p.call(request(2, extension.MethodShutdown, `{"timeoutMillis":5000}`)), "2", acceptedResult)
		p.wantEOF()
		if err := p.wait(); err != nil {
			t.Fatalf("Serve = %v, want nil", err)
		}
		select {
		case <-ran:
		default:
			t.Fatal("the Shutdown callback did not run")
		}
	})
}

func TestServeD11ShutdownCallbackBoundedByTimeoutMillis(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		saw := make(chan error, 1)
		opts := minimalOptions
		opts.Shutdown = func(ctx context.Context) error {
			<-ctx.Done()
			saw <- ctx.Err()
			return ctx.Err()
		}
		p := started(t, opts)
		wantResult(t, p.call(request(2, extension.MethodShutdown, `{"timeoutMillis":50}`)), "2", acceptedResult)
		if err := <-saw; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the callback's context ended with %v, want the timeoutMillis deadline", err)
		}
		if err := p.wait(); err != nil {
			t.Fatalf("Serve = %v, want nil", err)
		}
	})
}

func TestServeD11ShutdownNegativeTimeoutIsInvalidParams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := started(t, minimalOptions)
		wantError(t, p.call(request(2, extension.MethodShutdown, `{"timeoutMillis":-1}`)), "2", -32602, extension.ReasonInvalidParams)
		wantResult(t, p.call(request(3, extension.MethodShutdown, `{"timeoutMillis":0}`)), "3", acceptedResult)
	})
}

func TestServeReturnsNilOnHostEOF(t *testing.T) {
	for _, stage := range []string{"before initialize", "after the handshake"} {
		t.Run(stage, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := serve(t, context.Background(), minimalOptions)
				defer p.close()
				if stage == "after the handshake" {
					p.handshake()
				}
				p.stdin.Close()
				if err := p.wait(); err != nil {
					t.Fatalf("Serve = %v, want nil on stdin EOF", err)
				}
			})
		})
	}
}

func TestServeReturnsContextErrorOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		p := serve(t, ctx, minimalOptions)
		defer p.close()
		p.handshake()
		cancel()
		if err := p.wait(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Serve = %v, want context.Canceled", err)
		}
		p.wantEOF()
	})
}

// inlineBound is the default of extension.ConnOptions.InlineBound, which
// the SDK keeps: how long a callback runs on the reader goroutine before
// reading moves on.
const inlineBound = 200 * time.Microsecond

// stopDuringCallback runs Serve, holds one intercept in callback, closes
// stdin while it runs, and returns how long (on the bubble's fake clock)
// Serve took after stdin closed and what it returned.
func stopDuringCallback(t *testing.T, opts sdk.Options, callback func(ctx context.Context) (sdk.Verdict, error)) (time.Duration, error) {
	entered := make(chan struct{})
	opts.Intercept = map[extension.Point]sdk.InterceptFunc{
		"*": func(ctx context.Context, c *sdk.Call) (sdk.Verdict, error) {
			close(entered)
			return callback(ctx)
		},
	}
	p := started(t, opts)
	p.send(intercept(2, extension.ToolBefore, `{"name":"x","arguments":"{}"}`))
	<-entered
	start := time.Now()
	p.stdin.Close()
	err := p.wait()
	return time.Since(start), err
}

func TestServeAbandonsACallbackThatIgnoresCancellationD11(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var (
			mu     sync.Mutex // Logf is called from the Conn's goroutines too
			logged []string
		)
		opts := minimalOptions
		opts.StopGrace = 200 * time.Millisecond
		opts.Logf = func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			logged = append(logged, fmt.Sprintf(format, args...))
		}
		waited, err := stopDuringCallback(t, opts, func(ctx context.Context) (sdk.Verdict, error) {
			<-release // ignores ctx: the bug StopGrace guards against
			return sdk.Continue(), nil
		})
		if !errors.Is(err, sdk.ErrCallbacksAbandoned) {
			t.Fatalf("Serve = %v, want ErrCallbacksAbandoned", err)
		}
		// The held callback runs on the reader, so the end of stdin is read
		// once reading has moved on, InlineBound after the callback began.
		if want := inlineBound + opts.StopGrace; waited != want {
			t.Fatalf("Serve returned after %v, want exactly InlineBound + StopGrace = %v (fake clock)", waited, want)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(logged) == 0 || !strings.Contains(logged[len(logged)-1], "abandoned") {
			t.Fatalf("log %q, want a line saying the callback was abandoned", logged)
		}
		close(release) // let the bubble's last goroutine end
	})
}

func TestServeWaitsForCallbacksThatHonourCancellationD11(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		waited, err := stopDuringCallback(t, minimalOptions, func(ctx context.Context) (sdk.Verdict, error) {
			<-ctx.Done()
			return sdk.Verdict{}, ctx.Err()
		})
		if err != nil {
			t.Fatalf("Serve = %v, want nil on stdin EOF", err)
		}
		if waited != inlineBound {
			t.Fatalf("Serve took %v of fake time, want InlineBound %v: the callback returned as soon as reading moved on and saw stdin's end", waited, inlineBound)
		}
	})
}

// stuckReader is a stdin whose Close does not interrupt a Read, like a
// terminal in blocking mode; Read returns once release is closed.
type stuckReader struct{ release chan struct{} }

func (r stuckReader) Read([]byte) (int, error) { <-r.release; return 0, io.EOF }
func (r stuckReader) Close() error             { return nil }

func TestServeStopTimeoutWhenStdinWillNotClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := stuckReader{release: make(chan struct{})}
		outR, outW := io.Pipe()
		go io.Copy(io.Discard, outR)
		opts := minimalOptions
		opts.Stdin, opts.Stdout = in, outW
		opts.Logf = func(string, ...any) {}
		ctx, cancel := context.WithCancel(context.Background())
		ended := make(chan error, 1)
		go func() { ended <- sdk.Serve(ctx, opts) }()
		synctest.Wait() // Serve is blocked reading stdin
		start := time.Now()
		cancel()
		err := <-ended
		if !errors.Is(err, context.Canceled) || !errors.Is(err, sdk.ErrStopTimeout) || errors.Is(err, sdk.ErrCallbacksAbandoned) {
			t.Fatalf("Serve = %v, want context.Canceled with ErrStopTimeout (no callback was running)", err)
		}
		if waited := time.Since(start); waited != sdk.DefaultStopGrace {
			t.Fatalf("Serve returned after %v, want DefaultStopGrace %v (fake clock)", waited, sdk.DefaultStopGrace)
		}
		close(in.release) // let the reader, and the bubble, end
		outR.Close()
	})
}
