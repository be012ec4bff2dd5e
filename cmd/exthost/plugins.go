package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"

	"github.com/reasonix-ext/extension"
)

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
		notes := migrationNotes(dir)
		entry, err := extension.Install(dir, e.args[0], extension.InstallOptions{Name: *name, Link: *link})
		if err != nil {
			return e.exit(err)
		}
		fmt.Fprintln(e.stdout, installedLine(dir, entry))
		fmt.Fprint(e.stdout, notes)
		return 0
	})
}

// migrationNotes returns, one line each, what the next change of home's
// record changes in entries it did not write (PackageEntry.Notice): the
// change rewrites this project's earlier shape in upstream's (D8). A
// record that cannot be read fails the change itself.
func migrationNotes(home string) string {
	pkgs, _ := extension.LoadPackages(home)
	var notes strings.Builder
	for _, p := range pkgs {
		if p.Notice != "" {
			notes.WriteString(extension.TerminalSafe(fmt.Sprintf("note: %s: %s", p.Name, p.Notice)) + "\n")
		}
	}
	return notes.String()
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
	warning := commandWarning(t) // where the command is now, before a copy moves it
	t.Linked = link              // a linked install runs in place from dir, which the block then says
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
	fmt.Fprint(out, warning)
	return nil
}

// commandWarning says why the sidecar of the plugin t describes cannot
// start as it is, when its runtime.command is missing or not executable
// (an unbuilt binary, a script without its x bit); "" otherwise, and for a
// plugin without a sidecar.
func commandWarning(t extension.TrustSummary) string {
	problem := ""
	switch info, err := os.Stat(t.Command); {
	case t.Command == "":
		return ""
	case err != nil:
		problem = "does not exist: the sidecar cannot start until it does (build it, or fix runtime.command)"
	case info.IsDir() || runtime.GOOS != "windows" && info.Mode()&0o111 == 0:
		problem = "is not an executable file: the sidecar cannot start (make it executable, or fix runtime.command)"
	default:
		return ""
	}
	return extension.TerminalSafe(fmt.Sprintf("warning: the command %q %s\n", t.Command, problem))
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

// listCommand prints one line per installed package, in the record's order.
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
// disabled, linked or copied, then notes: how reading the record changed the entry (PackageEntry.Notice), FULL TRUST
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
	if entry.Notice != "" {
		notes = append(notes, entry.Notice)
	}
	// The launch gate's view (FULL TRUST reads the manifest as the gate
	// does): a runtime plugin, one without a runtime, or the refusal.
	t, err := extension.TrustPlugin(packageRoot(home, entry), entry.Name)
	switch {
	case errors.Is(err, extension.ErrNoRuntime):
	case err != nil:
		notes = append(notes, "error: "+err.Error())
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
			notes := migrationNotes(dir)
			err := change(dir, e.args[0])
			if errors.Is(err, fs.ErrNotExist) {
				err = fmt.Errorf("%w; \"exthost list -home %s\" shows the installed names", err, dir)
			}
			if err != nil {
				return e.exit(err)
			}
			fmt.Fprintln(e.stdout, extension.TerminalSafe(fmt.Sprintf(done, e.args[0], dir)))
			fmt.Fprint(e.stdout, notes)
			return 0
		})
	}
}
