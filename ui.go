package extension

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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
	ActionID string `json:"actionId" proto:"nonempty"`
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
	Key      string          `json:"key" proto:"nonempty"`
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

// DecodeSurface strictly decodes the payload of a surface of kind, or of
// a prompt when kind is SurfaceForm, and applies D23 to every string in
// it: raw HTML, a javascript:, vbscript:, data: or file: URL, a Markdown
// image, a Markdown link other than http, https or relative, or a control
// character other than tab and newline is refused with invalid_params
// naming the member (never echoing its value). It returns a pointer to
// the payload document. The SDK checks a payload with it before sending.
func DecodeSurface(kind SurfaceKind, payload json.RawMessage) (any, error) {
	var v any
	switch kind {
	case SurfaceStatus:
		v = new(UIStatusPayload)
	case SurfaceCard:
		v = new(UICardPayload)
	case SurfaceForm:
		v = new(UIFormPayload)
	case SurfaceNotification:
		v = new(UINotificationPayload)
	default:
		return nil, Errorf(ReasonInvalidParams, "unknown surface kind %q", kind)
	}
	if err := Unmarshal(payload, v); err != nil {
		return nil, causedError(err, ReasonInvalidParams, "invalid %s surface payload: %v", kind, err)
	}
	for _, f := range uiStrings(v) {
		if why := structuredOnly(*f.s); why != "" {
			return nil, Errorf(ReasonInvalidParams, "invalid %s surface payload: %s holds %s; UI payloads are structured data only (D23)", kind, f.pointer, why)
		}
	}
	return v, nil
}

// uiStrings lists the strings of a decoded UI payload document.
func uiStrings(v any) []uiString {
	var out []uiString
	add := func(pointer string, s *string, shown bool) {
		out = append(out, uiString{pointer, s, shown})
	}
	switch p := v.(type) {
	case *UIStatusPayload:
		add("/label", &p.Label, true)
		add("/detail", &p.Detail, true)
	case *UICardPayload:
		add("/title", &p.Title, true)
		add("/markdown", &p.Markdown, true)
		add("/text", &p.Text, true)
		for i := range p.Fields {
			add(fmt.Sprintf("/fields/%d/key", i), &p.Fields[i].Key, true)
			add(fmt.Sprintf("/fields/%d/value", i), &p.Fields[i].Value, true)
		}
		for i := range p.Actions {
			add(fmt.Sprintf("/actions/%d/actionId", i), &p.Actions[i].ActionID, false)
			add(fmt.Sprintf("/actions/%d/label", i), &p.Actions[i].Label, true)
		}
	case *UIFormPayload:
		add("/title", &p.Title, true)
		add("/message", &p.Message, true)
		for i := range p.Fields {
			f := &p.Fields[i]
			add(fmt.Sprintf("/fields/%d/key", i), &f.Key, false)
			add(fmt.Sprintf("/fields/%d/label", i), &f.Label, true)
			for j := range f.Options {
				add(fmt.Sprintf("/fields/%d/options/%d", i, j), &f.Options[j], true)
			}
			var def string
			if json.Unmarshal(f.Default, &def) == nil { // a string default is shown too
				add(fmt.Sprintf("/fields/%d/default", i), &def, false)
			}
		}
	case *UINotificationPayload:
		add("/title", &p.Title, true)
		add("/body", &p.Body, true)
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
	for i := strings.Index(text, "]("); i >= 0; {
		target := text[i+2:]
		target = strings.TrimLeft(target, " <")
		if scheme, _, ok := strings.Cut(target, ":"); ok && isScheme(scheme) && scheme != "http" && scheme != "https" && !strings.ContainsAny(scheme, "/?#") {
			return "a Markdown link that is not http, https or relative"
		}
		next := strings.Index(text[i+2:], "](")
		if next < 0 {
			break
		}
		i += 2 + next
	}
	for i := strings.IndexByte(text, '<'); i >= 0; {
		if why := htmlAt(strings.ToLower(text[i+1:])); why != "" {
			return why
		}
		next := strings.IndexByte(text[i+1:], '<')
		if next < 0 {
			break
		}
		i += 1 + next
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
	if !strings.Contains(s, "`") {
		return s
	}
	b := []byte(s)
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		n := 0
		for i+n < len(b) && b[i+n] == '`' {
			n++
		}
		fence := strings.Repeat("`", n)
		end := -1
		for j := i + n; j < len(b); {
			k := strings.Index(string(b[j:]), fence)
			if k < 0 {
				break
			}
			k += j
			m := 0
			for k+m < len(b) && b[k+m] == '`' {
				m++
			}
			if m == n {
				end = k
				break
			}
			j = k + m
		}
		if end < 0 {
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
