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

// value skips one JSON value of any type and returns its raw bytes. With
// dup non-nil it also rejects repeated member names anywhere inside (D3).
func (s *scanner) value(dup *dupState) ([]byte, error) {
	s.skipWS()
	start := s.pos
	if s.pos >= len(s.data) {
		return nil, s.fail("unexpected end of input")
	}
	var err error
	switch c := s.data[s.pos]; {
	case c == '{':
		err = s.skipObject(dup)
	case c == '[':
		err = s.skipArray(dup)
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

func (s *scanner) skipObject(dup *dupState) error {
	more, err := s.openObject()
	mark := dup.push()
	for more && err == nil {
		var key []byte
		var escaped bool
		keyAt := s.pos
		if key, escaped, err = s.key(); err != nil {
			break
		}
		if dup.seen(mark, key, escaped) {
			s.pos = keyAt
			return s.fail("duplicate member " + quoteName(unquote(key, escaped)))
		}
		if _, err = s.value(dup); err != nil {
			break
		}
		more, err = s.nextMember()
	}
	dup.pop(mark)
	return err
}

func (s *scanner) skipArray(dup *dupState) error {
	more, err := s.openArray()
	for more && err == nil {
		if _, err = s.value(dup); err != nil {
			break
		}
		more, err = s.nextElement()
	}
	return err
}

// openObject consumes '{' and reports whether a member follows; an empty
// object is consumed whole.
func (s *scanner) openObject() (more bool, err error) {
	if err := s.enter(); err != nil {
		return false, err
	}
	s.pos++
	if s.peek() == '}' {
		s.pos++
		s.leave()
		return false, nil
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
	if s.peek() != ':' {
		return nil, false, s.fail("expected ':' after member name")
	}
	s.pos++
	s.skipWS()
	return raw, escaped, nil
}

// nextMember consumes ',' (another member follows) or '}' (the object ends).
func (s *scanner) nextMember() (more bool, err error) {
	switch s.peek() {
	case ',':
		s.pos++
		return true, nil
	case '}':
		s.pos++
		s.leave()
		return false, nil
	}
	return false, s.fail("expected ',' or '}' in object")
}

// openArray consumes '[' and reports whether an element follows.
func (s *scanner) openArray() (more bool, err error) {
	if err := s.enter(); err != nil {
		return false, err
	}
	s.pos++
	if s.peek() == ']' {
		s.pos++
		s.leave()
		return false, nil
	}
	s.skipWS()
	return true, nil
}

// nextElement consumes ',' (another element follows) or ']' (the array ends).
func (s *scanner) nextElement() (more bool, err error) {
	switch s.peek() {
	case ',':
		s.pos++
		s.skipWS()
		return true, nil
	case ']':
		s.pos++
		s.leave()
		return false, nil
	}
	return false, s.fail("expected ',' or ']' in array")
}

// quoteName quotes a peer-supplied name for an error message, cut to 64
// bytes: an answer quoting it must stay far below the frame limit (D2).
func quoteName(name string) string {
	if len(name) > 64 {
		return fmt.Sprintf("%q…", name[:64])
	}
	return fmt.Sprintf("%q", name)
}

// unquote returns the decoded name of a raw string token.
func unquote(raw []byte, escaped bool) string {
	if !escaped {
		return string(raw[1 : len(raw)-1])
	}
	s, _ := plainString(raw)
	return s
}

// sameName compares two raw member names by their decoded value.
func sameName(a []byte, aEsc bool, b []byte, bEsc bool) bool {
	if !aEsc && !bEsc {
		return bytes.Equal(a, b)
	}
	return unquote(a, aEsc) == unquote(b, bEsc)
}

// dupState finds repeated member names (D3) across nested objects with one
// reusable stack of raw names; a nil *dupState disables the check. Small
// objects are checked by a scan of their names; an object with more than
// dupLinear members switches to a set, so a hostile frame with a million
// members costs linear time, not quadratic.
type dupState struct {
	names   [][]byte // raw names of the open objects' members, innermost last
	escaped []bool
	sets    map[int]map[string]struct{} // decoded names of large objects, by mark
}

// dupLinear is how many members an object may have before its duplicate
// check uses a set.
const dupLinear = 16

// reset empties d for reuse.
func (d *dupState) reset() {
	d.names, d.escaped = d.names[:0], d.escaped[:0]
	clear(d.sets)
}

func (d *dupState) push() int {
	if d == nil {
		return 0
	}
	return len(d.names)
}

func (d *dupState) pop(mark int) {
	if d != nil {
		d.names, d.escaped = d.names[:mark], d.escaped[:mark]
		delete(d.sets, mark)
	}
}

// seen records key in the object opened at mark and reports whether it was
// already there.
func (d *dupState) seen(mark int, key []byte, escaped bool) bool {
	if d == nil {
		return false
	}
	if set := d.sets[mark]; set != nil {
		name := unquote(key, escaped)
		if _, dup := set[name]; dup {
			return true
		}
		set[name] = struct{}{}
		return false
	}
	for i := mark; i < len(d.names); i++ {
		if sameName(d.names[i], d.escaped[i], key, escaped) {
			return true
		}
	}
	d.names, d.escaped = append(d.names, key), append(d.escaped, escaped)
	if len(d.names)-mark > dupLinear {
		set := make(map[string]struct{}, 2*dupLinear)
		for i := mark; i < len(d.names); i++ {
			set[unquote(d.names[i], d.escaped[i])] = struct{}{}
		}
		if d.sets == nil {
			d.sets = map[int]map[string]struct{}{}
		}
		d.sets[mark] = set
	}
	return false
}

// envelope reads the top-level object of a frame and fills spans with the
// raw values of the exact envelope member names.
func (s *scanner) envelope(spans *[6][]byte) *FrameError {
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
	var dup dupState
	more, err := s.openObject()
	for more && err == nil {
		var key []byte
		var escaped bool
		if key, escaped, err = s.key(); err != nil {
			break
		}
		if dup.seen(0, key, escaped) {
			// D3: a repeated member is ambiguous, whatever its name.
			return &FrameError{Err: invalidRequest("duplicate member " + quoteName(unquote(key, escaped)))}
		}
		var v []byte
		if v, err = s.value(nil); err != nil { // member values are free-form here
			break
		}
		name := key[1 : len(key)-1]
		if escaped {
			name = []byte(unquote(key, true))
		}
		if i := memberIndex(name); i >= 0 {
			spans[i] = v
		}
		more, err = s.nextMember()
	}
	if err == nil {
		err = s.end()
	}
	if err != nil {
		return parseError(err, s)
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
