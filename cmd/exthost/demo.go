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
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/reasonix-ext/extension"
)

// demoCommand runs one agent turn against a plugin and prints a transcript.
func demoCommand(fs *flag.FlagSet) func(*env) int {
	wire := fs.Bool("wire", false, "also print every frame on the wire, redacted and escaped, under the step that caused it")
	script := fs.String("script", "", "run the turn in this JSON file instead of the default turn: an array of steps, each one of\n"+
		`{"intercept": POINT, "payload": {...}}, {"event": POINT, "payload": {...}},`+"\n"+
		`{"stream": REF or "*", "effort": E, "request": {...}, "cancelAfter": N}, {"action": "/plugin:action" or "*", "args": {...}},`+"\n"+
		`{"answer": {...}} (the values the next prompt is answered with), {"submit": SURFACE or "*", "values": {...}},`+"\n"+
		`{"resources": [PATH...]}; each may have a "title"`)
	home := fs.String("home", "", "run the plugins installed in this Reasonix home instead of PLUGIN_DIR")
	timeout := fs.Duration("timeout", 0, "how long to wait for a stream's end and for each sidecar's shutdown (0: 30s and 5s)")
	return func(e *env) int {
		if *home != "" && len(e.args) > 0 {
			e.usage()
			return 2
		}
		d := &demo{ctx: e.ctx, out: e.stdout, wire: *wire, quiet: 50 * time.Millisecond, timeout: *timeout}
		err := d.run(e.args, *home, *script)
		if e.ctx.Err() != nil {
			err = errInterrupted // whatever it cut short: the start, a step, the shutdown
		}
		return e.exit(err)
	}
}

// demo is one run of the scripted turn. Everything the sidecars do during
// a step (frames, stderr, UI, warnings) is collected as it happens and
// printed under that step once it has settled, so the transcript keeps
// the order things crossed the pipe.
type demo struct {
	ctx     context.Context // SIGINT or SIGTERM ends the turn; nil means never
	out     io.Writer
	wire    bool
	timeout time.Duration // -timeout: a stream's and a shutdown's bound; 0 for their defaults
	quiet   time.Duration // a step has settled after this long without news: what a sidecar does on its own after an answer (a publish, a stderr line) comes within it
	rt      *extension.Runtime
	ids     []string // the running plugins
	// redactor redacts all the demo prints of a step, which it escapes
	// after (D25, D27): the host's secret environment and the values the
	// installed manifests give their sidecars among the secrets.
	redactor *extension.Redactor

	mu      sync.Mutex
	news    []entry
	grew    chan struct{}   // closed and replaced by add
	pending map[string]bool // requests not answered yet, "in 7" or "out 7"
	answer  map[string]json.RawMessage
	forms   [][2]string  // forms shown or asked: plugin and surface id
	failed  atomic.Int64 // steps without a legal answer, and warnings
}

// entry is one thing that happened during a step.
type entry struct {
	text    string
	frame   bool // shown only with -wire
	inbound bool // a frame the sidecar wrote
	w       looseFrame
}

// looseFrame is what the demo reads of a frame to pair requests with
// answers and find a step's own frames; it judges nothing.
type looseFrame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// Demo bounds: how long a step may take to settle (its requests answered,
// its frames seen) and a stream to end.
const (
	stepBound   = 2 * time.Second
	streamBound = 30 * time.Second
)

// add records what happened; a frame's request is pending until the frame
// that answers it.
func (d *demo) add(e entry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e.frame && e.w.ID != nil {
		dir := map[bool]string{true: "in ", false: "out "}
		if e.w.Method != "" {
			d.pending[dir[e.inbound]+string(e.w.ID)] = true
		} else {
			delete(d.pending, dir[!e.inbound]+string(e.w.ID))
		}
	}
	d.news = append(d.news, e)
	close(d.grew)
	d.grew = make(chan struct{})
}

// frameWidth is where a frame is cut in the transcript; a handshake is
// far shorter, a page of content far longer.
const frameWidth = 4096

// tap is the Conn's tap: it records one frame, the sidecar's redacted,
// every frame escaped (D25, D27), and its request or answer noted for
// settle.
func (d *demo) tap(inbound bool, frame []byte) {
	var w looseFrame
	json.Unmarshal(frame, &w)
	arrow, text := "host → sidecar", string(frame)
	if inbound {
		arrow, text = "sidecar → host", d.redactor.RedactJSON(text) // the sink redacts the line too
	}
	if len(text) > frameWidth {
		text = fmt.Sprintf("%s… (%d more bytes)", text[:frameWidth], len(text)-frameWidth)
	}
	if _, err := strconv.ParseInt(string(w.ID), 10, 64); inbound && w.Method == "" && w.ID != nil && err != nil {
		// The host drops it (PROTOCOL.md §2.4); its caller only sees a timeout.
		d.add(entry{text: fmt.Sprintf("   the sidecar answered with id %s: request ids are integers (PROTOCOL.md D4), so the host drops that answer", string(w.ID))})
	}
	if inbound && w.Method == extension.MethodContentRead {
		// Shown without -wire too: how a large payload reaches a sidecar.
		d.add(entry{text: "   content ref read: the sidecar asks the host for a page of the payload, " + string(w.Params) + "; it checks the whole against the descriptor's totalBytes and sha256 before its callback sees it (D22)"})
	}
	d.add(entry{text: "      " + arrow + " " + text, frame: true, inbound: inbound, w: w})
}

// await waits, at most stepBound, until ready (called with d.mu held)
// holds and then nothing has happened for quiet. Then, with d.mu still
// held, it calls take (when not nil): nothing can come between the last
// check and what take collects.
func (d *demo) await(quiet time.Duration, ready func() bool, take func()) {
	deadline := time.Now().Add(stepBound)
	calm := time.Now() // since the last news
	for {
		d.mu.Lock()
		grew, ok := d.grew, ready()
		wait := time.Until(deadline)
		if ok {
			wait = min(wait, quiet-time.Since(calm))
		}
		if wait <= 0 {
			if take != nil {
				take()
			}
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
		select {
		case <-grew:
			calm = time.Now()
		case <-time.After(wait): // its timer is collected once unreferenced (Go 1.23)
		}
	}
}

// settle waits until every request of the step has its answer and
// nothing has happened for d.quiet, then prints what the step caused. A
// request the step gave up on (at stepBound) does not hold up the next.
func (d *demo) settle() {
	var news []entry
	d.await(d.quiet, func() bool { return len(d.pending) == 0 }, func() {
		news, d.news = d.news, nil
		clear(d.pending)
	})
	for _, e := range news {
		if !e.frame || d.wire {
			fmt.Fprintln(d.out, extension.TerminalSafe(d.redactor.Redact(e.text)))
		}
	}
}

// waitFor waits, at most stepBound, until n frames of the step are
// requests or notifications of method whose params contain params.
func (d *demo) waitFor(n int, method string, params []byte) {
	d.await(0, func() bool {
		seen := 0
		for _, e := range d.news {
			if e.frame && e.w.Method == method && bytes.Contains(e.w.Params, params) {
				seen++
			}
		}
		return seen >= n
	}, nil)
}

// Show prints a surface under the step that published it.
func (d *demo) Show(s extension.Surface) {
	if s.Form != nil {
		d.mu.Lock()
		d.forms = append(d.forms, [2]string{s.Plugin, s.SurfaceID})
		d.mu.Unlock()
	}
	d.add(entry{text: "   ui " + string(s.Kind) + ": " + strings.ReplaceAll(strings.TrimSpace(s.Text()), "\n", "\n       ")})
}

// Ask answers a prompt as the script said, or as a user typing "Ada"
// and saying yes.
func (d *demo) Ask(ctx context.Context, p extension.Prompt) (map[string]json.RawMessage, bool, error) {
	d.mu.Lock()
	values := d.answer
	d.answer = nil
	d.forms = append(d.forms, [2]string{p.Plugin, p.SurfaceID})
	d.mu.Unlock()
	if values == nil {
		values = map[string]json.RawMessage{}
		for _, f := range p.Form.Fields {
			values[f.Key] = json.RawMessage(`"Ada"`)
			first, _ := json.Marshal(append(f.Options, "Ada")[0]) // of a select: the first option
			switch f.Kind {
			case extension.PromptConfirm:
				values[f.Key] = json.RawMessage("true")
			case extension.PromptSelect:
				values[f.Key] = first
			case extension.PromptMultiselect:
				values[f.Key] = json.RawMessage("[" + string(first) + "]")
			}
		}
		if len(p.Form.Fields) == 0 {
			values["value"] = json.RawMessage(`"Ada"`)
		}
	}
	answers, _ := json.Marshal(values)
	d.add(entry{text: fmt.Sprintf("   prompt %s from %s (%s) %q, answered by the demo: %s", p.SurfaceID, p.Plugin, p.Kind, p.Form.Title, answers)})
	return values, false, nil
}

// say adds a line of the step's own outcome, in order with what the
// sidecars did.
func (d *demo) say(format string, args ...any) {
	d.add(entry{text: strings.TrimSuffix(fmt.Sprintf(format, args...), "\n")})
}

// fail marks the turn failed: a step did not get a legal answer.
func (d *demo) fail(format string, args ...any) {
	d.failed.Add(1)
	d.say("   FAILED: %s", fmt.Sprintf(format, args...))
}

// run installs the plugins (or uses those of home), starts them, runs the
// turn and shuts them down.
func (d *demo) run(args []string, home, scriptFile string) error {
	work, err := os.MkdirTemp("", "exthost-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	turn := defaultTurn(work)
	if scriptFile != "" {
		if turn, err = loadScript(scriptFile); err != nil {
			return err
		}
	}
	if home == "" {
		home = filepath.Join(work, "home")
		targets, err := pluginTargets("", args, work) // one: args' or the reference plugin
		if err == nil {
			_, err = extension.Install(home, targets[0].dir, extension.InstallOptions{Link: true})
		}
		if err != nil {
			return err
		}
	}
	entries, err := extension.LoadPackages(home)
	if err != nil {
		return err
	}
	d.redactor = &extension.Redactor{}
	for i := range entries {
		root := packageRoot(home, &entries[i])
		if trust, err := extension.TrustPlugin(root, entries[i].Name); err == nil && entries[i].Enabled {
			fmt.Fprintf(d.out, "%s\n", trust.Text())
		}
		if raw, err := os.ReadFile(filepath.Join(root, extension.ManifestFile)); err == nil {
			if m, err := extension.ParseManifest(raw); err == nil && m.Runtime != nil {
				d.redactor.Values = append(d.redactor.Values, slices.Collect(maps.Values(m.Runtime.Env))...)
			}
		}
	}
	d.pending, d.grew = map[string]bool{}, make(chan struct{})
	h := &extension.Host{
		Home:            home,
		ShutdownTimeout: d.timeout, // zero: the host's default
		Session:         extension.SessionContext{SessionID: "demo-session", WorkspaceRoot: work, Generation: 1},
		Frontend:        d,
		// An optional plugin skipped after a failure or a violation is a
		// step without a legal answer.
		OnWarning: func(w *extension.PluginError) {
			d.failed.Add(1)
			d.say("   warning: %s: %s", w.Plugin, w.Err)
		},
		OnStderr: func(plugin, line string) {
			d.add(entry{text: "      stderr " + plugin + ": " + line})
		},
	}
	h.Conn.Tap = d.tap
	h.Conn.Logf = func(format string, args ...any) {
		d.add(entry{text: "      log: " + fmt.Sprintf(format, args...), frame: true}) // wire-level: with -wire
	}
	ctx := cmp.Or(d.ctx, context.Background())
	fmt.Fprintf(d.out, "── start: handshake\n")
	rt, err := h.Start(ctx)
	if err != nil {
		d.settle()
		return err
	}
	defer rt.Close() // after the explicit Close below, a no-op
	d.rt = rt
	for i := range entries {
		decl, ok := rt.Declaration(entries[i].Name)
		if !ok {
			continue
		}
		d.ids = append(d.ids, entries[i].Name)
		line := fmt.Sprintf("   %s %s subscribes to %s", decl.Name, decl.Version, cmp.Or(strings.Join(decl.Subscriptions, ", "), "nothing"))
		if len(decl.Replaces) > 0 {
			line += "; owns " + strings.Join(decl.Replaces, ", ")
		}
		for _, p := range decl.Providers {
			line += "; serves " + p.Ref
		}
		for _, a := range decl.UIActions {
			line += fmt.Sprintf("; offers /%s:%s", entries[i].Name, a.ActionID)
		}
		d.say("%s", line)
	}
	d.settle()
	if len(d.ids) == 0 {
		// Nothing to run the turn against: one line, as check -home says it.
		if len(entries) == 0 {
			return fmt.Errorf("no plugin started: %s has no plugin installed", home)
		}
		return errors.New("no plugin started (the warnings above say why)")
	}
	for i, step := range turn {
		if ctx.Err() != nil {
			break // interrupted: the runtime is closed below
		}
		fmt.Fprintf(d.out, "── %s\n", cmp.Or(step.Title, fmt.Sprintf("step %d: %s", i+1, strings.Join(step.kinds(), " "))))
		d.step(ctx, step)
		d.settle()
	}
	fmt.Fprintf(d.out, "── shutdown\n")
	start := time.Now()
	err = rt.Close()
	if err == nil {
		d.say("   every sidecar stopped cleanly in %v", time.Since(start).Round(time.Millisecond))
	}
	d.settle()
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if n := d.failed.Load(); n > 0 {
		return fmt.Errorf("%d step(s) did not get a legal answer", n)
	}
	return nil
}

// step runs one step of the turn.
func (d *demo) step(ctx context.Context, s scriptStep) {
	switch {
	case s.Intercept != "" || s.Event != "":
		p := cmp.Or(s.Intercept, s.Event)
		if chain := d.recipients(p, s.Payload); len(chain) == 0 {
			d.say("   skipped: no plugin subscribes to %s\n", p)
		} else if s.Intercept != "" {
			d.intercept(ctx, p, s.Payload, chain)
		} else if err := d.rt.Observe(p, s.Payload); err != nil {
			d.fail("%v", err)
		} else {
			// The event is written after Observe returns: its frame belongs here.
			event, _ := json.Marshal(p)
			d.waitFor(len(chain), extension.MethodEvent, append([]byte(`"event":`), event...))
			d.say("   observed by %s\n", strings.Join(chain, ", "))
		}
	case s.Stream != "":
		d.stream(ctx, s)
	case s.Action != "":
		names := []string{s.Action}
		if s.Action == "*" {
			names = d.rt.Actions()
		}
		if len(names) == 0 {
			d.say("   skipped: no plugin declares a UI action\n")
		}
		for _, name := range names {
			res, err := d.rt.Action(ctx, "demo-session", name, s.Args)
			d.settle() // the prompt and the surfaces come before the answer
			if err != nil {
				d.fail("%s: %v", name, err)
				continue
			}
			d.say("   %s: accepted %t %s\n", name, res.Accepted, res.Message)
		}
	case s.Answer != nil:
		d.mu.Lock()
		d.answer = s.Answer
		d.mu.Unlock()
		answers, _ := json.Marshal(s.Answer)
		d.say("   the next prompt will be answered %s\n", answers)
	case s.Submit != "":
		d.submit(ctx, s)
	case s.Resources != nil:
		if err := d.rt.ResourcesChanged(s.Resources); err != nil {
			d.fail("%v", err)
			return
		}
		d.waitFor(len(d.ids), extension.MethodResourcesChanged, nil)
		d.say("   sent to %s\n", strings.Join(d.ids, ", "))
	}
}

// recipients are the plugins an operation at p reaches: its chain and
// slot owner, and at tool.before and tool.after the owner of the tool's
// tool:<name> slot (D28).
func (d *demo) recipients(p extension.Point, payload json.RawMessage) []string {
	ids := d.rt.Chain(p)
	var tool struct {
		Name string `json:"name"`
	}
	if (p == extension.ToolBefore || p == extension.ToolAfter) && json.Unmarshal(payload, &tool) == nil && tool.Name != "" {
		for _, id := range d.ids {
			if decl, _ := d.rt.Declaration(id); slices.Contains(decl.Replaces, "tool:"+tool.Name) && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// intercept runs an intercept step that reaches chain and says its
// outcome.
func (d *demo) intercept(ctx context.Context, p extension.Point, payload json.RawMessage, chain []string) {
	out, err := d.rt.Intercept(ctx, p, payload)
	if len(out.Skipped) > 0 {
		d.say("   skipped %s: failed here (a timeout or an illegal answer); the rest of the chain ruled\n", strings.Join(out.Skipped, ", "))
		chain = slices.DeleteFunc(slices.Clone(chain), func(id string) bool { return slices.Contains(out.Skipped, id) })
	}
	switch {
	case err != nil:
		d.fail("%v", err)
	case out.Blocked:
		d.say("   blocked by %s: %s\n", out.BlockedBy, out.Reason)
	case out.Permission != "":
		d.say("   %s by %s: %s\n", out.Permission, out.PermissionBy, out.Reason)
	case len(out.Replaced) > 0:
		shown := string(out.Payload)
		if len(shown) > 200 {
			shown = fmt.Sprintf("%s… (%d bytes)", shown[:200], len(out.Payload))
		}
		d.say("   replaced by %s: %s\n", strings.Join(out.Replaced, ", "), shown)
	case p == extension.PermissionDecision:
		d.say("   no extension ruled (chain: %s); the host's decision stands\n", strings.Join(chain, " → "))
	case len(chain) == 0:
		d.say("   no extension ruled: the operation goes on as the host had it\n")
	default:
		d.say("   continue (chain: %s)\n", strings.Join(chain, " → "))
	}
}

// stream opens a provider stream and prints its chunks; with CancelAfter
// it gives the stream up after that many chunks.
func (d *demo) stream(ctx context.Context, s scriptStep) {
	ref := s.Stream
	if ref == "*" {
		models, err := d.rt.Catalog(ctx)
		if err != nil {
			d.fail("catalog: %v", err)
			return
		}
		i := slices.IndexFunc(models, func(m extension.ProviderDescriptor) bool { return strings.HasPrefix(m.Ref, "plugin/") })
		if i < 0 {
			d.say("   skipped: no plugin serves a model\n")
			return
		}
		ref = models[i].Ref
	}
	req := extension.ProviderRequest{Messages: []extension.ProviderMessage{{Role: extension.RoleUser, Content: "hello"}}, Tools: []extension.ProviderToolSchema{}, MaxTokens: 256}
	if s.Request != nil {
		req = *s.Request
	}
	sctx, cancel := context.WithTimeout(ctx, cmp.Or(d.timeout, streamBound))
	defer cancel()
	st, err := d.rt.OpenStream(sctx, ref, s.Effort, req)
	if err != nil {
		d.fail("%s: %v", ref, err)
		return
	}
	d.say("   %s\n", ref)
	for n := 0; ; n++ {
		if s.CancelAfter > 0 && n == s.CancelAfter {
			st.Close()
			id, _ := json.Marshal(st.ID())
			d.waitFor(1, extension.MethodStreamEnd, id)
		}
		c, err := st.Recv()
		switch {
		case errors.Is(err, io.EOF):
			d.say("   end of the stream (stream/end: the sidecar sent no more chunks)\n")
			return
		case errors.Is(err, extension.ReasonStreamCancelled) && s.CancelAfter > 0:
			d.say("   cancelled by the demo after %d chunk(s): %v\n", n, err)
			return
		case err != nil:
			d.fail("%v", err)
			return
		}
		d.say("   %s\n", chunkText(c))
	}
}

// chunkText describes a chunk in one line; the host has escaped its
// strings (D27).
func chunkText(c extension.ProviderChunk) string {
	switch {
	case c.Type == extension.ChunkText:
		return fmt.Sprintf("text %q", c.Text)
	case c.ToolCall != nil:
		return fmt.Sprintf("%s %s %s", c.Type, c.ToolCall.Name, c.ToolCall.Arguments)
	case c.Usage != nil:
		u := c.Usage
		return fmt.Sprintf("usage: %d prompt + %d completion = %d tokens, finish %s", u.PromptTokens, u.CompletionTokens, u.TotalTokens, u.FinishReason)
	case c.Type == extension.ChunkDone:
		return "done (the model's answer is complete)"
	}
	b, _ := json.Marshal(c)
	return string(c.Type) + " " + string(b)
}

// submit sends the values of a form: the one named, of the plugin that
// showed or asked it, or with "*" the last one.
func (d *demo) submit(ctx context.Context, s scriptStep) {
	d.mu.Lock()
	var form [2]string
	for _, f := range d.forms {
		if s.Submit == "*" || f[1] == s.Submit {
			form = f
		}
	}
	d.mu.Unlock()
	if form[1] == "" {
		d.say("   skipped: no form%s was shown or asked\n", strings.TrimRight(" "+strings.Trim(s.Submit, "*"), " "))
		return
	}
	accepted, err := d.rt.Submit(ctx, "demo-session", form[0], form[1], s.Values)
	d.settle()
	if err != nil {
		d.fail("%s: %v", form[0], err)
		return
	}
	d.say("   %s: submitted %s, accepted %t\n", form[0], form[1], accepted)
}

// scriptStep is one step of a turn: exactly one of Intercept, Event,
// Stream, Action, Answer, Submit and Resources.
type scriptStep struct {
	Title       string                     `json:"title,omitempty"`
	Intercept   extension.Point            `json:"intercept,omitempty"`
	Event       extension.Point            `json:"event,omitempty"`
	Payload     json.RawMessage            `json:"payload,omitempty"`
	Stream      string                     `json:"stream,omitempty"`
	Effort      string                     `json:"effort,omitempty"`
	Request     *extension.ProviderRequest `json:"request,omitempty"`
	CancelAfter int                        `json:"cancelAfter,omitempty"`
	Action      string                     `json:"action,omitempty"`
	Args        map[string]string          `json:"args,omitempty"`
	Answer      map[string]json.RawMessage `json:"answer,omitempty"`
	Submit      string                     `json:"submit,omitempty"`
	Values      map[string]json.RawMessage `json:"values,omitempty"`
	Resources   []string                   `json:"resources,omitempty"`
}

// kinds lists what the step does; a valid step does one thing.
func (s scriptStep) kinds() []string {
	return named(map[string]bool{"intercept " + string(s.Intercept): s.Intercept != "", "event " + string(s.Event): s.Event != "",
		"stream " + s.Stream: s.Stream != "", "action " + s.Action: s.Action != "", "answer": s.Answer != nil,
		"submit " + s.Submit: s.Submit != "", "resources": s.Resources != nil})
}

// stray names a member set that the step's kind does not take, or "".
func (s scriptStep) stray() string {
	intercept, stream := s.Intercept != "" || s.Event != "", s.Stream != ""
	return append(named(map[string]bool{
		"payload": len(s.Payload) > 0 && !intercept, "effort": s.Effort != "" && !stream,
		"request": s.Request != nil && !stream, "cancelAfter": s.CancelAfter != 0 && !stream || s.CancelAfter < 0,
		"args": s.Args != nil && s.Action == "", "values": s.Values != nil && s.Submit == "",
	}), "")[0]
}

// named returns the names that m sets, sorted.
func named(m map[string]bool) []string {
	var names []string
	for name, set := range m {
		if set {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// loadScript reads a turn an author wrote (see demo -help).
func loadScript(path string) ([]scriptStep, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var steps []scriptStep
	err = dec.Decode(&steps)
	if err == nil && dec.Decode(&struct{}{}) != io.EOF {
		err = errors.New("data after the array")
	}
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		before := data[:syntax.Offset]
		err = fmt.Errorf("%w (line %d, column %d)", err, bytes.Count(before, []byte("\n"))+1, utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %v (a script is a JSON array of steps; see exthost help demo)", path, err)
	}
	for i, s := range steps {
		problem := ""
		switch k := s.kinds(); {
		case len(k) != 1:
			problem = fmt.Sprintf("does %d things (%s); a step does exactly one of intercept, event, stream, action, answer, submit, resources", len(k), strings.Join(k, ", "))
		case s.stray() != "":
			problem = fmt.Sprintf("has %q, which %s steps do not take", s.stray(), strings.Fields(k[0])[0])
		case s.Intercept != "" && !slices.Contains(extension.Points(), s.Intercept), s.Event != "" && !slices.Contains(extension.Points(), s.Event):
			problem = fmt.Sprintf("%q is not a hook point (%v)", cmp.Or(s.Intercept, s.Event), extension.Points())
		case (s.Intercept != "" || s.Event != "") && (len(s.Payload) == 0 || bytes.TrimSpace(s.Payload)[0] != '{'):
			problem = "an intercept or event needs a \"payload\" object"
		case s.Intercept != "" || s.Event != "":
			// The point's payload type, as the host would refuse it: a
			// plugin is never blamed for a payload the script got wrong.
			if _, err := extension.DecodePayload(cmp.Or(s.Intercept, s.Event), s.Payload); err != nil {
				problem = "has a payload the host refuses: " + err.Error()
			}
		}
		if problem != "" {
			return nil, fmt.Errorf("%s: step %d %s", path, i+1, problem)
		}
	}
	return steps, nil
}

// defaultTurn is the scripted turn of exthost demo: every step of an
// agent turn that a sidecar can take part in, and with the reference
// plugin every method of the protocol.
func defaultTurn(work string) []scriptStep {
	doc := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	session := filepath.Join(work, "session.jsonl")
	large := "/fs " + strings.Repeat("a long pasted log line ", 100<<10/23)
	return []scriptStep{
		{Title: "session.start (observed)", Event: extension.SessionStart, Payload: doc(extension.SessionPayload{SessionPath: session, Phase: "start"})},
		{Title: `input.receive "/fs hello world"`, Intercept: extension.InputReceive, Payload: doc(extension.InputPayload{Text: "/fs hello world"})},
		{Title: `input.receive "what changed since yesterday?"`, Intercept: extension.InputReceive, Payload: doc(extension.InputPayload{Text: "what changed since yesterday?"})},
		{Title: "system_prompt.build", Intercept: extension.SystemPromptBuild, Payload: doc(extension.SystemPromptPayload{Prompt: "You are a coding agent.", WorkspaceRoot: work})},
		{Title: "provider stream: the model answers", Stream: "*", Effort: "low"},
		{Title: "provider stream: the user stops it after one chunk", Stream: "*", CancelAfter: 1},
		{Title: "tool.before read README.md", Intercept: extension.ToolBefore, Payload: doc(extension.ToolPayload{Name: "read", Arguments: `{"path":"README.md"}`})},
		{Title: "tool.before rm notes.txt", Intercept: extension.ToolBefore, Payload: doc(extension.ToolPayload{Name: "rm", Arguments: `{"path":"notes.txt"}`})},
		{Title: "tool.before write notes.txt", Intercept: extension.ToolBefore, Payload: doc(extension.ToolPayload{Name: "write", Arguments: `{"path":"notes.txt"}`})},
		{Title: "tool.before dangerous_exec", Intercept: extension.ToolBefore, Payload: doc(extension.ToolPayload{Name: "dangerous_exec", Arguments: `{"cmd":"rm -rf /"}`})},
		{Title: "tool.after read (intercepted)", Intercept: extension.ToolAfter, Payload: doc(extension.ToolResultPayload{Name: "read", Arguments: `{"path":"README.md"}`, Result: "# README"})},
		{Title: "tool.after read (observed)", Event: extension.ToolAfter, Payload: doc(extension.ToolResultPayload{Name: "read", Arguments: `{"path":"README.md"}`, Result: "# README"})},
		{Title: "permission.decision rm (the host says deny)", Intercept: extension.PermissionDecision, Payload: doc(extension.PermissionPayload{Name: "rm", Arguments: `{"path":"notes.txt"}`, HostDecision: "deny"})},
		{Title: "the user will answer the next prompt", Answer: map[string]json.RawMessage{"name": json.RawMessage(`"Ada"`), "loud": json.RawMessage("true")}},
		{Title: "UI actions: the user runs each one", Action: "*"},
		{Title: "UI submit: the user sends the last form", Submit: "*", Values: map[string]json.RawMessage{"name": json.RawMessage(`"Grace"`)}},
		{Title: "input.receive of a 100 KiB paste (it travels by content ref)", Intercept: extension.InputReceive, Payload: doc(extension.InputPayload{Text: large})},
		{Title: "resources changed", Resources: []string{"skills/review.md"}},
		{Title: "session.end (observed)", Event: extension.SessionEnd, Payload: doc(extension.SessionPayload{SessionPath: session, Phase: "end"})},
	}
}
