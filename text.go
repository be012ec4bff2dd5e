package extension

// Text a person reads: the FULL TRUST summary and every error naming a
// manifest member must show what is there, so text that reaches a
// terminal may not carry characters that act on it (D8, D27).

import (
	"fmt"
	"strconv"
)

// controlChar returns the first C0 control (NUL, tab, newline, ESC...),
// DEL or C1 control in s, or -1 when there is none. Such characters can
// move the cursor, hide text or fake lines on a terminal.
func controlChar(s string) rune {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || 0x80 <= r && r <= 0x9f {
			return r
		}
	}
	return -1
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
