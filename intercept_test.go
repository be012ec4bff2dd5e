package extension_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/reasonix-ext/extension"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// hostPayloads holds, per point, the host's own payload for the tests.
var hostPayloads = map[extension.Point]string{
	extension.InputReceive:          `{"text":"hello"}`,
	extension.AgentBeforeStart:      `{"model":"m1","toolCount":2,"sessionId":"s-1"}`,
	extension.SystemPromptBuild:     `{"prompt":"base","workspaceRoot":"/ws"}`,
	extension.ContextPrepare:        `{"messages":[{"role":"user","content":"hi"}]}`,
	extension.ProviderRequestPoint:  `{"request":{"messages":[{"role":"user","content":"hi"}],"tools":[],"maxTokens":0}}`,
	extension.ProviderResponsePoint: `{"text":"answer"}`,
	extension.ToolBefore:            `{"name":"ls","arguments":"{}"}`,
	extension.ToolAfter:             `{"name":"ls","arguments":"{}","result":"a b"}`,
	extension.PermissionDecision:    `{"name":"rm","arguments":"{}","hostDecision":"deny"}`,
	extension.CompactionPrepare:     `{"messages":[{"role":"user","content":"hi"}],"guidance":"short"}`,
	extension.CompactionComplete:    `{"summary":"sum"}`,
	extension.SessionStart:          `{"sessionPath":"/s/1.jsonl","phase":"start"}`,
	extension.SessionEnd:            `{"sessionPath":"/s/1.jsonl","phase":"end"}`,
	extension.SessionLoad:           `{"sessionPath":"/s/1.jsonl","phase":"load"}`,
	extension.SessionSave:           `{"sessionPath":"/s/1.jsonl","phase":"save"}`,
	extension.SessionRotate:         `{"sessionPath":"/s/1.jsonl","phase":"rotate"}`,
	extension.FrontendEvent:         `{"kind":"click","text":"t"}`,
}

func verdictPlugin(name, verdict string, required bool, runtime map[string]any, env map[string]string) plugin {
	e := map[string]string{"FIXTURE_VERDICT": verdict}
	for k, v := range env {
		e[k] = v
	}
	rt := map[string]any{"intercepts": extension.Points()}
	for k, v := range runtime {
		rt[k] = v
	}
	return plugin{name: name, fixture: "verdict", required: required, env: e, runtime: rt}
}

// startRuntime installs plugins and starts a generation, closed at the end
// of the test.
func startRuntime(t *testing.T, h func(*extension.Host), plugins ...plugin) *extension.Runtime {
	t.Helper()
	checkLeaks(t) // after the runtime's Close, which a cleanup below does
	host := testHost(installPlugins(t, plugins...))
	if h != nil {
		h(host)
	}
	rt, err := host.Start(bg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// validated is the payload a valid replacement becomes: the same document,
// compacted (D16: the whole validated value replaces the payload).
func validated(t *testing.T, p extension.Point, doc string) string {
	t.Helper()
	if _, err := extension.DecodePayload(p, []byte(doc)); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	var b bytes.Buffer
	json.Compact(&b, []byte(doc))
	return b.String()
}

// TestInterceptMatrixEveryPointD16 puts each of the 17 points through a
// real sidecar answering continue, block, a valid replace, and an invalid
// replace (from an optional plugin: warned and skipped; from a required
// one: the operation fails).
func TestInterceptMatrixEveryPointD16(t *testing.T) {
	var warnings []*extension.PluginError
	var mu sync.Mutex
	collect := func(h *extension.Host) {
		h.OnWarning = func(w *extension.PluginError) { mu.Lock(); warnings = append(warnings, w); mu.Unlock() }
	}
	cont := startRuntime(t, nil, verdictPlugin("v", "continue", false, nil, nil))
	block := startRuntime(t, nil, verdictPlugin("v", "block", false, nil, nil))
	repl := startRuntime(t, nil, verdictPlugin("v", "replace", false, nil, nil))
	badOptional := startRuntime(t, collect, verdictPlugin("v", "invalid", false, nil, nil))
	badRequired := startRuntime(t, nil, verdictPlugin("v", "invalid", true, nil, nil))
	for _, p := range extension.Points() {
		t.Run(string(p), func(t *testing.T) {
			payload := json.RawMessage(hostPayloads[p])
			out, err := cont.Intercept(bg, p, payload)
			if err != nil || out.Blocked || string(out.Payload) != hostPayloads[p] || len(out.Replaced) != 0 {
				t.Fatalf("continue: %+v, %v", out, err)
			}
			out, err = block.Intercept(bg, p, payload)
			if err != nil || !out.Blocked || out.BlockedBy != "v" || !strings.Contains(out.Reason, "blocked by v") || strings.Contains(out.Reason, "FAKEfake") {
				t.Fatalf("block: %+v, %v (the reason must be kept, its secret redacted)", out, err)
			}
			out, err = repl.Intercept(bg, p, payload)
			if err != nil || string(out.Payload) != validated(t, p, validReplacements[p]) || !reflect.DeepEqual(out.Replaced, []string{"v"}) {
				t.Fatalf("replace: %+v (%s), %v", out, out.Payload, err)
			}
			out, err = badOptional.Intercept(bg, p, payload)
			if err != nil || string(out.Payload) != hostPayloads[p] || len(out.Replaced) != 0 {
				t.Fatalf("invalid replace from an optional plugin: %+v, %v; want skipped", out, err)
			}
			_, err = badRequired.Intercept(bg, p, payload)
			var ie *extension.PluginError
			if !errors.As(err, &ie) || ie.Plugin != "v" || !errors.Is(err, extension.ReasonProtocolError) || !strings.Contains(err.Error(), "bogus") {
				t.Fatalf("invalid replace from a required plugin: %v; want a PluginError with protocol_error", err)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(warnings) != 1 || !strings.Contains(warnings[0].Err.Error(), "skipping optional extension v") {
		t.Fatalf("warnings %v, want exactly one for the 17 violations (D19: once per plugin and category)", warnings)
	}
}

func TestAllowDenyOutsidePermissionDecisionIsViolationD16(t *testing.T) {
	for _, verdict := range []string{"allow", "deny"} {
		rt := startRuntime(t, nil, verdictPlugin("v", verdict, true, nil, nil))
		for _, p := range extension.Points() {
			if p == extension.PermissionDecision {
				continue
			}
			_, err := rt.Intercept(bg, p, json.RawMessage(hostPayloads[p]))
			if !errors.Is(err, extension.ReasonProtocolError) || !strings.Contains(err.Error(), "legal only at permission.decision") {
				t.Fatalf("%s at %s = %v, want a violation", verdict, p, err)
			}
		}
	}
}

func TestPermissionRulingsAndAuditD16(t *testing.T) {
	deny := `{"name":"rm","arguments":"{}","hostDecision":"deny"}`
	allow := `{"name":"rm","arguments":"{}","hostDecision":"allow"}`
	cases := []struct {
		name, verdict, payload string
		want                   extension.Decision
		audits                 int
	}{
		{"allow over a host deny is audited", "allow", deny, extension.DecisionAllow, 1},
		{"allow over a host allow is not", "allow", allow, extension.DecisionAllow, 0},
		{"deny is never audited", "deny", allow, extension.DecisionDeny, 0},
		{"continue leaves the host decision", "continue", deny, "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var audits []extension.AuditRecord
			rt := startRuntime(t, func(h *extension.Host) { h.OnAudit = func(a extension.AuditRecord) { audits = append(audits, a) } },
				verdictPlugin("v", c.verdict, false, nil, nil))
			out, err := rt.Intercept(bg, extension.PermissionDecision, json.RawMessage(c.payload))
			if err != nil || out.Permission != c.want {
				t.Fatalf("outcome %+v, %v; want permission %q", out, err, c.want)
			}
			if len(audits) != c.audits || (c.audits == 1) != (out.Audit != nil) {
				t.Fatalf("%d audit records (outcome %v), want %d", len(audits), out.Audit, c.audits)
			}
			if c.audits == 1 && (audits[0].Plugin != "v" || audits[0].Tool != "rm" || audits[0].Point != extension.PermissionDecision) {
				t.Fatalf("audit record %+v", audits[0])
			}
		})
	}
}

func TestFirstPermissionRulingIsTerminalD16(t *testing.T) {
	// "b-block" would block if it were asked; the earlier allow ends the walk.
	rt := startRuntime(t, nil,
		verdictPlugin("b-block", "block", false, nil, nil),
		verdictPlugin("a-allow", "allow", false, nil, nil),
	)
	out, err := rt.Intercept(bg, extension.PermissionDecision, json.RawMessage(hostPayloads[extension.PermissionDecision]))
	if err != nil || out.Blocked || out.Permission != extension.DecisionAllow || out.PermissionBy != "a-allow" {
		t.Fatalf("outcome %+v, %v; want a-allow's allow to end the walk", out, err)
	}
}

// TestChainOrderD15: priority ascending, then plugin ID byte-wise; each
// interceptor sees its predecessor's replacement.
func TestChainOrderD15(t *testing.T) {
	appendAt := func(name string, priority int) plugin {
		return verdictPlugin(name, "append", false, map[string]any{"priority": priority, "intercepts": []string{"input.receive"}},
			map[string]string{"FIXTURE_SUBS": "input.receive"})
	}
	rt := startRuntime(t, nil, // installed in an order that sorting must undo
		appendAt("b", 5), appendAt("c", 0), appendAt("e", -10), appendAt("a", 0), appendAt("D", -10))
	want := []string{"D", "e", "a", "c", "b"} // "D" < "e" byte-wise
	if got := rt.Chain(extension.InputReceive); !reflect.DeepEqual(got, want) {
		t.Fatalf("Chain = %v, want %v", got, want)
	}
	out, err := rt.Intercept(bg, extension.InputReceive, extension.InputPayload{Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out.Payload); got != `{"text":"hello|D|e|a|c|b"}` {
		t.Fatalf("payload %s, want every replacement applied in chain order", got)
	}
	if !reflect.DeepEqual(out.Replaced, want) {
		t.Fatalf("Replaced = %v, want %v", out.Replaced, want)
	}
}

// TestSlotOwnerHasTheFinalSayD17: the owner runs after the chain and sees
// its result; continue keeps it, replace is validated, block, an invalid
// replacement and a timeout fail the operation.
func TestSlotOwnerHasTheFinalSayD17(t *testing.T) {
	member := verdictPlugin("member", "append", false, map[string]any{"intercepts": []string{"system_prompt.build"}},
		map[string]string{"FIXTURE_SUBS": "system_prompt.build"})
	owner := func(verdict string) plugin {
		rt := map[string]any{"intercepts": []string{"system_prompt.build"}, "replaces": []string{"system_prompt"}}
		if verdict == "hold" {
			rt["timeoutMillis"] = 200 // only the timeout case waits for it
		}
		return verdictPlugin("owner", verdict, false, rt,
			map[string]string{"FIXTURE_SUBS": "system_prompt.build", "FIXTURE_OWNS": "system_prompt"})
	}
	payload := extension.SystemPromptPayload{Prompt: "base", WorkspaceRoot: "/ws"}
	t.Run("append sees the chain's result", func(t *testing.T) {
		rt := startRuntime(t, nil, owner("append"), member)
		if got := rt.Chain(extension.SystemPromptBuild); !reflect.DeepEqual(got, []string{"member", "owner"}) {
			t.Fatalf("Chain = %v, want the owner last", got)
		}
		out, err := rt.Intercept(bg, extension.SystemPromptBuild, payload)
		if err != nil || string(out.Payload) != `{"prompt":"base|member|owner","workspaceRoot":"/ws"}` {
			t.Fatalf("outcome %s, %v", out.Payload, err)
		}
	})
	t.Run("continue keeps the chain's result", func(t *testing.T) {
		rt := startRuntime(t, nil, owner("continue"), member)
		out, err := rt.Intercept(bg, extension.SystemPromptBuild, payload)
		if err != nil || string(out.Payload) != `{"prompt":"base|member","workspaceRoot":"/ws"}` {
			t.Fatalf("outcome %s, %v", out.Payload, err)
		}
	})
	for _, c := range []struct {
		verdict string
		want    error
	}{
		{"block", extension.ErrSlotOwnerBlocked},
		{"invalid", extension.ReasonProtocolError},
		{"hold", extension.ReasonInterceptTimeout},
		{"allow", extension.ReasonProtocolError}, // only the permission slot may rule
	} {
		t.Run(c.verdict+" fails the operation", func(t *testing.T) {
			rt := startRuntime(t, nil, owner(c.verdict), member)
			_, err := rt.Intercept(bg, extension.SystemPromptBuild, payload)
			var ie *extension.PluginError
			if !errors.As(err, &ie) || ie.Plugin != "owner" || !errors.Is(err, c.want) {
				t.Fatalf("Intercept = %v, want a PluginError of owner matching %v", err, c.want)
			}
		})
	}
}

// TestInterceptBudgetsD18 proves each family's default, the manifest
// override and its clamp through the timeoutMillis each sidecar receives.
func TestInterceptBudgetsD18(t *testing.T) {
	cases := []struct {
		name     string
		manifest int64
		fast     time.Duration
		slow     time.Duration
	}{
		{"defaults", 0, 5 * time.Second, 30 * time.Second},
		{"manifest override for every point", 250, 250 * time.Millisecond, 250 * time.Millisecond},
		{"clamped to 60 s", int64((10 * time.Minute).Milliseconds()), 60 * time.Second, 60 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, p := range extension.Points() {
				want := c.slow
				switch p {
				case extension.InputReceive, extension.ToolBefore, extension.ToolAfter, extension.PermissionDecision:
					want = c.fast
				}
				if got := (&extension.Host{}).InterceptBudget(p, c.manifest); got != want {
					t.Errorf("%s: budget %v, want %v", p, got, want)
				}
			}
		})
	}
	if got := (&extension.Host{FastInterceptTimeout: time.Second, MaxInterceptTimeout: 2 * time.Second}).InterceptBudget(extension.ToolBefore, 0); got != time.Second {
		t.Errorf("configured fast budget %v, want 1s", got)
	}
	if got := (&extension.Host{MaxInterceptTimeout: 2 * time.Second}).InterceptBudget(extension.ToolBefore, 5000); got != 2*time.Second {
		t.Errorf("configured clamp %v, want 2s", got)
	}
}

// TestInterceptBudgetsOnTheWireD18: the timeoutMillis each sidecar
// receives is its family's default, or the manifest's override for every
// point, clamped to 60 s.
func TestInterceptBudgetsOnTheWireD18(t *testing.T) {
	cases := []struct {
		name       string
		manifest   int64
		fast, slow string
	}{
		{"defaults", 0, "5000", "30000"},
		{"manifest override", 20000, "20000", "20000"}, // unlike either default, and never reached
		{"clamped to 60 s", int64((10 * time.Minute).Milliseconds()), "60000", "60000"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var extra map[string]any
			if c.manifest > 0 {
				extra = map[string]any{"timeoutMillis": c.manifest}
			}
			rt := startRuntime(t, nil, verdictPlugin("v", "budget", false, extra, nil))
			for _, p := range extension.Points() {
				want := c.slow
				switch p {
				case extension.InputReceive, extension.ToolBefore, extension.ToolAfter, extension.PermissionDecision:
					want = c.fast
				}
				out, err := rt.Intercept(bg, p, json.RawMessage(hostPayloads[p]))
				if err != nil || out.Reason != want {
					t.Errorf("%s: the sidecar saw timeoutMillis %q (%v), want %s", p, out.Reason, err, want)
				}
			}
		})
	}
}

func TestOptionalTimeoutWarnsOnceAndIsSkippedD19(t *testing.T) {
	var warnings []*extension.PluginError
	rt := startRuntime(t, func(h *extension.Host) {
		h.OnWarning = func(w *extension.PluginError) { warnings = append(warnings, w) }
	},
		verdictPlugin("slow", "hold", false, map[string]any{"timeoutMillis": 100}, nil),
		verdictPlugin("zz-fast", "append", false, nil, nil))
	for _, p := range []extension.Point{extension.InputReceive, extension.InputReceive, extension.SystemPromptBuild} {
		out, err := rt.Intercept(bg, p, json.RawMessage(hostPayloads[p]))
		if err != nil || !reflect.DeepEqual(out.Replaced, []string{"zz-fast"}) || !reflect.DeepEqual(out.Skipped, []string{"slow"}) {
			t.Fatalf("%s: %+v, %v; want slow skipped, every time, and zz-fast applied", p, out, err)
		}
	}
	if len(warnings) != 1 || warnings[0].Plugin != "slow" || !errors.Is(warnings[0].Err, extension.ReasonInterceptTimeout) {
		t.Fatalf("warnings %v, want one intercept_timeout warning for slow", warnings)
	}
}

// The sidecar never answers, so the host's timer is what ends the call
// (D18): with "hold" the SDK's own deadline may answer first.
func TestRequiredTimeoutFailsTheOperationD19(t *testing.T) {
	rt := startRuntime(t, nil, verdictPlugin("slow", "mute", true, map[string]any{"timeoutMillis": 100}, nil))
	_, err := rt.Intercept(bg, extension.ToolBefore, json.RawMessage(hostPayloads[extension.ToolBefore]))
	if !errors.Is(err, extension.ReasonInterceptTimeout) || !strings.Contains(err.Error(), "did not answer tool.before within 100ms") {
		t.Fatalf("Intercept = %v, want intercept_timeout naming the point and budget", err)
	}
}

// A sidecar whose own deadline fires first answers intercept_timeout: the
// host reports it as the same timeout, naming the point and the budget, so
// the outcome does not depend on which timer won (D18).
func TestSidecarReportedTimeoutIsTheSameTimeoutD18(t *testing.T) {
	r := extension.ReasonInterceptTimeout
	rt := startRuntime(t, nil, plugin{name: "slow", fixture: "raw", required: true,
		// The answer comes at once; a budget the round trip can never
		// exceed keeps the host's own timer out of it.
		runtime: map[string]any{"intercepts": []string{"tool.before"}, "timeoutMillis": 30000},
		env: map[string]string{
			"FIXTURE_RESULT": `{"protocolVersion":"1","name":"slow","version":"1","stateSchemaVersion":0,"subscriptions":["tool.before"]}`,
			"FIXTURE_ANSWER": fmt.Sprintf(`"error":{"code":%d,"message":%q,"data":{"reason":%q,"retryable":true}}`, r.Code(), r.Message(), r),
		}})
	_, err := rt.Intercept(bg, extension.ToolBefore, json.RawMessage(hostPayloads[extension.ToolBefore]))
	var ie *extension.PluginError
	if !errors.As(err, &ie) || ie.Plugin != "slow" || ie.Op != string(extension.ToolBefore) ||
		!errors.Is(err, extension.ReasonInterceptTimeout) || !strings.Contains(err.Error(), "ran out of its 30s for tool.before") {
		t.Fatalf("Intercept = %v, want intercept_timeout from slow naming tool.before and the 30s budget", err)
	}
}

func TestCallerCancellationIsNotThePluginsFault(t *testing.T) {
	var warnings int
	rt := startRuntime(t, func(h *extension.Host) { h.OnWarning = func(*extension.PluginError) { warnings++ } },
		verdictPlugin("slow", "hold", true, nil, nil))
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, err := rt.Intercept(ctx, extension.ToolBefore, json.RawMessage(hostPayloads[extension.ToolBefore]))
	if !errors.Is(err, context.Canceled) || warnings != 0 {
		t.Fatalf("Intercept = %v (%d warnings), want the caller's cancellation and no warning", err, warnings)
	}
}

// TestObserveNeverBlocksD20: against a sidecar that never reads, 10,000
// events return at once, every drop is counted, and one warning names it.
func TestObserveNeverBlocksD20(t *testing.T) {
	var warnings []*extension.PluginError
	decl := `{"protocolVersion":"1","name":"mute","version":"1","stateSchemaVersion":0,"subscriptions":["session.start"]}`
	rt := startRuntime(t, func(h *extension.Host) {
		h.OnWarning = func(w *extension.PluginError) { warnings = append(warnings, w) }
	},
		plugin{name: "mute", fixture: "stop-reading", env: map[string]string{"FIXTURE_RESULT": decl},
			runtime: map[string]any{"intercepts": []string{"session.start"}}})
	const n = 10000
	for range n {
		if err := rt.Observe(extension.SessionStart, json.RawMessage(hostPayloads[extension.SessionStart])); err != nil {
			t.Fatal(err)
		}
	}
	stats := rt.Sidecar("mute").Stats()
	dropped := stats.DroppedEvents
	if dropped == 0 || dropped > n {
		t.Fatalf("the connection counted %d drops of %d events, want a non-zero count", dropped, n)
	}
	if len(warnings) != 1 || warnings[0].Plugin != "mute" || !strings.Contains(warnings[0].Err.Error(), "dropped the session.start event") {
		t.Fatalf("warnings %v, want one for mute", warnings)
	}
	t.Logf("%d of %d events dropped, %d frames written", dropped, n, stats.FramesOut)
}

func TestObserveReachesSubscribersAndSlotOwnerOnceD20(t *testing.T) {
	rt := startRuntime(t, nil,
		verdictPlugin("sub", "continue", false, map[string]any{"intercepts": []string{"session.start"}}, map[string]string{"FIXTURE_SUBS": "session.start"}),
		verdictPlugin("owner", "continue", false, map[string]any{"intercepts": []string{"session.start"}, "replaces": []string{"session_policy"}},
			map[string]string{"FIXTURE_SUBS": "session.start", "FIXTURE_OWNS": "session_policy"}),
		verdictPlugin("other", "continue", false, map[string]any{"intercepts": []string{"tool.before"}}, map[string]string{"FIXTURE_SUBS": "tool.before"}),
	)
	if err := rt.Observe(extension.SessionStart, json.RawMessage(hostPayloads[extension.SessionStart])); err != nil {
		t.Fatal(err)
	}
	// Close joins every writer, so the counters are final: initialize,
	// initialized, the event (for sub and owner only) and shutdown.
	sidecars := rt.Sidecars()
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"sub": 4, "owner": 4, "other": 3}
	for _, s := range sidecars {
		if got := s.Stats().FramesOut; got != want[s.ID()] {
			t.Errorf("%s: %d frames, want %d", s.ID(), got, want[s.ID()])
		}
	}
}

func TestInterceptRejectsBadInput(t *testing.T) {
	rt := startRuntime(t, nil, verdictPlugin("v", "continue", false, nil, nil))
	if _, err := rt.Intercept(bg, "tool.nope", json.RawMessage(`{}`)); err == nil {
		t.Error("an unknown point was accepted")
	}
	if _, err := rt.Intercept(bg, extension.ToolBefore, json.RawMessage(`{`)); err == nil {
		t.Error("invalid JSON was accepted")
	}
	if err := rt.Observe("tool.nope", json.RawMessage(`{}`)); err == nil {
		t.Error("Observe accepted an unknown point")
	}
	rt.Close()
	if _, err := rt.Intercept(bg, extension.ToolBefore, json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Intercept after Close = %v", err)
	}
}

func TestDecodePayloadRulesPerPointD16(t *testing.T) {
	bad := map[extension.Point][]string{
		extension.InputReceive:          {`{"text":""}`, `{"text":"  "}`, `{}`, `{"Text":"x"}`, `{"text":"a","text":"b"}`, ``, `{"text":null}`},
		extension.AgentBeforeStart:      {`{"model":"m"}`, `{"sessionId":"s","toolCount":1.5}`},
		extension.SystemPromptBuild:     {`{"prompt":"p"}`},
		extension.ContextPrepare:        {`{}`, `{"messages":null}`},
		extension.ProviderRequestPoint:  {`{}`, `{"request":{"messages":[],"tools":[{"name":"t","parameters":"x"}],"maxTokens":0}}`},
		extension.ProviderResponsePoint: {`{"calls":[{"id":"","name":"n","arguments":""}]}`},
		extension.ToolBefore:            {`{"arguments":"{}"}`, `{"name":"x","arguments":"[1]"}`, `{"name":"x","arguments":"{"}`, `{"name":"x","arguments":"{\"a\":1,\"a\":2}"}`, `{"name":"x","arguments":"{} {}"}`},
		extension.ToolAfter:             {`{"name":"","result":"r"}`},
		extension.PermissionDecision:    {`{"name":"x"}`, `{"name":"x","hostDecision":"maybe"}`},
		extension.CompactionPrepare:     {`{"guidance":"g"}`},
		extension.CompactionComplete:    {`{"summary":""}`},
		extension.SessionStart:          {`{"phase":"end"}`, `{"phase":"begin"}`},
		extension.SessionRotate:         {`{"phase":"start"}`},
		extension.FrontendEvent:         {`{"text":"t"}`},
	}
	for p, docs := range bad {
		for _, doc := range docs {
			if _, err := extension.DecodePayload(p, []byte(doc)); err == nil {
				t.Errorf("%s accepted the replacement %s", p, doc)
			}
		}
	}
	for p, doc := range validReplacements {
		if _, err := extension.DecodePayload(p, []byte(doc)); err != nil {
			t.Errorf("%s rejected %s: %v", p, doc, err)
		}
	}
	if _, err := extension.DecodePayload(extension.ToolBefore, []byte(`{"name":"x","arguments":""}`)); err != nil {
		t.Errorf("empty tool arguments are allowed: %v", err)
	}
	// The arguments' own fault is named once, with its pointer inside them.
	_, err := extension.DecodePayload(extension.ToolBefore, []byte(`{"name":"x","arguments":"{\"a\":1,\"a\":2}"}`))
	if want := `ToolPayload at /arguments: arguments at /a: duplicate member "a"`; err == nil || err.Error() != want {
		t.Errorf("duplicate member in arguments: got %v, want %s", err, want)
	}
}

// TestPermissionSlotOwnerHasTheFinalSayD17: a chain member's ruling ends
// the chain, but the permission slot owner still rules last.
func TestPermissionSlotOwnerHasTheFinalSayD17(t *testing.T) {
	owner := func(verdict string) plugin {
		return verdictPlugin("owner", verdict, false,
			map[string]any{"intercepts": []string{"permission.decision"}, "replaces": []string{"permission"}},
			map[string]string{"FIXTURE_SUBS": "permission.decision", "FIXTURE_OWNS": "permission"})
	}
	member := verdictPlugin("member", "allow", false, map[string]any{"intercepts": []string{"permission.decision"}},
		map[string]string{"FIXTURE_SUBS": "permission.decision"})
	deny := json.RawMessage(hostPayloads[extension.PermissionDecision]) // the host says deny
	t.Run("owner deny overrides the member's allow", func(t *testing.T) {
		var audits int
		rt := startRuntime(t, func(h *extension.Host) { h.OnAudit = func(extension.AuditRecord) { audits++ } }, owner("deny"), member)
		out, err := rt.Intercept(bg, extension.PermissionDecision, deny)
		if err != nil || out.Permission != extension.DecisionDeny || out.PermissionBy != "owner" || out.Audit != nil || audits != 0 {
			t.Fatalf("outcome %+v (%d audits), %v; want the owner's deny and no audit", out, audits, err)
		}
	})
	t.Run("owner continue keeps the member's allow, audited", func(t *testing.T) {
		rt := startRuntime(t, nil, owner("continue"), member)
		out, err := rt.Intercept(bg, extension.PermissionDecision, deny)
		if err != nil || out.Permission != extension.DecisionAllow || out.PermissionBy != "member" || out.Audit == nil || out.Audit.Plugin != "member" {
			t.Fatalf("outcome %+v, %v; want member's allow with its audit", out, err)
		}
	})
}

func TestMissingSlotOwnerFailsTheOperationD17(t *testing.T) {
	bad := `{"protocolVersion":"2","name":"x","version":"1","stateSchemaVersion":0}`
	rt := startRuntime(t, nil, plugin{name: "owner", fixture: "raw", env: map[string]string{"FIXTURE_RESULT": bad},
		runtime: map[string]any{"replaces": []string{"system_prompt"}}})
	_, err := rt.Intercept(bg, extension.SystemPromptBuild, json.RawMessage(hostPayloads[extension.SystemPromptBuild]))
	var ie *extension.PluginError
	if !errors.As(err, &ie) || ie.Plugin != "owner" || !errors.Is(err, extension.ReasonProviderInterrupted) {
		t.Fatalf("Intercept = %v, want a PluginError: the owner is not running, and there is no fallback", err)
	}
}

func TestReplacementMayNotRewriteHostDecisionD16(t *testing.T) {
	rt := startRuntime(t, nil, verdictPlugin("v", "replace", true, nil, nil)) // replaces with hostDecision "deny"
	_, err := rt.Intercept(bg, extension.PermissionDecision, json.RawMessage(`{"name":"rm","hostDecision":"allow"}`))
	if !errors.Is(err, extension.ReasonProtocolError) || !strings.Contains(err.Error(), "hostDecision") {
		t.Fatalf("Intercept = %v, want a violation", err)
	}
}

func TestInterceptBudgetNeverOverflowsD18(t *testing.T) {
	h := &extension.Host{}
	for _, ms := range []int64{1e13, 1<<63 - 1, 60000, 60001} {
		if got := h.InterceptBudget(extension.ToolBefore, ms); got != 60*time.Second {
			t.Errorf("manifest %d ms: budget %v, want the 60s clamp", ms, got)
		}
	}
}

func TestPayloadMustBeAnObject(t *testing.T) {
	rt := startRuntime(t, nil, verdictPlugin("v", "continue", false, nil, nil))
	for _, p := range []any{json.RawMessage(`null`), json.RawMessage(`[1]`), json.RawMessage(`"x"`), 42, nil} {
		if _, err := rt.Intercept(bg, extension.ToolBefore, p); err == nil {
			t.Errorf("Intercept accepted the payload %v", p)
		}
	}
	if out, err := rt.Intercept(bg, extension.ToolBefore, []byte(`{"name":"ls"}`)); err != nil || string(out.Payload) != `{"name":"ls"}` {
		t.Errorf("a []byte payload is raw JSON: %v, %v", out, err)
	}
}

// TestResourcesChangedReachesEverySidecarD20: Runtime.ResourcesChanged
// sends extension/resources/changed to every sidecar, whatever it
// subscribed to, without blocking (D20); the SDK hands the paths to its
// callback. Once the generation is closed it fails.
func TestResourcesChangedReachesEverySidecarD20(t *testing.T) {
	home := installPlugins(t,
		plugin{name: "a", fixture: "observe-count", runtime: map[string]any{"intercepts": []string{"tool.before", "tool.after"}}},
		plugin{name: "b", fixture: "observe-count", runtime: map[string]any{"intercepts": []string{"tool.before", "tool.after"}}})
	rt, err := testHost(home).Start(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.Sidecars()) != 2 {
		t.Fatalf("started %d sidecars (%v), want a and b", len(rt.Sidecars()), rt.Warnings())
	}
	defer rt.Close()
	if err := rt.ResourcesChanged([]string{"skills/review.md", "commands/fix.md"}); err != nil {
		t.Fatal(err)
	}
	// The notification precedes the intercepts on the wire, but the
	// sidecar may still be handling it when one is answered: ask until
	// both sidecars report it (each round is a real round trip).
	for i := 0; ; i++ {
		out, err := rt.Intercept(bg, extension.ToolBefore, extension.ToolPayload{Name: "count"})
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(out.Reason, "; resources skills/review.md,commands/fix.md") && out.BlockedBy == "a" {
			break // a blocks first in the chain: b is checked below
		}
		if i == 10_000 {
			t.Fatalf("sidecar a never reported the paths: %q", out.Reason)
		}
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	// b, which a's block keeps from every intercept, got initialize,
	// initialized, resources/changed and shutdown, and dropped nothing.
	if st := rt.Sidecar("b").Stats(); st.DroppedEvents != 0 || st.FramesOut != 4 {
		t.Errorf("b: %+v, want 4 frames written and nothing dropped", st)
	}
	if err := rt.ResourcesChanged(nil); err == nil {
		t.Error("ResourcesChanged on a closed generation succeeded")
	}
}

// TestManifestEnvValuesAreRedactedD25: a value the manifest's runtime.env
// gives a sidecar is a secret of that sidecar whatever its variable is
// called: when the sidecar says it back, in a block reason, the host
// shows the marker instead (D25; FULL TRUST never shows these values).
func TestManifestEnvValuesAreRedactedD25(t *testing.T) {
	const cred = "c0rp-svc-3f9a71d2e8b4"
	rt := startRuntime(t, nil, verdictPlugin("e", "echo-env", false, nil, map[string]string{"SERVICE_CRED": cred}))
	out, err := rt.Intercept(bg, extension.ToolBefore, extension.ToolPayload{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if !out.Blocked || strings.Contains(out.Reason, cred) || !strings.Contains(out.Reason, extension.RedactedMarker) {
		t.Fatalf("reason %q, want the manifest's value replaced by %q", out.Reason, extension.RedactedMarker)
	}
	if !strings.HasPrefix(out.Reason, "blocked by e with cred ") {
		t.Fatalf("reason %q, want the rest of the reason kept", out.Reason)
	}
}

func TestToolSlotOwnerHasTheFinalSayForItsToolD28(t *testing.T) {
	member := verdictPlugin("member", "continue", false, map[string]any{"intercepts": []string{"tool.before", "tool.after"}},
		map[string]string{"FIXTURE_SUBS": "tool.before,tool.after"})
	// The owner subscribes to neither tool point: the slot alone brings it
	// the operations on its tool, and only those.
	owner := verdictPlugin("rm-owner", "block", false, map[string]any{"intercepts": []string{"session.start"}, "replaces": []string{"tool:rm"}},
		map[string]string{"FIXTURE_SUBS": "session.start", "FIXTURE_OWNS": "tool:rm"})
	rt := startRuntime(t, nil, member, owner)
	for _, p := range []extension.Point{extension.ToolBefore, extension.ToolAfter} {
		_, err := rt.Intercept(bg, p, extension.ToolPayload{Name: "rm", Arguments: `{"path":"/"}`})
		var pe *extension.PluginError
		if !errors.As(err, &pe) || pe.Plugin != "rm-owner" || !errors.Is(err, extension.ErrSlotOwnerBlocked) {
			t.Fatalf("%s of rm = %v, want the owner's block to fail it (D17)", p, err)
		}
		out, err := rt.Intercept(bg, p, extension.ToolPayload{Name: "ls"})
		if err != nil || out.Blocked {
			t.Fatalf("%s of ls = %+v, %v; the owner of tool:rm has no say over ls", p, out, err)
		}
	}
}

func TestToolSlotOwnerInTheChainSpeaksLastForItsToolD28(t *testing.T) {
	// Subscribed to tool.before, the owner is an ordinary chain member for
	// other tools (its block is an outcome) and the final say for its own
	// (its block fails the operation).
	owner := verdictPlugin("rm-owner", "block", false, map[string]any{"intercepts": []string{"tool.before"}, "replaces": []string{"tool:rm"}},
		map[string]string{"FIXTURE_SUBS": "tool.before", "FIXTURE_OWNS": "tool:rm"})
	rt := startRuntime(t, nil, owner)
	out, err := rt.Intercept(bg, extension.ToolBefore, extension.ToolPayload{Name: "ls"})
	if err != nil || !out.Blocked || out.BlockedBy != "rm-owner" {
		t.Fatalf("ls: %+v, %v; want a chain block", out, err)
	}
	if _, err := rt.Intercept(bg, extension.ToolBefore, extension.ToolPayload{Name: "rm"}); !errors.Is(err, extension.ErrSlotOwnerBlocked) {
		t.Fatalf("rm: %v, want the slot owner's block", err)
	}
}

func TestProviderSlotOwnerHasTheFinalSayForItsRefD28(t *testing.T) {
	ref := "plugin/fx/fx/m"
	owner := verdictPlugin("owner", "block", false, map[string]any{"intercepts": []string{"session.start"}, "replaces": []string{"provider:" + ref}},
		map[string]string{"FIXTURE_SUBS": "session.start", "FIXTURE_OWNS": "provider:" + ref})
	rt := startRuntime(t, nil, owner, streamPlugin("fx", nil))
	req := extension.ProviderRequestPayload{Request: extension.ProviderRequest{Messages: []extension.ProviderMessage{}, Tools: []extension.ProviderToolSchema{}}}
	for _, p := range []extension.Point{extension.ProviderRequestPoint, extension.ProviderResponsePoint} {
		payload := any(req)
		if p == extension.ProviderResponsePoint {
			payload = extension.ProviderResponsePayload{Text: "hi"}
		}
		if _, err := rt.InterceptProvider(bg, ref, p, payload); !errors.Is(err, extension.ErrSlotOwnerBlocked) {
			t.Fatalf("%s for %s = %v, want the owner's final say", p, ref, err)
		}
		if out, err := rt.InterceptProvider(bg, "plugin/fx/fx/other", p, payload); err != nil || out.Blocked {
			t.Fatalf("%s for another ref = %+v, %v", p, out, err)
		}
		if out, err := rt.Intercept(bg, p, payload); err != nil || out.Blocked {
			t.Fatalf("%s without a ref = %+v, %v", p, out, err)
		}
	}
	if _, err := rt.InterceptProvider(bg, ref, extension.ToolBefore, extension.ToolPayload{Name: "x"}); err == nil {
		t.Fatal("InterceptProvider took tool.before")
	}
}

func TestBaseCatalogEntryNeedsTheProviderSlotD28(t *testing.T) {
	ref := "plugin/fx/fx/m"
	base := []extension.ProviderDescriptor{{Ref: "openai/gpt", Model: "gpt"}, {Ref: ref, Model: "host-model", DisplayName: "the host's"}}
	t.Run("with the slot its descriptor replaces the entry", func(t *testing.T) {
		p := streamPlugin("fx", nil)
		p.env["FIXTURE_DECL"] = `{"replaces":["provider:` + ref + `"],"providers":[{"ref":"` + ref + `","model":"m"}]}`
		p.runtime["replaces"] = []string{"provider:" + ref}
		rt := startRuntime(t, func(h *extension.Host) { h.BaseCatalog = base }, p)
		cat, err := rt.Catalog(bg)
		if err != nil || len(cat) != 2 || cat[0].Ref != "openai/gpt" || cat[1].Ref != ref || cat[1].Model != "m" {
			t.Fatalf("Catalog = %+v, %v; want the base order with fx's descriptor for %s", cat, err, ref)
		}
	})
	t.Run("without the slot the generation fails", func(t *testing.T) {
		h := testHost(installPlugins(t, streamPlugin("fx", nil)))
		h.BaseCatalog = base
		rt, err := h.Start(bg)
		var pe *extension.PluginError
		if err == nil {
			rt.Close()
		}
		if !errors.As(err, &pe) || pe.Plugin != "fx" || !errors.Is(err, extension.ReasonCapabilityNotDeclared) || !strings.Contains(err.Error(), `"provider:`+ref+`"`) {
			t.Fatalf("Start = %v, want fx told to add provider:%s to runtime.replaces", err, ref)
		}
	})
}

func TestCatalogIsFetchedOnceFilteredAndRedactedD25(t *testing.T) {
	secret := "sk-proj-FAKEfake0123456789abcdefFAKE"
	p := rawStreamPlugin()
	p.env["FIXTURE_CATALOG"] = `"result":{"providers":[` +
		`{"ref":"plugin/raw/fx/m","displayName":"Raw \u001b]0;owned\u0007 ` + secret + `","model":"m","efforts":["low"]},` +
		`{"ref":"plugin/other/fx/m"},{"ref":"plugin/raw/fx"},{"ref":"plugin/raw/a/b/c"}]}`
	log := newFrameLog()
	rt := startRuntime(t, func(h *extension.Host) { h.Conn.Tap = log.tap }, p)
	var wg sync.WaitGroup
	cats := make([][]extension.ProviderDescriptor, 8)
	for i := range cats {
		wg.Go(func() { cats[i], _ = rt.Catalog(bg) })
	}
	wg.Wait()
	if n := len(log.matching(">", extension.MethodProviderCatalog)); n != 1 {
		t.Fatalf("%d catalog requests for 8 concurrent first fetches, want 1", n)
	}
	for _, cat := range cats {
		if len(cat) != 1 || cat[0].Ref != "plugin/raw/fx/m" {
			t.Fatalf("catalog %+v, want only the descriptor in the namespace and of the catalog's shape", cat)
		}
		if d := cat[0].DisplayName; strings.Contains(d, secret) || strings.Contains(d, "\x1b") || !strings.Contains(d, `\x1b`) {
			t.Fatalf("display name %q, want it redacted (D25) and escaped (D27)", d)
		}
	}
}

// TestCatalogLeavesOutRefsNotDeclaredD9: a catalog entry the sidecar did
// not declare at the handshake is one OpenStream would refuse: it is left
// out, with one warning naming it.
func TestCatalogLeavesOutRefsNotDeclaredD9(t *testing.T) {
	p := rawStreamPlugin()
	p.env["FIXTURE_CATALOG"] = `"result":{"providers":[{"ref":"plugin/raw/fx/m"},{"ref":"plugin/raw/fx/undeclared"}]}`
	rt := startRuntime(t, nil, p)
	for range 2 {
		cat, err := rt.Catalog(bg)
		if err != nil || len(cat) != 1 || cat[0].Ref != "plugin/raw/fx/m" {
			t.Fatalf("catalog %+v, %v; want only the declared ref", cat, err)
		}
	}
	if _, err := rt.OpenStream(bg, "plugin/raw/fx/undeclared", "", extension.ProviderRequest{}); !errors.Is(err, extension.ReasonCapabilityNotDeclared) {
		t.Fatalf("OpenStream of the left-out ref = %v, want capability_not_declared", err)
	}
	var warned []string
	for _, w := range rt.Warnings() {
		if strings.Contains(w.Error(), `"plugin/raw/fx/undeclared"`) {
			warned = append(warned, w.Error())
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "did not declare") {
		t.Fatalf("warnings %q, want one naming the left-out ref", warned)
	}
}

func TestFailedCatalogIsSkippedWarnedAndAskedAgain(t *testing.T) {
	p := rawStreamPlugin()
	p.env["FIXTURE_CATALOG"] = `"error":{"code":-32000,"message":"down","data":{"reason":"provider_failed","retryable":true}}`
	log := newFrameLog()
	rt := startRuntime(t, func(h *extension.Host) { h.Conn.Tap = log.tap }, p)
	for range 2 {
		if cat, err := rt.Catalog(bg); err != nil || len(cat) != 0 {
			t.Fatalf("Catalog = %+v, %v; want nothing, no error", cat, err)
		}
	}
	if n := len(log.matching(">", extension.MethodProviderCatalog)); n != 2 {
		t.Fatalf("%d catalog requests, want a new one after each failure", n)
	}
	if w := rt.Warnings(); len(w) != 1 || !strings.Contains(w[0].Err.Error(), "down") {
		t.Fatalf("warnings %v, want one about the failed catalog", w)
	}
}

func TestNoHostSecretReachesASidecarD25(t *testing.T) {
	secrets := []string{"sk-proj-HOSTsecret0123456789abcdefHOST", "hunter2-db-password-HOST"}
	log := newFrameLog()
	rt, _ := conformanceRuntimeWith(t, nil, func(h *extension.Host) {
		h.Conn.Tap = log.tap
		h.Env = append(h.Env, "OPENAI_API_KEY="+secrets[0], "REASONIX_DB_PASSWORD="+secrets[1])
		h.BaseCatalog = []extension.ProviderDescriptor{{Ref: "openai/gpt", Model: "gpt"}}
	})
	if _, err := rt.Catalog(bg); err != nil {
		t.Fatal(err)
	}
	st, err := rt.OpenStream(bg, "plugin/conformance-ext/fake/echo", "low", extension.ProviderRequest{Messages: []extension.ProviderMessage{{Role: extension.RoleUser, Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := drain(st); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Intercept(bg, extension.InputReceive, extension.InputPayload{Text: "/fs hi"}); err != nil {
		t.Fatal(err)
	}
	rt.Observe(extension.SessionStart, extension.SessionPayload{Phase: "start"})
	rt.ResourcesChanged([]string{"a"})
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	out := log.matching(">")
	if len(out) < 8 {
		t.Fatalf("only %d frames went out", len(out))
	}
	for _, f := range out {
		for _, s := range secrets {
			if strings.Contains(f, s) {
				t.Fatalf("a frame to the sidecar carries a host secret: %s", f)
			}
		}
	}
}
