package extension_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/reasonix-ext/extension"
	"github.com/reasonix-ext/extension/sdk"
)

// The test binary doubles as every fixture sidecar: TestMain runs the
// fixture named by $EXT_FIXTURE instead of the tests, as os/exec's tests
// do. Each fixture is one way a sidecar can behave or misbehave.
const fixtureEnv = "EXT_FIXTURE"

var fixtures = map[string]func(){
	"sdk":                fixtureSDK,
	"raw":                fixtureRaw,
	"early-request":      func() { fixtureEarly(`{"jsonrpc":"2.0","id":1,"method":"host/ui/publish","params":{}}`) },
	"early-notification": func() { fixtureEarly(`{"jsonrpc":"2.0","method":"extension/provider/stream/end","params":{}}`) },
	"late-notification":  fixtureLateNotification,
	"say":                fixtureSay,
	"stray-response":     func() { fixtureEarly(`{"jsonrpc":"2.0","id":77,"result":{}}`) },
	"garbage":            func() { fixtureEarly(`this is not json`) },
	"stall-initialize":   fixtureStallInitialize,
	"ignore-shutdown":    fixtureIgnoreShutdown,
	"silent":             fixtureSilent,
	"grandchild":         fixtureGrandchild,
	"hold-stdout":        fixtureHoldStdout,
	"stop-reading":       fixtureStopReading,
	"stderr-flood":       fixtureStderrFlood,
	"gauge":              fixtureGauge,
	"verdict":            fixtureVerdict,
	"pingpong-dto":       fixturePingPongDTO,
	"observe-count":      fixtureObserveCount,
	"serve-cancel":       fixtureServeCancel,
	"install":            fixtureInstall,
	"stream":             fixtureStream,
	"raw-stream":         fixtureRawStream,
	"raw-replace":        fixtureRawReplace,
	"pager":              fixturePager,
	"raw-ui":             fixtureRawUI,
	"chaos":              fixtureChaos,
	"hostile":            fixtureHostile,
	"proxy":              fixtureProxy,
}

// usedFixtures records which fixtures a test started, so that TestMain
// can fail when one is never used (like os/exec's helper registry).
var usedFixtures = map[string]bool{}

// tempDirs are directories made outside any test's TempDir, removed once
// the tests have run.
var tempDirs []string

// pluginDirs maps home+"/"+plugin to the plugin's directory.
var pluginDirs = map[string]string{}

func TestMain(m *testing.M) {
	if name := os.Getenv(fixtureEnv); name != "" {
		f := fixtures[name]
		if f == nil {
			fmt.Fprintf(os.Stderr, "unknown fixture %q\n", name)
			os.Exit(2)
		}
		if pidfile := os.Getenv("FIXTURE_PIDFILE"); pidfile != "" {
			writePidFile(pidfile, os.Getpid())
		}
		f()
		os.Exit(0)
	}
	code := m.Run()
	for _, dir := range tempDirs {
		os.RemoveAll(dir)
	}
	if code == 0 && testing.Short() == false && flagRunAll() {
		for name := range fixtures {
			if !usedFixtures[name] {
				fmt.Fprintf(os.Stderr, "fixture %q is registered but no test used it\n", name)
				code = 1
			}
		}
	}
	os.Exit(code)
}

// flagRunAll reports whether the whole suite ran (no -run filter), the
// only case where an unused fixture means a missing test.
func flagRunAll() bool {
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-test.run") || strings.HasPrefix(a, "-test.fuzz") {
			return false
		}
	}
	return true
}

// plugin describes one fixture plugin to install.
type plugin struct {
	name      string
	fixture   string
	env       map[string]string
	runtime   map[string]any // extra runtime fields (intercepts, replaces, ...)
	required  bool
	noInstall bool
}

// installPlugins writes each plugin's directory and manifest and installs
// it (linked) into a fresh home, in order. Each fixture writes its pid to
// <dir>/pid, where pidOf finds it.
func installPlugins(t testing.TB, plugins ...plugin) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	for _, p := range plugins {
		usedFixtures[p.fixture] = true
		dir := filepath.Join(t.TempDir(), p.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		env := map[string]string{
			fixtureEnv: p.fixture, "FIXTURE_PIDFILE": filepath.Join(dir, "pid"),
			// A race-enabled binary sleeps a second before exiting by
			// default; a sidecar must exit within the stdin grace.
			"GORACE": "atexit_sleep_ms=0",
		}
		for k, v := range p.env {
			env[k] = v
		}
		rt := map[string]any{"command": exe, "env": env, "required": p.required}
		for k, v := range p.runtime {
			rt[k] = v
		}
		manifest := map[string]any{"apiVersion": "reasonix.io/plugin/v1", "name": p.name, "version": "0.1.0", "runtime": rt}
		b, err := json.Marshal(manifest)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, extension.ManifestFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
		pluginDirs[home+"/"+p.name] = dir
		if p.noInstall {
			continue
		}
		if _, err := extension.Install(home, dir, extension.InstallOptions{Name: p.name, Link: true}); err != nil {
			t.Fatalf("install %s: %v", p.name, err)
		}
	}
	return home
}

// testHost returns a Host over home with short, explicit bounds.
func testHost(home string) *extension.Host {
	return &extension.Host{
		Home:            home,
		Session:         extension.SessionContext{SessionID: "sess-test", WorkspaceRoot: "/ws", Generation: 1},
		StartupTimeout:  20 * time.Second,
		ShutdownTimeout: 5 * time.Second,
	}
}

// fixtureSDK is a well-behaved sidecar built on the SDK; $FIXTURE_DECL
// (a JSON InitializeResult) sets its declaration.
func fixtureSDK() {
	opts := sdk.Options{Name: os.Getenv("REASONIX_PLUGIN_NAME"), Version: "1.0.0", Logf: func(string, ...any) {}}
	if decl := os.Getenv("FIXTURE_DECL"); decl != "" {
		var r extension.InitializeResult
		if err := json.Unmarshal([]byte(decl), &r); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		opts.Replaces, opts.Providers, opts.UIActions = r.Replaces, r.Providers, r.UIActions
		for _, s := range r.Subscriptions {
			opts.Subscriptions = append(opts.Subscriptions, extension.Point(s))
		}
	}
	if os.Getenv("FIXTURE_HOLD") != "" {
		opts.MaxHandlers = 64 // room for the crash test's 50 held calls
	}
	opts.Intercept = map[extension.Point]sdk.InterceptFunc{
		"*": func(ctx context.Context, c *sdk.Call) (sdk.Verdict, error) {
			if os.Getenv("FIXTURE_HOLD") != "" {
				<-ctx.Done() // hold every intercept until the host gives up
				return sdk.Verdict{}, ctx.Err()
			}
			return sdk.Continue(), nil
		},
	}
	if err := sdk.Serve(context.Background(), opts); err != nil {
		fmt.Fprintln(os.Stderr, "sdk fixture:", err)
		os.Exit(1)
	}
}

// readFrame reads one frame from stdin.
func readFrame(r *bufio.Reader) map[string]json.RawMessage {
	line, err := r.ReadBytes('\n')
	if err != nil {
		os.Exit(0)
	}
	var m map[string]json.RawMessage
	json.Unmarshal(line, &m)
	return m
}

// fixtureRaw answers initialize with $FIXTURE_RESULT verbatim, any other
// request with the members in $FIXTURE_ANSWER (when set, e.g.
// `"result":{}`), then answers shutdown, after sending the request
// $FIXTURE_LAST_REQUEST if set, and exits with $FIXTURE_EXIT (default 0).
func fixtureRaw() {
	in := bufio.NewReader(os.Stdin)
	m := readFrame(in)
	fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", m["id"], os.Getenv("FIXTURE_RESULT"))
	answer := os.Getenv("FIXTURE_ANSWER")
	for {
		m := readFrame(in)
		switch {
		case string(m["method"]) == `"extension/shutdown"`:
			if last := os.Getenv("FIXTURE_LAST_REQUEST"); last != "" {
				// Nothing reads the host's answer to last: its write fails,
				// and the host may stop reading before the answer below is
				// written, which must not kill this process (exit 0).
				signal.Ignore(syscall.SIGPIPE)
				os.Stdin.Close()
				fmt.Println(last)
			}
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"accepted":true}}`+"\n", m["id"])
			code, _ := strconv.Atoi(os.Getenv("FIXTURE_EXIT"))
			os.Exit(code)
		case m["id"] != nil && answer != "":
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,%s}`+"\n", m["id"], answer)
		}
	}
}

// fixtureEarly sends line before answering initialize (D6), then answers
// it anyway and waits.
func fixtureEarly(line string) {
	in := bufio.NewReader(os.Stdin)
	m := readFrame(in)
	fmt.Println(line)
	fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"1","name":"early","version":"1","stateSchemaVersion":0}}`+"\n", m["id"])
	for {
		readFrame(in)
	}
}

// fixtureLateNotification answers initialize, then, in a write of its
// own and without waiting for extension/initialized, sends a
// notification: pre-barrier or not depending on when the host reads it
// (D6), then it answers shutdown.
func fixtureLateNotification() {
	in := bufio.NewReader(os.Stdin)
	m := readFrame(in)
	fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"1","name":"late","version":"1","stateSchemaVersion":0}}`+"\n", m["id"])
	fmt.Println(`{"jsonrpc":"2.0","method":"extension/provider/stream/end","params":{}}`)
	sdkLikeShutdown(in)
}

// fixtureSay is an SDK sidecar that says the bytes hex-encoded in
// $FIXTURE_SAY_HEX everywhere a host caller can see it (D27): on stderr,
// in its declared name and version and in a block reason at tool.before.
// With $FIXTURE_SAY_FAIL set it refuses the handshake, so its stderr tail
// reaches the start error.
func fixtureSay() {
	raw, _ := hex.DecodeString(os.Getenv("FIXTURE_SAY_HEX"))
	say := string(raw)
	fmt.Fprintf(os.Stderr, "stderr says %s\n", say)
	err := sdk.Serve(context.Background(), sdk.Options{
		Name: "say" + say, Version: "1" + say, Logf: func(string, ...any) {},
		Initialize: func(context.Context, *extension.InitializeParams, *extension.InitializeResult) error {
			if os.Getenv("FIXTURE_SAY_FAIL") != "" {
				return errors.New("refusing to start")
			}
			return nil
		},
		Intercept: map[extension.Point]sdk.InterceptFunc{
			extension.ToolBefore: func(context.Context, *sdk.Call) (sdk.Verdict, error) {
				return sdk.Block("reason says " + say), nil
			},
		},
	})
	if err != nil {
		os.Exit(1)
	}
}

// fixtureStallInitialize reads initialize and never answers.
func fixtureStallInitialize() {
	in := bufio.NewReader(os.Stdin)
	readFrame(in)
	for {
		readFrame(in)
	}
}

const okResult = `{"protocolVersion":"1","name":"fixture","version":"1","stateSchemaVersion":0}`

// fixtureIgnoreShutdown completes the handshake, then ignores everything,
// including shutdown and the end of stdin.
func fixtureIgnoreShutdown() {
	in := bufio.NewReader(os.Stdin)
	m := readFrame(in)
	fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", m["id"], okResult)
	in.WriteTo(devNull{}) // read until EOF, answering nothing
	hang()
}

// fixtureSilent completes the handshake, subscribed to tool.before, then
// answers nothing and never exits by itself.
func fixtureSilent() {
	in := bufio.NewReader(os.Stdin)
	m := readFrame(in)
	fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"1","name":"silent","version":"1","subscriptions":["tool.before"],"stateSchemaVersion":0}}`+"\n", m["id"])
	in.WriteTo(devNull{})
	hang()
}

// hang blocks forever without tripping the runtime's deadlock detector,
// as a wedged sidecar would.
func hang() {
	for {
		time.Sleep(time.Hour)
	}
}

type devNull struct{}

func (devNull) Write(p []byte) (int, error) { return len(p), nil }

// fixtureGrandchild answers shutdown, leaves a grandchild that keeps
// stdout open, and exits.
func fixtureGrandchild() {
	in := bufio.NewReader(os.Stdin)
	m := readFrame(in)
	fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", m["id"], okResult)
	for {
		m := readFrame(in)
		if string(m["method"]) == `"extension/shutdown"` {
			exe, _ := os.Executable()
			gc := exec.Command(exe)
			// The grandchild must not inherit FIXTURE_PIDFILE: it would
			// overwrite the parent's pid, and a test reading the file
			// between the truncate and the write would see it empty.
			gc.Env = append(withoutEnv(os.Environ(), "FIXTURE_PIDFILE"), fixtureEnv+"=hold-stdout")
			gc.Stdout = os.Stdout
			gc.Stderr = os.Stderr
			if err := gc.Start(); err != nil {
				os.Exit(3)
			}
			writePidFile(os.Getenv("FIXTURE_GCPIDFILE"), gc.Process.Pid)
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"accepted":true}}`+"\n", m["id"])
			os.Exit(0)
		}
	}
}

// fixtureHoldStdout is the grandchild: it holds the inherited stdout open
// forever.
func fixtureHoldStdout() { hang() }

// fixtureStopReading completes the handshake (declaring $FIXTURE_RESULT
// when set) and then never reads stdin again, so the host's writes stall
// (D13) and its events pile up (D20).
func fixtureStopReading() {
	in := bufio.NewReader(os.Stdin)
	m := readFrame(in)
	result := okResult
	if r := os.Getenv("FIXTURE_RESULT"); r != "" {
		result = r
	}
	fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", m["id"], result)
	hang()
}

// fixtureStderrFlood writes 100 MiB to stderr, with a secret near the
// end, while answering initialize with a declaration the host refuses.
func fixtureStderrFlood() {
	in := bufio.NewReader(os.Stdin)
	m := readFrame(in)
	chunk := []byte(strings.Repeat("noise noise noise noise noise noise noise noise\n", 1<<10)) // 48 KiB
	for written := 0; written < 100<<20; written += len(chunk) {
		os.Stderr.Write(chunk)
	}
	fmt.Fprintln(os.Stderr, "config: api_key=sk-proj-FAKEfake0123456789abcdefFAKE0123456789 loaded")
	fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2","name":"flood","version":"1","stateSchemaVersion":0}}`+"\n", m["id"])
	for {
		readFrame(in)
	}
}

// fixtureGauge measures how many gauge sidecars are initializing at once
// (D10), with files in $FIXTURE_DIR. On initialize it registers as active
// and holds its answer: until $FIXTURE_BOUND peers are active and then a
// little longer, so that a host breaking the bound would start a further
// peer while they all hold; or until all $FIXTURE_TOTAL have registered.
// It records the most active peers it saw, deregisters, then answers, so a
// host that keeps the bound never has more than the bound active.
func fixtureGauge() {
	dir := os.Getenv("FIXTURE_DIR")
	id := os.Getenv("REASONIX_PLUGIN_NAME")
	var total, bound int
	fmt.Sscan(os.Getenv("FIXTURE_TOTAL"), &total)
	fmt.Sscan(os.Getenv("FIXTURE_BOUND"), &bound)
	in := bufio.NewReader(os.Stdin)
	m := readFrame(in)
	active := filepath.Join(dir, "active-"+id)
	os.WriteFile(active, nil, 0o644)
	os.WriteFile(filepath.Join(dir, "seen-"+id), nil, 0o644)
	count := func(prefix string) int {
		n, _ := filepath.Glob(filepath.Join(dir, prefix+"*"))
		return len(n)
	}
	peak := 0
	var full time.Time
	for {
		a := count("active-")
		peak = max(peak, a)
		if a >= bound && full.IsZero() {
			full = time.Now()
		}
		if count("seen-") == total || !full.IsZero() && time.Since(full) > 200*time.Millisecond {
			break
		}
		time.Sleep(time.Millisecond) // the fixture's own polling, not a test's synchronisation
	}
	os.WriteFile(filepath.Join(dir, "peak-"+id), []byte(fmt.Sprint(max(peak, count("active-")))), 0o644)
	os.Remove(active)
	fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", m["id"], okResult)
	sdkLikeShutdown(in)
}

// sdkLikeShutdown answers shutdown and exits 0 on it or on EOF.
func sdkLikeShutdown(in *bufio.Reader) {
	for {
		m := readFrame(in)
		if string(m["method"]) == `"extension/shutdown"` {
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"accepted":true}}`+"\n", m["id"])
			return
		}
	}
}

// validReplacements holds, per point, a replacement its payload document
// accepts (PROTOCOL.md §4.1).
var validReplacements = map[extension.Point]string{
	extension.InputReceive:          `{"text":"replaced"}`,
	extension.AgentBeforeStart:      `{"model":"m2","toolCount":3,"sessionId":"s-2"}`,
	extension.SystemPromptBuild:     `{"prompt":"P","workspaceRoot":"/ws"}`,
	extension.ContextPrepare:        `{"messages":[{"role":"user","content":"c"}]}`,
	extension.ProviderRequestPoint:  `{"request":{"messages":[],"tools":[],"maxTokens":1}}`,
	extension.ProviderResponsePoint: `{"text":"t","calls":[{"id":"c1","name":"n","arguments":"{}"}]}`,
	extension.ToolBefore:            `{"name":"read","arguments":"{\"path\":\"x\"}"}`,
	extension.ToolAfter:             `{"name":"read","result":"ok"}`,
	extension.PermissionDecision:    `{"name":"read","hostDecision":"deny"}`,
	extension.CompactionPrepare:     `{"messages":[],"guidance":"g"}`,
	extension.CompactionComplete:    `{"summary":"s"}`,
	extension.SessionStart:          `{"sessionPath":"/s","phase":"start"}`,
	extension.SessionEnd:            `{"sessionPath":"/s","phase":"end"}`,
	extension.SessionLoad:           `{"sessionPath":"/s","phase":"load"}`,
	extension.SessionSave:           `{"sessionPath":"/s","phase":"save"}`,
	extension.SessionRotate:         `{"sessionPath":"/s","phase":"rotate"}`,
	extension.FrontendEvent:         `{"kind":"k"}`,
}

// fixtureVerdict answers every intercept with $FIXTURE_VERDICT: continue,
// block, replace (the point's valid replacement), invalid (an unknown
// member), allow, deny, append (adds "|<plugin>" to the text or prompt),
// hold (until the deadline, then the SDK answers intercept_timeout) or mute
// (never answers, so only the host's own timer can end the call). It subscribes to $FIXTURE_SUBS (comma
// separated), else to all 17 points, and owns the slots in $FIXTURE_OWNS.
func fixtureVerdict() {
	id := os.Getenv("REASONIX_PLUGIN_NAME")
	opts := sdk.Options{Name: id, Version: "1.0.0", Logf: func(string, ...any) {}}
	if subs := os.Getenv("FIXTURE_SUBS"); subs != "" {
		for _, p := range strings.Split(subs, ",") {
			opts.Subscriptions = append(opts.Subscriptions, extension.Point(p))
		}
	} else {
		opts.Subscriptions = extension.Points()
	}
	if owns := os.Getenv("FIXTURE_OWNS"); owns != "" {
		opts.Replaces = strings.Split(owns, ",")
	}
	verdict := os.Getenv("FIXTURE_VERDICT")
	opts.Intercept = map[extension.Point]sdk.InterceptFunc{
		"*": func(ctx context.Context, c *sdk.Call) (sdk.Verdict, error) {
			switch verdict {
			case "block":
				return sdk.Block("blocked by " + id + " token=sk-proj-FAKEfake0123456789abcdefFAKE"), nil
			case "replace":
				return sdk.Replace(json.RawMessage(validReplacements[c.Point])), nil
			case "invalid":
				return sdk.Replace(json.RawMessage(`{"bogus":1}`)), nil
			case "allow":
				return sdk.Allow(), nil
			case "deny":
				return sdk.Deny("denied by " + id), nil
			case "echo-env":
				// A credential the manifest gave it, whatever its name.
				return sdk.Block("blocked by " + id + " with cred " + os.Getenv("SERVICE_CRED")), nil
			case "hold":
				<-ctx.Done()
				return sdk.Verdict{}, ctx.Err()
			case "mute":
				select {} // never answers; the SDK abandons it at stdin EOF (StopGrace)
			case "budget":
				// Report the timeoutMillis this call carried on the wire.
				return sdk.Block(strconv.FormatInt(c.Timeout.Milliseconds(), 10)), nil
			case "append":
				var doc map[string]any
				if err := json.Unmarshal(c.Payload, &doc); err != nil {
					return sdk.Verdict{}, err
				}
				for _, key := range []string{"text", "prompt"} {
					if v, ok := doc[key].(string); ok {
						doc[key] = v + "|" + id
					}
				}
				return sdk.Replace(doc), nil
			}
			return sdk.Continue(), nil
		},
	}
	if err := sdk.Serve(context.Background(), opts); err != nil {
		fmt.Fprintln(os.Stderr, "verdict fixture:", err)
		os.Exit(1)
	}
}

// fixtureServeCancel is an SDK sidecar whose own context is cancelled by
// its first intercept; Serve must then return at once and the process exit
// 1, even though the host keeps stdin open.
func fixtureServeCancel() {
	ctx, cancel := context.WithCancel(context.Background())
	err := sdk.Serve(ctx, sdk.Options{Name: "c", Version: "1", Logf: func(string, ...any) {},
		Intercept: map[extension.Point]sdk.InterceptFunc{"*": func(context.Context, *sdk.Call) (sdk.Verdict, error) {
			cancel()
			return sdk.Continue(), nil
		}}})
	fmt.Fprintln(os.Stderr, "serve returned:", err)
	os.Exit(1)
}

// writePidFile writes pid to path by renaming a complete temporary file
// into place, so a reader sees either no file or the whole number.
func writePidFile(path string, pid int) {
	tmp := path + ".tmp"
	if os.WriteFile(tmp, []byte(fmt.Sprint(pid)), 0o644) == nil {
		os.Rename(tmp, path)
	}
}

// withoutEnv returns env without the entries named name.
func withoutEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// fixtureInstall installs (linked) each plugin directory listed in
// $FIXTURE_DIRS (separated by the OS list separator) into $FIXTURE_HOME,
// disabling and re-enabling each, then exits; status 1 on any error.
func fixtureInstall() {
	home := os.Getenv("FIXTURE_HOME")
	for _, dir := range filepath.SplitList(os.Getenv("FIXTURE_DIRS")) {
		e, err := extension.Install(home, dir, extension.InstallOptions{Link: true})
		if err == nil {
			err = extension.SetEnabled(home, e.Name, false)
		}
		if err == nil {
			err = extension.SetEnabled(home, e.Name, true)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// fixtureStream is an SDK sidecar serving the providers of $FIXTURE_DECL
// with streamer. Each stream does what the content of its request's last
// message says: "count:N" yields N text chunks "<i>" (from 1), "ids:N"
// N chunks "<streamId>:<i>", "types" one chunk of each of the seven types
// that travel as chunks and then an error chunk, "hold" one chunk and then
// waits for its context, "refuse" refuses the stream. With $FIXTURE_MARK
// set, any provider call first creates that file.
func fixtureStream() {
	opts := sdk.Options{Name: os.Getenv("REASONIX_PLUGIN_NAME"), Version: "1.0.0", Logf: func(string, ...any) {}, Provider: streamer{}}
	var r extension.InitializeResult
	if err := json.Unmarshal([]byte(os.Getenv("FIXTURE_DECL")), &r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	opts.Providers, opts.Replaces = r.Providers, r.Replaces
	if err := sdk.Serve(context.Background(), opts); err != nil {
		fmt.Fprintln(os.Stderr, "stream fixture:", err)
		os.Exit(1)
	}
}

type streamer struct{}

func markCalled() {
	if mark := os.Getenv("FIXTURE_MARK"); mark != "" {
		os.WriteFile(mark, nil, 0o644)
	}
}

func (streamer) Catalog(ctx context.Context) ([]extension.ProviderDescriptor, error) {
	markCalled()
	var r extension.InitializeResult
	json.Unmarshal([]byte(os.Getenv("FIXTURE_DECL")), &r)
	return r.Providers, nil
}

// streamTypes is what a "types" stream yields.
var streamTypes = []extension.ProviderChunk{
	sdk.Text("some text"),
	sdk.Reasoning("thinking", "sig-1"),
	sdk.ToolCallStart("call-1", "lookup"),
	sdk.ToolCallArgsDelta("call-1", "lookup", 11),
	sdk.ToolCall(extension.ProviderToolCall{ID: "call-1", Name: "lookup", Arguments: `{"q":"x"}`, ThoughtSignature: "ts"}),
	sdk.Usage(extension.ProviderUsage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3, CacheHitTokens: 4, CacheMissTokens: 5, ReasoningTokens: 6, FinishReason: "stop"}),
	sdk.Done(),
	sdk.ErrorChunk("upstream failed token=sk-proj-FAKEfake0123456789abcdefFAKE"),
}

func (streamer) Stream(ctx context.Context, open *extension.StreamOpenParams) (iter.Seq[extension.ProviderChunk], error) {
	markCalled()
	what := ""
	if m := open.Request.Messages; len(m) > 0 {
		what = m[len(m)-1].Content
	}
	kind, arg, _ := strings.Cut(what, ":")
	n, _ := strconv.Atoi(arg)
	switch kind {
	case "refuse":
		return nil, errors.New("refused")
	case "types":
		return slices.Values(streamTypes), nil
	case "hold":
		return func(yield func(extension.ProviderChunk) bool) {
			if yield(sdk.Text("first")) {
				<-ctx.Done()
			}
		}, nil
	}
	return func(yield func(extension.ProviderChunk) bool) {
		for i := 1; i <= n; i++ {
			text := strconv.Itoa(i)
			if kind == "ids" {
				text = open.StreamID + ":" + text
			}
			if !yield(sdk.Text(text)) {
				return
			}
		}
	}, nil
}

// fixtureRawStream answers initialize with $FIXTURE_RESULT, then answers
// each stream/open by writing the lines of $FIXTURE_FRAMES, with $ID
// replaced by the stream's id and the line $ANSWER by the open's answer
// ($FIXTURE_OPEN, default {"result":{"accepted":true}} members); cancel
// and shutdown are answered, and the catalog with the members of
// $FIXTURE_CATALOG.
func fixtureRawStream() {
	answer := cmp.Or(os.Getenv("FIXTURE_OPEN"), `"result":{"accepted":true}`)
	rawSidecar(func(in *bufio.Reader, m map[string]json.RawMessage) {
		var params struct {
			StreamID string `json:"streamId"`
		}
		json.Unmarshal(m["params"], &params)
		switch string(m["method"]) {
		case `"extension/provider/stream/open"`:
			for _, line := range strings.Split(os.Getenv("FIXTURE_FRAMES"), "\n") {
				if line == "$ANSWER" {
					line = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,%s}`, m["id"], answer)
				}
				fmt.Println(strings.ReplaceAll(line, "$ID", params.StreamID))
			}
		case `"extension/provider/stream/cancel"`:
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"cancelled":true}}`+"\n", m["id"])
		case `"extension/provider/catalog"`:
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,%s}`+"\n", m["id"], os.Getenv("FIXTURE_CATALOG"))
		}
	})
}

// rawSidecar answers initialize with $FIXTURE_RESULT and shutdown with
// accepted (then exits 0), and hands every other frame to handle.
func rawSidecar(handle func(in *bufio.Reader, m map[string]json.RawMessage)) {
	in := bufio.NewReader(os.Stdin)
	m := readFrame(in)
	fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", m["id"], os.Getenv("FIXTURE_RESULT"))
	for {
		m := readFrame(in)
		if string(m["method"]) == `"extension/shutdown"` {
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"accepted":true}}`+"\n", m["id"])
			os.Exit(0)
		}
		handle(in, m)
	}
}

// fixtureRawReplace answers initialize with $FIXTURE_RESULT, then each
// intercept with a replacement by reference, built from the payload's
// descriptor as $FIXTURE_MODE says: "echo" hands the ref back as it is;
// "length", "hash", "pointer", "two", "inline", "unknown" and "huge" get
// it wrong in that one way.
func fixtureRawReplace() {
	rawSidecar(func(in *bufio.Reader, m map[string]json.RawMessage) {
		switch string(m["method"]) {
		case `"extension/intercept"`:
			var p extension.InterceptParams
			json.Unmarshal(m["params"], &p)
			if len(p.Externalized) != 1 {
				fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"decision":"continue"}}`+"\n", m["id"])
				return
			}
			d := p.Externalized[0]
			d.JSONPointer = "/replacement"
			res := extension.InterceptResult{Decision: extension.DecisionReplace, Replacement: json.RawMessage("null"), Externalized: []extension.ExternalizedField{d}}
			switch os.Getenv("FIXTURE_MODE") {
			case "length":
				res.Externalized[0].TotalBytes++
			case "hash":
				res.Externalized[0].SHA256 = strings.Repeat("0", 64)
			case "pointer":
				res.Externalized[0].JSONPointer = "/payload"
			case "two":
				res.Externalized = append(res.Externalized, d)
			case "inline":
				res.Replacement = json.RawMessage(`{"text":"inline"}`)
			case "unknown":
				res.Externalized[0].ContentRef = "content_000000000000000000000000"
			case "huge":
				res.Externalized[0].TotalBytes = extension.FrameBytes + 1
			}
			b, _ := json.Marshal(res)
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", m["id"], b)
		}
	})
}

// fixturePager is an SDK sidecar whose input.receive interceptor, once
// the SDK has read its (externalized) payload, holds the call until a
// tool.before has been answered; tool.before answers block "paged" from
// then on, continue before.
func fixturePager() {
	var paged atomic.Bool
	answered := make(chan struct{})
	var once sync.Once
	err := sdk.Serve(context.Background(), sdk.Options{Name: "pager", Version: "1", Logf: func(string, ...any) {},
		Intercept: map[extension.Point]sdk.InterceptFunc{
			extension.InputReceive: func(ctx context.Context, c *sdk.Call) (sdk.Verdict, error) {
				if len(c.Payload) < extension.ExternalizeFieldBytes {
					return sdk.Continue(), nil
				}
				paged.Store(true)
				select {
				case <-answered:
					return sdk.Continue(), nil
				case <-ctx.Done():
					return sdk.Verdict{}, ctx.Err()
				}
			},
			extension.ToolBefore: func(context.Context, *sdk.Call) (sdk.Verdict, error) {
				if !paged.Load() {
					return sdk.Continue(), nil
				}
				once.Do(func() { close(answered) })
				return sdk.Block("paged"), nil
			},
		}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "pager:", err)
		os.Exit(1)
	}
}

// fixtureRawUI answers initialize with $FIXTURE_RESULT and then drives
// the host's UI methods by hand: an intercept whose payload is
// {"name":<method>,"arguments":<params as JSON text>} makes it send that
// request to the host and answer block with the host's response frame as
// the reason. extension/ui/action is answered accepted, its params as the
// message; extension/ui/submit accepted.
func fixtureRawUI() {
	next := 1000
	rawSidecar(func(in *bufio.Reader, m map[string]json.RawMessage) {
		switch string(m["method"]) {
		case `"extension/ui/action"`:
			msg, _ := json.Marshal(string(m["params"]))
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"accepted":true,"message":%s}}`+"\n", m["id"], msg)
		case `"extension/ui/submit"`:
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"accepted":true}}`+"\n", m["id"])
		case `"extension/intercept"`:
			var p struct {
				Payload extension.ToolPayload `json:"payload"`
			}
			json.Unmarshal(m["params"], &p)
			next++
			fmt.Printf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", next, p.Payload.Name, p.Payload.Arguments)
			var answer []byte
			for answer == nil {
				line, err := in.ReadBytes('\n')
				if err != nil {
					os.Exit(0)
				}
				var r struct {
					ID json.RawMessage `json:"id"`
				}
				if json.Unmarshal(line, &r) == nil && string(r.ID) == strconv.Itoa(next) {
					answer = bytes.TrimSpace(line)
				}
			}
			reason, _ := json.Marshal(string(answer))
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"decision":"block","reason":%s}}`+"\n", m["id"], reason)
		}
	})
}
