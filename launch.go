package extension

// The launch gate (D8, PROTOCOL.md §3.1): which installed plugins may
// start, and exactly how. A sidecar is not sandboxed: it runs as the user,
// outside any tool sandbox, with the host's full environment; manifest.go
// says what that grants.

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// launchSpec is everything the process layer needs to start one sidecar.
// Only the launch gate builds one.
type launchSpec struct {
	// ID is the plugin ID: the installed name (PROTOCOL.md §3.1).
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

// env returns the sidecar's environment (PROTOCOL.md §3.1): base
// unfiltered (normally os.Environ()), then the manifest's env in key
// order, then REASONIX_PLUGIN_ROOT, REASONIX_PLUGIN_NAME and
// REASONIX_PLUGIN_VERSION. Later entries win and each key appears once,
// at its first position, so the manifest cannot forge the identity
// variables. Keys compare case-insensitively on Windows.
func (s *launchSpec) env(base []string) []string {
	layers := slices.Clone(base)
	for _, k := range slices.Sorted(maps.Keys(s.Runtime.Env)) {
		layers = append(layers, k+"="+s.Runtime.Env[k])
	}
	// D8: the identity variables come last and win over the manifest.
	layers = append(layers, "REASONIX_PLUGIN_ROOT="+s.Root, "REASONIX_PLUGIN_NAME="+s.ID, "REASONIX_PLUGIN_VERSION="+s.Version)
	out := make([]string, 0, len(layers))
	index := make(map[string]int, len(layers))
	for _, kv := range layers {
		k := envKey(kv)
		if _, ok := index[k]; !ok {
			index[k] = len(out)
			out = append(out, "")
		}
		out[index[k]] = kv
	}
	return out
}

// envKey returns the name of a KEY=value entry; a leading '=' belongs to
// the name (Windows has "=C:=C:\" entries).
func envKey(kv string) string {
	lead := min(1, len(kv)) // the first byte is never the separator
	k, _, _ := strings.Cut(kv[lead:], "=")
	k = kv[:lead+len(k)]
	if runtime.GOOS == "windows" {
		k = strings.ToUpper(k)
	}
	return k
}

// gated is one enabled runtime package past the launch gate: its spec, or
// the gate's refusal, a *StartError.
type gated struct {
	id       string
	required bool
	spec     *launchSpec
	err      error
}

// launchablePlugins runs the launch gate over every installed package in
// the record's order, by name (D10). Disabled packages and packages without a runtime
// are not runtime plugins and are skipped; an enabled package that
// declares (or tries to declare) a runtime but may not launch is there
// with its refusal. The error is a [*ManifestError] for a
// plugin-packages.json that cannot be read.
func launchablePlugins(home, workspaceRoot string) ([]gated, error) {
	pkgs, err := LoadPackages(home)
	if err != nil {
		return nil, err
	}
	var out []gated
	for i := range pkgs {
		spec, err := launchGate(home, &pkgs[i], workspaceRoot)
		switch le, _ := err.(*StartError); { // the gate refuses only with a *StartError
		case err == nil:
			out = append(out, gated{id: spec.ID, required: spec.Runtime.Required, spec: spec})
		case le != nil && !errors.Is(err, errDisabled) && !errors.Is(err, ErrNoRuntime):
			out = append(out, gated{id: le.Plugin, required: le.Required, err: err})
		}
	}
	return out, nil
}

// launchGate runs the launch gate (D8) for one installed entry. It returns
// a spec only for a plugin that is enabled, outside project configuration, whose manifest is
// v1 with a runtime, and whose command resolves to an absolute path that
// is not a shell. Every refusal is a [*StartError] of stage "launch" wrapping errDisabled
// (only for a disabled entry, before its manifest is read), [ErrNoRuntime]
// (only when the manifest has no runtime),
// errProjectRuntime, errShellCommand, errBareCommand,
// errRelativeCommand or a [*ManifestError]. A package root inside
// <workspaceRoot>/.reasonix is project configuration; an empty
// workspaceRoot skips that check. Nothing is started: this layer has no
// process code.
//
// The project-level check compares paths exactly after resolving
// symlinks; on a case-insensitive filesystem a root under
// <workspaceRoot>/.Reasonix names the same directory but is not
// recognized, so that check is weaker there.
func launchGate(home string, e *PackageEntry, workspaceRoot string) (*launchSpec, error) {
	refuse := func(required bool, format string, args ...any) (*launchSpec, error) {
		return nil, &StartError{Plugin: e.Name, Stage: "launch", Required: required, Err: fmt.Errorf(format, args...)}
	}
	if !e.Enabled {
		// D8: a disabled package never launches.
		return refuse(false, "%w; enable it to launch its runtime", errDisabled)
	}
	root := e.rootPath(home)
	m, err := loadManifest(root)
	if err != nil {
		return nil, &StartError{Plugin: e.Name, Stage: "launch", Required: claimsRequired(root), Err: err}
	}
	rt := m.Runtime
	if rt == nil {
		// D8: only a v1 manifest with a runtime block has a sidecar.
		return refuse(false, "%w; a sidecar needs \"apiVersion\": %q and a runtime block", ErrNoRuntime, manifestAPIVersion)
	}
	// D8: project configuration can never declare a runtime.
	if workspaceRoot != "" && insideDir(root, filepath.Join(workspaceRoot, projectConfigDir)) {
		return refuse(rt.Required, "%w: the package root %s is inside the workspace's %s directory; install it at user level to run its sidecar", errProjectRuntime, root, projectConfigDir)
	}
	return newLaunchSpec(e.Name, root, cmp.Or(e.Version, m.Version), e.Linked, m)
}

// newLaunchSpec resolves the command of m's runtime under root and
// describes the launch of plugin id: the last step of the launch gate,
// which [TrustPlugin] shares. A command it refuses is a [*StartError].
func newLaunchSpec(id, root, version string, linked bool, m *Manifest) (*launchSpec, error) {
	command, err := resolveCommand(root, m.Runtime.Command, m.Runtime.Args)
	if err != nil {
		return nil, &StartError{Plugin: id, Stage: "launch", Required: m.Runtime.Required, Err: err}
	}
	return &launchSpec{ID: id, Root: root, Version: version, Linked: linked, Manifest: m,
		Runtime: m.Runtime, Command: command, Args: append([]string(nil), m.Runtime.Args...)}, nil
}

// claimsRequired reports whether the manifest under root, which failed the
// strict parse, still reads as a JSON object whose runtime member is an
// object with required set to true. Only its members are read, as the
// first step of ParseManifest reads them, not their types: the strict
// reading has already refused it, and only this one flag decides whether
// the refusal is fatal (D10).
func claimsRequired(root string) bool {
	data, err := readBounded(filepath.Join(root, ManifestFile), maxManifestBytes)
	var doc, rt members
	return err == nil && readDocument(data, "", membersNode, &doc) == nil &&
		readDocument(doc["runtime"], "", membersNode, &rt) == nil && string(rt["required"]) == "true"
}

// rootVariable is the only variable a command may start with.
const rootVariable = "${REASONIX_PLUGIN_ROOT}"

// resolveCommand applies PROTOCOL.md §3.1: trim; replace a leading
// ${REASONIX_PLUGIN_ROOT} by joining the root with the rest (a prefix, not
// a general expansion); reject shells, bare names and relative paths. There
// is no PATH lookup. When the path exists, the file it resolves to after
// symlinks must not be a shell either (bin/run -> /bin/sh), and neither
// may env run one with args.
func resolveCommand(root, command string, args []string) (string, error) {
	c := strings.TrimSpace(command)
	if rest, ok := strings.CutPrefix(c, rootVariable); ok {
		c = filepath.Join(root, rest)
	}
	// D8: exec form only; a shell would reintroduce the shell form.
	if isShell(c) {
		return "", fmt.Errorf("%w (%q): runtimes are exec-form only; point runtime.command at the sidecar executable itself", errShellCommand, command)
	}
	if !strings.ContainsAny(c, `/\`) {
		return "", fmt.Errorf("%w (%q): there is no PATH lookup; use an absolute path or one under %s", errBareCommand, command, rootVariable)
	}
	if !filepath.IsAbs(c) {
		return "", fmt.Errorf("%w (%q): use an absolute path or start it with %s/", errRelativeCommand, command, rootVariable)
	}
	if real, err := filepath.EvalSymlinks(c); err == nil && isShell(real) {
		return "", fmt.Errorf("%w (%q is a link to %q): runtimes are exec-form only; point runtime.command at the sidecar executable itself", errShellCommand, command, real)
	}
	if shell, ok := shellBehindEnv(c, args); ok {
		// D8, stricter than upstream (PROTOCOL.md §11): env runs the
		// program its arguments name, so a shell behind it is one too.
		return "", fmt.Errorf("%w (%q runs %q): runtimes are exec-form only; point runtime.command at the sidecar executable itself", errShellCommand, command, shell)
	}
	return c, nil
}

// isShell reports whether command names a shell (PROTOCOL.md §3.1) in
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
	switch ext := filepath.Ext(base); ext {
	case ".bat", ".cmd":
		return true
	case ".exe", ".com":
		base = strings.TrimSuffix(base, ext)
	}
	return slices.Contains([]string{"sh", "bash", "zsh", "fish", "dash", "ksh", "cmd", "powershell", "pwsh"}, base)
}

// shellBehindEnv reports the shell that command runs with args when
// command is env (by name, or by the file it links to), through any number
// of envs: env -i -u NAME -C DIR NAME=VALUE -- sh, env -S "sh -c ...".
func shellBehindEnv(command string, args []string) (string, bool) {
	for isEnv(command) || isEnv(resolvedPath(command)) {
		program, rest, ok := envProgram(args)
		if !ok {
			return "", false // env with no program runs nothing
		}
		if isShell(program) {
			return program, true
		}
		command, args = program, rest
	}
	return "", false
}

// isEnv reports whether command names env, as isShell reads names.
func isEnv(command string) bool {
	base := strings.ToLower(command[strings.LastIndexAny(command, `/\`)+1:])
	return strings.TrimSuffix(base, ".exe") == "env"
}

// envProgram returns the program env runs with args, and its arguments.
// It skips env's options and their values (-u NAME, -C DIR, in short
// clusters such as -iu NAME too, and their long forms), NAME=VALUE
// assignments and --; -S (--split-string) splits its string into
// arguments, which are read the same way.
func envProgram(args []string) (program string, rest []string, ok bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		// The option that takes a value, u, C or S, if a is one: its value
		// is given with it or is the next argument.
		var opt, value string
		given := false // the value is given with the option, maybe empty
		switch {
		case a == "--":
			if i+1 < len(args) {
				return args[i+1], args[i+2:], true
			}
			return "", nil, false
		case strings.HasPrefix(a, "--"): // --ignore-environment, --unset=NAME, --chdir DIR...
			name, v, eq := strings.Cut(a[2:], "=")
			opt, value, given = envLongOptions[name], v, eq
		case strings.HasPrefix(a, "-"): // a cluster of short options
			if j := strings.IndexAny(a, "uCS"); j > 0 {
				opt, value = a[j:j+1], a[j+1:]
				given = value != ""
			}
		case strings.Contains(a, "="): // NAME=VALUE
		default:
			return a, args[i+1:], true
		}
		if opt == "" {
			continue
		}
		if !given {
			i++
			if i == len(args) {
				return "", nil, false
			}
			value = args[i]
		}
		if opt == "S" {
			return envProgram(append(strings.Fields(value), args[i+1:]...))
		}
	}
	return "", nil, false
}

// envLongOptions are env's long options that take a value, by the short
// option they spell out.
var envLongOptions = map[string]string{"unset": "u", "chdir": "C", "split-string": "S"}

// insideDir reports whether path is dir or lies below it, comparing
// absolute paths with symlinks resolved as far as they exist.
func insideDir(path, dir string) bool {
	path, dir = resolvedPath(path), resolvedPath(dir)
	rel, err := filepath.Rel(dir, path)
	return err == nil && filepath.IsLocal(rel)
}

// resolvedPath returns p absolute, with its symlinks resolved; a part of
// it that does not exist is joined to its nearest existing parent,
// resolved, so a link on the way counts even before the path is created.
func resolvedPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real
	}
	if parent := filepath.Dir(p); parent != p {
		return filepath.Join(resolvedPath(parent), filepath.Base(p))
	}
	return p
}
