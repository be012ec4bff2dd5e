package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/reasonix-ext/extension"
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

	// Each step's outcome is its one line indented by three spaces; the
	// frames on the wire are indented by six.
	outcome := map[string]string{}
	step := ""
	for _, line := range strings.Split(transcript, "\n") {
		if title, ok := strings.CutPrefix(line, "── "); ok {
			step = title
		} else if rest, ok := strings.CutPrefix(line, "   "); ok && !strings.HasPrefix(rest, " ") && step != "" {
			outcome[step] = rest
		}
	}
	for step, want := range map[string]string{
		`input.receive "/fs hello world"`:               `replaced by pysidecar: {"text":"HELLO WORLD"}`,
		`input.receive "what changed since yesterday?"`: "continue (chain: pysidecar)",
		"system_prompt.build":                           "continue (chain: no interceptor)",
		"tool.before read README.md":                    "continue (chain: pysidecar)",
		"tool.before dangerous_exec":                    "blocked by pysidecar: pysidecar blocks dangerous_exec",
		"tool.before write notes.txt":                   `replaced by pysidecar: {"name":"write","arguments":"{\"path\":\"notes.txt\",\"dryRun\":true}"}`,
		"tool.after read":                               `replaced by pysidecar: {"name":"read","arguments":"{\"path\":\"README.md\"}","result":"# README\n[checked by pysidecar]"}`,
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
			if strings.HasSuffix(frame, "…") {
				t.Fatalf("the transcript shortened an event frame: %s", frame)
			}
			sent = append(sent, frame)
		}
	}
	if len(sent) != 2 || !strings.Contains(sent[0], `"event":"session.start"`) || !strings.Contains(sent[1], `"event":"session.end"`) {
		t.Fatalf("the host sent the events %q, want session.start then session.end", sent)
	}
	recorded, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(recorded), strings.Join(sent, "\n")+"\n"; got != want {
		t.Errorf("the sidecar recorded\n%s\nthe host sent\n%s", got, want)
	}
}

// TestDemoShowsASidecarsControlBytesEscapedD27: a sidecar that writes a
// frame holding raw escape sequences (an OSC title change, a clear
// screen) cannot act on the terminal of exthost demo -wire: the tapped
// frame is printed with them escaped, and nothing the command prints
// carries a raw control character.
func TestDemoShowsASidecarsControlBytesEscapedD27(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the hostile sidecar is a shell script")
	}
	dir := t.TempDir()
	// It answers initialize, then writes a line of raw escapes before it
	// could have seen extension/initialized, and reads until EOF.
	script := "#!/bin/sh\nread -r line\n" +
		`printf '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"1","name":"hostile","version":"1.0.0","stateSchemaVersion":0}}\n'` + "\n" +
		`printf '\033]0;pwned\007\033[2J{"jsonrpc":"2.0","method":"x"}\n'` + "\n" +
		"cat >/dev/null\n"
	writeScriptPlugin(t, dir, script, `{"apiVersion":"reasonix.io/plugin/v1","name":"hostile","version":"1.0.0","runtime":{"command":"${REASONIX_PLUGIN_ROOT}/sidecar.sh"}}`)
	_, stdout, stderr := runExthost("", "demo", "-wire", dir)
	if !strings.Contains(stdout, `\x1b]0;pwned\x07\x1b[2J`) {
		t.Errorf("the tapped frame is not shown escaped:\n%s", stdout)
	}
	for name, out := range map[string]string{"stdout": stdout, "stderr": stderr} {
		if i := strings.IndexFunc(out, func(r rune) bool { return r < 0x20 && r != '\t' && r != '\n' || r == 0x7f }); i >= 0 {
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
