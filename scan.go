package extension

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

// MaxNesting bounds how deeply arrays and objects may nest in any document
// the package reads, like encoding/json's own limit. Deeper input is
// rejected without recursion running away, whatever its length.
const MaxNesting = 10000

// scanner is a small strict JSON lexer over one complete document. It never
// allocates on the success path of a scan and never recurses deeper than
// MaxNesting.
type scanner struct {
	data  []byte
	pos   int
	depth int
}

// syntaxError is a JSON grammar error at a byte offset.
type syntaxError struct {
	offset int
	msg    string
}

func (e *syntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.offset, e.msg)
}

func (s *scanner) fail(msg string) error { return &syntaxError{offset: s.pos, msg: msg} }

func (s *scanner) skipWS() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
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
// whether it contains escapes. The input has been checked for valid UTF-8
// by the caller or is checked here.
func (s *scanner) str() (raw []byte, escaped bool, err error) {
	start := s.pos
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		return nil, false, s.fail("expected a string")
	}
	s.pos++
	for s.pos < len(s.data) {
		c := s.data[s.pos]
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
				if s.pos+5 > len(s.data) || !isHex4(s.data[s.pos+1:s.pos+5]) {
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

func isHex4(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
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
	var n numberShape
	if s.pos < len(s.data) && s.data[s.pos] == '-' {
		n.negative = true
		s.pos++
	}
	switch {
	case s.pos < len(s.data) && s.data[s.pos] == '0':
		s.pos++
	case s.pos < len(s.data) && '1' <= s.data[s.pos] && s.data[s.pos] <= '9':
		s.digits()
	default:
		return n, s.fail("invalid number")
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		n.fraction = true
		s.pos++
		if s.digits() == 0 {
			return n, s.fail("invalid number fraction")
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		n.exponent = true
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
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
func (s *scanner) literal(word string) error {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(word)) {
		return s.fail("invalid literal")
	}
	s.pos += len(word)
	return nil
}

// enter and leave track nesting against MaxNesting.
func (s *scanner) enter() error {
	s.depth++
	if s.depth > MaxNesting {
		return s.fail(fmt.Sprintf("nesting deeper than %d levels", MaxNesting))
	}
	return nil
}

func (s *scanner) leave() { s.depth-- }

// value skips one JSON value of any type and returns its raw bytes. It
// records duplicate member names anywhere inside through dup, when non-nil.
func (s *scanner) value(dup *dupState) ([]byte, error) {
	s.skipWS()
	start := s.pos
	if s.pos >= len(s.data) {
		return nil, s.fail("unexpected end of input")
	}
	var err error
	switch c := s.data[s.pos]; {
	case c == '{':
		err = s.object(func(key []byte, escaped bool) error {
			_, err := s.value(dup)
			return err
		}, dup)
	case c == '[':
		err = s.array(func(int) error { _, err := s.value(dup); return err })
	case c == '"':
		_, _, err = s.str()
	case c == '-' || '0' <= c && c <= '9':
		_, err = s.num()
	case c == 't':
		err = s.literal("true")
	case c == 'f':
		err = s.literal("false")
	case c == 'n':
		err = s.literal("null")
	default:
		err = s.fail("unexpected character")
	}
	if err != nil {
		return nil, err
	}
	return s.data[start:s.pos], nil
}

// object reads an object, calling member for every member with the
// scanner positioned at the member's value, which member must consume.
// With dup non-nil, repeated member names are recorded (D3).
func (s *scanner) object(member func(key []byte, escaped bool) error, dup *dupState) error {
	if err := s.enter(); err != nil {
		return err
	}
	s.pos++ // '{'
	mark := dup.push()
	if s.peek() == '}' {
		s.pos++
		dup.pop(mark)
		s.leave()
		return nil
	}
	for {
		s.skipWS()
		keyStart := s.pos
		key, escaped, err := s.str()
		if err != nil {
			return err
		}
		if dup.seen(mark, key, escaped) && dup.first < 0 {
			dup.first, dup.name = keyStart, unquote(key, escaped)
		}
		if s.peek() != ':' {
			return s.fail("expected ':' after member name")
		}
		s.pos++
		s.skipWS()
		if err := member(key, escaped); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			dup.pop(mark)
			s.leave()
			return nil
		default:
			return s.fail("expected ',' or '}' in object")
		}
	}
}

// array reads an array, calling elem for every element with the scanner
// positioned at the element, which elem must consume.
func (s *scanner) array(elem func(i int) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	s.pos++ // '['
	if s.peek() == ']' {
		s.pos++
		s.leave()
		return nil
	}
	for i := 0; ; i++ {
		s.skipWS()
		if err := elem(i); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			s.leave()
			return nil
		default:
			return s.fail("expected ',' or ']' in array")
		}
	}
}

// unquote returns the decoded name of a raw string token.
func unquote(raw []byte, escaped bool) string {
	if !escaped {
		return string(raw[1 : len(raw)-1])
	}
	s, _ := plainString(raw)
	return s
}

// dupState finds repeated member names (D3) across nested objects with one
// reusable stack of names; a nil *dupState disables the check.
type dupState struct {
	names []string // decoded names of the open objects' members, innermost last
	first int      // offset of the first duplicate, or -1
	name  string   // the first duplicate's name
}

func newDupState() *dupState { return &dupState{first: -1} }

func (d *dupState) push() int {
	if d == nil {
		return 0
	}
	return len(d.names)
}

func (d *dupState) pop(mark int) {
	if d != nil {
		d.names = d.names[:mark]
	}
}

// seen records key in the innermost object and reports whether it was
// already there.
func (d *dupState) seen(mark int, key []byte, escaped bool) bool {
	if d == nil {
		return false
	}
	var name string
	if escaped {
		name = unquote(key, true)
	}
	for _, n := range d.names[mark:] {
		if escaped && n == name || !escaped && n == string(key[1:len(key)-1]) {
			return true
		}
	}
	if !escaped {
		name = string(key[1 : len(key)-1])
	}
	d.names = append(d.names, name)
	return false
}

// envelope reads the top-level object of a frame and fills spans with the
// raw values of the exact envelope member names.
func (s *scanner) envelope(spans *[6][]byte) *FrameError {
	dup := newDupState()
	switch s.peek() {
	case '{':
	case '[':
		if _, err := s.value(nil); err != nil || s.end() != nil {
			return parseError(err, s)
		}
		return &FrameError{Err: invalidRequest("batch arrays are not supported")}
	case 0:
		return &FrameError{Err: NewError(ReasonProtocolError, "parse error: empty frame")}
	default:
		if _, err := s.value(nil); err != nil || s.end() != nil {
			return parseError(err, s)
		}
		return &FrameError{Err: invalidRequest("a frame must be a JSON object")}
	}
	err := s.object(func(key []byte, escaped bool) error {
		v, err := s.value(nil) // member values are free-form at this level
		if err != nil {
			return err
		}
		name := key[1 : len(key)-1]
		if escaped {
			name = []byte(unquote(key, true))
		}
		if i := memberIndex(name); i >= 0 {
			spans[i] = v
		}
		return nil
	}, dup)
	if err == nil {
		err = s.end()
	}
	if err != nil {
		return parseError(err, s)
	}
	if dup.first >= 0 {
		return &FrameError{Err: invalidRequest(fmt.Sprintf("duplicate member %q", dup.name))}
	}
	return nil
}

func parseError(err error, s *scanner) *FrameError {
	if err == nil {
		err = s.end()
	}
	e := NewError(ReasonProtocolError, "parse error: "+err.Error())
	e.Code = CodeParseError
	return &FrameError{Err: e}
}
