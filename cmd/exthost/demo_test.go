package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/reasonix-ext/extension"
)

// TestDemoRunsTheReferencePlugin runs the README's main job for real: it
// writes the reference plugin, runs the default turn against it and finds
// every step of the turn with its outcome, every one of the 16 methods on
// the wire, whole frames, and the sidecar's stderr shown at the step that
// made it write.
func TestDemoRunsTheReferencePlugin(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"demo", "-wire"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errb.String(), out.String())
	}
	transcript := out.String()
	outcome := outcomes(transcript)
	for step, want := range map[string]string{
		"start: handshake":                                             "fullsidecar 1.0.0 subscribes to input.receive, tool.before, system_prompt.build, session.start; owns system_prompt; serves plugin/fullsidecar/fake/echo; offers /fullsidecar:demo",
		"session.start (observed)":                                     "ui card: [fullsidecar] fullsidecar",
		`input.receive "/fs hello world"`:                              `replaced by fullsidecar: {"text":"hello world [rewritten by fullsidecar]"}`,
		`input.receive "what changed since yesterday?"`:                "continue (chain: fullsidecar)",
		"system_prompt.build":                                          `replaced by fullsidecar: {"prompt":"You are Reasonix running under the fullsidecar demo strategy.`,
		"provider stream: the model answers":                           "end",
		"provider stream: the user stops it after one chunk":           "cancelled by the demo after 1 chunk(s): stream_cancelled",
		"tool.before read README.md":                                   `replaced by fullsidecar: {"name":"read","arguments":"{\"path\":\"README.md\",\"sandbox\":true}"}`,
		"tool.before rm notes.txt":                                     "continue (chain: fullsidecar)",
		"tool.before dangerous_exec":                                   "blocked by fullsidecar: fullsidecar blocks the tool dangerous_exec",
		"tool.after read (intercepted)":                                "skipped: no plugin subscribes to tool.after",
		"tool.after read (observed)":                                   "skipped: no plugin subscribes to tool.after",
		"permission.decision rm (the host says deny)":                  "skipped: no plugin subscribes to permission.decision",
		"UI actions: the user runs each one":                           "/fullsidecar:demo: accepted true HELLO, ADA!",
		"UI submit: the user sends the last form":                      "fullsidecar: submitted fullsidecar-demo-form, accepted true",
		"input.receive of a 100 KiB paste (it travels by content ref)": `replaced by fullsidecar: {"text":"a long pasted log line`,
		"resources changed":                                            "sent to fullsidecar",
		"session.end (observed)":                                       "skipped: no plugin subscribes to session.end",
		"shutdown":                                                     "every sidecar stopped cleanly",
	} {
		if got := outcome[step]; !strings.HasPrefix(got, want) {
			t.Errorf("step %s: outcome %q, want %q", step, got, want)
		}
	}
	for _, want := range []string{
		`FULL TRUST: plugin "fullsidecar", version "1.0.0"`,
		`args:           "_run", "fullsidecar"`, // the reference plugin is exthost itself, in its hidden mode
		`ui status: [fullsidecar] INFO: fullsidecar online`,
		`prompt fullsidecar-demo-form from fullsidecar (input) "fullsidecar demo", answered by the demo: {"loud":true,"name":"Ada"}`,
		`ui notification: [fullsidecar] HELLO, ADA!`,
		`content ref read: the sidecar asks the host for a page of the payload, {"contentRef":"content_`, // shown without -wire too
		"done (the model's answer is complete)", "end of the stream (stream/end",
		"text \"fake-hello \"", "tool_call lookup {\"query\":\"reasonix\"}", "usage: 5 prompt + 7 completion = 12 tokens, finish stop",
	} {
		if !strings.Contains(transcript, want) {
			t.Errorf("transcript lacks %q:\n%s", want, transcript)
		}
	}
	var schema struct{ Methods map[string]json.RawMessage }
	if err := json.Unmarshal(extension.CanonicalSchema(), &schema); err != nil {
		t.Fatal(err)
	}
	for name := range schema.Methods {
		if !strings.Contains(transcript, `"method":"`+name+`"`) {
			t.Errorf("no frame of %s on the wire", name)
		}
	}
	// Frames are whole: the handshake's two frames are complete JSON.
	for _, f := range frames(transcript) {
		if strings.Contains(f.text, `"method":"extension/initialize"`) || strings.Contains(f.text, `"id":1,"result":{"protocolVersion"`) {
			if !json.Valid([]byte(f.text)) {
				t.Errorf("a handshake frame is not shown whole: %s", f.text)
			}
		}
	}
	// Stderr is the sidecar's own: shown, and never before the step that
	// made the sidecar write it.
	step, line, ok := strings.Cut(transcript, "── tool.before dangerous_exec")
	if !ok || strings.Contains(step, "stderr fullsidecar:") || !strings.Contains(line, `stderr fullsidecar: fullsidecar: blocked dangerous_exec {"cmd":"rm -rf /"}`) {
		t.Errorf("the sidecar's stderr line is not shown after its step:\n%s", transcript)
	}
}

// outcomes maps each step of a transcript to its last outcome line.
func outcomes(transcript string) map[string]string {
	outcome := map[string]string{}
	step := ""
	for _, line := range strings.Split(transcript, "\n") {
		if title, ok := strings.CutPrefix(line, "── "); ok {
			step = title
		} else if rest, ok := strings.CutPrefix(line, "   "); ok && !strings.HasPrefix(rest, " ") && step != "" {
			outcome[step] = rest
		}
	}
	return outcome
}

// wireLine is one frame of a -wire transcript, with its step.
type wireLine struct {
	step, text string
	inbound    bool
}

func frames(transcript string) []wireLine {
	var out []wireLine
	step := ""
	for _, line := range strings.Split(transcript, "\n") {
		if title, ok := strings.CutPrefix(line, "── "); ok {
			step = title
		} else if f, ok := strings.CutPrefix(line, "      host → sidecar "); ok {
			out = append(out, wireLine{step, f, false})
		} else if f, ok := strings.CutPrefix(line, "      sidecar → host "); ok {
			out = append(out, wireLine{step, f, true})
		}
	}
	return out
}

// TestDemoWireShowsEachAnswerAfterItsRequestUnderItsStep runs the demo 50
// times against the reference plugin, which answers at once, and finds
// every answer printed after the request it answers, under the same step:
// the frames are printed in the order they crossed the pipe.
func TestDemoWireShowsEachAnswerAfterItsRequestUnderItsStep(t *testing.T) {
	dir, err := referencePlugin(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for run := range 50 {
		var out bytes.Buffer
		// Pairs are waited for; quiet only gathers a sidecar's own news.
		d := &demo{out: &out, wire: true, quiet: time.Millisecond}
		if err := d.run([]string{dir}, "", ""); err != nil {
			t.Fatalf("run %d: %v\n%s", run, err, out.String())
		}
		type key struct {
			inbound bool
			id      string
		}
		open := map[key]string{} // requests not yet answered: their step
		for _, f := range frames(out.String()) {
			// The host writes frames with jsonrpc, then id, then method
			// first; a long frame is cut after its start.
			m := envelopeStart.FindStringSubmatch(f.text)
			if m == nil {
				t.Fatalf("run %d: frame %s is not a JSON-RPC frame", run, f.text)
			}
			switch id, method := m[1], m[2]; {
			case id == "":
			case method != "":
				open[key{f.inbound, id}] = f.step
			default:
				asked, ok := open[key{!f.inbound, id}]
				if !ok || asked != f.step {
					t.Fatalf("run %d: the answer %s under %q follows no request of id %s in its step (asked under %q)\n%s", run, f.text, f.step, id, asked, out.String())
				}
				delete(open, key{!f.inbound, id})
			}
		}
		if len(open) != 0 {
			t.Fatalf("run %d: requests never answered: %v", run, open)
		}
	}
}

// envelopeStart reads the id and method at the start of a frame.
var envelopeStart = regexp.MustCompile(`^\{"jsonrpc":"2\.0",(?:"id":([0-9]+),)?(?:"method":"([^"]+)")?`)

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

// TestDemoRunsAPythonSidecarWrittenFromTheSpec runs, under exthost demo,
// testdata/plugins/pysidecar: a sidecar in Python without any SDK, written
// from PROTOCOL.md alone. It checks the sidecar's verdict at each
// intercepted step, that the events it recorded are byte for byte the
// event frames the host sent, and that it stopped cleanly (a non-zero exit
// after shutdown fails the demo, D11).
func TestDemoRunsAPythonSidecarWrittenFromTheSpec(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed:", err)
	}
	events := filepath.Join(t.TempDir(), "events.ndjson")
	t.Setenv("PYSIDECAR_EVENTS", events)
	var out, errb bytes.Buffer
	if code := run([]string{"demo", "-wire", filepath.Join("..", "..", "testdata", "plugins", "pysidecar")}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errb.String(), out.String())
	}
	transcript := out.String()
	if strings.Contains(transcript, "warning:") {
		t.Errorf("the host warned about the sidecar:\n%s", transcript)
	}

	outcome := outcomes(transcript)
	for step, want := range map[string]string{
		`input.receive "/fs hello world"`:               `replaced by pysidecar: {"text":"HELLO WORLD"}`,
		`input.receive "what changed since yesterday?"`: "continue (chain: pysidecar)",
		"system_prompt.build":                           "skipped: no plugin subscribes to system_prompt.build",
		"tool.before read README.md":                    "continue (chain: pysidecar)",
		"tool.before dangerous_exec":                    "blocked by pysidecar: pysidecar blocks dangerous_exec",
		"tool.before write notes.txt":                   `replaced by pysidecar: {"name":"write","arguments":"{\"path\":\"notes.txt\",\"dryRun\":true}"}`,
		"tool.after read (intercepted)":                 `replaced by pysidecar: {"name":"read","arguments":"{\"path\":\"README.md\"}","result":"# README\n[checked by pysidecar]"}`,
		"permission.decision rm (the host says deny)":   "deny by pysidecar",
		"shutdown": "every sidecar stopped cleanly",
	} {
		if got := outcome[step]; !strings.HasPrefix(got, want) {
			t.Errorf("step %s: outcome %q, want %q", step, got, want)
		}
	}

	var sent []string
	for _, line := range strings.Split(transcript, "\n") {
		if frame, ok := strings.CutPrefix(line, "      host → sidecar "); ok && strings.Contains(frame, `"method":"extension/event"`) {
			if strings.Contains(frame, "more bytes)") {
				t.Fatalf("the transcript shortened an event frame: %s", frame)
			}
			sent = append(sent, frame)
		}
	}
	if len(sent) != 3 || !strings.Contains(sent[0], `"event":"session.start"`) || !strings.Contains(sent[1], `"event":"tool.after"`) || !strings.Contains(sent[2], `"event":"session.end"`) {
		t.Fatalf("the host sent the events %q, want session.start, tool.after and session.end", sent)
	}
	recorded, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(recorded), strings.Join(sent, "\n")+"\n"; got != want {
		t.Errorf("the sidecar recorded\n%s\nthe host sent\n%s", got, want)
	}
}

// TestDemoShowsASidecarsControlBytesEscapedD27: a sidecar that writes all
// 20 sequences of testdata/terminal/sequences.json raw, in a frame and on
// its stderr, cannot act on the terminal of exthost demo -wire: each is
// printed escaped, and nothing the command prints carries a raw control
// character.
func TestDemoShowsASidecarsControlBytesEscapedD27(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the hostile sidecar is a shell script")
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "terminal", "sequences.json"))
	var seqs []struct{ Raw, Shown string }
	if err == nil {
		err = json.Unmarshal(b, &seqs)
	}
	if err != nil || len(seqs) != 20 {
		t.Fatalf("sequences: %v (%d)", err, len(seqs))
	}
	var raw strings.Builder
	for _, q := range seqs {
		raw.WriteString(q.Raw)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hostile.line"), []byte(raw.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// It answers initialize, then writes the raw line before it could
	// have seen extension/initialized, and on stderr, and reads until EOF.
	script := "#!/bin/sh\nread -r line\n" +
		`printf '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"1","name":"hostile","version":"1.0.0","stateSchemaVersion":0}}\n'` + "\n" +
		`cat "$REASONIX_PLUGIN_ROOT/hostile.line"; cat "$REASONIX_PLUGIN_ROOT/hostile.line" >&2` + "\n" +
		"cat >/dev/null\n"
	writeScriptPlugin(t, dir, script, `{"apiVersion":"reasonix.io/plugin/v1","name":"hostile","version":"1.0.0","runtime":{"command":"${REASONIX_PLUGIN_ROOT}/sidecar.sh"}}`)
	_, stdout, stderr := runExthost("", "demo", "-wire", dir)
	for _, q := range seqs {
		if !strings.Contains(stdout+stderr, q.Shown) {
			t.Errorf("%s is not shown escaped:\n%s\n%s", q.Shown, stdout, stderr)
		}
	}
	for name, out := range map[string]string{"stdout": stdout, "stderr": stderr} {
		if i := strings.IndexFunc(out, func(r rune) bool { return r < 0x20 && r != '\t' && r != '\n' || r == 0x7f || 0x80 <= r && r <= 0x9f }); i >= 0 {
			t.Errorf("%s carries a raw control character at byte %d:\n%q", name, i, out)
		}
	}
}

// writeScriptPlugin writes a plugin directory whose sidecar is the shell
// script script, as sidecar.sh, beside manifest.
func writeScriptPlugin(t *testing.T, dir, script, manifest string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "sidecar.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, extension.ManifestFile), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDemoScriptRunsAnAuthorsOwnTurn runs a turn written as a script:
// each kind of step reaches the reference plugin, the prompt is answered
// with the script's values, and a step for a point nobody subscribes to
// is shown skipped.
func TestDemoScriptRunsAnAuthorsOwnTurn(t *testing.T) {
	script := filepath.Join(t.TempDir(), "turn.json")
	turn := `[
	 {"title": "my tool.before", "intercept": "tool.before", "payload": {"name": "dangerous_exec", "arguments": "{}"}},
	 {"event": "session.start", "payload": {"sessionPath": "/tmp/s.jsonl", "phase": "start"}},
	 {"stream": "plugin/fullsidecar/fake/echo", "effort": "high"},
	 {"answer": {"name": "Lin", "loud": false}},
	 {"action": "/fullsidecar:demo"},
	 {"title": "nobody", "intercept": "tool.after", "payload": {"name": "read"}}
	]`
	if err := os.WriteFile(script, []byte(turn), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"demo", "-script", script}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errb.String(), out.String())
	}
	outcome := outcomes(out.String())
	for step, want := range map[string]string{
		"my tool.before":                              "blocked by fullsidecar: fullsidecar blocks the tool dangerous_exec",
		"step 2: event session.start":                 "ui card: [fullsidecar] fullsidecar",
		"step 3: stream plugin/fullsidecar/fake/echo": "end",
		"step 4: answer":                              `the next prompt will be answered {"loud":false,"name":"Lin"}`,
		"step 5: action /fullsidecar:demo":            "/fullsidecar:demo: accepted true Hello, Lin!",
		"nobody":                                      "skipped: no plugin subscribes to tool.after",
	} {
		if got := outcome[step]; !strings.HasPrefix(got, want) {
			t.Errorf("step %s: outcome %q, want %q\n%s", step, got, want, out.String())
		}
	}
	if strings.Contains(out.String(), "── input.receive") {
		t.Errorf("the default turn ran too:\n%s", out.String())
	}
}

// TestDemoScriptErrorsNameTheStep: a script that cannot run is refused
// before anything starts, naming the step and what to fix.
func TestDemoScriptErrorsNameTheStep(t *testing.T) {
	for _, c := range []struct{ script, want string }{
		{`[{"intercept": "tool.before", "action": "*", "payload": {}}]`, "step 1 does 2 things"},
		{`[{"event": "tool.befor", "payload": {}}]`, `step 1 "tool.befor" is not a hook point`},
		{`[{"stream": "*"}, {"intercept": "tool.before"}]`, `step 2 an intercept or event needs a "payload" object`},
		{`[{"intercpt": "tool.before"}]`, `unknown field "intercpt"`},
		{`{"steps": []}`, "a script is a JSON array of steps"},
		{`[] []`, "data after the array"},
		{`[{"intercept": "tool.before", "payload": {"nam": "rm"}}]`, `step 1 has a payload the host refuses: ToolPayload at /nam: unknown member "nam"`},
		{"[\n  {\"resources\": [\"a\"],},\n]", "invalid character '}' looking for beginning of object key string (line 2, column 23)"},
		{`[{"action": "*", "payload": {}}]`, `step 1 has "payload", which action steps do not take`},
		{`[{"stream": "*", "cancelAfter": -1}]`, `step 1 has "cancelAfter"`},
	} {
		script := filepath.Join(t.TempDir(), "turn.json")
		if err := os.WriteFile(script, []byte(c.script), 0o644); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		code := run([]string{"demo", "-script", script, "/nonexistent"}, nil, &out, &errb)
		if code != 1 || !strings.Contains(errb.String(), c.want) || strings.Contains(out.String(), "── start") {
			t.Errorf("script %s: exit %d, stderr %q, stdout %q; want 1, %q and nothing started", c.script, code, errb.String(), out.String(), c.want)
		}
	}
}

// TestDemoNamesAnAnswerWithAStringID: a sidecar that answers with a
// string id has its answer dropped by the host (PROTOCOL.md §2.4); the
// step fails with the timeout, and the transcript says why, under it.
func TestDemoNamesAnAnswerWithAStringID(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the sidecar is a shell script")
	}
	dir := t.TempDir()
	script := "#!/bin/sh\nread -r line\n" +
		`printf '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"1","name":"strid","version":"1.0.0","subscriptions":["tool.before"],"stateSchemaVersion":0}}\n'` + "\n" +
		"while read -r line; do\n" +
		`  id=$(printf '%s' "$line" | sed -n 's/^{"jsonrpc":"2.0","id":\([0-9]*\),.*/\1/p')` + "\n" +
		`  case "$line" in *'"method":"extension/intercept"'*) printf '{"jsonrpc":"2.0","id":"%s","result":{"decision":"continue"}}\n' "$id";;` + "\n" +
		`  *'"method":"extension/shutdown"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"accepted":true}}\n' "$id"; exit 0;; esac` + "\n" +
		"done\n"
	writeScriptPlugin(t, dir, script, `{"apiVersion":"reasonix.io/plugin/v1","name":"strid","version":"1.0.0","runtime":{"command":"${REASONIX_PLUGIN_ROOT}/sidecar.sh","intercepts":["tool.before"]}}`)
	turn := filepath.Join(t.TempDir(), "turn.json")
	if err := os.WriteFile(turn, []byte(`[{"title":"one tool","intercept":"tool.before","payload":{"name":"rm"}}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runExthost("", "demo", "-script", turn, dir)
	_, step, _ := strings.Cut(stdout, "── one tool\n")
	step, _, _ = strings.Cut(step, "── ")
	if code != 1 || !strings.Contains(step, `the sidecar answered with id "2": request ids are integers`) || !strings.Contains(step, "intercept_timeout") {
		t.Fatalf("exit %d; want 1 and the string id named under the step, which failed with the timeout:\n%s%s", code, stdout, stderr)
	}
}

// scriptPlugin writes a plugin whose sidecar is the shell script body,
// with the manifest's runtime members given.
func scriptPlugin(t *testing.T, name, body, runtime string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	manifest := `{"apiVersion":"reasonix.io/plugin/v1","name":"` + name + `","version":"1","runtime":{"command":"${REASONIX_PLUGIN_ROOT}/sidecar.sh",` + runtime + `}}`
	if err := errors.Join(os.MkdirAll(dir, 0o755), os.WriteFile(filepath.Join(dir, "sidecar.sh"), []byte("#!/bin/sh\n"+body), 0o755),
		os.WriteFile(filepath.Join(dir, extension.ManifestFile), []byte(manifest), 0o644)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDemoStopsWithOneLineWhenNothingStarts: a plugin that crashes at its
// start, or a home with nothing installed, ends the demo at once with one
// line saying so; no step runs against nothing.
func TestDemoStopsWithOneLineWhenNothingStarts(t *testing.T) {
	crash := scriptPlugin(t, "crash", "echo 'boom' >&2\nexit 3\n", `"intercepts":["tool.before"]`)
	for name, args := range map[string][]string{
		"crash":      {"demo", crash},
		"empty home": {"demo", "-home", t.TempDir()},
	} {
		code, stdout, stderr := runExthost("", args...)
		if code != 1 || strings.Count(stderr, "no plugin started") != 1 || strings.Contains(stdout, "── session.start") || strings.Contains(stdout, "stopped cleanly") {
			t.Errorf("%s: exit %d; want 1, one line saying no plugin started, and no step\nstdout:\n%s\nstderr:\n%s", name, code, stdout, stderr)
		}
	}
}

// TestDemoSaysATimedOutPluginWasSkippedAtEveryStepD19: an optional plugin
// that stops answering is warned about once (D19), and every later step
// it fails says it was skipped, not that it continued.
func TestDemoSaysATimedOutPluginWasSkippedAtEveryStepD19(t *testing.T) {
	answer := `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"1","name":"mute","version":"1","subscriptions":["input.receive"],"stateSchemaVersion":0}}`
	dir := scriptPlugin(t, "mute", "read line\necho '"+answer+"'\ncat > /dev/null\n", `"intercepts":["input.receive"],"timeoutMillis":200`)
	code, stdout, stderr := runExthost("", "demo", "-timeout", "500ms", dir)
	steps := strings.Split(stdout, "── input.receive")
	if code != 1 || len(steps) < 3 || strings.Contains(stdout, "continue (chain: mute)") || !strings.Contains(stderr, "within 500ms") {
		t.Fatalf("exit %d; want 1, input.receive steps none of which says mute continued, and a shutdown bounded by -timeout\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for i, step := range steps[1:] {
		if !strings.Contains(step, "skipped mute: failed here") {
			t.Errorf("input.receive step %d does not say mute was skipped:\n%s", i+1, step)
		}
	}
}
