package extension

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
)

// Secret holds a credential the host must keep but never show: an API key
// read from configuration, a token handed to a sidecar. Every way of
// printing, logging or encoding it yields [RedactedMarker]; only [Secret.Reveal]
// returns the value, so the one place that needs it says so. Make one with
// [NewSecret], or decode one from JSON or text.
//
// The value sits behind a pointer, so even where fmt cannot call Secret's
// methods (a Secret in an unexported struct field, printed with %v, %+v or
// %#v) it prints an address, never the credential. For the same reason two
// Secrets compare equal with == only when one is a copy of the other;
// compare their Reveal results instead. The zero Secret holds "".
type Secret struct {
	p *string
}

// NewSecret returns a Secret holding s.
func NewSecret(s string) Secret { return Secret{p: &s} }

// Reveal returns the credential itself. Call it only where the value is
// used, never to print it.
func (s Secret) Reveal() string {
	if s.p == nil {
		return ""
	}
	return *s.p
}

// IsZero reports whether s holds the empty string, so that a struct field
// tagged `json:",omitzero"` is omitted.
func (s Secret) IsZero() bool { return s.Reveal() == "" }

// String returns [RedactedMarker].
func (s Secret) String() string { return RedactedMarker }

// GoString returns a Go expression for a redacted Secret, for %#v.
func (s Secret) GoString() string {
	return "extension.NewSecret(" + strconv.Quote(RedactedMarker) + ")"
}

// Format prints [RedactedMarker] for every verb and flag: %v, %+v and %s
// print it as is, %#v prints [Secret.GoString], %q quotes it, and %x, %X, %d
// and the rest print the marker too, never an encoding of the value.
func (s Secret) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'v' && f.Flag('#'):
		fmt.Fprint(f, s.GoString())
	case verb == 'q':
		fmt.Fprint(f, strconv.Quote(RedactedMarker))
	default:
		fmt.Fprint(f, RedactedMarker)
	}
}

// LogValue implements [slog.LogValuer]: log records carry [RedactedMarker].
func (s Secret) LogValue() slog.Value { return slog.StringValue(RedactedMarker) }

// MarshalJSON encodes the Secret as the JSON string "[redacted]".
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(RedactedMarker)), nil }

// MarshalText returns [RedactedMarker], for encoders that use
// encoding.TextMarshaler.
func (s Secret) MarshalText() ([]byte, error) { return []byte(RedactedMarker), nil }

// UnmarshalJSON decodes a JSON string into the Secret; null leaves it
// unchanged. Errors never quote the input.
func (s *Secret) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var v string
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("extension.Secret: want a JSON string")
	}
	*s = NewSecret(v)
	return nil
}

// UnmarshalText sets the Secret to text, for decoders that use
// encoding.TextUnmarshaler.
func (s *Secret) UnmarshalText(text []byte) error {
	*s = NewSecret(string(text))
	return nil
}
