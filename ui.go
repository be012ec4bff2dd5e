package extension

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"maps"
	"reflect"
	"regexp"
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
// it, at any depth (defaults included), as a CommonMark renderer reads
// it: raw HTML, a javascript:, vbscript:, data: or file: URL, a Markdown
// image, a link other than http, https or relative, or a control
// character other than tab and newline is refused with invalid_params
// naming the member, the construct and its byte offset (never echoing
// the value). It returns a pointer to the payload document. The SDK
// checks a payload with it before sending; the host redacts first, then
// judges what its Frontend receives.
func DecodeSurface(kind SurfaceKind, payload json.RawMessage) (any, error) {
	sf := Surface{Kind: kind}
	return sf.decode(payload, nil)
}

// decode is DecodeSurface into the member of sf that sf.Kind names, with
// every shown string passed through redact first when it is not nil.
func (sf *Surface) decode(payload json.RawMessage, redact func(string) string) (any, error) {
	member, ok := surfaceKinds[sf.Kind]
	if !ok {
		return nil, errorf(ReasonInvalidParams, "unknown surface kind %q", sf.Kind)
	}
	v := member(sf)
	if err := Unmarshal(payload, v); err != nil {
		return nil, causedError(err, ReasonInvalidParams, "invalid %s surface payload: %v", sf.Kind, err)
	}
	var err error
	uiStrings(reflect.ValueOf(v), "", true, func(pointer, s string, shown bool) string {
		if shown && redact != nil {
			s = redact(s) // D25, before D23 judges it
		}
		if why, at := structuredOnly(s); why != "" && err == nil {
			err = errorf(ReasonInvalidParams, "invalid %s surface payload: %s holds %s at byte %d; UI payloads are structured data only (D23)", sf.Kind, pointer, why, at)
		}
		return s
	})
	return v, err
}

// uiStrings replaces every string of v, a decoded UI payload document or
// the part of one at pointer, by what f returns, in document order: every
// string member and list entry, and every string of a default at any
// depth (a member name of a default object is passed under the object's
// pointer, never altered). A member tagged ui:"id" is read by a program:
// f gets shown false.
func uiStrings(v reflect.Value, pointer string, shown bool, f func(pointer, s string, shown bool) string) {
	switch {
	case v.Kind() == reflect.Pointer && !v.IsNil():
		uiStrings(v.Elem(), pointer, shown, f)
	case v.Type() == reflect.TypeFor[string]():
		v.SetString(f(pointer, v.String(), shown))
	case v.Type() == reflect.TypeFor[json.RawMessage]() && len(v.Bytes()) > 0:
		var doc any
		dec := json.NewDecoder(bytes.NewReader(v.Bytes()))
		dec.UseNumber()
		dec.Decode(&doc) // valid: the payload decoded
		b, _ := json.Marshal(jsonStrings(doc, pointer, f))
		v.SetBytes(b)
	case v.Kind() == reflect.Slice:
		for i := range v.Len() {
			uiStrings(v.Index(i), pointer+"/"+strconv.Itoa(i), shown, f)
		}
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			fl := v.Type().Field(i)
			name, _, _ := strings.Cut(fl.Tag.Get("json"), ",")
			uiStrings(v.Field(i), pointer+"/"+name, shown && fl.Tag.Get("ui") != "id", f)
		}
	}
}

// jsonStrings is uiStrings for a decoded JSON value: it returns doc with
// its strings replaced, object members in name order.
func jsonStrings(doc any, pointer string, f func(pointer, s string, shown bool) string) any {
	switch doc := doc.(type) {
	case string:
		return f(pointer, doc, true)
	case []any:
		for i := range doc {
			doc[i] = jsonStrings(doc[i], pointer+"/"+strconv.Itoa(i), f)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(doc)) {
			f(pointer, k, false)
			doc[k] = jsonStrings(doc[k], pointer+"/"+pointerEscaper.Replace(k), f)
		}
	}
	return doc
}

// D23 as rendered (PROTOCOL.md §7.5): structuredOnly reads a UI string as
// a CommonMark renderer would, in three passes, each refusing what it
// finds:
//
//	pass     reads                                    refuses
//	decoded  backslash escapes, character references  control characters (D27, D29); javascript:, vbscript:, data:, file: URLs
//	links    anywhere, before code spans: "](" "]:"   a destination not http, https or relative; an email autolink;
//	         "][" "<scheme:…>" "<…@…>"                 a backtick inside (the renderer may not open a code span there)
//	inline   outside code blocks and code spans       raw HTML; "![" (an image, inline or by reference)
//
// A backslash escapes the ASCII punctuation after it, and a run of
// backticks opens a code span closed by the next run as long on the same
// line (one on a later line of the paragraph, or past a pipe when a line
// makes the text a GFM table, is in doubt). Fenced and indented code
// blocks count only until a line opens a block quote or a list. What it
// cannot tell apart is refused, and so is a string of more than mdLinks
// links (each read at most mdSpan bytes far): the passes stay linear in
// the string.

// The bounds of the links pass.
const (
	mdLinks = 1000
	mdSpan  = 4096
)

// structuredOnly returns what makes s more than structured text and its
// byte offset in s, or "".
func structuredOnly(s string) (string, int) {
	dec, at := unescapeMarkdown(s)
	for i, r := range dec {
		if (isControl(r) && r != '\t' && r != '\n') || r == utf8.RuneError {
			return "a control character", at[i]
		}
	}
	if why, i := schemeIn(strings.ToLower(dec)); why != "" {
		return why, at[i]
	}
	t := newMDText(s)
	if why, i := t.links(); why != "" {
		return why, i
	}
	return t.inline()
}

// escaped reports whether s[i] is a backslash escaping the next byte,
// ASCII punctuation.
func escaped(s string, i int) bool {
	return s[i] == '\\' && i+1 < len(s) && strings.IndexByte("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", s[i+1]) >= 0
}

// unescapeMarkdown returns s with its backslash escapes and character
// references decoded, and for each byte of that the offset in s it came
// from.
func unescapeMarkdown(s string) (string, []int) {
	var b strings.Builder
	at := make([]int, 0, len(s))
	for i := 0; i < len(s); {
		n, text := 1, s[i:i+1]
		if semi := strings.IndexByte(s[i:min(i+34, len(s))], ';'); s[i] == '&' && semi > 0 {
			n, text = semi+1, html.UnescapeString(s[i:i+semi+1])
		} else if escaped(s, i) {
			n, text = 2, s[i+1:i+2]
		}
		b.WriteString(text)
		for range len(text) {
			at = append(at, i)
		}
		i += n
	}
	return b.String(), at
}

// schemeIn finds a javascript:, vbscript:, data: or file: URL in lower,
// lowercased text.
func schemeIn(lower string) (string, int) {
	for _, scheme := range []string{"javascript:", "vbscript:", "data:", "file:"} {
		for i, end := 0, 0; ; i = end {
			k := strings.Index(lower[i:], scheme)
			if k < 0 {
				break
			}
			i += k
			end = i + len(scheme)
			// Not inside a word ("metadata:"); data: and file: are words
			// of prose too ("data: 3"): URLs only when something follows.
			prose := scheme == "data:" || scheme == "file:"
			if (i == 0 || !isAlnum(lower[i-1]) && strings.IndexByte("+.-", lower[i-1]) < 0) && (!prose || end < len(lower) && !unicode.IsSpace(rune(lower[end]))) {
				return "a " + scheme + " URL", i
			}
		}
	}
	return "", 0
}

// mdText is a UI string with what the passes look up in it: the offsets
// of its blank lines ("\n\n") and of its runs of backticks, all of them
// and by length.
type mdText struct {
	s      string
	blanks []int
	ticks  []int
	runs   map[int][]int
}

func newMDText(s string) *mdText {
	t := &mdText{s: s, runs: map[int][]int{}}
	for i := 0; i < len(s); i++ {
		if strings.HasPrefix(s[i:], "\n\n") {
			t.blanks = append(t.blanks, i)
		}
		if n := ticks(s[i:]); n > 0 {
			t.ticks = append(t.ticks, i)
			t.runs[n] = append(t.runs[n], i)
			i += n - 1
		}
	}
	return t
}

// ticks returns the number of backticks s starts with.
func ticks(s string) int {
	return len(s) - len(strings.TrimLeft(s, "`"))
}

// after returns the first of the sorted offsets at or after i, or -1.
func after(offsets []int, i int) int {
	if k, _ := slices.BinarySearch(offsets, i); k < len(offsets) {
		return offsets[k]
	}
	return -1
}

// paragraph returns the bounds of the paragraph around i, which blank
// lines end.
func (t *mdText) paragraph(i int) (int, int) {
	k, _ := slices.BinarySearch(t.blanks, i)
	start, end := 0, len(t.s)
	if k > 0 {
		start = t.blanks[k-1] + 1
	}
	if k < len(t.blanks) {
		end = t.blanks[k]
	}
	return start, end
}

// closing returns the offset after the first close not escaped from i,
// within mdSpan bytes and i's paragraph, or else the paragraph's end.
func (t *mdText) closing(i int, close byte) int {
	_, end := t.paragraph(i)
	for j := i; j < min(end, i+mdSpan); j++ {
		if escaped(t.s, j) {
			j++
		} else if t.s[j] == close {
			return j + 1
		}
	}
	return end
}

// links judges the links of s (see structuredOnly): each region from an
// opener to the end the tail of its kind finds, and the destination
// inside it.
func (t *mdText) links() (string, int) {
	n := 0
	for i := range len(t.s) {
		for _, k := range linkKinds {
			if !strings.HasPrefix(t.s[i:], k.open) {
				continue
			}
			start, end, dest, why := k.tail(t, i)
			if end > start {
				n++
			}
			if n > mdLinks {
				return fmt.Sprintf("more than %d links (in doubt)", mdLinks), i
			}
			if why == "" && dest != "" {
				why = destination(dest)
			}
			if j := after(t.ticks, start); why == "" && j >= 0 && j < end {
				return "a backtick inside a link, a label or an autolink", j
			}
			if why != "" {
				return why, i
			}
		}
	}
	return "", 0
}

// linkKinds are the links of CommonMark, by opener: tail returns the
// region of the one at i (what is not read whole, or in doubt, runs to
// the paragraph's end), its destination and, for what is refused
// whatever the destination, why.
var linkKinds = []struct {
	open string
	tail func(t *mdText, i int) (start, end int, dest, why string)
}{
	{"](", func(t *mdText, i int) (int, int, string, string) { // an inline link or image
		a, b, j := t.destination(i + 2)
		j = skipSpace(t.s, j)
		if j < len(t.s) && strings.IndexByte(`"'(`, t.s[j]) >= 0 { // a title
			j = skipSpace(t.s, t.closing(j+1, map[byte]byte{'"': '"', '\'': '\'', '(': ')'}[t.s[j]]))
		}
		if _, end := t.paragraph(i); j >= len(t.s) || t.s[j] != ')' {
			return i, end, t.s[a:b], ""
		}
		return i, j + 1, t.s[a:b], ""
	}},
	{"]:", func(t *mdText, i int) (int, int, string, string) { // a reference definition
		a, b, _ := t.destination(i + 2)
		start, end := t.paragraph(i)
		return start, end, t.s[a:b], ""
	}},
	{"][", func(t *mdText, i int) (int, int, string, string) { // a full reference
		return i, t.closing(i+2, ']'), "", ""
	}},
	{"<", func(t *mdText, i int) (int, int, string, string) { // an autolink
		switch m := autolink.FindStringSubmatch(t.s[i:]); {
		case m == nil:
			return i, i, "", ""
		case m[1] == "":
			return i, i + len(m[0]), "", "an email autolink"
		default:
			return i, i + len(m[0]), m[1], ""
		}
	}},
}

// autolink matches an autolink, a URI (its scheme and the rest, in
// group 1) or an email address.
var autolink = regexp.MustCompile(`^<(?:([a-zA-Z][a-zA-Z0-9+.-]*:[^\x00-\x20<>]*)|[^\x00-\x20<>@]+@[^\x00-\x20<>]*)>`)

// destination returns why the link destination dest, as written, is
// refused once decoded: it has a scheme other than http and https.
func destination(dest string) string {
	d, _ := unescapeMarkdown(dest)
	d = strings.NewReplacer("\t", "", "\n", "").Replace(strings.TrimLeft(d, " "))
	if k := strings.IndexAny(d, ":/?#"); k >= 0 && d[k] == ':' && !slices.Contains([]string{"http", "https"}, strings.ToLower(d[:k])) {
		return "a link that is not http, https or relative"
	}
	return ""
}

// destination returns the bounds of the link destination after blanks
// and one line break from i, and the offset after it: <...> on one line,
// or up to a blank, a control or an unbalanced ')', within mdSpan bytes.
func (t *mdText) destination(i int) (int, int, int) {
	s := t.s
	i = skipSpace(s, i)
	if i < len(s) && s[i] == '<' {
		if end := strings.IndexAny(s[i+1:min(len(s), i+mdSpan)], "<>\n"); end >= 0 && s[i+1+end] == '>' {
			return i + 1, i + 1 + end, i + 2 + end
		}
	}
	depth, j := 0, i
	for ; j < min(len(s), i+mdSpan) && s[j] > ' ' && (s[j] != ')' || depth > 0); j++ {
		switch {
		case escaped(s, j):
			j++
		case s[j] == '(':
			depth++
		case s[j] == ')':
			depth--
		}
	}
	return i, min(j, len(s)), min(j, len(s))
}

// skipSpace skips blanks and at most one line break from i.
func skipSpace(s string, i int) int {
	i += len(s[i:]) - len(strings.TrimLeft(s[i:], " \t"))
	if strings.HasPrefix(s[i:], "\n") {
		i++
	}
	return i + len(s[i:]) - len(strings.TrimLeft(s[i:], " \t"))
}

// inline refuses raw HTML and images outside the code blocks and code
// spans of s.
func (t *mdText) inline() (string, int) {
	s := t.s
	blocks := codeBlocks(s)
	table := false // a GFM table's pipes split a code span into cells
	for l := range strings.Lines(s) {
		table = table || strings.Contains(l, "|") && strings.Contains(l, "-") && strings.Trim(l, "|-: \t\n") == ""
	}
	for i := 0; i < len(s); i++ {
		for len(blocks) > 0 && i >= blocks[0][0] {
			i = max(i, blocks[0][1])
			blocks = blocks[1:]
		}
		switch {
		case i >= len(s):
		case escaped(s, i):
			i++
		case s[i] == '`':
			n := ticks(s[i:])
			_, end := t.paragraph(i)
			j := after(t.runs[n], i+n)
			switch {
			case j < 0 || j >= end:
				i += n - 1
			case strings.Contains(s[i:j], "\n") || table && strings.Contains(strings.ReplaceAll(s[i:j], `\|`, ""), "|"):
				return "a code span across lines or table cells (in doubt)", i
			default:
				i = j + n - 1
			}
		case s[i] == '<':
			if why := htmlAt(s[i+1:], i > 0 && isAlnum(s[i-1])); why != "" {
				return why, i
			}
		case strings.HasPrefix(s[i:], "!["):
			return "a Markdown image", i
		}
	}
	return "", 0
}

// codeBlocks returns the byte ranges of the fenced (``` or ~~~) and
// indented code blocks of s, read only until a line opens a block quote
// or a list item, inside which a renderer may read them otherwise.
func codeBlocks(s string) [][2]int {
	var out [][2]int
	fence, open, blank, containers := "", -1, true, false
	start := 0
	for l := range strings.Lines(s) {
		end := start + len(l)
		line := strings.TrimSuffix(l, "\n")
		content := strings.TrimLeft(line, " \t")
		indent := 0
		for _, c := range line[:len(line)-len(content)] {
			indent += map[bool]int{true: 4 - indent%4, false: 1}[c == '\t']
		}
		mark := content[:min(1, len(content))]
		run := len(content) - len(strings.TrimLeft(content, mark))
		if open >= 0 && fence == "" && content != "" && indent < 4 {
			out, open = append(out, [2]int{open, start}), -1
		}
		switch {
		case fence != "":
			if indent < 4 && mark == fence[:1] && run >= len(fence) && strings.Trim(content[run:], " \t") == "" {
				out, fence, open = append(out, [2]int{open, end}), "", -1
			}
		case open >= 0:
		case containers || indent < 4 && containerLine.MatchString(content):
			containers = true
		case indent < 4 && run >= 3 && (mark == "~" || mark == "`" && !strings.Contains(content[run:], "`")):
			fence, open = content[:run], start
		case indent >= 4 && blank && content != "":
			open = start
		}
		blank = content == ""
		start = end
	}
	if open >= 0 {
		out = append(out, [2]int{open, len(s)})
	}
	return out
}

// containerLine matches an unindented line's content that opens a block
// quote or a list item.
var containerLine = regexp.MustCompile(`^(>|[-+*]([ \t]|$)|[0-9]{1,9}[.)]([ \t]|$))`)

// htmlElements are the element names that make "<name" raw HTML even
// with nothing after it: the ones that run, load or embed something.
var htmlElements = []string{"script", "iframe", "img", "svg", "object", "embed", "style", "link", "meta", "base", "form", "frame", "frameset", "math", "video", "audio", "source", "input", "button", "textarea", "select", "template", "applet"}

// htmlAt reports raw HTML that starts after a '<': a comment or
// declaration, a closing tag, an element with attributes or closed by
// '>', one of htmlElements, or any element name that ends the text
// unless the '<' follows a letter or digit (afterWord). "a<b" and
// "<https://x>" are not.
func htmlAt(rest string, afterWord bool) string {
	switch {
	case strings.HasPrefix(rest, "!"), strings.HasPrefix(rest, "?"):
		return "raw HTML (a comment or declaration)"
	case strings.HasPrefix(rest, "/") && len(rest) > 1 && isAlnum(rest[1]) && rest[1] > '9':
		return "raw HTML (a closing tag)"
	}
	n := 0
	for n < len(rest) && (isAlnum(rest[n]) && (n > 0 || rest[n] > '9') || n > 0 && rest[n] == '-') {
		n++
	}
	switch {
	case n == 0:
		return ""
	case slices.Contains(htmlElements, strings.ToLower(rest[:n])):
		return "raw HTML (a <" + strings.ToLower(rest[:n]) + "> element)"
	case n == len(rest) && !afterWord, n < len(rest) && strings.IndexByte(">/ \t\n", rest[n]) >= 0:
		return "raw HTML (a tag)"
	}
	return ""
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
// the payload decodes and, redacted (D25), is structured only (D23,
// invalid_params): the check judges what the Frontend receives.
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
	if _, err := sf.decode(p.Payload, s.redactor.Redact); err != nil {
		return nil, err
	}
	if sf.Card != nil {
		for i, a := range sf.Card.Actions {
			if !slices.ContainsFunc(s.result.UIActions, func(d UIActionDecl) bool { return d.ActionID == a.ActionID }) {
				return nil, errorf(ReasonInvalidParams, "invalid card surface payload: /actions/%d/actionId is not an action extension %s declared", i, s.spec.ID)
			}
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
	// head writes the heading, then the lines of texts indented.
	head := func(severity Severity, title string, texts ...string) {
		if severity != "" {
			title = strings.ToUpper(string(severity)) + ": " + title
		}
		line("[%s] %s", sf.Plugin, title)
		for _, t := range texts {
			for l := range strings.Lines(t) {
				line("  %s", strings.TrimRight(l, "\n"))
			}
		}
	}
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
		head(s.Severity, text)
	case sf.Card != nil:
		c := sf.Card
		head("", cmp.Or(c.Title, sf.SurfaceID), c.Markdown, c.Text)
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
		head("", cmp.Or(f.Title, sf.SurfaceID), f.Message)
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
		head(sf.Notification.Severity, sf.Notification.Title, sf.Notification.Body)
	}
	return b.String()
}
