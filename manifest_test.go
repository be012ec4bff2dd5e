package extension

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
)

// starterManifest is the manifest of the upstream SDK starter's shape
// (PROTOCOL.md §3.1).
const starterManifest = `{"apiVersion":"reasonix.io/plugin/v1","name":"starter-extension","version":"0.1.0","contributes":{},
 "runtime":{"command":"${REASONIX_PLUGIN_ROOT}/bin/starter-extension.exe","args":[],"env":{},"required":false,
            "priority":0,"intercepts":["input.receive"],"replaces":[],"capabilities":["interceptors"]}}`

// v1 wraps a runtime block's members into a v1 manifest.
func v1(runtimeMembers string) string {
	return `{"apiVersion":"reasonix.io/plugin/v1","name":"p","runtime":{"command":"/opt/p/bin/p"` + runtimeMembers + `}}`
}

// wantManifestError checks that err is a *ManifestError for field whose
// message contains msg.
func wantManifestError(t *testing.T, err error, field, msg string) {
	t.Helper()
	var me *ManifestError
	if !errors.As(err, &me) {
		t.Fatalf("err = %v (%T), want *ManifestError", err, err)
	}
	if me.Field != field {
		t.Errorf("Field = %q, want %q (err: %v)", me.Field, field, err)
	}
	if !strings.Contains(me.Msg, msg) {
		t.Errorf("Msg = %q, want it to contain %q", me.Msg, msg)
	}
}

func TestParseManifestD8StarterManifest(t *testing.T) {
	fixture, err := os.ReadFile(filepath.Join("sdk", "examples", "starter", ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(fixture)) != starterManifest {
		t.Fatalf("testdata starter manifest drifted from the upstream starter shape")
	}
	m, err := ParseManifest([]byte(starterManifest))
	if err != nil {
		t.Fatal(err)
	}
	want := &Manifest{
		APIVersion:  manifestAPIVersion,
		Name:        "starter-extension",
		Version:     "0.1.0",
		Contributes: json.RawMessage(`{}`),
		Runtime: &RuntimeSpec{
			Command:      "${REASONIX_PLUGIN_ROOT}/bin/starter-extension.exe",
			Args:         []string{},
			Env:          map[string]string{},
			Intercepts:   []Point{InputReceive},
			Replaces:     []string{},
			Capabilities: []string{"interceptors"},
		},
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("got  %+v\nwant %+v", m, want)
		t.Errorf("runtime got %+v\nwant %+v", m.Runtime, want.Runtime)
	}
}

func TestParseManifestD3RejectsUnknownAndCaseVariantFields(t *testing.T) {
	tests := []struct {
		name, doc, field, msg string
	}{
		{"root", `{"apiVersion":"reasonix.io/plugin/v1","name":"p","homepages":"x"}`, "homepages", "unknown field"},
		{"root case variant", `{"apiVersion":"reasonix.io/plugin/v1","Name":"p"}`, "Name", `did you mean "name"?`},
		{"runtime typo", v1(`,"timeoutMilis":5`), "runtime.timeoutMilis", "unknown field"},
		{"runtime case variant", `{"apiVersion":"reasonix.io/plugin/v1","name":"p","runtime":{"Command":"/x"}}`, "runtime.Command", `did you mean "command"?`},
		{"runtime case variant beside the real one", v1(`,"Command":"/bin/sh"`), "runtime.Command", `did you mean "command"?`},
		{"runtime unicode fold", v1(`,"ﬁeld":1`), "runtime.ﬁeld", "unknown field"},
		{"escaped name is the same name", v1(`,"\u0043ommand":"/bin/sh"`), "runtime.Command", `did you mean "command"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseManifest([]byte(tt.doc))
			if m != nil {
				t.Errorf("got a manifest, want none")
			}
			wantManifestError(t, err, tt.field, tt.msg)
		})
	}
}

func TestParseManifestD3RejectsDuplicateMembers(t *testing.T) {
	tests := []struct {
		name, doc, field string
	}{
		{"root", `{"apiVersion":"reasonix.io/plugin/v1","name":"p","name":"q"}`, "name"},
		{"runtime", v1(`,"command":"/bin/sh"`), "runtime.command"},
		{"escaped duplicate", v1(`,"comm\u0061nd":"/bin/sh"`), "runtime.command"},
		{"env key", v1(`,"env":{"A":"1","A":"2"}`), `runtime.env["A"]`},
		{"inside contributes", `{"apiVersion":"reasonix.io/plugin/v1","name":"p","contributes":{"mcpServers":{"a":{"url":"x","url":"y"}}}}`, `contributes.mcpServers["a"].url`},
		{"inside a path object", `{"apiVersion":"reasonix.io/plugin/v1","name":"p","contributes":{"skills":[{"path":"a","path":"b"}]}}`, "contributes.skills[0].path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseManifest([]byte(tt.doc))
			wantManifestError(t, err, tt.field, "duplicate member")
		})
	}
}

func TestParseManifestD15PriorityBounds(t *testing.T) {
	tests := []struct {
		raw  string
		want int
		msg  string // "" when accepted
	}{
		{"-1000", -1000, ""},
		{"1000", 1000, ""},
		{"0", 0, ""},
		{"-7", -7, ""},
		{"-1001", 0, "out of range; use -1000..1000"},
		{"1001", 0, "out of range; use -1000..1000"},
		{"99999999999999999999", 0, "out of range"},
		{"1.5", 0, "not an integer"},
		{"1e2", 0, "not an integer"},
		{`"5"`, 0, "must be an integer, not a string"},
		{"null", 0, "null is not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			m, err := ParseManifest([]byte(v1(`,"priority":` + tt.raw)))
			if tt.msg != "" {
				wantManifestError(t, err, "runtime.priority", tt.msg)
				return
			}
			if err != nil {
				t.Fatalf("err = %v, want nil", err)
			}
			if m.Runtime.Priority != tt.want {
				t.Errorf("Priority = %d, want %d", m.Runtime.Priority, tt.want)
			}
		})
	}
}

func TestParseManifestD9RuntimeFieldRules(t *testing.T) {
	tests := []struct {
		name, members, field, msg string
	}{
		{"invalid intercept", `,"intercepts":["input.recieve"]`, "runtime.intercepts[0]", `"input.recieve" is not a hook point`},
		{"intercept wrong case", `,"intercepts":["tool.before","Tool.After"]`, "runtime.intercepts[1]", "is not a hook point"},
		{"intercept listed twice", `,"intercepts":["tool.before","tool.before"]`, "runtime.intercepts[1]", "listed twice"},
		{"intercept not a string", `,"intercepts":[1]`, "runtime.intercepts[0]", "must be a string, not a number"},
		{"intercepts not an array", `,"intercepts":"tool.before"`, "runtime.intercepts", "must be an array of strings"},
		{"invalid slot", `,"replaces":["system-prompt"]`, "runtime.replaces[0]", "is not a slot"},
		{"invalid capability", `,"capabilities":["interceptors","network"]`, "runtime.capabilities[1]", `"network" is not a capability`},
		{"negative timeout", `,"timeoutMillis":-1`, "runtime.timeoutMillis", "negative"},
		{"fractional timeout", `,"timeoutMillis":1.0`, "runtime.timeoutMillis", "not an integer"},
		{"blank arg", `,"args":["--ok","  "]`, "runtime.args[1]", "blank argument"},
		{"empty arg", `,"args":[""]`, "runtime.args[0]", "blank argument"},
		{"required not bool", `,"required":"yes"`, "runtime.required", "must be true or false"},
		{"blank env key", `,"env":{" ":"x"}`, `runtime.env[" "]`, "not a usable variable name"},
		{"env key with =", `,"env":{"A=B":"x"}`, `runtime.env["A=B"]`, "not a usable variable name"},
		{"env value not string", `,"env":{"A":1}`, `runtime.env["A"]`, "must be a string"},
		{"env not object", `,"env":["A=1"]`, "runtime.env", "must be an object, not an array"},
		{"bad provider ref", `,"capabilities":["providers"],"providers":["plugin/p/only-three"]`, "runtime.providers[0]", "not a provider ref"},
		{"providers without capability", `,"providers":["plugin/p/acme/m1"]`, "runtime.providers", `without the "providers" capability`},
		{"ui actions without capability", `,"uiActions":["go"]`, "runtime.uiActions", `without the "ui" capability`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseManifest([]byte(v1(tt.members)))
			wantManifestError(t, err, tt.field, tt.msg)
		})
	}
}

func TestParseManifestD8CommandRules(t *testing.T) {
	tests := []struct {
		name, doc, msg string
	}{
		{"missing", `{"apiVersion":"reasonix.io/plugin/v1","name":"p","runtime":{}}`, "missing"},
		{"blank", `{"apiVersion":"reasonix.io/plugin/v1","name":"p","runtime":{"command":" \t"}}`, "blank"},
		{"null", `{"apiVersion":"reasonix.io/plugin/v1","name":"p","runtime":{"command":null}}`, "null is not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseManifest([]byte(tt.doc))
			wantManifestError(t, err, "runtime.command", tt.msg)
		})
	}
}

func TestParseManifestD9UIActionIDs(t *testing.T) {
	tests := []struct {
		id string
		ok bool
	}{
		{"ok-action1", true},
		{"a", true},
		{"9lives", true},
		{"", false},
		{"Upper", false},
		{"has space", false},
		{"under_score", false},
		{"slash/", false},
		{"-leading", false},
		{"ünicode", false},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			if got := validActionID(tt.id); got != tt.ok {
				t.Errorf("validActionID(%q) = %v, want %v", tt.id, got, tt.ok)
			}
			quoted, _ := json.Marshal(tt.id)
			_, err := ParseManifest([]byte(v1(`,"capabilities":["ui"],"uiActions":[` + string(quoted) + `]`)))
			if tt.ok && err != nil {
				t.Errorf("ParseManifest: %v, want nil", err)
			}
			if !tt.ok {
				wantManifestError(t, err, "runtime.uiActions[0]", "is not an action ID")
			}
		})
	}
}

func TestValidSlotD17(t *testing.T) {
	tests := []struct {
		slot string
		ok   bool
	}{
		{"system_prompt", true},
		{"context", true},
		{"provider_request", true},
		{"provider_response", true},
		{"compaction", true},
		{"session_policy", true},
		{"permission", true},
		{"frontend_events", true},
		{"tool:read_file", true},
		{"tool:mcp.server/tool", true},
		{"provider:openai/gpt-4o", true},
		{"provider:plugin/acme/local/llama-3", true},
		{"provider:plugin/x/plugin/m", true},
		{"", false},
		{"System_Prompt", false},
		{"system-prompt", false},
		{"tool", false},
		{"tool:", false},
		{"tool:read file", false},
		{"tool:read\tfile", false},
		{"tool:read\nfile", false},
		{"provider:", false},
		{"provider:openai", false},
		{"provider:openai/", false},
		{"provider:/gpt", false},
		{"provider:a/b/c", false},
		{"provider:plugin/acme/local", false},
		{"provider:plugin//local/m", false},
		{"provider:plugin/ac me/local/m", false},
		{"provider:plugin/acme/local/m/extra", false},
		{"provider:notplugin/acme/local/m", false},
		{"tools:x", false},
	}
	for _, tt := range tests {
		t.Run(tt.slot, func(t *testing.T) {
			if got := validSlot(tt.slot); got != tt.ok {
				t.Errorf("validSlot(%q) = %v, want %v", tt.slot, got, tt.ok)
			}
			quoted, _ := json.Marshal(tt.slot)
			m, err := ParseManifest([]byte(v1(`,"replaces":[` + string(quoted) + `]`)))
			if tt.ok {
				if err != nil {
					t.Fatalf("ParseManifest: %v, want nil", err)
				}
				if got := m.Runtime.Replaces; len(got) != 1 || got[0] != tt.slot {
					t.Errorf("Replaces = %q, want [%q]", got, tt.slot)
				}
				return
			}
			wantManifestError(t, err, "runtime.replaces[0]", "is not a slot")
		})
	}
}

func TestParseManifestD9EveryPointAndCapability(t *testing.T) {
	var points []string
	for _, p := range Points() {
		points = append(points, string(p))
	}
	caps := []string{"interceptors", "strategies", "providers", "ui"}
	doc, _ := json.Marshal(map[string]any{
		"apiVersion": manifestAPIVersion,
		"name":       "p",
		"runtime": map[string]any{
			"command": "/opt/p", "intercepts": points, "capabilities": caps,
			"providers": []string{"plugin/p/acme/m1"}, "uiActions": []string{"go"},
			"timeoutMillis": 0, "required": true,
		},
	})
	m, err := ParseManifest(doc)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(m.Runtime.Intercepts); got != 17 {
		t.Errorf("len(Intercepts) = %d, want 17", got)
	}
	if !reflect.DeepEqual(m.Runtime.Capabilities, caps) {
		t.Errorf("Capabilities = %q, want %q", m.Runtime.Capabilities, caps)
	}
	if !m.Runtime.Required {
		t.Errorf("Required = false, want true")
	}
}

func TestParseManifestD8APIVersion(t *testing.T) {
	tests := []struct {
		api string
		msg string // "" when accepted
	}{
		{`"reasonix.io/plugin/v1"`, ""},
		{`"reasonix.io/plugin/v1.1"`, ""},
		{`"reasonix.io/plugin/v1.20"`, ""},
		{`"reasonix.io/plugin/v2"`, `unsupported major version "2"`},
		{`"reasonix.io/plugin/v0"`, `unsupported major version "0"`},
		{`"reasonix.io/plugin/v01"`, `unsupported major version "01"`},
		{`"reasonix.io/plugin/V1"`, "is not a plugin API version"},
		{`"reasonix.io/plugin/v1."`, "is not a plugin API version"},
		{`"reasonix.io/plugin/v1.x"`, "is not a plugin API version"},
		{`"reasonix.io/plugin/v1beta"`, "is not a plugin API version"},
		{`""`, "is not a plugin API version"},
		{`1`, "must be a string, not a number"},
		{`null`, "null is not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.api, func(t *testing.T) {
			m, err := ParseManifest([]byte(`{"apiVersion":` + tt.api + `,"name":"p","runtime":{"command":"/x"}}`))
			if tt.msg != "" {
				wantManifestError(t, err, "apiVersion", tt.msg)
				return
			}
			if err != nil {
				t.Fatalf("err = %v, want nil", err)
			}
			if m.Runtime == nil || m.Runtime.Command != "/x" {
				t.Errorf("Runtime = %+v, want the runtime block", m.Runtime)
			}
		})
	}
}

func TestParseManifestD8LegacyFormat(t *testing.T) {
	t.Run("lenient", func(t *testing.T) {
		m, err := ParseManifest([]byte(`{"name":"old","version":"2.0","description":"d","homepage":1,"contributes":{"x":1},"engines":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		want := &Manifest{Name: "old", Version: "2.0", Description: "d", Contributes: json.RawMessage(`{"x":1}`)}
		if !reflect.DeepEqual(m, want) {
			t.Errorf("got %+v, want %+v", m, want)
		}
	})
	t.Run("runtime needs apiVersion", func(t *testing.T) {
		_, err := ParseManifest([]byte(`{"name":"old","runtime":{"command":"/x"}}`))
		wantManifestError(t, err, "runtime", `needs "apiVersion": "reasonix.io/plugin/v1"`)
	})
	t.Run("case-variant apiVersion", func(t *testing.T) {
		_, err := ParseManifest([]byte(`{"apiversion":"reasonix.io/plugin/v1","name":"old","runtime":{"command":"/x"}}`))
		wantManifestError(t, err, "apiversion", `did you mean "apiVersion"?`)
	})
	t.Run("case-variant runtime", func(t *testing.T) {
		_, err := ParseManifest([]byte(`{"name":"old","Runtime":{"command":"/x"}}`))
		wantManifestError(t, err, "Runtime", `did you mean "runtime"?`)
	})
	t.Run("name required", func(t *testing.T) {
		_, err := ParseManifest([]byte(`{"version":"1"}`))
		wantManifestError(t, err, "name", "missing or blank")
	})
	t.Run("duplicate member", func(t *testing.T) {
		_, err := ParseManifest([]byte(`{"name":"a","name":"b"}`))
		wantManifestError(t, err, "name", "duplicate member")
	})
}

func TestParseManifestRejectsMalformedDocuments(t *testing.T) {
	tests := []struct {
		name, doc, field, msg string
	}{
		{"empty", ``, "", "one JSON object"},
		{"array", `[]`, "", "one JSON object"},
		{"garbage", `{"name":`, "", "not valid JSON"},
		{"trailing comma, with its line and column", "{\n  \"name\": \"p\",\n}", "", "not valid JSON: expected a string (line 3, column 1)"},
		{"trailing data", `{"name":"p"} {}`, "", "trailing data"},
		{"invalid UTF-8", "{\"name\":\"\xff\"}", "", "invalid UTF-8"},
		{"v1 without name", `{"apiVersion":"reasonix.io/plugin/v1"}`, "name", "missing or blank"},
		{"v1 blank name", `{"apiVersion":"reasonix.io/plugin/v1","name":"  "}`, "name", "missing or blank"},
		{"v1 name not string", `{"apiVersion":"reasonix.io/plugin/v1","name":7}`, "name", "must be a string"},
		{"runtime null", `{"apiVersion":"reasonix.io/plugin/v1","name":"p","runtime":null}`, "runtime", "null is not allowed"},
		{"runtime array", `{"apiVersion":"reasonix.io/plugin/v1","name":"p","runtime":[]}`, "runtime", "must be an object, not an array"},
		{"contributes array", `{"apiVersion":"reasonix.io/plugin/v1","name":"p","contributes":[]}`, "contributes", "must be an object"},
		{"too large", `{"name":"` + strings.Repeat("x", maxManifestBytes) + `"}`, "", "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseManifest([]byte(tt.doc))
			wantManifestError(t, err, tt.field, tt.msg)
		})
	}
}

func TestParseManifestNeverPanicsOnPrefixes(t *testing.T) {
	doc := []byte(`{"apiVersion":"reasonix.io/plugin/v1.1","name":"p","version":"1","description":"d","contributes":{"skills":["a",{"path":"b"}],"hooks":{"E":[{"command":"c","async":true}]}},` +
		`"runtime":{"command":"/x","args":["a"],"env":{"K":"v"},"required":true,"priority":-3,"intercepts":["tool.before"],` +
		`"replaces":["tool:x"],"capabilities":["ui","providers"],"timeoutMillis":9,"providers":["plugin/p/a/b"],"uiActions":["go"]}}`)
	if _, err := ParseManifest(doc); err != nil {
		t.Fatalf("full document: %v", err)
	}
	for i := range doc {
		if _, err := ParseManifest(doc[:i]); err == nil {
			t.Fatalf("prefix of %d bytes parsed without error", i)
		}
	}
}

func TestRuntimeExpectationD9(t *testing.T) {
	tests := []struct {
		name, members, want string
	}{
		{"only the declared lists", `,"intercepts":["input.receive"],"replaces":[],"capabilities":["interceptors"]`,
			`{"intercepts":["input.receive"],"capabilities":["interceptors"]}`},
		{"providers and actions when listed", `,"replaces":["system_prompt"],"capabilities":["providers","ui"],"providers":["plugin/p/a/m"],"uiActions":["go","stop"]`,
			`{"replaces":["system_prompt"],"providers":["plugin/p/a/m"],"uiActions":["go","stop"],"capabilities":["providers","ui"]}`},
		{"nothing", ``, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseManifest([]byte(v1(tt.members)))
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(m.Runtime.expectation())
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Expectation = %s, want %s", got, tt.want)
			}
		})
	}
	var nilSpec *RuntimeSpec
	if got := nilSpec.expectation(); !reflect.DeepEqual(got, ManifestExpectation{}) {
		t.Errorf("nil RuntimeSpec Expectation = %+v, want zero", got)
	}
}

func TestLoadManifestErrorNamesFileAndField(t *testing.T) {
	dir := t.TempDir()
	_, err := loadManifest(dir)
	var me *ManifestError
	if !errors.As(err, &me) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing manifest: err = %v, want *ManifestError wrapping fs.ErrNotExist", err)
	}
	path := filepath.Join(dir, ManifestFile)
	if err := os.WriteFile(path, []byte(v1(`,"timeoutMilis":5`)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = loadManifest(dir)
	wantManifestError(t, err, "runtime.timeoutMilis", "unknown field")
	if want := path + ": runtime.timeoutMilis: unknown field"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Error() = %q, want prefix %q", err, want)
	}
}

// FuzzParseManifest: a manifest is untrusted input. Parsing never panics,
// and an accepted manifest satisfies every rule the parser promises.
func FuzzParseManifest(f *testing.F) {
	for _, dir := range []string{filepath.Join("sdk", "examples", "starter"), filepath.Join("sdk", "examples", "fullsidecar"), filepath.Join("testdata", "manifests", "full")} {
		data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"name":"legacy","contributes":{"a":1}}`))
	f.Add([]byte(`{"apiVersion":"reasonix.io/plugin/v1","name":"p","skills":"a","contributes":{"agents":[{"path":"b"}],"hooks":{"E":[{"timeout":1}]}}}`))
	f.Add([]byte("\xff\xfe{\x00\"\x00n\x00a\x00m\x00e\x00\"\x00:\x00\"\x00p\x00\"\x00}\x00"))
	f.Add([]byte(v1(`,"replaces":["tool:x","provider:a/b"],"capabilities":["ui"],"uiActions":["go"],"env":{"A":"b"}`)))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			var me *ManifestError
			if m != nil || !errors.As(err, &me) {
				t.Fatalf("got %v, %v (%T); want nil and a *ManifestError", m, err, err)
			}
			return
		}
		if strings.TrimSpace(m.Name) == "" {
			t.Fatalf("accepted a blank name")
		}
		r := m.Runtime
		if r == nil {
			return
		}
		if m.APIVersion == "" {
			t.Fatalf("a legacy manifest has a runtime")
		}
		if strings.TrimSpace(r.Command) == "" || r.Priority < -1000 || r.Priority > 1000 || r.TimeoutMillis < 0 {
			t.Fatalf("accepted runtime %+v", r)
		}
		for _, p := range r.Intercepts {
			if !p.Valid() {
				t.Fatalf("accepted intercept %q", p)
			}
		}
		for _, s := range r.Replaces {
			if !validSlot(s) {
				t.Fatalf("accepted slot %q", s)
			}
		}
		for _, id := range r.UIActions {
			if !validActionID(id) {
				t.Fatalf("accepted action %q", id)
			}
		}
		for _, a := range r.Args {
			if strings.TrimSpace(a) == "" || controlChar(a) >= 0 {
				t.Fatalf("accepted arg %q", a)
			}
		}
		for _, text := range append([]string{m.Name, m.Version, m.Description, strings.TrimSpace(r.Command)}, r.Providers...) {
			if controlChar(text) >= 0 {
				t.Fatalf("accepted control characters in %q", text)
			}
		}
		for k := range r.Env {
			if controlChar(k) >= 0 {
				t.Fatalf("accepted env key %q", k)
			}
		}
		for _, ref := range r.Providers {
			if !validPluginProviderRef(ref) {
				t.Fatalf("accepted provider %q", ref)
			}
		}
	})
}

func TestParseManifestD8RejectsControlCharacters(t *testing.T) {
	const spoof = `X\n  intercepts:     none\u001b[8m`
	tests := []struct {
		name, doc, field string
	}{
		{"name newline", `{"apiVersion":"reasonix.io/plugin/v1","name":"p\nq"}`, "name"},
		{"name DEL", `{"apiVersion":"reasonix.io/plugin/v1","name":"p\u007f"}`, "name"},
		{"version ESC", `{"apiVersion":"reasonix.io/plugin/v1","name":"p","version":"1\u001b[8m"}`, "version"},
		{"description C1 CSI", `{"apiVersion":"reasonix.io/plugin/v1","name":"p","description":"d\u009b2J"}`, "description"},
		{"legacy name ESC", `{"name":"old\u001b[2K"}`, "name"},
		{"legacy version newline", `{"name":"old","version":"1\nsets env: none"}`, "version"},
		{"command NUL", `{"apiVersion":"reasonix.io/plugin/v1","name":"p","runtime":{"command":"/opt/p\u0000/x"}}`, "runtime.command"},
		{"command ESC", `{"apiVersion":"reasonix.io/plugin/v1","name":"p","runtime":{"command":"/opt/p\u001b[8m"}}`, "runtime.command"},
		{"command inner newline", `{"apiVersion":"reasonix.io/plugin/v1","name":"p","runtime":{"command":"/opt/p\n/x"}}`, "runtime.command"},
		{"arg NUL", v1(`,"args":["a\u0000b"]`), "runtime.args[0]"},
		{"arg newline", v1(`,"args":["ok","` + spoof + `"]`), "runtime.args[1]"},
		{"env key spoofing rows", v1(`,"env":{"` + spoof + `":"v"}`), `runtime.env["X\n  intercepts:     none\x1b[8m"]`},
		{"env key C1", v1(`,"env":{"A\u0085":"v"}`), `runtime.env["A\u0085"]`},
		{"provider ref ESC", v1(`,"capabilities":["providers"],"providers":["plugin/p/acme/m\u001b[8m"]`), "runtime.providers[0]"},
		{"tool slot ESC", v1(`,"replaces":["tool:x\u001b[8m"]`), "runtime.replaces[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseManifest([]byte(tt.doc))
			wantManifestError(t, err, tt.field, "control character")
			if msg := err.Error(); controlChar(msg) >= 0 {
				t.Errorf("the error itself carries a control character: %q", msg)
			}
		})
	}
	t.Run("unknown member name is quoted in the error", func(t *testing.T) {
		_, err := ParseManifest([]byte(v1(`,"x\u001b[8m":1`)))
		if err == nil || controlChar(err.Error()) >= 0 {
			t.Errorf("err = %q, want an error without control characters", err)
		}
	})
	t.Run("env values are never shown and may hold newlines", func(t *testing.T) {
		m, err := ParseManifest([]byte(v1(`,"env":{"PEM":"line1\nline2\t\u001b"}`)))
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Runtime.Env["PEM"]; got != "line1\nline2\t\x1b" {
			t.Errorf("Env[PEM] = %q", got)
		}
	})
	t.Run("the command is trimmed before the check", func(t *testing.T) {
		if _, err := ParseManifest([]byte(`{"apiVersion":"reasonix.io/plugin/v1","name":"p","runtime":{"command":" \t/opt/p\n"}}`)); err != nil {
			t.Errorf("err = %v, want the surrounding whitespace trimmed away", err)
		}
	})
}

func TestParseManifestD8ArgsKeepDuplicatesVerbatim(t *testing.T) {
	m, err := ParseManifest([]byte(v1(`,"args":["-v","-v","--flag","x","--flag","x"]`)))
	if err != nil {
		t.Fatalf("err = %v; PROTOCOL.md §3.1 passes args verbatim, repeats included", err)
	}
	if want := []string{"-v", "-v", "--flag", "x", "--flag", "x"}; !reflect.DeepEqual(m.Runtime.Args, want) {
		t.Errorf("Args = %q, want %q", m.Runtime.Args, want)
	}
	// The other lists stay sets.
	for _, members := range []string{
		`,"capabilities":["ui","ui"]`,
		`,"replaces":["context","context"]`,
		`,"capabilities":["providers"],"providers":["plugin/p/a/m","plugin/p/a/m"]`,
		`,"capabilities":["ui"],"uiActions":["go","go"]`,
	} {
		_, err := ParseManifest([]byte(v1(members)))
		var me *ManifestError
		if !errors.As(err, &me) || !strings.Contains(me.Msg, "listed twice") {
			t.Errorf("%s: err = %v, want \"listed twice\"", members, err)
		}
	}
}

func TestParseManifestD9ProvidersArePluginRefs(t *testing.T) {
	for _, ref := range []string{"openai/gpt-4o", "a/b", "plugin/p/acme", "notplugin/p/acme/m", "plugin//acme/m"} {
		t.Run(ref, func(t *testing.T) {
			_, err := ParseManifest([]byte(v1(`,"capabilities":["providers"],"providers":[` + jsonString(ref) + `]`)))
			wantManifestError(t, err, "runtime.providers[0]", "plugin/<pluginID>/<provider>/<model>")
		})
	}
	m, err := ParseManifest([]byte(v1(`,"capabilities":["providers"],"providers":["plugin/p/acme/m1","plugin/other-id/x/y"]`)))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"plugin/p/acme/m1", "plugin/other-id/x/y"}; !reflect.DeepEqual(m.Runtime.Providers, want) {
		t.Errorf("Providers = %q, want %q", m.Runtime.Providers, want)
	}
}

func TestParseManifestD8RejectsEnvKeysDifferingOnlyByCase(t *testing.T) {
	_, err := ParseManifest([]byte(v1(`,"env":{"Path":"a","B":"1","PATH":"b"}`)))
	wantManifestError(t, err, `runtime.env["Path"]`, `differs only by case from "PATH"`)
	m, err := ParseManifest([]byte(v1(`,"env":{"A_B":"1","A_C":"2"}`)))
	if err != nil || len(m.Runtime.Env) != 2 {
		t.Errorf("distinct keys: %v, %v", m, err)
	}
}

// updateGolden rewrites the golden files under testdata/ instead of
// comparing against them: go test -run Golden -update.
var updateGolden = flag.Bool("update", false, "rewrite golden files under testdata/")

// resolveLaunch runs the launch gate for the installed plugin id, the way
// a host resolves one plugin: a plugin missing from
// <home>/plugin-packages.json is refused with errNotInstalled, an
// unreadable record with its [*ManifestError], both as a [*StartError].
func resolveLaunch(home, id, workspaceRoot string) (*launchSpec, error) {
	pkgs, err := LoadPackages(home)
	if err != nil {
		return nil, &StartError{Plugin: id, Stage: "launch", Err: err}
	}
	e := findEntry(pkgs, id)
	if e == nil {
		// D8: only an installed plugin launches.
		return nil, &StartError{Plugin: id, Stage: "launch", Err: fmt.Errorf("%w in %s; install it first", errNotInstalled, filepath.Join(home, packagesFile))}
	}
	return launchGate(home, e, workspaceRoot)
}

// installRuntime writes a plugin whose runtime runs command, installs it
// into home (linked) as name and returns its directory.
func installRuntime(t *testing.T, home, name, command string, opts InstallOptions) string {
	t.Helper()
	dir := writePlugin(t, filepath.Join(t.TempDir(), name), runtimeManifest(name, command))
	opts.Link = true
	if _, err := Install(home, dir, opts); err != nil {
		t.Fatal(err)
	}
	return dir
}

// refuseCommands installs one plugin per command, each in its own home,
// and checks that the launch gate refuses every one with sentinel.
func refuseCommands(t *testing.T, name string, sentinel error, commands ...string) {
	t.Helper()
	for _, command := range commands {
		t.Run(command, func(t *testing.T) {
			home := t.TempDir()
			installRuntime(t, home, name, command, InstallOptions{})
			spec, err := resolveLaunch(home, name, "")
			wantRefusal(t, spec, err, name, sentinel)
		})
	}
}

// wantRefusal checks a launch-gate refusal: no spec, a *StartError for
// plugin wrapping sentinel, and a message naming the plugin.
func wantRefusal(t *testing.T, spec *launchSpec, err error, plugin string, sentinel error) {
	t.Helper()
	if spec != nil {
		t.Errorf("spec = %+v, want nil: a refused plugin must not reach the process layer", spec)
	}
	var le *StartError
	if !errors.As(err, &le) {
		t.Fatalf("err = %v (%T), want *StartError", err, err)
	}
	if le.Plugin != plugin {
		t.Errorf("StartError.Plugin = %q, want %q", le.Plugin, plugin)
	}
	if !errors.Is(err, sentinel) {
		t.Errorf("err = %v, want errors.Is(err, %v)", err, sentinel)
	}
	if msg := err.Error(); !strings.Contains(msg, `"`+plugin+`"`) || !strings.Contains(msg, sentinel.Error()) {
		t.Errorf("Error() = %q, want it to name %q and the cause %q", msg, plugin, sentinel)
	}
}

func TestLaunchGateD8RefusesUninstalledPlugin(t *testing.T) {
	home := t.TempDir()
	spec, err := resolveLaunch(home, "ghost", "")
	wantRefusal(t, spec, err, "ghost", errNotInstalled)

	installRuntime(t, home, "present", "/opt/present", InstallOptions{})
	spec, err = resolveLaunch(home, "ghost", "")
	wantRefusal(t, spec, err, "ghost", errNotInstalled)
}

func TestLaunchGateD8RefusesDisabledPlugin(t *testing.T) {
	home := t.TempDir()
	installRuntime(t, home, "off", "/opt/off", InstallOptions{})
	if err := SetEnabled(home, "off", false); err != nil {
		t.Fatal(err)
	}
	spec, err := resolveLaunch(home, "off", "")
	wantRefusal(t, spec, err, "off", errDisabled)
}

func TestLaunchGateD8RefusesPluginWithoutRuntime(t *testing.T) {
	manifests := map[string]string{
		"v1 without runtime": `{"apiVersion":"reasonix.io/plugin/v1","name":"p","contributes":{"commands":[]}}`,
		"legacy":             `{"name":"p","version":"1.0"}`,
	}
	for name, manifest := range manifests {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			dir := writePlugin(t, filepath.Join(t.TempDir(), "p"), manifest)
			if _, err := Install(home, dir, InstallOptions{}); err != nil {
				t.Fatal(err)
			}
			spec, err := resolveLaunch(home, "p", "")
			wantRefusal(t, spec, err, "p", ErrNoRuntime)
		})
	}
}

func TestLaunchGateD8RefusesRelativeCommand(t *testing.T) {
	refuseCommands(t, "rel", errRelativeCommand, "bin/plugin", "./plugin", "../up/plugin", `bin\plugin.exe`)
}

func TestLaunchGateD8RefusesBareCommand(t *testing.T) {
	refuseCommands(t, "bare", errBareCommand, "node", "python3", " plugin.exe ", "env")
}

func TestLaunchGateD8RefusesShellCommand(t *testing.T) {
	commands := []string{
		"sh", "bash", "/bin/sh", "/bin/bash", "/usr/bin/zsh", "/usr/bin/fish", "/bin/dash", "/bin/ksh",
		"/bin/SH", "/usr/local/bin/Bash", "  /bin/sh  ",
		`C:\Windows\System32\cmd.exe`, `C:\WINDOWS\system32\CMD.EXE`, `C:\Windows\System32\cmd`,
		"/usr/bin/powershell", `C:\Program Files\PowerShell\7\pwsh.exe`, "/opt/microsoft/powershell/7/pwsh",
		"powershell.exe", "/mnt/c/PowerShell.exe",
		"${REASONIX_PLUGIN_ROOT}/bin/bash", "${REASONIX_PLUGIN_ROOT}/../../bin/sh",
	}
	refuseCommands(t, "shell", errShellCommand, commands...)
}

func TestLaunchGateD8RefusesWindowsShellForms(t *testing.T) {
	commands := []string{
		// Windows ignores trailing dots and spaces.
		`C:\Windows\System32\cmd.exe.`, `C:\Windows\System32\cmd.exe . .`, `C:\Windows\System32\cmd.`, "/bin/sh.", "/bin/bash ",
		// .exe and .com are optional, for every shell name.
		`C:\Git\bin\bash.exe`, "/opt/x/sh.exe", `C:\tools\ZSH.EXE`, "/opt/x/dash.com", `C:\Windows\System32\cmd.com`, `C:\x\pwsh.EXE.`,
		// An NTFS data stream names the same file.
		`C:\Windows\System32\cmd.exe::$DATA`, `C:\WindowsPowerShell\v1.0\powershell.exe::$data`,
		// Batch scripts run through cmd.exe, whatever the platform.
		`C:\plugins\run.bat`, "/opt/p/run.cmd", "${REASONIX_PLUGIN_ROOT}/start.BAT", "${REASONIX_PLUGIN_ROOT}/start.Cmd. ",
	}
	refuseCommands(t, "shell", errShellCommand, commands...)
}

func TestLaunchGateD8RefusesCommandLinkedToShell(t *testing.T) {
	shells := t.TempDir()
	for _, name := range []string{"bash", "plugin"} {
		if err := os.WriteFile(filepath.Join(shells, name), []byte("#!binary"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	home := t.TempDir()
	dir := installRuntime(t, home, "linked", "${REASONIX_PLUGIN_ROOT}/bin/run", InstallOptions{})
	// bin/run -> bin/tool -> <shells>/bash: a chain ending at a shell.
	if !symlinkOrReturn(t, "tool", filepath.Join(dir, "bin", "run")) ||
		!symlinkOrReturn(t, filepath.Join(shells, "bash"), filepath.Join(dir, "bin", "tool")) {
		return
	}
	spec, err := resolveLaunch(home, "linked", "")
	wantRefusal(t, spec, err, "linked", errShellCommand)
	if _, err := TrustPlugin(dir, ""); !errors.Is(err, errShellCommand) {
		t.Errorf("TrustPlugin: err = %v, want errShellCommand", err)
	}
	// The same link to a non-shell launches, under the name written.
	if err := os.Remove(filepath.Join(dir, "bin", "tool")); err != nil {
		t.Fatal(err)
	}
	if !symlinkOrReturn(t, filepath.Join(shells, "plugin"), filepath.Join(dir, "bin", "tool")) {
		return
	}
	spec, err = resolveLaunch(home, "linked", "")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "bin", "run"); spec.Command != want {
		t.Errorf("Command = %q, want %q", spec.Command, want)
	}
}

func TestLaunchGateD8AllowsAbsoluteNonShellCommands(t *testing.T) {
	abs := string(filepath.Separator) + filepath.Join("usr", "bin", "env")
	for _, command := range []string{abs, "/bin/bashful", "/opt/sh-tools/plugin", "/opt/x/shell.exe", "/opt/x/bat", "/opt/x/run.sh", "/opt/cmd.d/plugin", "/usr/bin/python3"} {
		t.Run(command, func(t *testing.T) {
			if !filepath.IsAbs(command) {
				t.Logf("%q is not absolute on this platform; checking only that it is not refused as a shell", command)
			}
			home := t.TempDir()
			installRuntime(t, home, "ok", command, InstallOptions{})
			spec, err := resolveLaunch(home, "ok", "")
			if !filepath.IsAbs(command) {
				if errors.Is(err, errShellCommand) {
					t.Errorf("err = %v, want no shell refusal", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v, want a spec", err)
			}
			if spec.Command != command {
				t.Errorf("Command = %q, want %q", spec.Command, command)
			}
		})
	}
}

func TestLaunchGateD8RefusesProjectRuntime(t *testing.T) {
	t.Run("project scope of the earlier record", func(t *testing.T) {
		// The earlier record's scope "project" is migrated as disabled:
		// it never launches, from any workspace.
		home := t.TempDir()
		dir := writePlugin(t, filepath.Join(t.TempDir(), "proj"), runtimeManifest("proj", "/opt/proj"))
		record := `{"version":1,"packages":[{"name":"proj","root":` + strconv.Quote(dir) + `,"enabled":true,"scope":"project","linked":true}]}`
		if err := os.WriteFile(filepath.Join(home, packagesFile), []byte(record), 0o644); err != nil {
			t.Fatal(err)
		}
		spec, err := resolveLaunch(home, "proj", t.TempDir())
		wantRefusal(t, spec, err, "proj", errDisabled)
		spec, err = resolveLaunch(home, "proj", "")
		wantRefusal(t, spec, err, "proj", errDisabled)
	})
	t.Run("root in the workspace's .reasonix", func(t *testing.T) {
		home := t.TempDir()
		ws := t.TempDir()
		dir := writePlugin(t, filepath.Join(ws, ".reasonix", "plugins", "local"), runtimeManifest("local", "${REASONIX_PLUGIN_ROOT}/bin/local"))
		if _, err := Install(home, dir, InstallOptions{Link: true}); err != nil {
			t.Fatal(err)
		}
		spec, err := resolveLaunch(home, "local", ws)
		wantRefusal(t, spec, err, "local", errProjectRuntime)
		// The same package seen from another workspace is user-level.
		if _, err := resolveLaunch(home, "local", t.TempDir()); err != nil {
			t.Errorf("from another workspace: err = %v, want a spec", err)
		}
	})
	t.Run("home in the workspace's .reasonix", func(t *testing.T) {
		ws := t.TempDir()
		home := filepath.Join(ws, ".reasonix")
		src := writePlugin(t, filepath.Join(t.TempDir(), "copied"), runtimeManifest("copied", "${REASONIX_PLUGIN_ROOT}/bin/x"))
		if _, err := Install(home, src, InstallOptions{}); err != nil {
			t.Fatal(err)
		}
		spec, err := resolveLaunch(home, "copied", ws)
		wantRefusal(t, spec, err, "copied", errProjectRuntime)
	})
	t.Run("through a symlinked workspace", func(t *testing.T) {
		home := t.TempDir()
		ws := t.TempDir()
		dir := writePlugin(t, filepath.Join(ws, ".reasonix", "p"), runtimeManifest("p", "/opt/p"))
		alias := filepath.Join(t.TempDir(), "alias")
		if err := os.Symlink(ws, alias); err != nil {
			t.Logf("no symlinks here (%v); the lexical case is covered above", err)
			return
		}
		if _, err := Install(home, dir, InstallOptions{Link: true}); err != nil {
			t.Fatal(err)
		}
		spec, err := resolveLaunch(home, "p", alias)
		wantRefusal(t, spec, err, "p", errProjectRuntime)
	})
}

func TestLaunchGateD8RefusesBrokenManifest(t *testing.T) {
	home := t.TempDir()
	dir := installRuntime(t, home, "broken", "/opt/broken", InstallOptions{})
	// The manifest changes after the install: the gate reads it again.
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), []byte(v1(`,"priority":5000`)), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := resolveLaunch(home, "broken", "")
	var le *StartError
	var me *ManifestError
	if spec != nil || !errors.As(err, &le) || !errors.As(err, &me) || me.Field != "runtime.priority" {
		t.Fatalf("got %+v, %v; want a *StartError wrapping the *ManifestError", spec, err)
	}
	if le.Plugin != "broken" {
		t.Errorf("Plugin = %q, want %q", le.Plugin, "broken")
	}
}

func TestLaunchGateD8ExpandsPluginRootPrefixOnly(t *testing.T) {
	home := t.TempDir()
	tests := []struct {
		name, command string
		want          func(root string) string
		sentinel      error
	}{
		{"prefix", "${REASONIX_PLUGIN_ROOT}/bin/plugin", func(root string) string { return filepath.Join(root, "bin", "plugin") }, nil},
		{"trimmed", " \t${REASONIX_PLUGIN_ROOT}/bin/plugin\n", func(root string) string { return filepath.Join(root, "bin", "plugin") }, nil},
		{"cleaned", "${REASONIX_PLUGIN_ROOT}/bin/../libexec/plugin", func(root string) string { return filepath.Join(root, "libexec", "plugin") }, nil},
		{"not a general expansion", "${HOME}/plugin", nil, errRelativeCommand},
		{"only as a prefix", "bin/${REASONIX_PLUGIN_ROOT}/plugin", nil, errRelativeCommand},
		{"$VAR form is not the prefix", "$REASONIX_PLUGIN_ROOT/bin/plugin", nil, errRelativeCommand},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "expand" + string(rune('a'+i))
			dir := installRuntime(t, home, name, tt.command, InstallOptions{})
			spec, err := resolveLaunch(home, name, "")
			if tt.sentinel != nil {
				wantRefusal(t, spec, err, name, tt.sentinel)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := tt.want(dir); spec.Command != want {
				t.Errorf("Command = %q, want %q", spec.Command, want)
			}
			if spec.Root != dir {
				t.Errorf("Root = %q, want %q", spec.Root, dir)
			}
		})
	}
}

func TestLaunchGateD8PluginIDIsInstalledName(t *testing.T) {
	tests := []struct {
		name        string
		opts        InstallOptions
		wantID      string
		wantVersion string
	}{
		{"manifest name and version", InstallOptions{}, "starter-extension", "0.1.0"},
		{"installed name", InstallOptions{Name: "renamed"}, "renamed", "0.1.0"},
		{"installed version", InstallOptions{Name: "pinned", Version: "9.9.9"}, "pinned", "9.9.9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			if _, err := Install(home, filepath.Join("sdk", "examples", "starter"), tt.opts); err != nil {
				t.Fatal(err)
			}
			spec, err := resolveLaunch(home, tt.wantID, "")
			if err != nil {
				t.Fatal(err)
			}
			if spec.ID != tt.wantID || spec.Version != tt.wantVersion || spec.Manifest.Name != "starter-extension" {
				t.Errorf("ID, Version, manifest name = %q, %q, %q; want %q, %q, %q",
					spec.ID, spec.Version, spec.Manifest.Name, tt.wantID, tt.wantVersion, "starter-extension")
			}
			env := spec.env(nil)
			for _, kv := range []string{"REASONIX_PLUGIN_NAME=" + tt.wantID, "REASONIX_PLUGIN_VERSION=" + tt.wantVersion} {
				if !slices.Contains(env, kv) {
					t.Errorf("Env = %q, want it to hold %q", env, kv)
				}
			}
			if tt.wantID != "starter-extension" {
				if _, err := resolveLaunch(home, "starter-extension", ""); !errors.Is(err, errNotInstalled) {
					t.Errorf("the manifest name resolved too: err = %v, want errNotInstalled", err)
				}
			}
		})
	}
}

func TestLaunchSpecD8EnvLayering(t *testing.T) {
	home := t.TempDir()
	dir := writePlugin(t, filepath.Join(t.TempDir(), "envy"), `{"apiVersion":"reasonix.io/plugin/v1","name":"envy","version":"1.0.0",
		"runtime":{"command":"/opt/envy","env":{"FOO":"manifest","BAR":"1","REASONIX_PLUGIN_NAME":"forged","REASONIX_PLUGIN_ROOT":"/forged","REASONIX_PLUGIN_VERSION":"6.6.6"}}}`)
	if _, err := Install(home, dir, InstallOptions{Link: true, Name: "envy-installed"}); err != nil {
		t.Fatal(err)
	}
	spec, err := resolveLaunch(home, "envy-installed", "")
	if err != nil {
		t.Fatal(err)
	}
	base := []string{"PATH=/usr/bin", "REASONIX_TEST_MARKER=inherited", "FOO=base", "REASONIX_PLUGIN_NAME=from-host", "SECRET_TOKEN=kept-unfiltered"}
	got := spec.env(base)
	want := []string{
		"PATH=/usr/bin",
		"REASONIX_TEST_MARKER=inherited",
		"FOO=manifest",
		"REASONIX_PLUGIN_NAME=envy-installed",
		"SECRET_TOKEN=kept-unfiltered",
		"BAR=1",
		"REASONIX_PLUGIN_ROOT=" + dir,
		"REASONIX_PLUGIN_VERSION=1.0.0",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Env =\n%q\nwant\n%q", got, want)
	}
	if base[2] != "FOO=base" {
		t.Errorf("Env modified its base argument: %q", base)
	}
}

func TestLaunchGateD10StarterManifestInstallsAndResolves(t *testing.T) {
	home := t.TempDir()
	if _, err := Install(home, filepath.Join("sdk", "examples", "starter"), InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	specs, refused := splitGates(home, t.TempDir())
	if len(refused) != 0 || len(specs) != 1 {
		t.Fatalf("LaunchablePlugins = %d specs, refusals %v; want 1, none", len(specs), refused)
	}
	spec := specs[0]
	root, err := filepath.Abs(filepath.Join(home, "plugins", "starter-extension"))
	if err != nil {
		t.Fatal(err)
	}
	if spec.Root != root || !filepath.IsAbs(spec.Root) {
		t.Errorf("Root = %q, want %q", spec.Root, root)
	}
	if want := filepath.Join(root, "bin", "starter-extension.exe"); spec.Command != want {
		t.Errorf("Command = %q, want %q", spec.Command, want)
	}
	if len(spec.Args) != 0 {
		t.Errorf("Args = %q, want none", spec.Args)
	}
	want := ManifestExpectation{Intercepts: []string{"input.receive"}, Capabilities: []string{"interceptors"}}
	if got := spec.Runtime.expectation(); !reflect.DeepEqual(got, want) {
		t.Errorf("Expectation = %+v, want %+v", got, want)
	}
}

func TestLaunchablePluginsD10InstalledOrderAndRefusals(t *testing.T) {
	home := t.TempDir()
	ws := t.TempDir()
	installRuntime(t, home, "zulu", "/opt/zulu", InstallOptions{})
	installRuntime(t, home, "shell", "/bin/sh", InstallOptions{})
	installRuntime(t, home, "off", "/opt/off", InstallOptions{})
	if err := SetEnabled(home, "off", false); err != nil {
		t.Fatal(err)
	}
	plain := writePlugin(t, filepath.Join(t.TempDir(), "plain"), `{"apiVersion":"reasonix.io/plugin/v1","name":"plain"}`)
	if _, err := Install(home, plain, InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	proj := writePlugin(t, filepath.Join(ws, ".reasonix", "plugins", "proj"), runtimeManifest("proj", "/opt/proj"))
	if _, err := Install(home, proj, InstallOptions{Link: true}); err != nil {
		t.Fatal(err)
	}
	required := writePlugin(t, filepath.Join(t.TempDir(), "req"), `{"apiVersion":"reasonix.io/plugin/v1","name":"req","runtime":{"command":"node","required":true}}`)
	if _, err := Install(home, required, InstallOptions{Link: true}); err != nil {
		t.Fatal(err)
	}
	installRuntime(t, home, "alpha", "/opt/alpha", InstallOptions{})

	specs, refused := splitGates(home, ws)
	var ids []string
	for _, s := range specs {
		ids = append(ids, s.ID)
	}
	if want := []string{"alpha", "zulu"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("launchable = %q, want %q (the record's order: by name, D10)", ids, want)
	}
	wantRefused := []struct {
		plugin   string
		sentinel error
		required bool
	}{
		{"proj", errProjectRuntime, false},
		{"req", errBareCommand, true},
		{"shell", errShellCommand, false},
	}
	if len(refused) != len(wantRefused) {
		t.Fatalf("refusals = %v, want %d", refused, len(wantRefused))
	}
	for i, w := range wantRefused {
		var le *StartError
		if !errors.As(refused[i], &le) || le.Plugin != w.plugin || !errors.Is(refused[i], w.sentinel) || le.Required != w.required {
			t.Errorf("refusal %d = %v, want %s refused with %v (required %v)", i, refused[i], w.plugin, w.sentinel, w.required)
		}
	}
}

func TestLaunchablePluginsCorruptRecord(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, packagesFile), []byte(`{"version":1,"packages":[`), 0o644); err != nil {
		t.Fatal(err)
	}
	specs, refused := splitGates(home, "")
	var pe *ManifestError
	if specs != nil || len(refused) != 1 || !errors.As(refused[0], &pe) || !errors.Is(refused[0], errCorruptPackages) {
		t.Errorf("got %v, %v; want no specs and one *ManifestError", specs, refused)
	}
	spec, err := resolveLaunch(home, "any", "")
	if spec != nil || !errors.Is(err, errCorruptPackages) {
		t.Errorf("ResolveLaunch = %v, %v; want nil, errCorruptPackages", spec, err)
	}
}

func TestTrustSummaryGolden(t *testing.T) {
	tests := []struct {
		name    string // golden file name under testdata/manifests
		fixture string // plugin directory
		id      string
		opts    InstallOptions
	}{
		{"starter", filepath.Join("sdk", "examples", "starter"), "starter-extension", InstallOptions{}},
		{"full", filepath.Join("testdata", "manifests", "full"), "full", InstallOptions{Name: "full"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			if _, err := Install(home, tt.fixture, tt.opts); err != nil {
				t.Fatal(err)
			}
			spec, err := resolveLaunch(home, tt.id, "")
			if err != nil {
				t.Fatal(err)
			}
			// Text quotes the root, doubling a Windows backslash.
			quotedRoot := strconv.Quote(spec.Root)
			got := strings.ReplaceAll(spec.trust().Text(), quotedRoot[1:len(quotedRoot)-1], "<root>")
			got = filepath.ToSlash(strings.ReplaceAll(got, `\\`, `\`))
			checkGolden(t, filepath.Join("testdata", "manifests", tt.name+".golden"), got)
		})
	}
	t.Run("constructed", func(t *testing.T) {
		s := TrustSummary{
			Plugin: "acme", ManifestName: "acme-tools", Version: "", Root: "/home/u/.reasonix/plugins/acme",
			Command: "/home/u/.reasonix/plugins/acme/bin/acme", Args: []string{"--listen", "with space", ""},
			EnvKeys: []string{"ACME_KEY", "ACME_MODE"}, Priority: 1000, Slots: []string{"provider:plugin/acme/local/m1", "tool:search"},
			Capabilities: []string{"providers", "strategies"}, Providers: []string{"plugin/acme/local/m1"},
		}
		checkGolden(t, filepath.Join("testdata", "manifests", "constructed.golden"), s.Text())
	})
	t.Run("linked and clamped", func(t *testing.T) {
		s := TrustSummary{
			Plugin: "dev", Version: "0.0.1-dev", Root: "/src/dev-plugin", Linked: true,
			Command: "/src/dev-plugin/bin/dev", TimeoutMillis: 90000,
			Intercepts: []Point{ToolBefore}, Capabilities: []string{"ui"},
		}
		checkGolden(t, filepath.Join("testdata", "manifests", "linked.golden"), s.Text())
	})
}

func TestTrustSummaryD8TextCannotBeSpoofed(t *testing.T) {
	// What a hostile manifest or record would write if the parser let it
	// (TrustSummary can also be built directly): rows that fake "none",
	// and escapes that hide the real rows or clear the line.
	const fake = "X\n  intercepts:     none\n  capabilities:   none\x1b[8m"
	s := TrustSummary{
		Plugin: "p", ManifestName: "p\x1b[2K", Version: "1.0\r  required:       no", Root: "/r\u009b8m",
		Command: "/r/bin/p\x1b]8;;http://x\x07", Args: []string{fake, "a\x00b"}, EnvKeys: []string{fake, "\x7f"},
		Slots: []string{"tool:" + fake}, Capabilities: []string{"providers", "ui"},
		Providers: []string{"plugin/p/a/" + fake}, UIActions: []string{fake},
	}
	text := s.Text()
	if r := controlChar(strings.ReplaceAll(text, "\n", "")); r >= 0 {
		t.Errorf("Text carries the control character %U:\n%s", r, text)
	}
	plain := TrustSummary{Plugin: "p", ManifestName: "q", Version: "1", Root: "/r", Command: "/r/bin/p", Capabilities: []string{"providers", "ui"}}
	if got, want := strings.Count(text, "\n"), strings.Count(plain.Text(), "\n"); got != want {
		t.Errorf("Text has %d lines, want %d: fields added rows\n%s", got, want, text)
	}
	for _, want := range []string{
		`version "1.0\r  required:       no"`, `"p\x1b[2K"`, `"/r\u009b8m"`, `"/r/bin/p\x1b]8;;http://x\a"`,
		strconv.Quote(fake), `"a\x00b"`, `"\x7f"`, strconv.Quote("tool:" + fake),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("Text lacks %s:\n%s", want, text)
		}
	}
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run Golden -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -run Golden -update rewrites it)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

func TestTrustSummaryStructuredData(t *testing.T) {
	home := t.TempDir()
	if _, err := Install(home, filepath.Join("testdata", "manifests", "full"), InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	spec, err := resolveLaunch(home, "full-extension", "")
	if err != nil {
		t.Fatal(err)
	}
	want := TrustSummary{
		Plugin: "full-extension", ManifestName: "full-extension", Version: "1.2.3", Root: spec.Root,
		Command: filepath.Join(spec.Root, "bin", "full-extension"), Args: []string{"--mode", "full"},
		EnvKeys: []string{"FULL_LOG", "FULL_TOKEN"}, Required: true, Priority: -10, TimeoutMillis: 2500,
		Intercepts:   []Point{InputReceive, ToolBefore, SystemPromptBuild, SessionStart},
		Slots:        []string{"system_prompt"},
		Capabilities: []string{"providers", "ui"},
		UIActions:    []string{"show-status"},
		Portability:  "not loadable by upstream v1 hosts: runtime.uiActions",
	}
	if got := spec.trust(); !reflect.DeepEqual(got, want) {
		t.Errorf("Trust =\n%+v\nwant\n%+v", got, want)
	}
	if text := spec.trust().Text(); strings.Contains(text, "never shown") {
		t.Errorf("the summary shows an env value:\n%s", text)
	}
}

func TestTrustPluginBeforeInstall(t *testing.T) {
	s, err := TrustPlugin(filepath.Join("sdk", "examples", "starter"), "")
	if err != nil {
		t.Fatal(err)
	}
	root, _ := filepath.Abs(filepath.Join("sdk", "examples", "starter"))
	if s.Plugin != "starter-extension" || s.Command != filepath.Join(root, "bin", "starter-extension.exe") {
		t.Errorf("TrustPlugin = %+v, want starter-extension at %s", s, root)
	}
	if !strings.HasPrefix(s.Text(), "FULL TRUST: ") {
		t.Errorf("Text does not open with the FULL TRUST heading:\n%s", s.Text())
	}
	shell := writePlugin(t, filepath.Join(t.TempDir(), "sh"), runtimeManifest("sh-plugin", "/bin/bash"))
	_, err = TrustPlugin(shell, "renamed")
	wantRefusal(t, nil, err, "renamed", errShellCommand)
	plain := writePlugin(t, filepath.Join(t.TempDir(), "plain"), `{"name":"plain"}`)
	_, err = TrustPlugin(plain, "")
	wantRefusal(t, nil, err, "plain", ErrNoRuntime)
}

func TestTrustSummaryD8ShowsLinkedInstall(t *testing.T) {
	home := t.TempDir()
	installRuntime(t, home, "inplace", "/opt/inplace", InstallOptions{})
	src := writePlugin(t, filepath.Join(t.TempDir(), "copied"), runtimeManifest("copied", "/opt/copied"))
	if _, err := Install(home, src, InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	for id, linked := range map[string]bool{"inplace": true, "copied": false} {
		spec, err := resolveLaunch(home, id, "")
		if err != nil {
			t.Fatal(err)
		}
		s := spec.trust()
		if spec.Linked != linked || s.Linked != linked || strings.Contains(s.Text(), "\n  linked:") != linked {
			t.Errorf("%s: spec.Linked %v, summary %v, text:\n%s\nwant linked %v", id, spec.Linked, s.Linked, s.Text(), linked)
		}
	}
}

// TestTrustSummaryD18ShowsTheHostsClamp: the timeout row shows what
// dispatch will apply, the default 60 s clamp or the host's own.
func TestTrustSummaryD18ShowsTheHostsClamp(t *testing.T) {
	cases := []struct {
		asked, clamp int64
		want         string
	}{
		{90000, 0, "60000 ms per call (the manifest asks for 90000 ms; clamped to 60000 ms)"},
		{30000, 0, "30000 ms per call\n"},
		{30000, 20000, "20000 ms per call (the manifest asks for 30000 ms; clamped to 20000 ms)"},
		{0, 20000, "per-point defaults"},
	}
	for _, c := range cases {
		text := TrustSummary{Plugin: "p", TimeoutMillis: c.asked, MaxTimeoutMillis: c.clamp}.Text()
		if !strings.Contains(text, "timeout:        "+c.want) {
			t.Errorf("asked %d, clamp %d: the text has no %q:\n%s", c.asked, c.clamp, c.want, text)
		}
	}
}

// TestLaunchGateD10BrokenRequiredManifestFailsClosed: a manifest that
// broke after the install but still says runtime.required is refused as
// required, so the generation fails rather than skipping the plugin.
func TestLaunchGateD10BrokenRequiredManifestFailsClosed(t *testing.T) {
	cases := []struct {
		name, manifest string
		required       bool
	}{
		{"required", v1(`,"priority":5000,"required":true`), true},
		{"optional", v1(`,"priority":5000`), false},
		{"not JSON", `{"runtime":{"required":true`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			dir := installRuntime(t, home, "broken", "/opt/broken", InstallOptions{})
			if err := os.WriteFile(filepath.Join(dir, ManifestFile), []byte(c.manifest), 0o644); err != nil {
				t.Fatal(err)
			}
			_, refused := splitGates(home, "")
			var le *StartError
			if len(refused) != 1 || !errors.As(refused[0], &le) || le.Required != c.required {
				t.Fatalf("refusals %v, want one *StartError with Required %v", refused, c.required)
			}
		})
	}
}

// splitGates runs launchablePlugins and splits its result into the specs
// that passed and the refusals, in installed order; an unreadable record
// is the only refusal.
func splitGates(home, workspaceRoot string) ([]*launchSpec, []error) {
	gates, err := launchablePlugins(home, workspaceRoot)
	if err != nil {
		return nil, []error{err}
	}
	var specs []*launchSpec
	var refused []error
	for _, g := range gates {
		if g.err != nil {
			refused = append(refused, g.err)
		} else {
			specs = append(specs, g.spec)
		}
	}
	return specs, refused
}

// TestLaunchGateD8RefusesAShellBehindEnv: env runs the program its
// arguments name, so the gate sees through it, its options and their
// values, assignments, --, -S strings and nested envs, to refuse a shell;
// env running anything else stays allowed (stricter than upstream,
// PROTOCOL.md §11).
func TestLaunchGateD8RefusesAShellBehindEnv(t *testing.T) {
	refused := [][]string{
		{"sh", "-c", "exec node server.js"},
		{"-i", "bash"},
		{"-", "zsh"},
		{"-u", "HOME", "sh"},
		{"-uHOME", "sh"},
		{"-iu", "HOME", "dash"},
		{"-C", "/tmp", "ksh"},
		{"--unset", "HOME", "--chdir=/tmp", "fish"},
		{"--ignore-environment", "--unset=HOME", "sh"},
		{"FOO=1", "BAR=2", "--", "bash", "-c", "x"},
		{"-S", "sh -c 'exec x'"},
		{"-Ssh -c x"},
		{"-iS", "FOO=1 sh -c x"},
		{"--split-string=bash -c x"},
		{"--split-string", "-i pwsh"},
		{"env", "-i", "/bin/sh"},
		{"/usr/bin/env", "FOO=1", `C:\Windows\System32\cmd.exe`},
	}
	for _, args := range refused {
		if shell, ok := shellBehindEnv("/usr/bin/env", args); !ok {
			t.Errorf("env %q: not refused, want the shell behind it", args)
		} else if !isShell(shell) {
			t.Errorf("env %q: refused naming %q, not a shell", args, shell)
		}
	}
	allowed := [][]string{
		{"node", "server.js"},
		{"-i", "FOO=1", "/opt/sidecar/bin/run", "sh"}, // sh is the sidecar's argument
		{"-u", "sh", "python3", "main.py"},            // sh is the name -u unsets
		{"-S", "python3 -u main.py"},
		{}, {"-i"}, {"FOO=1"}, {"--"}, {"-S"},
	}
	for _, args := range allowed {
		if shell, ok := shellBehindEnv("/usr/bin/env", args); ok {
			t.Errorf("env %q: refused for %q, want it allowed", args, shell)
		}
	}
	if _, ok := shellBehindEnv("/opt/x/run", []string{"sh"}); ok {
		t.Error("a program that is not env was read as env")
	}

	// Through the gate, with the manifest's args.
	dir := writePlugin(t, filepath.Join(t.TempDir(), "e"), `{"apiVersion":"reasonix.io/plugin/v1","name":"e","version":"1.0.0","runtime":{"command":"/usr/bin/env","args":["-i","PATH=/bin","sh","-c","exec node x.js"]}}`)
	home := t.TempDir()
	if _, err := Install(home, dir, InstallOptions{Link: true}); err != nil {
		t.Fatal(err)
	}
	spec, err := resolveLaunch(home, "e", "")
	wantRefusal(t, spec, err, "e", errShellCommand)
	if !strings.Contains(err.Error(), `"/usr/bin/env" runs "sh"`) {
		t.Errorf("refusal %q, want it to name env and the shell it runs", err)
	}
}

// everyMember is a v1 manifest with every member upstream's v1 reads
// (D31): the root members, the four legacy ones, contributes with its
// seven and all nine runtime members. Each call returns a fresh copy.
func everyMember(t *testing.T) map[string]any {
	t.Helper()
	const doc = `{"apiVersion":"reasonix.io/plugin/v1","name":"every","version":"1.0.0","description":"d",
	"homepage":"https://example.com","repository":"https://example.com/every.git",
	"skills":"skills/legacy","commands":[{"path":"commands/legacy"}],
	"hooks":{"Stop":[{"match":"*","command":"bin/hook","args":["-v"],"contextFile":"ctx.md","shellCommand":"echo hi","shell":"bash",
		"async":false,"payloadFormat":"json","description":"d","timeout":1.5,"cwd":".","env":{"K":"v"}}]},
	"mcpServers":{"legacy":{"type":"stdio","command":"bin/mcp","args":["--stdio"],"env":{"K":"v"},"url":"http://localhost:1",
		"headers":{"H":"v"},"auto_start":false,"display_name":"M","description":"d","tier":"core","imported":true}},
	"contributes":{"skills":"skills","agents":["agents/a","agents/b"],"commands":[{"path":"commands"}],"prompts":null,
		"themes":["themes/a",{"path":"themes/b"}],
		"hooks":{"PreToolUse":[{"command":"bin/pre","timeout":3}]},
		"mcpServers":{"m":{"type":"http","url":"http://localhost:2","auto_start":true}}},
	"runtime":{"command":"/opt/every/bin/every","args":["-v"],"env":{"K":"v"},"required":true,"priority":5,
		"intercepts":["tool.before"],"replaces":["system_prompt"],"capabilities":["interceptors"],"timeoutMillis":100}}`
	var m map[string]any
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestParseManifestD31EveryUpstreamMember: a manifest with every upstream
// v1 member parses, the legacy members merged into contributes, each
// path list as an array of paths; what it encodes to parses back the same.
func TestParseManifestD31EveryUpstreamMember(t *testing.T) {
	m, err := ParseManifest(mustJSON(t, everyMember(t)))
	if err != nil {
		t.Fatal(err)
	}
	if m.Homepage != "https://example.com" || m.Repository != "https://example.com/every.git" || m.Runtime.TimeoutMillis != 100 || !m.Runtime.Required {
		t.Errorf("got %+v, runtime %+v", m, m.Runtime)
	}
	var c struct {
		Skills, Agents, Commands, Prompts, Themes []string
		Hooks                                     map[string][]map[string]any
		MCPServers                                map[string]map[string]any
	}
	if err := json.Unmarshal(m.Contributes, &c); err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"skills", "skills/legacy"}, {"agents/a", "agents/b"}, {"commands", "commands/legacy"}, nil, {"themes/a", "themes/b"}}
	if got := [][]string{c.Skills, c.Agents, c.Commands, c.Prompts, c.Themes}; !reflect.DeepEqual(got, want) {
		t.Errorf("path lists = %q, want %q", got, want)
	}
	if len(c.Hooks["Stop"][0]) != 12 || c.Hooks["Stop"][0]["async"] != false || c.Hooks["PreToolUse"][0]["timeout"] != 3.0 {
		t.Errorf("hooks = %v, want both events, every member kept (false and 0 included)", c.Hooks)
	}
	if len(c.MCPServers["legacy"]) != 11 || c.MCPServers["legacy"]["auto_start"] != false || c.MCPServers["m"]["url"] != "http://localhost:2" {
		t.Errorf("mcpServers = %v, want both servers, every member kept", c.MCPServers)
	}
	again, err := ParseManifest(mustJSON(t, m))
	if err != nil || !reflect.DeepEqual(again, m) {
		t.Errorf("the encoded manifest parses back as %+v, %v; want %+v", again, err, m)
	}
}

// TestParseManifestD31PathListForms: each path list, under contributes
// and at the root for the two legacy ones, accepts a path, an array of
// paths, of {"path": …} objects or of both, an empty array and null.
func TestParseManifestD31PathListForms(t *testing.T) {
	forms := []struct{ raw, want string }{
		{`"a"`, `["a"]`},
		{`["a","b"]`, `["a","b"]`},
		{`[{"path":"a"},{"path":"b"}]`, `["a","b"]`},
		{`["a",{"path":"b"}]`, `["a","b"]`},
		{`[]`, ``},
		{`null`, ``},
	}
	type place struct{ name, members string } // a path list and the members holding it
	var places []place
	for _, name := range []string{"skills", "agents", "commands", "prompts", "themes"} {
		places = append(places, place{name, `,"contributes":{"` + name + `":%s}`})
	}
	places = append(places, place{"skills", `,"skills":%s`}, place{"commands", `,"commands":%s`})
	for _, p := range places {
		for _, f := range forms {
			members := fmt.Sprintf(p.members, f.raw)
			m, err := ParseManifest([]byte(`{"apiVersion":"reasonix.io/plugin/v1","name":"p"` + members + `}`))
			if err != nil {
				t.Errorf("%s: %v", members, err)
				continue
			}
			want := `{}`
			if f.want != "" {
				want = `{"` + p.name + `":` + f.want + `}`
			}
			if string(m.Contributes) != want {
				t.Errorf("%s: contributes %s, want %s", members, m.Contributes, want)
			}
		}
	}
}

// TestParseManifestD31EveryMisspellingIsRefused renames each member of
// the manifest with every upstream member, one at a time, to a
// misspelling (a letter dropped, the case of the first changed) and
// expects the error to name it by its path. Hook event, server, env and
// header names are names, not members, and are left alone.
func TestParseManifestD31EveryMisspellingIsRefused(t *testing.T) {
	type member struct {
		keys   []any // the way to the object holding it
		name   string
		parent string // the object's field path
	}
	names := map[string]bool{"hooks": true, "mcpServers": true, "env": true, "headers": true}
	var all []member
	var visit func(v any, keys []any, field string, free bool)
	visit = func(v any, keys []any, field string, free bool) {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				child := field + "." + k
				switch {
				case free:
					child = fmt.Sprintf("%s[%q]", field, k)
				case field == "":
					child = k
				}
				if !free {
					all = append(all, member{keys, k, field})
				}
				visit(v[k], append(slices.Clip(keys), k), child, !free && names[k])
			}
		case []any:
			for i, e := range v {
				visit(e, append(slices.Clip(keys), i), fmt.Sprintf("%s[%d]", field, i), false)
			}
		}
	}
	visit(everyMember(t), nil, "", false)
	if len(all) != 59 {
		t.Fatalf("found %d members, want every one of the manifest", len(all))
	}
	for _, mb := range all {
		first := mb.name[:1]
		for _, typo := range []string{mb.name[:len(mb.name)-1], strings.ToUpper(first) + mb.name[1:], strings.ToLower(first) + mb.name[1:]} {
			if typo == mb.name {
				continue
			}
			doc := everyMember(t)
			var obj any = doc
			for _, k := range mb.keys {
				if i, ok := k.(int); ok {
					obj = obj.([]any)[i]
				} else {
					obj = obj.(map[string]any)[k.(string)]
				}
			}
			o := obj.(map[string]any)
			o[typo] = o[mb.name]
			delete(o, mb.name)
			field, msg := typo, "unknown field"
			if mb.parent != "" {
				field = mb.parent + "." + typo
			}
			if mb.name == "apiVersion" && !strings.EqualFold(typo, mb.name) {
				// Without apiVersion the manifest is a legacy one, which
				// cannot have a runtime.
				field, msg = "runtime", `needs "apiVersion"`
			}
			_, err := ParseManifest(mustJSON(t, doc))
			wantManifestError(t, err, field, msg)
		}
	}
}

// TestParseManifestD31Refusals: values of the wrong shape in contributes,
// blank and repeated paths, and an entry defined differently in its
// legacy and its contributes place are refused, naming the member.
func TestParseManifestD31Refusals(t *testing.T) {
	tests := []struct {
		name, members, field, msg string
	}{
		{"path list number", `,"contributes":{"skills":1}`, "contributes.skills", `an array of paths or of {"path": …} objects`},
		{"path list object", `,"skills":{"path":"a"}`, "skills", "must be a path"},
		{"element number", `,"contributes":{"agents":["a",2]}`, "contributes.agents[1]", `a path or a {"path": …} object`},
		{"element null", `,"contributes":{"agents":[null]}`, "contributes.agents[0]", `a path or a {"path": …} object`},
		{"path missing", `,"contributes":{"themes":[{}]}`, "contributes.themes[0].path", "missing"},
		{"path not a string", `,"contributes":{"themes":[{"path":1}]}`, "contributes.themes[0].path", "must be a string"},
		{"path object null", `,"contributes":{"themes":[{"path":null}]}`, "contributes.themes[0].path", "null is not allowed"},
		{"blank path", `,"contributes":{"prompts":" "}`, "contributes.prompts", "a blank path"},
		{"repeated path", `,"commands":["a",{"path":"a"}]`, "commands[1].path", `"a" is listed twice`},
		{"hooks not an object", `,"contributes":{"hooks":[]}`, "contributes.hooks", "must be an object"},
		{"hook event not an array", `,"hooks":{"Stop":{}}`, `hooks["Stop"]`, "must be an array"},
		{"hook timeout", `,"hooks":{"Stop":[{"timeout":"5"}]}`, `hooks["Stop"][0].timeout`, "must be a number"},
		{"hook negative timeout", `,"hooks":{"Stop":[{"timeout":-1}]}`, `hooks["Stop"][0].timeout`, "out of range"},
		{"hook async", `,"hooks":{"Stop":[{"async":"yes"}]}`, `hooks["Stop"][0].async`, "must be true or false"},
		{"hook null", `,"hooks":{"Stop":[{"cwd":null}]}`, `hooks["Stop"][0].cwd`, "null is not allowed"},
		{"server args", `,"mcpServers":{"s":{"args":"-v"}}`, `mcpServers["s"].args`, "must be an array of strings"},
		{"server headers", `,"contributes":{"mcpServers":{"s":{"headers":{"H":1}}}}`, `contributes.mcpServers["s"].headers["H"]`, "must be a string"},
		{"contributes null", `,"contributes":null`, "contributes", "null is not allowed"},
		{"hook defined twice differently", `,"hooks":{"Stop":[{"command":"a"}]},"contributes":{"hooks":{"Stop":[{"command":"b"}]}}`,
			`hooks["Stop"]`, `defined differently at contributes.hooks["Stop"]`},
		{"server defined twice differently", `,"mcpServers":{"s":{"url":"a"}},"contributes":{"mcpServers":{"s":{"url":"b"}}}`,
			`mcpServers["s"]`, `defined differently at contributes.mcpServers["s"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseManifest([]byte(`{"apiVersion":"reasonix.io/plugin/v1","name":"p"` + tt.members + `}`))
			if m != nil {
				t.Errorf("got a manifest, want none")
			}
			wantManifestError(t, err, tt.field, tt.msg)
		})
	}
	same := `,"skills":["a"],"hooks":{"Stop":[{"command":"a"}]},"mcpServers":{"s":{"url":"a"}},` +
		`"contributes":{"skills":["a","b"],"hooks":{"Stop":[{"command":"a"}]},"mcpServers":{"s":{"url":"a"}}}`
	m, err := ParseManifest([]byte(`{"apiVersion":"reasonix.io/plugin/v1","name":"p"` + same + `}`))
	if want := `{"skills":["a","b"],"hooks":{"Stop":[{"command":"a"}]},"mcpServers":{"s":{"url":"a"}}}`; err != nil || string(m.Contributes) != want {
		t.Errorf("the same entries in both places: %v, %v; want them once, %s", m, err, want)
	}
}

// TestLoadManifestD31RefusesPathsLeavingThePlugin: loaded from its
// directory, a manifest may not contribute a path that leads out of it
// through a symbolic link; a missing path and a link inside are fine.
func TestLoadManifestD31RefusesPathsLeavingThePlugin(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	for _, err := range []error{
		os.Mkdir(filepath.Join(dir, "skills"), 0o755),
		os.Symlink(outside, filepath.Join(dir, "skills", "away")),
		os.Symlink(filepath.Join(dir, "skills"), filepath.Join(dir, "here")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	write := func(members string) error {
		doc := `{"apiVersion":"reasonix.io/plugin/v1","name":"p"` + members + `}`
		if err := os.WriteFile(filepath.Join(dir, ManifestFile), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := loadManifest(dir)
		return err
	}
	if err := write(`,"contributes":{"skills":["skills","here","missing","here/missing"]}`); err != nil {
		t.Errorf("paths inside and missing paths: %v", err)
	}
	wantManifestError(t, write(`,"contributes":{"skills":["skills",{"path":"skills/away"}]}`), "contributes.skills[1].path", "leads out of the plugin directory")
	wantManifestError(t, write(`,"commands":"here/away"`), "commands", "leads out of the plugin directory")
	if err := write(`,"commands":"here/away"`); !strings.HasPrefix(err.Error(), filepath.Join(dir, ManifestFile)+": commands: ") {
		t.Errorf("Error() = %q, want the file and the member", err)
	}
	if _, err := ParseManifest([]byte(`{"apiVersion":"reasonix.io/plugin/v1","name":"p","skills":"/"}`)); err != nil {
		t.Errorf("without a directory nothing is looked up: %v", err)
	}
}

// TestParseManifestD31Encodings: a UTF-8 byte-order mark is skipped and
// UTF-16 with its mark, either byte order, is decoded; any other
// encoding, and UTF-16 that is not valid, is refused with advice.
func TestParseManifestD31Encodings(t *testing.T) {
	const doc = `{"apiVersion":"reasonix.io/plugin/v1","name":"p","description":"dé 𝄞 \uFFFD"}`
	utf16Of := func(order binary.AppendByteOrder, units ...uint16) []byte {
		b := order.AppendUint16(nil, 0xfeff)
		for _, u := range units {
			b = order.AppendUint16(b, u)
		}
		return b
	}
	units := utf16.Encode([]rune(doc))
	for name, data := range map[string][]byte{
		"UTF-8 with a mark": append([]byte("\xef\xbb\xbf"), doc...),
		"UTF-16LE":          utf16Of(binary.LittleEndian, units...),
		"UTF-16BE":          utf16Of(binary.BigEndian, units...),
	} {
		m, err := ParseManifest(data)
		if err != nil || m.Description != "dé 𝄞 \uFFFD" {
			t.Errorf("%s: %+v, %v; want the description decoded", name, m, err)
		}
	}
	// A broken required manifest with a mark still fails closed (D10).
	dir := t.TempDir()
	broken := utf16Of(binary.BigEndian, utf16.Encode([]rune(`{"runtime":{"required":true,"bogus":1}}`))...)
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), broken, 0o644); err != nil {
		t.Fatal(err)
	}
	if !claimsRequired(dir) {
		t.Errorf("a UTF-16 manifest claiming required is not read as required")
	}
	brace := utf16.Encode([]rune(`{"name":"`))
	for name, data := range map[string][]byte{
		"Latin-1":                   []byte("{\"name\":\"d\xe9\"}"),
		"UTF-16 without a mark":     utf16Of(binary.LittleEndian, units...)[2:],
		"UTF-32LE":                  append([]byte("\xff\xfe\x00\x00"), []byte("{\x00\x00\x00}\x00\x00\x00")...),
		"odd UTF-16":                append(utf16Of(binary.LittleEndian, units...), 0),
		"lone high surrogate":       utf16Of(binary.BigEndian, append(brace, 0xd834, '"', '}')...),
		"lone low surrogate":        utf16Of(binary.LittleEndian, append(brace, 0xdd1e, '"', '}')...),
		"high surrogate at the end": utf16Of(binary.LittleEndian, 0xd834),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseManifest(data)
			wantManifestError(t, err, "", "save the file as UTF-8")
		})
	}
}

// TestD9BundledManifestsArePortable: no bundled reasonix-plugin.json (the
// SDK's examples, internal/, testdata/plugins) and no manifest example of
// README.md uses runtime.providers or runtime.uiActions, which upstream v1
// hosts refuse: each parses, and its runtime members are upstream's nine.
// testdata/manifests holds test inputs of this project's extension, not
// bundled manifests.
func TestD9BundledManifestsArePortable(t *testing.T) {
	docs := map[string][]byte{}
	for _, root := range []string{filepath.Join("sdk", "examples"), "internal", filepath.Join("testdata", "plugins")} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Name() == ManifestFile {
				docs[p], err = os.ReadFile(p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(readme, -1) {
		docs[fmt.Sprintf("README.md, json block %d", i+1)] = m[1]
	}
	if len(docs) != 6 {
		t.Fatalf("read %d manifests, want the 4 bundled files and the README's 2 blocks: %v", len(docs), slices.Sorted(maps.Keys(docs)))
	}
	upstream := []string{"command", "args", "env", "required", "priority", "intercepts", "replaces", "capabilities", "timeoutMillis"}
	for name, doc := range docs {
		var raw struct{ Runtime map[string]json.RawMessage }
		if _, err := ParseManifest(doc); err != nil || json.Unmarshal(doc, &raw) != nil {
			t.Errorf("%s: %v", name, err)
		}
		for k := range raw.Runtime {
			if !slices.Contains(upstream, k) {
				t.Errorf("%s: runtime.%s is not loadable by upstream v1 hosts", name, k)
			}
		}
	}
}

// TestTrustSummaryD9SaysWhatUpstreamRefuses: the FULL TRUST block of a
// manifest using runtime.providers or runtime.uiActions, even empty,
// names each in its portability line; without them there is none.
func TestTrustSummaryD9SaysWhatUpstreamRefuses(t *testing.T) {
	tests := []struct{ members, want string }{
		{`,"capabilities":["providers"],"providers":["plugin/p/a/m"]`, "not loadable by upstream v1 hosts: runtime.providers"},
		{`,"capabilities":["ui"],"uiActions":[]`, "not loadable by upstream v1 hosts: runtime.uiActions"},
		{`,"capabilities":["providers","ui"],"providers":[],"uiActions":["go"]`, "not loadable by upstream v1 hosts: runtime.providers, runtime.uiActions"},
		{`,"capabilities":["providers","ui"]`, ""},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, ManifestFile), []byte(v1(tt.members)), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := TrustPlugin(dir, "")
		if err != nil || s.Portability != tt.want {
			t.Errorf("%s: Portability %q, %v; want %q", tt.members, s.Portability, err, tt.want)
		}
		if got := strings.Contains(s.Text(), "portability:"); got != (tt.want != "") || !strings.Contains(s.Text(), tt.want) {
			t.Errorf("%s: the block shows the line %v, want %v:\n%s", tt.members, got, tt.want != "", s.Text())
		}
	}
}
