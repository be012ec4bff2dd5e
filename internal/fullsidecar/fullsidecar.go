// Package fullsidecar is the reference sidecar of Extension Protocol v1,
// built on package sdk alone: the program sdk/examples/fullsidecar, and
// the mode exthost runs it in from its own binary. The host's conformance
// tests and exthost demo drive it, so every behaviour below is relied
// upon:
//
//   - input.receive: "/fs <t>" is replaced by "<t> [rewritten by
//     fullsidecar]"; any other input continues.
//   - tool.before: dangerous_exec is blocked, naming the tool; read is
//     replaced by the same call with "sandbox":true added to its
//     arguments; any other tool continues.
//   - system_prompt.build: the sidecar owns the system_prompt slot (D17)
//     and wraps the base prompt in its demo strategy.
//   - session.start is declared, and continues.
//
// With the ui capability it publishes, on session.start, the status
// fullsidecar-status ("fullsidecar online") and the card fullsidecar-card
// offering the demo action. The action asks the form fullsidecar-demo-form
// (name, and loud) and greets with the notification fullsidecar-greeting
// ("Hello, <name>!", upper case when loud; "world" when no name was given
// or the form was dismissed). A submitted form is acknowledged with a
// status naming it.
//
// It serves the provider plugin/<id>/fake/echo (model echo): every stream
// is the text "fake-hello " and "fake-world", the tool call lookup
// {"query":"reasonix"}, usage (5 prompt, 7 completion, 12 total, 2 cache
// hits, 3 misses, 4 reasoning tokens, finish "stop") and done, one chunk
// every $FULLSIDECAR_STREAM_INTERVAL_MS milliseconds (default 15), the
// first at once. It also declares the UI action demo, which the handshake
// checks against the manifest (D9).
//
// It declares its slot, its provider and its UI action whatever the
// manifest grants, as upstream's reference sidecar does, so a host
// refuses it under a manifest that lacks one (D9). With
// $FULLSIDECAR_HOOKS_ONLY set to 1 it declares its subscriptions alone,
// so one binary can be installed several times, as exthost bench does:
// its copies' manifests claim no slot (a slot has one owner, D17), list
// no provider (a ref names its plugin ID), declare no capability, and set
// the variable in runtime.env.
//
// The plugin ID comes from $REASONIX_PLUGIN_NAME (default fullsidecar).
// Two test hooks make it misbehave on purpose: $FULLSIDECAR_CRASH_ON_INPUT
// names an input text on which the process exits with status 3, and
// $FULLSIDECAR_STALL_ON_INPUT one on which the interceptor holds until
// the host's deadline.
package fullsidecar

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/reasonix-ext/extension"
	"github.com/reasonix-ext/extension/sdk"
)

// Manifest is the reference manifest, a copy of
// sdk/examples/fullsidecar/reasonix-plugin.json that a test keeps
// byte-identical: exthost, which runs without the checkout, embeds it.
//
//go:embed reasonix-plugin.json
var Manifest string

// HooksOnly names the variable that, set to 1, has the sidecar declare
// its subscriptions alone.
const HooksOnly = "FULLSIDECAR_HOOKS_ONLY"

// The test hooks, read from the environment.
var (
	crashOn = os.Getenv("FULLSIDECAR_CRASH_ON_INPUT") // input text that makes the process exit 3
	stallOn = os.Getenv("FULLSIDECAR_STALL_ON_INPUT") // input text whose interceptor waits for the deadline
	pace    = streamInterval()                        // the pause between two chunks of a stream
)

// streamInterval reads $FULLSIDECAR_STREAM_INTERVAL_MS.
func streamInterval() time.Duration {
	ms, err := strconv.Atoi(os.Getenv("FULLSIDECAR_STREAM_INTERVAL_MS"))
	if err != nil || ms < 0 {
		ms = 15
	}
	return time.Duration(ms) * time.Millisecond
}

// Serve runs the sidecar on the process's stdin and stdout until the
// host is done with it. A failed connection (an oversized frame, a
// refused handshake) is its error, and must end the process with a
// non-zero status.
func Serve(ctx context.Context) error {
	o := options(cmp.Or(os.Getenv("REASONIX_PLUGIN_NAME"), "fullsidecar"))
	if os.Getenv(HooksOnly) == "1" {
		o.Replaces, o.Providers, o.UIActions = nil, nil, nil
	}
	return sdk.Serve(ctx, o)
}

// options is the sidecar's declaration and its interceptors.
func options(id string) sdk.Options {
	return sdk.Options{
		Name:    id,
		Version: "1.0.0",
		Subscriptions: []extension.Point{
			extension.InputReceive, extension.ToolBefore, extension.SystemPromptBuild, extension.SessionStart,
		},
		Replaces: []string{"system_prompt"},
		Providers: []extension.ProviderDescriptor{{
			Ref:           "plugin/" + id + "/fake/echo",
			DisplayName:   "fullsidecar fake",
			Model:         "echo",
			ContextWindow: 64000,
			Tools:         true,
			Reasoning:     true,
			Efforts:       []string{"low", "high"},
			DefaultEffort: "low",
		}},
		Provider:  echo{},
		UIActions: []extension.UIActionDecl{{ActionID: "demo", Label: "Run the fullsidecar demo"}},
		Action:    demo,
		Submit:    submitted,
		Observe:   map[extension.Point]sdk.ObserveFunc{extension.SessionStart: online},
		Intercept: map[extension.Point]sdk.InterceptFunc{
			extension.InputReceive:      input,
			extension.ToolBefore:        tool,
			extension.SystemPromptBuild: systemPrompt,
		},
	}
}

// input rewrites "/fs <t>" inputs.
func input(ctx context.Context, c *sdk.Call) (sdk.Verdict, error) {
	var in extension.InputPayload
	if err := c.Decode(&in); err != nil {
		return sdk.Verdict{}, err
	}
	switch {
	case crashOn != "" && in.Text == crashOn:
		os.Exit(3)
	case stallOn != "" && in.Text == stallOn:
		<-ctx.Done()
		return sdk.Verdict{}, ctx.Err()
	}
	t, ok := strings.CutPrefix(in.Text, "/fs ")
	if !ok {
		return sdk.Continue(), nil
	}
	in.Text = t + " [rewritten by fullsidecar]"
	return sdk.Replace(in), nil
}

// tool blocks dangerous_exec and sandboxes read.
func tool(ctx context.Context, c *sdk.Call) (sdk.Verdict, error) {
	var call extension.ToolPayload
	if err := c.Decode(&call); err != nil {
		return sdk.Verdict{}, err
	}
	switch call.Name {
	case "dangerous_exec":
		// stderr is the sidecar's own log: not part of the protocol, and
		// shown by the host (exthost demo, under the step).
		fmt.Fprintf(os.Stderr, "fullsidecar: blocked %s %s\n", call.Name, call.Arguments)
		return sdk.Block("fullsidecar blocks the tool " + call.Name), nil
	case "read":
		var args map[string]any
		// Arguments may be omitted: no arguments read as {}. Anything
		// else must be an object ("null" is not).
		if err := json.Unmarshal([]byte(cmp.Or(call.Arguments, "{}")), &args); err != nil || args == nil {
			return sdk.Verdict{}, fmt.Errorf("read: arguments %q are not a JSON object", call.Arguments)
		}
		args["sandbox"] = true
		b, _ := json.Marshal(args) // what json.Unmarshal made always encodes
		call.Arguments = string(b)
		return sdk.Replace(call), nil
	}
	return sdk.Continue(), nil
}

// systemPrompt is the sidecar's system_prompt strategy.
func systemPrompt(ctx context.Context, c *sdk.Call) (sdk.Verdict, error) {
	var p struct {
		Prompt        string `json:"prompt"`
		WorkspaceRoot string `json:"workspaceRoot"`
	}
	if err := c.Decode(&p); err != nil {
		return sdk.Verdict{}, err
	}
	p.Prompt = "You are Reasonix running under the fullsidecar demo strategy.\n\nWorkspace: " +
		p.WorkspaceRoot + "\n\nBase prompt:\n" + p.Prompt
	return sdk.Replace(p), nil
}

// echo is the fake provider.
type echo struct{}

// Catalog returns the one descriptor; the declaration and the catalog
// are the same.
func (echo) Catalog(ctx context.Context) ([]extension.ProviderDescriptor, error) {
	return options(cmp.Or(os.Getenv("REASONIX_PLUGIN_NAME"), "fullsidecar")).Providers, nil
}

// Stream yields the fixed answer, paced.
func (echo) Stream(ctx context.Context, open *extension.StreamOpenParams) (iter.Seq[extension.ProviderChunk], error) {
	answer := []extension.ProviderChunk{
		sdk.Text("fake-hello "),
		sdk.Text("fake-world"),
		sdk.ToolCall(extension.ProviderToolCall{ID: "call-1", Name: "lookup", Arguments: `{"query":"reasonix"}`}),
		sdk.Usage(extension.ProviderUsage{PromptTokens: 5, CompletionTokens: 7, TotalTokens: 12, CacheHitTokens: 2, CacheMissTokens: 3, ReasoningTokens: 4, FinishReason: "stop"}),
		sdk.Done(),
	}
	return func(yield func(extension.ProviderChunk) bool) {
		for i, c := range answer {
			if i > 0 {
				select {
				case <-time.After(pace):
				case <-ctx.Done():
					return
				}
			}
			if !yield(c) {
				return
			}
		}
	}, nil
}

// online publishes the status and the card when a session starts.
func online(ctx context.Context, e *sdk.Event) {
	ui := sdk.UI(ctx)
	err := ui.Publish(ctx, "fullsidecar-status", extension.UIStatusPayload{Label: "fullsidecar online", Severity: extension.SeverityInfo})
	if err == nil {
		err = ui.Publish(ctx, "fullsidecar-card", extension.UICardPayload{
			Title:    "fullsidecar",
			Markdown: "The reference sidecar of the Go SDK.",
			Actions:  []extension.UIActionRef{{ActionID: "demo", Label: "Run the fullsidecar demo"}},
		})
	}
	// A host without a UI, a manifest without the ui capability, or a
	// connection ending meanwhile is no fault of ours: nothing to show.
	if err != nil && !errors.Is(err, extension.ReasonUnknownMethod) && !errors.Is(err, extension.ReasonCapabilityNotDeclared) && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "fullsidecar: publishing:", err)
	}
}

// demo is the demo action: a form, then a greeting.
func demo(ctx context.Context, a *extension.UIActionParams) (extension.UIActionResult, error) {
	ui := sdk.UI(ctx)
	values, err := ui.Ask(ctx, "fullsidecar-demo-form", extension.PromptInput, extension.UIFormPayload{
		Title: "fullsidecar demo",
		Fields: []extension.UIFormField{
			{Key: "name", Label: "Your name", Kind: extension.PromptInput, Required: true},
			{Key: "loud", Label: "Shout it?", Kind: extension.PromptConfirm},
		},
	})
	if err != nil && !errors.Is(err, sdk.ErrDismissed) {
		return extension.UIActionResult{}, err
	}
	var name string
	var loud bool
	json.Unmarshal(values["name"], &name)
	json.Unmarshal(values["loud"], &loud)
	greeting := "Hello, " + cmp.Or(strings.TrimSpace(name), "world") + "!"
	if loud {
		greeting = strings.ToUpper(greeting)
	}
	if err := ui.Publish(ctx, "fullsidecar-greeting", extension.UINotificationPayload{Title: greeting}); err != nil {
		return extension.UIActionResult{}, err
	}
	return extension.UIActionResult{Accepted: true, Message: greeting}, nil
}

// submitted acknowledges a submitted form.
func submitted(ctx context.Context, s *extension.UISubmitParams) error {
	return sdk.UI(ctx).Publish(ctx, "fullsidecar-status", extension.UIStatusPayload{Label: "fullsidecar: form " + s.SurfaceID + " submitted"})
}
