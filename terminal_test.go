package extension_test

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/reasonix-ext/extension"
)

// terminalSequences are 20 control and escape sequences a hostile sidecar
// might send, each with the escaped form a person must see instead (D27).
var terminalSequences = []struct{ raw, shown string }{
	{"\x1b[2J", `\x1b[2J`},                       // clear the screen
	{"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`}, // colour
	{"\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},     // OSC: set the title
	{"\x1b]8;;http://evil.example/\x1b\\ok\x1b]8;;\x1b\\", `\x1b]8;;http://evil.example/\x1b\ok\x1b]8;;\x1b\`}, // OSC 8 link
	{"\x07", `\x07`}, // bell
	{"\r[ok] all checks passed", `\x0d[ok] all checks passed`},   // a faked line
	{"\b\b\bok", `\x08\x08\x08ok`},                               // backspaces
	{"\x1b[1A\x1b[2K", `\x1b[1A\x1b[2K`},                         // up a line, erase it
	{"\x1bP1$r\x1b\\", `\x1bP1$r\x1b\`},                          // DCS
	{"\x1b[?1049h", `\x1b[?1049h`},                               // the alternate screen
	{"\u009b2J", `\u009b2J`},                                     // C1 CSI
	{"\u009d0;t\u009c", `\u009d0;t\u009c`},                       // C1 OSC and ST
	{"\u0085", `\u0085`},                                         // C1 NEL
	{"\x7f", `\x7f`},                                             // DEL
	{"\x00\x0b\x0c", `\x00\x0b\x0c`},                             // NUL, VT, FF
	{"\x1bc", `\x1bc`},                                           // reset the terminal
	{"\x1b7\x1b8", `\x1b7\x1b8`},                                 // save and restore the cursor
	{"\x1b[6n", `\x1b[6n`},                                       // make the terminal answer
	{"\x1b]52;c;cGF5bG9hZA==\x07", `\x1b]52;c;cGF5bG9hZA==\x07`}, // OSC 52: the clipboard
	{"\x1b[8mhidden", `\x1b[8mhidden`},                           // concealed text
}

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
	for _, seq := range terminalSequences {
		t.Run(seq.shown, func(t *testing.T) {
			env := map[string]string{"FIXTURE_SAY_HEX": hex.EncodeToString([]byte(seq.raw))}
			// The SDK answers a failing callback with the frozen internal
			// error, so the error message comes from a raw sidecar.
			r := extension.ReasonProviderFailed
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
					"FIXTURE_ANSWER": fmt.Sprintf(`"error":{"code":%d,"message":%s,"data":{"reason":%q,"retryable":%t}}`, r.Code(), message, r, r.Retryable()),
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
