package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestExthostRunsWithoutAToolchain: an exthost binary alone in an empty
// directory, with the environment of env -i but for a HOME and a PATH
// whose only go fails (and leaves a mark), runs demo, check, check -json
// and bench: the reference plugin and the bench's peers come from the
// binary itself.
func TestExthostRunsWithoutAToolchain(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the poisoned go is a shell script")
	}
	tmp := t.TempDir()
	built := filepath.Join(tmp, "build", "exthost")
	if out, err := exec.Command("go", "build", "-o", built, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir, poison, home := filepath.Join(tmp, "empty"), filepath.Join(tmp, "poison"), filepath.Join(tmp, "home")
	for _, d := range []string{dir, poison, home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(built)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "exthost"), b, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(tmp, "go-was-run")
	script := "#!/bin/sh\necho \"go: not here: exthost must not need the go tool\" >&2\n: > '" + marker + "'\nexit 1\n"
	if err := os.WriteFile(filepath.Join(poison, "go"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	exthost := func(args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(dir, "exthost"), args...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + poison, "HOME=" + home} // no TMPDIR: os.TempDir falls back to /tmp
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("exthost %q: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
		}
		return stdout.Bytes()
	}
	exthost("demo")
	exthost("check")
	var report struct {
		Plugin         string
		Passed, Failed int
	}
	if out := exthost("check", "-json"); json.Unmarshal(out, &report) != nil || report.Plugin != "fullsidecar" || report.Passed == 0 || report.Failed != 0 {
		t.Errorf("check -json: plugin %q, %d passed, %d failed; want fullsidecar, some passed and none failed:\n%s", report.Plugin, report.Passed, report.Failed, out)
	}
	exthost("bench", "-n", "200")
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("exthost ran the go tool (the marker %s: %v)", marker, err)
	}
}
