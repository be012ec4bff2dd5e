package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoRunsTheReferencePlugin runs the README's main job for real: it
// builds the reference plugin, starts it through the host and checks the
// transcript shows each ruling.
func TestDemoRunsTheReferencePlugin(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"demo", "-wire"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errb.String(), out.String())
	}
	for _, want := range []string{
		`FULL TRUST: plugin "fullsidecar", version "1.0.0"`,
		`providers:      "plugin/fullsidecar/fake/echo"`,
		`replaced by fullsidecar: {"text":"hello world [rewritten by fullsidecar]"}`,
		"blocked by fullsidecar",
		`\"sandbox\":true`,
		"demo strategy",
		"the host's decision stands",
		"every sidecar stopped cleanly",
		`host → sidecar {"jsonrpc":"2.0","id":1,"method":"extension/initialize"`,
		`sidecar → host {"jsonrpc":"2.0","id":1,"result":`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("transcript lacks %q:\n%s", want, out.String())
		}
	}
}

func TestDemoUsageNamesThePluginDir(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"demo", "a", "b"}, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "usage: exthost demo [flags] [PLUGIN_DIR]") {
		t.Fatalf("exit %d, stderr %q; want 2 and the usage naming PLUGIN_DIR", code, errb.String())
	}
}

func TestDemoNamesAMissingPluginDir(t *testing.T) {
	var out, errb bytes.Buffer
	missing := filepath.Join(t.TempDir(), "no-such-plugin")
	if code := run([]string{"demo", missing}, nil, &out, &errb); code != 1 || !strings.Contains(errb.String(), missing+": the plugin directory does not exist") {
		t.Fatalf("exit %d, stderr %q; want 1 and the directory named as missing", code, errb.String())
	}
}
