package extension

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"iter"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// RedactedMarker is the text that replaces every credential a [Redactor]
// removes. No rule matches it, so redacting already redacted text changes
// nothing (D25).
const RedactedMarker = "[redacted]"

// Redactor removes credentials from text that crosses the host's trust
// boundary (D25, PROTOCOL.md §9.2): sidecar stderr, error messages, block
// reasons, provider errors and user-visible UI strings.
//
// Every rule is named (see [Finding]) and targets one shape of credential:
// vendor token formats, structural secrets (URL userinfo, Authorization
// headers, cookie values, PEM private key blocks, JWTs, key=value pairs whose
// key names a secret) and the values of the host's own secret-looking
// environment variables. There is deliberately no catch-all for "long random
// tokens": hashes, UUIDs, content refs, model names and paths come through
// unchanged. Only the secret itself is replaced by [RedactedMarker]; key
// names, header names, cookie names and Set-Cookie attributes (Path=/), URL
// schemes and hosts, and PEM BEGIN/END lines stay readable. The
// value of a secret-named key stays when it is a placeholder (${NAME},
// $NAME, %s, %(name)s, <your-token>, null), a count, a hex constant of up to
// 64 bits, or a word of prose or an algorithm name (nothing, all, ed25519).
//
// The work is linear in the input whatever it holds: no byte is examined
// more than a bounded number of times.
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
	// are absolute, home-relative or Windows paths (C:\..., \\server\...)
	// are never redacted literally. Zero means 8; a value shorter than 3
	// bytes is never redacted literally, whatever this says.
	MinEnvValueLen int

	// Values are more values to redact literally, whatever the names of
	// the variables that hold them, under the same length and path rules
	// as environment values: the environment a plugin's manifest gives its
	// sidecar (D25), which a Host adds for each sidecar itself.
	Values []string

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
	// bearer-token, user-password-flag, db-password-flag,
	// secret-key-value) or env-value.
	Rule string

	// Start and End are the byte offsets of the removed text.
	Start, End int
}

// withValues returns r with vals redacted literally too, whatever their
// variables' names, under the same length and path rules as environment
// values: the environment a sidecar's manifest gives it (D25). With no
// values it is r itself, whose compiled rules are shared.
func (r *Redactor) withValues(vals []string) *Redactor {
	if len(vals) == 0 {
		return r
	}
	return &Redactor{Environ: r.Environ, SecretEnvName: r.SecretEnvName, MinEnvValueLen: r.MinEnvValueLen, Values: append(slices.Clone(r.Values), vals...)}
}

// defaultRedactor is a zero Redactor, built on first use.
var defaultRedactor = sync.OnceValue(func() *Redactor { return new(Redactor) })

// redactMaxPasses bounds the passes of Redact. A pass can expose a new token
// boundary next to a marker, so Redact repeats until nothing changes; in
// practice the second pass finds nothing.
const redactMaxPasses = 4

// Redact returns s with every credential replaced by [RedactedMarker].
// Redact(Redact(s)) == Redact(s).
func (r *Redactor) Redact(s string) string {
	out, _ := r.redact(s)
	return out
}

// RedactJSON returns the JSON text doc with every string in it, member
// names included, redacted as Redact redacts text: a frame is judged by
// the strings it holds, whatever escapes encode them. A string that
// changes is written anew, with only the escapes JSON requires; the rest
// of doc is kept byte for byte. Text that is not valid JSON (a cut frame)
// is redacted as text.
func (r *Redactor) RedactJSON(doc string) string {
	if !json.Valid([]byte(doc)) {
		return r.Redact(doc)
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(doc, '"') // valid JSON: a quote outside a string opens one
		if i < 0 {
			b.WriteString(doc)
			return b.String()
		}
		end := i + 1
		for ; doc[end] != '"'; end++ {
			if doc[end] == '\\' {
				end++
			}
		}
		lit := doc[i : end+1]
		var text string
		json.Unmarshal([]byte(lit), &text) // valid: part of a valid document
		if red := r.Redact(text); red != text {
			var q bytes.Buffer
			enc := json.NewEncoder(&q)
			enc.SetEscapeHTML(false)
			enc.Encode(red) // a string: encoding cannot fail
			lit = strings.TrimSuffix(q.String(), "\n")
		}
		b.WriteString(doc[:i] + lit)
		doc = doc[end+1:]
	}
}

// redact is Redact that also returns the bytes its rules examined, summed
// over its passes: a measure of work that tests use to show that
// redaction is linear in the input, whatever the input.
func (r *Redactor) redact(s string) (string, int) {
	p := r.program()
	work := 0
	for range redactMaxPasses {
		spans, w := p.scan(s)
		work += w
		if len(spans) == 0 {
			return s, work
		}
		out := redactApply(s, spans)
		if out == s {
			return s, work
		}
		s = out
	}
	return s, work
}

// Findings reports what the first pass of [Redactor.Redact] removes from s,
// ordered by start offset. Spans of different rules may overlap.
func (r *Redactor) Findings(s string) []Finding {
	spans, _ := r.program().scan(s)
	slices.SortStableFunc(spans, func(a, b Finding) int { return a.Start - b.Start })
	return append(make([]Finding, 0, len(spans)), spans...) // never nil
}

func (r *Redactor) program() *redactProgram {
	r.once.Do(func() { r.prog = newRedactProgram(r) })
	return r.prog
}

// redactApply replaces the spans of s, merging those that overlap or touch.
func redactApply(s string, spans []Finding) string {
	slices.SortFunc(spans, func(a, b Finding) int { return a.Start - b.Start })
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for i := 0; i < len(spans); {
		start, end := spans[i].Start, spans[i].End
		for i++; i < len(spans) && spans[i].Start <= end; i++ {
			end = max(end, spans[i].End)
		}
		b.WriteString(s[last:start]) // start > last: the spans before it are merged
		b.WriteString(RedactedMarker)
		last = end
	}
	b.WriteString(s[last:])
	return b.String()
}

// redactRule is one named rule. The engine calls match, with the text of
// the pass, only where one of the anchors occurs; match reports spans
// through redactScan.add.
type redactRule struct {
	name    string
	anchors []string
	fold    bool // anchors match ASCII case-insensitively; they are written in lower case
	match   func(st *redactScan, s string, p int)
}

// redactAnchor is one literal of one rule, written in lower case when fold
// is set.
type redactAnchor struct {
	lit  string
	fold bool
	rule int
}

// redactProgram is a Redactor's compiled form: its rules (the literal
// environment values among them, one rule each, anchored by the whole
// value) and an index of their anchors by the first two (lower-cased)
// bytes. It is immutable once built.
//
// The index exists for speed alone, and earns its lines: finding the
// anchor hits of 1 MiB of log text through it runs at 490-740 MB/s,
// against 40-45 MB/s for one strings.Index loop per literal, in the same
// run (BenchmarkRedactAnchors, 2 cores, December 2026). Looking at every
// other pair (hits) took BenchmarkRedact from 100-106 to 131-159 MB/s.
type redactProgram struct {
	rules   []redactRule
	anchors []redactAnchor
	index   [1 << 16]uint16 // lower-cased byte pair -> 1 + index into lists
	lists   [][]uint16      // per pair: anchor indices, each with redactSecond set if the pair is its 2nd and 3rd bytes
}

// redactLower is the ASCII lower-casing table.
var redactLower = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] += 'a' - 'A'
	}
	return t
}()

// redactSecond marks a list entry whose pair is the anchor's second and
// third bytes rather than its first two.
const redactSecond = 1 << 15

func newRedactProgram(r *Redactor) *redactProgram {
	p := new(redactProgram)
	p.rules = redactRules()
	for _, v := range redactEnvValues(r) {
		p.rules = append(p.rules, redactRule{name: "env-value", anchors: []string{v}, match: func(st *redactScan, _ string, i int) {
			st.add(i, i+len(v), "env-value")
		}})
	}
	for ri, rule := range p.rules {
		for _, lit := range rule.anchors {
			p.anchors = append(p.anchors, redactAnchor{lit: lit, fold: rule.fold, rule: ri})
		}
	}
	// Every list holds its second-pair entries first, then its first-pair
	// ones, each in anchor order: the order of hits that hits promises.
	for _, off := range [2]int{1, 0} {
		for ai, a := range p.anchors {
			key := uint16(redactLower[a.lit[off]])<<8 | uint16(redactLower[a.lit[off+1]])
			if p.index[key] == 0 {
				p.lists = append(p.lists, nil)
				p.index[key] = uint16(len(p.lists))
			}
			l := &p.lists[p.index[key]-1]
			*l = append(*l, uint16(ai|off*redactSecond))
		}
	}
	return p
}

// hits yields each offset of s where an anchor occurs, with the anchor, by
// increasing offset and, at one offset, in anchor order. Every anchor is
// at least 3 bytes long, so each occurrence covers an even offset i and
// the byte after it as its first two or its second and third bytes:
// looking at every other pair finds them all in half the steps.
func (p *redactProgram) hits(s string) iter.Seq2[int, *redactAnchor] {
	return func(yield func(int, *redactAnchor) bool) {
		for i := 0; i+1 < len(s); i += 2 {
			x := p.index[uint16(redactLower[s[i]])<<8|uint16(redactLower[s[i+1]])]
			if x == 0 {
				continue
			}
			for _, e := range p.lists[x-1] {
				q, a := i, &p.anchors[e&^redactSecond]
				if e&redactSecond != 0 {
					q--
				}
				if q >= 0 && p.anchorAt(s, q, a) && !yield(q, a) {
					return
				}
			}
		}
	}
}

// redactEnvValues picks the environment values to redact literally: those
// of the secret-looking variables of Environ, and r.Values.
func redactEnvValues(r *Redactor) []string {
	environ, isSecret := r.Environ, r.SecretEnvName
	if environ == nil {
		environ = os.Environ
	}
	if isSecret == nil {
		isSecret = redactSecretEnvName
	}
	// Zero or less means 8; 3 is the shortest anchor hits can find.
	minLen := max(cmp.Or(max(r.MinEnvValueLen, 0), 8), 3)
	var vals []string
	add := func(val string) {
		if len(val) < minLen ||
			strings.HasPrefix(val, "/") || strings.HasPrefix(val, "~") || redactDrivePath(val) ||
			strings.Contains(RedactedMarker, val) || strings.Contains(val, RedactedMarker) || slices.Contains(vals, val) {
			return
		}
		vals = append(vals, val)
	}
	for _, kv := range environ() {
		if name, val, ok := strings.Cut(kv, "="); ok && isSecret(name) {
			add(val)
		}
	}
	for _, val := range r.Values {
		add(val)
	}
	return vals
}

// redactSecretEnvName is the default Redactor.SecretEnvName.
func redactSecretEnvName(name string) bool {
	u := strings.ToUpper(name)
	return strings.HasSuffix(u, "_KEY") || strings.HasSuffix(u, "_PWD") || strings.HasSuffix(u, "AUTH") ||
		redactContains(strings.NewReplacer("_", "", "-", "").Replace(u), "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "APIKEY", "ACCESSKEY", "PRIVATEKEY", "CREDENTIAL")
}

// redactScan is the state of one pass over one input.
type redactScan struct {
	spans []Finding // the spans to replace, and the rules that asked for them
	cur   int       // rule being run
	done  []int     // per rule: end of its last span; hits before it are skipped
	pemAt int       // offset of the END line closing the last PEM block, or -1
	work  int       // bytes the rules examined (see Redactor.redact)
}

// add records a span of the current rule under the given name.
func (st *redactScan) add(start, end int, name string) {
	if end <= start {
		return
	}
	st.spans = append(st.spans, Finding{Rule: name, Start: start, End: end})
	st.examined(end)
}

// examined makes the engine skip the current rule's hits before end: text
// it examined, in vain or not, and need not examine again.
func (st *redactScan) examined(end int) { st.done[st.cur] = max(st.done[st.cur], end) }

// scan runs every rule over s once and returns the spans to replace and
// the bytes its rules examined.
func (p *redactProgram) scan(s string) ([]Finding, int) {
	st := redactScan{done: make([]int, len(p.rules)), pemAt: -1}
	for i, a := range p.hits(s) {
		if i >= st.done[a.rule] {
			st.cur = a.rule
			p.rules[a.rule].match(&st, s, i)
		}
	}
	return st.spans, st.work + len(s)
}

func (p *redactProgram) anchorAt(s string, i int, a *redactAnchor) bool {
	t := s[i:min(len(s), i+len(a.lit))]
	return a.fold && strings.EqualFold(t, a.lit) || !a.fold && t == a.lit // t has len(a.lit) bytes: only ASCII can match
}

// The structural rules without a key: URL userinfo, command-line
// passwords, Telegram bot tokens and PEM private keys. The vendor token and
// key=value rules are in redact_rules.go.

// redactURLUserinfo removes the userinfo of scheme://user:pass@host, keeping
// the scheme and the host. Userinfo without a password is removed only when
// it looks like a token (16 or more characters mixing letters and digits).
// A password may hold an unescaped '/', '?' or '#' (user:pa/ss@host): after
// user: anything but a port, the userinfo runs on to the first '@'.
func redactURLUserinfo(st *redactScan, s string, p int) {
	b := redactRunBack(s, p, 32, func(c byte) bool { return isAlnum(c) || strings.IndexByte("+.-", c) >= 0 })
	if b == p {
		return
	}
	start, at, colon, past := p+3, -1, -1, false
	i := start
scan:
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c == '@':
			at = i
			if past {
				break scan
			}
		case c <= ' ' || strings.IndexByte("\"'<>\\`()[]{}|,", c) >= 0:
			break scan
		case c == ':' && colon < 0 && at < 0:
			colon = i
		case !past && (c == '/' || c == '?' || c == '#'):
			if at >= 0 || colon < 0 || strings.Trim(s[colon+1:i], "0123456789") == "" { // host:port/path
				break scan
			}
			past = true
		}
	}
	st.work += i - b
	if past && at < 0 { // no userinfo, nor for a "://" inside what was read
		st.examined(i)
	}
	if info := s[start:max(start, at)]; info != RedactedMarker && (strings.Contains(info, ":") || len(info) >= 16 && redactLetterDigit(info)) {
		st.add(start, at, "url-userinfo")
	}
}

// redactUserFlag removes the password of curl -u user:password (also
// --user), keeping the user name; a numeric uid:gid, as in docker -u, stays.
func redactUserFlag(st *redactScan, s string, p int) {
	if p > 0 && s[p-1] != ' ' && s[p-1] != '\t' {
		return
	}
	i := p + len("-u ")
	if s[p+1] == '-' {
		i = p + len("--user ") // or --user=
	}
	q := byte(0)
	if i < len(s) && (s[i] == '"' || s[i] == '\'') {
		q, i = s[i], i+1
	}
	e := redactRun(s, i, len(s), func(c byte) bool { return c > ' ' && c != q && (q != 0 || c != '"' && c != '\'') })
	st.work += e - p
	user, pw, _ := strings.Cut(s[i:e], ":")
	if user != "" && pw != "" && !strings.HasPrefix(pw, RedactedMarker) && strings.Trim(pw, "0123456789") != "" { // not docker -u 1000:1000
		st.add(e-len(pw), e, "user-password-flag")
	}
}

// redactDBPasswordFlag removes the password a MySQL or MariaDB client is
// given glued to -p (mysql -u app -pSECRET, mysqldump -p'SECRET'): the hit
// is the client's name, and the rest of its command, up to the line's end
// or a shell separator, is read once for -p flags. Elsewhere -p means
// other things (nc -p8080, gcc -pthread, ssh -p 22) and stays.
func redactDBPasswordFlag(st *redactScan, s string, p int) {
	if p > 0 && (isAlnum(s[p-1]) || s[p-1] == '_' || s[p-1] == '-') {
		return // inside a longer word
	}
	w := redactRun(s, p, 16, func(c byte) bool { return 'a' <= c && c <= 'z' || c == '-' })
	if w < len(s) && s[w] != ' ' && s[w] != '\t' && s[w] != '"' && s[w] != '\'' {
		return // not the command word (mysql.sock, mysql_config)
	}
	end := redactRun(s, w, 1024, func(c byte) bool { return c != '\n' && c != ';' && c != '|' && c != '&' })
	st.work += end - p
	st.examined(end) // the rest of the command is read here, once
	for i := w; i+2 < end; i++ {
		if s[i] != '-' || s[i+1] != 'p' || s[i-1] != ' ' && s[i-1] != '\t' || s[i+2] == ' ' || s[i+2] == '\t' {
			continue
		}
		v, q := i+2, byte(0)
		if s[v] == '"' || s[v] == '\'' {
			q, v = s[v], v+1
		}
		e := redactRun(s, v, end-v, func(c byte) bool { return c != q && (q != 0 || c != ' ' && c != '\t') })
		if e > v && !strings.HasPrefix(s[v:e], RedactedMarker) {
			st.add(v, e, "db-password-flag")
		}
		i = e
	}
}

// redactTelegram removes a Telegram bot token, 123456789:AA..., also in the
// /bot<token>/ form of Bot API URLs. The hit is at the colon.
func redactTelegram(st *redactScan, s string, p int) {
	b := redactRunBack(s, p, 10, func(c byte) bool { return '0' <= c && c <= '9' })
	if p-b < 8 || !(redactBoundary(s, b) || b >= 3 && s[b-3:b] == "bot") {
		return
	}
	e := redactRun(s, p+1, len(s), func(c byte) bool { return isAlnum(c) || c == '_' || c == '-' })
	st.work += e - b
	if e-(p+1) == 35 {
		st.add(b, e, "telegram-bot-token")
	}
}

// redactPEM removes the body of a PEM private key block and keeps its BEGIN
// and END lines. Line breaks may be real or JSON-escaped (\n). A block
// without an END line (cut off) loses every base64 line after BEGIN; an END
// line without a BEGIN (the start cut off) loses the base64 lines before it.
// Certificates and public keys are not secrets and stay.
func redactPEM(st *redactScan, s string, p int) {
	if s[p+5] == 'E' { // -----END, unless it closes the block just removed
		if _, ok := redactPEMLabel(s, p+len("-----END ")); ok && p != st.pemAt {
			start := redactPEMBodyBefore(s, p)
			st.work += p - start
			st.add(start, p, "pem-private-key")
		}
		return
	}
	hdr, ok := redactPEMLabel(s, p+len("-----BEGIN "))
	if !ok {
		return
	}
	end := redactPEMBody(st, s, hdr)
	st.work += end - p
	st.add(hdr, end, "pem-private-key")
}

// redactPEMLabel reads a PEM label ending in PRIVATE KEY (or PRIVATE KEY
// BLOCK, for PGP) and the dashes after it; it returns the offset after them.
func redactPEMLabel(s string, i int) (int, bool) {
	j := redactRun(s, i, 64, func(c byte) bool { return 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == ' ' })
	label := s[i:j]
	if !strings.HasPrefix(s[j:], "-----") ||
		!strings.HasSuffix(label, "PRIVATE KEY") && !strings.HasSuffix(label, "PRIVATE KEY BLOCK") {
		return 0, false
	}
	return j + 5, true
}

func redactB64(c byte) bool { return isAlnum(c) || c == '+' || c == '/' || c == '=' }

// redactSpace reports whether c is a blank or a line break.
func redactSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// redactEscape reports whether a JSON escape \n, \r or \t ends at i.
func redactEscape(s string, i int) bool {
	return i >= 2 && s[i-2] == '\\' && (s[i-1] == 'n' || s[i-1] == 'r' || s[i-1] == 't')
}

// redactRun returns the end of the run of bytes from i on, at most n of
// them, that in accepts.
func redactRun(s string, i, n int, in func(byte) bool) int {
	j := i
	for j < len(s) && j-i < n && in(s[j]) {
		j++
	}
	return j
}

// redactRunBack returns the start of the run of bytes before i, at most n
// of them, that in accepts.
func redactRunBack(s string, i, n int, in func(byte) bool) int {
	j := i
	for j > 0 && i-j < n && in(s[j-1]) {
		j--
	}
	return j
}

// redactPastBackslashes returns the end of the run of backslashes at i.
func redactPastBackslashes(s string, i int) int { return len(s) - len(strings.TrimLeft(s[i:], `\`)) }

// redactPEMBreaks skips line breaks and blanks, real or JSON-escaped.
func redactPEMBreaks(s string, i int) int {
	for i < len(s) {
		switch j := redactPastBackslashes(s, i); {
		case redactSpace(s[i]):
			i++
		case j > i && j < len(s) && strings.IndexByte("nrt", s[j]) >= 0:
			i = j + 1
		default:
			return i
		}
	}
	return i
}

// redactPEMBody finds the end of the body that starts at i: the offset of
// the END line after a line break, which it records in st.pemAt, or, when
// there is none, the end of the last base64 line.
func redactPEMBody(st *redactScan, s string, i int) int {
	end := i
	body := false
	for {
		j := redactPEMBreaks(s, i)
		if j > i && strings.HasPrefix(s[j:], "-----END ") {
			st.pemAt = j
			return j
		}
		switch k := redactRun(s, j, len(s), redactB64); {
		case !body && k > j && strings.HasPrefix(s[k:], ": "): // Proc-Type: 4,ENCRYPTED
			end = redactRun(s, k, len(s), func(c byte) bool { return c != '\n' && c != '\\' })
		case k == j: // no line here, as after one that no line break ends
			return end
		default:
			body, end = true, k
		}
		i = end
	}
}

// redactPEMBodyBefore walks back from an END line over whole base64 lines
// and returns where the first of them starts.
func redactPEMBodyBefore(s string, p int) int {
	start, i := p, p
	for {
		for i > 0 && (redactSpace(s[i-1]) || redactEscape(s, i)) { // line breaks, real or escaped
			if redactSpace(s[i-1]) {
				i--
			} else {
				i = len(strings.TrimRight(s[:i-2], `\`))
			}
		}
		k := redactRunBack(s, i, i, redactB64)
		if k < i && k > 0 && s[k-1] == '\\' { // the n of an escaped line break
			k++
		}
		if k == i || k > 0 && !redactSpace(s[k-1]) && !redactEscape(s, k) {
			return start
		}
		start, i = k, k
	}
}

// Text a person reads: the FULL TRUST summary and every error naming a
// manifest member must show what is there, so text that reaches a
// terminal may not carry characters that act on it (D8, D27).

// isControl is the one classifier of characters that act on a terminal
// or reorder what a person reads: C0 controls (NUL, tab, newline,
// ESC...), DEL and C1 controls, where escape sequences start (ESC, or a
// C1 such as CSI U+009B); and, by D29, the bidirectional embedding,
// override and isolate controls (U+202A-U+202E, U+2066-U+2069) and the
// line and paragraph separators (U+2028, U+2029). Zero-width characters
// and the left-to-right and right-to-left marks are not: emoji sequences
// and right-to-left text need them.
func isControl(r rune) bool {
	return r < 0x20 || r == 0x7f || 0x80 <= r && r <= 0x9f || 0x2028 <= r && r <= 0x202e || 0x2066 <= r && r <= 0x2069
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
// newline shown escaped (\x1b, \u009b, \u202e) and every byte that is not UTF-8
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

// jsonSafe returns the JSON text doc with DEL, the C1 controls and those
// of D29, the only controls valid JSON may carry raw (inside its
// strings), written as \u escapes: the same JSON value, safe on a
// terminal (D27).
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
