package extension_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/reasonix-ext/extension"
)

// testFrontend records what it is shown and answers prompts with answer.
type testFrontend struct {
	mu       sync.Mutex
	surfaces []extension.Surface
	prompts  []extension.Prompt
	shown    chan struct{}
	answer   func(extension.Prompt) (map[string]json.RawMessage, bool)
}

func newFrontend() *testFrontend { return &testFrontend{shown: make(chan struct{}, 64)} }

func (f *testFrontend) Show(s extension.Surface) {
	f.mu.Lock()
	f.surfaces = append(f.surfaces, s)
	f.mu.Unlock()
	f.shown <- struct{}{}
}

func (f *testFrontend) Ask(ctx context.Context, p extension.Prompt) (map[string]json.RawMessage, bool, error) {
	f.mu.Lock()
	f.prompts = append(f.prompts, p)
	f.mu.Unlock()
	if f.answer == nil {
		return nil, true, nil
	}
	v, cancelled := f.answer(p)
	return v, cancelled, nil
}

// await waits until n surfaces have been shown and returns them.
func (f *testFrontend) await(t *testing.T, n int) []extension.Surface {
	t.Helper()
	for {
		f.mu.Lock()
		got := len(f.surfaces)
		f.mu.Unlock()
		if got >= n {
			f.mu.Lock()
			defer f.mu.Unlock()
			return append([]extension.Surface(nil), f.surfaces...)
		}
		select {
		case <-f.shown:
		case <-contextDone(t):
			t.Fatalf("%d surfaces shown, want %d", got, n)
		}
	}
}

func contextDone(t *testing.T) <-chan struct{} {
	ctx, cancel := context.WithTimeout(bg, hangGuard)
	t.Cleanup(cancel)
	return ctx.Done()
}

func TestConformanceSessionStartPublishesScenario10(t *testing.T) {
	fe := newFrontend()
	rt, _ := conformanceRuntimeWith(t, nil, func(h *extension.Host) { h.Frontend = fe })
	if err := rt.Observe(extension.SessionStart, extension.SessionPayload{Phase: "start"}); err != nil {
		t.Fatal(err)
	}
	got := fe.await(t, 2)
	status, card := got[0], got[1]
	if status.Kind != extension.SurfaceStatus || status.SurfaceID != "fullsidecar-status" || status.Status.Label != "fullsidecar online" || status.Status.Severity != extension.SeverityInfo {
		t.Fatalf("first surface %+v, want the status", status)
	}
	if card.Kind != extension.SurfaceCard || card.SurfaceID != "fullsidecar-card" || len(card.Card.Actions) != 1 || card.Card.Actions[0].ActionID != "demo" {
		t.Fatalf("second surface %+v, want the card with the demo action", card)
	}
	if status.Plugin != "conformance-ext" || status.SessionID != "sess-conf" || status.Generation != 1 {
		t.Fatalf("surface attributed to %s/%s/%d", status.Plugin, status.SessionID, status.Generation)
	}
}

func TestConformanceUIActionRoundTripScenario11(t *testing.T) {
	fe := newFrontend()
	fe.answer = func(p extension.Prompt) (map[string]json.RawMessage, bool) {
		return map[string]json.RawMessage{"name": json.RawMessage(`"Ada"`), "loud": json.RawMessage(`true`)}, false
	}
	rt, _ := conformanceRuntimeWith(t, nil, func(h *extension.Host) { h.Frontend = fe })
	if got := rt.Actions(); !reflect.DeepEqual(got, []string{"/conformance-ext:demo"}) {
		t.Fatalf("Actions = %v", got)
	}
	res, err := rt.Action(bg, "sess-conf", "/conformance-ext:demo", nil)
	if err != nil || !res.Accepted {
		t.Fatalf("Action = %+v, %v", res, err)
	}
	fe.mu.Lock()
	prompts := fe.prompts
	fe.mu.Unlock()
	if len(prompts) != 1 || prompts[0].SurfaceID != "fullsidecar-demo-form" || prompts[0].SessionID != "sess-conf" || prompts[0].Kind != extension.PromptInput {
		t.Fatalf("prompts %+v, want the demo form", prompts)
	}
	got := fe.await(t, 1)
	if n := got[len(got)-1]; n.Kind != extension.SurfaceNotification || n.Notification.Title != "HELLO, ADA!" {
		t.Fatalf("surface %+v, want the loud greeting", n)
	}
}

func TestConformanceUISubmitRoundTripScenario12(t *testing.T) {
	fe := newFrontend()
	rt, _ := conformanceRuntimeWith(t, nil, func(h *extension.Host) { h.Frontend = fe })
	ok, err := rt.Submit(bg, "sess-conf", "conformance-ext", "fullsidecar-demo-form", map[string]json.RawMessage{"name": json.RawMessage(`"Ada"`)})
	if err != nil || !ok {
		t.Fatalf("Submit = %v, %v", ok, err)
	}
	got := fe.await(t, 1)
	if s := got[0]; s.Kind != extension.SurfaceStatus || !strings.Contains(s.Status.Label, "fullsidecar-demo-form") {
		t.Fatalf("surface %+v, want a status naming the form", s)
	}
}

// uiPlugin is the raw-ui fixture, with the ui capability unless without.
func uiPlugin(withUI bool) plugin {
	rt := map[string]any{"intercepts": []string{"tool.before"}}
	if withUI {
		rt["capabilities"] = []string{"ui"}
		rt["uiActions"] = []string{"go"}
	}
	decl := `{"protocolVersion":"1","name":"raw","version":"1","stateSchemaVersion":0,"subscriptions":["tool.before"]` + map[bool]string{true: `,"uiActions":[{"actionId":"go","label":"Go \u001b[31m"}]}`, false: `}`}[withUI]
	return plugin{name: "raw", fixture: "raw-ui", runtime: rt, env: map[string]string{"FIXTURE_RESULT": decl}}
}

// hostAnswer has the raw-ui sidecar send method with params and returns
// the host's response frame.
func hostAnswer(t *testing.T, rt *extension.Runtime, method, params string) map[string]json.RawMessage {
	t.Helper()
	out, err := rt.Intercept(bg, extension.ToolBefore, extension.ToolPayload{Name: method, Arguments: params})
	if err != nil || !out.Blocked {
		t.Fatalf("driving %s: %+v, %v", method, out, err)
	}
	var frame map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out.Reason), &frame); err != nil {
		t.Fatalf("the host answered %s: %q", method, out.Reason)
	}
	return frame
}

func publish(session string, generation int, kind, payload string) string {
	b, _ := json.Marshal(map[string]any{"surfaceId": "s", "sessionId": session, "generation": generation, "kind": kind, "payload": json.RawMessage(payload)})
	return string(b)
}

func TestStalePublishesAndRequestsAreDroppedD24(t *testing.T) {
	fe := newFrontend()
	rt := startRuntime(t, func(h *extension.Host) { h.Frontend = fe }, uiPlugin(true))
	for _, c := range []struct {
		method, params, want string
	}{
		{extension.MethodUIPublish, publish("sess-test", 1, "status", `{"label":"now"}`), `{"accepted":true}`},
		{extension.MethodUIPublish, publish("sess-test", 0, "status", `{"label":"old generation"}`), `{"accepted":false}`},
		{extension.MethodUIPublish, publish("other", 1, "status", `{"label":"other session"}`), `{"accepted":false}`},
		{extension.MethodUIRequest, publish("sess-test", 7, "input", `{"fields":[]}`), `{"cancelled":true}`},
	} {
		if got := hostAnswer(t, rt, c.method, c.params); string(got["result"]) != c.want {
			t.Errorf("%s %s: %s, want %s", c.method, c.params, got["result"], c.want)
		}
	}
	if got := fe.await(t, 1); len(got) != 1 || got[0].Status.Label != "now" {
		t.Fatalf("shown %+v, want only the current publish", got)
	}
	fe.mu.Lock()
	defer fe.mu.Unlock()
	if len(fe.prompts) != 0 {
		t.Fatalf("a stale request reached the frontend")
	}
}

func TestReloadRebindsTheUID24(t *testing.T) {
	fe := newFrontend()
	home := installPlugins(t, uiPlugin(true))
	h := testHost(home)
	h.Frontend = fe
	old, err := h.Start(bg)
	if err != nil {
		t.Fatal(err)
	}
	next, err := h.Reload(bg, old)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if got := hostAnswer(t, next, extension.MethodUIPublish, publish("sess-test", 1, "status", `{"label":"late"}`)); string(got["result"]) != `{"accepted":false}` {
		t.Fatalf("a generation-1 publish after the reload: %s", got["result"])
	}
	if got := hostAnswer(t, next, extension.MethodUIPublish, publish("sess-test", 2, "status", `{"label":"now"}`)); string(got["result"]) != `{"accepted":true}` {
		t.Fatalf("a generation-2 publish: %s", got["result"])
	}
}

func TestUIErrorsCarryDataAndNeedTheCapability(t *testing.T) {
	wantReason := func(frame map[string]json.RawMessage, reason extension.Reason) {
		t.Helper()
		var e struct {
			Data struct {
				Reason extension.Reason `json:"reason"`
			} `json:"data"`
		}
		if json.Unmarshal(frame["error"], &e) != nil || e.Data.Reason != reason {
			t.Fatalf("answer %s, want an error with data reason %s", frame["error"], reason)
		}
	}
	noFrontend := startRuntime(t, nil, uiPlugin(true))
	wantReason(hostAnswer(t, noFrontend, extension.MethodUIPublish, publish("sess-test", 1, "status", `{"label":"x"}`)), extension.ReasonUnknownMethod)
	wantReason(hostAnswer(t, noFrontend, extension.MethodUIRequest, publish("sess-test", 1, "input", `{"fields":[]}`)), extension.ReasonUnknownMethod)
	noCapability := startRuntime(t, func(h *extension.Host) { h.Frontend = newFrontend() }, uiPlugin(false))
	wantReason(hostAnswer(t, noCapability, extension.MethodUIPublish, publish("sess-test", 1, "status", `{"label":"x"}`)), extension.ReasonCapabilityNotDeclared)
	wantReason(hostAnswer(t, noCapability, extension.MethodUIRequest, publish("sess-test", 1, "input", `{"fields":[]}`)), extension.ReasonCapabilityNotDeclared)
	withUI := startRuntime(t, func(h *extension.Host) { h.Frontend = newFrontend() }, uiPlugin(true))
	frame := hostAnswer(t, withUI, extension.MethodUIPublish, publish("sess-test", 1, "card", `{"markdown":"<script>alert(1)</script>"}`))
	wantReason(frame, extension.ReasonInvalidParams)
	if e := string(frame["error"]); !strings.Contains(e, "/markdown") || strings.Contains(e, "alert") {
		t.Fatalf("error %s, want it to name /markdown without echoing the value", e)
	}
	wantReason(hostAnswer(t, withUI, extension.MethodUIPublish, publish("sess-test", 1, "status", `{"label":"x","bogus":1}`)), extension.ReasonInvalidParams)
}

func TestActionsAreNamedCheckedAndCarryTheirArgs(t *testing.T) {
	for _, c := range []struct {
		name, plugin, action string
	}{{"/p:ok-action1", "p", "ok-action1"}, {"/my-plugin:demo", "my-plugin", "demo"}} {
		plugin, action, err := extension.ParseAction(c.name)
		if err != nil || plugin != c.plugin || action != c.action {
			t.Errorf("ParseAction(%q) = %q, %q, %v", c.name, plugin, action, err)
		}
	}
	for _, bad := range []string{"", "p:demo", "/p:", "/:demo", "/p:Upper", "/p:has space", "/p:under_score", "/p:slash/", "/p:-lead"} {
		if _, _, err := extension.ParseAction(bad); !errors.Is(err, extension.ReasonInvalidParams) {
			t.Errorf("ParseAction(%q) = %v, want invalid_params", bad, err)
		}
	}
	rt := startRuntime(t, func(h *extension.Host) { h.Frontend = newFrontend() }, uiPlugin(true))
	res, err := rt.Action(bg, "sess-test", "/raw:go", map[string]string{"path": "a b", "n": "1"})
	if err != nil || !res.Accepted {
		t.Fatalf("Action = %+v, %v", res, err)
	}
	var sent extension.UIActionParams
	if err := json.Unmarshal([]byte(res.Message), &sent); err != nil || !reflect.DeepEqual(sent.Args, map[string]string{"path": "a b", "n": "1"}) || sent.SessionID != "sess-test" || sent.Generation != 1 || sent.ActionID != "go" {
		t.Fatalf("the sidecar got %s, want the args as sent", res.Message)
	}
	if d, _ := rt.Declaration("raw"); strings.Contains(d.UIActions[0].Label, "\x1b") {
		t.Fatalf("action label %q reached the host raw (D27)", d.UIActions[0].Label)
	}
	for _, c := range []struct {
		session, name string
		want          extension.Reason
	}{
		{"sess-test", "/raw:nope", extension.ReasonInvalidParams},
		{"sess-test", "/ghost:go", extension.ReasonInternal},
		{"old-session", "/raw:go", extension.ReasonInvalidParams},
	} {
		if _, err := rt.Action(bg, c.session, c.name, nil); !errors.Is(err, c.want) {
			t.Errorf("Action(%s, %s) = %v, want %s", c.session, c.name, err, c.want)
		}
	}
	if ok, err := rt.Submit(bg, "sess-test", "raw", "form-1", nil); err != nil || !ok {
		t.Fatalf("Submit = %v, %v", ok, err)
	}
	if _, err := rt.Submit(bg, "sess-test", "raw", " ", nil); !errors.Is(err, extension.ReasonInvalidParams) {
		t.Fatalf("Submit without a surface id: %v", err)
	}
	s := rt.Sidecar("raw")
	proc, _ := os.FindProcess(s.PID())
	proc.Kill()
	<-s.Done()
	if _, err := rt.Action(bg, "sess-test", "/raw:go", nil); !errors.Is(err, extension.ReasonProviderInterrupted) {
		t.Fatalf("a crashed plugin's action: %v, want provider_interrupted", err)
	}
}

func TestSurfaceTextRendersEveryKind(t *testing.T) {
	half := 0.5
	surfaces := []extension.Surface{
		{Plugin: "p", SurfaceID: "st", Kind: extension.SurfaceStatus, Status: &extension.UIStatusPayload{Label: "Indexing", Detail: "3/6", Severity: extension.SeverityWarn, Progress: &half}},
		{Plugin: "p", SurfaceID: "c", Kind: extension.SurfaceCard, Card: &extension.UICardPayload{Title: "Review", Markdown: "Two **findings**:\n- a\n- b", Fields: []extension.UIKeyValue{{Key: "files", Value: "3"}}, Actions: []extension.UIActionRef{{ActionID: "fix", Label: "Fix them"}}}},
		{Plugin: "p", SurfaceID: "f", Kind: extension.SurfaceForm, Form: &extension.UIFormPayload{Title: "Deploy", Message: "Where to?", Fields: []extension.UIFormField{
			{Key: "env", Label: "Environment", Kind: extension.PromptSelect, Options: []string{"staging", "prod"}, Required: true},
			{Key: "note", Kind: extension.PromptInput, Default: json.RawMessage(`"none"`)}}}},
		{Plugin: "p", SurfaceID: "n", Kind: extension.SurfaceNotification, Notification: &extension.UINotificationPayload{Title: "Done", Body: "All green.", Severity: extension.SeverityInfo}},
	}
	var b strings.Builder
	for _, s := range surfaces {
		b.WriteString(s.Text())
	}
	golden := filepath.Join("testdata", "ui", "surfaces.golden")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		os.MkdirAll(filepath.Dir(golden), 0o755)
		os.WriteFile(golden, []byte(b.String()), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil || b.String() != string(want) {
		t.Fatalf("rendered:\n%s\nwant (%s, %v):\n%s", b.String(), golden, err, want)
	}
}

func TestUIPayloadsAreStructuredOnlyD23(t *testing.T) {
	hostile := []string{
		"<script>alert(1)</script>", "<SCRIPT SRC=//x.js>", "<script", "x <script>", "<img src=x onerror=alert(1)>",
		"<img/src=x>", "<iframe src=//evil>", "<svg onload=alert(1)>", "<b>bold</b>", "</b>", "<a href=\"https://x\">x</a>",
		"<div>", "<p>hi</p>", "<style>*{}</style>", "<!-- hidden -->", "<!DOCTYPE html>", "<?xml version=\"1.0\"?>",
		"[x](javascript:alert(1))", "[x](JavaScript:alert(1))", "javascript:alert(1)", "go to javascript: alert(1)",
		"[x](data:text/html;base64,PHNjcmlwdD4=)", "data:text/html,<b>", "[x](vbscript:msgbox)", "vbscript:run",
		"file:///etc/passwd", "[x](file:///etc/passwd)", "![tracker](https://evil/pixel.png)", "![](x.png)",
		"look ![alt](https://x/y.gif) here", "[x](mailto:a@b.c)", "[x](ftp://host/file)",
		"\x1b[31mred\x1b[0m", "\x1b]0;title\x07", "\x1b]8;;https://evil\x1b\\link\x1b]8;;\x1b\\", "\x9b31m",
		"bell\x07", "nul\x00", "back\bspace", "cr\rreturn", "del\x7f", "\u0085next line", "form\ffeed", "\xff invalid",
	}
	benign := []string{
		"metadata: 3", "profile: x", "a<b", "1 < 2 > 0", "<https://example.com>", "see <http://example.com/a?b=c>",
		"[docs](https://example.com/docs)", "[local](./README.md)", "[anchor](#section)", "[rel](docs/guide.md)",
		"a file called notes", "the file: notes.txt", "data: 42 rows", "`<script>` is a tag", "```\n<div>x</div>\n```",
		"use `a<b && c>d` here", "tab\tand\nnewline", "日本語のテキスト", "Ünïcödé ✓ emoji 🚀", "**bold** _it_ ~~s~~",
		"x < y and y > z", "email me: a@b.c", "http://plain.example", "<=>", "i<3 go",
	}
	if len(hostile) < 40 || len(benign) < 20 {
		t.Fatalf("%d hostile, %d benign: the tables are too small", len(hostile), len(benign))
	}
	card := func(md string) json.RawMessage {
		b, _ := json.Marshal(extension.UICardPayload{Markdown: md, Fields: []extension.UIKeyValue{{Key: "k", Value: "v"}}})
		return b
	}
	for _, h := range hostile {
		_, err := extension.DecodeSurface(extension.SurfaceCard, card(h))
		if !errors.Is(err, extension.ReasonInvalidParams) || !strings.Contains(err.Error(), "/markdown") {
			t.Errorf("%q: %v, want invalid_params naming /markdown", h, err)
			continue
		}
		if len(h) > 12 && strings.Contains(err.Error(), h) {
			t.Errorf("%q: the error echoes the value: %v", h, err)
		}
	}
	for _, b := range benign {
		v, err := extension.DecodeSurface(extension.SurfaceCard, card(b))
		if err != nil {
			t.Errorf("%q refused: %v", b, err)
		} else if got := v.(*extension.UICardPayload).Markdown; got != b {
			t.Errorf("%q came back as %q", b, got)
		}
	}
	// Every string is checked, with its own pointer: a field value, an
	// option, a string default.
	for kind, doc := range map[extension.SurfaceKind]string{
		extension.SurfaceCard:         `{"fields":[{"key":"k","value":"<b>x</b>"}]}`,
		extension.SurfaceForm:         `{"fields":[{"key":"k","kind":"select","options":["ok","<img src=x>"]}]}`,
		extension.SurfaceStatus:       `{"label":"\u001b[2J"}`,
		extension.SurfaceNotification: `{"title":"t","body":"![x](y.png)"}`,
	} {
		_, err := extension.DecodeSurface(kind, json.RawMessage(doc))
		if !errors.Is(err, extension.ReasonInvalidParams) {
			t.Errorf("%s %s: %v, want invalid_params", kind, doc, err)
		}
	}
	if _, err := extension.DecodeSurface(extension.SurfaceForm, json.RawMessage(`{"fields":[{"key":"k","kind":"input","default":"<script>"}]}`)); err == nil || !strings.Contains(err.Error(), "/fields/0/default") {
		t.Errorf("a string default: %v", err)
	}
}

// TestUIStringsRefuseEveryTerminalSequenceD23D27: each of the 20 control
// and escape sequences, in each kind of surface, is refused as invalid
// params, and the refusal carries none of it raw.
func TestUIStringsRefuseEveryTerminalSequenceD23D27(t *testing.T) {
	for _, seq := range terminalSequences() {
		quoted, _ := json.Marshal("ok " + seq.raw)
		for kind, doc := range map[extension.SurfaceKind]string{
			extension.SurfaceStatus:       `{"label":` + string(quoted) + `}`,
			extension.SurfaceCard:         `{"title":` + string(quoted) + `}`,
			extension.SurfaceNotification: `{"title":"t","body":` + string(quoted) + `}`,
			extension.SurfaceForm:         `{"fields":[{"key":"k","label":` + string(quoted) + `,"kind":"input"}]}`,
		} {
			_, err := extension.DecodeSurface(kind, json.RawMessage(doc))
			if !errors.Is(err, extension.ReasonInvalidParams) {
				t.Errorf("%s %s: %v, want invalid_params", seq.shown, kind, err)
				continue
			}
			shownSafely(t, "UI refusal", err.Error(), "")
		}
	}
}

// d23Entry is one line of testdata/ui/corpus.jsonl (its README says
// how to read it): a text, refused for Construct wherever it is placed
// (or, in class benign, accepted everywhere), or a whole payload of Kind
// refused naming Field. Texts of class redaction are refused only once
// redacted, by the host.
type d23Entry struct {
	Class, Text, Kind, Field, Construct string
	Payload                             json.RawMessage
}

func d23Corpus(t *testing.T) []d23Entry {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "ui", "corpus.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []d23Entry
	for line := range strings.Lines(string(b)) {
		var e d23Entry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("corpus line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// d23Placement is a text placed in a payload document, and the member
// that holds it.
type d23Placement struct {
	kind         extension.SurfaceKind
	doc, pointer string
}

// d23Placements puts text at every depth: a top-level string, an array
// element (an option, an array default) and an object value.
func d23Placements(text string) []d23Placement {
	q, _ := json.Marshal(text)
	return []d23Placement{
		{extension.SurfaceCard, `{"markdown":` + string(q) + `}`, "/markdown"},
		{extension.SurfaceForm, `{"fields":[{"key":"k","kind":"select","options":["ok",` + string(q) + `]}]}`, "/fields/0/options/1"},
		{extension.SurfaceForm, `{"fields":[{"key":"k","kind":"multiselect","options":["ok"],"default":["ok",` + string(q) + `]}]}`, "/fields/0/default/1"},
		{extension.SurfaceForm, `{"fields":[{"key":"k","kind":"input","default":{"note":` + string(q) + `}}]}`, "/fields/0/default/note"},
	}
}

// d23Refusal fails unless err refuses as invalid_params naming pointer
// and construct, without echoing text.
func d23Refusal(t *testing.T, err error, text, pointer, construct string) {
	t.Helper()
	if !errors.Is(err, extension.ReasonInvalidParams) || !strings.Contains(err.Error(), pointer+" holds "+construct) || !strings.Contains(err.Error(), " at byte ") {
		t.Errorf("%q: %v, want invalid_params: %s holds %s at byte ...", text, err, pointer, construct)
	} else if len(text) > 12 && strings.Contains(err.Error(), text) {
		t.Errorf("%q: the refusal echoes the value: %v", text, err)
	}
}

func TestD23CorpusIsRefusedAtEveryDepthAndBenignTextPasses(t *testing.T) {
	corpus := d23Corpus(t)
	hostile, benign := 0, 0
	for _, e := range corpus {
		switch {
		case e.Class == "benign":
			benign++
			for _, p := range d23Placements(e.Text) {
				if _, err := extension.DecodeSurface(p.kind, json.RawMessage(p.doc)); err != nil {
					t.Errorf("benign %q at %s: %v", e.Text, p.pointer, err)
				}
			}
		case e.Payload != nil:
			hostile++
			_, err := extension.DecodeSurface(extension.SurfaceKind(e.Kind), e.Payload)
			d23Refusal(t, err, string(e.Payload), e.Field, e.Construct)
		case e.Class != "redaction": // TestD23JudgesTheTextAfterRedaction
			hostile++
			for _, p := range d23Placements(e.Text) {
				_, err := extension.DecodeSurface(p.kind, json.RawMessage(p.doc))
				d23Refusal(t, err, e.Text, p.pointer, e.Construct)
			}
		}
	}
	if hostile < 60 || benign < 20 {
		t.Fatalf("%d hostile payloads and %d benign texts, want at least 60 and 20", hostile, benign)
	}
}

// TestD23ReadsTextAsCommonMarkRendersIt: the defects of issue 25, each by
// the rule that refuses it.
func TestD23ReadsTextAsCommonMarkRendersIt(t *testing.T) {
	for _, c := range []struct{ rule, text, construct string }{
		{"character references are decoded in a destination", "[click](&#106;avascript:alert(1))", "a javascript: URL"},
		{"named references are decoded", "javascript&colon;alert(1)", "a javascript: URL"},
		{"hexadecimal references are decoded", "[x](&#x6A;avascript:alert(1))", "a javascript: URL"},
		{"backslash escapes are decoded", "[x](javascript\\:alert(1))", "a javascript: URL"},
		{"a reference definition is a destination", "[x]: &#106;avascript:alert(1)\n\n[x]", "a javascript: URL"},
		{"a reference definition is a link", "[x]: mailto:a@b.example\n\n[x]", "a link that is not http"},
		{"a reference-style image is an image", "![pixel][1]\n\n[1]: https://tracker.example/p.png", "a Markdown image"},
		{"a shortcut reference image is an image", "![pixel]\n\n[pixel]: https://tracker.example/p.png", "a Markdown image"},
		{"an escaped backtick opens no code span (HTML)", "\\`<img src=x onerror=alert(1)>`", "raw HTML"},
		{"an escaped backtick opens no code span (image)", "\\`![p](https://tracker.example/p.png)`", "a Markdown image"},
		{"an autolink comes before a code span", "<https://a.example/`> <img src=x> `", "a backtick inside a link"},
		{"a link destination comes before a code span", "[a](https://a.example/`) <img src=x> `", "a backtick inside a link"},
		{"a code span ends with its paragraph", "`a\n\n<img src=x>`", "raw HTML"},
		{"an email autolink is a mailto link", "<a@b.example>", "an email autolink"},
	} {
		_, err := extension.DecodeSurface(extension.SurfaceCard, json.RawMessage(`{"markdown":`+strconv.Quote(c.text)+`}`))
		if !strings.Contains(fmt.Sprint(err), "/markdown holds "+c.construct) {
			t.Errorf("%s: %q: %v, want /markdown holds %s", c.rule, c.text, err, c.construct)
		}
	}
}

func TestD23JudgesEveryStringAtAnyDepthOfADefault(t *testing.T) {
	for doc, want := range map[string]string{
		`{"fields":[{"key":"k","kind":"multiselect","options":["a"],"default":["<script>x</script>","javascript:x","\u009b"]}]}`: "/fields/0/default/0 holds raw HTML",
		`{"fields":[{"key":"k","kind":"multiselect","options":["a"],"default":["a","\u009b"]}]}`:                                 "/fields/0/default/1 holds a control character",
		`{"fields":[{"key":"k","kind":"input","default":{"x":{"y":"<img src=x onerror=alert(1)>"}}}]}`:                           "/fields/0/default/x/y holds raw HTML",
	} {
		if _, err := extension.DecodeSurface(extension.SurfaceForm, json.RawMessage(doc)); !strings.Contains(fmt.Sprint(err), want) {
			t.Errorf("%s: %v, want %s", doc, err, want)
		}
	}
}

// TestD23JudgesTheTextAfterRedaction: text that redaction turns into an
// image or a link is refused by the host at every depth, although the
// SDK's check, which does not redact, accepts it.
func TestD23JudgesTheTextAfterRedaction(t *testing.T) {
	rt := startRuntime(t, func(h *extension.Host) { h.Frontend = newFrontend() }, uiPlugin(true))
	n := 0
	for _, e := range d23Corpus(t) {
		if e.Class != "redaction" {
			continue
		}
		n++
		for _, p := range d23Placements(e.Text) {
			if _, err := extension.DecodeSurface(p.kind, json.RawMessage(p.doc)); err != nil {
				t.Errorf("%q before redaction: %v", e.Text, err)
			}
			frame := hostAnswer(t, rt, extension.MethodUIPublish, publish("sess-test", 1, string(p.kind), p.doc))
			if got := string(frame["error"]); !strings.Contains(got, p.pointer+` holds `+e.Construct) || strings.Contains(got, "ghp_") {
				t.Errorf("%q at %s: %s, want %s holds %s", e.Text, p.pointer, got, p.pointer, e.Construct)
			}
		}
	}
	if n < 3 {
		t.Fatalf("%d redaction cases in the corpus", n)
	}
}

// TestD25FormDefaultsAreRedactedAtAnyDepthD23: a published form and a
// prompt reach the Frontend with every default string redacted.
func TestD25FormDefaultsAreRedactedAtAnyDepthD23(t *testing.T) {
	const secret = "ghp_FAKEabcdefghijklmnopqrstuvwxyz012345"
	fe := newFrontend()
	rt := startRuntime(t, func(h *extension.Host) { h.Frontend = fe }, uiPlugin(true))
	doc := `{"fields":[{"key":"a","kind":"input","default":"` + secret + `"},{"key":"b","kind":"multiselect","options":["x"],"default":["` + secret + `"]},{"key":"c","kind":"input","default":{"token":"` + secret + `","n":12345678901234567890}}]}`
	if got := hostAnswer(t, rt, extension.MethodUIPublish, publish("sess-test", 1, "form", doc)); string(got["result"]) != `{"accepted":true}` {
		t.Fatalf("publish: %s", got["error"])
	}
	if got := hostAnswer(t, rt, extension.MethodUIRequest, publish("sess-test", 1, "input", doc)); string(got["result"]) != `{"cancelled":true}` {
		t.Fatalf("request: %s", got["error"])
	}
	fe.mu.Lock()
	defer fe.mu.Unlock()
	forms := []extension.UIFormPayload{*fe.surfaces[0].Form, fe.prompts[0].Form}
	for _, f := range forms {
		b, _ := json.Marshal(f)
		if strings.Contains(string(b), secret) || strings.Count(string(b), extension.RedactedMarker) != 3 || !strings.Contains(string(b), "12345678901234567890") {
			t.Errorf("the Frontend got %s, want three defaults redacted and the number kept", b)
		}
	}
}

// d23Pieces are what the oracle's compositions are made of: the
// constructs of the corpus, with escapes, references and code spans.
var d23Pieces = []string{
	"`", "``", "```", "\n```\n", "\\`", "\\", "\\[", "\\]", "\\<", "\\!", "[", "]", "](", ")", "(", "[x]", "[1]", "[x][1]", "[x][]",
	"![", "![p]", "]: ", "\n[1]: ", "\n[x]: ", "https://t.example/p.png", "http://a.example/", "./rel.md", "#frag", "&#106;avascript:x",
	"javascript&colon;x", "&#x6A;", "mailto:a@b.example", "ftp://h.example/f", "12:30", "\"t\"", " 't'", "<https://a.example/>",
	"<mailto:a@b.example>", "<a@b.example>", "<", ">", "<b>", "</b>", "<img src=x>", "<div", "<!-- c -->", "&lt;b&gt;", "&amp;",
	"\n", "\n\n", "    ", "\t", "> ", "- ", "1. ", " ", "text", "word ", "**b**", "_i_", "&#x202E;", "~~~", "\n~~~\n", "`a\n", "- ```",
	"  ```", "\n> ", "1) ", "&#96;", "<span title=\"`\">", "[a`", "(`", "\"`\"",
}

// d23Compositions returns n texts of 1 to 7 pieces each, drawn by a PCG
// seeded (23, 25): the same texts on every run.
func d23Compositions(n int) []string {
	r := rand.New(rand.NewPCG(23, 25))
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for range 1 + r.Uint64()%7 {
			b.WriteString(d23Pieces[r.Uint64()%uint64(len(d23Pieces))])
		}
		out[i] = b.String()
	}
	return out
}

// d23Oracle returns what the CommonMark rendering rendered shows that D23
// refuses: an image, raw HTML (the oracle's marker) or a link whose
// scheme is not http or https, or "". Destinations are as the renderer
// wrote them (percent-encoded, so a browser decodes nothing in a scheme).
func d23Oracle(rendered string) string {
	switch {
	case strings.Contains(rendered, "<img"):
		return "an image"
	case strings.Contains(rendered, "<!--raw HTML-->"):
		return "raw HTML"
	}
	for _, a := range strings.Split(rendered, `<a href="`)[1:] {
		dest, _, _ := strings.Cut(a, `"`)
		dest = html.UnescapeString(dest)
		scheme, _, ok := strings.Cut(strings.ToLower(dest), ":")
		// A scheme is a letter, then letters, digits, '+', '.' or '-';
		// a browser reads anything else before ':' as a relative path.
		if ok && scheme != "" && scheme[0] >= 'a' && strings.Trim(scheme, "abcdefghijklmnopqrstuvwxyz0123456789+.-") == "" && scheme != "http" && scheme != "https" {
			return "a link to " + dest
		}
	}
	return ""
}

// TestD23CommonMarkOracle: goldmark, an independent CommonMark renderer
// run outside our module (testdata/ui/oracle/gen.sh), rendered the
// corpus's texts and 2,400 seeded compositions; in every text the check
// accepts it finds no image, no raw HTML and no link other than http,
// https or relative. With D23_TEXTS set, the test writes the texts there
// for gen.sh instead.
func TestD23CommonMarkOracle(t *testing.T) {
	var texts []string
	for _, e := range d23Corpus(t) {
		if e.Text != "" {
			texts = append(texts, e.Text)
		}
	}
	texts = append(texts, d23Compositions(2400)...)
	if path := os.Getenv("D23_TEXTS"); path != "" {
		var b strings.Builder
		for _, text := range texts {
			q, _ := json.Marshal(text)
			b.Write(append(q, '\n'))
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(filepath.Join("testdata", "ui", "rendered.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("%d renderings for %d texts: run testdata/ui/oracle/gen.sh", len(lines), len(texts))
	}
	accepted := 0
	for i, line := range lines {
		var r struct{ Text, HTML string }
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Text != texts[i] {
			t.Fatalf("rendering %d is of %q, want %q (%v): run testdata/ui/oracle/gen.sh", i, r.Text, texts[i], err)
		}
		if _, err := extension.DecodeSurface(extension.SurfaceCard, json.RawMessage(`{"markdown":`+strconv.Quote(r.Text)+`}`)); err != nil {
			continue
		}
		accepted++
		if found := d23Oracle(r.HTML); found != "" {
			t.Errorf("accepted %q, which renders %s: %s", r.Text, found, r.HTML)
		}
	}
	t.Logf("accepted %d of %d", accepted, len(texts))
	if accepted < 500 {
		t.Fatalf("the check accepted %d of %d texts: too few for the oracle to judge", accepted, len(texts))
	}
}
