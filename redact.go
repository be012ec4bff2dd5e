package extension

import (
	"os"
	"slices"
	"strings"
	"sync"
)

// RedactedMarker is the text that replaces every credential a [Redactor]
// removes. No rule matches it, so redacting already redacted text changes
// nothing (D25).
const RedactedMarker = "[redacted]"

// Redactor removes credentials from text that crosses the host's trust
// boundary (D25; CONTRACT-NOTES §10.1): sidecar stderr, error messages, block
// reasons, provider errors and user-visible UI strings.
//
// Every rule is named (see [Finding]) and targets one shape of credential:
// vendor token formats, structural secrets (URL userinfo, Authorization
// headers, cookies, PEM private key blocks, JWTs, key=value pairs whose key
// names a secret) and the values of the host's own secret-looking environment
// variables. There is deliberately no catch-all for "long random tokens":
// hashes, UUIDs, content refs, model names and paths come through unchanged.
// Only the secret itself is replaced by [RedactedMarker]; key names, header
// names, URL schemes and hosts, and PEM BEGIN/END lines stay readable.
//
// A secret is recognised at a token boundary: a vendor token glued to the
// letters or digits in front of it ("xghp_...") is not. JSON escapes such as
// \n or \u003d in front of a token count as a boundary.
//
// The zero value is ready to use. Fields must not change after the first call;
// a Redactor is safe for concurrent use.
type Redactor struct {
	// Environ returns the environment, as "NAME=value" strings, whose
	// secret-looking variables have their values redacted wherever they
	// occur. It is called once, on first use. Nil means os.Environ.
	Environ func() []string

	// SecretEnvName reports whether an environment variable's name says it
	// holds a secret. Nil means the default: the name, upper-cased with '_'
	// and '-' removed, contains TOKEN, SECRET, PASSWORD, PASSWD, PASSPHRASE,
	// APIKEY, ACCESSKEY, PRIVATEKEY or CREDENTIAL, or the name ends in AUTH,
	// _KEY or _PWD. (PWD and OLDPWD hold directories and do not match.)
	SecretEnvName func(name string) bool

	// MinEnvValueLen is the length below which an environment value is not
	// redacted literally, since short values match ordinary text. Values that
	// are absolute or home-relative paths are never redacted literally. Zero
	// means 8.
	MinEnvValueLen int

	once sync.Once
	prog *redactProgram
}

// Finding is one credential a [Redactor] found: the rule that fired and the
// byte span of the removed text in the input.
type Finding struct {
	// Rule names the rule: a vendor format (openai-key, anthropic-key,
	// openrouter-key, github-token, gitlab-token, slack-token,
	// slack-webhook, aws-access-key-id, google-api-key, stripe-key,
	// sendgrid-key, npm-token, pypi-token, huggingface-token, groq-key,
	// xai-key, vault-token, shopify-token, linear-key, doppler-token,
	// telegram-bot-token, azure-storage-key), a structure (jwt,
	// pem-private-key, url-userinfo, authorization-header, cookie-header,
	// bearer-token, user-password-flag, secret-key-value) or env-value.
	Rule string

	// Start and End are the byte offsets of the removed text.
	Start, End int
}

// defaultRedactor is the Redactor behind [Redact], built on first use.
var defaultRedactor = sync.OnceValue(func() *Redactor { return new(Redactor) })

// Redact removes credentials from s with a zero [Redactor], whose environment
// is the host process's own.
func Redact(s string) string { return defaultRedactor().Redact(s) }

// redactMaxPasses bounds the passes of Redact. A pass can expose a new token
// boundary next to a marker, so Redact repeats until nothing changes; in
// practice the second pass finds nothing.
const redactMaxPasses = 4

// Redact returns s with every credential replaced by [RedactedMarker].
// Redact(Redact(s)) == Redact(s).
func (r *Redactor) Redact(s string) string {
	p := r.program()
	for range redactMaxPasses {
		spans := p.scan(s)
		if len(spans) == 0 {
			return s
		}
		out := redactApply(s, spans)
		if out == s {
			return s
		}
		s = out
	}
	return s
}

// RedactBytes is [Redactor.Redact] for a byte slice. When nothing is redacted
// it returns b itself.
func (r *Redactor) RedactBytes(b []byte) []byte {
	s := string(b)
	out := r.Redact(s)
	if out == s {
		return b
	}
	return []byte(out)
}

// Findings reports what the first pass of [Redactor.Redact] removes from s,
// ordered by start offset. Spans of different rules may overlap.
func (r *Redactor) Findings(s string) []Finding {
	p := r.program()
	spans := p.scan(s)
	slices.SortStableFunc(spans, func(a, b redactSpan) int { return a.start - b.start })
	out := make([]Finding, len(spans))
	for i, sp := range spans {
		out[i] = Finding{Rule: sp.rule, Start: sp.start, End: sp.end}
	}
	return out
}

func (r *Redactor) program() *redactProgram {
	r.once.Do(func() { r.prog = newRedactProgram(r) })
	return r.prog
}

// redactSpan is a byte range of the input to replace, and the rule that
// asked for it.
type redactSpan struct {
	start, end int
	rule       string
}

// redactApply replaces the spans of s, merging those that overlap or touch.
func redactApply(s string, spans []redactSpan) string {
	slices.SortFunc(spans, func(a, b redactSpan) int { return a.start - b.start })
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for i := 0; i < len(spans); {
		start, end := spans[i].start, spans[i].end
		for i++; i < len(spans) && spans[i].start <= end; i++ {
			end = max(end, spans[i].end)
		}
		start = max(start, last)
		b.WriteString(s[last:start])
		b.WriteString(RedactedMarker)
		last = end
	}
	b.WriteString(s[last:])
	return b.String()
}

// redactRule is one named rule. The engine calls match only where one of
// the anchors occurs; match reports spans through redactScan.add.
type redactRule struct {
	name    string
	anchors []string
	fold    bool // anchors match ASCII case-insensitively
	match   func(st *redactScan, p int)
}

// redactAnchor is one literal of one rule, lower-cased when fold is set.
type redactAnchor struct {
	lit  string
	fold bool
	rule int
}

// redactProgram is a Redactor's compiled form: its rules, an index of their
// anchors by the first two (lower-cased) bytes, and the literal environment
// values. It is immutable once built.
type redactProgram struct {
	rules   []redactRule
	anchors []redactAnchor
	index   [1 << 16]uint16 // lower-cased byte pair -> 1 + index into lists
	lists   [][]uint16      // anchor indices sharing a byte pair
	lower   [256]byte       // ASCII lower-casing table
	env     []string        // environment values to redact literally
}

func newRedactProgram(r *Redactor) *redactProgram {
	p := new(redactProgram)
	for i := range p.lower {
		c := byte(i)
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		p.lower[i] = c
	}
	p.rules = redactRules()
	for ri, rule := range p.rules {
		for _, lit := range rule.anchors {
			if rule.fold {
				lit = strings.ToLower(lit)
			}
			key := uint16(p.lower[lit[0]])<<8 | uint16(p.lower[lit[1]])
			if p.index[key] == 0 {
				p.lists = append(p.lists, nil)
				p.index[key] = uint16(len(p.lists))
			}
			l := &p.lists[p.index[key]-1]
			*l = append(*l, uint16(len(p.anchors)))
			p.anchors = append(p.anchors, redactAnchor{lit: lit, fold: rule.fold, rule: ri})
		}
	}
	p.env = redactEnvValues(r)
	return p
}

// redactEnvValues picks the environment values to redact literally.
func redactEnvValues(r *Redactor) []string {
	environ, isSecret, minLen := r.Environ, r.SecretEnvName, r.MinEnvValueLen
	if environ == nil {
		environ = os.Environ
	}
	if isSecret == nil {
		isSecret = redactSecretEnvName
	}
	if minLen <= 0 {
		minLen = 8
	}
	var vals []string
	for _, kv := range environ() {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || len(val) < minLen || !isSecret(name) ||
			strings.HasPrefix(val, "/") || strings.HasPrefix(val, "~") ||
			strings.Contains(RedactedMarker, val) || strings.Contains(val, RedactedMarker) {
			continue
		}
		if !slices.Contains(vals, val) {
			vals = append(vals, val)
		}
	}
	return vals
}

// redactSecretEnvName is the default Redactor.SecretEnvName.
func redactSecretEnvName(name string) bool {
	u := strings.ToUpper(name)
	if strings.HasSuffix(u, "_KEY") || strings.HasSuffix(u, "_PWD") || strings.HasSuffix(u, "AUTH") {
		return true
	}
	n := strings.NewReplacer("_", "", "-", "").Replace(u)
	for _, w := range []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "APIKEY", "ACCESSKEY", "PRIVATEKEY", "CREDENTIAL"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// redactScan is the state of one pass over one input.
type redactScan struct {
	s     string
	spans []redactSpan
	cur   int   // rule being run
	done  []int // per rule: end of its last span; hits before it are skipped
	kvEnd int   // end of the last key the key=value rule examined
	pemAt int   // offset of the END line closing the last PEM block, or -1
}

// add records a span of the current rule under the given name.
func (st *redactScan) add(start, end int, name string) {
	if end <= start {
		return
	}
	st.spans = append(st.spans, redactSpan{start: start, end: end, rule: name})
	st.done[st.cur] = max(st.done[st.cur], end)
}

// scan runs every rule over s once and returns the spans to replace.
func (p *redactProgram) scan(s string) []redactSpan {
	st := redactScan{s: s, done: make([]int, len(p.rules)), pemAt: -1}
	for i := 0; i+1 < len(s); i++ {
		x := p.index[uint16(p.lower[s[i]])<<8|uint16(p.lower[s[i+1]])]
		if x == 0 {
			continue
		}
		for _, ai := range p.lists[x-1] {
			a := &p.anchors[ai]
			if i < st.done[a.rule] || !p.anchorAt(s, i, a) {
				continue
			}
			st.cur = a.rule
			p.rules[a.rule].match(&st, i)
		}
	}
	for _, v := range p.env {
		for off := 0; ; {
			j := strings.Index(s[off:], v)
			if j < 0 {
				break
			}
			st.spans = append(st.spans, redactSpan{start: off + j, end: off + j + len(v), rule: "env-value"})
			off += j + len(v)
		}
	}
	return st.spans
}

func (p *redactProgram) anchorAt(s string, i int, a *redactAnchor) bool {
	if len(s)-i < len(a.lit) {
		return false
	}
	if !a.fold {
		return s[i:i+len(a.lit)] == a.lit
	}
	for k := 0; k < len(a.lit); k++ {
		if p.lower[s[i+k]] != a.lit[k] {
			return false
		}
	}
	return true
}
