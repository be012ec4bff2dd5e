package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/reasonix-ext/extension"
)

// checkCommand runs the conformance check (extension.Check) on a plugin
// directory, the bundled reference plugin by default, or on every runtime
// plugin installed in a home.
func checkCommand(fs *flag.FlagSet) func(*env) int {
	asJSON := fs.Bool("json", false, `print the report as one JSON object {"plugin","passed","failed","skipped","results":[...]} (one line per plugin with -home)`)
	home := fs.String("home", "", "check every enabled runtime plugin installed in this Reasonix home instead of PLUGIN_DIR")
	timeout := fs.Duration("timeout", 0, "how long to wait for each answer, stream end or shutdown of the sidecar (0: the checker's default, 5s)")
	deadline := fs.Duration("deadline", 2*time.Minute, "bound on the check of each plugin; the sidecar it is talking to then gets at most -timeout more to shut down before it is killed")
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
					fmt.Fprintf(f, "checking %s…\n", extension.TerminalSafe(cmp.Or(t.name, t.dir)))
				}
			}
			ctx, cancel := context.WithTimeout(e.ctx, *deadline)
			report, err := extension.Check(ctx, t.dir, extension.CheckOptions{Name: t.name, Timeout: *timeout})
			cancel()
			if report == nil {
				return e.exit(err)
			}
			// D9: the extension lists keep a plugin off upstream hosts.
			// stdout carries only the report's JSON with -json.
			notes := e.stdout
			if *asJSON {
				b, _ := json.Marshal(report)
				fmt.Fprintf(e.stdout, "%s\n", b)
				notes = e.stderr
			} else {
				printReport(e.stdout, report)
			}
			s, _ := extension.TrustPlugin(t.dir, t.name)
			if s.Portability != "" {
				fmt.Fprintln(notes, s.Portability)
			}
			// What trust warns about, which a failed start may stem from.
			for line := range strings.Lines(s.Text()) {
				if rest, ok := strings.CutPrefix(line, "  warning:"); ok {
					fmt.Fprint(notes, "warning: "+strings.TrimLeft(rest, " "))
				}
			}
			fmt.Fprint(notes, commandWarning(s))
			if errors.Is(err, context.DeadlineExceeded) {
				fmt.Fprintf(e.stderr, "exthost check: %s: stopped at the -deadline of %v; the scenarios after it did not run\n", extension.TerminalSafe(report.Plugin), *deadline)
			}
			if err != nil {
				status = 1
			}
			if e.ctx.Err() != nil {
				return e.exit(errInterrupted)
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
