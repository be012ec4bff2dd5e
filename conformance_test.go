package extension_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/reasonix-ext/extension"
)

// referenceBinary builds the SDK's reference plugin once per test binary.
var referenceBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "fullsidecar-")
	if err != nil {
		return "", err
	}
	tempDirs = append(tempDirs, dir) // removed by TestMain
	bin := filepath.Join(dir, "fullsidecar")
	out, err := exec.Command("go", "build", "-o", bin, "./sdk/examples/fullsidecar").CombinedOutput()
	if err != nil {
		return "", errors.New(string(out))
	}
	return bin, nil
})

// referenceManifest reads the reference plugin's own manifest,
// sdk/examples/fullsidecar/reasonix-plugin.json.
func referenceManifest(t *testing.T) map[string]any {
	t.Helper()
	var manifest map[string]any
	b, err := os.ReadFile(filepath.Join("sdk", "examples", "fullsidecar", extension.ManifestFile))
	if err == nil {
		err = json.Unmarshal(b, &manifest)
	}
	if err != nil {
		t.Fatal(err)
	}
	return manifest
}

// conformanceRuntime installs the reference plugin as conformance-ext with
// the reference manifest, sdk/examples/fullsidecar/reasonix-plugin.json
// (its command the built binary, its provider list dropped since the
// plugin ID differs, plus runtime fields in extra), and starts it; env
// reaches the sidecar through the host's environment.
func conformanceRuntime(t *testing.T, extra map[string]any, env ...string) (*extension.Runtime, *int32) {
	t.Helper()
	return conformanceRuntimeWith(t, extra, nil, env...)
}

// conformanceRuntimeWith is conformanceRuntime with tweak, if not nil,
// applied to the Host before it starts.
func conformanceRuntimeWith(t *testing.T, extra map[string]any, tweak func(*extension.Host), env ...string) (*extension.Runtime, *int32) {
	t.Helper()
	checkLeaks(t)
	bin, err := referenceBinary()
	if err != nil {
		t.Fatalf("building the reference plugin: %v", err)
	}
	dir := t.TempDir()
	manifest := referenceManifest(t)
	rt := manifest["runtime"].(map[string]any)
	delete(rt, "providers")
	rt["command"], rt["env"] = bin, map[string]string{"GORACE": "atexit_sleep_ms=0"}
	for k, v := range extra {
		rt[k] = v
	}
	b, _ := json.Marshal(manifest)
	if err := os.WriteFile(filepath.Join(dir, extension.ManifestFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	if _, err := extension.Install(home, dir, extension.InstallOptions{Name: "conformance-ext", Link: true}); err != nil {
		t.Fatal(err)
	}
	var crashes int32
	h := &extension.Host{
		Home:    home,
		Session: extension.SessionContext{SessionID: "sess-conf", WorkspaceRoot: "/ws", Generation: 1},
		Env:     append(os.Environ(), env...),
		OnCrash: func(string, error) { atomic.AddInt32(&crashes, 1) },
	}
	if tweak != nil {
		tweak(h)
	}
	r, err := h.Start(bg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, &crashes
}

func TestConformanceInputReceiveRewriteScenario3(t *testing.T) {
	rt, _ := conformanceRuntime(t, nil)
	out, err := rt.Intercept(bg, extension.InputReceive, extension.InputPayload{Text: "/fs hello world"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := extension.DecodePayload(extension.InputReceive, out.Payload)
	if err != nil || v.(*extension.InputPayload).Text != "hello world [rewritten by fullsidecar]" {
		t.Fatalf("payload %s (%v), want the rewrite, strictly decodable", out.Payload, err)
	}
	out, err = rt.Intercept(bg, extension.InputReceive, extension.InputPayload{Text: "plain"})
	if err != nil || len(out.Replaced) != 0 || string(out.Payload) != `{"text":"plain"}` {
		t.Fatalf("plain input: %+v, %v; want continue", out, err)
	}
}

func TestConformanceToolBeforeBlockAndRewriteScenario4(t *testing.T) {
	rt, _ := conformanceRuntime(t, nil)
	out, err := rt.Intercept(bg, extension.ToolBefore, extension.ToolPayload{Name: "dangerous_exec", Arguments: `{"cmd":"rm -rf /"}`})
	if err != nil || !out.Blocked || !strings.Contains(out.Reason, "dangerous_exec") {
		t.Fatalf("dangerous_exec: %+v, %v; want blocked naming it", out, err)
	}
	out, err = rt.Intercept(bg, extension.ToolBefore, extension.ToolPayload{Name: "read", Arguments: `{"path":"a.go"}`})
	if err != nil || len(out.Replaced) != 1 {
		t.Fatalf("read: %+v, %v; want replaced", out, err)
	}
	var tool extension.ToolPayload
	var args map[string]any
	if err := json.Unmarshal(out.Payload, &tool); err != nil || json.Unmarshal([]byte(tool.Arguments), &args) != nil {
		t.Fatalf("payload %s", out.Payload)
	}
	if tool.Name != "read" || args["path"] != "a.go" || args["sandbox"] != true {
		t.Fatalf("read became %s, want path kept and sandbox:true", out.Payload)
	}
	out, err = rt.Intercept(bg, extension.ToolBefore, extension.ToolPayload{Name: "write", Arguments: `{}`})
	if err != nil || out.Blocked || len(out.Replaced) != 0 {
		t.Fatalf("write: %+v, %v; want continue", out, err)
	}
}

func TestConformanceSystemPromptStrategyScenario5(t *testing.T) {
	rt, _ := conformanceRuntime(t, nil)
	if owner := rt.SlotOwner("system_prompt"); owner != "conformance-ext" {
		t.Fatalf("system_prompt owner %q", owner)
	}
	out, err := rt.Intercept(bg, extension.SystemPromptBuild, extension.SystemPromptPayload{Prompt: "BASE PROMPT", WorkspaceRoot: "/ws"})
	if err != nil {
		t.Fatal(err)
	}
	var p extension.SystemPromptPayload
	json.Unmarshal(out.Payload, &p)
	if !strings.Contains(p.Prompt, "fullsidecar demo strategy") || !strings.Contains(p.Prompt, "BASE PROMPT") || p.WorkspaceRoot != "/ws" {
		t.Fatalf("prompt %+v: want the strategy text, the base prompt and the workspace root kept", p)
	}
}

func TestConformanceInterceptTimeoutScenario13(t *testing.T) {
	rt, _ := conformanceRuntime(t, map[string]any{"timeoutMillis": 500}, "FULLSIDECAR_STALL_ON_INPUT=stall")
	_, err := rt.Intercept(bg, extension.InputReceive, extension.InputPayload{Text: "stall"})
	if !errors.Is(err, extension.ReasonInterceptTimeout) || !strings.Contains(err.Error(), "500ms") {
		t.Fatalf("Intercept = %v, want intercept_timeout after the 500ms budget", err)
	}
	// The sidecar is still healthy afterwards.
	if _, err := rt.Intercept(bg, extension.InputReceive, extension.InputPayload{Text: "fine"}); err != nil {
		t.Fatalf("next intercept: %v", err)
	}
}

func TestConformanceCrashMidInterceptScenario14(t *testing.T) {
	rt, crashes := conformanceRuntime(t, nil, "FULLSIDECAR_CRASH_ON_INPUT=boom")
	_, err := rt.Intercept(bg, extension.InputReceive, extension.InputPayload{Text: "boom"})
	if !errors.Is(err, extension.ReasonProviderInterrupted) || !strings.Contains(err.Error(), "conformance-ext") {
		t.Fatalf("Intercept = %v, want provider_interrupted naming the plugin", err)
	}
	s := rt.Sidecar("conformance-ext")
	<-s.Done()
	_, err = rt.Intercept(bg, extension.InputReceive, extension.InputPayload{Text: "after"})
	if !errors.Is(err, extension.ReasonProviderInterrupted) {
		t.Fatalf("next Intercept = %v, want provider_interrupted", err)
	}
	rt.Close()
	// Close joined the writer: initialize, initialized and the fatal
	// intercept, and nothing after the crash (no shutdown either).
	if n := s.Stats().FramesOut; n != 3 {
		t.Fatalf("%d frames written, want 3: the call after the crash touched the wire", n)
	}
	if n := atomic.LoadInt32(crashes); n != 1 {
		t.Fatalf("crash reported %d times, want 1", n)
	}
}
