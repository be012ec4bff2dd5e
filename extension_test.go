package extension_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reasonix-ext/extension"
)

var bg = context.Background()

func interceptParams(seq int64, payload string) extension.InterceptParams {
	return extension.InterceptParams{Event: extension.ToolBefore, Seq: seq, Payload: json.RawMessage(payload), TimeoutMillis: 5000}
}

func TestStartAndCloseCooperativeSidecarD11(t *testing.T) {
	home := installPlugins(t, plugin{name: "good", fixture: "sdk", runtime: map[string]any{"intercepts": []string{"tool.before"}}})
	rt, err := testHost(home).Start(bg)
	if err != nil {
		t.Fatal(err)
	}
	s := rt.Sidecar("good")
	if s == nil {
		t.Fatalf("sidecar good not started; warnings %v", rt.Warnings())
	}
	var res extension.InterceptResult
	if err := s.Call(bg, extension.MethodIntercept, interceptParams(1, `{"name":"ls"}`), &res); err != nil || res.Decision != extension.DecisionContinue {
		t.Fatalf("intercept = %+v, %v", res, err)
	}
	if err := rt.Close(); err != nil {
		t.Fatalf("Close = %v, want nil for a cooperative sidecar", err)
	}
	assertGone(t, pidOf(t, home, "good"))
	if err := s.Call(bg, extension.MethodIntercept, interceptParams(2, `{}`), &res); !errors.Is(err, extension.ReasonProviderInterrupted) {
		t.Fatalf("call after Close = %v, want provider_interrupted", err)
	}
	if err := rt.Close(); err != nil {
		t.Fatalf("second Close = %v, want the same nil", err)
	}
}

// startOne starts a generation of one required plugin and returns Start's
// error.
func startOne(t *testing.T, p plugin) (string, error) {
	t.Helper()
	checkLeaks(t)
	p.required = true
	home := installPlugins(t, p)
	rt, err := testHost(home).Start(bg)
	if err == nil {
		rt.Close()
	}
	return home, err
}

func TestHandshakeMatrixD9(t *testing.T) {
	decl := func(extra string) string {
		return `{"protocolVersion":"1","name":"m","version":"1","stateSchemaVersion":0` + extra + `}`
	}
	provider := func(ref string) string { return `,"providers":[{"ref":"` + ref + `"}]` }
	action := func(id string) string { return `,"uiActions":[{"actionId":"` + id + `"}]` }
	cases := []struct {
		name    string
		result  string
		runtime map[string]any
		want    extension.Reason
		msg     string
	}{
		{"major 2", `{"protocolVersion":"2","name":"m","version":"1","stateSchemaVersion":0}`, nil, extension.ReasonUnsupportedVersion, "major 2"},
		{"major 0", `{"protocolVersion":"0","name":"m","version":"1","stateSchemaVersion":0}`, nil, extension.ReasonUnsupportedVersion, "major 0"},
		{"non-integer version", `{"protocolVersion":"v1","name":"m","version":"1","stateSchemaVersion":0}`, nil, extension.ReasonProtocolError, `"v1"`},
		{"malformed result", `{"protocolVersion":"1","name":"m","version":"1"}`, nil, extension.ReasonProtocolError, "stateSchemaVersion"},
		{"case-variant member in result", `{"protocolVersion":"1","Name":"m","name":"m","version":"1","stateSchemaVersion":0}`, nil, extension.ReasonProtocolError, "case-sensitive"},
		{"subscription beyond intercepts", decl(`,"subscriptions":["tool.before","input.receive"]`), map[string]any{"intercepts": []string{"tool.before"}}, extension.ReasonCapabilityNotDeclared, `"input.receive"`},
		{"replaces beyond replaces", decl(`,"replaces":["system_prompt","context"]`), map[string]any{"replaces": []string{"system_prompt"}}, extension.ReasonCapabilityNotDeclared, `"context"`},
		{"provider without the capability", decl(provider("plugin/m/fake/echo")), nil, extension.ReasonCapabilityNotDeclared, "providers capability"},
		{"provider outside plugin/<id>/", decl(provider("plugin/other/fake/echo")), map[string]any{"capabilities": []string{"providers"}}, extension.ReasonCapabilityNotDeclared, "outside its namespace"},
		{"provider without a name after the prefix", decl(provider("plugin/m/")), map[string]any{"capabilities": []string{"providers"}}, extension.ReasonCapabilityNotDeclared, "outside its namespace"},
		{"provider missing from the manifest list", decl(provider("plugin/m/fake/b")), map[string]any{"capabilities": []string{"providers"}, "providers": []string{"plugin/m/fake/a"}}, extension.ReasonCapabilityNotDeclared, "runtime.providers"},
		{"UI action without the ui capability", decl(action("demo")), nil, extension.ReasonCapabilityNotDeclared, "ui capability"},
		{"UI action with an invalid id", decl(action("Demo.Run")), map[string]any{"capabilities": []string{"ui"}}, extension.ReasonCapabilityNotDeclared, "must match"},
		{"UI action missing from the manifest list", decl(action("other")), map[string]any{"capabilities": []string{"ui"}, "uiActions": []string{"demo"}}, extension.ReasonCapabilityNotDeclared, "runtime.uiActions"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home, err := startOne(t, plugin{name: "m", fixture: "raw", env: map[string]string{"FIXTURE_RESULT": c.result}, runtime: c.runtime})
			var se *extension.StartError
			if !errors.Is(err, c.want) || !errors.As(err, &se) || se.Stage != "handshake" || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("Start = %v\nwant %s at stage handshake mentioning %s", err, c.want, c.msg)
			}
			assertGone(t, pidOf(t, home, "m"))
		})
	}
	t.Run("accepted within the manifest", func(t *testing.T) {
		_, err := startOne(t, plugin{name: "m", fixture: "raw",
			env:     map[string]string{"FIXTURE_RESULT": decl(`,"subscriptions":["tool.before"],"replaces":["system_prompt"]` + strings.TrimPrefix(provider("plugin/m/fake/echo"), "") + action("demo"))},
			runtime: map[string]any{"intercepts": []string{"tool.before"}, "replaces": []string{"system_prompt"}, "capabilities": []string{"providers", "ui"}}})
		if err != nil {
			t.Fatalf("Start = %v, want a declaration within the manifest accepted", err)
		}
	})
}

func TestBarrierPoisonsTheStartD6(t *testing.T) {
	cases := []struct{ fixture, says string }{
		{"early-request", `request "host/ui/publish" before extension/initialized`},
		{"early-notification", `notification "extension/provider/stream/end" before extension/initialized`},
		{"stray-response", `a response to id 77 before extension/initialized`},
		{"garbage", `an unparsable frame`},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			home, err := startOne(t, plugin{name: "b", fixture: c.fixture})
			if !errors.Is(err, extension.ReasonProtocolError) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("Start = %v\nwant protocol_error saying %s", err, c.says)
			}
			assertGone(t, pidOf(t, home, "b"))
		})
	}
}

// TestBarrierIsJudgedBeforeStartReturnsD6: a notification written right
// after the initialize answer, before extension/initialized can have been
// read, is pre-barrier when the host reads it before it began to write
// extension/initialized, and tolerated after. Either way Start knows it:
// the start fails naming it, or it succeeds and the sidecar never
// "crashes" over it a moment later. 200 runs vary the interleaving.
func TestBarrierIsJudgedBeforeStartReturnsD6(t *testing.T) {
	home := installPlugins(t, plugin{name: "late", fixture: "late-notification"})
	outcomes := map[string]int{}
	for run := range 200 {
		h := testHost(home)
		var crashed atomic.Bool
		h.OnCrash = func(string, error) { crashed.Store(true) }
		rt, err := h.Start(bg)
		if err != nil {
			if !errors.Is(err, extension.ReasonProtocolError) || !strings.Contains(err.Error(), `notification "extension/provider/stream/end" before extension/initialized`) {
				t.Fatalf("run %d: Start = %v, want success or the pre-barrier protocol_error", run, err)
			}
			outcomes["refused"]++
			continue
		}
		if err := rt.Close(); err != nil || crashed.Load() {
			t.Fatalf("run %d: Start succeeded, then Close = %v, crashed = %v: the barrier was judged after Start returned", run, err, crashed.Load())
		}
		outcomes["started"]++
	}
	t.Logf("outcomes of 200 runs: %v", outcomes)
}

func TestStartupRunsAtMostFourAtOnceD10(t *testing.T) {
	dir := t.TempDir()
	var plugins []plugin
	for i := range 8 {
		plugins = append(plugins, plugin{name: fmt.Sprintf("g%d", i), fixture: "gauge",
			env: map[string]string{"FIXTURE_DIR": dir, "FIXTURE_TOTAL": "8", "FIXTURE_BOUND": "4"}})
	}
	home := installPlugins(t, plugins...)
	rt, err := testHost(home).Start(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if n := len(rt.Sidecars()); n != 8 {
		t.Fatalf("%d sidecars started, want 8 (warnings %v)", n, rt.Warnings())
	}
	// Each gauge holds its answer while four peers initialize, long enough
	// for a fifth to appear if the host broke the bound, and records the
	// most it saw.
	peak := 0
	for i := range 8 {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("peak-g%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(string(b))
		peak = max(peak, n)
	}
	if peak != 4 {
		t.Fatalf("at most %d sidecars initialized at once, want exactly the bound 4", peak)
	}
}

func TestStalledStartIsCutOffBySharedDeadlineD10(t *testing.T) {
	home := installPlugins(t,
		plugin{name: "a-good", fixture: "sdk"},
		plugin{name: "b-stalled", fixture: "stall-initialize"},
	)
	h := testHost(home)
	// Long enough for a-good's handshake on a loaded machine; b-stalled
	// never answers, so the deadline still cuts it off.
	h.StartupTimeout = 3 * time.Second
	rt, err := h.Start(bg)
	if err != nil {
		t.Fatalf("Start = %v, want the optional stall as a warning", err)
	}
	defer rt.Close()
	w := rt.Warnings()
	if len(w) != 1 || w[0].Plugin != "b-stalled" || !errors.Is(w[0].Err, context.DeadlineExceeded) {
		t.Fatalf("warnings %v, want one deadline warning for b-stalled", w)
	}
	assertGone(t, pidOf(t, home, "b-stalled"))
	if rt.Sidecar("a-good") == nil {
		t.Fatal("a-good did not start")
	}
}

func TestRequiredFailureStopsEverySidecarD10(t *testing.T) {
	bad := `{"protocolVersion":"2","name":"x","version":"1","stateSchemaVersion":0}`
	home := installPlugins(t,
		plugin{name: "a", fixture: "sdk"},
		plugin{name: "b", fixture: "raw", required: true, env: map[string]string{"FIXTURE_RESULT": bad}},
		plugin{name: "c", fixture: "sdk"},
	)
	_, err := testHost(home).Start(bg)
	if err == nil || !strings.Contains(err.Error(), "required extension runtime b failed to start") || !errors.Is(err, extension.ReasonUnsupportedVersion) {
		t.Fatalf("Start = %v, want b's required failure", err)
	}
	for _, name := range []string{"a", "b", "c"} {
		assertGone(t, pidOf(t, home, name))
	}
}

func TestOptionalFailuresWarnInRecordOrderD10(t *testing.T) {
	bad := `{"protocolVersion":"2","name":"x","version":"1","stateSchemaVersion":0}`
	home := installPlugins(t,
		plugin{name: "z-bad", fixture: "raw", env: map[string]string{"FIXTURE_RESULT": bad}},
		plugin{name: "m-good", fixture: "sdk"},
		plugin{name: "a-bad", fixture: "garbage"},
	)
	var live []string
	h := testHost(home)
	h.OnWarning = func(w *extension.PluginError) { live = append(live, w.Plugin) }
	rt, err := h.Start(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var got []string
	for _, w := range rt.Warnings() {
		got = append(got, w.Plugin)
		// What Start's doc promises a host that wired no callback.
		var se *extension.StartError
		if _, started := rt.Declaration(w.Plugin); w.Op != "start" || !errors.As(w, &se) || se.Plugin != w.Plugin || started {
			t.Errorf("warning %v: want Op start, a *StartError for %s, and no declaration", w, w.Plugin)
		}
	}
	// The record's order is name order (D10, PROTOCOL.md §3.2), whatever
	// the order of installing and of failing.
	if strings.Join(got, ",") != "a-bad,z-bad" || strings.Join(live, ",") != "a-bad,z-bad" {
		t.Fatalf("warnings in order %v (callback %v), want a-bad,z-bad", got, live)
	}
	if rt.Sidecar("m-good") == nil {
		t.Fatal("m-good did not start")
	}
}

func TestShutdownKillsSidecarThatIgnoresItD11(t *testing.T) {
	home := installPlugins(t, plugin{name: "deaf", fixture: "ignore-shutdown"})
	h := testHost(home)
	h.ShutdownTimeout, h.StdinGrace = 200*time.Millisecond, 100*time.Millisecond
	rt, err := h.Start(bg)
	if err != nil {
		t.Fatal(err)
	}
	err = rt.Close()
	if !errors.Is(err, extension.ReasonShutdownTimeout) {
		t.Fatalf("Close = %v, want shutdown_timeout", err)
	}
	assertGone(t, pidOf(t, home, "deaf"))
}

// TestShutdownReportsANonZeroExitD11: a sidecar that answers shutdown but
// then exits with status 3 has not stopped cleanly; Close says so, naming
// the plugin, and nothing is left running.
func TestShutdownReportsANonZeroExitD11(t *testing.T) {
	home := installPlugins(t, plugin{name: "sloppy", fixture: "raw", env: map[string]string{"FIXTURE_RESULT": okResult, "FIXTURE_EXIT": "3"}})
	rt, err := testHost(home).Start(bg)
	if err != nil {
		t.Fatal(err)
	}
	err = rt.Close()
	var pe *extension.PluginError
	if !errors.As(err, &pe) || pe.Plugin != "sloppy" || pe.Op != "shutdown" || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("Close = %v, want a PluginError for sloppy's shutdown naming exit status 3", err)
	}
	assertGone(t, pidOf(t, home, "sloppy"))
}

func TestShutdownKillsGrandchildHoldingStdoutD12(t *testing.T) {
	gcPid := filepath.Join(t.TempDir(), "gcpid")
	home := installPlugins(t, plugin{name: "parent", fixture: "grandchild", env: map[string]string{"FIXTURE_GCPIDFILE": gcPid}})
	usedFixtures["hold-stdout"] = true
	h := testHost(home)
	h.StdinGrace = time.Minute // the parent exits at once: only its grandchild is killed
	rt, err := h.Start(bg)
	if err != nil {
		t.Fatal(err)
	}
	err = rt.Close()
	if !errors.Is(err, extension.ReasonShutdownTimeout) {
		t.Fatalf("Close = %v, want shutdown_timeout: the group had to be killed", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "exited but left processes in its group") || strings.Contains(msg, "did not exit cleanly") {
		t.Fatalf("Close = %v, want it to say the sidecar exited and only what it left behind was killed", err)
	}
	parent := pidOf(t, home, "parent")
	assertGone(t, parent)
	assertGone(t, readPid(t, gcPid))
}

// goroutines returns the number of goroutines once it stops falling, up to
// a bounded wait: goroutines that were told to stop need a moment to go.
func settledGoroutines(limit int) int {
	deadline := time.Now().Add(5 * time.Second)
	n := runtime.NumGoroutine()
	for n > limit && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	return n
}

func TestCrashFailsEveryPendingCallD13(t *testing.T) {
	before := runtime.NumGoroutine()
	home := installPlugins(t, plugin{name: "victim", fixture: "sdk", env: map[string]string{"FIXTURE_HOLD": "1"}})
	var crashes atomic.Int32
	var crashErr error
	h := testHost(home)
	h.OnCrash = func(plugin string, err error) { crashes.Add(1); crashErr = err }
	rt, err := h.Start(bg)
	if err != nil {
		t.Fatal(err)
	}
	s := rt.Sidecar("victim")
	errs := make(chan error, 50)
	var sent sync.WaitGroup
	for i := range 50 {
		sent.Add(1)
		go func() {
			sent.Done()
			var res extension.InterceptResult
			errs <- s.Call(bg, extension.MethodIntercept, interceptParams(int64(i+1), `{}`), &res)
		}()
	}
	sent.Wait()
	// Wait until the sidecar has read all 50 requests, so they are truly
	// in flight on the wire.
	for s.Stats().FramesOut < 52 { // initialized + 50 intercepts + the initialize request
		runtime.Gosched()
	}
	proc, err := os.FindProcess(s.PID())
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		err := <-errs
		if !errors.Is(err, extension.ReasonProviderInterrupted) || !strings.Contains(err.Error(), "victim") {
			t.Fatalf("pending call = %v, want provider_interrupted naming victim", err)
		}
	}
	var res extension.InterceptResult
	if err := s.Call(bg, extension.MethodIntercept, interceptParams(99, `{}`), &res); !errors.Is(err, extension.ReasonProviderInterrupted) {
		t.Fatalf("later call = %v, want provider_interrupted", err)
	}
	rt.Close()
	// Close joined the writer: initialize, initialized and the 50 calls,
	// and nothing after the crash.
	if n := s.Stats().FramesOut; n != 52 {
		t.Fatalf("%d frames written, want 52: a call after the crash touched the wire", n)
	}
	if crashes.Load() != 1 || !errors.Is(crashErr, extension.ReasonProviderInterrupted) {
		t.Fatalf("crash reported %d times (%v), want once with provider_interrupted", crashes.Load(), crashErr)
	}
	assertGone(t, pidOf(t, home, "victim"))
	if n := settledGoroutines(before); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

func TestWriteStallDeclaresCrashD13(t *testing.T) {
	home := installPlugins(t, plugin{name: "mute", fixture: "stop-reading"})
	h := testHost(home)
	// Long enough that a loaded machine never stalls the handshake this
	// long; the stall below is permanent, so only the wait grows.
	h.Conn.WriteStallTimeout = time.Second
	var crashed atomic.Int32
	h.OnCrash = func(string, error) { crashed.Add(1) }
	rt, err := h.Start(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	s := rt.Sidecar("mute")
	if s == nil {
		t.Fatal("mute did not start")
	}
	big := `{"name":"x","arguments":"` + strings.Repeat("a", 4<<20) + `"}` // far beyond a pipe buffer
	var res extension.InterceptResult
	err = s.Call(bg, extension.MethodIntercept, interceptParams(1, big), &res)
	if !errors.Is(err, extension.ReasonProviderInterrupted) || !errors.Is(err, extension.ErrWriteStall) {
		t.Fatalf("call = %v, want provider_interrupted caused by the write stall", err)
	}
	<-s.Done()
	rt.Close()
	if crashed.Load() != 1 {
		t.Fatalf("crash reported %d times, want 1", crashed.Load())
	}
	assertGone(t, pidOf(t, home, "mute"))
}

func TestStderrFloodNeverBlocksAndTailIsBoundedD10(t *testing.T) {
	p := plugin{name: "flood", fixture: "stderr-flood", required: true}
	home := installPlugins(t, p)
	h := testHost(home)
	// The last stderr lines are read once the group is gone, up to EOF,
	// which comes at once; a generous bound keeps a loaded machine from
	// cutting that read short.
	h.ExitDrain = 10 * time.Second
	_, err := h.Start(bg)
	var se *extension.StartError
	if !errors.As(err, &se) || se.Stage != "handshake" || !errors.Is(err, extension.ReasonUnsupportedVersion) {
		t.Fatalf("Start = %v, want the handshake failure after the flood", err)
	}
	if len(se.Stderr) > 16<<10 || len(se.Stderr) == 0 {
		t.Fatalf("stderr tail is %d bytes, want 1..16384", len(se.Stderr))
	}
	if strings.Contains(se.Stderr, "FAKEfake0123456789") || !strings.Contains(se.Stderr, "api_key=") {
		t.Fatalf("stderr tail leaks the secret or lost its context: ...%s", se.Stderr[max(0, len(se.Stderr)-200):])
	}
	if !strings.Contains(err.Error(), "startup handshake failed after") {
		t.Fatalf("error %q does not name the stage", err)
	}
	assertGone(t, pidOf(t, home, "flood"))
}

func TestReloadKeepsOldGenerationOnFailureD14(t *testing.T) {
	home := installPlugins(t, plugin{name: "stable", fixture: "sdk"})
	h := testHost(home)
	old, err := h.Start(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	// A required plugin that cannot start makes the next generation fail.
	bad := installPlugins(t, plugin{name: "broken", fixture: "raw", required: true, noInstall: true,
		env: map[string]string{"FIXTURE_RESULT": `{"protocolVersion":"2","name":"x","version":"1","stateSchemaVersion":0}`}})
	if _, err := extension.Install(home, pluginDirs[bad+"/broken"], extension.InstallOptions{Name: "broken", Link: true}); err != nil {
		t.Fatal(err)
	}
	next, err := h.Reload(bg, old)
	if err == nil || next != nil || !strings.Contains(err.Error(), "old one keeps serving") {
		t.Fatalf("Reload = %v, %v; want a failure", next, err)
	}
	var res extension.InterceptResult
	if err := old.Sidecar("stable").Call(bg, extension.MethodIntercept, interceptParams(1, `{}`), &res); err != nil {
		t.Fatalf("the old generation stopped answering: %v", err)
	}
}

func TestReloadSwapsAndRetiresOldD14(t *testing.T) {
	home := installPlugins(t, plugin{name: "gen", fixture: "sdk"})
	h := testHost(home)
	old, err := h.Start(bg)
	if err != nil {
		t.Fatal(err)
	}
	oldPid := old.Sidecar("gen").PID()
	next, err := h.Reload(bg, old)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if next.Session().Generation != old.Session().Generation+1 {
		t.Fatalf("generation %d after %d", next.Session().Generation, old.Session().Generation)
	}
	var res extension.InterceptResult
	if err := next.Sidecar("gen").Call(bg, extension.MethodIntercept, interceptParams(1, `{}`), &res); err != nil {
		t.Fatalf("the new generation does not answer: %v", err)
	}
	assertGone(t, oldPid)
	if next.Sidecar("gen").PID() == oldPid {
		t.Fatal("the new generation reuses the old process")
	}
}

func TestSlotClaimedTwiceFailsStartNamingBothD17(t *testing.T) {
	home := installPlugins(t,
		plugin{name: "first", fixture: "sdk", runtime: map[string]any{"replaces": []string{"system_prompt"}}},
		plugin{name: "second", fixture: "sdk", runtime: map[string]any{"replaces": []string{"system_prompt"}}},
	)
	_, err := testHost(home).Start(bg)
	var se *extension.StartError
	if !errors.As(err, &se) || se.Plugin != "second" || se.Stage != "launch" || !strings.Contains(se.Err.Error(), `"system_prompt" is claimed by both first and second`) {
		t.Fatalf("Start = %v, want a slot conflict naming first and second", err)
	}
	for _, name := range []string{"first", "second"} {
		if _, err := os.Stat(filepath.Join(pluginDirs[home+"/"+name], "pid")); !os.IsNotExist(err) {
			t.Errorf("%s was started despite the conflict", name)
		}
	}
}

// TestExitRightAfterShutdownAnswerIsCleanD11: a sidecar that answers
// extension/shutdown and exits at once shut down cleanly, even when the
// host reads slowly (the answer is still in the pipe when the exit is seen).
func TestExitRightAfterShutdownAnswerIsCleanD11(t *testing.T) {
	home := installPlugins(t, plugin{name: "quick", fixture: "raw", env: map[string]string{"FIXTURE_RESULT": okResult}})
	h := testHost(home)
	h.Conn.Tap = func(inbound bool, frame []byte) {
		if inbound && strings.Contains(string(frame), `"accepted":true`) {
			time.Sleep(30 * time.Millisecond) // a slow reader, not synchronisation
		}
	}
	rt, err := h.Start(bg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatalf("Close = %v, want nil: the sidecar answered and exited", err)
	}
}

// TestPendingCallsFailWhileOnCrashRunsD13: the calls fail at once, not
// after the crash callback.
func TestPendingCallsFailWhileOnCrashRunsD13(t *testing.T) {
	home := installPlugins(t, plugin{name: "victim", fixture: "sdk", env: map[string]string{"FIXTURE_HOLD": "1"}})
	release := make(chan struct{})
	entered := make(chan struct{})
	h := testHost(home)
	h.OnCrash = func(string, error) { close(entered); <-release }
	rt, err := h.Start(bg)
	if err != nil {
		t.Fatal(err)
	}
	s := rt.Sidecar("victim")
	errc := make(chan error, 1)
	go func() {
		var res extension.InterceptResult
		errc <- s.Call(bg, extension.MethodIntercept, interceptParams(1, `{}`), &res)
	}()
	for s.Stats().FramesOut < 3 {
		runtime.Gosched()
	}
	proc, _ := os.FindProcess(s.PID())
	proc.Kill()
	<-entered
	if err := <-errc; !errors.Is(err, extension.ReasonProviderInterrupted) {
		t.Fatalf("pending call = %v while OnCrash runs, want provider_interrupted", err)
	}
	close(release)
	rt.Close()
}

func TestStartupWarningsInInstalledOrderD10(t *testing.T) {
	bad := `{"protocolVersion":"2","name":"x","version":"1","stateSchemaVersion":0}`
	home := installPlugins(t,
		plugin{name: "a-bad", fixture: "raw", env: map[string]string{"FIXTURE_RESULT": bad}},
		plugin{name: "b-refused", fixture: "sdk", runtime: map[string]any{"command": "/bin/sh"}},
	)
	rt, err := testHost(home).Start(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	w := rt.Warnings()
	if len(w) != 2 || w[0].Plugin != "a-bad" || w[1].Plugin != "b-refused" || !errors.Is(w[1].Err, extension.ErrShellCommand) {
		t.Fatalf("warnings %v, want a-bad then b-refused (a shell command)", w)
	}
}

// TestServeEndsWhileTheHostHoldsStdin: the SDK makes its inherited pipes
// pollable, so Serve returns on its context even though the host neither
// closes stdin nor reads on.
func TestServeEndsWhileTheHostHoldsStdin(t *testing.T) {
	usedFixtures["serve-cancel"] = true
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fixtureEnv+"=serve-cancel", "GORACE=atexit_sleep_ms=0")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stdin.Close() // held open until the test ends
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"extension/initialize","params":{"protocolVersion":"1","protocolId":"reasonix.extension.v1","manifest":{},"session":{"sessionId":"s","workspaceRoot":"/w","generation":1},"capabilities":{"contentRefs":true,"uiHost":"headless","protocolVersion":"1"}}}`+"\n")
	if _, err := bufio.NewReader(stdout).ReadBytes('\n'); err != nil { // the answer, before the barrier opens (D6)
		t.Fatal(err)
	}
	io.WriteString(stdin, `{"jsonrpc":"2.0","method":"extension/initialized","params":{}}`+"\n")
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":2,"method":"extension/intercept","params":{"event":"tool.before","seq":1,"payload":{},"timeoutMillis":0}}`+"\n")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if !strings.Contains(stderr.String(), "serve returned: context canceled") {
			t.Fatalf("the sidecar exited (%v) but Serve said %q", err, stderr.String())
		}
	case <-time.After(30 * time.Second): // hang guard only
		cmd.Process.Kill()
		t.Fatal("Serve did not return on its context while the host held stdin open")
	}
}

// TestAnswerToAnExitedSidecarDoesNotFailItsShutdownD11: a sidecar that
// closes its stdin, sends one last request, answers shutdown and exits
// leaves the host writing its answer into a closed pipe; the stop is
// still clean, since the sidecar answered and exited with status 0.
func TestAnswerToAnExitedSidecarDoesNotFailItsShutdownD11(t *testing.T) {
	{
		home := installPlugins(t, plugin{name: "last", fixture: "raw", env: map[string]string{"FIXTURE_RESULT": okResult,
			"FIXTURE_LAST_REQUEST": `{"jsonrpc":"2.0","id":9,"method":"host/ui/publish","params":{"surfaceId":"s","sessionId":"sess-test","generation":1,"kind":"status","payload":{"label":"bye"}}}`}})
		rt, err := testHost(home).Start(bg)
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.Close(); err != nil {
			t.Fatalf("Close = %v, want nil: the sidecar answered shutdown and exited 0", err)
		}
	}
}
