package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestTrustPrintsTheFullTrustBlock(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"trust", "-name", "acme", "../../testdata/manifests/starter"}, nil, &out, &errb)
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
