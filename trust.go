package extension

// The FULL TRUST summary (PROTOCOL.md §9.1): what starting a plugin's
// sidecar grants, for a person to read before installing it.

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

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

// trust returns the FULL TRUST summary of the spec's plugin.
func (s *launchSpec) trust() TrustSummary {
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
	m, err := loadManifest(root)
	if err != nil {
		return TrustSummary{}, err
	}
	pluginID = cmp.Or(pluginID, m.Name)
	if m.Runtime == nil {
		return TrustSummary{}, &LaunchError{Plugin: pluginID, Cause: fmt.Errorf("%w; nothing would run, so nothing needs trust", ErrNoRuntime)}
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
	maxTimeoutMillis := t.MaxTimeoutMillis
	if maxTimeoutMillis <= 0 {
		maxTimeoutMillis = defaultMaxInterceptTimeout.Milliseconds() // dispatch's default clamp (D18)
	}
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
	return trustList(column(items, strconv.Quote))
}
