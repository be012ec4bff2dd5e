//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package extension_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reasonix-ext/extension"
)

// TestConcurrentInstallersLoseNothing: several processes install, disable
// and enable plugins in one home at once; every entry survives, enabled,
// because each read-change-write holds the lock on
// plugin-packages.json.lock (without it the last rename wins and drops
// the others' entries). It is built only where flock(2) exists.
func TestConcurrentInstallersLoseNothing(t *testing.T) {
	usedFixtures["install"] = true
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	home, src := t.TempDir(), t.TempDir()
	const procs, each = 6, 8
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*strings.Builder, procs)
	for p := range procs {
		var dirs []string
		for i := range each {
			name := fmt.Sprintf("p%d-%d", p, i)
			dir := filepath.Join(src, name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			manifest := `{"apiVersion":"reasonix.io/plugin/v1","name":"` + name + `","version":"0.1.0"}`
			if err := os.WriteFile(filepath.Join(dir, extension.ManifestFile), []byte(manifest), 0o644); err != nil {
				t.Fatal(err)
			}
			dirs = append(dirs, dir)
		}
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), fixtureEnv+"=install", "GORACE=atexit_sleep_ms=0",
			"FIXTURE_HOME="+home, "FIXTURE_DIRS="+strings.Join(dirs, string(os.PathListSeparator)))
		outs[p] = new(strings.Builder)
		cmd.Stderr = outs[p]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[p] = cmd
	}
	for p, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("installer %d: %v: %s", p, err, outs[p])
		}
	}
	pkgs, err := extension.LoadPackages(home)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != procs*each {
		t.Fatalf("%d entries, want %d: concurrent writers lost changes", len(pkgs), procs*each)
	}
	for _, e := range pkgs {
		if !e.Enabled {
			t.Errorf("%s is disabled: a Disable overwrote a later Enable", e.Name)
		}
	}
}
