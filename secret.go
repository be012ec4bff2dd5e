package extension

import (
	"fmt"
	"log/slog"
	"strconv"
)

// Secret holds a credential the host must keep but never show: an API key
// read from configuration, a token handed to a sidecar. Every way of
// printing, logging or encoding it yields [RedactedMarker]; only [Secret.Reveal]
// returns the value, so the one place that needs it says so.
//
// Secret is a string type, so a conversion (string(s)) or a map key of an
// encoder that ignores methods still reaches the value; use Reveal.
type Secret string

// Reveal returns the credential itself. Call it only where the value is
// used, never to print it.
func (s Secret) Reveal() string { return string(s) }

// String returns [RedactedMarker].
func (s Secret) String() string { return RedactedMarker }

// GoString returns a Go expression for a redacted Secret, for %#v.
func (s Secret) GoString() string { return "extension.Secret(" + strconv.Quote(RedactedMarker) + ")" }

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
