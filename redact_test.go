package extension

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
)

// redactSecretCase is one record of testdata/redact/secrets.txt.
type redactSecretCase struct {
	name, rule string
	secrets    []string // parts of which no 8-byte run may survive
	keeps      []string // text the output must hold, as cookie names
	text       string
}

// redactTestEnv is the environment of the corpus Redactor; the env-value
// cases of the corpus use these (fake) values.
var redactTestEnv = []string{
	"HOME=/home/dev",
	"PWD=/home/dev/src/extension",
	"ACME_DB_PASSWORD=Zq8vFAKEenvPw7731",
	"UPSTREAM_TOKEN=tkn.FAKE.93jd83hd8f2k",
	"PLUGIN_SECRET=Ex4mpleFAKEvalue_99",
	"SHORT_TOKEN=abc123",
	"GOOGLE_APPLICATION_CREDENTIALS=/home/dev/.config/gcloud/fake-creds.json",
	"LANG=en_US.UTF-8",
}

func newTestRedactor() *Redactor {
	return &Redactor{Environ: func() []string { return redactTestEnv }}
}

func loadSecretCorpus(tb testing.TB) []redactSecretCase {
	tb.Helper()
	data, err := os.ReadFile("testdata/redact/secrets.txt")
	if err != nil {
		tb.Fatal(err)
	}
	var cases []redactSecretCase
	for _, chunk := range strings.Split("\n"+string(data), "\n=== ")[1:] {
		head, text, ok := strings.Cut(chunk, "\n---\n")
		if !ok {
			tb.Fatalf("secrets.txt: case without ---: %.40q", chunk)
		}
		lines := strings.Split(head, "\n")
		name, rule, _ := strings.Cut(lines[0], " ")
		c := redactSecretCase{name: name, rule: rule, text: strings.TrimSuffix(text, "\n")}
		for _, l := range lines[1:] {
			if s, ok := strings.CutPrefix(l, "secret: "); ok {
				c.secrets = append(c.secrets, s)
			}
			if s, ok := strings.CutPrefix(l, "keep: "); ok {
				c.keeps = append(c.keeps, s)
			}
		}
		if len(c.secrets) == 0 || rule == "" {
			tb.Fatalf("secrets.txt: case %q needs a rule and a secret", name)
		}
		cases = append(cases, c)
	}
	return cases
}

func loadHarmlessCorpus(tb testing.TB) []string {
	tb.Helper()
	data, err := os.ReadFile("testdata/redact/harmless.txt")
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// redactLeak returns the first run of 8 bytes of secret found in out, or "".
func redactLeak(out, secret string) string {
	const run = 8
	if len(secret) < run {
		if strings.Contains(out, secret) {
			return secret
		}
		return ""
	}
	for i := 0; i+run <= len(secret); i++ {
		if strings.Contains(out, secret[i:i+run]) {
			return secret[i : i+run]
		}
	}
	return ""
}

func TestRedactCorpusRemovesEverySecret(t *testing.T) {
	r := newTestRedactor()
	cases := loadSecretCorpus(t)
	if len(cases) < 100 {
		t.Fatalf("corpus has %d secrets, want at least 100", len(cases))
	}
	redacted := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := r.Redact(c.text)
			clean := true
			for _, s := range c.secrets {
				if leak := redactLeak(out, s); leak != "" {
					clean = false
					t.Errorf("Redact left %q of the secret in\n%s", leak, out)
				}
			}
			if clean {
				redacted++
			}
			if !strings.Contains(out, RedactedMarker) {
				t.Errorf("Redact output has no %s marker:\n%s", RedactedMarker, out)
			}
			for _, k := range c.keeps {
				if !strings.Contains(out, k) {
					t.Errorf("Redact output lost %q:\n%s", k, out)
				}
			}
			var fired []string
			for _, f := range r.Findings(c.text) {
				fired = append(fired, f.Rule)
				for _, s := range c.secrets {
					i := strings.Index(c.text, s)
					if f.Rule == c.rule && f.Start < i+len(s) && i < f.End {
						return
					}
				}
			}
			t.Errorf("rule %q did not fire on the secret; fired: %v", c.rule, fired)
		})
	}
	t.Logf("secrets redacted: %d of %d (%.1f%%)", redacted, len(cases), 100*float64(redacted)/float64(len(cases)))
}

// TestRedactD25NoCatchAll proves D25's "no catch-all": UUIDs, hashes, content
// and stream refs, base64 of ordinary text, identifiers, dated model names,
// paths and stack traces come through unchanged (at most 1% may change).
func TestRedactD25NoCatchAll(t *testing.T) {
	r := newTestRedactor()
	lines := loadHarmlessCorpus(t)
	if len(lines) < 300 {
		t.Fatalf("corpus has %d harmless strings, want at least 300", len(lines))
	}
	altered := 0
	for _, l := range lines {
		if got := r.Redact(l); got != l {
			altered++
			t.Logf("altered: %q\n      -> %q", l, got)
		}
	}
	pct := 100 * float64(altered) / float64(len(lines))
	t.Logf("harmless strings altered: %d of %d (%.2f%%)", altered, len(lines), pct)
	if pct > 1 {
		t.Errorf("%.2f%% of harmless strings altered, want at most 1%%", pct)
	}
}

// TestRedactCorpusCoversEveryRule keeps the corpus honest: each named rule
// has at least one secret that it is expected to catch.
func TestRedactCorpusCoversEveryRule(t *testing.T) {
	want := map[string]bool{"env-value": true, "authorization-header": true, "cookie-header": true}
	for _, rule := range redactRules() {
		want[rule.name] = true
	}
	for _, c := range loadSecretCorpus(t) {
		delete(want, c.rule)
	}
	for name := range want {
		t.Errorf("no corpus case expects rule %q", name)
	}
}

func TestRedactKeepsContext(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"provider error keeps the key name", "provider rejected api_key=sk-proj-AbCdEfGh0123456789IjKlMnOp", "provider rejected api_key=[redacted]"},
		{"json value", `{"user":"bob","password":"hunter2!x"}`, `{"user":"bob","password":"[redacted]"}`},
		{"json-escaped quotes", `"{\"password\": \"hunter2!x\", \"n\": 1}"`, `"{\"password\": \"[redacted]\", \"n\": 1}"`},
		{"yaml", "db:\n  password: hunter2!x\n  host: db", "db:\n  password: [redacted]\n  host: db"},
		{"url userinfo keeps scheme and host", "postgres://app:s3cret-pw@db.internal:5432/x", "postgres://[redacted]@db.internal:5432/x"},
		{"authorization drops the scheme too", `curl -H "Authorization: Basic ZGVwbG95OnMzY3JldA==" https://x`, `curl -H "Authorization: [redacted]" https://x`},
		{"cookie keeps names and attributes", "Set-Cookie: sid=abc123xyz; Path=/; HttpOnly", "Set-Cookie: sid=[redacted]; Path=/; HttpOnly"},
		{"pem keeps BEGIN and END", "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIFAKE0K3y\nbm90IGEga2V5\n-----END EC PRIVATE KEY-----\nnext", "-----BEGIN EC PRIVATE KEY-----[redacted]-----END EC PRIVATE KEY-----\nnext"},
		{"command-line flag", "mysql --password Sup3rFAKEpw -h db", "mysql --password [redacted] -h db"},
		{"prose key with two words", "The API key: FAKEabcd1234 was revoked", "The API key: [redacted] was revoked"},
		{"env value without context", "dialing with Zq8vFAKEenvPw7731 now", "dialing with [redacted] now"},
		{"an unterminated quote stops at the line end", "pass: \"hunter2\\\nAuthorization: Basic FAKEZm9vYmFy\n", "pass: \"[redacted]\\\nAuthorization: [redacted]\n"},
		{"vendor token glued after a JSON escape", `"line one\nghp_FAKEabcdefghijklmnopqrstuvwxyz012345"`, `"line one\n[redacted]"`},
	}
	r := newTestRedactor()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Redact(tt.in); got != tt.want {
				t.Errorf("Redact(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestRedactLeavesNonSecretsAlone(t *testing.T) {
	tests := []struct{ name, in string }{
		{"token counts", `{"max_tokens":4096,"usage":{"input_tokens":10,"output_tokens":3}}`},
		{"token type", "token_type=Bearer"},
		{"placeholder", "password=${DB_PASSWORD}"},
		{"null", `"secret": null`},
		{"marker", "password=[redacted] token: [redacted]"},
		{"glued vendor prefix", "xghp_FAKEabcdefghijklmnopqrstuvwxyz012345"},
		{"hyphenated words after sk-", "sk-learn-compatible-estimator-wrapper"},
		{"certificate", "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----"},
		{"short env value", "abc123 is too short to redact literally"},
		{"env path value", "read /home/dev/.config/gcloud/fake-creds.json"},
		{"url without password", "https://github.com/reasonix-ext/extension"},
		{"directory in PWD", "PWD=/home/dev/src"},
	}
	r := newTestRedactor()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Redact(tt.in); got != tt.in {
				t.Errorf("Redact(%q) = %q, want it unchanged", tt.in, got)
			}
		})
	}
}

// redactAdversarial are inputs that made redaction quadratic: each key's
// value was rejected as a placeholder without recording the scan, so every
// following key rescanned to the end of the line.
var redactAdversarial = []string{
	"token=$", "authorization: $", "cookie:[", // as found by review
	"pass: a ", "pwd=/x=", "a://u:p/", "token=${{", "Authorization: <", `token="$`, "password: x y=", "sig=b(",
	"mysql -pX ", "mysql mariadb ", // the database clients' -p flags
	"cookie:a=${{;", "Set-Cookie: path=", // a cookie value per pair
}

// TestRedactD25LinearOnAdversarialText redacts 1 MiB of each adversarial
// pattern and counts the bytes the rules examine: the count per input byte
// is bounded and the same at 256 KiB and 1 MiB, so the work is linear. (A
// quadratic rule examines 4 times more per byte at 4 times the size.)
func TestRedactD25LinearOnAdversarialText(t *testing.T) {
	r := newTestRedactor()
	for _, pat := range redactAdversarial {
		t.Run(pat, func(t *testing.T) {
			var perByte [2]float64
			for k, size := range [2]int{256 << 10, 1 << 20} {
				in := strings.Repeat(pat, size/len(pat))
				out, work := r.redact(in)
				if out != r.Redact(in) {
					t.Fatalf("redact and Redact disagree at %d bytes", size)
				}
				perByte[k] = float64(work) / float64(len(in))
			}
			t.Logf("bytes examined per input byte: %.2f at 256 KiB, %.2f at 1 MiB", perByte[0], perByte[1])
			if perByte[1] > 32 {
				t.Errorf("%.1f bytes examined per input byte at 1 MiB, want at most 32", perByte[1])
			}
			if perByte[1] > 1.1*perByte[0] {
				t.Errorf("bytes examined per input byte grow with the input: %.2f at 256 KiB, %.2f at 1 MiB", perByte[0], perByte[1])
			}
		})
	}
}

// TestRedactD25HexKeysAndDollarPasswords: only short hex constants and real
// placeholder syntax (${NAME}, $NAME, %s, %(name)s) are not secrets.
func TestRedactD25HexKeysAndDollarPasswords(t *testing.T) {
	tests := []struct{ in, want string }{
		{"PRIVATE_KEY=0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318", "PRIVATE_KEY=[redacted]"},
		{"password=$ecretP4ss!", "password=[redacted]"},
		{"password=$dbpass", "password=[redacted]"},
		{"token=${TOKEN:-FAKEdefault99}", "token=[redacted]"},
		{"password=$", "password=[redacted]"},
		{"token=0xdeadbeef", "token=0xdeadbeef"},
		{"password=${DB_PASSWORD}", "password=${DB_PASSWORD}"},
		{"password=${DB_PASSWORD:?unset}", "password=${DB_PASSWORD:?unset}"},
		{"password=$DB_PASSWORD", "password=$DB_PASSWORD"},
		{"password=$(cat /run/secrets/db)", "password=$(cat /run/secrets/db)"},
		{"token: ${{ secrets.GITHUB_TOKEN }}", "token: ${{ secrets.GITHUB_TOKEN }}"},
		{"password=%s", "password=%s"},
		{"password=%-12v", "password=%-12v"},
		{"password=%(password)s", "password=%(password)s"},
		{"password=%DB_PASSWORD%", "password=%DB_PASSWORD%"},
	}
	r := newTestRedactor()
	for _, tt := range tests {
		if got := r.Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestRedactD25PlaceholderNeverSpansLines: a placeholder opened on one line
// and closed on another (found by FuzzRedact) is not one, so the lines in
// between are still examined.
func TestRedactD25PlaceholderNeverSpansLines(t *testing.T) {
	for _, open := range []string{"${{", "${X:?", "$(", "%("} {
		in := "token:" + open + "\nAuthorization: Basic ZGVwbG95OkZBS0Vwdw==\n}})s"
		if out := newTestRedactor().Redact(in); strings.Contains(out, "ZGVwbG95") {
			t.Errorf("Redact(%q) = %q keeps the credential", in, out)
		}
	}
}

// TestRedactD25SpecExamplesDisappear: two example keys, of the shapes D25 names,
// that must disappear while the context stays readable.
func TestRedactD25SpecExamplesDisappear(t *testing.T) {
	for _, in := range []string{
		"provider rejected key sk-real-secret-value-123456",
		"provider rejected key sk-abcdef1234567890SECRETKEY",
	} {
		if got, want := defaultRedactor().Redact(in), "provider rejected key [redacted]"; got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRedactD25ValueShapes covers values that ran past or stopped short of
// where a reader would end them.
func TestRedactD25ValueShapes(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"url password with a slash", "postgres://user:pa/ss@h/db", "postgres://[redacted]@h/db"},
		{"url password with a hash", "postgres://user:pa#ss@h", "postgres://[redacted]@h"},
		{"url port then an at sign in the path", "https://host:8080/path/u@x", "https://host:8080/path/u@x"},
		{"passphrase after a colon", "password: correct horse battery staple", "password: [redacted]"},
		{"passphrase after a spaced equals", "passphrase = correct horse battery staple # gpg", "passphrase = [redacted] # gpg"},
		{"passphrase stops at the next key", "password: hunter2 hunter3 user: bob", "password: [redacted] user: bob"},
		{"tight equals takes one word", "password=hunter2 for user bob", "password=[redacted] for user bob"},
		{"go http.Header dump", "map[Authorization:[Basic ZGVwbG95OkZBS0Vwdw==] User-Agent:[Go]]", "map[Authorization:[[redacted]] User-Agent:[Go]]"},
		{"prose: nothing", "the secret: nothing", "the secret: nothing"},
		{"prose: a list", "found 3 secrets: a, b", "found 3 secrets: a, b"},
		{"prose: passwd output", "passwd: all authentication tokens updated successfully.", "passwd: all authentication tokens updated successfully."},
		{"algorithm name", "signing_key: ed25519", "signing_key: ed25519"},
		{"pwd as a windows path", `PWD=C:\Users\dev`, `PWD=C:\Users\dev`},
		{"key after a JSON-escaped line break", `{"log":"started\nAuthorization: Basic ZGVwbG95OkZBS0Vwdw=="}`, `{"log":"started\nAuthorization: [redacted]"}`},
		{"windows path ends at a JSON-escaped line break", `PWD=C:\Users\dev\nAuthorization: Basic ZGVwbG95OkZBS0Vwdw==`, `PWD=C:\Users\dev\nAuthorization: [redacted]`},
	}
	r := newTestRedactor()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Redact(tt.in); got != tt.want {
				t.Errorf("Redact(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestRedactIsIdempotent(t *testing.T) {
	r := newTestRedactor()
	inputs := loadHarmlessCorpus(t)
	for _, c := range loadSecretCorpus(t) {
		inputs = append(inputs, c.text)
	}
	for _, in := range inputs {
		once := r.Redact(in)
		if twice := r.Redact(once); twice != once {
			t.Errorf("Redact not idempotent on %q:\n once %q\ntwice %q", in, once, twice)
		}
	}
}

func TestRedactMarkerMatchesNoRule(t *testing.T) {
	r := &Redactor{Environ: func() []string { return []string{"X_TOKEN=redacted", "Y_TOKEN=[redacted]"} }}
	for _, in := range []string{RedactedMarker, "password=" + RedactedMarker, "Authorization: " + RedactedMarker} {
		if f := r.Findings(in); len(f) != 0 {
			t.Errorf("Findings(%q) = %v, want none", in, f)
		}
	}
}

func TestRedactFindingsNameRuleAndSpan(t *testing.T) {
	in := "a AKIAFAKE0123456789AB b"
	got := newTestRedactor().Findings(in)
	want := []Finding{{Rule: "aws-access-key-id", Start: 2, End: 22}}
	if !slices.Equal(got, want) {
		t.Errorf("Findings(%q) = %v, want %v", in, got, want)
	}
}

func TestRedactEnvironmentValues(t *testing.T) {
	tests := []struct {
		name string
		r    *Redactor
		in   string
		want string
	}{
		{"secret name, long value", &Redactor{}, "x FAKEvalue99 y", "x [redacted] y"},
		{"value below the minimum", &Redactor{MinEnvValueLen: 20}, "x FAKEvalue99 y", "x FAKEvalue99 y"},
		{"custom name rule", &Redactor{SecretEnvName: func(string) bool { return false }}, "x FAKEvalue99 y", "x FAKEvalue99 y"},
		{"windows path value", &Redactor{}, `open C:\Users\dev\creds.json`, `open C:\Users\dev\creds.json`},
		{"unc path value", &Redactor{}, `open \\fs01\share\creds.json`, `open \\fs01\share\creds.json`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.r.Environ = func() []string {
				return []string{"SERVICE_TOKEN=FAKEvalue99", `GOOGLE_APPLICATION_CREDENTIALS=C:\Users\dev\creds.json`, `NET_CREDENTIALS=\\fs01\share\creds.json`}
			}
			if got := tt.r.Redact(tt.in); got != tt.want {
				t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestRedactSecretEnvName(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"GITHUB_TOKEN", true}, {"OPENAI_API_KEY", true}, {"DB_PASSWORD", true}, {"AWS_SECRET_ACCESS_KEY", true},
		{"MYSQL_PWD", true}, {"GPG_PASSPHRASE", true}, {"BASIC_AUTH", true}, {"GOOGLE_APPLICATION_CREDENTIALS", true},
		{"PWD", false}, {"OLDPWD", false}, {"AUTH_MODE", false}, {"SSH_AUTH_SOCK", false}, {"NPM_AUTH", true}, {"HOME", false}, {"PATH", false}, {"GIT_AUTHOR_NAME", false}, {"KEYMAP", false},
	}
	for _, tt := range tests {
		if got := redactSecretEnvName(tt.name); got != tt.want {
			t.Errorf("redactSecretEnvName(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// FuzzRedact checks that Redact never panics, is idempotent, and that a
// corpus secret inserted on its own lines into arbitrary text never
// survives. A secret glued to the surrounding text without a token boundary
// is out of scope (see Redactor).
func FuzzRedact(f *testing.F) {
	cases := loadSecretCorpus(f)
	for i, c := range cases {
		f.Add(c.text, uint(i+1), uint(len(c.text)/2))
	}
	for i, l := range loadHarmlessCorpus(f) {
		f.Add(l, uint(i), uint(i))
	}
	r := newTestRedactor()
	f.Fuzz(func(t *testing.T, text string, idx, pos uint) {
		once := r.Redact(text)
		if twice := r.Redact(once); twice != once {
			t.Fatalf("not idempotent on %q:\n once %q\ntwice %q", text, once, twice)
		}
		c := cases[idx%uint(len(cases))]
		p := int(pos % uint(len(text)+1))
		in := text[:p] + "\n" + c.text + "\n" + text[p:]
		out := r.Redact(in)
		for _, s := range c.secrets {
			if redactLeak(text, s) != "" {
				continue // the surrounding text holds part of it already
			}
			if leak := redactLeak(out, s); leak != "" {
				t.Fatalf("secret of case %s survived as %q in\n%q", c.name, leak, out)
			}
		}
		if again := r.Redact(out); again != out {
			t.Fatalf("not idempotent on %q:\n once %q\ntwice %q", in, out, again)
		}
	})
}

func ExampleRedactor_Redact() {
	r := &Redactor{Environ: func() []string { return nil }}
	fmt.Println(r.Redact("provider rejected api_key=sk-proj-FAKEa1b2C3d4E5f6G7h8I9j0 (status 401)"))
	fmt.Println(r.Redact(`curl -H "Authorization: Bearer FAKEtok3nFAKEtok3n" https://api.example.invalid`))
	fmt.Println(r.Redact("commit 3f786850e387550fdab836ed7e6dc881de23001b, request 123e4567-e89b-42d3-a456-426614174000"))
	// Output:
	// provider rejected api_key=[redacted] (status 401)
	// curl -H "Authorization: [redacted]" https://api.example.invalid
	// commit 3f786850e387550fdab836ed7e6dc881de23001b, request 123e4567-e89b-42d3-a456-426614174000
}

func ExampleRedactor_Findings() {
	r := &Redactor{Environ: func() []string { return nil }}
	for _, f := range r.Findings("dial postgres://app:FAKEpassw0rd@db.internal:5432/orders") {
		fmt.Println(f.Rule, f.Start, f.End)
	}
	// Output:
	// url-userinfo 16 32
}

// TestRedactAnchorHitsEqualEveryOffsetScan: the anchor index, which looks
// at every other byte pair, yields exactly the hits (and in the same
// order) of trying every anchor at every offset, on the corpus, on the
// benchmark log and on text made of anchor fragments at odd and even
// offsets; no anchor is shorter than the 3 bytes it relies on, and every
// case-folding one is written in lower case, as the index expects.
func TestRedactAnchorHitsEqualEveryOffsetScan(t *testing.T) {
	p := newRedactProgram(&Redactor{Environ: func() []string { return append(redactTestEnv, "MY_TOKEN=abc") }, MinEnvValueLen: 1})
	for _, a := range p.anchors {
		if len(a.lit) < 3 {
			t.Errorf("anchor %q of rule %s is shorter than 3 bytes", a.lit, p.rules[a.rule].name)
		}
		if a.fold && a.lit != strings.ToLower(a.lit) {
			t.Errorf("case-folding anchor %q of rule %s is not written in lower case", a.lit, p.rules[a.rule].name)
		}
	}
	inputs := []string{string(redactBenchLog(64 << 10)), "abc", "xabc", "ab", "", "ke", "KEYxkeyToKeN:AA-u ://", "xkeyJ", "keyJ", "xpasswd"}
	for _, c := range loadSecretCorpus(t) {
		inputs = append(inputs, c.text)
	}
	var frag strings.Builder
	for i, a := range p.anchors {
		frag.WriteString(a.lit[:1+i%len(a.lit)])
		frag.WriteString(strings.ToUpper(a.lit))
		frag.WriteString(" x"[:1+i%2])
	}
	inputs = append(inputs, frag.String())
	type hit struct {
		at     int
		anchor string
	}
	for _, in := range inputs {
		var got, want []hit
		for q, a := range p.hits(in) {
			got = append(got, hit{q, a.lit})
		}
		for q := range len(in) {
			for i := range p.anchors {
				if p.anchorAt(in, q, &p.anchors[i]) {
					want = append(want, hit{q, p.anchors[i].lit})
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("on %.60q: hits %v, every-offset scan %v", in, got, want)
		}
	}
}

// redactBenchLog returns n bytes of mixed log text, the same on every call:
// request logs with UUIDs and hashes, JSON events, stack frames and prose,
// with a fake secret every 50 lines or so.
func redactBenchLog(n int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	hex := func(k int) string {
		const digits = "0123456789abcdef"
		b := make([]byte, k)
		for i := range b {
			b[i] = digits[rng.IntN(16)]
		}
		return string(b)
	}
	secrets := []string{
		"provider rejected api_key=sk-proj-FAKEa1b2C3d4E5f6G7h8I9j0KkLlMmNn",
		`{"level":"warn","msg":"retry","headers":{"Authorization":"Bearer FAKEtok3nFAKEtok3nFAKE"}}`,
		"dial postgres://app:FAKEpassw0rd@db.internal:5432/orders failed",
		"export GITHUB_TOKEN=ghp_FAKEabcdefghijklmnopqrstuvwxyz012345",
		"Set-Cookie: sid=FAKEcookie0123456789; Path=/; HttpOnly",
	}
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		switch i % 10 {
		case 0, 1, 2:
			fmt.Fprintf(&b, "2025-03-14T09:%02d:%02d.%03dZ INFO http: request_id=%s-%s-4%s-a%s-%s method=POST path=/v1/chat status=200 dur=%dms\n",
				i%60, (i/60)%60, i%1000, hex(8), hex(4), hex(3), hex(3), hex(12), rng.IntN(900))
		case 3:
			fmt.Fprintf(&b, `{"level":"info","ts":%d,"msg":"content externalized","ref":"content_%s","sha256":"%s","bytes":%d}`+"\n",
				1741944067+i, hex(24), hex(64), rng.IntN(1<<20))
		case 4:
			fmt.Fprintf(&b, `{"model":"claude-3-5-sonnet-20241022","usage":{"input_tokens":%d,"output_tokens":%d},"stream":"es_%s"}`+"\n",
				rng.IntN(5000), rng.IntN(900), hex(24))
		case 5:
			fmt.Fprintf(&b, "github.com/reasonix-ext/extension.(*Conn).readLoop(0xc000%s)\n\t/home/dev/src/extension/conn.go:%d +0x%s\n", hex(6), rng.IntN(500), hex(3))
		case 6:
			fmt.Fprintf(&b, "commit %s: Fix flaky reconnect test in the keychain token cache\n", hex(40))
		case 7:
			b.WriteString("WARN plugin acme-ext: optional extension failed to answer within 2s; skipping its ruling for tool.before\n")
		case 8:
			fmt.Fprintf(&b, "\tat com.acme.auth.TokenService.refresh(TokenService.java:%d)\n", rng.IntN(400))
		case 9:
			if i%50 == 9 {
				b.WriteString(secrets[(i/50)%len(secrets)] + "\n")
			} else {
				fmt.Fprintf(&b, "DEBUG cache key=%s hit=true size=%d\n", hex(32), rng.IntN(4096))
			}
		}
	}
	return b.Bytes()[:n]
}

func BenchmarkRedact(b *testing.B) {
	in := string(redactBenchLog(1 << 20))
	r := newTestRedactor()
	r.Redact(in) // build the rules before the timed loop
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		r.Redact(in)
	}
}

// BenchmarkRedactBaselineBytesCount is the same-run baseline for
// BenchmarkRedact: one bytes.Count pass over the same input.
func BenchmarkRedactBaselineBytesCount(b *testing.B) {
	in := redactBenchLog(1 << 20)
	sep := []byte("\n")
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		bytes.Count(in, sep)
	}
}

// BenchmarkRedactAdversarial redacts each adversarial pattern (see
// TestRedactD25LinearOnAdversarialText) at 256 KiB and at 1 MiB. Linear
// redaction shows the same MB/s at both sizes; quadratic redaction would
// drop to a quarter at 1 MiB. BenchmarkRedact is the baseline on ordinary
// logs.
func BenchmarkRedactAdversarial(b *testing.B) {
	r := newTestRedactor()
	for _, pat := range redactAdversarial {
		for _, size := range []int{256 << 10, 1 << 20} {
			in := strings.Repeat(pat, size/len(pat))
			b.Run(fmt.Sprintf("%q/%dKiB", pat, size>>10), func(b *testing.B) {
				b.SetBytes(int64(len(in)))
				for b.Loop() {
					r.Redact(in)
				}
			})
		}
	}
}

// BenchmarkRedactAnchors measures the mechanism the redactor keeps only
// for speed, its index of anchors by byte pair, against the plain way of
// finding the same hits: one strings.Index loop per anchor literal, over
// a lower-cased copy for the case-folding ones. Both count the anchor
// hits of the BenchmarkRedact input; the index is worth its lines while
// it is clearly faster in the same run.
func BenchmarkRedactAnchors(b *testing.B) {
	in := string(redactBenchLog(1 << 20))
	p := newRedactProgram(newTestRedactor())
	indexed := func() (hits int) {
		for range p.hits(in) {
			hits++
		}
		return hits
	}
	perLiteral := func() (hits int) {
		lower := strings.ToLower(in) // ASCII-only input: offsets agree
		for _, a := range p.anchors {
			s := in
			if a.fold {
				s = lower
			}
			for off := 0; ; {
				j := strings.Index(s[off:], a.lit)
				if j < 0 {
					break
				}
				hits++
				off += j + 1
			}
		}
		return hits
	}
	if indexed() != perLiteral() {
		b.Fatalf("the two ways find %d and %d hits", indexed(), perLiteral())
	}
	b.Run("index", func(b *testing.B) {
		b.SetBytes(int64(len(in)))
		for b.Loop() {
			indexed()
		}
	})
	b.Run("per-literal", func(b *testing.B) {
		b.SetBytes(int64(len(in)))
		for b.Loop() {
			perLiteral()
		}
	})
}

// TestRedactJSONJudgesTheStringsAFrameHoldsD25: a secret that only shows
// once a JSON string is decoded (escaped quotes around a command line,
// \u escapes inside a token) is removed; what is not a changed string
// stays byte for byte, and text that is not JSON is redacted as text.
func TestRedactJSONJudgesTheStringsAFrameHoldsD25(t *testing.T) {
	r := &Redactor{Environ: func() []string { return nil }}
	frame := `{"jsonrpc":"2.0", "id":7,"result":{"reason":"exec: \"/usr/bin/mariadb\" -uadmin -pHunter2FAKEHunter2 -e \"show\"","note":"\u0067hp_FAKEfake0123456789abcdefFAKE0123456789ab <ok>"}}`
	got := r.RedactJSON(frame)
	for _, secret := range []string{"Hunter2FAKE", "FAKEfake0123456789"} {
		if strings.Contains(got, secret) {
			t.Errorf("RedactJSON kept %s: %s", secret, got)
		}
	}
	if !strings.HasPrefix(got, `{"jsonrpc":"2.0", "id":7,"result":{"reason":"exec: \"/usr/bin/mariadb\" -uadmin -p[redacted]`) || !strings.HasSuffix(got, `"note":"[redacted] <ok>"}}`) || !json.Valid([]byte(got)) {
		t.Errorf("RedactJSON = %s; want the frame as it was but for the two strings", got)
	}
	if clean := `{"a": "plain \u00e9 text", "b": [1, 2.50]}`; r.RedactJSON(clean) != clean {
		t.Errorf("RedactJSON changed a frame without secrets: %s", r.RedactJSON(clean))
	}
	if cut := `{"token":"ghp_FAKEfake0123456789abcdefFAKE0123456789ab`; strings.Contains(r.RedactJSON(cut), "FAKEfake") {
		t.Errorf("RedactJSON of a cut frame kept the token: %s", r.RedactJSON(cut))
	}
}
