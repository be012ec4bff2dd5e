package extension_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/reasonix-ext/extension"
)

// A host installs a plugin once, then starts a generation of sidecars per
// session, puts each hook point through them and closes them at the end.
// (Compiled, not run: it needs a built plugin.)
func ExampleHost() {
	home := filepath.Join(os.Getenv("HOME"), ".reasonix")
	if _, err := extension.Install(home, "/path/to/plugin", extension.InstallOptions{}); err != nil {
		log.Fatal(err) // a *PluginError naming the plugin and the cause
	}
	h := &extension.Host{
		Home:      home,
		Session:   extension.SessionContext{SessionID: "s-1", WorkspaceRoot: "/work/repo", Generation: 1},
		OnWarning: func(w *extension.PluginError) { log.Printf("extension %s: %v", w.Plugin, w.Err) },
	}
	rt, err := h.Start(context.Background())
	if err != nil {
		log.Fatal(err) // a required plugin failed; nothing is left running
	}
	defer rt.Close()

	out, err := rt.Intercept(context.Background(), extension.ToolBefore,
		extension.ToolPayload{Name: "write", Arguments: `{"path":"notes.txt"}`})
	switch {
	case errors.Is(err, extension.ReasonInterceptTimeout):
		log.Print("a required extension did not answer in time: fail the tool call")
	case err != nil:
		log.Print(err)
	case out.Blocked:
		fmt.Printf("blocked by %s: %s\n", out.BlockedBy, out.Reason)
	default:
		fmt.Printf("run %s\n", out.Payload) // the host's payload, or the validated replacement
	}
	// Observation never blocks: a slow sidecar loses events, counted and
	// warned about once (D20).
	rt.Observe(extension.SessionEnd, extension.SessionPayload{Phase: "end"})
}

// Check runs a plugin's sidecar, in any language, through every
// conformance scenario that applies to it; each failure names the
// ruling it breaks. (Compiled, not run: it needs a plugin.)
func ExampleCheck() {
	report, err := extension.Check(context.Background(), "/path/to/plugin", extension.CheckOptions{})
	if report == nil {
		log.Fatal(err) // nothing could be checked
	}
	for _, r := range report.Results {
		if !r.OK && !r.Skipped {
			fmt.Printf("%s broke %s: %s\n", r.Name, r.Rule, r.Detail)
		}
	}
	fmt.Printf("%d passed, %d failed, %d skipped\n", report.Passed, report.Failed, report.Skipped)
}
