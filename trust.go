package extension

// Trust: who may run and what running grants. A sidecar is not sandboxed:
// it runs as the user, outside any tool sandbox, with the host's full
// environment. The launch gate below decides which installed plugins may
// start (D8); the FULL TRUST summary says what starting one grants.

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// The launch gate (D8, CONTRACT-NOTES §4.1).

// LaunchError is the launch gate's refusal of one plugin. Nothing was
// started. Cause wraps one of the sentinel errors (or a *ManifestError)
// and says what to do.
type LaunchError struct {
	// Plugin is the plugin ID (the installed name).
	Plugin string
	// Required is the manifest's runtime.required, so a caller can fail a
	// generation on a refused required plugin (D10). When the manifest is
	// readable JSON but not a valid manifest, it is still true if the
	// document says runtime.required is true: a required plugin whose
	// manifest broke fails closed instead of being skipped as optional.
	Required bool
	// Cause is the reason for the refusal.
	Cause error
}

// Error names the plugin and the cause.
func (e *LaunchError) Error() string {
	return fmt.Sprintf("extension %q cannot be launched: %v", e.Plugin, e.Cause)
}

// Unwrap returns the cause.
func (e *LaunchError) Unwrap() error { return e.Cause }

// LaunchSpec is everything the process layer needs to start one sidecar.
// Only the launch gate builds one.
type LaunchSpec struct {
	// ID is the plugin ID: the installed name (CONTRACT-NOTES §4.1).
	ID string
	// Root is the absolute package root; the sidecar's working directory.
	Root string
	// Version is the installed version, else the manifest's.
	Version string
	// Linked is true when the package runs in place from the directory it
	// was installed from (InstallOptions.Link), not from a copy.
	Linked bool
	// Manifest is the parsed manifest.
	Manifest *Manifest
	// Runtime is Manifest.Runtime, never nil.
	Runtime *RuntimeSpec
	// Command is the resolved absolute executable path.
	Command string
	// Args are the arguments after argv[0], verbatim.
	Args []string
}

// Env returns the sidecar's environment (CONTRACT-NOTES §4.1): base
// unfiltered (normally os.Environ()), then the manifest's env in key
// order, then REASONIX_PLUGIN_ROOT, REASONIX_PLUGIN_NAME and
// REASONIX_PLUGIN_VERSION. Later entries win and each key appears once,
// at its first position, so the manifest cannot forge the identity
// variables. Keys compare case-insensitively on Windows.
func (s *LaunchSpec) Env(base []string) []string {
	out := make([]string, 0, len(base)+len(s.Runtime.Env)+3)
	index := make(map[string]int, cap(out))
	add := func(kv string) {
		k := envKey(kv)
		if i, ok := index[k]; ok {
			out[i] = kv
			return
		}
		index[k] = len(out)
		out = append(out, kv)
	}
	for _, kv := range base {
		add(kv)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Runtime.Env)) {
		add(k + "=" + s.Runtime.Env[k])
	}
	// D8: the identity variables come last and win over the manifest.
	add("REASONIX_PLUGIN_ROOT=" + s.Root)
	add("REASONIX_PLUGIN_NAME=" + s.ID)
	add("REASONIX_PLUGIN_VERSION=" + s.Version)
	return out
}

// envKey returns the name of a KEY=value entry; a leading '=' belongs to
// the name (Windows has "=C:=C:\" entries).
func envKey(kv string) string {
	k := kv
	if i := strings.IndexByte(kv[min(1, len(kv)):], '='); i >= 0 {
		k = kv[:i+min(1, len(kv))]
	}
	if runtime.GOOS == "windows" {
		k = strings.ToUpper(k)
	}
	return k
}

// ResolveLaunch runs the launch gate for the installed plugin id (D8). It
// returns a spec only for a plugin that is recorded in
// <home>/plugin-packages.json, enabled, user-level, whose manifest is v1
// with a runtime, and whose command resolves to an absolute path that is
// not a shell. Every refusal is a [*LaunchError] wrapping
// [ErrNotInstalled], [ErrDisabled], [ErrNoRuntime], [ErrProjectRuntime],
// [ErrShellCommand], [ErrBareCommand], [ErrRelativeCommand], a
// [*ManifestError] or a [*PackagesError]. A package root inside
// <workspaceRoot>/.reasonix is project configuration; an empty
// workspaceRoot skips that check. Nothing is started: this layer has no
// process code.
//
// The project-level check compares paths exactly after resolving
// symlinks; on a case-insensitive filesystem a root under
// <workspaceRoot>/.Reasonix names the same directory but is not
// recognized, so that check is weaker there.
func ResolveLaunch(home, id, workspaceRoot string) (*LaunchSpec, error) {
	pkgs, err := LoadPackages(home)
	if err != nil {
		return nil, &LaunchError{Plugin: id, Cause: err}
	}
	e := pkgs.Entry(id)
	if e == nil {
		// D8: only an installed plugin launches.
		return nil, &LaunchError{Plugin: id, Cause: fmt.Errorf("%w in %s; install it first", ErrNotInstalled, filepath.Join(home, PackagesFile))}
	}
	spec, _, err := launchGate(home, e, workspaceRoot)
	return spec, err
}

// LaunchablePlugins runs the launch gate over every installed package in
// installed order (D10). It returns the specs of the enabled packages that
// pass, and one error per refused package: a [*LaunchError] for an enabled
// package that declares (or tries to declare) a runtime but may not
// launch. Disabled packages and packages without a runtime are not
// runtime plugins and are skipped silently. A plugin-packages.json that
// cannot be read is returned as the only error, a [*PackagesError].
func LaunchablePlugins(home, workspaceRoot string) ([]*LaunchSpec, []error) {
	specs, refused, _ := launchablePlugins(home, workspaceRoot)
	return specs, refused
}

// launchablePlugins is LaunchablePlugins that also returns each installed
// plugin's position in the record it read, so a caller orders by the same
// read of plugin-packages.json the gate used.
func launchablePlugins(home, workspaceRoot string) ([]*LaunchSpec, []error, map[string]int) {
	pkgs, err := LoadPackages(home)
	if err != nil {
		return nil, []error{err}, nil
	}
	order := make(map[string]int, len(pkgs.Entries))
	for i, e := range pkgs.Entries {
		order[e.Name] = i
	}
	var specs []*LaunchSpec
	var refused []error
	for i := range pkgs.Entries {
		e := &pkgs.Entries[i]
		if !e.Enabled {
			continue
		}
		spec, runtimeless, err := launchGate(home, e, workspaceRoot)
		switch {
		case err == nil:
			specs = append(specs, spec)
		case !runtimeless:
			refused = append(refused, err)
		}
	}
	return specs, refused, order
}

// launchGate checks one entry. runtimeless reports a refusal only because the
// manifest has no runtime.
func launchGate(home string, e *PackageEntry, workspaceRoot string) (spec *LaunchSpec, runtimeless bool, err error) {
	refuse := func(required bool, format string, args ...any) (*LaunchSpec, bool, error) {
		return nil, false, &LaunchError{Plugin: e.Name, Required: required, Cause: fmt.Errorf(format, args...)}
	}
	if !e.Enabled {
		// D8: a disabled package never launches.
		return refuse(false, "%w; enable it to launch its runtime", ErrDisabled)
	}
	root := e.RootPath(home)
	m, err := LoadManifest(root)
	if err != nil {
		return nil, false, &LaunchError{Plugin: e.Name, Required: claimsRequired(root), Cause: err}
	}
	rt := m.Runtime
	if rt == nil {
		// D8: only a v1 manifest with a runtime block has a sidecar.
		_, _, err := refuse(false, "%w; a sidecar needs \"apiVersion\": %q and a runtime block", ErrNoRuntime, ManifestAPIVersion)
		return nil, true, err
	}
	// D8: project configuration can never declare a runtime.
	if e.Scope == ScopeProject {
		return refuse(rt.Required, "%w: the package was installed at project level; install it at user level to run its sidecar", ErrProjectRuntime)
	}
	if workspaceRoot != "" && insideDir(root, filepath.Join(workspaceRoot, projectConfigDir)) {
		return refuse(rt.Required, "%w: the package root %s is inside the workspace's %s directory; install it at user level to run its sidecar", ErrProjectRuntime, root, projectConfigDir)
	}
	command, err := resolveCommand(root, rt.Command)
	if err != nil {
		return nil, false, &LaunchError{Plugin: e.Name, Required: rt.Required, Cause: err}
	}
	version := e.Version
	if version == "" {
		version = m.Version
	}
	return &LaunchSpec{
		ID:       e.Name,
		Root:     root,
		Version:  version,
		Linked:   e.Linked,
		Manifest: m,
		Runtime:  rt,
		Command:  command,
		Args:     append([]string(nil), rt.Args...),
	}, false, nil
}

// claimsRequired reports whether the manifest under root, which failed the
// strict parse, still reads as JSON with runtime.required set to true. It
// is read leniently on purpose: the strict reading has already refused it,
// and only this one flag decides whether the refusal is fatal (D10).
func claimsRequired(root string) bool {
	data, err := readBounded(filepath.Join(root, ManifestFile), maxManifestBytes)
	if err != nil {
		return false
	}
	var doc struct {
		Runtime struct {
			Required bool `json:"required"`
		} `json:"runtime"`
	}
	return json.Unmarshal(data, &doc) == nil && doc.Runtime.Required
}

// rootVariable is the only variable a command may start with.
const rootVariable = "${REASONIX_PLUGIN_ROOT}"

// resolveCommand applies CONTRACT-NOTES §4.1: trim; replace a leading
// ${REASONIX_PLUGIN_ROOT} by joining the root with the rest (a prefix, not
// a general expansion); reject shells, bare names and relative paths. There
// is no PATH lookup. When the path exists, the file it resolves to after
// symlinks must not be a shell either (bin/run -> /bin/sh).
func resolveCommand(root, command string) (string, error) {
	c := strings.TrimSpace(command)
	if rest, ok := strings.CutPrefix(c, rootVariable); ok {
		c = filepath.Join(root, rest)
	}
	// D8: exec form only; a shell would reintroduce the shell form.
	if isShell(c) {
		return "", fmt.Errorf("%w (%q): runtimes are exec-form only; point runtime.command at the sidecar executable itself", ErrShellCommand, command)
	}
	if !strings.ContainsAny(c, `/\`) {
		return "", fmt.Errorf("%w (%q): there is no PATH lookup; use an absolute path or one under %s", ErrBareCommand, command, rootVariable)
	}
	if !filepath.IsAbs(c) {
		return "", fmt.Errorf("%w (%q): use an absolute path or start it with %s/", ErrRelativeCommand, command, rootVariable)
	}
	if real, err := filepath.EvalSymlinks(c); err == nil && isShell(real) {
		return "", fmt.Errorf("%w (%q is a link to %q): runtimes are exec-form only; point runtime.command at the sidecar executable itself", ErrShellCommand, command, real)
	}
	return c, nil
}

// isShell reports whether command names a shell (CONTRACT-NOTES §4.1) in
// any form Windows or Unix would run as one. The basename is split at
// either kind of separator on every platform and lower-cased; an NTFS
// "::$DATA" stream suffix and trailing dots and spaces, which Windows
// ignores, are removed; a .exe or .com extension is optional (so sh.exe
// and bash.exe count too); and a .bat or .cmd script is a shell
// everywhere, since Windows runs it through cmd.exe. A copy or hard link
// of a shell under another name cannot be told apart from a sidecar.
func isShell(command string) bool {
	base := strings.ToLower(command[strings.LastIndexAny(command, `/\`)+1:])
	base = strings.TrimSuffix(base, "::$data")
	base = strings.TrimRight(base, ". ")
	if i := strings.LastIndexByte(base, '.'); i >= 0 {
		switch base[i:] {
		case ".bat", ".cmd":
			return true
		case ".exe", ".com":
			base = base[:i]
		}
	}
	switch base {
	case "sh", "bash", "zsh", "fish", "dash", "ksh", "cmd", "powershell", "pwsh":
		return true
	}
	return false
}

// insideDir reports whether path is dir or lies below it, comparing
// absolute paths with symlinks resolved where they exist.
func insideDir(path, dir string) bool {
	path, dir = resolvedPath(path), resolvedPath(dir)
	rel, err := filepath.Rel(dir, path)
	return err == nil && filepath.IsLocal(rel)
}

func resolvedPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real
	}
	return filepath.Clean(p)
}

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
}

// Trust returns the FULL TRUST summary of the spec's plugin.
func (s *LaunchSpec) Trust() TrustSummary {
	rt := s.Runtime
	return TrustSummary{
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
// command yields the same [*LaunchError] here.
func TrustPlugin(pluginDir, pluginID string) (TrustSummary, error) {
	root, err := filepath.Abs(pluginDir)
	if err != nil {
		return TrustSummary{}, err
	}
	m, err := LoadManifest(root)
	if err != nil {
		return TrustSummary{}, err
	}
	if pluginID == "" {
		pluginID = m.Name
	}
	if m.Runtime == nil {
		return TrustSummary{}, &LaunchError{Plugin: pluginID, Cause: fmt.Errorf("%w; nothing would run, so nothing needs trust", ErrNoRuntime)}
	}
	command, err := resolveCommand(root, m.Runtime.Command)
	if err != nil {
		return TrustSummary{}, &LaunchError{Plugin: pluginID, Required: m.Runtime.Required, Cause: err}
	}
	spec := &LaunchSpec{ID: pluginID, Root: root, Version: m.Version, Manifest: m, Runtime: m.Runtime, Command: command, Args: m.Runtime.Args}
	return spec.Trust(), nil
}

// defaultMaxTimeoutMillis is the clamp dispatch applies to a manifest's
// timeoutMillis by default (D18).
const defaultMaxTimeoutMillis = int64(DefaultMaxInterceptTimeout / time.Millisecond)

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
	row("sets env", quotedList(t.EnvKeys))
	row("required", yesNo(t.Required, "yes: its failure fails startup and every operation it joins", "no"))
	row("priority", fmt.Sprint(t.Priority))
	maxTimeoutMillis := t.MaxTimeoutMillis
	if maxTimeoutMillis <= 0 {
		maxTimeoutMillis = defaultMaxTimeoutMillis
	}
	switch {
	case t.TimeoutMillis > maxTimeoutMillis:
		row("timeout", fmt.Sprintf("%d ms per call (the manifest asks for %d ms; clamped to %d ms)", maxTimeoutMillis, t.TimeoutMillis, maxTimeoutMillis))
	case t.TimeoutMillis > 0:
		row("timeout", fmt.Sprintf("%d ms per call", t.TimeoutMillis))
	default:
		row("timeout", "per-point defaults")
	}
	points := make([]string, len(t.Intercepts))
	for i, p := range t.Intercepts {
		points[i] = string(p)
	}
	row("intercepts", trustList(points))
	row("slots", quotedList(t.Slots))
	row("capabilities", trustList(t.Capabilities))
	has := func(c string) bool { return slices.Contains(t.Capabilities, c) }
	switch {
	case !has("providers"):
		row("providers", "none")
	case len(t.Providers) == 0:
		row("providers", fmt.Sprintf("any model under %q (none listed)", "plugin/"+t.Plugin+"/"))
	default:
		row("providers", quotedList(t.Providers))
	}
	switch {
	case !has("ui"):
		row("ui actions", "none")
	case len(t.UIActions) == 0:
		row("ui actions", "any (none listed); may publish UI and ask you questions")
	default:
		row("ui actions", quotedList(t.UIActions)+"; may publish UI and ask you questions")
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
	for i, s := range items {
		quoted[i] = strconv.Quote(s)
	}
	return trustList(quoted)
}

func yesNo(v bool, yes, no string) string {
	if v {
		return yes
	}
	return no
}

// What a runtime may claim (D9, D17): the forms the manifest parser and
// the handshake accept for slots, provider refs and UI action IDs.

// bareSlots returns the closed set of parameterless slots (CONTRACT-NOTES §5.2).
func bareSlots() []string {
	return []string{
		"system_prompt", "context", "provider_request", "provider_response",
		"compaction", "session_policy", "permission", "frontend_events",
	}
}

// ValidSlot reports whether s is a replacement slot (D17, CONTRACT-NOTES
// §5.2): one of system_prompt, context, provider_request,
// provider_response, compaction, session_policy, permission and
// frontend_events; tool:<name> with a non-empty name free of space, tab
// and newline; or provider:<ref> with ref a [ValidProviderRef].
func ValidSlot(s string) bool {
	if name, ok := strings.CutPrefix(s, "tool:"); ok {
		return name != "" && !strings.ContainsAny(name, " \t\n")
	}
	if ref, ok := strings.CutPrefix(s, "provider:"); ok {
		return ValidProviderRef(ref)
	}
	for _, b := range bareSlots() {
		if s == b {
			return true
		}
	}
	return false
}

// ValidProviderRef reports whether ref is a provider ref
// (CONTRACT-NOTES §5.2): <name>/<model> with exactly one slash and both
// parts non-empty, or plugin/<pluginID>/<name>/<model> with every part
// non-empty and a pluginID free of whitespace.
func ValidProviderRef(ref string) bool {
	parts := strings.Split(ref, "/")
	for _, p := range parts {
		if p == "" {
			return false
		}
	}
	switch len(parts) {
	case 2:
		return true
	case 4:
		return parts[0] == "plugin" && strings.IndexFunc(parts[1], unicode.IsSpace) < 0
	}
	return false
}

// validPluginProviderRef reports whether ref is a [ValidProviderRef] of
// the plugin form plugin/<pluginID>/<provider>/<model>.
func validPluginProviderRef(ref string) bool {
	return strings.HasPrefix(ref, "plugin/") && strings.Count(ref, "/") == 3 && ValidProviderRef(ref)
}

// ValidActionID reports whether id is a UI action ID: it matches
// ^[a-z0-9][a-z0-9-]*$ (D9).
func ValidActionID(id string) bool {
	if id == "" || id[0] == '-' {
		return false
	}
	for _, c := range []byte(id) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// Text a person reads (D8): the FULL TRUST summary must show what runs,
// so the manifest and the record may not carry characters that act on a
// terminal.

// controlChar returns the first C0 control (NUL, tab, newline, ESC...),
// DEL or C1 control in s, or -1 when there is none. Such characters can
// move the cursor, hide text or fake lines on a terminal.
func controlChar(s string) rune {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || 0x80 <= r && r <= 0x9f {
			return r
		}
	}
	return -1
}

// checkText rejects a value a person will read that holds a control
// character (D8: the FULL TRUST summary must show what runs).
func checkText(s, field string) error {
	if r := controlChar(s); r >= 0 {
		return &ManifestError{Field: field, Msg: fmt.Sprintf("contains the control character %U; remove it (control characters can disguise what a plugin runs)", r)}
	}
	return nil
}

// fieldName returns a member name for an error's Field: as is when it is
// plain text, else quoted, so an error message cannot carry control
// characters either.
func fieldName(name string) string {
	if controlChar(name) >= 0 {
		return strconv.Quote(name)
	}
	return name
}
