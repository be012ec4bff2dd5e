package extension

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// ValidationError says which rule a document broke and where: Pointer is
// the RFC 6901 JSON pointer of the offending value inside the document
// ("" for the document itself).
type ValidationError struct {
	Def     string // the $def the document was validated against
	Pointer string
	Msg     string
}

// Error returns "<Def> at <Pointer>: <Msg>".
func (e *ValidationError) Error() string {
	where := e.Pointer
	if where == "" {
		where = "the document root"
	}
	return fmt.Sprintf("%s at %s: %s", e.Def, where, e.Msg)
}

// vkind is the JSON type a schema node admits.
type vkind uint8

const (
	vAny vkind = iota // the true schema, or an annotation-only object
	vObject
	vArray
	vString
	vInteger
	vNumber
	vBoolean
	vNull // only ever reported: no node admits null by type
)

func (k vkind) String() string {
	return [...]string{"any value", "an object", "an array", "a string", "an integer", "a number", "a boolean", "null"}[k]
}

// vnode is one compiled schema node.
type vnode struct {
	kind vkind
	def  string // the $def name, for def nodes

	// objects
	props    []vprop
	index    map[string]int
	required uint64 // bit i: props[i] is required
	open     bool   // additionalProperties is a schema (a map), not false
	addl     *vnode // the map's value schema; nil admits anything
	check    func(o *objectView) string

	items *vnode // arrays

	// strings and numbers
	enum      []string
	minLength int
	min, max  *int64
}

// vprop is one property of a closed object, with the rules the schema
// cannot express laid over it from the Go DTO (CONTRACT-NOTES §3.1).
type vprop struct {
	name           string
	node           *vnode
	externalizable bool // x-externalizable: null allowed as a placeholder (D22)
	nonempty       bool // not blank after trimming whitespace
	sha256         bool // ^[0-9a-f]{64}$
	object         bool // a free-form value that must be an object
	unsigned       bool // the Go field is unsigned: the integer must be >= 0
}

// objectView lets a def-level invariant look at the members it walked.
type objectView struct {
	node    *vnode
	present uint64
	enums   *[64]int8 // index into props[i].node.enum of each enum member
}

func (o *objectView) has(name string) bool { return o.present&(1<<o.node.index[name]) != 0 }

func (o *objectView) enum(name string) string {
	i := o.node.index[name]
	if o.present&(1<<i) == 0 || o.enums[i] < 0 {
		return ""
	}
	return o.node.props[i].node.enum[o.enums[i]]
}

// defInvariants are the Validate() rules of CONTRACT-NOTES §3.1 rule 8 that
// the tags do not already cover.
var defInvariants = map[string]func(o *objectView) string{
	"ProviderChunk": func(o *objectView) string {
		typ := o.enum("type")
		switch {
		case typ == string(ChunkError) && !o.has("error"):
			return `a chunk of type "error" needs the error member`
		case typ != string(ChunkError) && o.has("error"):
			return `only a chunk of type "error" carries the error member`
		case typ == string(ChunkUsage) && !o.has("usage"):
			return `a chunk of type "usage" needs the usage member`
		}
		return ""
	},
}

// validator walks one document against a compiled node. It is reused
// through a pool so that a walk allocates only when it fails.
type validator struct {
	s    scanner
	def  string
	path []pathToken
	dup  dupState
}

// pathToken is one step of the JSON pointer to the current value.
type pathToken struct {
	key     []byte // raw member name with quotes, or nil for an index
	escaped bool
	index   int
}

var validators = sync.Pool{New: func() any { return new(validator) }}

// Validate checks doc against the $def named def of the canonical schema,
// plus the rules the schema cannot express (D3; CONTRACT-NOTES §3.1):
// duplicate and case-variant member names, null for a non-nullable member,
// whitespace-only "nonempty" strings, lowercase-hex sha256, integers written
// with a fraction or exponent or out of range, trailing data, and the
// invariants of ProviderRequest, ProviderChunk, StreamOpenParams and
// StreamChunkParams. The error is a *ValidationError naming the pointer.
func Validate(def string, doc []byte) error {
	n := compiledSchema()[def]
	if n == nil {
		return &ValidationError{Def: def, Msg: "no such $def in the v1 schema"}
	}
	return validateNode(def, n, doc)
}

// validateNode walks doc against n with a pooled validator.
func validateNode(def string, n *vnode, doc []byte) error {
	v := validators.Get().(*validator)
	v.s = scanner{data: doc}
	v.def, v.path = def, v.path[:0]
	v.dup.reset()
	err := v.value(n)
	if err == nil {
		if err = v.s.end(); err != nil {
			err = v.errorf("%s", err.(*syntaxError).msg)
		}
	}
	v.s = scanner{}
	validators.Put(v)
	return err
}

func (v *validator) errorf(format string, args ...any) *ValidationError {
	return &ValidationError{Def: v.def, Pointer: v.pointer(), Msg: fmt.Sprintf(format, args...)}
}

// pointer renders the current path per RFC 6901.
func (v *validator) pointer() string {
	var b strings.Builder
	for _, t := range v.path {
		b.WriteByte('/')
		if t.key == nil {
			b.WriteString(strconv.Itoa(t.index))
			continue
		}
		name := unquote(t.key, t.escaped)
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(name))
	}
	return b.String()
}

// syntax converts a scanner error into a validation error at the path.
func (v *validator) syntax(err error) error {
	if se, ok := err.(*syntaxError); ok {
		return v.errorf("%s", se.msg)
	}
	return err
}

func (v *validator) value(n *vnode) error {
	c := v.s.peek()
	if c == 0 {
		return v.errorf("unexpected end of input")
	}
	want := n.kind
	got := kindOf(c)
	switch {
	case want == vAny:
		_, err := v.s.value(&v.dup)
		return v.syntax(err)
	case want == vNumber && got == vInteger, want == got:
	case got == vAny:
		_, err := v.s.value(nil)
		return v.syntax(err)
	default:
		return v.errorf("want %s, got %s", want, got)
	}
	switch want {
	case vObject:
		return v.object(n)
	case vArray:
		return v.array(n)
	case vString:
		return v.stringValue(n, nil)
	case vInteger, vNumber:
		return v.number(n, false)
	default:
		if c == 't' {
			return v.syntax(v.s.literal("true"))
		}
		return v.syntax(v.s.literal("false"))
	}
}

// kindOf classifies a value by its first byte; numbers are reported as
// integers and told apart later.
func kindOf(c byte) vkind {
	switch {
	case c == '{':
		return vObject
	case c == '[':
		return vArray
	case c == '"':
		return vString
	case c == '-' || '0' <= c && c <= '9':
		return vInteger
	case c == 't' || c == 'f':
		return vBoolean
	case c == 'n':
		return vNull
	}
	return vAny // garbage the scanner will name
}

func (v *validator) object(n *vnode) error {
	more, err := v.s.openObject()
	if err != nil {
		return v.syntax(err)
	}
	if n.props == nil && n.open {
		return v.mapMembers(n, more)
	}
	var present uint64
	var enums [64]int8
	for more {
		key, escaped, err := v.s.key()
		if err != nil {
			return v.syntax(err)
		}
		name := key[1 : len(key)-1]
		if escaped {
			name = []byte(unquote(key, true))
		}
		i, ok := n.index[string(name)]
		v.path = append(v.path, pathToken{key: key, escaped: escaped})
		if !ok {
			return v.unknownMember(n, string(name))
		}
		if present&(1<<i) != 0 {
			return v.errorf("duplicate member %s", quoteName(string(name))) // D3
		}
		present |= 1 << i
		enums[i] = -1
		if err := v.member(&n.props[i], &enums[i]); err != nil {
			return err
		}
		v.path = v.path[:len(v.path)-1]
		if more, err = v.s.nextMember(); err != nil {
			return v.syntax(err)
		}
	}
	if missing := n.required &^ present; missing != 0 {
		for i := range n.props {
			if missing&(1<<i) != 0 {
				v.path = append(v.path, pathToken{key: []byte(strconv.Quote(n.props[i].name))})
				return v.errorf("missing required member %q", n.props[i].name)
			}
		}
	}
	if n.check != nil {
		if msg := n.check(&objectView{node: n, present: present, enums: &enums}); msg != "" {
			return v.errorf("%s", msg)
		}
	}
	return nil
}

// unknownMember explains a member the closed object does not have,
// naming the field it only matches case-insensitively (D3: encoding/json
// alone would accept "DECISION" for "decision", GHSA-wvj2-96wp-fq3f).
func (v *validator) unknownMember(n *vnode, name string) error {
	for _, p := range n.props {
		if strings.EqualFold(p.name, name) {
			return v.errorf("unknown member %s: member names are case-sensitive, did you mean %q?", quoteName(name), p.name)
		}
	}
	if n.def != "" {
		return v.errorf("unknown member %s: %s has no such member", quoteName(name), n.def)
	}
	return v.errorf("unknown member %s", quoteName(name))
}

// member validates one property value of a closed object.
func (v *validator) member(p *vprop, enumIdx *int8) error {
	if v.s.peek() == 'n' {
		if p.externalizable && p.node.kind == vAny {
			return v.syntax(v.s.literal("null")) // D22 placeholder
		}
		// D3: optional members are omitted, never null.
		return v.errorf("null is not allowed here; omit an optional member instead")
	}
	switch {
	case p.object:
		if v.s.peek() != '{' {
			return v.errorf("want a JSON object")
		}
		_, err := v.s.value(&v.dup)
		return v.syntax(err)
	case p.node.kind == vString:
		if kindOf(v.s.peek()) != vString {
			return v.errorf("want a string, got %s", kindOf(v.s.peek()))
		}
		return v.stringValue(p.node, &stringRules{prop: p, enumIdx: enumIdx})
	case p.node.kind == vInteger && p.unsigned:
		if kindOf(v.s.peek()) != vInteger {
			return v.errorf("want an integer, got %s", kindOf(v.s.peek()))
		}
		return v.number(p.node, true)
	}
	return v.value(p.node)
}

func (v *validator) mapMembers(n *vnode, more bool) error {
	mark := v.dup.push()
	for more {
		key, escaped, err := v.s.key()
		if err != nil {
			return v.syntax(err)
		}
		v.path = append(v.path, pathToken{key: key, escaped: escaped})
		if v.dup.seen(mark, key, escaped) {
			return v.errorf("duplicate member %s", quoteName(unquote(key, escaped))) // D3
		}
		if n.addl == nil {
			_, err = v.s.value(&v.dup)
			err = v.syntax(err)
		} else {
			err = v.value(n.addl)
		}
		if err != nil {
			return err
		}
		v.path = v.path[:len(v.path)-1]
		if more, err = v.s.nextMember(); err != nil {
			return v.syntax(err)
		}
	}
	v.dup.pop(mark)
	return nil
}

func (v *validator) array(n *vnode) error {
	more, err := v.s.openArray()
	if err != nil {
		return v.syntax(err)
	}
	for i := 0; more; i++ {
		v.path = append(v.path, pathToken{index: i})
		if n.items == nil {
			_, err = v.s.value(&v.dup)
			err = v.syntax(err)
		} else {
			err = v.value(n.items)
		}
		if err != nil {
			return err
		}
		v.path = v.path[:len(v.path)-1]
		if more, err = v.s.nextElement(); err != nil {
			return v.syntax(err)
		}
	}
	return nil
}

// stringRules carries the per-property string rules into stringValue.
type stringRules struct {
	prop    *vprop
	enumIdx *int8
}

func (v *validator) stringValue(n *vnode, r *stringRules) error {
	raw, escaped, err := v.s.str()
	if err != nil {
		return v.syntax(err)
	}
	body := raw[1 : len(raw)-1]
	if escaped {
		body = []byte(unquote(raw, true))
	}
	if n.minLength > 0 && utf8.RuneCount(body) < n.minLength {
		return v.errorf("must not be empty")
	}
	if n.enum != nil {
		idx := -1
		for i, e := range n.enum {
			if string(body) == e {
				idx = i
				break
			}
		}
		if idx < 0 {
			return v.errorf("%s is not one of %s", quoteName(string(body)), strings.Join(n.enum, ", "))
		}
		if r != nil {
			*r.enumIdx = int8(idx)
		}
	}
	if r == nil {
		return nil
	}
	if r.prop.nonempty && len(bytes.TrimSpace(body)) == 0 {
		return v.errorf("must not be blank")
	}
	if r.prop.sha256 && !isLowerHex64(body) {
		return v.errorf("want a SHA-256 as 64 lowercase hex characters")
	}
	return nil
}

func isLowerHex64(b []byte) bool {
	if len(b) != 64 {
		return false
	}
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// number checks an integer or number literal against n.
func (v *validator) number(n *vnode, unsigned bool) error {
	num, err := v.s.num()
	if err != nil {
		return v.syntax(err)
	}
	if n.kind == vNumber {
		f, err := strconv.ParseFloat(string(num.raw), 64)
		if err != nil {
			return v.errorf("number %.40s is out of range", num.raw)
		}
		if n.min != nil && f < float64(*n.min) || n.max != nil && f > float64(*n.max) {
			return v.errorf("number %s is out of bounds", num.raw)
		}
		return nil
	}
	if num.fraction || num.exponent {
		return v.errorf("want an integer, got %.40s", num.raw) // D3
	}
	if unsigned {
		if num.negative {
			// D3: encoding/json refuses any sign for an unsigned field,
			// "-0" included, so the validator does too.
			return v.errorf("must not be negative")
		}
		if _, ok := parseUint64(bytes.TrimPrefix(num.raw, []byte("-"))); !ok {
			return v.errorf("integer %.40s is out of range", num.raw)
		}
		return nil
	}
	i, ok := parseInt64(num.raw)
	if !ok {
		return v.errorf("integer %.40s is out of range", num.raw) // D3
	}
	if n.min != nil && i < *n.min {
		return v.errorf("must be at least %d", *n.min)
	}
	if n.max != nil && i > *n.max {
		return v.errorf("must be at most %d", *n.max)
	}
	return nil
}

// parseUint64 parses the digits of a JSON integer literal without
// allocating.
func parseUint64(digits []byte) (uint64, bool) {
	if len(digits) == 0 || len(digits) > 20 {
		return 0, false
	}
	var u uint64
	for _, c := range digits {
		d := uint64(c - '0')
		if u > (1<<64-1-d)/10 {
			return 0, false
		}
		u = u*10 + d
	}
	return u, true
}

// parseInt64 parses a JSON integer literal without allocating.
func parseInt64(raw []byte) (int64, bool) {
	neg := len(raw) > 0 && raw[0] == '-'
	if neg {
		raw = raw[1:]
	}
	u, ok := parseUint64(raw)
	if !ok {
		return 0, false
	}
	switch {
	case neg && u <= 1<<63:
		return -int64(u), true
	case !neg && u < 1<<63:
		return int64(u), true
	}
	return 0, false
}
