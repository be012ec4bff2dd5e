package extension

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const secretTestValue = "sk-FAKEsecretValue0123456789"

// secretLeaks reports whether out shows the test value, raw or hex-encoded.
func secretLeaks(out string) bool {
	return strings.Contains(out, secretTestValue) || strings.Contains(out, "FAKE") ||
		strings.Contains(strings.ToLower(out), fmt.Sprintf("%x", "FAKE"))
}

func TestSecretRevealReturnsTheValue(t *testing.T) {
	if got := NewSecret(secretTestValue).Reveal(); got != secretTestValue {
		t.Errorf("Reveal() = %q, want %q", got, secretTestValue)
	}
}

func TestSecretFormatNeverRevealsTheValue(t *testing.T) {
	s := NewSecret(secretTestValue)
	tests := []struct {
		format string
		arg    any
		want   string
	}{
		{"%v", s, "[redacted]"},
		{"%+v", s, "[redacted]"},
		{"%#v", s, `extension.NewSecret("[redacted]")`},
		{"%s", s, "[redacted]"},
		{"%q", s, `"[redacted]"`},
		{"%x", s, "[redacted]"},
		{"%X", s, "[redacted]"},
		{"% x", s, "[redacted]"},
		{"%d", s, "[redacted]"},
		{"%10s", s, "[redacted]"},
		{"%v", []Secret{s, s}, "[[redacted] [redacted]]"},
		{"%+v", struct{ Key Secret }{s}, "{Key:[redacted]}"},
		{"%#v", struct{ Key Secret }{s}, `struct { Key extension.Secret }{Key:extension.NewSecret("[redacted]")}`},
		{"%v", map[string]Secret{"k": s}, "map[k:[redacted]]"},
		{"%v", &s, ""}, // a pointer prints as an address; checked for leaks only
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			got := fmt.Sprintf(tt.format, tt.arg)
			if secretLeaks(got) {
				t.Fatalf("Sprintf(%q) = %q reveals the secret", tt.format, got)
			}
			if tt.want != "" && got != tt.want {
				t.Errorf("Sprintf(%q) = %q, want %q", tt.format, got, tt.want)
			}
		})
	}
}

func TestSecretStringAndGoString(t *testing.T) {
	s := NewSecret(secretTestValue)
	if got := s.String(); got != RedactedMarker {
		t.Errorf("String() = %q, want %q", got, RedactedMarker)
	}
	if got, want := s.GoString(), `extension.NewSecret("[redacted]")`; got != want {
		t.Errorf("GoString() = %q, want %q", got, want)
	}
	if got := fmt.Sprint(s) + fmt.Sprintln(s) + errors.New(fmt.Sprint("auth: ", s)).Error(); secretLeaks(got) {
		t.Errorf("Sprint/Sprintln reveal the secret: %q", got)
	}
}

func TestSecretLogValueNeverRevealsTheValue(t *testing.T) {
	for _, h := range []struct {
		name string
		new  func(*bytes.Buffer) slog.Handler
	}{
		{"text", func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) }},
		{"json", func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) }},
	} {
		t.Run(h.name, func(t *testing.T) {
			var buf bytes.Buffer
			slog.New(h.new(&buf)).Info("calling provider", "key", NewSecret(secretTestValue), slog.Any("group", struct{ K Secret }{NewSecret(secretTestValue)}))
			if got := buf.String(); secretLeaks(got) || !strings.Contains(got, RedactedMarker) {
				t.Errorf("log line = %q, want the marker and not the secret", got)
			}
		})
	}
	if got := NewSecret(secretTestValue).LogValue(); got.String() != RedactedMarker {
		t.Errorf("LogValue() = %q, want %q", got.String(), RedactedMarker)
	}
}

func TestSecretMarshalNeverRevealsTheValue(t *testing.T) {
	type config struct {
		Key  Secret  `json:"key" xml:"key"`
		Ptr  *Secret `json:"ptr" xml:"ptr"`
		List []Secret
	}
	s := NewSecret(secretTestValue)
	c := config{Key: s, Ptr: &s, List: []Secret{s}}
	j, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(j), `{"key":"[redacted]","ptr":"[redacted]","List":["[redacted]"]}`; got != want {
		t.Errorf("json.Marshal = %s, want %s", got, want)
	}
	x, err := xml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if secretLeaks(string(x)) {
		t.Errorf("xml.Marshal = %s reveals the secret", x)
	}
	if b, _ := s.MarshalText(); string(b) != RedactedMarker {
		t.Errorf("MarshalText() = %q, want %q", b, RedactedMarker)
	}
}

func TestSecretUnmarshalsFromJSON(t *testing.T) {
	var c struct{ Key Secret }
	if err := json.Unmarshal([]byte(`{"Key":"`+secretTestValue+`"}`), &c); err != nil {
		t.Fatal(err)
	}
	if got := c.Key.Reveal(); got != secretTestValue {
		t.Errorf("decoded Reveal() = %q, want %q", got, secretTestValue)
	}
}

// TestSecretInUnexportedFieldNeverPrints: fmt cannot call the methods of a
// value in an unexported field, so a string-typed Secret printed in clear
// there; the pointer representation prints an address instead.
func TestSecretInUnexportedFieldNeverPrints(t *testing.T) {
	type inner struct{ key Secret }
	type outer struct {
		name  string
		creds inner
		list  []Secret
		ptr   *Secret
	}
	s := NewSecret(secretTestValue)
	v := outer{name: "acme", creds: inner{key: s}, list: []Secret{s}, ptr: &s}
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		if got := fmt.Sprintf(format, v); secretLeaks(got) {
			t.Errorf("Sprintf(%q) of a struct with an unexported Secret = %q reveals the secret", format, got)
		}
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "v", v)
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "v", v)
	if secretLeaks(buf.String()) {
		t.Errorf("log lines reveal the secret: %q", buf.String())
	}
}

func TestSecretZeroValueAndIsZero(t *testing.T) {
	var zero Secret
	if zero.Reveal() != "" || !zero.IsZero() || fmt.Sprint(zero) != RedactedMarker {
		t.Errorf("zero Secret: Reveal %q, IsZero %v, Sprint %q; want \"\", true, %q", zero.Reveal(), zero.IsZero(), fmt.Sprint(zero), RedactedMarker)
	}
	if NewSecret("x").IsZero() {
		t.Errorf("NewSecret(\"x\").IsZero() = true, want false")
	}
	j, err := json.Marshal(struct {
		A Secret `json:"a,omitzero"`
		B Secret `json:"b,omitzero"`
	}{B: NewSecret("x")})
	if err != nil || string(j) != `{"b":"[redacted]"}` {
		t.Errorf("json.Marshal with omitzero = %s, %v; want {\"b\":\"[redacted]\"}", j, err)
	}
}

func TestSecretUnmarshalTextAndBadJSON(t *testing.T) {
	var s Secret
	if err := s.UnmarshalText([]byte(secretTestValue)); err != nil || s.Reveal() != secretTestValue {
		t.Errorf("UnmarshalText: Reveal() = %q, %v; want %q", s.Reveal(), err, secretTestValue)
	}
	if err := json.Unmarshal([]byte(`{"Key":null}`), &struct{ Key *Secret }{}); err != nil {
		t.Errorf("null: %v", err)
	}
	err := json.Unmarshal([]byte(`{"Key":12345}`), &struct{ Key Secret }{})
	if err == nil || strings.Contains(err.Error(), "12345") {
		t.Errorf("a number: error %v, want one that does not quote the input", err)
	}
}

func ExampleSecret() {
	type config struct {
		Endpoint string
		APIKey   Secret
	}
	c := config{Endpoint: "https://api.example.invalid", APIKey: NewSecret("sk-FAKEexample0123456789")}
	fmt.Printf("%+v\n", c)
	j, _ := json.Marshal(c)
	fmt.Println(string(j))
	fmt.Println(len(c.APIKey.Reveal()))
	// Output:
	// {Endpoint:https://api.example.invalid APIKey:[redacted]}
	// {"Endpoint":"https://api.example.invalid","APIKey":"[redacted]"}
	// 24
}
