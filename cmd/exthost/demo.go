package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/reasonix-ext/extension"
)

// referencePackage is the bundled reference plugin, built on the fly.
const referencePackage = "github.com/reasonix-ext/extension/sdk/examples/fullsidecar"

// demoCommand runs one scripted agent turn against a plugin and prints a
// transcript.
func demoCommand(fs *flag.FlagSet) func(*env) int {
	wire := fs.Bool("wire", false, "also print every frame on the wire (redacted)")
	return func(e *env) int {
		if len(e.args) > 1 {
			e.usage()
			return 2
		}
		return e.exit(runDemo(e.stdout, *wire, e.args))
	}
}

// runDemo installs the plugin in args (default: the reference plugin) in a
// temporary home, runs the scripted turn against it and prints the
// transcript to out, with every frame on the wire too when wire is set.
func runDemo(out io.Writer, wire bool, args []string) error {
	var mu sync.Mutex // serializes output from the tap and the script
	printf := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format, a...)
	}
	work, err := os.MkdirTemp("", "exthost-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	dir, id := "", ""
	if len(args) == 1 {
		dir = args[0]
	} else if dir, err = buildReference(work); err != nil {
		return err
	} else {
		id = "fullsidecar"
	}
	home := filepath.Join(work, "home")
	entry, err := extension.Install(home, dir, extension.InstallOptions{Name: id, Link: true})
	if err != nil {
		return err
	}
	trust, err := extension.TrustPlugin(dir, entry.Name)
	if err != nil {
		return err
	}
	printf("%s\n", trust.Text())

	h := &extension.Host{
		Home:    home,
		Session: extension.SessionContext{SessionID: "demo-session", WorkspaceRoot: work, Generation: 1},
		OnWarning: func(w extension.Warning) {
			printf("   warning: %s: %v\n", w.Plugin, w.Err)
		},
	}
	if wire {
		redactor := &extension.Redactor{}
		h.Conn.Tap = func(inbound bool, frame []byte) {
			arrow := "host → sidecar"
			if inbound {
				arrow = "sidecar → host"
			}
			// A frame may be anything the sidecar wrote: redacted, then
			// its control characters escaped (D25, D27).
			printf("      %s %s\n", arrow, clip(extension.TerminalSafe(redactor.Redact(string(frame))), 240))
		}
	}
	ctx := context.Background()
	printf("── start: handshake with %s\n", entry.Name)
	rt, err := h.Start(ctx)
	if err != nil {
		return err
	}
	defer rt.Close() // after the explicit Close below, a no-op
	decl, ok := rt.Declaration(entry.Name)
	if !ok {
		return fmt.Errorf("%s did not start: %v", entry.Name, rt.Warnings())
	}
	printf("   %s %s subscribes to %s", decl.Name, decl.Version, strings.Join(decl.Subscriptions, ", "))
	if len(decl.Replaces) > 0 {
		printf("; owns %s", strings.Join(decl.Replaces, ", "))
	}
	for _, p := range decl.Providers {
		printf("; serves %s", extension.TerminalSafe(p.Ref))
	}
	for _, a := range decl.UIActions {
		printf("; offers /%s:%s", entry.Name, a.ActionID)
	}
	printf("\n")

	printf("── session.start (observed)\n")
	if err := rt.Observe(extension.SessionStart, extension.SessionPayload{SessionPath: filepath.Join(work, "session.jsonl"), Phase: "start"}); err != nil {
		return err
	}
	steps := []struct {
		title   string
		point   extension.Point
		payload any
	}{
		{`input.receive "/fs hello world"`, extension.InputReceive, extension.InputPayload{Text: "/fs hello world"}},
		{`input.receive "what changed since yesterday?"`, extension.InputReceive, extension.InputPayload{Text: "what changed since yesterday?"}},
		{"system_prompt.build", extension.SystemPromptBuild, extension.SystemPromptPayload{Prompt: "You are a coding agent.", WorkspaceRoot: work}},
		{"tool.before read README.md", extension.ToolBefore, extension.ToolPayload{Name: "read", Arguments: `{"path":"README.md"}`}},
		{"tool.before dangerous_exec", extension.ToolBefore, extension.ToolPayload{Name: "dangerous_exec", Arguments: `{"cmd":"rm -rf /"}`}},
		{"tool.before write notes.txt", extension.ToolBefore, extension.ToolPayload{Name: "write", Arguments: `{"path":"notes.txt"}`}},
		{"tool.after read", extension.ToolAfter, extension.ToolResultPayload{Name: "read", Arguments: `{"path":"README.md"}`, Result: "# README"}},
		{"permission.decision rm (the host says deny)", extension.PermissionDecision, extension.PermissionPayload{Name: "rm", Arguments: `{}`, HostDecision: "deny"}},
	}
	for _, step := range steps {
		printf("── %s\n", step.title)
		out, err := rt.Intercept(ctx, step.point, step.payload)
		switch {
		case err != nil:
			printf("   failed: %v\n", err)
		case out.Blocked:
			printf("   blocked by %s: %s\n", out.BlockedBy, out.Reason)
		case out.Permission != "":
			printf("   %s by %s\n", out.Permission, out.PermissionBy)
		case len(out.Replaced) > 0:
			printf("   replaced by %s: %s\n", strings.Join(out.Replaced, ", "), clip(string(out.Payload), 200))
		case step.point == extension.PermissionDecision:
			printf("   no extension ruled (chain: %s); the host's decision stands\n", orNone(rt.Chain(step.point)))
		default:
			printf("   continue (chain: %s)\n", orNone(rt.Chain(step.point)))
		}
	}
	printf("── session.end (observed)\n")
	if err := rt.Observe(extension.SessionEnd, extension.SessionPayload{SessionPath: filepath.Join(work, "session.jsonl"), Phase: "end"}); err != nil {
		return err
	}
	printf("── shutdown\n")
	start := time.Now()
	if err := rt.Close(); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	printf("   every sidecar stopped cleanly in %v\n", time.Since(start).Round(time.Millisecond))
	return nil
}

func orNone(ids []string) string {
	return cmp.Or(strings.Join(ids, " → "), "no interceptor") // plugin IDs are never empty
}

// clip cuts s to n bytes, marking the cut.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// buildReference builds the reference plugin into a plugin directory
// under work, beside a copy of the manifest kept with its source
// (sdk/examples/fullsidecar/reasonix-plugin.json).
func buildReference(work string) (string, error) {
	dir := filepath.Join(work, "fullsidecar")
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return "", err
	}
	src, err := goTool("list", "-f", "{{.Dir}}", referencePackage)
	if err != nil {
		return "", err
	}
	manifest, err := os.ReadFile(filepath.Join(strings.TrimSpace(src), extension.ManifestFile))
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, extension.ManifestFile), manifest, 0o644); err != nil {
		return "", err
	}
	if _, err := goTool("build", "-o", filepath.Join(dir, "bin", "fullsidecar"), referencePackage); err != nil {
		return "", err
	}
	return dir, nil
}

// goTool runs the go command and returns its standard output.
func goTool(args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) || errors.Is(err, exec.ErrNotFound) {
			return "", fmt.Errorf("building the reference plugin (run exthost demo from the module, or pass a PLUGIN_DIR): go %s: %v\n%s", args[0], err, stderr.String())
		}
		return "", err
	}
	return string(out), nil
}
