package extension_test

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reasonix-ext/extension"
)

// terminalSequences are 20 control and escape sequences a hostile sidecar
// might send, each with the escaped form a person must see instead (D27):
// testdata/terminal/sequences.json, which the CLI's tests read too.
// It is read on first use: a fixture process runs elsewhere.
var terminalSequences = sync.OnceValue(func() []struct{ raw, shown string } {
	b, err := os.ReadFile(filepath.Join("testdata", "terminal", "sequences.json"))
	var seqs []struct{ Raw, Shown string }
	if err == nil {
		err = json.Unmarshal(b, &seqs)
	}
	if err != nil || len(seqs) != 20 {
		panic(fmt.Sprintf("testdata/terminal/sequences.json: %v (%d sequences)", err, len(seqs)))
	}
	var out []struct{ raw, shown string }
	for _, q := range seqs {
		out = append(out, struct{ raw, shown string }{q.Raw, q.Shown})
	}
	return out
})

// shownSafely fails unless text holds want and no control character but
// tab and newline.
func shownSafely(t *testing.T, sink, text, want string) {
	t.Helper()
	if !strings.Contains(text, want) {
		t.Errorf("%s: %q does not show %q", sink, text, want)
	}
	if i := strings.IndexFunc(text, func(r rune) bool {
		return r < 0x20 && r != '\t' && r != '\n' || r == 0x7f || 0x80 <= r && r <= 0x9f
	}); i >= 0 {
		t.Errorf("%s: %q carries a raw control character at byte %d", sink, text, i)
	}
}

// TestSidecarTextReachesCallersEscapedD27: whatever control characters and
// escape sequences a sidecar puts in its declared name and version, a
// block reason, an error message or its stderr, the host's caller sees
// them escaped, never raw and never dropped.
func TestSidecarTextReachesCallersEscapedD27(t *testing.T) {
	for _, seq := range terminalSequences() {
		t.Run(seq.shown, func(t *testing.T) {
			env := map[string]string{"FIXTURE_SAY_HEX": hex.EncodeToString([]byte(seq.raw))}
			// The SDK answers a failing callback with the frozen internal
			// error, so the error message comes from a raw sidecar.
			message, _ := json.Marshal("error says " + seq.raw)
			var mu sync.Mutex
			var stderr []string
			onStderr := func(h *extension.Host) {
				h.OnStderr = func(plugin, line string) {
					mu.Lock()
					stderr = append(stderr, plugin+": "+line)
					mu.Unlock()
				}
			}
			rt := startRuntime(t, onStderr,
				plugin{name: "say", fixture: "say", env: env, required: true, runtime: map[string]any{"intercepts": []string{"tool.before"}}},
				plugin{name: "fails", fixture: "raw", required: true, runtime: map[string]any{"intercepts": []string{"tool.after"}}, env: map[string]string{
					"FIXTURE_RESULT": `{"protocolVersion":"1","name":"fails","version":"1","stateSchemaVersion":0,"subscriptions":["tool.after"]}`,
					// The data is not the protocol's {reason, retryable}: the
					// caller gets it raw, in Error.Data.
					"FIXTURE_ANSWER": fmt.Sprintf(`"error":{"code":-32000,"message":%s,"data":{"note":%s}}`, message, message),
				}})
			decl, _ := rt.Declaration("say")
			shownSafely(t, "name", decl.Name, "say"+seq.shown)
			shownSafely(t, "version", decl.Version, "1"+seq.shown)
			out, err := rt.Intercept(bg, extension.ToolBefore, extension.ToolPayload{Name: "x"})
			if err != nil {
				t.Fatal(err)
			}
			shownSafely(t, "block reason", out.Reason, "reason says "+seq.shown)
			_, err = rt.Intercept(bg, extension.ToolAfter, extension.ToolResultPayload{Name: "x"})
			if err == nil {
				t.Fatal("tool.after: the sidecar's error did not reach the caller")
			}
			shownSafely(t, "error message", err.Error(), "error says "+seq.shown)
			var e *extension.Error
			if !errors.As(err, &e) || !json.Valid(e.Data) {
				t.Fatalf("tool.after: %v; want an *Error with its raw data", err)
			}
			var note struct{ Note string }
			json.Unmarshal(e.Data, &note)
			shownSafely(t, "error data", string(e.Data), "error says ")
			if note.Note != "error says "+seq.raw {
				t.Errorf("the error data, %s, is not the same JSON value", e.Data)
			}
			rt.Close() // joins the stderr drains
			mu.Lock()
			shownSafely(t, "Host.OnStderr", strings.Join(stderr, "\n"), "say: stderr says "+seq.shown)
			mu.Unlock()

			env["FIXTURE_SAY_FAIL"] = "1"
			_, err = startOne(t, plugin{name: "say", fixture: "say", env: env, required: true})
			var se *extension.StartError
			if !errors.As(err, &se) {
				t.Fatalf("Start = %v, want a StartError", err)
			}
			shownSafely(t, "stderr tail", se.Stderr, "stderr says "+seq.shown)
			shownSafely(t, "start error", err.Error(), "stderr says "+seq.shown)
		})
	}
	// Bytes that are not UTF-8 cannot cross the protocol (a frame is
	// UTF-8), but stderr carries them: shown as \xNN.
	env := map[string]string{"FIXTURE_SAY_HEX": hex.EncodeToString([]byte("\xff\xfe")), "FIXTURE_SAY_FAIL": "1"}
	_, err := startOne(t, plugin{name: "say", fixture: "say", env: env, required: true})
	var se *extension.StartError
	if !errors.As(err, &se) {
		t.Fatalf("Start = %v, want a StartError", err)
	}
	shownSafely(t, "stderr tail", se.Stderr, `stderr says \xff\xfe`)
}

// TestTerminalSafeKeepsTextAndEscapesControlsD27: tab, newline and every
// printable character pass as they are (a literal U+FFFD too); each
// control character, DEL and each byte that is not UTF-8 is escaped.
func TestTerminalSafeKeepsTextAndEscapesControlsD27(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain\ttext\nnext line é ✓ \ufffd", "plain\ttext\nnext line é ✓ \ufffd"},
		{"", ""},
		{"a\x1bb", `a\x1bb`},
		{"\x7f\x00\r", `\x7f\x00\x0d`},
		{"\u0080\u009f", `\u0080\u009f`},
		{"bad\xff\xc3", `bad\xff\xc3`},
	} {
		if got := extension.TerminalSafe(c.in); got != c.want {
			t.Errorf("TerminalSafe(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestInvisibleTextControlsAreControlsD29: the bidirectional embedding,
// override and isolate controls and the line and paragraph separators are
// escaped on a terminal and refused in UI text; zero-width characters and
// the direction marks, which emoji and right-to-left text need, stay.
func TestInvisibleTextControlsAreControlsD29(t *testing.T) {
	for _, r := range []rune{0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069, 0x2028, 0x2029} {
		in := "file" + string(r) + "txt.exe"
		if got, want := extension.TerminalSafe(in), fmt.Sprintf(`file\u%04xtxt.exe`, r); got != want {
			t.Errorf("TerminalSafe(%q) = %q, want %q", in, got, want)
		}
		quoted, _ := json.Marshal(in)
		if _, err := extension.DecodeSurface(extension.SurfaceStatus, json.RawMessage(`{"label":`+string(quoted)+`}`)); !errors.Is(err, extension.ReasonInvalidParams) {
			t.Errorf("a status label holding %U: %v, want invalid_params", r, err)
		}
	}
	for _, kept := range []string{"\U0001f469\u200d\U0001f4bb", "zero\u200bwidth", "\u200f\u05e9\u05dc\u05d5\u05dd\u200e", "a\u200cb", "\ufeffbom"} {
		if got := extension.TerminalSafe(kept); got != kept {
			t.Errorf("TerminalSafe(%q) = %q, want it unchanged", kept, got)
		}
		quoted, _ := json.Marshal(kept)
		if _, err := extension.DecodeSurface(extension.SurfaceStatus, json.RawMessage(`{"label":`+string(quoted)+`}`)); err != nil {
			t.Errorf("a status label %q: %v, want it accepted", kept, err)
		}
	}
}

// fixtureHostile writes, before its initialize answer, a line holding
// $FIXTURE_SAY_HEX raw, writes it to stderr too, and answers every
// other request an error whose message holds it.
func fixtureHostile() {
	raw, _ := hex.DecodeString(os.Getenv("FIXTURE_SAY_HEX"))
	message, _ := json.Marshal("error says " + string(raw))
	in := bufio.NewReader(os.Stdin)
	m := readFrame(in)
	os.Stdout.Write(append([]byte("early "), append(raw, '\n')...))
	fmt.Fprintf(os.Stderr, "stderr says %s\n", raw)
	fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"1","name":"hostile","version":"1","stateSchemaVersion":0}}`+"\n", m["id"])
	for {
		m := readFrame(in)
		switch {
		case string(m["method"]) == `"extension/shutdown"`:
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"accepted":true}}`+"\n", m["id"])
			os.Exit(0)
		case m["id"] != nil:
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":%s,"data":{"reason":"internal","retryable":true}}}`+"\n", m["id"], message)
		}
	}
}

// TestCheckShowsASidecarsControlBytesEscapedD27: the conformance check of
// a sidecar that writes all 20 sequences raw, in a frame and in its
// errors, reports them escaped, every one, and carries none raw.
func TestCheckShowsASidecarsControlBytesEscapedD27(t *testing.T) {
	var all strings.Builder
	for _, seq := range terminalSequences() {
		all.WriteString(seq.raw)
	}
	usedFixtures["hostile"] = true
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	manifest, _ := json.Marshal(map[string]any{"apiVersion": "reasonix.io/plugin/v1", "name": "hostile", "version": "1",
		"runtime": map[string]any{"command": exe, "intercepts": []string{"tool.before"},
			"env": map[string]string{fixtureEnv: "hostile", "FIXTURE_SAY_HEX": hex.EncodeToString([]byte(all.String()))}}})
	if err := os.WriteFile(filepath.Join(dir, extension.ManifestFile), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	report, err := extension.Check(bg, dir, extension.CheckOptions{Timeout: 300 * time.Millisecond})
	if report == nil || err == nil {
		t.Fatalf("the check passed a sidecar that speaks before the barrier: %v", err)
	}
	var details strings.Builder
	for _, r := range report.Results {
		details.WriteString(r.Name + " " + r.Detail + "\n")
	}
	for _, seq := range terminalSequences() {
		shownSafely(t, "check detail", details.String(), seq.shown)
	}
}
