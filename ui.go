package extension

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// Structured UI methods (PROTOCOL.md §7).
const (
	MethodUIAction  = "extension/ui/action"
	MethodUISubmit  = "extension/ui/submit"
	MethodUIPublish = "host/ui/publish"
	MethodUIRequest = "host/ui/request"
)

// SurfaceKind is the kind of a published surface.
type SurfaceKind string

// The surface kinds.
const (
	SurfaceCard         SurfaceKind = "card"
	SurfaceForm         SurfaceKind = "form"
	SurfaceNotification SurfaceKind = "notification"
	SurfaceStatus       SurfaceKind = "status"
)

func (SurfaceKind) enumValues() []string {
	return enumStrings(SurfaceCard, SurfaceForm, SurfaceNotification, SurfaceStatus)
}

// PromptKind is the kind of a blocking host/ui/request prompt.
type PromptKind string

// The prompt kinds.
const (
	PromptConfirm     PromptKind = "confirm"
	PromptInput       PromptKind = "input"
	PromptMultiselect PromptKind = "multiselect"
	PromptSelect      PromptKind = "select"
)

func (PromptKind) enumValues() []string {
	return enumStrings(PromptConfirm, PromptInput, PromptMultiselect, PromptSelect)
}

// UIActionDecl declares one action a sidecar offers as /<plugin>:<action>.
type UIActionDecl struct {
	ActionID string `json:"actionId" proto:"nonempty"`
	Label    string `json:"label,omitempty"`
}

// UIActionParams are the params of extension/ui/action.
type UIActionParams struct {
	ActionID   string            `json:"actionId" proto:"nonempty"`
	SessionID  string            `json:"sessionId" proto:"nonempty"`
	Generation uint64            `json:"generation"`
	Args       map[string]string `json:"args,omitempty"`
}

// UIActionResult answers extension/ui/action.
type UIActionResult struct {
	Accepted bool   `json:"accepted"`
	Message  string `json:"message,omitempty"`
}

// UISubmitParams are the params of extension/ui/submit.
type UISubmitParams struct {
	SurfaceID  string                     `json:"surfaceId" proto:"nonempty"`
	SessionID  string                     `json:"sessionId" proto:"nonempty"`
	Generation uint64                     `json:"generation"`
	Values     map[string]json.RawMessage `json:"values"`
}

// UISubmitResult answers extension/ui/submit.
type UISubmitResult struct {
	Accepted bool `json:"accepted"`
}

// UIPublishParams are the params of host/ui/publish.
type UIPublishParams struct {
	SurfaceID  string          `json:"surfaceId" proto:"nonempty"`
	SessionID  string          `json:"sessionId" proto:"nonempty"`
	Generation uint64          `json:"generation"`
	Kind       SurfaceKind     `json:"kind"`
	Payload    json.RawMessage `json:"payload"`
}

// UIPublishResult answers host/ui/publish.
type UIPublishResult struct {
	Accepted bool `json:"accepted"`
}

// UIRequestParams are the params of host/ui/request.
type UIRequestParams struct {
	SurfaceID  string          `json:"surfaceId" proto:"nonempty"`
	SessionID  string          `json:"sessionId" proto:"nonempty"`
	Generation uint64          `json:"generation"`
	Kind       PromptKind      `json:"kind"`
	Payload    json.RawMessage `json:"payload"`
}

// UIRequestResult answers host/ui/request.
type UIRequestResult struct {
	Cancelled bool                       `json:"cancelled"`
	Values    map[string]json.RawMessage `json:"values,omitempty"`
}

// Severity is the severity of a status or a notification.
type Severity string

// The severities.
const (
	SeverityError Severity = "error"
	SeverityInfo  Severity = "info"
	SeverityWarn  Severity = "warn"
)

func (Severity) enumValues() []string { return enumStrings(SeverityError, SeverityInfo, SeverityWarn) }

// The payload documents of host/ui/publish, one per SurfaceKind, and of
// host/ui/request (a UIFormPayload for every PromptKind). They travel in
// the free-form payload member and are not part of the frozen schema
// (PROTOCOL.md §7.2); the host decodes them strictly, then applies D23.

// UIStatusPayload is a status line (kind status).
type UIStatusPayload struct {
	Label    string   `json:"label" proto:"nonempty"`
	Detail   string   `json:"detail,omitempty"`
	Severity Severity `json:"severity,omitempty"`
	Progress *float64 `json:"progress,omitempty"`
}

// UICardPayload is a card (kind card): Markdown, text, fields and actions.
type UICardPayload struct {
	Title    string        `json:"title,omitempty"`
	Markdown string        `json:"markdown,omitempty"`
	Text     string        `json:"text,omitempty"`
	Fields   []UIKeyValue  `json:"fields,omitempty"`
	Progress *float64      `json:"progress,omitempty"`
	Actions  []UIActionRef `json:"actions,omitempty"`
}

// UIKeyValue is one field of a card.
type UIKeyValue struct {
	Key   string `json:"key" proto:"nonempty"`
	Value string `json:"value"`
}

// UIActionRef offers one of the sidecar's declared actions on a card.
type UIActionRef struct {
	ActionID string `json:"actionId" proto:"nonempty" ui:"id"`
	Label    string `json:"label" proto:"nonempty"`
}

// UIFormPayload is a form (kind form), and the payload of every prompt.
type UIFormPayload struct {
	Title   string        `json:"title,omitempty"`
	Message string        `json:"message,omitempty"`
	Fields  []UIFormField `json:"fields"`
}

// UIFormField is one field of a form; a select or multiselect field
// should have options (the SDK requires them).
type UIFormField struct {
	Key      string          `json:"key" proto:"nonempty" ui:"id"`
	Label    string          `json:"label,omitempty"`
	Kind     PromptKind      `json:"kind"`
	Options  []string        `json:"options,omitempty"`
	Default  json.RawMessage `json:"default,omitempty"`
	Required bool            `json:"required,omitempty"`
}

// UINotificationPayload is a notification (kind notification).
type UINotificationPayload struct {
	Title    string   `json:"title" proto:"nonempty"`
	Body     string   `json:"body,omitempty"`
	Severity Severity `json:"severity,omitempty"`
}

// uiString is one string of a UI payload: its JSON pointer, the string,
// and whether a person reads it (redacted) or a program does (a key, an
// id: checked by D23 but never altered).
type uiString struct {
	pointer string
	s       *string
	shown   bool
}

// surfaceKinds is the table of surface kinds: each kind's payload
// document, made as the member of a Surface that carries it.
var surfaceKinds = map[SurfaceKind]func(*Surface) any{
	SurfaceCard:         func(sf *Surface) any { return fill(&sf.Card) },
	SurfaceForm:         func(sf *Surface) any { return fill(&sf.Form) },
	SurfaceNotification: func(sf *Surface) any { return fill(&sf.Notification) },
	SurfaceStatus:       func(sf *Surface) any { return fill(&sf.Status) },
}

// fill points *p at a new zero T and returns it.
func fill[T any](p **T) *T {
	*p = new(T)
	return *p
}

// DecodeSurface strictly decodes the payload of a surface of kind, or of
// a prompt when kind is SurfaceForm, and applies D23 to every string in
// it: raw HTML, a javascript:, vbscript:, data: or file: URL, a Markdown
// image, a Markdown link other than http, https or relative, or a control
// character other than tab and newline is refused with invalid_params
// naming the member (never echoing its value). It returns a pointer to
// the payload document. The SDK checks a payload with it before sending.
func DecodeSurface(kind SurfaceKind, payload json.RawMessage) (any, error) {
	sf := Surface{Kind: kind}
	return sf.decode(payload)
}

// decode is DecodeSurface into the member of sf that sf.Kind names.
func (sf *Surface) decode(payload json.RawMessage) (any, error) {
	member, ok := surfaceKinds[sf.Kind]
	if !ok {
		return nil, errorf(ReasonInvalidParams, "unknown surface kind %q", sf.Kind)
	}
	v := member(sf)
	if err := Unmarshal(payload, v); err != nil {
		return nil, causedError(err, ReasonInvalidParams, "invalid %s surface payload: %v", sf.Kind, err)
	}
	for _, f := range uiStrings(reflect.ValueOf(v), "", true) {
		if why := structuredOnly(*f.s); why != "" {
			return nil, errorf(ReasonInvalidParams, "invalid %s surface payload: %s holds %s; UI payloads are structured data only (D23)", sf.Kind, f.pointer, why)
		}
	}
	return v, nil
}

// uiStrings lists the strings of v, a decoded UI payload document or the
// part of one at pointer, in document order: every string member and
// list entry, and a string default, which is never altered. A member
// tagged ui:"id" is read by a program, not shown.
func uiStrings(v reflect.Value, pointer string, shown bool) []uiString {
	var out []uiString
	switch {
	case v.Kind() == reflect.Pointer && !v.IsNil():
		return uiStrings(v.Elem(), pointer, shown)
	case v.Type() == reflect.TypeFor[string]():
		out = append(out, uiString{pointer, v.Addr().Interface().(*string), shown})
	case v.Type() == reflect.TypeFor[json.RawMessage]():
		var def string
		if json.Unmarshal(v.Bytes(), &def) == nil { // a string default is shown too
			out = append(out, uiString{pointer, &def, false})
		}
	case v.Kind() == reflect.Slice:
		for i := range v.Len() {
			out = append(out, uiStrings(v.Index(i), pointer+"/"+strconv.Itoa(i), shown)...)
		}
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			out = append(out, uiStrings(v.Field(i), pointer+"/"+name, shown && f.Tag.Get("ui") != "id")...)
		}
	}
	return out
}

// htmlElements are the element names that make "<name" raw HTML even
// with nothing after it: the ones that run, load or embed something.
var htmlElements = []string{"script", "iframe", "img", "svg", "object", "embed", "style", "link", "meta", "base", "form", "frame", "frameset", "math", "video", "audio", "source", "input", "button", "textarea", "select", "template", "applet"}

// structuredOnly returns what makes s more than structured text (D23,
// PROTOCOL.md §7.5), or "". Text inside Markdown code spans is text: only
// control characters and the URL schemes are looked for there.
func structuredOnly(s string) string {
	for _, r := range s {
		if (isControl(r) && r != '\t' && r != '\n') || r == utf8.RuneError {
			return "a control character"
		}
	}
	lower := strings.ToLower(s)
	for _, scheme := range []string{"javascript:", "vbscript:", "data:", "file:"} {
		for i := strings.Index(lower, scheme); i >= 0; {
			end := i + len(scheme)
			// data: and file: are words of prose too ("data: 3"): they
			// are URLs only when something follows at once.
			prose := scheme == "data:" || scheme == "file:"
			if (i == 0 || !urlWordByte(lower[i-1])) && (!prose || end < len(lower) && !unicode.IsSpace(rune(lower[end]))) {
				return "a " + scheme + " URL"
			}
			next := strings.Index(lower[end:], scheme)
			if next < 0 {
				break
			}
			i = end + next
		}
	}
	text := withoutCodeSpans(s)
	if strings.Contains(text, "![") && strings.Contains(text[strings.Index(text, "!["):], "](") {
		return "a Markdown image"
	}
	// A link's target and a tag each end before the next "](" or '<': a
	// scheme or an element name holds neither.
	for _, target := range strings.Split(text, "](")[1:] {
		target = strings.TrimLeft(target, " <")
		if scheme, _, ok := strings.Cut(target, ":"); ok && isScheme(scheme) && scheme != "http" && scheme != "https" {
			return "a Markdown link that is not http, https or relative"
		}
	}
	for _, rest := range strings.Split(strings.ToLower(text), "<")[1:] {
		if why := htmlAt(rest); why != "" {
			return why
		}
	}
	return ""
}

// urlWordByte reports whether b may precede a scheme inside one word, so
// that "metadata:" is not a data: URL.
func urlWordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '+' || b == '.' || b == '-'
}

// isScheme reports whether s is a URL scheme: a letter, then letters,
// digits, '+', '.' or '-'.
func isScheme(s string) bool {
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	return strings.Trim(strings.ToLower(s), "abcdefghijklmnopqrstuvwxyz0123456789+.-") == ""
}

// htmlAt reports raw HTML that starts after a '<' (rest, lowercased): a
// comment or declaration, a closing tag, an element with attributes or
// closed by '>', or one of htmlElements. "a<b" and "<https://x>" are not.
func htmlAt(rest string) string {
	switch {
	case strings.HasPrefix(rest, "!"), strings.HasPrefix(rest, "?"):
		return "raw HTML (a comment or declaration)"
	case strings.HasPrefix(rest, "/") && len(rest) > 1 && rest[1] >= 'a' && rest[1] <= 'z':
		return "raw HTML (a closing tag)"
	}
	n := 0
	for n < len(rest) && (rest[n] >= 'a' && rest[n] <= 'z' || n > 0 && rest[n] >= '0' && rest[n] <= '9' || n > 0 && rest[n] == '-') {
		n++
	}
	if n == 0 {
		return ""
	}
	if slices.Contains(htmlElements, rest[:n]) {
		return "raw HTML (a <" + rest[:n] + "> element)"
	}
	if n < len(rest) && (rest[n] == '>' || rest[n] == '/' || rest[n] == ' ' || rest[n] == '\t' || rest[n] == '\n') {
		return "raw HTML (a tag)"
	}
	return ""
}

// withoutCodeSpans returns s with the text of its Markdown code spans
// (and fenced blocks) blanked: between a run of backticks and the next
// run of the same length.
func withoutCodeSpans(s string) string {
	b := []byte(s)
	run := func(i int) int { // the number of backticks from b[i]
		n := 0
		for i+n < len(b) && b[i+n] == '`' {
			n++
		}
		return n
	}
	for i := 0; i < len(b); {
		n := run(i)
		if n == 0 {
			i++
			continue
		}
		end := i + n
		for end < len(b) && run(end) != n {
			end += max(run(end), 1)
		}
		if end == len(b) { // no closing run: the backticks are text
			i += n
			continue
		}
		for j := i + n; j < end; j++ {
			b[j] = ' '
		}
		i = end + n
	}
	return string(b)
}

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
	asking := method == MethodUIRequest
	var p UIPublishParams
	var rp UIRequestParams
	if asking {
		if err := Decode(method, params, &rp); err != nil {
			return nil, err
		}
		p = UIPublishParams{SurfaceID: rp.SurfaceID, SessionID: rp.SessionID, Generation: rp.Generation, Kind: SurfaceForm, Payload: rp.Payload}
	} else if err := Decode(method, params, &p); err != nil {
		return nil, err
	}
	if !slices.Contains(s.spec.Runtime.Capabilities, "ui") {
		return nil, errorf(ReasonCapabilityNotDeclared, "extension %s calls %s without the ui capability in its manifest", s.spec.ID, method)
	}
	// D24: a stale call is declined at once; an old sidecar never hangs
	// on an invisible prompt.
	declined := any(UIPublishResult{Accepted: false})
	if asking {
		declined = UIRequestResult{Cancelled: true}
	}
	if !s.cfg.bound.current(p.SessionID, p.Generation) {
		return declined, nil
	}
	// D27: the surface id is outside the payload, escaped.
	sf := Surface{Plugin: s.spec.ID, SurfaceID: s.safe(p.SurfaceID), SessionID: p.SessionID, Generation: p.Generation, Kind: p.Kind}
	v, err := sf.decode(p.Payload)
	if err != nil {
		return nil, err
	}
	if sf.Card != nil {
		for i, a := range sf.Card.Actions {
			if !slices.ContainsFunc(s.result.UIActions, func(d UIActionDecl) bool { return d.ActionID == a.ActionID }) {
				return nil, errorf(ReasonInvalidParams, "invalid card surface payload: /actions/%d/actionId is not an action extension %s declared", i, s.spec.ID)
			}
		}
	}
	for _, f := range uiStrings(reflect.ValueOf(v), "", true) {
		if f.shown {
			*f.s = s.redactor.Redact(*f.s) // D25
		}
	}
	if !asking {
		fe.Show(sf)
		return UIPublishResult{Accepted: true}, nil
	}
	// A pending prompt is an operation (D14); a generation that is
	// retiring asks nothing more.
	if s.rt.begin() != nil {
		return declined, nil
	}
	defer s.rt.end()
	values, cancelled, err := fe.Ask(ctx, Prompt{Plugin: sf.Plugin, SurfaceID: sf.SurfaceID, SessionID: sf.SessionID, Generation: sf.Generation, Kind: rp.Kind, Form: *sf.Form})
	if err != nil {
		return nil, causedError(err, ReasonInternal, "") // the host's own failure: its text stays here
	}
	if cancelled || values == nil {
		return declined, nil
	}
	return UIRequestResult{Values: values}, nil
}

// parseAction splits an action's name, /<plugin>:<action>, into its
// plugin and action ID, which must match ^[a-z0-9][a-z0-9-]*$ (D9).
func parseAction(name string) (plugin, action string, err error) {
	rest, ok := strings.CutPrefix(name, "/")
	plugin, action, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || strings.TrimSpace(plugin) == "" || !validActionID(action) {
		return "", "", errorf(ReasonInvalidParams, "%q is not an action name /<plugin>:<action> with an action id of lowercase letters, digits and dashes", name)
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
// internal, a crashed one provider_interrupted, another session or an
// action (when not "") the sidecar did not declare invalid_params. The
// call is an operation of the generation (D14): without an error, the
// caller ends it.
func (rt *Runtime) uiTarget(plugin, session, action string) (*sidecar, error) {
	s := rt.byID[plugin]
	if s == nil {
		return nil, errorf(ReasonInternal, "no extension %s runs in this generation", plugin)
	}
	if err := s.usable(); err != nil {
		return nil, err
	}
	if session != rt.cfg.Session.SessionID {
		return nil, errorf(ReasonInvalidParams, "stale session %q: this generation serves %q", session, rt.cfg.Session.SessionID)
	}
	if action != "" && !slices.ContainsFunc(s.result.UIActions, func(a UIActionDecl) bool { return a.ActionID == action }) {
		return nil, errorf(ReasonInvalidParams, "extension %s declares no UI action %q", plugin, action)
	}
	return s, rt.begin()
}

// Action invokes the UI action name (/<plugin>:<action>) for session with
// args, and returns the sidecar's answer, its message redacted and
// escaped. Errors: a malformed name or an undeclared action
// (invalid_params), an unknown plugin (internal), a crashed one
// (provider_interrupted), another session (invalid_params), and the
// sidecar's own.
func (rt *Runtime) Action(ctx context.Context, session, name string, args map[string]string) (UIActionResult, error) {
	plugin, action, err := parseAction(name)
	if err != nil {
		return UIActionResult{}, err
	}
	s, err := rt.uiTarget(plugin, session, action)
	if err != nil {
		return UIActionResult{}, err
	}
	defer rt.end()
	var res UIActionResult
	err = s.call(ctx, MethodUIAction, UIActionParams{ActionID: action, SessionID: session, Generation: rt.cfg.Session.Generation, Args: args}, &res)
	res.Message = s.safe(res.Message)
	return res, err
}

// Submit sends the values of the form surfaceID of plugin, for session,
// and reports whether the sidecar accepted them. Errors as for Action; a
// blank surfaceID is invalid_params.
func (rt *Runtime) Submit(ctx context.Context, session, plugin, surfaceID string, values map[string]json.RawMessage) (bool, error) {
	if strings.TrimSpace(surfaceID) == "" {
		return false, errorf(ReasonInvalidParams, "a submit needs a surface id")
	}
	s, err := rt.uiTarget(plugin, session, "")
	if err != nil {
		return false, err
	}
	defer rt.end()
	if values == nil {
		values = map[string]json.RawMessage{}
	}
	var res UISubmitResult
	err = s.call(ctx, MethodUISubmit, UISubmitParams{SurfaceID: surfaceID, SessionID: session, Generation: rt.cfg.Session.Generation, Values: values}, &res)
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
