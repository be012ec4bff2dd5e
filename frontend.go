package extension

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Frontend is what a host's user interface implements to receive the
// sidecars' structured UI (PROTOCOL.md §7). Every payload it gets has
// been strictly decoded, checked to be structured data only (D23) and
// redacted, and belongs to the session and generation bound now (D24).
type Frontend interface {
	// Show shows s, replacing a surface of the same plugin and
	// SurfaceID. It must not block.
	Show(s Surface)
	// Ask puts p to the user and returns the answers by field key, or
	// cancelled when the user dismissed it (PROTOCOL.md §7.3: one
	// question per field, a confirm answered with a boolean, a select
	// with a string, a multiselect with an array, an input with text; a
	// form without fields is one question keyed "value"). It blocks
	// until then or until ctx ends (the sidecar is gone).
	Ask(ctx context.Context, p Prompt) (values map[string]json.RawMessage, cancelled bool, err error)
}

// Surface is one published surface: exactly one of the payload
// pointers is set, the one of Kind.
type Surface struct {
	Plugin, SurfaceID, SessionID string
	Generation                   uint64
	Kind                         SurfaceKind
	Status                       *UIStatusPayload
	Card                         *UICardPayload
	Form                         *UIFormPayload
	Notification                 *UINotificationPayload
}

// Prompt is one blocking question of a host/ui/request.
type Prompt struct {
	Plugin, SurfaceID, SessionID string
	Generation                   uint64
	Kind                         PromptKind
	Form                         UIFormPayload
}

// binding is the session and generation a Host's UI is bound to now
// (D24). It is shared by every generation of one Host and moves to the
// new generation when a reload swaps it in, so a retiring generation's
// late publish is stale at once.
type binding struct {
	now atomic.Pointer[SessionContext]
}

func (b *binding) set(s SessionContext) { b.now.Store(&s) }

func (b *binding) current(session string, generation uint64) bool {
	s := b.now.Load()
	return s != nil && s.SessionID == session && s.Generation == generation
}

// bindMu guards the making of a Host's binding.
var bindMu sync.Mutex

// binding returns the Host's binding, made on its first generation.
func (h *Host) binding() *binding {
	bindMu.Lock()
	defer bindMu.Unlock()
	if h.bound == nil {
		h.bound = new(binding)
	}
	return h.bound
}

// ui answers host/ui/publish and host/ui/request (PROTOCOL.md §7.2,
// §7.3), in this order: a frontend is wired (else unknown_method), the
// params decode, the plugin has the ui capability
// (capability_not_declared), the session and generation are the bound
// ones (else accepted:false, or cancelled:true for a request, at once),
// the payload decodes and is structured only (D23, invalid_params).
func (s *sidecar) ui(ctx context.Context, method string, params json.RawMessage) (any, error) {
	fe := s.cfg.Frontend
	if fe == nil {
		return nil, NewError(ReasonUnknownMethod, "extension UI is not available on this host")
	}
	var p UIPublishParams
	var prompt PromptKind
	if method == MethodUIRequest {
		var rp UIRequestParams
		if err := DecodeParams(method, params, &rp); err != nil {
			return nil, err
		}
		p, prompt = UIPublishParams{SurfaceID: rp.SurfaceID, SessionID: rp.SessionID, Generation: rp.Generation, Payload: rp.Payload}, rp.Kind
	} else if err := DecodeParams(method, params, &p); err != nil {
		return nil, err
	}
	if !slices.Contains(s.spec.Runtime.Capabilities, "ui") {
		return nil, Errorf(ReasonCapabilityNotDeclared, "extension %s calls %s without the ui capability in its manifest", s.spec.ID, method)
	}
	stale := !s.cfg.bound.current(p.SessionID, p.Generation)
	kind := p.Kind
	if method == MethodUIRequest {
		if stale {
			return UIRequestResult{Cancelled: true}, nil // D24: an old sidecar never hangs on an invisible prompt
		}
		kind = SurfaceForm
	} else if stale {
		return UIPublishResult{Accepted: false}, nil // D24
	}
	v, err := DecodeSurface(kind, p.Payload)
	if err != nil {
		return nil, err
	}
	if card, ok := v.(*UICardPayload); ok {
		for i, a := range card.Actions {
			if !slices.ContainsFunc(s.result.UIActions, func(d UIActionDecl) bool { return d.ActionID == a.ActionID }) {
				return nil, Errorf(ReasonInvalidParams, "invalid card surface payload: /actions/%d/actionId is not an action extension %s declared", i, s.spec.ID)
			}
		}
	}
	for _, f := range uiStrings(v) {
		if f.shown {
			*f.s = s.redactor.Redact(*f.s) // D25
		}
	}
	id := s.say(p.SurfaceID) // D27: outside the payload, escaped
	if method == MethodUIRequest {
		// A pending prompt is an operation (D14); a generation that is
		// retiring asks nothing more.
		if s.rt.begin() != nil {
			return UIRequestResult{Cancelled: true}, nil
		}
		defer s.rt.end()
		values, cancelled, err := fe.Ask(ctx, Prompt{Plugin: s.spec.ID, SurfaceID: id, SessionID: p.SessionID, Generation: p.Generation, Kind: prompt, Form: *v.(*UIFormPayload)})
		if err != nil {
			return nil, causedError(err, ReasonInternal, "") // the host's own failure: its text stays here
		}
		if cancelled || values == nil {
			return UIRequestResult{Cancelled: true}, nil
		}
		return UIRequestResult{Values: values}, nil
	}
	sf := Surface{Plugin: s.spec.ID, SurfaceID: id, SessionID: p.SessionID, Generation: p.Generation, Kind: kind}
	switch d := v.(type) {
	case *UIStatusPayload:
		sf.Status = d
	case *UICardPayload:
		sf.Card = d
	case *UIFormPayload:
		sf.Form = d
	case *UINotificationPayload:
		sf.Notification = d
	}
	fe.Show(sf)
	return UIPublishResult{Accepted: true}, nil
}

// ParseAction splits an action's name, /<plugin>:<action>, into its
// plugin and action ID, which must match ^[a-z0-9][a-z0-9-]*$ (D9).
func ParseAction(name string) (plugin, action string, err error) {
	rest, ok := strings.CutPrefix(name, "/")
	plugin, action, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || strings.TrimSpace(plugin) == "" || !validActionID(action) {
		return "", "", Errorf(ReasonInvalidParams, "%q is not an action name /<plugin>:<action> with an action id of lowercase letters, digits and dashes", name)
	}
	return plugin, action, nil
}

// Actions returns the names of the UI actions the generation's sidecars
// declared, /<plugin>:<action>, sorted.
func (rt *Runtime) Actions() []string {
	var names []string
	for _, s := range rt.sidecars {
		for _, a := range s.result.UIActions {
			names = append(names, "/"+s.spec.ID+":"+a.ActionID)
		}
	}
	slices.Sort(names)
	return slices.Compact(names) // an id declared twice counts once
}

// uiTarget finds the running sidecar of plugin for a UI call of session
// (PROTOCOL.md §7.4), checked in this order: an unknown plugin is
// internal, a crashed one provider_interrupted, another session
// invalid_params.
func (rt *Runtime) uiTarget(plugin, session string) (*sidecar, error) {
	s := rt.byID[plugin]
	if s == nil {
		return nil, Errorf(ReasonInternal, "no extension %s runs in this generation", plugin)
	}
	if err := s.usable(); err != nil {
		return nil, err
	}
	if session != rt.cfg.Session.SessionID {
		return nil, Errorf(ReasonInvalidParams, "stale session %q: this generation serves %q", session, rt.cfg.Session.SessionID)
	}
	return s, nil
}

// Action invokes the UI action name (/<plugin>:<action>) for session with
// args, and returns the sidecar's answer, its message redacted and
// escaped. Errors: a malformed name or an undeclared action
// (invalid_params), an unknown plugin (internal), a crashed one
// (provider_interrupted), another session (invalid_params), and the
// sidecar's own.
func (rt *Runtime) Action(ctx context.Context, session, name string, args map[string]string) (UIActionResult, error) {
	plugin, action, err := ParseAction(name)
	if err != nil {
		return UIActionResult{}, err
	}
	s, err := rt.uiTarget(plugin, session)
	if err != nil {
		return UIActionResult{}, err
	}
	if !slices.ContainsFunc(s.result.UIActions, func(a UIActionDecl) bool { return a.ActionID == action }) {
		return UIActionResult{}, Errorf(ReasonInvalidParams, "extension %s declares no UI action %q", plugin, action)
	}
	if err := rt.begin(); err != nil {
		return UIActionResult{}, err
	}
	defer rt.end()
	var res UIActionResult
	err = s.call(ctx, 0, MethodUIAction, UIActionParams{ActionID: action, SessionID: session, Generation: rt.cfg.Session.Generation, Args: args}, &res)
	res.Message = s.say(res.Message)
	return res, err
}

// Submit sends the values of the form surfaceID of plugin, for session,
// and reports whether the sidecar accepted them. Errors as for Action; a
// blank surfaceID is invalid_params.
func (rt *Runtime) Submit(ctx context.Context, session, plugin, surfaceID string, values map[string]json.RawMessage) (bool, error) {
	if strings.TrimSpace(surfaceID) == "" {
		return false, Errorf(ReasonInvalidParams, "a submit needs a surface id")
	}
	s, err := rt.uiTarget(plugin, session)
	if err != nil {
		return false, err
	}
	if err := rt.begin(); err != nil {
		return false, err
	}
	defer rt.end()
	if values == nil {
		values = map[string]json.RawMessage{}
	}
	var res UISubmitResult
	err = s.call(ctx, 0, MethodUISubmit, UISubmitParams{SurfaceID: surfaceID, SessionID: session, Generation: rt.cfg.Session.Generation, Values: values}, &res)
	return res.Accepted, err
}

// Text renders the surface as plain text, as a terminal host can show it
// (its strings are already structured only and redacted).
func (sf Surface) Text() string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	head := func(title string) { line("[%s] %s", sf.Plugin, title) }
	switch {
	case sf.Status != nil:
		s := sf.Status
		text := s.Label
		if s.Detail != "" {
			text += " - " + s.Detail
		}
		if s.Progress != nil {
			text += fmt.Sprintf(" (%.0f%%)", *s.Progress*100)
		}
		if s.Severity != "" {
			text = strings.ToUpper(string(s.Severity)) + ": " + text
		}
		head(text)
	case sf.Card != nil:
		c := sf.Card
		head(cmp.Or(c.Title, sf.SurfaceID))
		for _, t := range []string{c.Markdown, c.Text} {
			for l := range strings.Lines(t) {
				line("  %s", strings.TrimRight(l, "\n"))
			}
		}
		for _, f := range c.Fields {
			line("  %s: %s", f.Key, f.Value)
		}
		if c.Progress != nil {
			line("  progress: %.0f%%", *c.Progress*100)
		}
		for _, a := range c.Actions {
			line("  > /%s:%s  %s", sf.Plugin, a.ActionID, a.Label)
		}
	case sf.Form != nil:
		f := sf.Form
		head(cmp.Or(f.Title, sf.SurfaceID))
		if f.Message != "" {
			line("  %s", f.Message)
		}
		for _, fl := range f.Fields {
			text := fmt.Sprintf("  - %s (%s", cmp.Or(fl.Label, fl.Key), fl.Kind)
			if fl.Required {
				text += ", required"
			}
			text += ")"
			if len(fl.Options) > 0 {
				text += ": " + strings.Join(fl.Options, " | ")
			}
			if len(fl.Default) > 0 {
				text += " [default " + string(fl.Default) + "]"
			}
			line("%s", text)
		}
	case sf.Notification != nil:
		n := sf.Notification
		title := n.Title
		if n.Severity != "" {
			title = strings.ToUpper(string(n.Severity)) + ": " + title
		}
		head(title)
		for l := range strings.Lines(n.Body) {
			line("  %s", strings.TrimRight(l, "\n"))
		}
	}
	return b.String()
}
