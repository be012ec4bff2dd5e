package main

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

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
