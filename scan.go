package extension

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// The JSON lexer under the one strict walk of validate.go. It reads one
// complete document token by token, checks the grammar, UTF-8 and the
// nesting bound, and never allocates on the success path.
//
// It exists for strictness that encoding/json cannot give (exact and
// duplicate member names, integer literal rules, D3) at a speed its token
// API does not reach: on a ~300-byte intercept frame, the envelope, then
// its params, strictly decoded (two walks) took 3.5-5 µs and 4
// allocations; a plain json.Unmarshal with no checks 5.6-7.1 µs and 12;
// the duplicate check alone over json.Decoder.Token, then json.Unmarshal,
// 28-31 µs and 178 (go test -bench StrictDecode -count 3, one session, 2
// cores).

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

// skipValue moves the scanner past one value of any shape, checking only
// its syntax and the nesting bound, and reports whether it is valid; on
// false the position is unspecified and the caller walks the value again
// to name the fault. It keeps no path and calls no closure, so it is the
// fast way past the raw members of an envelope: on an extension/event
// frame, the envelope's walk went from about half to a third of the
// sidecar's decoding (a CPU profile of exthost bench's observer).
//
// With dups, a member name repeated inside any object of the value fails
// it too (D3), as the walk's vAny check does.
func (s *scanner) skipValue(dups *dupState) bool {
	var closers [64]byte // open objects and arrays; deeper input takes the slow walk
	var marks [64]int    // each open object's mark in dups
	depth := 0
	member := func() bool {
		key, escaped, err := s.key()
		return err == nil && (dups == nil || !dups.seen(marks[depth-1], key, escaped))
	}
	closed := func() {
		depth--
		if dups != nil && closers[depth] == '}' {
			dups.pop(marks[depth])
		}
	}
	for {
		// A value.
		switch c := s.peek(); {
		case c == '{' || c == '[':
			if depth == len(closers) || s.depth+depth+1 > maxNesting {
				return false
			}
			closers[depth] = c + 2 // '}' and ']' follow '{' and '[' by two
			if dups != nil && c == '{' {
				marks[depth] = dups.push()
			}
			depth++
			s.pos++
			if s.peek() == closers[depth-1] {
				s.pos++
				closed()
				break // empty: a complete value
			}
			if c == '{' && !member() {
				return false
			}
			continue // the first member's value, or the first element
		case c == '"':
			if _, _, err := s.str(); err != nil {
				return false
			}
		case c == '-' || '0' <= c && c <= '9':
			if _, err := s.num(); err != nil {
				return false
			}
		case c == 't' || c == 'f' || c == 'n':
			if err := s.literal(); err != nil {
				return false
			}
		default:
			return false
		}
		// After a complete value: close what it completes, or go on to the
		// next member or element.
		for {
			if depth == 0 {
				return true
			}
			switch s.peek() {
			case closers[depth-1]:
				s.pos++
				closed()
				continue
			case ',':
				s.pos++
				if closers[depth-1] == '}' && !member() {
					return false
				}
			default:
				return false
			}
			break
		}
	}
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
	names   [][]byte // raw names of the open objects' members, innermost last
	escaped []bool
	sets    map[int]map[string]bool // decoded names of large objects, by mark; made with the walker
}

// dupLinear is how many members an object may have before its duplicate
// check uses a set.
const dupLinear = 16

func (d *dupState) reset() {
	d.names, d.escaped = d.names[:0], d.escaped[:0]
	clear(d.sets)
}

func (d *dupState) push() int { return len(d.names) }

func (d *dupState) pop(mark int) {
	d.names, d.escaped = d.names[:mark], d.escaped[:mark]
	for k := range d.sets { // the sets of the objects inside it too (a fast skip that gave up leaves them)
		if k >= mark {
			delete(d.sets, k)
		}
	}
}

// seen records key in the object opened at mark and reports whether it was
// already there.
func (d *dupState) seen(mark int, key []byte, escaped bool) bool {
	if set := d.sets[mark]; set != nil {
		name := unquote(key, escaped)
		dup := set[name]
		set[name] = true
		return dup
	}
	for i := mark; i < len(d.names); i++ {
		// The same bytes, or with an escape on either side the same value.
		if bytes.Equal(d.names[i], key) || (d.escaped[i] || escaped) && unquote(d.names[i], d.escaped[i]) == unquote(key, escaped) {
			return true
		}
	}
	d.names, d.escaped = append(d.names, key), append(d.escaped, escaped)
	if len(d.names)-mark > dupLinear {
		set := make(map[string]bool, 2*dupLinear)
		for i := mark; i < len(d.names); i++ {
			set[unquote(d.names[i], d.escaped[i])] = true
		}
		d.sets[mark] = set
	}
	return false
}
