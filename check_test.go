package extension_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reasonix-ext/extension"
)

// referencePluginDir writes a plugin directory for the reference plugin:
// its own manifest, sdk/examples/fullsidecar/reasonix-plugin.json, with
// the built binary as command. With fault set, the command is the proxy
// fixture, which runs the reference plugin and injects that one fault.
func referencePluginDir(t *testing.T, fault string) string {
	t.Helper()
	bin, err := referenceBinary()
	if err != nil {
		t.Fatalf("building the reference plugin: %v", err)
	}
	manifest := referenceManifest(t)
	rt := manifest["runtime"].(map[string]any)
	rt["command"] = bin
	if fault != "" {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		usedFixtures["proxy"] = true
		rt["command"] = exe
		rt["env"] = map[string]string{fixtureEnv: "proxy", "PROXY_TARGET": bin, "PROXY_FAULT": fault, "GORACE": "atexit_sleep_ms=0"}
	}
	dir := filepath.Join(t.TempDir(), "fullsidecar")
	b, _ := json.Marshal(manifest)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, extension.ManifestFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// fixturePluginDir writes a plugin directory whose sidecar is the fixture
// of that name, subscribed to tool.before.
func fixturePluginDir(t *testing.T, fixture string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	usedFixtures[fixture] = true
	dir := filepath.Join(t.TempDir(), fixture)
	manifest, _ := json.Marshal(map[string]any{"apiVersion": "reasonix.io/plugin/v1", "name": fixture, "version": "1",
		"runtime": map[string]any{"command": exe, "intercepts": []string{"tool.before"},
			"env": map[string]string{fixtureEnv: fixture, "GORACE": "atexit_sleep_ms=0"}}})
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, extension.ManifestFile), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestCheckPassesTheReferencePlugin runs the conformance check on the
// reference plugin, built on the SDK: every scenario that applies passes,
// at least 30 of them, each naming a ruling that PROTOCOL.md defines
// (D1-D31) and the section it checks.
func TestCheckPassesTheReferencePlugin(t *testing.T) {
	checkLeaks(t)
	report, err := extension.Check(context.Background(), referencePluginDir(t, ""), extension.CheckOptions{})
	if err != nil {
		t.Fatalf("check failed: %v\n%s", err, reportText(report))
	}
	if report.Plugin != "fullsidecar" || report.Failed != 0 || report.Passed < 30 || report.Passed+report.Skipped != len(report.Results) {
		t.Fatalf("plugin %q: %d passed, %d failed, %d skipped of %d; want fullsidecar, at least 30 passed and none failed\n%s",
			report.Plugin, report.Passed, report.Failed, report.Skipped, len(report.Results), reportText(report))
	}
	protocol, err := os.ReadFile("PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	classes := map[string]bool{}
	for _, r := range report.Results {
		section, _, _ := strings.Cut(strings.TrimPrefix(r.Detail, "PROTOCOL.md §"), ":")
		section, _, _ = strings.Cut(section, "\n")
		if !bytes.Contains(protocol, []byte("## "+section+" ")) && !bytes.Contains(protocol, []byte("## "+section+". ")) {
			t.Errorf("%s names section §%s, which PROTOCOL.md does not have", r.Name, section)
		}
		if !strings.HasPrefix(r.Rule, "D") || !strings.HasPrefix(r.Detail, "PROTOCOL.md §") {
			t.Errorf("%s: rule %q, detail %q; want a D-ID and a PROTOCOL.md section", r.Name, r.Rule, r.Detail)
		}
		if r.OK {
			class, _, _ := strings.Cut(r.Name, "/")
			classes[class] = true
		}
	}
	for _, class := range []string{"handshake", "barrier", "envelope", "errors", "intercept", "events", "content", "ids", "provider", "ui", "shutdown", "framing"} {
		if !classes[class] {
			t.Errorf("no scenario of class %s passed\n%s", class, reportText(report))
		}
	}
}

func reportText(r *extension.CheckReport) string {
	if r == nil {
		return "(no report)"
	}
	var b strings.Builder
	for _, res := range r.Results {
		state := "ok  "
		switch {
		case res.Skipped:
			state = "skip"
		case !res.OK:
			state = "FAIL"
		}
		b.WriteString(state + " " + res.Name + " (" + res.Rule + ") " + res.Detail + "\n")
	}
	return b.String()
}

// TestCheckNamesTheRuleAFaultBreaks runs the check on the reference
// plugin behind a proxy that injects one fault each, and finds that fault
// failed under the ruling it breaks.
func TestCheckNamesTheRuleAFaultBreaks(t *testing.T) {
	for _, tc := range []struct{ fault, scenario, rule string }{
		{"early-traffic", "barrier/nothing-before-initialized", "D6"},
		{"smuggled-key", "handshake/strict-result", "D3"},
		{"over-declared", "handshake/declaration", "D9"},
		{"ignore-shutdown", "shutdown/answered", "D11"},
		{"wrong-unknown-method", "errors/unknown-method", "D7"},
		{"illegal-verdict", "intercept/input.receive", "D16"},
		{"string-ids", "ids/own-requests-are-integers", "D4"},
		{"stream-gap", "provider/stream", "D21"},
		{"bad-content-read", "content/large-payload-read-back", "D22"},
		{"unstructured-ui", "ui/structured-only", "D23"},
		{"debug-print", "framing/every-line-a-frame", "D2"},
		{"ids-from-7", "ids/own-requests-are-integers", "D4"},
		{"stale-generation", "ui/current-generation", "D24"},
		{"catalog-not-strict", "provider/catalog", "D3"},
		{"bad-replacement-digest", "content/verdict-on-a-large-payload", "D22"},
		// A chunk after the end, in the end's write and in one of its own
		// right after it: judged whole, the stream is caught every time.
		{"chunk-after-end-same", "provider/stream", "D21"},
		{"chunk-after-end-split", "provider/stream", "D21"},
		// The raw fixtures of the earlier issues, which answer nothing
		// after the handshake.
		{"fixture:early-request", "barrier/nothing-before-initialized", "D6"},
		{"fixture:ignore-shutdown", "shutdown/answered", "D11"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			checkLeaks(t)
			dir, timeout := referencePluginDir(t, tc.fault), 2*time.Second
			if fixture, ok := strings.CutPrefix(tc.fault, "fixture:"); ok {
				dir, timeout = fixturePluginDir(t, fixture), 300*time.Millisecond
			}
			report, err := extension.Check(context.Background(), dir, extension.CheckOptions{Timeout: timeout})
			if err == nil {
				t.Fatalf("the check passed a sidecar with fault %s\n%s", tc.fault, reportText(report))
			}
			for _, r := range report.Results {
				if r.Name == tc.scenario && !r.OK && !r.Skipped {
					if r.Rule != tc.rule || !strings.Contains(err.Error(), tc.scenario+" ("+tc.rule+")") {
						t.Fatalf("%s failed under %s (error %v); want %s", r.Name, r.Rule, err, tc.rule)
					}
					return
				}
			}
			t.Fatalf("%s did not fail\n%s", tc.scenario, reportText(report))
		})
	}
}

// TestCheckPassesAnUnknownEnvelopeMemberD3: "ID" beside "id" is merely an
// unknown member of the envelope, which a receiver tolerates (D3); the
// checker reads every frame as the host does, so the sidecar that writes
// one passes, its id read from "id".
func TestCheckPassesAnUnknownEnvelopeMemberD3(t *testing.T) {
	checkLeaks(t)
	report, err := extension.Check(context.Background(), referencePluginDir(t, "envelope-ID"), extension.CheckOptions{Timeout: 2 * time.Second})
	if err != nil || report.Failed != 0 || report.Passed < 30 {
		t.Fatalf("check: %v; %d passed, %d failed\n%s", err, report.Passed, report.Failed, reportText(report))
	}
	// Every scenario the plain sidecar gets is there, judged or skipped
	// (which of the two may vary with timing: a stream may end before its
	// cancel comes).
	plain, err := extension.Check(context.Background(), referencePluginDir(t, ""), extension.CheckOptions{Timeout: 2 * time.Second})
	names := func(r *extension.CheckReport) (n []string) {
		for _, res := range r.Results {
			n = append(n, res.Name)
		}
		return n
	}
	if err != nil || !slices.Equal(names(plain), names(report)) {
		t.Fatalf("with \"ID\" the scenarios are %q, without %q (%v): none may be dropped\n%s", names(report), names(plain), err, reportText(report))
	}
}

// TestCheckPassesWhatUpstreamSendsD7: where this module is stricter than
// upstream (PROTOCOL.md §11), a sidecar behaving as upstream's SDK does
// still passes: its -32600 and -32700 answers carry no data.
func TestCheckPassesWhatUpstreamSendsD7(t *testing.T) {
	checkLeaks(t)
	report, err := extension.Check(context.Background(), referencePluginDir(t, "upstream-errors"), extension.CheckOptions{Timeout: 2 * time.Second})
	if err != nil || report.Failed != 0 {
		t.Fatalf("check: %v\n%s", err, reportText(report))
	}
	for _, r := range report.Results {
		if r.Name == "envelope/string-id" && r.OK && strings.Contains(r.Detail, `"code":-32600`) && !strings.Contains(r.Detail, `"data"`) {
			return
		}
	}
	t.Fatalf("envelope/string-id did not pass on an answer without data\n%s", reportText(report))
}

// TestCheckTakesNoStrayAnswerForAProbesD4: an answer the sidecar wrote to
// extension/initialized, a notification, is not taken for the answer of
// the probe sent after it: each probe's answer is the one that follows a
// round trip, matched by its id (§2.4).
func TestCheckTakesNoStrayAnswerForAProbesD4(t *testing.T) {
	checkLeaks(t)
	report, _ := extension.Check(context.Background(), referencePluginDir(t, "answers-initialized"), extension.CheckOptions{Timeout: 2 * time.Second})
	for _, r := range report.Results {
		if strings.HasPrefix(r.Name, "envelope/") && !r.OK {
			t.Errorf("%s failed, blamed for the stray answer: %s", r.Name, r.Detail)
		}
	}
}

// fixtureProxy runs $PROXY_TARGET (the reference plugin) behind a filter
// that injects the fault $PROXY_FAULT into the frames between it and the
// host, then exits with its status.
func fixtureProxy() {
	fault := os.Getenv("PROXY_FAULT")
	child := exec.Command(os.Getenv("PROXY_TARGET"))
	child.Stderr = os.Stderr
	toChild, _ := child.StdinPipe()
	fromChild, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		os.Exit(3)
	}
	var large atomic.Pointer[externalized] // the intercept whose payload came by reference
	var stdout sync.Mutex                  // held by the writes to stdout, from either direction
	go func() {                            // host → sidecar
		in := bufio.NewReaderSize(os.Stdin, 1<<20)
		for {
			line, err := in.ReadBytes('\n')
			if fault == "ids-from-7" && !bytes.Contains(line, []byte(`"method"`)) {
				line = shiftID(line, -6) // an answer to a renumbered request
			}
			if fault == "bad-replacement-digest" && bytes.Contains(line, []byte(`"externalized":[`)) {
				var f struct {
					ID     int64 `json:"id"`
					Params struct {
						Externalized []externalized `json:"externalized"`
					} `json:"params"`
				}
				if json.Unmarshal(line, &f) == nil && len(f.Params.Externalized) == 1 {
					f.Params.Externalized[0].ID = f.ID
					large.Store(&f.Params.Externalized[0])
				}
			}
			if len(line) > 0 && !(fault == "ignore-shutdown" && bytes.Contains(line, []byte(`"method":"extension/shutdown"`))) {
				toChild.Write(line)
			}
			if fault == "answers-initialized" && bytes.Contains(line, []byte(`"method":"extension/initialized"`)) {
				stdout.Lock()
				os.Stdout.Write([]byte(`{"jsonrpc":"2.0","id":null,"result":{}}` + "\n")) // an answer to a notification
				stdout.Unlock()
			}
			if err != nil {
				toChild.Close()
				return
			}
		}
	}()
	out := bufio.NewReader(fromChild)
	requests := 0
	for {
		line, err := out.ReadBytes('\n')
		if x := large.Load(); x != nil && bytes.HasPrefix(line, []byte(`{"jsonrpc":"2.0","id":`+strconv.FormatInt(x.ID, 10)+`,"result":`)) {
			// The answer to the large payload's intercept replaces it by
			// reference to the host's own copy, with a wrong digest.
			line = []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"decision":"replace","externalized":[{"jsonPointer":"/replacement","contentRef":%q,"totalBytes":%d,"sha256":"%s"}]}}`+"\n", x.ID, x.ContentRef, x.TotalBytes, strings.Repeat("0", 64)))
		}
		if len(line) > 0 {
			stdout.Lock()
			out := proxyFault(fault, line, &requests)
			if fault != "chunk-after-end-split" {
				os.Stdout.Write(out)
			}
			for _, part := range bytes.SplitAfter(out, []byte("\n")) {
				if fault == "chunk-after-end-split" && len(part) > 0 {
					os.Stdout.Write(part) // a write a line
				}
			}
			stdout.Unlock()
		}
		if err != nil {
			break
		}
	}
	if err := child.Wait(); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// proxyFault rewrites one frame of the sidecar's as fault says.
func proxyFault(fault string, line []byte, requests *int) []byte {
	has := func(s string) bool { return bytes.Contains(line, []byte(s)) }
	replace := func(old, new string) []byte { return bytes.Replace(line, []byte(old), []byte(new), 1) }
	initAnswer := has(`"id":1,"result":{"protocolVersion"`)
	switch {
	case fault == "early-traffic" && initAnswer:
		return append([]byte(`{"jsonrpc":"2.0","id":1,"method":"host/ui/publish","params":{}}`+"\n"), line...)
	case fault == "smuggled-key" && initAnswer:
		return replace(`"result":{`, `"result":{"smuggled":true,`)
	case fault == "over-declared" && initAnswer:
		return replace(`"subscriptions":[`, `"subscriptions":["session.end",`)
	case fault == "wrong-unknown-method" && has(`"code":-32601`):
		return replace(`"code":-32601`, `"code":-32603`)
	case fault == "illegal-verdict" && has(`"result":{"decision":"continue"}`):
		return replace(`"decision":"continue"`, `"decision":"allow"`)
	case fault == "string-ids" && has(`"method":"host/`) && !has(`"result"`):
		if *requests++; *requests == 1 {
			i := bytes.Index(line, []byte(`"id":`)) + len(`"id":`)
			j := i + bytes.IndexByte(line[i:], ',')
			return append(append(append(append([]byte{}, line[:i]...), '"'), append(line[i:j:j], '"')...), line[j:]...)
		}
	case fault == "stream-gap" && has(`"method":"extension/provider/stream/chunk"`) && has(`"seq":2,`):
		return nil
	case fault == "bad-content-read" && has(`"method":"host/content/read"`):
		return replace(`"offset":`, `"offset":9999999`)
	case fault == "unstructured-ui" && has(`"method":"host/ui/publish"`):
		return replace(`"label":"`, `"label":"<b>bold</b> `)
	case fault == "upstream-errors" && (has(`"code":-32600`) || has(`"code":-32700`)):
		return regexp.MustCompile(`,"data":\{[^}]*\}`).ReplaceAll(line, nil) // as upstream's SDK answers them (§11)
	case fault == "envelope-ID":
		return replace(`{"jsonrpc":"2.0",`, `{"jsonrpc":"2.0","ID":"trace",`)
	case fault == "debug-print" && has(`"result":{"decision"`):
		return append([]byte("debug: deciding\n"), line...)
	case fault == "ids-from-7" && has(`"method":"host/`):
		return shiftID(line, 6)
	case fault == "stale-generation" && has(`"method":"host/ui/publish"`):
		return replace(`"generation":1`, `"generation":99`)
	case fault == "catalog-not-strict" && has(`"result":{"providers":`):
		return replace(`"result":{`, `"result":{"smuggled":true,`)
	case strings.HasPrefix(fault, "chunk-after-end") && has(`"method":"extension/provider/stream/end"`):
		var end struct {
			Params extension.StreamEndParams `json:"params"`
		}
		json.Unmarshal(line, &end)
		late, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": extension.MethodStreamChunk,
			"params": extension.StreamChunkParams{StreamID: end.Params.StreamID, Seq: end.Params.LastSeq + 1, Chunk: extension.ProviderChunk{Type: extension.ChunkText, Text: "late"}}})
		return append(append(line, late...), '\n')
	}
	return line
}

// externalized is what the proxy keeps of an intercept whose payload
// came by reference.
type externalized struct {
	ID         int64  `json:"-"`
	ContentRef string `json:"contentRef"`
	TotalBytes int64  `json:"totalBytes"`
}

// shiftID adds delta to the integer id of a frame.
func shiftID(line []byte, delta int64) []byte {
	i := bytes.Index(line, []byte(`"id":`))
	if i < 0 {
		return line
	}
	i += len(`"id":`)
	j := i
	for j < len(line) && '0' <= line[j] && line[j] <= '9' {
		j++
	}
	id, err := strconv.ParseInt(string(line[i:j]), 10, 64)
	if err != nil {
		return line
	}
	return slices.Concat(line[:i], []byte(strconv.FormatInt(id+delta, 10)), line[j:])
}

// TestCheckPassesAPythonSidecarWithoutTheSDK runs the check on
// testdata/plugins/pysidecar, written in Python from PROTOCOL.md alone:
// a correct sidecar passes whatever its language.
func TestCheckPassesAPythonSidecarWithoutTheSDK(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed:", err)
	}
	report, err := extension.Check(context.Background(), filepath.Join("testdata", "plugins", "pysidecar"), extension.CheckOptions{})
	if err != nil || report.Failed != 0 || report.Passed < 20 {
		t.Fatalf("check: %v; %d passed, %d failed\n%s", err, report.Passed, report.Failed, reportText(report))
	}
}

// TestCheckNamesADeadSidecarsDeathFirst: a sidecar that cannot answer
// because it is dead gets its death as the first failure, not a timeout:
// its exit status and the end of its stderr, an interpreter line that
// names nothing (a CRLF script), and the literal placeholder in args that
// made it exit (§3.1, §3.5).
func TestCheckNamesADeadSidecarsDeathFirst(t *testing.T) {
	for _, tc := range []struct {
		name, script, args string
		want               []string
	}{
		{"exit", "#!/bin/sh\necho 'boom: config missing' >&2\nexit 3\n", `[]`, []string{"exited (exit status 3)", "its stderr ends: boom: config missing"}},
		{"crlf", "#!/bin/sh\r\nexit 0\r\n", `[]`, []string{`its #! line names "/bin/sh\r"`, "CRLF line ends"}},
		{"placeholder", "#!/bin/sh\ncat \"$1\" >/dev/null || exit 2\n", `["${REASONIX_PLUGIN_ROOT}/main.py"]`, []string{"exited (exit status 2)", "args[0] holds the literal ${REASONIX_PLUGIN_ROOT}", "main.py"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			dir := filepath.Join(t.TempDir(), tc.name)
			os.MkdirAll(dir, 0o755)
			manifest := `{"apiVersion":"reasonix.io/plugin/v1","name":"` + tc.name + `","version":"1","runtime":{"command":"${REASONIX_PLUGIN_ROOT}/sidecar.sh","args":` + tc.args + `,"intercepts":["tool.before"]}}`
			if err := os.WriteFile(filepath.Join(dir, extension.ManifestFile), []byte(manifest), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "sidecar.sh"), []byte(tc.script), 0o755); err != nil {
				t.Fatal(err)
			}
			report, err := extension.Check(context.Background(), dir, extension.CheckOptions{Timeout: time.Second})
			if err == nil {
				t.Fatalf("a dead sidecar passed\n%s", reportText(report))
			}
			for _, r := range report.Results {
				if r.OK || r.Skipped {
					continue
				}
				for _, w := range tc.want {
					if r.Name != "handshake/answered" || !strings.Contains(r.Detail, w) {
						t.Fatalf("the first failure is %s: %s; want handshake/answered saying %q", r.Name, r.Detail, w)
					}
				}
				return
			}
		})
	}
}

// TestCheckPassesNothingItDidNotObserve: a sidecar that answers its
// handshake and nothing after gets no ok but the handshake's own; every
// other scenario fails or says what the sidecar would have to do for it to
// be judged.
func TestCheckPassesNothingItDidNotObserve(t *testing.T) {
	checkLeaks(t)
	report, err := extension.Check(context.Background(), fixturePluginDir(t, "silent"), extension.CheckOptions{Timeout: 300 * time.Millisecond})
	if err == nil {
		t.Fatalf("a silent sidecar passed\n%s", reportText(report))
	}
	own := []string{"install/launch-gate", "handshake/answered", "handshake/strict-result", "handshake/declaration"}
	for _, r := range report.Results {
		if r.OK && !slices.Contains(own, r.Name) {
			t.Errorf("%s passed, though the sidecar answered nothing it could judge\n%s", r.Name, reportText(report))
		}
	}
}
