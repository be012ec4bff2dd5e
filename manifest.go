package extension

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// ManifestFile is the name of a plugin's manifest inside its directory.
const ManifestFile = "reasonix-plugin.json"

// manifestAPIVersion opts a manifest into the v1 format, the only format
// that can declare a runtime (D8). A minor such as "reasonix.io/plugin/v1.1"
// is read as v1; any other major is rejected.
const manifestAPIVersion = "reasonix.io/plugin/v1"

// maxManifestBytes bounds the manifest file loadManifest reads (1 MiB).
const maxManifestBytes = 1 << 20

// Manifest is a parsed reasonix-plugin.json (PROTOCOL.md §3.1).
//
// A manifest with "apiVersion" is a v1 manifest and is read strictly: an
// unknown member at the root, in contributes or in runtime, a duplicate
// member, a member whose name matches a field only case-insensitively, a
// null (but for a path list), or a value of the wrong type is a
// [*ManifestError] naming the member (D3, D31). The file may start with a
// UTF-8 byte-order mark, or be UTF-16 with one.
//
// Text a person will see is free of control characters: name, version,
// description, command, args, env keys and every list element (provider
// refs, slots, action IDs, hook points, capabilities) may not hold a C0
// control (NUL, tab, newline, ESC...), DEL or a C1 control, so a manifest
// cannot fake or hide rows of the FULL TRUST summary on a terminal (D8).
// Env values, which are never shown, may hold anything but NUL.
//
// A manifest without "apiVersion" is a legacy manifest. It is read
// leniently, only for its name, version, description and contributes;
// other members are ignored. Its name, version and description are still
// free of control characters. A legacy manifest cannot have a sidecar: a
// runtime member in it is an error rather than being silently dropped, so
// an author who forgot the apiVersion line learns why nothing starts (D8).
type Manifest struct {
	// APIVersion is the apiVersion as written ("reasonix.io/plugin/v1" or
	// a v1 minor); empty for a legacy manifest.
	APIVersion string `json:"apiVersion,omitempty"`
	// Name is the plugin's own name (required, non-blank). The plugin ID a
	// host uses is the installed name, which may differ (PROTOCOL.md §3.1).
	Name string `json:"name,omitempty"`
	// Version is the plugin's version; optional.
	Version string `json:"version,omitempty"`
	// Description is a one-line description; optional.
	Description string `json:"description,omitempty"`
	// Homepage and Repository are addresses, as written; optional.
	Homepage   string `json:"homepage,omitempty"`
	Repository string `json:"repository,omitempty"`
	// Contributes is the contributes object, or nil when there is none.
	// In a v1 manifest it holds the legacy root members skills, commands,
	// hooks and mcpServers merged in, each path list (skills, agents,
	// commands, prompts, themes) as an array of paths, hooks and MCP
	// servers as objects by name (D31). In a legacy manifest it is the
	// object as written.
	Contributes json.RawMessage `json:"contributes,omitempty"`
	// Runtime is the sidecar declaration, or nil for a plugin without one.
	Runtime *RuntimeSpec `json:"runtime,omitempty"`
}

// manifestDoc is a v1 manifest as written (PROTOCOL.md §3.1): the members
// of Manifest, contributes by upstream's member sets, and the four legacy
// root members that merge into contributes (D31).
type manifestDoc struct {
	APIVersion  string                 `json:"apiVersion,omitempty"`
	Name        string                 `json:"name,omitempty"`
	Version     string                 `json:"version,omitempty"`
	Description string                 `json:"description,omitempty"`
	Homepage    string                 `json:"homepage,omitempty"`
	Repository  string                 `json:"repository,omitempty"`
	Contributes *contributions         `json:"contributes,omitempty"`
	Runtime     *RuntimeSpec           `json:"runtime,omitempty"`
	Skills      json.RawMessage        `json:"skills,omitempty" proto:"raw"`
	Commands    json.RawMessage        `json:"commands,omitempty" proto:"raw"`
	Hooks       map[string][]hookEntry `json:"hooks,omitempty"`
	MCPServers  map[string]mcpServer   `json:"mcpServers,omitempty"`
}

// contributions is the contributes object (PROTOCOL.md §3.1, D31): five
// path lists, each read by pathList, and hooks and MCP servers by name.
type contributions struct {
	Skills     json.RawMessage        `json:"skills,omitempty" proto:"raw"`
	Agents     json.RawMessage        `json:"agents,omitempty" proto:"raw"`
	Commands   json.RawMessage        `json:"commands,omitempty" proto:"raw"`
	Prompts    json.RawMessage        `json:"prompts,omitempty" proto:"raw"`
	Themes     json.RawMessage        `json:"themes,omitempty" proto:"raw"`
	Hooks      map[string][]hookEntry `json:"hooks,omitempty"`
	MCPServers map[string]mcpServer   `json:"mcpServers,omitempty"`
}

// hookEntry is one hook of an event in contributes.hooks.
type hookEntry struct {
	Match         string            `json:"match,omitempty"`
	Command       string            `json:"command,omitempty"`
	Args          []string          `json:"args,omitempty"`
	ContextFile   string            `json:"contextFile,omitempty"`
	ShellCommand  string            `json:"shellCommand,omitempty"`
	Shell         string            `json:"shell,omitempty"`
	Async         *bool             `json:"async,omitempty"`
	PayloadFormat string            `json:"payloadFormat,omitempty"`
	Description   string            `json:"description,omitempty"`
	Timeout       *float64          `json:"timeout,omitempty" proto:"min=0"`
	Cwd           string            `json:"cwd,omitempty"`
	Env           map[string]string `json:"env,omitempty"`
}

// mcpServer is one server of contributes.mcpServers (upstream's snake
// case kept).
type mcpServer struct {
	Type        string            `json:"type,omitempty"`
	Command     string            `json:"command,omitempty"`
	Args        []string          `json:"args,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	URL         string            `json:"url,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	AutoStart   *bool             `json:"auto_start,omitempty"`
	DisplayName string            `json:"display_name,omitempty"`
	Description string            `json:"description,omitempty"`
	Tier        string            `json:"tier,omitempty"`
	Imported    *bool             `json:"imported,omitempty"`
}

// pathEntry is an element of a path list written as an object.
type pathEntry struct {
	Path string `json:"path"`
}

// RuntimeSpec is the runtime block of a v1 manifest (PROTOCOL.md §3.1),
// the two optional lists of D9 included. Nil slices and maps mean the
// member was absent.
type RuntimeSpec struct {
	// Command is the sidecar executable as written: non-blank once
	// trimmed, and free of control characters (NUL included) inside. It
	// may start with ${REASONIX_PLUGIN_ROOT}; the launch gate resolves it to
	// an absolute, non-shell path (D8).
	Command string `json:"command,omitempty"`
	// Args are passed verbatim as argv[1:], never through a shell and with
	// no placeholder expanded; each is non-blank and free of control
	// characters. Unlike the other lists, args may repeat ("-v", "-v").
	Args []string `json:"args,omitempty"`
	// Env holds variables layered over the inherited environment. Keys are
	// non-blank, contain neither '=' nor a control character, and no two
	// differ only by case (Windows would merge them). Values may hold
	// anything but NUL.
	Env map[string]string `json:"env,omitempty"`
	// Required makes the plugin required-class (D10, D19).
	Required bool `json:"required,omitempty"`
	// Priority orders interceptor chains, lower first: -1000..1000,
	// default 0 (D15).
	Priority int `json:"priority,omitempty"`
	// Intercepts lists the hook points the plugin may subscribe to.
	Intercepts []Point `json:"intercepts,omitempty"`
	// Replaces lists the slots the plugin claims (D17).
	Replaces []string `json:"replaces,omitempty"`
	// Capabilities lists interceptors, strategies, providers and ui.
	Capabilities []string `json:"capabilities,omitempty"`
	// TimeoutMillis, when > 0, replaces every point's default timeout
	// (clamped at dispatch to Host.MaxInterceptTimeout, 60 s by default,
	// D18); 0 keeps the defaults.
	TimeoutMillis int64 `json:"timeoutMillis,omitempty"`
	// Providers optionally lists the provider refs the sidecar may declare
	// (D9): each a plugin ref plugin/<pluginID>/<provider>/<model>, the
	// only form a sidecar can declare. Non-empty only with the providers
	// capability.
	Providers []string `json:"providers,omitempty"`
	// UIActions optionally lists the UI action IDs the sidecar may declare
	// (D9). Non-empty only with the ui capability.
	UIActions []string `json:"uiActions,omitempty"`
}

// loadManifest reads and parses <pluginDir>/reasonix-plugin.json.
func loadManifest(pluginDir string) (*Manifest, error) {
	path := filepath.Join(pluginDir, ManifestFile)
	data, err := readBounded(path, maxManifestBytes)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(pluginDir); errors.Is(serr, fs.ErrNotExist) {
			return nil, &ManifestError{Path: pluginDir, Msg: "the plugin directory does not exist", Err: err}
		}
		return nil, &ManifestError{Path: path, Msg: "the plugin directory has no " + ManifestFile, Err: err}
	}
	if err != nil {
		return nil, &ManifestError{Path: path, Msg: "cannot read the manifest: " + err.Error(), Err: err}
	}
	m, err := parseManifest(data, pluginDir)
	if me, ok := err.(*ManifestError); ok { // every error parseManifest returns
		me.Path = path
	}
	return m, err
}

// readBounded reads a whole regular file that must not exceed limit bytes.
// Anything else is refused before it is opened: opening a FIFO would wait
// for a writer forever.
func readBounded(path string, limit int64) ([]byte, error) {
	if fi, err := os.Stat(path); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}

var (
	manifestNode  = mustNode[manifestDoc]()
	pathEntryNode = mustNode[pathEntry]()
	// itemsNode reads an array's elements as they are.
	itemsNode = &vnode{kind: vArray, elem: rawNode}
)

// membersNode is a first, lenient read of a document: the syntax of the
// whole of it and its root members as they are, none repeated (D3).
var membersNode = &vnode{kind: vObject, isMap: true, elem: rawNode}

// members is the result of such a read: each member's raw value,
// aliasing the document.
type members map[string][]byte

// caseVariant refuses a member that matches one of names only by case or
// Unicode folding (D3), naming it; nil when there is none.
func (ms members) caseVariant(names ...string) error {
	for _, m := range slices.Sorted(maps.Keys(ms)) {
		for _, n := range names {
			if m != n && strings.EqualFold(m, n) {
				return &ManifestError{Field: fieldName(m), Msg: didYouMean(n)}
			}
		}
	}
	return nil
}

// didYouMean is the message for a member that is a case variant of name.
func didYouMean(name string) string {
	return "unknown field; names are case-sensitive: did you mean " + strconv.Quote(name) + "?"
}

// readDocument walks data, which must be one JSON object (utf8Text reads
// its encoding), against n into dst through the strict walk, phrasing
// failures as a *ManifestError.
func readDocument(data []byte, what string, n *vnode, dst any) error {
	data, err := utf8Text(data)
	if err != nil {
		return err
	}
	if s := (scanner{data: data}); s.peek() != '{' {
		return &ManifestError{Msg: what + " must be one JSON object"}
	}
	return walkAt(n, data, dst, "")
}

// walkAt walks doc, the value at field of a document, against n into dst
// through the strict walk; a failure is a *ManifestError naming its path
// in the document.
func walkAt(n *vnode, doc []byte, dst any, field string) error {
	err := walk(n, doc, reflect.ValueOf(dst).Elem())
	if err == nil {
		return nil
	}
	ve := err.(*ValidationError)
	me := manifestError(ve)
	if ve.rule == ruleSyntax && field == "" {
		// A file's syntax error says where, as an editor counts.
		before := doc[:min(ve.offset, len(doc))]
		line := bytes.Count(before, []byte("\n")) + 1
		column := utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]) + 1
		me.Msg += fmt.Sprintf(" (line %d, column %d)", line, column)
	}
	if field != "" && me.Field != "" && me.Field[0] != '[' {
		field += "."
	}
	me.Field = field + me.Field
	return me
}

// manifestError phrases a failure of the strict walk the way
// ManifestError does: the member as a field path, the rule in words that
// say what to do.
func manifestError(ve *ValidationError) *ManifestError {
	msg := ve.Msg
	switch ve.rule {
	case ruleSyntax:
		return &ManifestError{Msg: "not valid JSON: " + ve.Msg}
	case ruleKind:
		want, got := ve.want, ve.got.String()
		if want == vBoolean.String() {
			want = "true or false"
		}
		if ve.got == vInteger {
			got = "a number"
		}
		msg = "must be " + want + ", not " + got
	case ruleUnknown:
		msg = "unknown field; check its spelling"
		if ve.detail != "" {
			msg = didYouMean(ve.detail)
		}
	case ruleDuplicate:
		msg = "duplicate member; give each field once"
	case ruleNull:
		msg = "null is not allowed; omit the field instead"
	case ruleMissing:
		msg = "missing"
	case ruleInteger:
		msg = ve.detail + " is not an integer; write it without a fraction or exponent"
	case ruleRange:
		msg = ve.detail + " is out of range"
	case ruleEnum: // the one enum of a manifest: runtime.intercepts
		msg = strconv.Quote(ve.detail) + " is not a hook point; use one of " + strings.Join(enumStrings(points...), ", ")
	}
	return &ManifestError{Field: ve.field, Msg: msg}
}

// ParseManifest parses the bytes of a reasonix-plugin.json. Errors are
// [*ManifestError] values naming the offending member.
func ParseManifest(data []byte) (*Manifest, error) {
	return parseManifest(data, "")
}

// parseManifest is ParseManifest; with dir, the plugin directory, it
// also refuses a contributed path that leads out of it (D31).
func parseManifest(data []byte, dir string) (*Manifest, error) {
	if len(data) > maxManifestBytes {
		return nil, &ManifestError{Msg: fmt.Sprintf("the manifest is larger than %d bytes", maxManifestBytes)}
	}
	var root members
	if err := readDocument(data, "the manifest", membersNode, &root); err != nil {
		return nil, err
	}
	m, err := new(Manifest), error(nil)
	if root["apiVersion"] == nil {
		// A legacy manifest: lenient about types, never about a runtime.
		if err := root.caseVariant("apiVersion", "runtime"); err != nil {
			return nil, err
		}
		if root["runtime"] != nil {
			return nil, &ManifestError{Field: "runtime", Msg: fmt.Sprintf("a runtime needs \"apiVersion\": %q; add it to the manifest", manifestAPIVersion)}
		}
		m.Name, _ = plainString(root["name"])
		m.Version, _ = plainString(root["version"])
		m.Description, _ = plainString(root["description"])
		if c := root["contributes"]; len(c) > 0 && c[0] == '{' {
			m.Contributes = slices.Clone(c)
		}
	} else if m, err = readV1(data, dir); err != nil {
		return nil, err
	}
	if strings.TrimSpace(m.Name) == "" {
		return nil, &ManifestError{Field: "name", Msg: "missing or blank; every manifest names its plugin"}
	}
	for _, f := range []struct{ name, value string }{{"name", m.Name}, {"version", m.Version}, {"description", m.Description}} {
		if err := checkText(f.value, f.name); err != nil {
			return nil, err
		}
	}
	if m.Runtime != nil {
		if err := m.Runtime.check(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// readV1 reads a v1 manifest strictly (D3, D31) and merges the legacy
// root members into its contributes; a path is checked against dir when
// it is not empty.
func readV1(data []byte, dir string) (*Manifest, error) {
	var d manifestDoc
	if err := readDocument(data, "the manifest", manifestNode(), &d); err != nil {
		return nil, err
	}
	if err := checkAPIVersion(d.APIVersion); err != nil {
		return nil, err
	}
	m := &Manifest{APIVersion: d.APIVersion, Name: d.Name, Version: d.Version, Description: d.Description, Homepage: d.Homepage, Repository: d.Repository, Runtime: d.Runtime}
	if d.Contributes == nil && d.Skills == nil && d.Commands == nil && d.Hooks == nil && d.MCPServers == nil {
		return m, nil
	}
	c := cmp.Or(d.Contributes, new(contributions))
	lists := []struct {
		name   string
		list   *json.RawMessage
		legacy json.RawMessage
	}{
		{"skills", &c.Skills, d.Skills}, {"agents", &c.Agents, nil}, {"commands", &c.Commands, d.Commands},
		{"prompts", &c.Prompts, nil}, {"themes", &c.Themes, nil},
	}
	for _, l := range lists {
		paths, err := pathList(*l.list, "contributes."+l.name, dir)
		legacy, lerr := pathList(l.legacy, l.name, dir)
		if err = cmp.Or(err, lerr); err != nil {
			return nil, err
		}
		for _, p := range legacy { // a path in both places is listed once
			if !slices.Contains(paths, p) {
				paths = append(paths, p)
			}
		}
		*l.list = nil
		if len(paths) > 0 {
			*l.list, _ = json.Marshal(paths)
		}
	}
	if err := cmp.Or(mergeLegacy("hooks", d.Hooks, &c.Hooks), mergeLegacy("mcpServers", d.MCPServers, &c.MCPServers)); err != nil {
		return nil, err
	}
	m.Contributes, _ = json.Marshal(c)
	return m, nil
}

// pathList reads the path list at field (PROTOCOL.md §3.1, D31): null
// (none), a path, or an array whose elements are paths or {"path": …}
// objects. A path is not blank, is listed once, and, when dir is not
// empty and the path exists there, does not lead out of dir once symbolic
// links are followed; a missing path is not an error.
func pathList(raw []byte, field, dir string) ([]string, error) {
	items := []json.RawMessage{raw}
	switch {
	case len(raw) == 0 || raw[0] == 'n':
		return nil, nil
	case raw[0] == '[':
		if err := walkAt(itemsNode, raw, &items, field); err != nil {
			return nil, err
		}
	case raw[0] != '"':
		return nil, &ManifestError{Field: field, Msg: `must be a path, or an array of paths or of {"path": …} objects`}
	}
	var paths []string
	for i, item := range items {
		at, e := field, pathEntry{}
		if raw[0] == '[' {
			at = fmt.Sprintf("%s[%d]", field, i)
		}
		switch item[0] {
		case '"':
			e.Path, _ = plainString(item)
		case '{':
			if err := walkAt(pathEntryNode(), item, &e, at); err != nil {
				return nil, err
			}
			at += ".path"
		default:
			return nil, &ManifestError{Field: at, Msg: `must be a path or a {"path": …} object`}
		}
		switch p := filepath.Join(dir, e.Path); {
		case strings.TrimSpace(e.Path) == "":
			return nil, &ManifestError{Field: at, Msg: "a blank path; name a file or directory of the plugin"}
		case slices.Contains(paths, e.Path):
			return nil, &ManifestError{Field: at, Msg: fmt.Sprintf("%q is listed twice; list it once", e.Path)}
		case dir != "" && !insideDir(p, dir):
			if _, err := os.Stat(p); err == nil {
				return nil, &ManifestError{Field: at, Msg: fmt.Sprintf("%q leads out of the plugin directory; keep what the plugin contributes inside it", e.Path)}
			}
		}
		paths = append(paths, e.Path)
	}
	return paths, nil
}

// mergeLegacy merges the legacy root member name into its contributes
// counterpart dst (D31): an entry defined in both places must be defined
// the same way.
func mergeLegacy[V any](name string, legacy map[string]V, dst *map[string]V) error {
	for _, k := range slices.Sorted(maps.Keys(legacy)) {
		if v, ok := (*dst)[k]; ok && !reflect.DeepEqual(v, legacy[k]) {
			return &ManifestError{Field: fmt.Sprintf("%s[%q]", name, k), Msg: fmt.Sprintf("defined differently at contributes.%s[%q]; define it in one place", name, k)}
		}
		if *dst == nil {
			*dst = map[string]V{}
		}
		(*dst)[k] = legacy[k]
	}
	return nil
}

// utf8Text returns the bytes of a manifest as UTF-8 (D31): without a
// UTF-8 byte-order mark, or decoded from UTF-16 (little- or big-endian)
// with its mark. Anything else that is not UTF-8 is refused, and so is a
// NUL byte, which JSON text never holds and UTF-16 or UTF-32 without a
// mark does.
func utf8Text(data []byte) ([]byte, error) {
	refuse := &ManifestError{Msg: "invalid UTF-8; save the file as UTF-8 (UTF-16 is read only with a byte-order mark)"}
	var order binary.ByteOrder
	switch {
	case bytes.HasPrefix(data, []byte("\xef\xbb\xbf")):
		data = data[3:]
	case bytes.HasPrefix(data, []byte("\xff\xfe")):
		order = binary.LittleEndian
	case bytes.HasPrefix(data, []byte("\xfe\xff")):
		order = binary.BigEndian
	}
	if order != nil && len(data)%2 == 0 {
		units := make([]uint16, len(data)/2-1)
		for i := range units {
			units[i] = order.Uint16(data[2+2*i:])
		}
		// A lone surrogate decodes to U+FFFD, which encodes differently.
		runes := utf16.Decode(units)
		if !slices.Equal(utf16.Encode(runes), units) {
			return nil, refuse
		}
		data = []byte(string(runes))
	}
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return nil, refuse
	}
	return data, nil
}

// checkAPIVersion accepts reasonix.io/plugin/v1 and its minors.
func checkAPIVersion(v string) error {
	rest, ok := strings.CutPrefix(v, "reasonix.io/plugin/v")
	major, minor, hasMinor := strings.Cut(rest, ".")
	if !ok || !isDecimal(major) || hasMinor && !isDecimal(minor) {
		return &ManifestError{Field: "apiVersion", Msg: fmt.Sprintf("%q is not a plugin API version; write %q", v, manifestAPIVersion)}
	}
	if major != "1" {
		return &ManifestError{Field: "apiVersion", Msg: fmt.Sprintf("unsupported major version %q; this host reads %q", major, manifestAPIVersion)}
	}
	return nil
}

func isDecimal(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// check applies the rules of a runtime block the strict walk does not
// know (PROTOCOL.md §3.1).
func (r *RuntimeSpec) check() error {
	if strings.TrimSpace(r.Command) == "" {
		return &ManifestError{Field: "runtime.command", Msg: "missing or blank; name the sidecar executable, e.g. \"${REASONIX_PLUGIN_ROOT}/bin/my-plugin\""}
	}
	// The command is trimmed (D8); what remains runs and is shown, so it
	// must be plain text.
	if err := checkText(strings.TrimSpace(r.Command), "runtime.command"); err != nil {
		return err
	}
	if r.Priority < -1000 || r.Priority > 1000 {
		// D15: priority is -1000..1000 inclusive.
		return &ManifestError{Field: "runtime.priority", Msg: fmt.Sprintf("%d is out of range; use -1000..1000 (lower runs earlier, default 0)", r.Priority)}
	}
	if r.TimeoutMillis < 0 {
		return &ManifestError{Field: "runtime.timeoutMillis", Msg: fmt.Sprintf("%d is negative; use 0 for the per-point defaults or a positive number of milliseconds", r.TimeoutMillis)}
	}
	lists := []struct {
		field string
		items []string
		set   bool // a repeated item is an error; args are a command line, not a set
		valid func(string) bool
		hint  string
	}{
		{"args", r.Args, false, func(s string) bool { return strings.TrimSpace(s) != "" }, "is a blank argument; remove it or give it a value"},
		{"intercepts", enumStrings(r.Intercepts...), true, func(string) bool { return true }, ""},
		// D17: each claim is a slot of the closed set or a parameterized one.
		{"replaces", r.Replaces, true, validSlot, "is not a slot; use one of " + strings.Join(bareSlots, ", ") + ", tool:<name> or provider:<name>/<model>"},
		{"capabilities", r.Capabilities, true, func(s string) bool { return slices.Contains(capabilities, s) }, "is not a capability; use interceptors, strategies, providers or ui"},
		// D9: a sidecar can only declare refs under plugin/<pluginID>/.
		{"providers", r.Providers, true, validPluginProviderRef, "is not a provider ref of the form plugin/<pluginID>/<provider>/<model>; a sidecar's providers live under its plugin ID"},
		{"uiActions", r.UIActions, true, validActionID, "is not an action ID; use lower-case letters, digits and '-', starting with a letter or digit"},
	}
	for _, l := range lists {
		for i, s := range l.items {
			field := fmt.Sprintf("runtime.%s[%d]", l.field, i)
			switch {
			case !l.valid(s):
				return &ManifestError{Field: field, Msg: strconv.Quote(s) + " " + l.hint}
			case l.set && slices.Contains(l.items[:i], s):
				return &ManifestError{Field: field, Msg: fmt.Sprintf("%q is listed twice; list it once", s)}
			}
			if err := checkText(s, field); err != nil {
				return err
			}
		}
	}
	folded := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(r.Env)) {
		field := fmt.Sprintf("runtime.env[%q]", k)
		if strings.TrimSpace(k) == "" || strings.ContainsRune(k, '=') || controlChar(k) >= 0 {
			return &ManifestError{Field: field, Msg: "not a usable variable name; use a non-blank name without '=' or control characters"}
		}
		// Windows compares variable names case-insensitively, so FOO and
		// foo would silently become one variable there.
		if prev, ok := folded[strings.ToUpper(k)]; ok {
			return &ManifestError{Field: field, Msg: fmt.Sprintf("differs only by case from %q; Windows treats them as one variable, so keep one", prev)}
		}
		folded[strings.ToUpper(k)] = k
		if strings.ContainsRune(r.Env[k], 0) {
			return &ManifestError{Field: field, Msg: "the value contains NUL, which no environment can carry"}
		}
	}
	// D9: a listed provider or action can only ever be declared with its
	// capability, so a list without it is a mistake worth naming now.
	if len(r.Providers) > 0 && !slices.Contains(r.Capabilities, "providers") {
		return &ManifestError{Field: "runtime.providers", Msg: "listed without the \"providers\" capability; add it to runtime.capabilities"}
	}
	if len(r.UIActions) > 0 && !slices.Contains(r.Capabilities, "ui") {
		return &ManifestError{Field: "runtime.uiActions", Msg: "listed without the \"ui\" capability; add it to runtime.capabilities"}
	}
	return nil
}

// expectation returns what the host sends as InitializeParams.manifest
// (D9): intercepts, replaces and capabilities, plus providers and
// uiActions when the runtime block lists them. Empty lists are omitted.
func (r *RuntimeSpec) expectation() ManifestExpectation {
	if r == nil {
		return ManifestExpectation{}
	}
	// Appending to nil copies a list, and leaves an empty one nil.
	return ManifestExpectation{
		Intercepts:   append([]string(nil), enumStrings(r.Intercepts...)...),
		Replaces:     append([]string(nil), r.Replaces...),
		Capabilities: append([]string(nil), r.Capabilities...),
		Providers:    append([]string(nil), r.Providers...),
		UIActions:    append([]string(nil), r.UIActions...),
	}
}

// capabilities are the four a runtime may declare (PROTOCOL.md §3.1).
var capabilities = []string{"interceptors", "strategies", "providers", "ui"}

// What a runtime may claim (D9, D17): the forms the manifest and the
// handshake accept for slots, provider refs and UI action IDs.

// bareSlots is the closed set of parameterless slots (PROTOCOL.md §4.5).
var bareSlots = []string{
	"system_prompt", "context", "provider_request", "provider_response",
	"compaction", "session_policy", "permission", "frontend_events",
}

// validSlot reports whether s is a replacement slot (D17): one of
// bareSlots; tool:<name> with a non-empty name free of space, tab and
// newline; or provider:<ref> with ref a validProviderRef.
func validSlot(s string) bool {
	if name, ok := strings.CutPrefix(s, "tool:"); ok {
		return name != "" && !strings.ContainsAny(name, " \t\n")
	}
	if ref, ok := strings.CutPrefix(s, "provider:"); ok {
		return validProviderRef(ref)
	}
	return slices.Contains(bareSlots, s)
}

// validProviderRef reports whether ref is a provider ref (PROTOCOL.md
// §4.5): <name>/<model> with exactly one slash and both parts non-empty,
// or plugin/<pluginID>/<name>/<model> with every part non-empty and a
// pluginID free of whitespace.
func validProviderRef(ref string) bool {
	parts := strings.Split(ref, "/")
	return !slices.Contains(parts, "") && (len(parts) == 2 || len(parts) == 4 && parts[0] == "plugin" && strings.IndexFunc(parts[1], unicode.IsSpace) < 0)
}

// validPluginProviderRef reports whether ref is a validProviderRef of the
// plugin form plugin/<pluginID>/<provider>/<model>.
func validPluginProviderRef(ref string) bool {
	return strings.HasPrefix(ref, "plugin/") && strings.Count(ref, "/") == 3 && validProviderRef(ref)
}

// validActionID reports whether id is a UI action ID: it matches
// ^[a-z0-9][a-z0-9-]*$ (D9).
func validActionID(id string) bool {
	return id != "" && id[0] != '-' && strings.Trim(id, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
}

// The FULL TRUST summary (PROTOCOL.md §9.1): what starting a plugin's
// sidecar grants, for a person to read before installing it.

// TrustSummary is what running a plugin's sidecar grants, as structured
// data: the launch identity, the exact command line, the manifest's
// environment variable names (never their values, which may be secrets)
// and every capability the runtime block declares. [TrustSummary.Text]
// renders it for a person.
type TrustSummary struct {
	// Plugin is the plugin ID (the installed name).
	Plugin string
	// ManifestName is the manifest's own name.
	ManifestName string
	// Version is the installed version, else the manifest's.
	Version string
	// Root is the absolute package root.
	Root string
	// Linked is true when the package runs in place from the directory it
	// was installed from, so later edits there change what runs.
	Linked bool
	// Command is the resolved absolute executable.
	Command string
	// Args are the arguments, verbatim.
	Args []string
	// EnvKeys are the names of the variables the manifest sets, sorted.
	EnvKeys []string
	// Required is runtime.required.
	Required bool
	// Priority is runtime.priority.
	Priority int
	// TimeoutMillis is runtime.timeoutMillis as written; 0 means per-point
	// defaults. Text shows it clamped to MaxTimeoutMillis, as dispatch
	// applies it (D18).
	TimeoutMillis int64
	// MaxTimeoutMillis is the clamp of the host that will run the plugin
	// (its Host.MaxInterceptTimeout); 0 means the default 60000 ms. The
	// summary functions leave it 0; a host with its own clamp sets it
	// before calling Text.
	MaxTimeoutMillis int64
	// Intercepts are the hook points the sidecar may intercept.
	Intercepts []Point
	// Slots are the replacement slots it claims.
	Slots []string
	// Capabilities are the declared capabilities.
	Capabilities []string
	// Providers are the listed provider refs; nil when not listed.
	Providers []string
	// UIActions are the listed UI action IDs; nil when not listed.
	UIActions []string
	// Portability is empty, or the line "not loadable by upstream v1
	// hosts: runtime.providers, runtime.uiActions" naming the members of
	// this project's extension the manifest uses, which upstream hosts
	// refuse (D9).
	Portability string
}

// trust returns the FULL TRUST summary of the spec's plugin.
func (s *launchSpec) trust() TrustSummary {
	rt := s.Runtime
	var ext []string
	if rt.Providers != nil {
		ext = append(ext, "runtime.providers")
	}
	if rt.UIActions != nil {
		ext = append(ext, "runtime.uiActions")
	}
	if ext != nil {
		ext[0] = "not loadable by upstream v1 hosts: " + ext[0]
	}
	return TrustSummary{
		Portability:   strings.Join(ext, ", "),
		Plugin:        s.ID,
		ManifestName:  s.Manifest.Name,
		Version:       s.Version,
		Root:          s.Root,
		Linked:        s.Linked,
		Command:       s.Command,
		Args:          append([]string(nil), s.Args...),
		EnvKeys:       slices.Sorted(maps.Keys(rt.Env)),
		Required:      rt.Required,
		Priority:      rt.Priority,
		TimeoutMillis: rt.TimeoutMillis,
		Intercepts:    append([]Point(nil), rt.Intercepts...),
		Slots:         append([]string(nil), rt.Replaces...),
		Capabilities:  append([]string(nil), rt.Capabilities...),
		Providers:     append([]string(nil), rt.Providers...),
		UIActions:     append([]string(nil), rt.UIActions...),
	}
}

// TrustPlugin returns the FULL TRUST summary of the plugin in pluginDir
// as it would run when installed as pluginID (empty: the manifest name),
// before it is installed. It applies the launch gate's manifest and
// command rules, so a plugin the gate would refuse for its manifest or
// command yields the same [*StartError] here.
func TrustPlugin(pluginDir, pluginID string) (TrustSummary, error) {
	root, err := filepath.Abs(pluginDir)
	if err != nil {
		return TrustSummary{}, err
	}
	m, err := loadManifest(root)
	if err != nil {
		return TrustSummary{}, err
	}
	pluginID = cmp.Or(pluginID, m.Name)
	if m.Runtime == nil {
		return TrustSummary{}, &StartError{Plugin: pluginID, Stage: "launch", Err: fmt.Errorf("%w; nothing would run, so nothing needs trust", ErrNoRuntime)}
	}
	spec, err := newLaunchSpec(pluginID, root, m.Version, false, m)
	if err != nil {
		return TrustSummary{}, err
	}
	return spec.trust(), nil
}

// Text renders the summary as a block for a person, deterministic for
// given data. It opens with the FULL TRUST heading and what it means, then
// lists the command line, the hook points, the slots and the provider and
// UI capabilities. Every value that came from the manifest or the package
// record is quoted in Go syntax (strconv.Quote), so a control character
// or a look-alike row shows up escaped inside its quotes instead of
// acting on the terminal; hook points and capabilities, which are checked
// against closed sets, are shown as they are.
func (t TrustSummary) Text() string {
	var b strings.Builder
	version := "unversioned"
	if t.Version != "" {
		version = "version " + strconv.Quote(t.Version)
	}
	fmt.Fprintf(&b, "FULL TRUST: plugin %q, %s\n", t.Plugin, version)
	b.WriteString("Its sidecar runs outside the sandbox, as you, with your full environment\n")
	b.WriteString("(including any credentials in it). It can read and change whatever you can.\n")
	b.WriteString("Installing and enabling the plugin is the consent; there is no further prompt.\n\n")
	row := func(label, value string) { fmt.Fprintf(&b, "  %-16s%s\n", label+":", value) }
	if t.ManifestName != "" && t.ManifestName != t.Plugin {
		row("manifest name", strconv.Quote(t.ManifestName))
	}
	row("root", strconv.Quote(t.Root))
	if t.Linked {
		row("linked", "yes: runs in place from that directory; changes there apply at the next launch")
	}
	row("command", strconv.Quote(t.Command))
	row("args", quotedList(t.Args))
	for i, a := range t.Args {
		if strings.Contains(a, rootVariable) {
			row("warning", fmt.Sprintf("args[%d] holds the literal %s: args are passed verbatim (only the command's prefix is expanded), so the sidecar receives it unexpanded", i, rootVariable))
		}
	}
	row("sets env", quotedList(t.EnvKeys))
	required := "no"
	if t.Required {
		required = "yes: its failure fails startup and every operation it joins"
	}
	row("required", required)
	row("priority", fmt.Sprint(t.Priority))
	maxTimeoutMillis := cmp.Or(max(t.MaxTimeoutMillis, 0), defaultMaxInterceptTimeout.Milliseconds()) // dispatch's default clamp (D18)
	switch {
	case t.TimeoutMillis > maxTimeoutMillis:
		row("timeout", fmt.Sprintf("%d ms per call (the manifest asks for %d ms; clamped to %d ms)", maxTimeoutMillis, t.TimeoutMillis, maxTimeoutMillis))
	case t.TimeoutMillis > 0:
		row("timeout", fmt.Sprintf("%d ms per call", t.TimeoutMillis))
	default:
		row("timeout", "per-point defaults")
	}
	row("intercepts", trustList(enumStrings(t.Intercepts...)))
	row("slots", quotedList(t.Slots))
	row("capabilities", trustList(t.Capabilities))
	// A provider or UI row: none without the capability, else the listed
	// items or, when none are listed, what the capability alone allows.
	granted := func(capability string, items []string, unlisted, effect string) string {
		switch {
		case !slices.Contains(t.Capabilities, capability):
			return "none"
		case len(items) == 0:
			return unlisted + effect
		}
		return quotedList(items) + effect
	}
	row("providers", granted("providers", t.Providers, fmt.Sprintf("any model under %q (none listed)", "plugin/"+t.Plugin+"/"), ""))
	row("ui actions", granted("ui", t.UIActions, "any (none listed)", "; may publish UI and ask you questions"))
	if t.Portability != "" {
		row("portability", t.Portability)
	}
	return b.String()
}

// trustList joins items that are plain by construction (hook points,
// capabilities), or says none.
func trustList(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ", ")
}

// quotedList quotes each item and joins them, or says none.
func quotedList(items []string) string {
	quoted := make([]string, len(items))
	for i, item := range items {
		quoted[i] = strconv.Quote(item)
	}
	return trustList(quoted)
}
