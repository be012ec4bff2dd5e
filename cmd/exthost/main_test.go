package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/reasonix-ext/extension"
)

// TestMain stands in for exthost when a test's command runs one of its
// hidden modes: os.Executable is then this test binary.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == runArg || os.Getenv("EXTHOST_TEST_AS_MAIN") == "1" {
		main() // a hidden mode, or exthost itself for a test that signals it
	}
	// Under -race, the children are race binaries too, which sleep 1 s
	// before exiting: past the host's shutdown bound.
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	os.Exit(m.Run())
}

// corpusCase is a record of ../../testdata/redact/secrets.txt.
type corpusCase struct {
	name    string
	secrets []string
	text    string
}

func loadCorpus(t *testing.T) []corpusCase {
	t.Helper()
	data, err := os.ReadFile("../../testdata/redact/secrets.txt")
	if err != nil {
		t.Fatal(err)
	}
	var cases []corpusCase
	for _, chunk := range strings.Split("\n"+string(data), "\n=== ")[1:] {
		head, text, _ := strings.Cut(chunk, "\n---\n")
		lines := strings.Split(head, "\n")
		c := corpusCase{name: lines[0], text: strings.TrimSuffix(text, "\n")}
		for _, l := range lines[1:] {
			if s, ok := strings.CutPrefix(l, "secret: "); ok {
				c.secrets = append(c.secrets, s)
			}
		}
		if c.name != "" && !strings.HasPrefix(c.name, "env-") { // env cases need the corpus's own environment
			cases = append(cases, c)
		}
	}
	return cases
}

// leak returns the first 8-byte run of secret found in out, or "".
func leak(out, secret string) string {
	for i := 0; i+8 <= len(secret); i++ {
		if strings.Contains(out, secret[i:i+8]) {
			return secret[i : i+8]
		}
	}
	return ""
}

func runExthost(stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestRunUsage(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"no command", nil, 2, "usage: exthost <command>"},
		{"unknown command", []string{"launch-rockets"}, 2, `unknown command "launch-rockets"`},
		{"help", []string{"help"}, 0, "redact"},
		{"-h", []string{"-h"}, 0, "usage: exthost <command>"},
		{"help for a command", []string{"help", "redact"}, 0, "-explain"},
		{"help for an unknown command", []string{"help", "nope"}, 2, `unknown command "nope"`},
		{"bad flag", []string{"redact", "-no-such-flag"}, 2, "flag provided but not defined"},
		{"redact takes no arguments", []string{"redact", "file.txt"}, 2, "unexpected arguments"},
		{"unknown hidden mode", []string{"_run", "nope"}, 2, `exthost _run: "nope" is not a mode; exthost runs these as its own sidecars and bench peers: content-pipe, echoline, fullsidecar,`},
		{"hidden mode with arguments", []string{"_run", "echoline", "x"}, 2, `"echoline x" is not a mode`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runExthost("", tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit status %d, want %d", code, tt.wantCode)
			}
			// Help asked for goes to stdout; a usage error's to stderr.
			text, other := stderr, stdout
			if code == 0 {
				text, other = stdout, stderr
			}
			if !strings.Contains(text, tt.wantErr) || other != "" {
				t.Errorf("stdout = %q, stderr = %q; want %q on the one and nothing on the other", stdout, stderr, tt.wantErr)
			}
		})
	}
}

// TestFlagsMayFollowTheArgument: exthost trust DIR -name X is exthost
// trust -name X DIR; after "--" a word that looks like a flag is an
// argument.
func TestFlagsMayFollowTheArgument(t *testing.T) {
	dir, err := referencePlugin(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	code, after, stderr := runExthost("", "trust", dir, "-name", "renamed")
	_, before, _ := runExthost("", "trust", "-name", "renamed", dir)
	if code != 0 || after != before || !strings.Contains(after, `"renamed"`) {
		t.Errorf("trust DIR -name renamed: exit %d, %q (stderr %q); want what trust -name renamed DIR prints, %q", code, after, stderr, before)
	}
	if code, _, stderr := runExthost("", "trust", "--", "-name"); code != 1 || !strings.Contains(stderr, "-name") {
		t.Errorf("trust -- -name: exit %d, stderr %q; want -name taken as the directory, which does not exist", code, stderr)
	}
	if code, _, stderr := runExthost("", "trust", dir, "-no-such-flag"); code != 2 || !strings.Contains(stderr, "flag provided but not defined") {
		t.Errorf("a bad flag after the argument: exit %d, stderr %q; want the usage error", code, stderr)
	}
}

// TestVersionNamesTheProtocolAndTheSchema: exthost version prints the
// module's version, the protocol id and version, and the schema hash an
// implementer compares theirs with (D1).
func TestVersionNamesTheProtocolAndTheSchema(t *testing.T) {
	code, stdout, stderr := runExthost("", "version")
	for _, want := range []string{"exthost ", "protocol " + extension.ProtocolID + " version " + extension.ProtocolVersion, "schema " + extension.GeneratedSchemaHash} {
		if code != 0 || stderr != "" || !strings.Contains(stdout, want) {
			t.Errorf("exit %d, stdout %q, stderr %q; want %q", code, stdout, stderr, want)
		}
	}
}

// TestHelpHidesTheHiddenModes: the modes exthost runs itself in are no
// command of its users.
func TestHelpHidesTheHiddenModes(t *testing.T) {
	_, stdout, _ := runExthost("", "help")
	for _, hidden := range append(slices.Collect(maps.Keys(modes)), runArg) {
		if strings.Contains(stdout, hidden) {
			t.Errorf("help names %q:\n%s", hidden, stdout)
		}
	}
}

func TestCommandTableNamesAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range commands() {
		if seen[c.name] || c.summary == "" || c.flags == nil {
			t.Errorf("command %q: duplicate, or missing summary or flags", c.name)
		}
		seen[c.name] = true
	}
}

func TestRedactCommandEqualsRedactOnSmallInput(t *testing.T) {
	in := "starting\nprovider rejected api_key=sk-proj-FAKEa1b2C3d4E5f6G7h8I9j0KkLl\nGET /x 200 request_id=123e4567-e89b-42d3-a456-426614174000\n"
	code, stdout, stderr := runExthost(in, "redact")
	if code != 0 || stderr != "" {
		t.Fatalf("exit status %d, stderr %q; want 0 and nothing", code, stderr)
	}
	if want := new(extension.Redactor).Redact(in); stdout != want {
		t.Errorf("stdout = %q, want %q", stdout, want)
	}
}

func TestRedactCommandExplainNamesTheRule(t *testing.T) {
	code, _, stderr := runExthost("x AKIAFAKE0123456789AB y\n", "redact", "-explain")
	if code != 0 {
		t.Fatalf("exit status %d, want 0", code)
	}
	if want := "aws-access-key-id at bytes 2-22"; !strings.Contains(stderr, want) {
		t.Errorf("stderr = %q, want it to contain %q", stderr, want)
	}
}

// TestStreamRedactorRemovesEveryCorpusSecret streams the whole corpus, as one
// input, through rounds of several sizes, so secrets land on every kind of
// round boundary, read at once and a byte at a time (the base64 lines
// of pem-orphan-end must wait for their END line).
func TestStreamRedactorRemovesEveryCorpusSecret(t *testing.T) {
	cases := loadCorpus(t)
	var in strings.Builder
	for _, c := range cases {
		in.WriteString(c.text + "\n")
	}
	for _, small := range []bool{false, true} {
		for _, chunk := range []int{97, 256, 1000, 4096, 0} {
			t.Run(fmt.Sprintf("chunk=%d,small_reads=%t", chunk, small), func(t *testing.T) {
				corpusThroughStream(t, cases, in.String(), chunk, small)
			})
		}
	}
}

func corpusThroughStream(t *testing.T, cases []corpusCase, in string, chunk int, small bool) {
	var src io.Reader = strings.NewReader(in)
	if small {
		src = iotest.OneByteReader(src)
	}
	s := streamRedactor{r: new(extension.Redactor), chunk: chunk, context: chunk / 3, maxHold: 64 << 10}
	var out bytes.Buffer
	if err := s.copy(&out, src); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		for _, sec := range c.secrets {
			if l := leak(out.String(), sec); l != "" {
				t.Errorf("case %s: %q survived", c.name, l)
			}
		}
	}
	if chunk == 0 { // one round: the same as redacting the whole input
		if want := new(extension.Redactor).Redact(in); out.String() != want {
			t.Errorf("one-round output differs from Redact of the whole input")
		}
	}
}

func TestStreamRedactorLeavesHarmlessTextAlone(t *testing.T) {
	data, err := os.ReadFile("../../testdata/redact/harmless.txt")
	if err != nil {
		t.Fatal(err)
	}
	s := streamRedactor{r: new(extension.Redactor), chunk: 300}
	var out bytes.Buffer
	if err := s.copy(&out, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if out.String() != string(data) {
		t.Errorf("streaming changed harmless text:\n%s", out.String())
	}
}

func TestStreamRedactorLongLines(t *testing.T) {
	secret := "ghp_FAKE0123456789abcdefghijklmnopqrstuv"
	words := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "word%d ", i)
		}
		return b.String()
	}
	tests := []struct {
		name, in, secret string
		keep             []string // must survive
	}{
		{"token in a line longer than the chunk", words(300) + "push with " + secret + " " + words(300) + "\nnext\n", secret, []string{"word299 push with", "word0 ", "word299 \nnext"}},
		{"key split from its value by a round", words(40) + "password: Zq8vFAKEpassw0rdValue " + words(40) + "\n", "Zq8vFAKEpassw0rdValue", []string{"password: "}},
		{"header value longer than the hold", "Authorization: Bearer " + strings.Repeat("FAKEtok3n", 2000) + "\nafter\n", "FAKEtok3nFAKEtok3n", []string{"Authorization: ", "\nafter\n"}},
		{"no final line break", words(200) + "token=" + secret, secret, []string{"word199 token="}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := streamRedactor{r: new(extension.Redactor), chunk: 128, context: 48, maxHold: 1024}
			var out bytes.Buffer
			if err := s.copy(&out, strings.NewReader(tt.in)); err != nil {
				t.Fatal(err)
			}
			if l := leak(out.String(), tt.secret); l != "" {
				t.Errorf("%q survived in %q", l, out.String())
			}
			for _, k := range tt.keep {
				if !strings.Contains(out.String(), k) {
					t.Errorf("output lost %q:\n%s", k, out.String())
				}
			}
		})
	}
}

// TestExthostBinaryRedactsStdin builds the real binary and runs
// "exthost redact < file".
func TestExthostBinaryRedactsStdin(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "exthost")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	input := filepath.Join(dir, "in.log")
	if err := os.WriteFile(input, []byte("curl -H \"Authorization: Bearer FAKEtok3nFAKEtok3n\" https://x\nplain line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(input)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(bin, "redact")
	cmd.Stdin = f
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("exthost redact: %v (stderr %q)", err, stderr.String())
	}
	if got, want := string(out), "curl -H \"Authorization: [redacted]\" https://x\nplain line\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
}

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
