package extension

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
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
		{"root", `{"apiVersion":"reasonix.io/plugin/v1","name":"p","homepage":"x"}`, "homepage", "unknown field"},
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
		{"inside contributes", `{"apiVersion":"reasonix.io/plugin/v1","name":"p","contributes":{"a":{"b":1,"b":2}}}`, "contributes.a.b"},
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
	doc := []byte(`{"apiVersion":"reasonix.io/plugin/v1.1","name":"p","version":"1","description":"d","contributes":{"a":[1,{"b":null}]},` +
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
