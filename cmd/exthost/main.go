// Command exthost is the reference host for Reasonix Extension Protocol v1.
//
// Usage:
//
//	exthost <command> [flags] [arguments]
//
// The commands are:
//
//	demo     run one scripted agent turn against a plugin (default: the bundled reference plugin)
//	check    run the conformance check on a plugin's sidecar (default: the bundled reference plugin)
//	trust    print the FULL TRUST block of a plugin directory
//	install  install a plugin directory in the Reasonix home, printing its FULL TRUST block first
//	list     list the plugins installed in the Reasonix home
//	enable   enable an installed plugin
//	disable  disable an installed plugin, so it never launches
//	remove   remove an installed plugin, and its copy under the home
//	redact   copy standard input to standard output with credentials removed
//	bench    measure the host's hot paths, each beside a same-run baseline
//	help     print this usage, or a command's with "exthost help <command>"
//
// Exit status is 0 on success, 1 when a command fails and 2 for a usage
// error (no command, an unknown command or a bad flag).
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/reasonix-ext/extension"
	"github.com/reasonix-ext/extension/internal/fullsidecar"
)

// command is one entry of the command table: a new subcommand is one more
// entry in commands.
type command struct {
	name    string
	args    string                                // the positional arguments, for the usage line
	summary string                                // one line, for the command list
	flags   func(fs *flag.FlagSet) func(*env) int // declares the flags, returns the action
}

// env is what a command runs with: its name, its arguments after the
// flags, the standard streams, and its usage, for a wrong number of
// arguments.
type env struct {
	name           string
	args           []string
	usage          func()
	stdin          io.Reader
	stdout, stderr io.Writer
}

// commands is the command table, in the order help lists it.
func commands() []command {
	return []command{
		{name: "demo", args: "[PLUGIN_DIR]", summary: "run one scripted agent turn against a plugin (default: the bundled reference plugin)", flags: demoCommand},
		{name: "check", args: "[PLUGIN_DIR]", summary: "run the conformance check on a plugin's sidecar (default: the bundled reference plugin)", flags: checkCommand},
		{name: "trust", args: "PLUGIN_DIR", summary: "print the FULL TRUST block of a plugin directory", flags: trustCommand},
		{name: "install", args: "PLUGIN_DIR", summary: "install a plugin directory in the Reasonix home, printing its FULL TRUST block first", flags: installCommand},
		{name: "list", summary: "list the plugins installed in the Reasonix home", flags: listCommand},
		{name: "enable", args: "NAME", summary: "enable an installed plugin", flags: changeCommand(func(h, n string) error { return extension.SetEnabled(h, n, true) }, "enabled plugin %s in %s")},
		{name: "disable", args: "NAME", summary: "disable an installed plugin, so it never launches", flags: changeCommand(func(h, n string) error { return extension.SetEnabled(h, n, false) }, "disabled plugin %s in %s: it will not launch until enabled")},
		{name: "remove", args: "NAME", summary: "remove an installed plugin, and its copy under the home", flags: changeCommand(extension.Remove, "removed plugin %s from %s")},
		{name: "redact", summary: "copy standard input to standard output with credentials removed", flags: redactCommand},
		{name: "bench", args: "[PLUGIN_DIR]", summary: "measure the host's hot paths, each beside a same-run baseline", flags: benchCommand},
		{name: "help", args: "[COMMAND]", summary: "print this usage, or a command's with \"exthost help <command>\"", flags: helpCommand},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is exthost with its arguments (without the program name) and streams;
// it returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name := args[0]
	if name == runArg {
		return runMode(args[1:], stderr) // not a command: see runMode
	}
	if slices.Contains([]string{"-h", "-help", "--help"}, name) {
		name = "help"
	}
	c, ok := lookup(name, "exthost", stderr)
	if !ok {
		return 2
	}
	fs := flag.NewFlagSet("exthost "+c.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s\n\n%s\n", strings.TrimSpace("exthost "+c.name+" [flags] "+c.args), c.summary)
		flags := 0
		fs.VisitAll(func(*flag.Flag) { flags++ })
		if flags > 0 {
			fmt.Fprintf(stderr, "\nflags:\n")
			fs.PrintDefaults()
		}
	}
	action := c.flags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	// The arguments are what c.args names: none, one ("X") or at most one
	// ("[X]").
	if n, most := fs.NArg(), min(len(c.args), 1); n > most || n < most && c.args[0] != '[' {
		if n > most {
			fmt.Fprintf(stderr, "exthost %s: unexpected arguments %q\n", c.name, fs.Args()[most:])
		}
		fs.Usage()
		return 2
	}
	return action(&env{name: c.name, args: fs.Args(), usage: fs.Usage, stdin: stdin, stdout: stdout, stderr: stderr})
}

// exit returns the exit status of a command that ended with err: 0 when
// err is nil, else 1, after printing err with its control characters
// escaped (D27: its text may carry a path, a manifest's or a sidecar's).
func (e *env) exit(err error) int {
	if err == nil {
		return 0
	}
	fmt.Fprintf(e.stderr, "exthost %s: %s\n", e.name, extension.TerminalSafe(err.Error()))
	return 1
}

// lookup returns the command called name. When there is none, it says so on
// stderr, as who, followed by the usage.
func lookup(name, who string, stderr io.Writer) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\n\n", who, name)
	usage(stderr)
	return command{}, false
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: exthost <command> [flags] [arguments]\n\ncommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun \"exthost help <command>\" for a command's flags.\n")
}

// helpCommand prints the usage, or one command's: what "exthost <command> -h"
// prints.
func helpCommand(fs *flag.FlagSet) func(*env) int {
	return func(e *env) int {
		if len(e.args) == 0 {
			usage(e.stderr)
			return 0
		}
		if _, ok := lookup(e.args[0], "exthost help", e.stderr); !ok {
			return 2
		}
		return run([]string{e.args[0], "-h"}, e.stdin, e.stdout, e.stderr)
	}
}

// trustCommand prints the FULL TRUST block of a plugin directory: what
// installing it would let its sidecar do.
func trustCommand(fs *flag.FlagSet) func(*env) int {
	id := fs.String("name", "", "the plugin ID it would be installed as (default: the manifest's name)")
	return func(e *env) int {
		t, err := extension.TrustPlugin(e.args[0], *id)
		if err == nil {
			fmt.Fprint(e.stdout, t.Text())
		}
		return e.exit(err)
	}
}

// The hidden modes: "exthost _run MODE" is the reference plugin's sidecar
// or one of the bench's peers, so that demo, check and bench need nothing
// but this binary (no Go toolchain, no checkout of the module), and both
// sides of a bench ratio start from the same binary. They are not
// commands (help does not list them), and they talk on the process's own
// stdin and stdout.

// runArg is the hidden first argument that selects a mode.
const runArg = "_run"

// The modes, by name.
const (
	fullsidecarMode = "fullsidecar"  // the reference plugin's sidecar
	pingpongPeer    = "pingpong"     // the intercept baselines' child
	echolinePeer    = "echoline"     // the startup baselines' child
	sidecarPeer     = "streamer"     // the bench's own sidecar, of observe_throughput, stream_throughput and content_8mib
	streamPipePeer  = "stream-pipe"  // the stream_pipe baseline's child
	contentPipePeer = "content-pipe" // the content_pipe baseline's child
)

// modes are what each mode runs; an error ends the process with status 1.
var modes = map[string]func() error{
	fullsidecarMode: func() error { return fullsidecar.Serve(context.Background()) },
	pingpongPeer:    func() error { return answerLines(answerPing) },
	echolinePeer:    func() error { return answerLines(echoLine) },
	sidecarPeer:     serveBench,
	streamPipePeer:  func() error { return answerLines(pipeChunks) },
	contentPipePeer: hashContent,
}

// runMode runs the mode args names and returns the exit status: 2, after
// saying why, for anything but the name of one mode.
func runMode(args []string, stderr io.Writer) int {
	var mode func() error
	if len(args) == 1 {
		mode = modes[args[0]]
	}
	if mode == nil {
		fmt.Fprintf(stderr, "exthost %s: %q is not a mode; exthost runs these as its own sidecars and bench peers: %s\n",
			runArg, strings.Join(args, " "), strings.Join(slices.Sorted(maps.Keys(modes)), ", "))
		return 2
	}
	if err := mode(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// executable is exthost's own path, absolute (as os.Executable returns
// it, and as the launch gate requires) and with symlinks resolved.
// Resolved once, so that the bench's timed spawns do not pay for it.
var executable = sync.OnceValues(func() (string, error) {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	return exe, err
})

// referencePlugin writes, under work, the reference plugin's directory.
func referencePlugin(work string) (string, error) {
	m, err := extension.ParseManifest([]byte(fullsidecar.Manifest))
	if err != nil {
		return "", err
	}
	return modePlugin(work, fullsidecarMode, m)
}

// modePlugin writes m as the manifest of the plugin directory work/<mode>,
// with runtime.command and runtime.args running this binary in mode. The
// command names the binary by its absolute path: the launch gate expands
// ${REASONIX_PLUGIN_ROOT} only as a command's prefix, and passes args
// verbatim.
func modePlugin(work, mode string, m *extension.Manifest) (string, error) {
	dir := filepath.Join(work, mode)
	exe, err := executable()
	if err == nil {
		m.Runtime.Command, m.Runtime.Args = exe, []string{runArg, mode}
		err = writeManifest(dir, m)
	}
	return dir, err
}

// checkCommand runs the conformance check (extension.Check) on a plugin
// directory, the bundled reference plugin by default, or on every runtime
// plugin installed in a home.
func checkCommand(fs *flag.FlagSet) func(*env) int {
	asJSON := fs.Bool("json", false, `print the report as one JSON object {"plugin","passed","failed","skipped","results":[...]} (one line per plugin with -home)`)
	home := fs.String("home", "", "check every enabled runtime plugin installed in this Reasonix home instead of PLUGIN_DIR")
	timeout := fs.Duration("timeout", 0, "how long to wait for each answer, stream end or shutdown of the sidecar (0: the checker's default, 5s)")
	return func(e *env) int {
		if *home != "" && len(e.args) > 0 {
			e.usage()
			return 2
		}
		work, err := os.MkdirTemp("", "exthost-check-")
		if err != nil {
			return e.exit(err)
		}
		defer os.RemoveAll(work)
		targets, err := pluginTargets(*home, e.args, work)
		if err != nil {
			return e.exit(err)
		}
		status := 0
		for _, t := range targets {
			// Progress, when stderr is a terminal.
			if f, ok := e.stderr.(*os.File); ok {
				if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
					fmt.Fprintf(f, "checking %s…\n", t.name)
				}
			}
			report, err := extension.Check(context.Background(), t.dir, extension.CheckOptions{Name: t.name, Timeout: *timeout})
			if report == nil {
				return e.exit(err)
			}
			if *asJSON {
				b, _ := json.Marshal(report)
				fmt.Fprintf(e.stdout, "%s\n", b)
			} else {
				printReport(e.stdout, report)
			}
			if err != nil {
				status = 1
			}
		}
		return status
	}
}

// target is one plugin to run: its directory and the ID to install it as
// ("" for the manifest's name).
type target struct{ dir, name string }

// pluginTargets resolves what demo, check and bench run: every enabled
// runtime plugin installed in home, the plugin directory in args, or the
// bundled reference plugin, written into the directory work.
func pluginTargets(home string, args []string, work string) ([]target, error) {
	switch {
	case home != "":
		entries, err := extension.LoadPackages(home)
		if err != nil {
			return nil, err
		}
		var out []target
		for i := range entries {
			root := packageRoot(home, &entries[i])
			if _, err := extension.TrustPlugin(root, entries[i].Name); entries[i].Enabled && err == nil { // a runtime the gate takes
				out = append(out, target{root, entries[i].Name})
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("no enabled plugin with a runtime is installed in %s", home)
		}
		return out, nil
	case len(args) == 1:
		return []target{{args[0], ""}}, nil
	}
	dir, err := referencePlugin(work)
	return []target{{dir, ""}}, err
}

// printReport renders a report for people: one line per scenario, with
// the frames of each failure.
func printReport(w io.Writer, r *extension.CheckReport) {
	fmt.Fprintf(w, "exthost check: plugin %s\n", extension.TerminalSafe(r.Plugin))
	for _, res := range r.Results {
		state, detail := "ok  ", res.Detail
		switch {
		case res.Skipped:
			state = "skip"
		case !res.OK:
			state = "FAIL"
		default:
			detail, _, _ = strings.Cut(detail, "\n") // a pass shows no frames
		}
		fmt.Fprintf(w, "%s  %-44s %-4s %s\n", state, res.Name, res.Rule, strings.ReplaceAll(detail, "\n", "\n      "))
	}
	fmt.Fprintf(w, "%d passed, %d failed, %d skipped\n", r.Passed, r.Failed, r.Skipped)
}

// Plugin management: install, list, enable, disable and remove the
// packages recorded in <home>/plugin-packages.json (PROTOCOL.md §3.2).

// installCommand installs a plugin directory into a Reasonix home. It
// first prints what running the plugin grants (its FULL TRUST block);
// installing is the consent, so it asks nothing (PROTOCOL.md §3.2).
func installCommand(fs *flag.FlagSet) func(*env) int {
	link := fs.Bool("link", false, "record the directory in place instead of copying it under <home>/plugins/")
	name := fs.String("name", "", "the plugin ID to install it as (default: the manifest's name)")
	return homeCommand(fs, func(e *env, dir string) int {
		if err := previewInstall(e.stdout, dir, e.args[0], *name, *link); err != nil {
			return e.exit(err)
		}
		entry, err := extension.Install(dir, e.args[0], extension.InstallOptions{Name: *name, Link: *link})
		if err != nil {
			return e.exit(err)
		}
		fmt.Fprintln(e.stdout, installedLine(dir, entry))
		return 0
	})
}

// homeCommand is a command on a Reasonix home: it declares -home (default
// ~/.reasonix, PROTOCOL.md §3.1) and runs do with the home directory.
func homeCommand(fs *flag.FlagSet, do func(e *env, home string) int) func(*env) int {
	home := fs.String("home", "", "the Reasonix home directory (default: ~/.reasonix)")
	return func(e *env) int {
		dir := *home
		if dir == "" {
			user, err := os.UserHomeDir()
			if err != nil {
				return e.exit(fmt.Errorf("cannot find your home directory for the default Reasonix home ~/.reasonix (%v); pass -home DIR", err))
			}
			dir = filepath.Join(user, ".reasonix")
		}
		return do(e, dir)
	}
}

// previewInstall prints to out the FULL TRUST block of the plugin in dir
// as it would be installed as name (empty: the manifest's name), or that
// it has no sidecar and so needs no trust. A copy is shown where it will
// run, under <home>/plugins/<name>. Any other failure (a manifest or
// command the launch gate would refuse) is returned, and then nothing may
// be installed.
func previewInstall(out io.Writer, home, dir, name string, link bool) error {
	t, err := extension.TrustPlugin(dir, name)
	if errors.Is(err, extension.ErrNoRuntime) {
		fmt.Fprintln(out, "The plugin has no sidecar (its manifest declares no runtime): nothing of it runs outside the sandbox, so there is no FULL TRUST block.")
		return nil
	}
	if err != nil {
		return err
	}
	t.Linked = link // a linked install runs in place from dir, which the block then says
	if !link {
		dest, err := filepath.Abs(filepath.Join(home, "plugins", t.Plugin))
		if err != nil {
			return err
		}
		if rest, ok := strings.CutPrefix(t.Command, t.Root+string(filepath.Separator)); ok {
			t.Command = filepath.Join(dest, rest) // a command inside the package is copied with it
		}
		t.Root = dest
	}
	fmt.Fprintf(out, "%s\n", t.Text())
	return nil
}

// installedLine says what was installed where: the name, the version, and
// whether the package was copied under home or is linked in place.
func installedLine(home string, entry *extension.PackageEntry) string {
	how := "copied to " + packageRoot(home, entry)
	if entry.Linked {
		how = "linked in place at " + packageRoot(home, entry)
	}
	version := "unversioned"
	if entry.Version != "" {
		version = "version " + entry.Version
	}
	return extension.TerminalSafe(fmt.Sprintf("installed plugin %s %s in %s, %s", entry.Name, version, home, how))
}

// packageRoot returns the directory of an installed package: its root,
// which the record holds relative to home with '/' separators, or
// absolute.
func packageRoot(home string, entry *extension.PackageEntry) string {
	root := filepath.FromSlash(entry.Root)
	if !filepath.IsAbs(root) {
		root = filepath.Join(home, root)
	}
	return root
}

// listCommand prints one line per installed package, in installed order.
func listCommand(fs *flag.FlagSet) func(*env) int {
	return homeCommand(fs, func(e *env, dir string) int {
		pkgs, err := extension.LoadPackages(dir)
		if err != nil {
			return e.exit(err)
		}
		if len(pkgs) == 0 { // a missing record is an empty one
			fmt.Fprintf(e.stdout, "no plugins installed in %s\n", extension.TerminalSafe(dir))
			return 0
		}
		w := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		for i := range pkgs {
			fmt.Fprintln(w, listLine(dir, &pkgs[i]))
		}
		return e.exit(w.Flush())
	})
}

// listLine is the line of list for one package, as tab-separated cells:
// name, version (the installed one, else the manifest's), enabled or
// disabled, linked or copied, then notes: the project scope, FULL TRUST
// for a package whose manifest declares a runtime, or why its manifest
// cannot be read. Every cell is terminal-safe.
func listLine(home string, entry *extension.PackageEntry) string {
	state, kind := "enabled", "copied"
	if !entry.Enabled {
		state = "disabled"
	}
	if entry.Linked {
		kind = "linked"
	}
	var notes []string
	if entry.Scope == extension.ScopeProject {
		notes = append(notes, "project")
	}
	// The launch gate's view (FULL TRUST reads the manifest as the gate
	// does): a runtime plugin, one without a runtime, or the refusal.
	t, err := extension.TrustPlugin(packageRoot(home, entry), entry.Name)
	switch {
	case errors.Is(err, extension.ErrNoRuntime):
	case err != nil:
		notes = append(notes, "error: "+err.Error())
	case entry.Scope == extension.ScopeProject:
		notes = append(notes, "FULL TRUST runtime, never launched at project scope")
	default:
		notes = append(notes, "FULL TRUST")
	}
	version := cmp.Or(entry.Version, t.Version, "unversioned")
	cells := []string{entry.Name, version, state, kind}
	if len(notes) > 0 {
		cells = append(cells, strings.Join(notes, ", "))
	}
	for i, c := range cells {
		cells[i] = extension.TerminalSafe(cellEscapes.Replace(c))
	}
	return strings.Join(cells, "\t")
}

// cellEscapes shows the two characters TerminalSafe leaves raw, which
// would start a cell or a line of list: a cell is terminal-safe, and
// shows tab and newline escaped too.
var cellEscapes = strings.NewReplacer("\t", `\t`, "\n", `\n`)

// changeCommand is a command that takes -home and one installed plugin
// name, changes its record with change and prints done, formatted with
// the name and the home. A disabled plugin never launches (D8); remove
// deletes the copy under <home>/plugins/ too, and leaves a linked
// directory alone.
func changeCommand(change func(home, name string) error, done string) func(*flag.FlagSet) func(*env) int {
	return func(flags *flag.FlagSet) func(*env) int {
		return homeCommand(flags, func(e *env, dir string) int {
			err := change(dir, e.args[0])
			if errors.Is(err, fs.ErrNotExist) {
				err = fmt.Errorf("%w; \"exthost list -home %s\" shows the installed names", err, dir)
			}
			if err != nil {
				return e.exit(err)
			}
			fmt.Fprintln(e.stdout, extension.TerminalSafe(fmt.Sprintf(done, e.args[0], dir)))
			return 0
		})
	}
}

// redactCommand is "exthost redact": standard input to standard output,
// credentials removed (D25), streamed in bounded memory.
func redactCommand(fs *flag.FlagSet) func(*env) int {
	explain := fs.Bool("explain", false, "report each removed credential (rule and input byte offset) on standard error")
	return func(e *env) int {
		s := streamRedactor{r: new(extension.Redactor)}
		if *explain {
			s.explain = func(f extension.Finding) {
				fmt.Fprintf(e.stderr, "exthost redact: %s at bytes %d-%d\n", f.Rule, f.Start, f.End)
			}
		}
		return e.exit(s.copy(e.stdout, e.stdin))
	}
}

// Bounds of streamRedactor, used when its fields are zero.
const (
	defaultChunk   = 256 << 10 // bytes gathered before each round
	defaultContext = 4 << 10   // bytes already written kept as left context
	defaultMaxHold = 4 << 20   // most bytes held at once
)

// streamRedactor redacts a stream in rounds. Each round gathers about chunk
// bytes, redacts them together with the last context bytes of the previous
// round (so a key=value pair or header split across rounds keeps its key),
// and writes up to the last line break: whole lines are never split.
//
// A line longer than chunk is cut context bytes before the end of what was
// read; a credential that spans the cut is written whole, or held back to
// the next round when it reaches the end of what was read. A credential
// still unfinished after maxHold bytes is replaced by one marker and the
// rest of its line is discarded, so memory stays bounded by maxHold. The
// context is at least 128 bytes (a whole PEM BEGIN line) and chunk at least
// twice the context.
type streamRedactor struct {
	r       *extension.Redactor
	chunk   int
	context int
	maxHold int
	explain func(extension.Finding) // if set, told about each removed span (input offsets)
}

func (s *streamRedactor) copy(dst io.Writer, src io.Reader) error {
	chunk, context, maxHold := cmp.Or(s.chunk, defaultChunk), cmp.Or(s.context, defaultContext), cmp.Or(s.maxHold, defaultMaxHold)
	context = max(context, 128) // room for a whole PEM BEGIN line
	chunk = max(chunk, 2*context)
	buf := make([]byte, 0, chunk+context)
	ctx := 0      // buf[:ctx] was written already and is left context
	base := 0     // input offset of buf[ctx]
	want := chunk // pending bytes to gather this round
	eof, discard := false, false
	var out bytes.Buffer
	for {
		for !eof && len(buf)-ctx < want {
			if len(buf) == cap(buf) {
				buf = slices.Grow(buf, len(buf))
			}
			n, err := src.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if err == io.EOF {
				eof = true
			} else if err != nil {
				return err
			}
		}
		if discard { // the rest of a line whose credential outgrew maxHold, up to its line break
			i := bytes.IndexByte(buf[ctx:], '\n')
			discard = i < 0 // no line break yet: all of pending goes
			if discard {
				i = len(buf) - ctx
			}
			base += i
			buf = append(buf[:ctx], buf[ctx+i:]...)
		}
		if len(buf) == ctx { // nothing pending, or all of it discarded
			if eof {
				return nil
			}
			continue
		}
		spans := s.spans(buf)
		end := len(buf)
		if !eof {
			end = max(ctx+1, len(buf)-context) // a long line is cut
			if i := bytes.LastIndexByte(buf[ctx:], '\n'); i >= 0 {
				end = ctx + i + 1
				if len(buf) < maxHold { // an END line further on may make them a PEM body
					end = max(ctx, bodyLines(buf[:end]))
				}
			}
			for _, sp := range spans {
				if sp.Start < end && end < sp.End {
					if sp.End < len(buf) {
						end = sp.End
					} else {
						end = sp.Start
					}
				}
			}
			if end <= ctx { // a credential runs from the start of pending to the end of what was read
				if len(buf) < maxHold {
					want = min(2*want, maxHold)
					continue
				}
				end, discard = len(buf), true
			}
		}
		out.Reset()
		last := ctx
		for _, sp := range spans {
			if sp.End <= last || sp.Start >= end {
				continue
			}
			out.Write(buf[last:max(last, sp.Start)])
			out.WriteString(extension.RedactedMarker)
			last = min(sp.End, end)
			if s.explain != nil {
				s.explain(extension.Finding{Rule: sp.Rule, Start: base + sp.Start - ctx, End: base + sp.End - ctx})
			}
		}
		out.Write(buf[last:end])
		if _, err := io.WriteString(dst, s.r.Redact(out.String())); err != nil {
			return err
		}
		// Keep the last context bytes written as left context.
		keep := max(0, end-context)
		base += end - ctx
		buf = append(buf[:0], buf[keep:]...)
		ctx = end - keep
		want = chunk
	}
}

// spans returns the findings in b merged where they overlap or touch,
// ordered by start.
func (s *streamRedactor) spans(b []byte) []extension.Finding {
	var merged []extension.Finding
	for _, f := range s.r.Findings(string(b)) {
		if n := len(merged); n > 0 && f.Start <= merged[n-1].End {
			merged[n-1].End = max(merged[n-1].End, f.End)
			continue
		}
		merged = append(merged, f)
	}
	return merged
}

// bodyLines returns where the run of whole lines of base64 that ends b
// (at a line break) starts: lines that an END line without its BEGIN
// further on makes the body of a PEM private key, which the Redactor
// removes (D25). Held back until such a line or other text comes, they
// are never written before it is known.
func bodyLines(b []byte) int {
	i := len(b)
	for i > 0 && (b[i-1] == '\n' || b[i-1] == '\r' || strings.IndexByte(base64Chars, b[i-1]) >= 0) {
		i--
	}
	if i > 0 { // the line i is in starts with other text
		i += bytes.IndexByte(b[i:], '\n') + 1
	}
	return i
}

// base64Chars are the bytes of a PEM body line.
const base64Chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
