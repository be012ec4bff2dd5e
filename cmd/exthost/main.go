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
//	version  print the module's version, the protocol it speaks and its schema's hash
//	help     print this usage, or a command's with "exthost help <command>"
//
// Exit status is 0 on success, 1 when a command fails and 2 for a usage
// error (no command, an unknown command or a bad flag). SIGINT or SIGTERM
// makes check, demo and bench stop their sidecars and remove their
// temporary files, then exit 130 or 143.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

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
	ctx            context.Context // ended by SIGINT or SIGTERM
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
		{name: "version", summary: "print the module's version, the protocol it speaks and its schema's hash", flags: versionCommand},
		{name: "help", args: "[COMMAND]", summary: "print this usage, or a command's with \"exthost help <command>\"", flags: helpCommand},
	}
}

func main() {
	ctx, caught := interruptible()
	code := runContext(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	if sig := caught(); sig != 0 {
		code = 128 + sig // 130 for SIGINT, 143 for SIGTERM
	}
	os.Exit(code)
}

// errInterrupted ends check, demo and bench after SIGINT or SIGTERM.
var errInterrupted = errors.New("interrupted: the sidecars are stopped and the temporary files removed")

// interruptible returns a context that the first SIGINT or SIGTERM
// cancels, and the number of that signal (0 while none came): check, demo
// and bench then stop their sidecars, remove their temporary files and
// return. A second signal ends exthost at once.
func interruptible() (context.Context, func() int) {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	var caught atomic.Int32
	go func() {
		sig := <-signals
		signal.Stop(signals)
		caught.Store(int32(sig.(syscall.Signal)))
		cancel()
	}()
	return ctx, func() int { return int(caught.Load()) }
}

// run is exthost with its arguments (without the program name) and streams;
// it returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdin, stdout, stderr)
}

// runContext is run until ctx ends: check, demo and bench stop then.
func runContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
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
	out := stderr // a usage error's
	if slices.ContainsFunc(args[1:], func(a string) bool { return slices.Contains([]string{"-h", "-help", "--help"}, a) }) {
		out = stdout // asked for
	}
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "usage: %s\n\n%s\n", strings.TrimSpace("exthost "+c.name+" [flags] "+c.args), c.summary)
		flags := 0
		fs.VisitAll(func(*flag.Flag) { flags++ })
		if flags > 0 {
			fmt.Fprintf(out, "\nflags:\n")
			fs.PrintDefaults()
		}
	}
	action := c.flags(fs)
	// Flags may come after the argument too (exthost demo DIR -wire): each
	// parse stops at an argument, which is kept, and the rest is parsed
	// again; after "--" everything is an argument.
	var positional []string
	for rest := args[1:]; len(rest) > 0; {
		if err := fs.Parse(rest); err != nil {
			if err == flag.ErrHelp {
				return 0
			}
			return 2
		}
		after := fs.Args()
		if len(after) < len(rest) && rest[len(rest)-len(after)-1] == "--" {
			positional = append(positional, after...)
			break
		}
		if len(after) == 0 {
			break
		}
		positional, rest = append(positional, after[0]), after[1:]
	}
	// The arguments are what c.args names: none, one ("X") or at most one
	// ("[X]").
	if n, most := len(positional), min(len(c.args), 1); n > most || n < most && c.args[0] != '[' {
		if n > most {
			fmt.Fprintf(stderr, "exthost %s: unexpected arguments %q\n", c.name, positional[most:])
		}
		fs.Usage()
		return 2
	}
	return action(&env{ctx: ctx, name: c.name, args: positional, usage: fs.Usage, stdin: stdin, stdout: stdout, stderr: stderr})
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
			usage(e.stdout)
			return 0
		}
		if _, ok := lookup(e.args[0], "exthost help", e.stderr); !ok {
			return 2
		}
		return run([]string{e.args[0], "-h"}, e.stdin, e.stdout, e.stderr)
	}
}

// versionCommand prints what an implementer compares against: the module's
// version ("(devel)" when built from a checkout), the protocol id and
// version, and the hash of the schema the binary was built from.
func versionCommand(fs *flag.FlagSet) func(*env) int {
	return func(e *env) int {
		version := "(unknown)"
		if info, ok := debug.ReadBuildInfo(); ok {
			version = info.Main.Version
		}
		fmt.Fprintf(e.stdout, "exthost %s\nprotocol %s version %s\nschema %s\n", version, extension.ProtocolID, extension.ProtocolVersion, extension.GeneratedSchemaHash)
		return 0
	}
}

// trustCommand prints the FULL TRUST block of a plugin directory: what
// installing it would let its sidecar do.
func trustCommand(fs *flag.FlagSet) func(*env) int {
	id := fs.String("name", "", "the plugin ID it would be installed as (default: the manifest's name)")
	return func(e *env) int {
		t, err := extension.TrustPlugin(e.args[0], *id)
		if err == nil {
			fmt.Fprint(e.stdout, t.Text(), commandWarning(t))
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
