package extension_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/reasonix-ext/extension"
)

// TestStarterManifestInstallsAndStartsItsSDKSidecar is acceptance 10 of
// issue 4: a byte-for-byte copy of the upstream starter manifest shape
// (PROTOCOL.md §3.1), with its command built from sdk/examples/starter,
// installs (copied, not linked), passes the launch gate (D8) and the
// handshake (D9), answers an intercept and shuts down cleanly (D11).
func TestStarterManifestInstallsAndStartsItsSDKSidecar(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "starter-extension")
	manifest, err := os.ReadFile(filepath.Join("sdk", "examples", "starter", extension.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, extension.ManifestFile), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	// The manifest's command is ${REASONIX_PLUGIN_ROOT}/bin/starter-extension.exe.
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "bin", "starter-extension.exe"), "./sdk/examples/starter")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./sdk/examples/starter: %v\n%s", err, out)
	}
	home := t.TempDir()
	entry, err := extension.Install(home, dir, extension.InstallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if entry.Name != "starter-extension" {
		t.Fatalf("installed as %q, want the manifest's name starter-extension", entry.Name)
	}

	rt, err := testHost(home).Start(bg)
	if err != nil {
		t.Fatal(err)
	}
	s := rt.Sidecar("starter-extension")
	if s == nil {
		rt.Close()
		t.Fatalf("starter-extension did not start; warnings %v", rt.Warnings())
	}
	pid := s.PID()
	select {
	case <-s.Done():
		t.Errorf("the starter's connection ended right after the handshake")
	default:
	}
	if state, _, ok := procStat(pid); !ok || state == 'Z' {
		t.Errorf("the starter's process %d is not running (state %c)", pid, state)
	}

	decl, _ := rt.Declaration("starter-extension")
	got, err := json.Marshal(decl)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"protocolVersion":"1","name":"starter-extension","version":"0.1.0","subscriptions":["input.receive"],"stateSchemaVersion":0}`
	if string(got) != want {
		t.Errorf("declaration %s, want %s", got, want)
	}

	params := extension.InterceptParams{Event: extension.InputReceive, Seq: 1, Payload: json.RawMessage(`{"text":"hello"}`), TimeoutMillis: 5000}
	var res extension.InterceptResult
	if err := s.Call(bg, extension.MethodIntercept, params, &res); err != nil || res.Decision != extension.DecisionContinue {
		t.Errorf("input.receive intercept = %+v, %v; want continue", res, err)
	}

	if err := rt.Close(); err != nil {
		t.Fatalf("Close = %v, want nil: the starter exits 0 on shutdown", err)
	}
	assertGone(t, pid)
}
