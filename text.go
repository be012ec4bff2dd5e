package extension

// Text a person reads: the FULL TRUST summary and every error naming a
// manifest member must show what is there, so text that reaches a
// terminal may not carry characters that act on it (D8, D27).

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// isControl is the one classifier of characters that act on a terminal:
// C0 controls (NUL, tab, newline, ESC...), DEL and C1 controls. Escape
// sequences all start with one (ESC, or a C1 such as CSI U+009B).
func isControl(r rune) bool {
	return r < 0x20 || r == 0x7f || 0x80 <= r && r <= 0x9f
}

// controlChar returns the first control character in s, tab and newline
// included, or -1 when there is none. Such characters can move the
// cursor, hide text or fake lines on a terminal.
func controlChar(s string) rune {
	for _, r := range s {
		if isControl(r) {
			return r
		}
	}
	return -1
}

// TerminalSafe returns s with every control character but tab and
// newline shown escaped (\x1b, \u009b) and every byte that is not UTF-8
// too (\xff), never raw and never dropped: text a sidecar supplied then
// cannot act on a terminal, start an escape sequence or rewrite a line
// (D27). Text without such characters is returned as is. The host applies
// it, after redaction, to every sidecar string it hands its caller; a host
// that prints other sidecar-supplied text (frames it taps, for one) uses it
// too.
func TerminalSafe(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r == utf8.RuneError || isControl(r) && r != '\t' && r != '\n' })
	if i < 0 {
		return s
	}
	b := []byte(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = fmt.Appendf(b, `\x%02x`, s[i])
		case r < 0x80 && isControl(r) && r != '\t' && r != '\n':
			b = fmt.Appendf(b, `\x%02x`, r)
		case isControl(r) && r >= 0x80:
			b = fmt.Appendf(b, `\u%04x`, r)
		default:
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return string(b)
}

// jsonSafe returns the JSON text doc with DEL and every C1 control, the
// only terminal controls valid JSON may carry raw (inside its strings),
// written as \u escapes: the same JSON value, safe on a terminal (D27).
func jsonSafe(doc []byte) []byte {
	if !strings.ContainsFunc(string(doc), func(r rune) bool { return r >= 0x7f && isControl(r) }) {
		return doc
	}
	var b []byte
	for _, r := range string(doc) {
		if r >= 0x7f && isControl(r) {
			b = fmt.Appendf(b, `\u%04x`, r)
		} else {
			b = utf8.AppendRune(b, r)
		}
	}
	return b
}

// checkText rejects a value a person will read that holds a control
// character (D8: the FULL TRUST summary must show what runs).
func checkText(s, field string) error {
	if r := controlChar(s); r >= 0 {
		return &ManifestError{Field: field, Msg: fmt.Sprintf("contains the control character %U; remove it (control characters can disguise what a plugin runs)", r)}
	}
	return nil
}

// fieldName returns a member name for an error's Field: as is when it is
// plain text, else quoted, so an error message cannot carry control
// characters either.
func fieldName(name string) string {
	if controlChar(name) >= 0 {
		return strconv.Quote(name)
	}
	return name
}
