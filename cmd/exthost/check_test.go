package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reasonix-ext/extension"
)

// TestCheckJSONPassesTheReferencePlugin runs "exthost check -json" as the
// README does: one object with exactly the documented members, at least
// 30 scenarios passed and none failed, and exit status 0.
func TestCheckJSONPassesTheReferencePlugin(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"check", "-json"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errb.String(), out.String())
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(out.Bytes(), &members); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	for _, k := range []string{"plugin", "passed", "failed", "skipped", "results"} {
		if members[k] == nil {
			t.Errorf("the report lacks %q: %s", k, out.String())
		}
	}
	var report struct {
		Plugin                  string
		Passed, Failed, Skipped int
		Results                 []map[string]json.RawMessage
	}
	json.Unmarshal(out.Bytes(), &report)
	if len(members) != 5 || report.Plugin != "fullsidecar" || report.Passed < 30 || report.Failed != 0 {
		t.Fatalf("got %d members, plugin %q, %d passed, %d failed; want 5, fullsidecar, >= 30 and 0", len(members), report.Plugin, report.Passed, report.Failed)
	}
	for _, r := range report.Results {
		if len(r) != 5 || r["name"] == nil || r["rule"] == nil || r["ok"] == nil || r["skipped"] == nil || r["detail"] == nil {
			t.Fatalf("a result is not {name, rule, ok, skipped, detail}: %v", r)
		}
	}
}

// TestCheckExitsOneNamingTheRuleBroken checks a sidecar that never
// answers extension/initialize: exit status 1, and the failed scenario
// printed with its ruling.
func TestCheckExitsOneNamingTheRuleBroken(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "mute.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec cat >/dev/null\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := `{"apiVersion":"reasonix.io/plugin/v1","name":"mute","version":"0.1.0","runtime":{"command":"${REASONIX_PLUGIN_ROOT}/mute.sh","intercepts":["tool.before"]}}`
	if err := os.WriteFile(filepath.Join(dir, "reasonix-plugin.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"check", "-timeout", "300ms", dir}, nil, &out, &errb)
	if code != 1 || !strings.Contains(out.String(), "FAIL  handshake/answered") || !strings.Contains(out.String(), "D10") {
		t.Fatalf("exit %d; want 1 and the failed handshake named with D10:\n%s%s", code, out.String(), errb.String())
	}
}

func TestCheckUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{{"check", "a", "b"}, {"check", "-home", "h", "dir"}, {"check", "-bogus"}} {
		var out, errb bytes.Buffer
		if code := run(args, nil, &out, &errb); code != 2 {
			t.Errorf("%q: exit %d; want 2", args, code)
		}
	}
}

// TestDemoAndCheckRunWhatAHomeHasInstalled: with -home, demo and check
// run the plugins installed there, as "exthost install" put them.
func TestDemoAndCheckRunWhatAHomeHasInstalled(t *testing.T) {
	dir, err := referencePlugin(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(t.TempDir(), "home")
	var out, errb bytes.Buffer
	if code := run([]string{"install", "-home", home, "-link", dir}, nil, &out, &errb); code != 0 {
		t.Fatalf("install: exit %d: %s", code, errb.String())
	}
	out.Reset()
	if code := run([]string{"demo", "-home", home}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "blocked by fullsidecar") {
		t.Fatalf("demo -home: exit %d: %s\n%s", code, errb.String(), out.String())
	}
	out.Reset()
	if code := run([]string{"check", "-home", home}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "exthost check: plugin fullsidecar") {
		t.Fatalf("check -home: exit %d: %s\n%s", code, errb.String(), out.String())
	}
}

// TestCheckAndDemoShowNoSecretOfTheSidecarD25: a shell-script sidecar
// that sends every secret of the redaction corpus in frames, in a block
// reason and on stderr, with the value its manifest gives it and one of
// the host's secret environment among them: neither `exthost check` (text
// and -json) nor `exthost demo -wire` prints any of them (D25, D27).
func TestCheckAndDemoShowNoSecretOfTheSidecarD25(t *testing.T) {
	const manifestValue, hostValue = "mq7Zx9Lm2Pk4Rt8Wv3", "hN4bV8cX2zL6kJ9pQ1"
	t.Setenv("EXTHOST_LEAK_TEST_TOKEN", hostValue)
	cases := loadCorpus(t)
	secrets := []string{manifestValue, hostValue}
	var corpus strings.Builder
	for _, c := range cases {
		corpus.WriteString(c.text + "\n")
		secrets = append(secrets, c.secrets...)
	}
	all := manifestValue + " " + hostValue + " " + corpus.String()
	text, _ := json.Marshal(all)
	// One case a frame, so that none is cut from the transcript.
	var frames strings.Builder
	for i, c := range append([]corpusCase{{text: manifestValue + " " + hostValue}}, cases...) {
		one, _ := json.Marshal(c.text)
		fmt.Fprintf(&frames, `{"jsonrpc":"2.0","method":"extension/provider/stream/chunk","params":{"streamId":"es_leak","seq":%d,"chunk":{"type":"text","text":%s}}}`+"\n", i+1, one)
		fmt.Fprintf(&frames, `{"jsonrpc":"2.0","method":"extension/leak","params":{"say":%s}}`+"\n", one)
	}
	dir := t.TempDir()
	for name, content := range map[string]string{"frames.ndjson": frames.String(), "reason.json": string(text), "stderr.txt": all + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// It answers initialize, waits for initialized, sends the frames and
	// writes stderr, then blocks every intercept with the secrets as the
	// reason, answers shutdown and exits.
	script := "#!/bin/sh\nread -r line\n" +
		`printf '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"1","name":"leaky","version":"1.0.0","stateSchemaVersion":0,"subscriptions":["tool.before","input.receive"]}}\n'` + "\n" +
		"read -r line\n" +
		`cat "$REASONIX_PLUGIN_ROOT/frames.ndjson"; cat "$REASONIX_PLUGIN_ROOT/stderr.txt" >&2; echo "env says $LEAKY_VALUE $EXTHOST_LEAK_TEST_TOKEN" >&2` + "\n" +
		`reason=$(cat "$REASONIX_PLUGIN_ROOT/reason.json")` + "\n" +
		"while read -r line; do\n" +
		`  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')` + "\n" +
		"  case \"$line\" in\n" +
		`  *extension/shutdown*) printf '{"jsonrpc":"2.0","id":%s,"result":{"accepted":true}}\n' "$id"; exit 0;;` + "\n" +
		`  *extension/intercept*) printf '{"jsonrpc":"2.0","id":%s,"result":{"decision":"block","reason":%s}}\n' "$id" "$reason";;` + "\n" +
		`  *'"id"'*) printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":%s}}\n' "$id" "$reason";;` + "\n" +
		"  esac\ndone\n"
	writeScriptPlugin(t, dir, script, `{"apiVersion":"reasonix.io/plugin/v1","name":"leaky","version":"1.0.0","runtime":{"command":"${REASONIX_PLUGIN_ROOT}/sidecar.sh",`+
		`"intercepts":["tool.before","input.receive"],"env":{"LEAKY_VALUE":"`+manifestValue+`"}}}`)
	// The sidecar answers no request but these: a short wait for the
	// others keeps the check quick.
	for _, args := range [][]string{{"check", "-timeout", "2s", dir}, {"check", "-json", "-timeout", "2s", dir}, {"demo", "-wire", dir}} {
		_, stdout, stderr := runExthost("", args...)
		if !strings.Contains(stdout+stderr, extension.RedactedMarker) {
			t.Fatalf("%s showed nothing of the sidecar's, redacted:\n%s\n%s", args, stdout, stderr)
		}
		for _, s := range secrets {
			if l := leak(stdout+stderr, s); l != "" {
				t.Errorf("%s shows %q of the secret %q", args, l, s)
			}
		}
	}
}

// TestCheckSaysWhatUpstreamRefusesD9: a manifest using runtime.providers
// and runtime.uiActions gets the portability line after its report, on
// stderr with -json so that stdout stays one JSON object a line.
func TestCheckSaysWhatUpstreamRefusesD9(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "mute.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec cat >/dev/null\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := `{"apiVersion":"reasonix.io/plugin/v1","name":"mute","runtime":{"command":"${REASONIX_PLUGIN_ROOT}/mute.sh",` +
		`"capabilities":["providers","ui"],"providers":["plugin/mute/a/m"],"uiActions":["go"]}}`
	if err := os.WriteFile(filepath.Join(dir, "reasonix-plugin.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	const line = "not loadable by upstream v1 hosts: runtime.providers, runtime.uiActions\n"
	var out, errb bytes.Buffer
	if code := run([]string{"check", "-timeout", "300ms", dir}, nil, &out, &errb); code != 1 || !strings.HasSuffix(out.String(), line) {
		t.Errorf("exit %d; want 1 and the report ending with %q:\n%s%s", code, line, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	run([]string{"check", "-json", "-timeout", "300ms", dir}, nil, &out, &errb)
	if errb.String() != line || strings.Count(out.String(), "\n") != 1 || !json.Valid(out.Bytes()) {
		t.Errorf("-json: stdout %q, stderr %q; want one JSON line and the portability line on stderr", out.String(), errb.String())
	}
}
