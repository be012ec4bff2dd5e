package sdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reasonix-ext/extension"
	"github.com/reasonix-ext/extension/sdk"
)

// rule returns an interceptor that always rules v.
func rule(v sdk.Verdict) sdk.InterceptFunc {
	return func(context.Context, *sdk.Call) (sdk.Verdict, error) { return v, nil }
}

// interceptWith is an extension/intercept request with a timeoutMillis.
func interceptWith(id int, point extension.Point, payload string, timeoutMillis int) string {
	return request(id, extension.MethodIntercept, fmt.Sprintf(`{"event":%q,"seq":%d,"payload":%s,"timeoutMillis":%d}`, point, id, payload, timeoutMillis))
}

func TestInterceptVerdictsOnTheWireD16(t *testing.T) {
	cases := []struct {
		name string
		fn   sdk.InterceptFunc
		want string // the exact result frame member
	}{
		{"Continue", rule(sdk.Continue()), `"result":{"decision":"continue"}`},
		{"zero Verdict continues", rule(sdk.Verdict{}), `"result":{"decision":"continue"}`},
		{"Block", rule(sdk.Block("not here")), `"result":{"decision":"block","reason":"not here"}`},
		{"Replace with json.RawMessage is verbatim", rule(sdk.Replace(json.RawMessage(`{"text":"a <b> & c","n":1.50}`))),
			`"result":{"decision":"replace","replacement":{"text":"a <b> & c","n":1.50}}`},
		{"Replace with a struct is marshalled", rule(sdk.Replace(struct {
			Text string `json:"text"`
		}{"x"})), `"result":{"decision":"replace","replacement":{"text":"x"}}`},
		{"Allow", rule(sdk.Allow()), `"result":{"decision":"allow"}`},
		{"Deny", rule(sdk.Deny("policy")), `"result":{"decision":"deny","reason":"policy"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := withInterceptor(t, extension.PermissionDecision, tc.fn)
				f := p.call(intercept(2, extension.PermissionDecision, `{"name":"ls","hostDecision":"deny"}`))
				if f.Error != nil || !strings.Contains(f.raw, tc.want) {
					t.Fatalf("got %s, want it to carry %s", f.raw, tc.want)
				}
			})
		})
	}
}

func TestInterceptFailuresAreTheFrozenInternalError(t *testing.T) {
	const secret = "db password is hunter2"
	cases := []struct {
		name string
		fn   sdk.InterceptFunc
	}{
		{"Replace with invalid raw JSON", rule(sdk.Replace(json.RawMessage(`{"text":`)))},
		{"Replace with an unmarshalable value", rule(sdk.Replace(make(chan int)))},
		{"callback error", func(context.Context, *sdk.Call) (sdk.Verdict, error) { return sdk.Continue(), errors.New(secret) }},
		{"callback panic", func(context.Context, *sdk.Call) (sdk.Verdict, error) { panic(secret) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := withInterceptor(t, extension.InputReceive, tc.fn)
				// PROTOCOL.md §8.3: the frozen internal error, with the
				// detail kept off the wire; the connection survives.
				f := p.call(intercept(2, extension.InputReceive, `{"text":"hi"}`))
				wantError(t, f, "2", -32603, extension.ReasonInternal)
				if f.Error.Message != extension.NewError(extension.ReasonInternal, "").Message || strings.Contains(f.raw, "hunter2") {
					t.Fatalf("got %s, want the frozen message and nothing of the cause", f.raw)
				}
				wantResult(t, p.call(intercept(3, extension.ToolBefore, `{}`)), "3", continueResult)
			})
		})
	}
}

func TestInterceptDeadlineIsInterceptTimeoutD18(t *testing.T) {
	cases := []struct {
		name string
		fn   sdk.InterceptFunc
	}{
		{"callback returns the context's error", func(ctx context.Context, c *sdk.Call) (sdk.Verdict, error) {
			<-ctx.Done()
			return sdk.Verdict{}, ctx.Err()
		}},
		{"callback returns a verdict after the deadline", func(ctx context.Context, c *sdk.Call) (sdk.Verdict, error) {
			<-ctx.Done()
			return sdk.Block("too late"), nil
		}},
		{"callback wraps the context's error", func(ctx context.Context, c *sdk.Call) (sdk.Verdict, error) {
			<-ctx.Done()
			return sdk.Verdict{}, fmt.Errorf("lookup: %w", ctx.Err())
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := withInterceptor(t, extension.ToolBefore, tc.fn)
				// PROTOCOL.md §4.2: the callback's deadline is the
				// host's timeoutMillis; past it the answer is
				// intercept_timeout, whatever the callback returns.
				f := p.call(interceptWith(2, extension.ToolBefore, `{"name":"ls"}`, 50))
				wantError(t, f, "2", -32000, extension.ReasonInterceptTimeout)
				wantResult(t, p.call(intercept(3, extension.InputReceive, `{}`)), "3", continueResult)
			})
		})
	}
}

// TestInterceptNullPayloadNeverReachesTheCallback: a null placeholder
// without its descriptor is invalid_params; an externalized payload that
// the host no longer holds fails the call with the host's reason rather
// than handing the callback a null payload (D22).
func TestInterceptNullPayloadNeverReachesTheCallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		called := false
		opts := minimalOptions
		opts.Intercept = map[extension.Point]sdk.InterceptFunc{"*": func(context.Context, *sdk.Call) (sdk.Verdict, error) {
			called = true
			return sdk.Continue(), nil
		}}
		p := started(t, opts)
		wantError(t, p.call(request(2, extension.MethodIntercept, `{"event":"tool.before","seq":1,"payload":null,"timeoutMillis":0}`)), "2", -32602, extension.ReasonInvalidParams)
		sha := strings.Repeat("ab", 32)
		ext := `{"event":"tool.before","seq":2,"payload":null,"timeoutMillis":0,"externalized":[{"jsonPointer":"/payload","contentRef":"content_1","totalBytes":70000,"sha256":"` + sha + `"}]}`
		read := p.call(request(3, extension.MethodIntercept, ext))
		if read.Method != extension.MethodContentRead {
			t.Fatalf("got %s, want the SDK to read the ref", read.raw)
		}
		p.send(`{"jsonrpc":"2.0","id":` + string(read.ID) + `,"error":{"code":-32000,"message":"The referenced content has expired.","data":{"reason":"content_ref_expired","retryable":true}}}`)
		wantError(t, p.recv(), "3", -32000, extension.ReasonContentRefExpired)
		if called {
			t.Fatal("the callback saw a null payload")
		}
	})
}

func TestInterceptCallCarriesTheHostsCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type seen struct {
			fn       string
			call     sdk.Call
			deadline bool
		}
		calls := make(chan seen, 4)
		record := func(fn string) sdk.InterceptFunc {
			return func(ctx context.Context, c *sdk.Call) (sdk.Verdict, error) {
				_, ok := ctx.Deadline()
				calls <- seen{fn, *c, ok}
				return sdk.Continue(), nil
			}
		}
		opts := minimalOptions
		opts.Intercept = map[extension.Point]sdk.InterceptFunc{extension.ToolBefore: record("tool"), "*": record("wildcard")}
		p := started(t, opts)
		cases := []struct {
			req  string
			want seen
		}{
			{interceptWith(3, extension.ToolBefore, `{"name":"ls"}`, 250),
				seen{"tool", sdk.Call{Point: extension.ToolBefore, Seq: 3, Payload: json.RawMessage(`{"name":"ls"}`), Timeout: 250 * time.Millisecond}, true}},
			{intercept(4, extension.InputReceive, `{"text":"hi"}`),
				seen{"wildcard", sdk.Call{Point: extension.InputReceive, Seq: 4, Payload: json.RawMessage(`{"text":"hi"}`)}, false}},
		}
		for _, tc := range cases {
			p.call(tc.req)
			got := <-calls // sent before the answer was
			if got.fn != tc.want.fn || got.call.Point != tc.want.call.Point || got.call.Seq != tc.want.call.Seq ||
				string(got.call.Payload) != string(tc.want.call.Payload) || got.call.Timeout != tc.want.call.Timeout || got.deadline != tc.want.deadline {
				t.Errorf("got %s %+v (deadline %t), want %s %+v (deadline %t)", got.fn, got.call, got.deadline, tc.want.fn, tc.want.call, tc.want.deadline)
			}
		}
	})
}

func TestInterceptPointWithoutInterceptorContinues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		ran := false
		opts := minimalOptions
		opts.Intercept = map[extension.Point]sdk.InterceptFunc{extension.ToolBefore: func(context.Context, *sdk.Call) (sdk.Verdict, error) {
			mu.Lock()
			ran = true
			mu.Unlock()
			return sdk.Block("no"), nil
		}}
		p := started(t, opts)
		wantResult(t, p.call(intercept(2, extension.SessionStart, `{"phase":"start"}`)), "2", continueResult)
		mu.Lock()
		defer mu.Unlock()
		if ran {
			t.Fatal("the tool.before interceptor ran for session.start")
		}
	})
}

func TestInterceptInvalidParams(t *testing.T) {
	cases := map[string]string{
		"unknown point":          `{"event":"tool.maybe","seq":1,"payload":{},"timeoutMillis":0}`,
		"seq 0":                  `{"event":"tool.before","seq":0,"payload":{},"timeoutMillis":0}`,
		"negative timeoutMillis": `{"event":"tool.before","seq":1,"payload":{},"timeoutMillis":-1}`,
		"missing payload":        `{"event":"tool.before","seq":1,"timeoutMillis":0}`,
		"unknown member":         `{"event":"tool.before","seq":1,"payload":{},"timeoutMillis":0,"priority":1}`,
		"fractional seq":         `{"event":"tool.before","seq":1.5,"payload":{},"timeoutMillis":0}`,
	}
	for name, params := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := withInterceptor(t, "*", rule(sdk.Block("must not run")))
				wantError(t, p.call(request(2, extension.MethodIntercept, params)), "2", -32602, extension.ReasonInvalidParams)
			})
		})
	}
}

func TestObserveGetsEventsAndDropsMalformedOnes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		events := make(chan sdk.Event, 4)
		opts := minimalOptions
		opts.Observe = map[extension.Point]sdk.ObserveFunc{"*": func(ctx context.Context, e *sdk.Event) { events <- *e }}
		p := started(t, opts)
		p.send(`{"jsonrpc":"2.0","method":"extension/event","params":{"event":"tool.maybe","payload":{}}}`)
		p.send(`{"jsonrpc":"2.0","method":"extension/event","params":{"event":"tool.after","payload":{"name":"ls"}}}`)
		// Notifications are handled in arrival order: the first observed is
		// the first well-formed one.
		select {
		case e := <-events:
			if e.Point != extension.ToolAfter || string(e.Payload) != `{"name":"ls"}` {
				t.Fatalf("observed %s %s, want tool.after {\"name\":\"ls\"}", e.Point, e.Payload)
			}
		case <-time.After(hangGuard):
			t.Fatalf("no event observed within %v (hang guard)", hangGuard)
		}
	})
}

// TestObserversRoutePerPointWithWildcard: a point's own observer wins over
// "*", and "*" catches the rest.
func TestObserversRoutePerPointWithWildcard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := make(chan string, 4)
		opts := minimalOptions
		opts.Observe = map[extension.Point]sdk.ObserveFunc{
			extension.SessionStart: func(ctx context.Context, e *sdk.Event) { got <- "start:" + string(e.Point) },
			"*":                    func(ctx context.Context, e *sdk.Event) { got <- "any:" + string(e.Point) },
		}
		p := started(t, opts)
		p.send(`{"jsonrpc":"2.0","method":"extension/event","params":{"event":"session.start","payload":{}}}`)
		p.send(`{"jsonrpc":"2.0","method":"extension/event","params":{"event":"tool.after","payload":{}}}`)
		for _, want := range []string{"start:session.start", "any:tool.after"} {
			select {
			case g := <-got:
				if g != want {
					t.Fatalf("observed %q, want %q", g, want)
				}
			case <-time.After(hangGuard):
				t.Fatalf("no event observed within %v (hang guard)", hangGuard)
			}
		}
	})
}

// The reference plugin, built once per test binary into buildDir, which
// is then a plugin directory: bin/fullsidecar beside a copy of
// the example's reasonix-plugin.json.
var (
	buildOnce   sync.Once
	buildDir    string
	fullsidecar string
	buildErr    error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// fullsidecarBinary builds ./examples/fullsidecar on first use.
func fullsidecarBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "sdk-examples-"); buildErr != nil {
			return
		}
		// The example's own manifest, required, without the provider
		// list: the tests install it under other plugin IDs.
		var manifest map[string]any
		b, err := os.ReadFile(filepath.Join("examples", "fullsidecar", extension.ManifestFile))
		if err == nil {
			err = json.Unmarshal(b, &manifest)
		}
		if err == nil {
			rt := manifest["runtime"].(map[string]any)
			delete(rt, "providers")
			rt["required"] = true
			b, _ = json.Marshal(manifest)
			err = os.WriteFile(filepath.Join(buildDir, extension.ManifestFile), b, 0o644)
		}
		if err != nil {
			buildErr = err
			return
		}
		fullsidecar = filepath.Join(buildDir, "bin", "fullsidecar")
		out, err := exec.Command("go", "build", "-o", fullsidecar, "./examples/fullsidecar").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./examples/fullsidecar: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return fullsidecar
}

// startFullsidecar runs the built reference plugin as a raw-frame peer,
// with env added to its environment; stderr collects its standard error,
// readable once p.wait returned.
func startFullsidecar(t *testing.T, env ...string) (p *peer, stderr *bytes.Buffer) {
	cmd := exec.Command(fullsidecarBinary(t))
	cmd.Env = append(os.Environ(), env...)
	stderr = new(bytes.Buffer)
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p = newPeer(t, stdin, stdout)
	p.kill = func() { cmd.Process.Kill() }
	go func() {
		<-p.stdoutDone // Wait closes stdout, so every read must be done
		p.ended <- cmd.Wait()
	}()
	t.Cleanup(p.close)
	return p, stderr
}

// exitCode is the exit status of a process that ended with err.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestFullsidecarUnknownMethodScenario15(t *testing.T) {
	p, _ := startFullsidecar(t)
	p.handshake()
	f := p.call(request(2, "extension/bogus", `{}`))
	wantError(t, f, "2", -32601, extension.ReasonUnknownMethod)
}

func TestFullsidecarOversizedFrameExitsNonZeroScenario16(t *testing.T) {
	p, stderr := startFullsidecar(t)
	p.handshake()
	// D2: one line of 8 MiB + 1 KiB is connection-fatal. The sidecar
	// stops reading mid-line, so the write ends with a broken pipe.
	head := `{"jsonrpc":"2.0","id":2,"method":"extension/bogus","params":{"pad":"`
	tail := `"}}` + "\n"
	line := head + strings.Repeat("x", extension.FrameBytes+1024-len(head)-len(tail)) + tail
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		io.WriteString(p.stdin, line)
	}()
	err := p.wait()
	<-wrote
	if code := exitCode(err); code == 0 {
		t.Fatalf("exit status %d (%v), want non-zero", code, err)
	}
	if !strings.Contains(stderr.String(), "frame") {
		t.Fatalf("stderr %q does not mention the frame", stderr.String())
	}
}

func TestFullsidecarBoundedShutdownExitsZeroScenario17(t *testing.T) {
	p, stderr := startFullsidecar(t)
	p.handshake()
	wantResult(t, p.call(request(2, extension.MethodShutdown, `{"timeoutMillis":5000}`)), "2", acceptedResult)
	p.stdin.Close()
	if err := p.wait(); err != nil {
		t.Fatalf("exit: %v, want status 0; stderr %q", err, stderr.String())
	}
}

// conformanceRuntime installs the built reference plugin as plugin ID
// conformance-ext with the reference manifest and starts it through the
// host.
func conformanceRuntime(t *testing.T) (*extension.Runtime, extension.InitializeResult) {
	t.Helper()
	fullsidecarBinary(t)
	home := t.TempDir()
	if _, err := extension.Install(home, buildDir, extension.InstallOptions{Name: "conformance-ext", Link: true}); err != nil {
		t.Fatal(err)
	}
	h := &extension.Host{Home: home, Session: extension.SessionContext{SessionID: "sess-conf", WorkspaceRoot: "/ws", Generation: 1}}
	rt, err := h.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Errorf("Close = %v, want nil for the reference plugin", err)
		}
	})
	decl, ok := rt.Declaration("conformance-ext")
	if !ok {
		t.Fatalf("conformance-ext did not start; warnings %v", rt.Warnings())
	}
	return rt, decl
}

func TestFullsidecarDeclarationPassesTheHostHandshakeD9(t *testing.T) {
	_, decl := conformanceRuntime(t)
	got, err := json.Marshal(decl)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"protocolVersion":"1","name":"conformance-ext","version":"1.0.0",` +
		`"subscriptions":["input.receive","tool.before","system_prompt.build","session.start"],` +
		`"replaces":["system_prompt"],` +
		`"providers":[{"ref":"plugin/conformance-ext/fake/echo","displayName":"fullsidecar fake","model":"echo","contextWindow":64000,"tools":true,"reasoning":true,"efforts":["low","high"],"defaultEffort":"low"}],` +
		`"uiActions":[{"actionId":"demo","label":"Run the fullsidecar demo"}],"stateSchemaVersion":0}`
	if !sameJSON(got, want) {
		t.Fatalf("declaration %s\nwant %s", got, want)
	}
}

// TestD9FullsidecarUnderAManifestWithoutProvidersFailsStart: the
// reference sidecar declares its provider whatever the manifest grants,
// as upstream's does, so a required install whose manifest lacks the
// providers capability fails Host.Start with capability_not_declared.
func TestD9FullsidecarUnderAManifestWithoutProvidersFailsStart(t *testing.T) {
	bin := fullsidecarBinary(t)
	b, err := os.ReadFile(filepath.Join(buildDir, extension.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	m, err := extension.ParseManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	m.Runtime.Command, m.Runtime.Capabilities = bin, []string{"ui"}
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, extension.ManifestFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	if _, err := extension.Install(home, dir, extension.InstallOptions{Name: "conformance-ext", Link: true}); err != nil {
		t.Fatal(err)
	}
	h := &extension.Host{Home: home, Session: extension.SessionContext{SessionID: "sess-conf", WorkspaceRoot: "/ws", Generation: 1}}
	rt, err := h.Start(context.Background())
	if err == nil {
		rt.Close()
		t.Fatal("Host.Start succeeded; want capability_not_declared for the undeclared provider")
	}
	if !errors.Is(err, extension.ReasonCapabilityNotDeclared) || !strings.Contains(err.Error(), "providers capability") {
		t.Fatalf("Host.Start = %v; want capability_not_declared naming the providers capability", err)
	}
}

func TestFullsidecarInterceptsThroughTheHost(t *testing.T) {
	rt, _ := conformanceRuntime(t)
	cases := []struct {
		name    string
		point   extension.Point
		payload string
		want    extension.InterceptResult
	}{
		{"input /fs is rewritten", extension.InputReceive, `{"text":"/fs hello world"}`,
			extension.InterceptResult{Decision: extension.DecisionReplace, Replacement: json.RawMessage(`{"text":"hello world [rewritten by fullsidecar]"}`)}},
		{"plain input continues", extension.InputReceive, `{"text":"hello"}`,
			extension.InterceptResult{Decision: extension.DecisionContinue}},
		{"dangerous_exec is blocked", extension.ToolBefore, `{"name":"dangerous_exec","arguments":"{}"}`,
			extension.InterceptResult{Decision: extension.DecisionBlock, Reason: "fullsidecar blocks the tool dangerous_exec"}},
		{"read is sandboxed", extension.ToolBefore, `{"name":"read","arguments":"{\"path\":\"a\"}"}`,
			extension.InterceptResult{Decision: extension.DecisionReplace, Replacement: json.RawMessage(`{"name":"read","arguments":"{\"path\":\"a\",\"sandbox\":true}"}`)}},
		{"other tools continue", extension.ToolBefore, `{"name":"write","arguments":"{}"}`,
			extension.InterceptResult{Decision: extension.DecisionContinue}},
		{"system prompt strategy", extension.SystemPromptBuild, `{"prompt":"Be brief.","workspaceRoot":"/ws"}`,
			extension.InterceptResult{Decision: extension.DecisionReplace, Replacement: json.RawMessage(
				`{"prompt":"You are Reasonix running under the fullsidecar demo strategy.\n\nWorkspace: /ws\n\nBase prompt:\nBe brief.","workspaceRoot":"/ws"}`)}},
		{"session.start continues", extension.SessionStart, `{"phase":"start"}`,
			extension.InterceptResult{Decision: extension.DecisionContinue}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := rt.Intercept(context.Background(), tc.point, json.RawMessage(tc.payload))
			if err != nil {
				t.Fatal(err)
			}
			got := extension.InterceptResult{Decision: extension.DecisionContinue}
			switch {
			case out.Blocked:
				got = extension.InterceptResult{Decision: extension.DecisionBlock, Reason: out.Reason}
			case len(out.Replaced) > 0:
				got = extension.InterceptResult{Decision: extension.DecisionReplace, Replacement: out.Payload}
			}
			if got.Decision != tc.want.Decision || got.Reason != tc.want.Reason ||
				(tc.want.Replacement != nil || got.Replacement != nil) && !sameJSON(got.Replacement, string(tc.want.Replacement)) {
				t.Fatalf("got %+v (replacement %s), want %+v (replacement %s)", got, got.Replacement, tc.want, tc.want.Replacement)
			}
		})
	}
}

func TestFullsidecarStallHookHoldsUntilTheDeadline(t *testing.T) {
	p, _ := startFullsidecar(t, "FULLSIDECAR_STALL_ON_INPUT=wait for it")
	p.handshake()
	wantError(t, p.call(interceptWith(2, extension.InputReceive, `{"text":"wait for it"}`, 200)), "2", -32000, extension.ReasonInterceptTimeout)
	wantResult(t, p.call(interceptWith(3, extension.InputReceive, `{"text":"go on"}`, 10000)), "3", continueResult)
}

func TestFullsidecarCrashHookExitsThree(t *testing.T) {
	p, _ := startFullsidecar(t, "FULLSIDECAR_CRASH_ON_INPUT=boom")
	p.handshake()
	wantResult(t, p.call(interceptWith(2, extension.InputReceive, `{"text":"fine"}`, 10000)), "2", continueResult)
	p.send(interceptWith(3, extension.InputReceive, `{"text":"boom"}`, 10000))
	p.wantEOF()
	if code := exitCode(p.wait()); code != 3 {
		t.Fatalf("exit status %d, want 3", code)
	}
}

func TestHugeTimeoutMillisIsNoDeadlineNotAWrappedOne(t *testing.T) {
	p := withInterceptor(t, extension.ToolBefore, func(ctx context.Context, c *sdk.Call) (sdk.Verdict, error) {
		_, hasDeadline := ctx.Deadline()
		return sdk.Block(fmt.Sprint(c.Timeout, " ", hasDeadline)), nil
	})
	f := p.call(request(2, extension.MethodIntercept, `{"event":"tool.before","seq":1,"payload":{},"timeoutMillis":9223372036855}`))
	wantResult(t, f, "2", `{"decision":"block","reason":"0s false"}`)
}
