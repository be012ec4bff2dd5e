package extension

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// The one strict JSON walk (D3). Every document the package reads goes
// through it: frame envelopes, params and results against their $def,
// payload documents, manifests and plugin-packages.json. It validates and
// decodes in one pass, against a node tree built from the Go type (see
// schema.go), so a value that reaches Go has passed every rule.

// ValidationError says which rule a document broke and where: Pointer is
// the RFC 6901 JSON pointer of the offending value inside the document
// ("" for the document itself).
type ValidationError struct {
	Def     string // the $def (or Go type) the document was checked against
	Pointer string
	Msg     string

	rule   rule   // the kind of rule, for callers that phrase errors their own way
	detail string // the literal, member name or suggestion the rule is about
	want   string // for ruleKind: what was expected, as "an array of strings"
	got    vkind  // for ruleKind: what was found
	field  string // the path as a manifest field: runtime.args[1], env["K"]
	offset int    // for ruleSyntax: the byte offset
}

// Error returns "<Def> at <Pointer>: <Msg>".
func (e *ValidationError) Error() string {
	return fmt.Sprintf("%s at %s: %s", e.Def, cmp.Or(e.Pointer, "the document root"), e.Msg)
}

// rule classifies a ValidationError.
type rule uint8

const (
	ruleOther rule = iota
	ruleSyntax
	ruleKind
	ruleUnknown
	ruleDuplicate
	ruleNull
	ruleMissing
	ruleInteger
	ruleRange
	ruleEnum
)

// walker is one walk over one document. Walkers are pooled, so a walk
// allocates only for what it decodes and when it fails.
type walker struct {
	s    scanner
	path []pathToken
	dup  dupState
}

// pathToken is one step of the JSON pointer to the current value.
type pathToken struct {
	key     []byte // raw member name with quotes, or nil for an array index
	escaped bool
	inMap   bool // a key of a map: shown as ["k"] in a field path
	index   int
}

var walkers = sync.Pool{New: func() any { return &walker{dup: dupState{sets: map[int]map[string]bool{}}} }}

// walk validates doc against n and decodes it into dst, which must be
// settable and of n's Go type; on failure dst may be partly filled. Every
// error it returns is a *ValidationError.
func walk(n *vnode, doc []byte, dst reflect.Value) error {
	_, err := walkDoc(n, doc, dst)
	return err
}

// walkDoc is walk that also reports whether doc has whitespace between
// its tokens.
func walkDoc(n *vnode, doc []byte, dst reflect.Value) (spaced bool, err error) {
	w := walkers.Get().(*walker)
	w.s = scanner{data: doc} // the path and the names are empty: release left them so
	err = w.value(n, dst)
	if err == nil {
		err = w.s.end()
	}
	spaced = w.s.spaced
	if err != nil {
		// Errors are located here, once. The path is still the failing
		// value's by construction: every error of the walk (the lexer's
		// and fail's, all *ValidationError) is returned at once, up
		// through every caller, and a path token is popped only after its
		// value succeeded (members, elements).
		w.locate(err.(*ValidationError), n.def)
	}
	w.release()
	walkers.Put(w)
	return spaced, err
}

// compactValue checks that doc is one JSON value and returns it without
// whitespace: doc itself when it has none, as when a program encoded it,
// else a compacted copy.
func compactValue(doc []byte) ([]byte, error) {
	spaced, err := walkDoc(rawNode, doc, reflect.Value{})
	if err != nil || !spaced {
		return doc, err
	}
	var b bytes.Buffer
	json.Compact(&b, doc) // valid: the walk accepted it
	return b.Bytes(), nil
}

// walkerKeep is the most path tokens or member names a pooled walker
// keeps room for; a walker that grew past it on a large document gives
// the room back, and clearing what is kept stays cheap.
const walkerKeep = 128

// release drops the walker's hold on the document before it is pooled:
// path tokens and member names point into it, and a pooled walker would
// otherwise keep the last frame (up to 8 MiB) alive.
func (w *walker) release() {
	w.s = scanner{}
	clear(w.path[:cap(w.path)])
	clear(w.dup.names[:cap(w.dup.names)])
	w.path, w.dup.names = w.path[:0], w.dup.names[:0]
	if cap(w.path) > walkerKeep {
		w.path = nil
	}
	if cap(w.dup.names) > walkerKeep {
		w.dup.names = nil
	}
	clear(w.dup.sets)
}

// fail builds the error of a rule; walk locates it.
func (w *walker) fail(r rule, detail, format string, args ...any) *ValidationError {
	return &ValidationError{Msg: fmt.Sprintf(format, args...), rule: r, detail: detail}
}

// locate completes e with the $def and the current path.
func (w *walker) locate(e *ValidationError, def string) {
	e.Def = def
	var p, f strings.Builder
	for _, t := range w.path {
		p.WriteByte('/')
		if t.key == nil {
			p.WriteString(strconv.Itoa(t.index))
			fmt.Fprintf(&f, "[%d]", t.index)
			continue
		}
		name := unquote(t.key, t.escaped)
		p.WriteString(pointerEscaper.Replace(name))
		switch {
		case t.inMap && f.Len() > 0: // a map key, unless the document is the map
			fmt.Fprintf(&f, "[%q]", name)
		case f.Len() > 0:
			f.WriteString("." + fieldName(name))
		default:
			f.WriteString(fieldName(name))
		}
	}
	e.Pointer, e.field = p.String(), f.String()
}

// pointerEscaper escapes a member name as an RFC 6901 reference token.
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// value walks one value against n into dst.
func (w *walker) value(n *vnode, dst reflect.Value) error {
	c := w.s.peek()
	if n.kind == vAny || n.kind == vRaw {
		return w.free(n, dst)
	}
	switch got := kindOf[c]; {
	case got == n.kind, got == vInteger && n.kind == vNumber:
	case got == vAny: // the end of the input or garbage, which skip names
		return w.skip(false)
	default: // a value of another JSON type
		want := n.kind.String()
		if n.kind == vArray && n.elem.kind == vString {
			want = "an array of strings"
		}
		return &ValidationError{rule: ruleKind, Msg: fmt.Sprintf("want %s, got %s", want, got), want: want, got: got}
	}
	if dst.Kind() == reflect.Pointer {
		dst.Set(reflect.New(dst.Type().Elem()))
		dst = dst.Elem()
	}
	switch n.kind {
	case vObject:
		if n.isMap {
			return w.mapMembers(n, dst)
		}
		return w.object(n, dst)
	case vArray:
		return w.array(n, dst)
	case vString:
		return w.str(n, dst)
	case vInteger, vNumber:
		return w.number(n, dst)
	}
	dst.SetBool(c == 't') // a boolean: the literal is checked next
	return w.s.literal()
}

// kindOf classifies a value by its first byte; numbers are reported as
// integers and told apart later, and vAny is garbage the lexer will name.
var kindOf = [256]vkind{
	'{': vObject, '[': vArray, '"': vString, 't': vBoolean, 'f': vBoolean, 'n': vNull,
	'-': vInteger, '0': vInteger, '1': vInteger, '2': vInteger, '3': vInteger,
	'4': vInteger, '5': vInteger, '6': vInteger, '7': vInteger, '8': vInteger, '9': vInteger,
}

// items walks the object or array at the scanner, up to closer. Each
// item call reads one member or element and pushes it on the path; its
// token is popped once it succeeded.
func (w *walker) items(closer byte, item func(i int) error) error {
	more, err := w.s.open(closer)
	if err != nil {
		return err
	}
	for i := 0; more; i++ {
		if err := item(i); err != nil {
			return err
		}
		w.path = w.path[:len(w.path)-1]
		if more, err = w.s.next(closer); err != nil {
			return err
		}
	}
	return nil
}

// members walks the object at the scanner: each member is pushed on the
// path and each called with the scanner at its value. With dups, a
// repeated member name is refused (D3).
func (w *walker) members(inMap, dups bool, each func(key []byte, escaped bool) error) error {
	mark := len(w.dup.names)
	defer w.dup.pop(mark)
	return w.items('}', func(int) error {
		key, escaped, err := w.s.key()
		if err != nil {
			return err
		}
		w.path = append(w.path, pathToken{key: key, escaped: escaped, inMap: inMap})
		if dups && w.dup.seen(mark, key, escaped) {
			return w.duplicate(key, escaped)
		}
		return each(key, escaped)
	})
}

// elements walks the array at the scanner, each index pushed on the path.
func (w *walker) elements(each func(i int) error) error {
	return w.items(']', func(i int) error {
		w.path = append(w.path, pathToken{index: i})
		return each(i)
	})
}

func (w *walker) duplicate(key []byte, escaped bool) error {
	name := unquote(key, escaped)
	return w.fail(ruleDuplicate, name, "duplicate member %s", quoteName(name)) // D3
}

func (w *walker) object(n *vnode, dst reflect.Value) error {
	var present uint64
	err := w.members(false, n.open, func(key []byte, escaped bool) error {
		i, known := n.index[string(key[1:len(key)-1])] // no allocation
		if escaped {
			i, known = n.index[unquote(key, true)]
		}
		switch {
		case !known && !n.open:
			return w.unknownMember(n, key, escaped)
		case !known && n.rest > 0:
			return w.keep(dst.Field(n.rest-1), key, escaped)
		case !known:
			return w.skip(false) // an open object tolerates it
		case present&(1<<i) != 0:
			return w.duplicate(key, escaped)
		}
		present |= 1 << i
		p := &n.props[i]
		if w.s.peek() == 'n' && p.node.kind != vRaw && !(p.node.kind == vAny && p.node.externalizable) {
			// D3: optional members are omitted, never null; only an
			// externalizable placeholder may be null (D22).
			return w.fail(ruleNull, "", "null is not allowed here; omit an optional member instead")
		}
		return w.value(p.node, dst.Field(p.field))
	})
	if err != nil {
		return err
	}
	if missing := n.required &^ present; missing != 0 {
		p := n.props[bits.TrailingZeros64(missing)] // the first missing, by name
		w.path = append(w.path, pathToken{key: []byte(strconv.Quote(p.name))})
		return w.fail(ruleMissing, p.name, "missing required member %q", p.name)
	}
	if inv, ok := dst.Addr().Interface().(invariant); ok {
		if msg := inv.invariant(); msg != "" {
			return w.fail(ruleOther, "", "%s", msg)
		}
	}
	return nil
}

// keep walks the value of an unknown member into m, the object's map of
// the members it does not know, verbatim (PROTOCOL.md §3.2: a record keeps
// what another tool wrote).
func (w *walker) keep(m reflect.Value, key []byte, escaped bool) error {
	var raw json.RawMessage
	if err := w.free(&vnode{kind: vAny}, reflect.ValueOf(&raw).Elem()); err != nil {
		return err
	}
	if m.IsNil() {
		m.Set(reflect.MakeMap(m.Type()))
	}
	m.SetMapIndex(reflect.ValueOf(unquote(key, escaped)), reflect.ValueOf(raw))
	return nil
}

// unknownMember explains a member the object does not have, naming the
// member it only matches case-insensitively or by Unicode folding (D3:
// encoding/json alone would accept "DECISION" for "decision",
// GHSA-wvj2-96wp-fq3f).
func (w *walker) unknownMember(n *vnode, key []byte, escaped bool) error {
	name := unquote(key, escaped)
	if i := slices.IndexFunc(n.props, func(p vprop) bool { return strings.EqualFold(p.name, name) }); i >= 0 {
		p := n.props[i]
		return w.fail(ruleUnknown, p.name, "unknown member %s: member names are case-sensitive, did you mean %q?", quoteName(name), p.name)
	}
	return w.fail(ruleUnknown, "", "unknown member %s: %s has no such member", quoteName(name), n.def)
}

func (w *walker) mapMembers(n *vnode, dst reflect.Value) error {
	dst.Set(reflect.MakeMap(dst.Type()))
	elem := reflect.New(dst.Type().Elem()).Elem()
	return w.members(true, true, func(key []byte, escaped bool) error {
		elem.SetZero()
		if err := w.value(n.elem, elem); err != nil {
			return err
		}
		dst.SetMapIndex(reflect.ValueOf(unquote(key, escaped)).Convert(dst.Type().Key()), elem)
		return nil
	})
}

func (w *walker) array(n *vnode, dst reflect.Value) error {
	dst.Set(reflect.MakeSlice(dst.Type(), 0, 0))
	return w.elements(func(i int) error {
		dst.Grow(1)
		dst.SetLen(i + 1)
		return w.value(n.elem, dst.Index(i))
	})
}

func (w *walker) str(n *vnode, dst reflect.Value) error {
	raw, escaped, err := w.s.str()
	if err != nil {
		return err
	}
	if n.enum != nil && !escaped {
		// The enum's own string: no allocation per value.
		if i := slices.IndexFunc(n.enum, func(v string) bool { return v == string(raw[1:len(raw)-1]) }); i >= 0 {
			dst.SetString(n.enum[i])
			return nil
		}
	}
	s := unquote(raw, escaped)
	switch {
	case n.nonempty && s == "":
		return w.fail(ruleOther, "", "must not be empty")
	case n.nonempty && strings.TrimSpace(s) == "":
		return w.fail(ruleOther, "", "must not be blank")
	case n.sha256 && (len(s) != 64 || strings.Trim(s, "0123456789abcdef") != ""):
		return w.fail(ruleOther, "", "want a SHA-256 as 64 lowercase hex characters")
	case n.enum != nil && !slices.Contains(n.enum, s):
		return w.fail(ruleEnum, s, "%s is not one of %s", quoteName(s), strings.Join(n.enum, ", "))
	}
	dst.SetString(s)
	return nil
}

// number checks an integer or number literal against n.
func (w *walker) number(n *vnode, dst reflect.Value) error {
	num, err := w.s.num()
	if err != nil {
		return err
	}
	switch {
	case n.kind == vNumber:
		f, err := strconv.ParseFloat(string(num.raw), 64)
		switch {
		case err != nil:
			return w.fail(ruleRange, string(num.raw), "number %.40s is out of range", string(num.raw))
		case n.min != nil && (f < float64(*n.min) || num.negative && f == 0 && float64(*n.min) >= 0 && nonzeroMantissa(num.raw)):
			// A negative literal below the minimum stays below it even
			// when it rounds to -0 (-1e-400 is not >= 0, -0.0 is).
			return w.fail(ruleRange, string(num.raw), "number %s is out of bounds", string(num.raw))
		}
		dst.SetFloat(f)
	case num.fraction || num.exponent:
		return w.fail(ruleInteger, string(num.raw), "want an integer, got %.40s", string(num.raw)) // D3
	case n.unsigned && num.negative:
		// D3: encoding/json refuses any sign for an unsigned field, "-0"
		// included, so the walk does too.
		return w.fail(ruleRange, string(num.raw), "must not be negative")
	case n.unsigned:
		u, err := strconv.ParseUint(string(num.raw), 10, 64)
		if err != nil || dst.OverflowUint(u) {
			return w.fail(ruleRange, string(num.raw), "integer %.40s is out of range", string(num.raw))
		}
		dst.SetUint(u)
	default:
		i, err := strconv.ParseInt(string(num.raw), 10, 64)
		switch {
		case err != nil || dst.OverflowInt(i):
			return w.fail(ruleRange, string(num.raw), "integer %.40s is out of range", string(num.raw)) // D3
		case n.min != nil && i < *n.min:
			return w.fail(ruleRange, string(num.raw), "must be at least %d", *n.min)
		}
		dst.SetInt(i)
	}
	return nil
}

// nonzeroMantissa reports whether a number literal has a digit other
// than 0 before its exponent: its value is not zero, whatever it rounds to.
func nonzeroMantissa(raw []byte) bool {
	if i := bytes.IndexAny(raw, "eE"); i >= 0 {
		raw = raw[:i]
	}
	return bytes.ContainsFunc(raw, func(r rune) bool { return '1' <= r && r <= '9' })
}

// rawNode skips a value, checking only its syntax.
var rawNode = &vnode{kind: vRaw}

// free walks a free-form value: vAny checks every member name inside for
// duplicates (D3), vRaw checks only the syntax. Errors inside name the
// offending value's own pointer. dst, when valid, receives the value's
// bytes: aliasing the document for vRaw, a copy for vAny.
func (w *walker) free(n *vnode, dst reflect.Value) error {
	c := w.s.peek()
	start := w.s.pos
	if n.object && c != '{' && c != 0 { // skip names the end of the input
		return &ValidationError{rule: ruleKind, Msg: "want a JSON object", want: "an object", got: kindOf[c]}
	}
	if err := w.skip(n.kind == vAny); err != nil {
		return err
	}
	if dst.IsValid() {
		raw := w.s.data[start:w.s.pos]
		if n.kind == vAny {
			raw = append([]byte(nil), raw...)
		}
		dst.SetBytes(raw)
	}
	return nil
}

// skip walks one value of any shape.
func (w *walker) skip(dups bool) error {
	switch c := w.s.peek(); {
	case c == '{':
		return w.members(false, dups, func([]byte, bool) error { return w.skip(dups) })
	case c == '[':
		return w.elements(func(int) error { return w.skip(dups) })
	case c == '"':
		_, _, err := w.s.str()
		return err
	case c == '-' || '0' <= c && c <= '9':
		_, err := w.s.num()
		return err
	case c == 't' || c == 'f' || c == 'n':
		return w.s.literal()
	case c == 0:
		return w.s.fail("unexpected end of input")
	}
	return w.s.fail("unexpected character")
}

// Validate checks doc against the $def named def of the canonical schema,
// plus the rules the schema cannot express (D3, PROTOCOL.md §10):
// duplicate and case-variant member names, null for a non-nullable member,
// whitespace-only "nonempty" strings, lowercase-hex sha256, integers written
// with a fraction or exponent or out of range, trailing data, and the
// chunk invariants of §5.3. The error is a *ValidationError naming the
// pointer.
func Validate(def string, doc []byte) error {
	t := dtoTypes()[def]
	if t == nil {
		return &ValidationError{Def: def, Msg: "no such $def in the v1 schema"}
	}
	return Unmarshal(doc, reflect.New(t).Interface())
}

// Unmarshal is json.Unmarshal with every rule of the strict walk (D3): v
// must point to a DTO of this package (a $def, a payload document) or a
// struct built the same way, with json tags naming every member; members
// without omitempty are required. Errors are *ValidationError.
func Unmarshal(doc []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("extension: Unmarshal needs a non-nil pointer, got %T", v)
	}
	rv.Elem().SetZero()
	n, err := typeNode(rv.Type().Elem())
	if err != nil {
		return err
	}
	return walk(n, doc, rv.Elem())
}

// Decode strictly decodes the params or the result of method into v, a
// pointer to the method's params DTO or to its result DTO (D3). Absent or
// empty params read as {} (D5). A failure is an *Error that wraps the
// *ValidationError naming the JSON pointer: reason invalid_params for
// params, protocol_error for a result, since a peer's malformed result is
// the peer's protocol violation (PROTOCOL.md §3.3, §8.3).
func Decode(method string, doc json.RawMessage, v any) error {
	m, ok := methodsByName()[method]
	if !ok {
		return NewError(ReasonUnknownMethod, "method not found: "+method)
	}
	want, reason := m.params, ReasonInvalidParams
	if m.result != nil && reflect.TypeOf(v) == reflect.PointerTo(m.result) {
		want, reason = m.result, ReasonProtocolError
	}
	if reflect.TypeOf(v) != reflect.PointerTo(want) || reflect.ValueOf(v).IsNil() {
		return errorf(ReasonInternal, "decoding %s needs a *%s, got %T", want.Name(), want.Name(), v)
	}
	if len(bytes.TrimSpace(doc)) == 0 {
		doc = []byte("{}") // D5
	}
	if err := Unmarshal(doc, v); err != nil {
		return errorf(reason, "invalid %s: %w", want.Name(), err)
	}
	return nil
}

// The JSON lexer under the one strict walk of validate.go. It reads one
// complete document token by token, checks the grammar, UTF-8 and the
// nesting bound, and never allocates on the success path.
//
// It exists for strictness that encoding/json cannot give (exact and
// duplicate member names, integer literal rules, D3) at a speed its token
// API does not reach: BenchmarkStrictDecode measures it beside a plain
// json.Unmarshal of the same frame.

// maxNesting bounds how deeply arrays and objects may nest in any document
// the package reads, like encoding/json's own limit. Deeper input is
// rejected without recursion running away, whatever its length.
const maxNesting = 10000

// scanner is the lexer over one document.
type scanner struct {
	data   []byte
	pos    int
	depth  int
	spaced bool // whitespace was skipped: the document is not compact
}

// fail returns a JSON grammar error at the current byte offset; walk adds
// where in the document it is.
func (s *scanner) fail(msg string) error {
	return &ValidationError{rule: ruleSyntax, Msg: msg, offset: s.pos}
}

// jsonSpace marks the four whitespace bytes of the JSON grammar.
var jsonSpace = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

func (s *scanner) skipWS() {
	if s.pos < len(s.data) && jsonSpace[s.data[s.pos]] {
		s.spaced = true
		for s.pos++; s.pos < len(s.data) && jsonSpace[s.data[s.pos]]; s.pos++ {
		}
	}
}

// eat consumes the next byte if it is a or b (a twice for one byte).
func (s *scanner) eat(a, b byte) bool {
	if s.pos < len(s.data) && (s.data[s.pos] == a || s.data[s.pos] == b) {
		s.pos++
		return true
	}
	return false
}

// peek returns the next non-space byte, or 0 at the end.
func (s *scanner) peek() byte {
	s.skipWS()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

// end checks that only whitespace remains (no trailing data, D3).
func (s *scanner) end() error {
	s.skipWS()
	if s.pos != len(s.data) {
		return s.fail("trailing data after the document")
	}
	return nil
}

// str reads a string token and returns its raw bytes (with quotes) and
// whether it contains escapes.
func (s *scanner) str() (raw []byte, escaped bool, err error) {
	start := s.pos
	if !s.eat('"', '"') {
		return nil, false, s.fail("expected a string")
	}
	for s.pos < len(s.data) {
		// The common case first, in locals: a run of printable ASCII,
		// eight bytes at a time while no byte of a word needs a look.
		data, i := s.data, s.pos
		for i+8 <= len(data) && plainWord(binary.LittleEndian.Uint64(data[i:])) {
			i += 8
		}
		for i < len(data) && plainByte[data[i]] {
			i++
		}
		if s.pos = i; i == len(data) {
			break
		}
		c := data[i]
		switch {
		case c == '"':
			s.pos++
			return s.data[start:s.pos], escaped, nil
		case c == '\\':
			escaped = true
			s.pos++
			if s.pos >= len(s.data) {
				return nil, false, s.fail("unterminated escape")
			}
			switch s.data[s.pos] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.pos++
			case 'u':
				// Four hex digits: nothing is left once they are trimmed.
				if s.pos+5 > len(s.data) || len(bytes.Trim(s.data[s.pos+1:s.pos+5], "0123456789abcdefABCDEF")) > 0 {
					return nil, false, s.fail(`invalid \u escape`)
				}
				s.pos += 5
			default:
				return nil, false, s.fail("invalid escape")
			}
		case c < 0x20:
			return nil, false, s.fail("control character in string")
		case c < utf8.RuneSelf:
			s.pos++
		default:
			r, n := utf8.DecodeRune(s.data[s.pos:])
			if r == utf8.RuneError && n == 1 {
				return nil, false, s.fail("invalid UTF-8 in string")
			}
			s.pos += n
		}
	}
	return nil, false, s.fail("unterminated string")
}

// plainByte marks the bytes a string token holds as they are: printable
// ASCII other than the quote and the backslash.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// plainWord reports whether all eight bytes of w are plainByte: none is
// below 0x20, a quote, a backslash or above 0x7f. (x-lo)&^x&hi is non-zero
// exactly when a byte of x is zero, and (w-lo*0x20)&^w&hi when one is
// below 0x20. On the sidecar's event decoding, where string bytes are most
// of the input, this halved the time of the string scan (a CPU profile
// of exthost bench's observer; BenchmarkStrictDecode).
func plainWord(w uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	quote, backslash := w^(lo*'"'), w^(lo*'\\')
	return ((w-lo*0x20)&^w|(quote-lo)&^quote|(backslash-lo)&^backslash|w)&hi == 0
}

// numberShape describes a number literal.
type numberShape struct {
	raw      []byte
	negative bool
	fraction bool
	exponent bool
}

// num reads a number token per the JSON grammar.
func (s *scanner) num() (numberShape, error) {
	start := s.pos
	n := numberShape{negative: s.eat('-', '-')}
	switch {
	case s.eat('0', '0'):
	case s.digits() > 0: // a first digit of 1-9
	default:
		return n, s.fail("invalid number")
	}
	if n.fraction = s.eat('.', '.'); n.fraction {
		if s.digits() == 0 {
			return n, s.fail("invalid number fraction")
		}
	}
	if n.exponent = s.eat('e', 'E'); n.exponent {
		s.eat('+', '-')
		if s.digits() == 0 {
			return n, s.fail("invalid number exponent")
		}
	}
	n.raw = s.data[start:s.pos]
	return n, nil
}

func (s *scanner) digits() int {
	start := s.pos
	for s.pos < len(s.data) && '0' <= s.data[s.pos] && s.data[s.pos] <= '9' {
		s.pos++
	}
	return s.pos - start
}

// literal reads true, false or null.
func (s *scanner) literal() error {
	for _, word := range [...]string{"true", "false", "null"} {
		if bytes.HasPrefix(s.data[s.pos:], []byte(word)) {
			s.pos += len(word)
			return nil
		}
	}
	return s.fail("invalid literal")
}

// open consumes '{' or '[' and reports whether a member or element
// follows; an empty object or array is consumed whole. open and next
// track the nesting depth against maxNesting.
func (s *scanner) open(closer byte) (more bool, err error) {
	if s.depth++; s.depth > maxNesting {
		return false, s.fail(fmt.Sprintf("nesting deeper than %d levels", maxNesting))
	}
	s.pos++
	if s.peek() == closer {
		return s.next(closer) // empty: consumes the closer
	}
	return true, nil
}

// key reads a member name and the ':' after it, leaving the scanner at the
// member's value.
func (s *scanner) key() (raw []byte, escaped bool, err error) {
	s.skipWS()
	if raw, escaped, err = s.str(); err != nil {
		return nil, false, err
	}
	if s.skipWS(); !s.eat(':', ':') {
		return nil, false, s.fail("expected ':' after member name")
	}
	return raw, escaped, nil
}

// next consumes ',' (another member or element follows) or the closer
// ('}' or ']') that ends the object or array.
func (s *scanner) next(closer byte) (more bool, err error) {
	switch s.peek() {
	case ',':
		s.pos++
		return true, nil
	case closer:
		s.pos++
		s.depth--
		return false, nil
	}
	return false, s.fail(fmt.Sprintf("expected ',' or '%c'", closer))
}

// quoteName quotes a peer-supplied name for an error message, cut to 64
// bytes: an answer quoting it must stay far below the frame limit (D2).
func quoteName(name string) string {
	if len(name) > 64 {
		return fmt.Sprintf("%q…", name[:64])
	}
	return fmt.Sprintf("%q", name)
}

// unquote returns the decoded value of a raw string token.
func unquote(raw []byte, escaped bool) string {
	if !escaped {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	json.Unmarshal(raw, &s) // the lexer has checked the token
	return s
}

// plainString decodes a raw JSON value that must be a string.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	return unquote(raw, bytes.IndexByte(raw, '\\') >= 0), true
}

// dupState finds repeated member names (D3) across nested objects with one
// reusable stack of raw names. Small objects are checked by a scan of their
// names; an object with more than dupLinear members switches to a set, so
// a hostile frame with a million members costs linear time, not quadratic.
type dupState struct {
	names [][]byte                // decoded names of the open objects' members, innermost last
	sets  map[int]map[string]bool // decoded names of large objects, by mark; made with the walker
}

// dupLinear is how many members an object may have before its duplicate
// check uses a set.
const dupLinear = 16

func (d *dupState) pop(mark int) {
	d.names = d.names[:mark]
	for k := range d.sets { // the sets of the objects inside it too (a fast skip that gave up leaves them)
		if k >= mark {
			delete(d.sets, k)
		}
	}
}

// seen records key in the object opened at mark and reports whether it was
// already there.
func (d *dupState) seen(mark int, key []byte, escaped bool) bool {
	name := key[1 : len(key)-1] // the name itself, decoded only when it has an escape
	if escaped {
		name = []byte(unquote(key, true))
	}
	if set := d.sets[mark]; set != nil {
		dup := set[string(name)]
		set[string(name)] = true
		return dup
	}
	for _, n := range d.names[mark:] {
		if bytes.Equal(n, name) {
			return true
		}
	}
	d.names = append(d.names, name)
	if len(d.names)-mark > dupLinear {
		set := make(map[string]bool, 2*dupLinear)
		for _, n := range d.names[mark:] {
			set[string(n)] = true
		}
		d.sets[mark] = set
	}
	return false
}
