package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTrustPrintsTheFullTrustBlock(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"trust", "-name", "acme", "../../sdk/examples/starter"}, nil, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{`FULL TRUST: plugin "acme"`, "outside the sandbox", "intercepts:     input.receive", "bin/starter-extension.exe"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestTrustRefusesWhatTheLaunchGateWould(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"trust", t.TempDir()}, nil, &out, &errb); code != 1 || !strings.Contains(errb.String(), "reasonix-plugin.json") {
		t.Fatalf("exit %d, stderr %q; want 1 naming the missing manifest", code, errb.String())
	}
	if code := run([]string{"trust"}, nil, &out, &errb); code != 2 {
		t.Fatalf("exit %d without a directory, want 2", code)
	}
}

func TestTrustUsageNamesThePluginDir(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"help", "trust"}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "usage: exthost trust [flags] PLUGIN_DIR") {
		t.Fatalf("exit %d, stdout %q; want the usage naming PLUGIN_DIR", code, out.String())
	}
}

// TestTrustWarnsOfAnUnexpandedPlaceholderInArgsD8: args are passed
// verbatim (PROTOCOL.md §3.1), so the literal placeholder in one reaches
// the sidecar as is; FULL TRUST says so.
func TestTrustWarnsOfAnUnexpandedPlaceholderInArgsD8(t *testing.T) {
	out := trustOf(t, `{"apiVersion":"reasonix.io/plugin/v1","name":"py","version":"1.0.0","runtime":{"command":"/usr/bin/python3","args":["${REASONIX_PLUGIN_ROOT}/sidecar.py"]}}`)
	if want := "warning:        args[0] holds the literal ${REASONIX_PLUGIN_ROOT}: args are passed verbatim"; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}

// trustOf returns what "exthost trust" prints for a plugin directory with
// the manifest, failing the test unless it succeeds.
func trustOf(t *testing.T, manifest string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "reasonix-plugin.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"trust", dir}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	return out.String()
}

// TestTrustSaysWhatUpstreamRefusesD9: the FULL TRUST block of a manifest
// using runtime.providers says upstream v1 hosts will not load it; the
// reference plugin's says nothing of the kind.
func TestTrustSaysWhatUpstreamRefusesD9(t *testing.T) {
	out := trustOf(t, `{"apiVersion":"reasonix.io/plugin/v1","name":"p","runtime":{"command":"/opt/p/bin/p","capabilities":["providers"],"providers":["plugin/p/a/m"]}}`)
	if want := "portability:    not loadable by upstream v1 hosts: runtime.providers\n"; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	var ref, errb bytes.Buffer
	if code := run([]string{"trust", "../../sdk/examples/fullsidecar"}, nil, &ref, &errb); code != 0 || strings.Contains(ref.String(), "upstream") {
		t.Errorf("exit %d; the reference plugin is portable, want no portability line:\n%s%s", code, ref.String(), errb.String())
	}
}
