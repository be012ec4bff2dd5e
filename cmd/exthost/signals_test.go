//go:build unix

package main

// The signal and deadline tests: they need a FIFO, kill(2) and /proc, so
// they run on Unix (and read /proc on Linux only).

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reasonix-ext/extension"
)

// stubbornPlugin writes a plugin whose sidecar answers its handshake,
// starts a child in its group, then ignores SIGTERM, every frame and the
// end of its stdin. Each sidecar adds its pid to the file pids, then
// writes it to the FIFO ready when there is one.
func stubbornPlugin(t *testing.T, tmp, ready string) (dir, pids string) {
	dir, pids = filepath.Join(tmp, "plugin"), filepath.Join(tmp, "pids")
	answer := `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"1","name":"stubborn","version":"1","subscriptions":["tool.before"],"stateSchemaVersion":0}}`
	script := "#!/bin/sh\ntrap '' TERM\nread line\necho '" + answer + "'\nsleep 1000 &\necho $$ >> \"$PIDS\"\n[ -z \"$READY\" ] || echo $$ > \"$READY\"\ncat > /dev/null\nwait\n"
	manifest := `{"apiVersion":"reasonix.io/plugin/v1","name":"stubborn","version":"1","runtime":{"command":"${REASONIX_PLUGIN_ROOT}/sidecar.sh","intercepts":["tool.before"],"env":{"READY":"` + ready + `","PIDS":"` + pids + `"}}}`
	for _, err := range []error{os.Mkdir(dir, 0o755),
		os.WriteFile(filepath.Join(dir, "sidecar.sh"), []byte(script), 0o755),
		os.WriteFile(filepath.Join(dir, extension.ManifestFile), []byte(manifest), 0o644)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir, pids
}

// exthostProcess starts this test binary as exthost with args, its
// temporary files under tmpdir; exited receives its end.
func exthostProcess(t *testing.T, tmpdir string, args ...string) (cmd *exec.Cmd, out *bytes.Buffer, exited chan error) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "EXTHOST_TEST_AS_MAIN=1", "TMPDIR="+tmpdir)
	out = new(bytes.Buffer)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited = make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return cmd, out, exited
}

// checkNothingLeft fails t for a process of a sidecar's group still
// running, or a file left in tmpdir.
func checkNothingLeft(t *testing.T, pids, tmpdir string) {
	b, _ := os.ReadFile(pids)
	for _, f := range strings.Fields(string(b)) {
		group, _ := strconv.Atoi(f)
		if left := groupMembers(group); len(left) > 0 {
			for _, p := range left {
				syscall.Kill(p, syscall.SIGKILL)
			}
			t.Errorf("processes %v of the sidecar's group %d are still running", left, group)
		}
	}
	if entries, _ := os.ReadDir(tmpdir); len(entries) > 0 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

// TestSignalsStopTheSidecarsAndRemoveTheTemporaryFiles: SIGINT or SIGTERM
// to check, demo or bench stops every sidecar with its process group,
// removes every temporary directory and exits 130 or 143, although the
// sidecar ignores SIGTERM and the end of its stdin and has a child.
func TestSignalsStopTheSidecarsAndRemoveTheTemporaryFiles(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the test reads /proc")
	}
	for _, tc := range []struct {
		args []string
		sig  syscall.Signal
	}{
		{[]string{"check", "-timeout", "1s"}, syscall.SIGINT},
		{[]string{"demo"}, syscall.SIGTERM},
		{[]string{"bench", "-n", "20"}, syscall.SIGINT},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			tmp := t.TempDir()
			ready, tmpdir := filepath.Join(tmp, "ready"), filepath.Join(tmp, "tmp")
			if err := errors.Join(syscall.Mkfifo(ready, 0o600), os.Mkdir(tmpdir, 0o755)); err != nil {
				t.Fatal(err)
			}
			dir, pids := stubbornPlugin(t, tmp, ready)
			cmd, out, exited := exthostProcess(t, tmpdir, append(tc.args, dir)...)
			up := make(chan struct{})
			go func() { // the first sidecar has answered its handshake
				os.ReadFile(ready)
				close(up)
			}()
			select {
			case <-up:
			case err := <-exited:
				t.Fatalf("exthost %s ended before its sidecar was up: %v\n%s", tc.args[0], err, out.String())
			}
			cmd.Process.Signal(tc.sig)
			var err error
			select {
			case err = <-exited:
			case <-time.After(2 * time.Minute): // a hang, not a speed
				cmd.Process.Kill()
				t.Fatalf("exthost %s still running 2 minutes after %v\n%s", tc.args[0], tc.sig, out.String())
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 128+int(tc.sig) || !strings.Contains(out.String(), "interrupted") {
				t.Errorf("exthost %s after %v: %v; want exit status %d and the word interrupted\n%s", tc.args[0], tc.sig, err, 128+int(tc.sig), out.String())
			}
			checkNothingLeft(t, pids, tmpdir)
		})
	}
}

// TestCheckDeadlineBoundsTheWholeRun: with -deadline, check on a sidecar
// that hangs after its handshake stops at the deadline, plus the teardown
// its flag documents (-timeout for the shutdown, then the kill), says so,
// and leaves nothing running. The bound is the deadline's, with room for
// a loaded machine: a hang, not a speed, is what it catches.
func TestCheckDeadlineBoundsTheWholeRun(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the test reads /proc")
	}
	tmp := t.TempDir()
	tmpdir := filepath.Join(tmp, "tmp")
	if err := os.Mkdir(tmpdir, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, pids := stubbornPlugin(t, tmp, "")
	start := time.Now()
	_, out, exited := exthostProcess(t, tmpdir, "check", "-timeout", "1s", "-deadline", "3s", dir)
	var err error
	select {
	case err = <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("check still running 2 minutes after a deadline of 3s\n%s", out.String())
	}
	if took := time.Since(start); err == nil || took > 3*time.Second+time.Second+20*time.Second || !strings.Contains(out.String(), "stopped at the -deadline of 3s") {
		t.Errorf("check took %v and ended %v; want it stopped at the deadline of 3s\n%s", took, err, out.String())
	}
	checkNothingLeft(t, pids, tmpdir)
}

// groupMembers returns the live processes of process group pgid (a
// zombie is not live).
func groupMembers(pgid int) []int {
	var live []int
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		i := bytes.LastIndexByte(stat, ')')
		if err != nil || i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:])) // state, ppid, pgrp, ...
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			live = append(live, pid)
		}
	}
	return live
}
