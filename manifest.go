package extension

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ManifestFile is the name of a plugin's manifest inside its directory.
const ManifestFile = "reasonix-plugin.json"

// ManifestAPIVersion opts a manifest into the v1 format, the only format
// that can declare a runtime (D8). A minor such as "reasonix.io/plugin/v1.1"
// is read as v1; any other major is rejected.
const ManifestAPIVersion = "reasonix.io/plugin/v1"

// maxManifestBytes bounds the manifest file [LoadManifest] reads (1 MiB).
const maxManifestBytes = 1 << 20

// Manifest is a parsed reasonix-plugin.json (CONTRACT-NOTES §12.1).
//
// A manifest with "apiVersion" is a v1 manifest and is read strictly: an
// unknown member at the root or in runtime, a duplicate member, a member
// whose name matches a field only case-insensitively, a null, or a value of
// the wrong type is a [*ManifestError] naming the member (D3).
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
	// APIVersion is the apiVersion as written ([ManifestAPIVersion] or a
	// v1 minor); empty for a legacy manifest.
	APIVersion string
	// Name is the plugin's own name (required, non-blank). The plugin ID a
	// host uses is the installed name, which may differ (CONTRACT-NOTES §4.1).
	Name string
	// Version is the plugin's version; optional.
	Version string
	// Description is a one-line description; optional.
	Description string
	// Contributes is the contributes object verbatim, or nil when absent.
	// Its content is free-form for this package; it must be an object and
	// may not repeat a member name anywhere inside.
	Contributes json.RawMessage
	// Runtime is the sidecar declaration, or nil for a plugin without one.
	Runtime *RuntimeSpec
}

// RuntimeSpec is the runtime block of a v1 manifest: every field of
// CONTRACT-NOTES §12.1 plus the two optional lists of D9. Nil slices and
// maps mean the member was absent.
type RuntimeSpec struct {
	// Command is the sidecar executable as written: non-blank once
	// trimmed, and free of control characters (NUL included) inside. It
	// may start with ${REASONIX_PLUGIN_ROOT}; the launch gate resolves it to
	// an absolute, non-shell path (CONTRACT-NOTES §4.1).
	Command string
	// Args are passed verbatim as argv[1:], never through a shell; each is
	// non-blank and free of control characters. Unlike the other lists,
	// args may repeat ("-v", "-v"): they are a command line, not a set.
	Args []string
	// Env holds variables layered over the inherited environment. Keys are
	// non-blank, contain neither '=' nor a control character, and no two
	// differ only by case (Windows would merge them). Values may hold
	// anything but NUL.
	Env map[string]string
	// Required makes the plugin required-class (D10, D19).
	Required bool
	// Priority orders interceptor chains, lower first: -1000..1000,
	// default 0 (D15).
	Priority int
	// Intercepts lists the hook points the plugin may subscribe to.
	Intercepts []Point
	// Replaces lists the slots the plugin claims (D17); see [ValidSlot].
	Replaces []string
	// Capabilities lists interceptors, strategies, providers and ui.
	Capabilities []string
	// TimeoutMillis, when > 0, replaces every point's default timeout
	// (clamped to 60 s at dispatch, D18); 0 keeps the defaults.
	TimeoutMillis int64
	// Providers optionally lists the provider refs the sidecar may declare
	// (D9): each a plugin ref plugin/<pluginID>/<provider>/<model>, the
	// only form a sidecar can declare (a short <provider>/<model> could
	// never match). Non-empty only with the providers capability.
	Providers []string
	// UIActions optionally lists the UI action IDs the sidecar may declare
	// (D9); see [ValidActionID]. Non-empty only with the ui capability.
	UIActions []string
}

// ManifestError reports a manifest that cannot be used, naming the file,
// the member and what to fix.
type ManifestError struct {
	// Path is the manifest file, when it was read from disk.
	Path string
	// Field is the offending member as a path such as "runtime.priority"
	// or "runtime.args[1]"; empty when the document as a whole is wrong.
	Field string
	// Msg says what is wrong and what to do.
	Msg string
	// Err is the underlying cause (an I/O error), if any.
	Err error
}

// Error returns "<file>: <field>: <message>".
func (e *ManifestError) Error() string {
	file := e.Path
	if file == "" {
		file = ManifestFile
	}
	if e.Field == "" {
		return file + ": " + e.Msg
	}
	return file + ": " + e.Field + ": " + e.Msg
}

// Unwrap returns the underlying cause, if any.
func (e *ManifestError) Unwrap() error { return e.Err }

// LoadManifest reads and parses <pluginDir>/reasonix-plugin.json.
func LoadManifest(pluginDir string) (*Manifest, error) {
	path := filepath.Join(pluginDir, ManifestFile)
	data, err := readBounded(path, maxManifestBytes)
	if err != nil {
		return nil, &ManifestError{Path: path, Msg: "cannot read the manifest: " + err.Error(), Err: err}
	}
	m, err := ParseManifest(data)
	if err != nil {
		var me *ManifestError
		if errors.As(err, &me) {
			me.Path = path
		}
		return nil, err
	}
	return m, nil
}

// readBounded reads a whole regular file that must not exceed limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
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

// manifestRootFields are the members of a v1 manifest's root object.
var manifestRootFields = []string{"apiVersion", "name", "version", "description", "contributes", "runtime"}

// runtimeFields are the members of a v1 runtime block.
var runtimeFields = []string{
	"command", "args", "env", "required", "priority", "intercepts", "replaces",
	"capabilities", "timeoutMillis", "providers", "uiActions",
}

// documentMembers checks that data is exactly one JSON object and returns
// its members strictly (exact names, no duplicates); what names the
// document in errors.
func documentMembers(data []byte, what string) (objMembers, error) {
	s := scanner{data: data}
	if s.peek() != '{' {
		return nil, &ManifestError{Msg: what + " must be one JSON object"}
	}
	if _, err := s.value(nil); err != nil {
		return nil, &ManifestError{Msg: "not valid JSON: " + err.Error()}
	}
	if err := s.end(); err != nil {
		return nil, &ManifestError{Msg: "not valid JSON: " + err.Error()}
	}
	return objectMembers(data, "")
}

// ParseManifest parses the bytes of a reasonix-plugin.json. Errors are
// [*ManifestError] values naming the offending member.
func ParseManifest(data []byte) (*Manifest, error) {
	if len(data) > maxManifestBytes {
		return nil, &ManifestError{Msg: fmt.Sprintf("the manifest is larger than %d bytes", maxManifestBytes)}
	}
	root, err := documentMembers(data, "the manifest")
	if err != nil {
		return nil, err
	}
	if api := root.get("apiVersion"); api != nil {
		return parseV1(root, api)
	}
	return parseLegacy(root)
}

// parseV1 reads a v1 manifest strictly.
func parseV1(root objMembers, api []byte) (*Manifest, error) {
	m := new(Manifest)
	var err error
	if m.APIVersion, err = stringValue(api, "apiVersion"); err != nil {
		return nil, err
	}
	if err := checkAPIVersion(m.APIVersion); err != nil {
		return nil, err
	}
	for _, mem := range root {
		field := fieldName(mem.name)
		switch mem.name {
		case "apiVersion":
		case "name":
			m.Name, err = textValue(mem.raw, field)
		case "version":
			m.Version, err = textValue(mem.raw, field)
		case "description":
			m.Description, err = textValue(mem.raw, field)
		case "contributes":
			m.Contributes, err = freeFormObject(mem.raw, field)
		case "runtime":
			m.Runtime, err = parseRuntime(mem.raw)
		default:
			err = unknownField(field, mem.name, manifestRootFields)
		}
		if err != nil {
			return nil, err
		}
	}
	if strings.TrimSpace(m.Name) == "" {
		return nil, &ManifestError{Field: "name", Msg: "missing or blank; every manifest names its plugin"}
	}
	return m, nil
}

// checkAPIVersion accepts reasonix.io/plugin/v1 and its minors.
func checkAPIVersion(v string) error {
	rest, ok := strings.CutPrefix(v, "reasonix.io/plugin/v")
	major, minor, hasMinor := strings.Cut(rest, ".")
	if !ok || !isDecimal(major) || hasMinor && !isDecimal(minor) {
		return &ManifestError{Field: "apiVersion", Msg: fmt.Sprintf("%q is not a plugin API version; write %q", v, ManifestAPIVersion)}
	}
	if major != "1" {
		return &ManifestError{Field: "apiVersion", Msg: fmt.Sprintf("unsupported major version %q; this host reads %q", major, ManifestAPIVersion)}
	}
	return nil
}

func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseLegacy reads a manifest without apiVersion: name, version,
// description and contributes when they have the right type; no runtime.
func parseLegacy(root objMembers) (*Manifest, error) {
	m := new(Manifest)
	for _, mem := range root {
		switch {
		case mem.name == "runtime":
			// D8: only a v1 manifest can declare a runtime.
			return nil, &ManifestError{Field: "runtime", Msg: fmt.Sprintf("a runtime needs \"apiVersion\": %q; add it to the manifest", ManifestAPIVersion)}
		case strings.EqualFold(mem.name, "apiVersion") || strings.EqualFold(mem.name, "runtime"):
			return nil, &ManifestError{Field: fieldName(mem.name), Msg: "unknown field; names are case-sensitive: did you mean " + strconv.Quote(closestName(mem.name, manifestRootFields)) + "?"}
		case mem.name == "name":
			m.Name, _ = plainString(mem.raw)
		case mem.name == "version":
			m.Version, _ = plainString(mem.raw)
		case mem.name == "description":
			m.Description, _ = plainString(mem.raw)
		case mem.name == "contributes" && mem.raw[0] == '{':
			m.Contributes = cloneRaw(mem.raw)
		}
	}
	if strings.TrimSpace(m.Name) == "" {
		return nil, &ManifestError{Field: "name", Msg: "missing or blank; every manifest names its plugin"}
	}
	// Lenient about types, never about what a person will read.
	for _, f := range []struct{ name, value string }{{"name", m.Name}, {"version", m.Version}, {"description", m.Description}} {
		if err := checkText(f.value, f.name); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// parseRuntime reads the runtime block of a v1 manifest.
func parseRuntime(raw []byte) (*RuntimeSpec, error) {
	mems, err := objectMembers(raw, "runtime")
	if err != nil {
		return nil, err
	}
	r := new(RuntimeSpec)
	hasCommand := false
	for _, mem := range mems {
		field := "runtime." + fieldName(mem.name)
		switch mem.name {
		case "command":
			hasCommand = true
			if r.Command, err = stringValue(mem.raw, field); err == nil && strings.TrimSpace(r.Command) == "" {
				err = &ManifestError{Field: field, Msg: "blank; name the sidecar executable, e.g. \"${REASONIX_PLUGIN_ROOT}/bin/my-plugin\""}
			} else if err == nil {
				// The command is trimmed (CONTRACT-NOTES §4.1); what
				// remains runs and is shown, so it must be plain text.
				err = checkText(strings.TrimSpace(r.Command), field)
			}
		case "args":
			// CONTRACT-NOTES §12.1: args are argv verbatim, so a repeat is kept.
			r.Args, err = stringList(mem.raw, field, listArgv, nonBlank, "is a blank argument; remove it or give it a value")
		case "env":
			r.Env, err = envObject(mem.raw, field)
		case "required":
			r.Required, err = boolValue(mem.raw, field)
		case "priority":
			var p int64
			if p, err = intValue(mem.raw, field); err == nil && (p < -1000 || p > 1000) {
				// D15: priority is -1000..1000 inclusive.
				err = &ManifestError{Field: field, Msg: fmt.Sprintf("%d is out of range; use -1000..1000 (lower runs earlier, default 0)", p)}
			}
			r.Priority = int(p)
		case "intercepts":
			var ps []string
			ps, err = stringList(mem.raw, field, listSet, func(s string) bool { return Point(s).Valid() }, "is not a hook point; use one of "+joinPoints())
			for _, p := range ps {
				r.Intercepts = append(r.Intercepts, Point(p))
			}
		case "replaces":
			// D17: each claim is a slot of the closed set or a parameterized one.
			r.Replaces, err = stringList(mem.raw, field, listSet, ValidSlot, "is not a slot; use one of "+strings.Join(bareSlots(), ", ")+", tool:<name> or provider:<name>/<model>")
		case "capabilities":
			r.Capabilities, err = stringList(mem.raw, field, listSet, validCapability, "is not a capability; use interceptors, strategies, providers or ui")
		case "timeoutMillis":
			if r.TimeoutMillis, err = intValue(mem.raw, field); err == nil && r.TimeoutMillis < 0 {
				err = &ManifestError{Field: field, Msg: fmt.Sprintf("%d is negative; use 0 for the per-point defaults or a positive number of milliseconds", r.TimeoutMillis)}
			}
		case "providers":
			// D9: a sidecar can only declare refs under plugin/<pluginID>/,
			// so a short <provider>/<model> here could never match.
			r.Providers, err = stringList(mem.raw, field, listSet, validPluginProviderRef, "is not a provider ref of the form plugin/<pluginID>/<provider>/<model>; a sidecar's providers live under its plugin ID")
		case "uiActions":
			// D9: action IDs match ^[a-z0-9][a-z0-9-]*$.
			r.UIActions, err = stringList(mem.raw, field, listSet, ValidActionID, "is not an action ID; use lower-case letters, digits and '-', starting with a letter or digit")
		default:
			err = unknownField(field, mem.name, runtimeFields)
		}
		if err != nil {
			return nil, err
		}
	}
	if !hasCommand {
		return nil, &ManifestError{Field: "runtime.command", Msg: "missing; a runtime names its sidecar executable, e.g. \"${REASONIX_PLUGIN_ROOT}/bin/my-plugin\""}
	}
	// D9: a listed provider or action can only ever be declared with its
	// capability, so a list without it is a mistake worth naming now.
	if len(r.Providers) > 0 && !r.hasCapability("providers") {
		return nil, &ManifestError{Field: "runtime.providers", Msg: "listed without the \"providers\" capability; add it to runtime.capabilities"}
	}
	if len(r.UIActions) > 0 && !r.hasCapability("ui") {
		return nil, &ManifestError{Field: "runtime.uiActions", Msg: "listed without the \"ui\" capability; add it to runtime.capabilities"}
	}
	return r, nil
}

func (r *RuntimeSpec) hasCapability(c string) bool {
	for _, have := range r.Capabilities {
		if have == c {
			return true
		}
	}
	return false
}

// Expectation returns what the host sends as InitializeParams.manifest
// (D9): intercepts, replaces and capabilities, plus providers and
// uiActions when the runtime block lists them. Empty lists are omitted.
func (r *RuntimeSpec) Expectation() ManifestExpectation {
	var e ManifestExpectation
	if r == nil {
		return e
	}
	for _, p := range r.Intercepts {
		e.Intercepts = append(e.Intercepts, string(p))
	}
	e.Replaces = cloneList(r.Replaces)
	e.Capabilities = cloneList(r.Capabilities)
	e.Providers = cloneList(r.Providers)
	e.UIActions = cloneList(r.UIActions)
	return e
}

// cloneList copies s, returning nil for an empty list.
func cloneList(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return append([]string(nil), s...)
}

func nonBlank(s string) bool { return strings.TrimSpace(s) != "" }

func validCapability(c string) bool {
	switch c {
	case "interceptors", "strategies", "providers", "ui":
		return true
	}
	return false
}

func joinPoints() string {
	var b strings.Builder
	for i, p := range Points() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(p))
	}
	return b.String()
}

// A strict walk over an already syntax-checked document (D3). Each level
// is read with the package's scanner, so member names are compared
// exactly, never case-insensitively as encoding/json would.

// objMember is one member of an object, in document order.
type objMember struct {
	name string
	raw  []byte
}

type objMembers []objMember

// get returns the value of the member named exactly name, or nil.
func (ms objMembers) get(name string) []byte {
	for _, m := range ms {
		if m.name == name {
			return m.raw
		}
	}
	return nil
}

// objectMembers reads raw as one object; a repeated member name is an
// error naming it (D3).
func objectMembers(raw []byte, field string) (objMembers, error) {
	s := scanner{data: raw}
	if s.peek() != '{' {
		return nil, typeError(raw, field, "an object")
	}
	var dup dupState
	var out objMembers
	more, err := s.openObject()
	for more && err == nil {
		var key, v []byte
		var escaped bool
		if key, escaped, err = s.key(); err != nil {
			break
		}
		name := unquote(key, escaped)
		if dup.seen(0, key, escaped) {
			// D3: a repeated member is ambiguous.
			return nil, &ManifestError{Field: joinField(field, name), Msg: "duplicate member; give each field once"}
		}
		if v, err = s.value(nil); err != nil {
			break
		}
		out = append(out, objMember{name: name, raw: v})
		more, err = s.nextMember()
	}
	if err != nil {
		return nil, &ManifestError{Field: field, Msg: "not valid JSON: " + err.Error()}
	}
	return out, nil
}

func joinField(parent, name string) string {
	if parent == "" {
		return fieldName(name)
	}
	return parent + "." + fieldName(name)
}

// unknownField names an unknown member, and the intended one when the name
// differs from a known field only by case (D3).
func unknownField(field, name string, known []string) error {
	if c := closestName(name, known); c != "" {
		return &ManifestError{Field: field, Msg: fmt.Sprintf("unknown field; names are case-sensitive: did you mean %q?", c)}
	}
	return &ManifestError{Field: field, Msg: "unknown field; the known fields are " + strings.Join(known, ", ")}
}

func closestName(name string, known []string) string {
	for _, k := range known {
		if strings.EqualFold(k, name) {
			return k
		}
	}
	return ""
}

// typeError reports a value of the wrong JSON type, with a hint for null.
func typeError(raw []byte, field, want string) error {
	if len(raw) > 0 && raw[0] == 'n' {
		return &ManifestError{Field: field, Msg: "null is not allowed; omit the field instead"}
	}
	got := "nothing"
	if len(raw) > 0 {
		got = kindOf(raw[0]).String()
		if got == vInteger.String() {
			got = "a number"
		}
	}
	return &ManifestError{Field: field, Msg: fmt.Sprintf("must be %s, not %s", want, got)}
}

func stringValue(raw []byte, field string) (string, error) {
	s, ok := plainString(raw)
	if !ok {
		return "", typeError(raw, field, "a string")
	}
	return s, nil
}

// textValue reads a string a person will read: no control characters.
func textValue(raw []byte, field string) (string, error) {
	s, err := stringValue(raw, field)
	if err == nil {
		err = checkText(s, field)
	}
	return s, err
}

func boolValue(raw []byte, field string) (bool, error) {
	switch string(raw) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, typeError(raw, field, "true or false")
}

// intValue reads an integer literal: no fraction, no exponent, within int64 (D3).
func intValue(raw []byte, field string) (int64, error) {
	s := scanner{data: raw}
	if c := s.peek(); c != '-' && (c < '0' || c > '9') {
		return 0, typeError(raw, field, "an integer")
	}
	n, err := s.num()
	if err != nil || n.fraction || n.exponent {
		return 0, &ManifestError{Field: field, Msg: fmt.Sprintf("%s is not an integer; write it without a fraction or exponent", raw)}
	}
	i, ok := parseInt64(n.raw)
	if !ok {
		return 0, &ManifestError{Field: field, Msg: fmt.Sprintf("%s is out of range", raw)}
	}
	return i, nil
}

// listKind says whether a string list is a set (a repeated element is an
// error) or an argv (repeats are kept verbatim).
type listKind bool

const (
	listSet  listKind = true
	listArgv listKind = false
)

// stringList reads an array of strings; an element that is not valid is
// reported as "<quoted element> <hint>", and one that holds a control
// character is rejected. In a set, a repeated element is rejected.
func stringList(raw []byte, field string, kind listKind, valid func(string) bool, hint string) ([]string, error) {
	s := scanner{data: raw}
	if s.peek() != '[' {
		return nil, typeError(raw, field, "an array of strings")
	}
	out := []string{}
	more, err := s.openArray()
	for i := 0; more && err == nil; i++ {
		elem := fmt.Sprintf("%s[%d]", field, i)
		var v []byte
		if v, err = s.value(nil); err != nil {
			break
		}
		str, ok := plainString(v)
		if !ok {
			return nil, typeError(v, elem, "a string")
		}
		if !valid(str) {
			return nil, &ManifestError{Field: elem, Msg: strconv.Quote(str) + " " + hint}
		}
		if err := checkText(str, elem); err != nil {
			return nil, err
		}
		if kind == listSet {
			for _, prev := range out {
				if prev == str {
					return nil, &ManifestError{Field: elem, Msg: fmt.Sprintf("%q is listed twice; list it once", str)}
				}
			}
		}
		out = append(out, str)
		more, err = s.nextElement()
	}
	if err != nil {
		return nil, &ManifestError{Field: field, Msg: "not valid JSON: " + err.Error()}
	}
	return out, nil
}

// envObject reads runtime.env: an object of strings with usable keys, no
// two of which differ only by case.
func envObject(raw []byte, field string) (map[string]string, error) {
	mems, err := objectMembers(raw, field)
	if err != nil {
		return nil, err
	}
	env := make(map[string]string, len(mems))
	folded := make(map[string]string, len(mems))
	for _, mem := range mems {
		f := fmt.Sprintf("%s[%q]", field, mem.name)
		if strings.TrimSpace(mem.name) == "" || strings.ContainsRune(mem.name, '=') || controlChar(mem.name) >= 0 {
			return nil, &ManifestError{Field: f, Msg: "not a usable variable name; use a non-blank name without '=' or control characters"}
		}
		// Windows compares variable names case-insensitively, so FOO and
		// foo would silently become one variable there.
		if prev, ok := folded[strings.ToUpper(mem.name)]; ok {
			return nil, &ManifestError{Field: f, Msg: fmt.Sprintf("differs only by case from %q; Windows treats them as one variable, so keep one", prev)}
		}
		folded[strings.ToUpper(mem.name)] = mem.name
		v, err := stringValue(mem.raw, f)
		if err != nil {
			return nil, err
		}
		if strings.ContainsRune(v, 0) {
			return nil, &ManifestError{Field: f, Msg: "the value contains NUL, which no environment can carry"}
		}
		env[mem.name] = v
	}
	return env, nil
}

// freeFormObject checks that raw is an object without a repeated member
// name at any depth (D3) and returns a copy.
func freeFormObject(raw []byte, field string) (json.RawMessage, error) {
	if raw[0] != '{' {
		return nil, typeError(raw, field, "an object")
	}
	s := scanner{data: raw}
	if _, err := s.value(&dupState{}); err != nil {
		msg := err.Error()
		var se *syntaxError
		if errors.As(err, &se) {
			msg = se.msg
		}
		return nil, &ManifestError{Field: field, Msg: msg + "; give each member once"}
	}
	return cloneRaw(raw), nil
}
