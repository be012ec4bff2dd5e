package extension

// The rules of the Redactor (D25): one scanner per shape of credential.

import (
	"regexp"
	"strings"
)

// redactTokenRule describes a vendor token: where it starts (prefixes), what
// it looks like (re, anchored at the prefix; group 1, when present, is the
// part to remove) and what must hold around it.
type redactTokenRule struct {
	name     string
	prefixes []string
	fold     bool
	re       string
	window   int      // bytes after the prefix examined; zero means 512
	alnumEnd bool     // the token must not run on into a letter or digit
	mixed    bool     // the token must contain upper case, lower case and a digit
	yieldTo  []string // prefixes that belong to a more specific rule
}

// redactRules is the rule set of D25. Order matters only for the rule name a
// Finding reports when two rules remove the same text.
func redactRules() []redactRule {
	tokens := []redactTokenRule{
		{name: "anthropic-key", prefixes: []string{"sk-ant-"}, re: `^sk-ant-[a-z]+[0-9]*-[A-Za-z0-9_-]{20,}`},
		{name: "openrouter-key", prefixes: []string{"sk-or-v1-"}, re: `^sk-or-v1-[A-Za-z0-9]{32,}`},
		{name: "openai-key", prefixes: []string{"sk-"}, re: `^sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}`, mixed: true, yieldTo: []string{"sk-ant-", "sk-or-"}},
		{name: "github-token", prefixes: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, re: `^gh[pousr]_[A-Za-z0-9]{30,}`},
		{name: "github-token", prefixes: []string{"github_pat_"}, re: `^github_pat_[A-Za-z0-9_]{30,}`},
		{name: "gitlab-token", prefixes: []string{"glpat-", "gldt-", "glrt-", "glptt-"}, re: `^gl(?:pat|dt|rt|ptt)-[A-Za-z0-9_-]{20,}`},
		{name: "slack-token", prefixes: []string{"xoxb-", "xoxa-", "xoxp-", "xoxr-", "xoxs-", "xoxe-"}, re: `^xox[abprse]-[A-Za-z0-9-]{20,}`},
		{name: "slack-token", prefixes: []string{"xapp-"}, re: `^xapp-[0-9]-[A-Za-z0-9-]{20,}`},
		{name: "slack-webhook", prefixes: []string{"hooks.slack.com/"}, re: `^hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9_/-]{16,})`},
		{name: "aws-access-key-id", prefixes: []string{"AKIA", "ASIA", "AROA", "AIDA", "AGPA", "ANPA", "AIPA", "ANVA"}, re: `^A[A-Z]{3}[A-Z0-9]{16}`, alnumEnd: true},
		{name: "google-api-key", prefixes: []string{"AIza"}, re: `^AIza[0-9A-Za-z_-]{35}`, alnumEnd: true},
		{name: "stripe-key", prefixes: []string{"sk_live_", "sk_test_", "rk_live_", "rk_test_"}, re: `^[sr]k_(?:live|test)_[A-Za-z0-9]{20,}`},
		{name: "stripe-key", prefixes: []string{"whsec_"}, re: `^whsec_[A-Za-z0-9+/]{24,}`},
		{name: "sendgrid-key", prefixes: []string{"SG."}, re: `^SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}`},
		{name: "npm-token", prefixes: []string{"npm_"}, re: `^npm_[A-Za-z0-9]{36}`, alnumEnd: true},
		{name: "pypi-token", prefixes: []string{"pypi-Ag"}, re: `^pypi-Ag[A-Za-z0-9_-]{50,}`},
		{name: "huggingface-token", prefixes: []string{"hf_"}, re: `^hf_[A-Za-z0-9]{30,}`},
		{name: "groq-key", prefixes: []string{"gsk_"}, re: `^gsk_[A-Za-z0-9]{40,}`},
		{name: "xai-key", prefixes: []string{"xai-"}, re: `^xai-[A-Za-z0-9]{40,}`},
		{name: "vault-token", prefixes: []string{"hvs.", "hvb.", "hvr."}, re: `^hv[sbr]\.[A-Za-z0-9_-]{20,}(?:\.[A-Za-z0-9_-]+)*`},
		{name: "shopify-token", prefixes: []string{"shpat_", "shpca_", "shppa_", "shpss_"}, re: `^shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}`, alnumEnd: true},
		{name: "linear-key", prefixes: []string{"lin_api_"}, re: `^lin_api_[A-Za-z0-9]{32,}`},
		{name: "doppler-token", prefixes: []string{"dp.pt.", "dp.st.", "dp.ct.", "dp.sa.", "dp.scim.", "dp.audit."}, re: `^dp\.[a-z]+\.(?:[a-z0-9]+\.)?[A-Za-z0-9]{32,}`},
		{name: "jwt", prefixes: []string{"eyJ"}, re: `^eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`, window: 1 << 16},
		{name: "azure-storage-key", prefixes: []string{"AccountKey="}, fold: true, re: `^(?i:accountkey)=([A-Za-z0-9+/]{20,}={0,2})`},
		{name: "azure-storage-key", prefixes: []string{"SharedAccessSignature="}, fold: true, re: `^(?i:sharedaccesssignature)=([^;\s"'\\]+)`},
		{name: "bearer-token", prefixes: []string{"bearer"}, fold: true, re: `^(?i:bearer)[ \t]+([A-Za-z0-9._~+/=-]{16,})`},
	}
	rules := make([]redactRule, 0, len(tokens)+4)
	for _, t := range tokens {
		rules = append(rules, t.rule())
	}
	return append(rules,
		redactRule{name: "pem-private-key", anchors: []string{"-----BEGIN ", "-----END "}, match: redactPEM},
		redactRule{name: "url-userinfo", anchors: []string{"://"}, match: redactURLUserinfo},
		redactRule{name: "telegram-bot-token", anchors: []string{":AA"}, match: redactTelegram},
		redactRule{name: "user-password-flag", anchors: []string{"-u ", "--user ", "--user="}, match: redactUserFlag},
		redactRule{
			name:    "secret-key-value",
			anchors: []string{"pass", "pwd", "secret", "token", "key", "credential", "auth", "cookie", "sig"},
			fold:    true,
			match:   redactKeyValue,
		},
	)
}

// rule compiles a token description into a rule.
func (t redactTokenRule) rule() redactRule {
	re := regexp.MustCompile(t.re)
	window := t.window
	if window == 0 {
		window = 512
	}
	return redactRule{name: t.name, anchors: t.prefixes, fold: t.fold, match: func(st *redactScan, p int) {
		s := st.s
		if !redactBoundary(s, p) {
			return
		}
		for _, d := range t.yieldTo {
			if strings.HasPrefix(s[p:], d) {
				return
			}
		}
		w := s[p:min(len(s), p+window)]
		m := re.FindStringSubmatchIndex(w)
		if m == nil {
			return
		}
		end := m[1]
		if t.alnumEnd && end < len(w) && redactAlnum(w[end]) {
			return
		}
		if t.mixed && !redactMixed(w[m[0]:end]) {
			return
		}
		start := m[0]
		if len(m) > 2 && m[2] >= 0 {
			start, end = m[2], m[3]
		}
		if strings.HasPrefix(w[start:], RedactedMarker) {
			return
		}
		if end == len(w) { // cut by the window: take the rest of the token too
			for p+end < len(s) && (redactAlnum(s[p+end]) || strings.IndexByte("_-.", s[p+end]) >= 0) {
				end++
			}
		}
		st.add(p+start, p+end, t.name)
	}}
}

func redactAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// redactBoundary reports whether a token may start at p: nothing before it,
// or something other than a letter, digit, '_' or '-', or a JSON escape
// (\n, \r, \t, \uXXXX) right before it.
func redactBoundary(s string, p int) bool {
	if p == 0 {
		return true
	}
	c := s[p-1]
	if !redactAlnum(c) && c != '_' && c != '-' {
		return true
	}
	if p >= 2 && s[p-2] == '\\' && (c == 'n' || c == 'r' || c == 't') {
		return true
	}
	if p >= 6 && s[p-6] == '\\' && s[p-5] == 'u' {
		for k := p - 4; k < p; k++ {
			if !strings.ContainsRune("0123456789abcdefABCDEF", rune(s[k])) {
				return false
			}
		}
		return true
	}
	return false
}

// redactMixed reports whether tok has an upper-case letter, a lower-case
// letter and a digit, as random keys do and hyphenated words do not.
func redactMixed(tok string) bool {
	var up, low, dig bool
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		up = up || 'A' <= c && c <= 'Z'
		low = low || 'a' <= c && c <= 'z'
		dig = dig || '0' <= c && c <= '9'
	}
	return up && low && dig
}

// redactURLUserinfo removes the userinfo of scheme://user:pass@host, keeping
// the scheme and the host. Userinfo without a password is removed only when
// it looks like a token (16 or more characters mixing letters and digits).
func redactURLUserinfo(st *redactScan, p int) {
	s := st.s
	b := p
	for b > 0 && p-b < 32 && (redactAlnum(s[b-1]) || strings.IndexByte("+.-", s[b-1]) >= 0) {
		b--
	}
	if b == p {
		return
	}
	start, at := p+3, -1
	for i := start; i < len(s); i++ {
		c := s[i]
		if c == '@' {
			at = i
			continue
		}
		if c <= ' ' || strings.IndexByte("/?#\"'<>\\`()[]{}|,", c) >= 0 {
			break
		}
	}
	if at <= start {
		return
	}
	info := s[start:at]
	if info == RedactedMarker {
		return
	}
	if !strings.Contains(info, ":") {
		var letter, digit bool
		for i := 0; i < len(info); i++ {
			letter = letter || redactAlnum(info[i]) && info[i] > '9'
			digit = digit || '0' <= info[i] && info[i] <= '9'
		}
		if len(info) < 16 || !letter || !digit {
			return
		}
	}
	st.add(start, at, "url-userinfo")
}

// redactUserFlag removes the password of curl -u user:password (also
// --user), keeping the user name; a numeric uid:gid, as in docker -u, stays.
func redactUserFlag(st *redactScan, p int) {
	s := st.s
	if p > 0 && s[p-1] != ' ' && s[p-1] != '\t' {
		return
	}
	i := p + 2
	if s[p+1] == '-' {
		i = p + len("--user")
	}
	i++
	q := byte(0)
	if i < len(s) && (s[i] == '"' || s[i] == '\'') {
		q, i = s[i], i+1
	}
	e := i
	for e < len(s) && s[e] > ' ' && s[e] != q && (q != 0 || s[e] != '"' && s[e] != '\'') {
		e++
	}
	c := strings.IndexByte(s[i:e], ':')
	if c <= 0 || c+1 == e-i {
		return
	}
	if pw := s[i+c+1 : e]; !strings.HasPrefix(pw, RedactedMarker) && strings.Trim(pw, "0123456789") != "" { // not docker -u 1000:1000
		st.add(i+c+1, e, "user-password-flag")
	}
}

// redactTelegram removes a Telegram bot token, 123456789:AA..., also in the
// /bot<token>/ form of Bot API URLs. The hit is at the colon.
func redactTelegram(st *redactScan, p int) {
	s := st.s
	b := p
	for b > 0 && p-b < 10 && '0' <= s[b-1] && s[b-1] <= '9' {
		b--
	}
	if p-b < 8 || !(redactBoundary(s, b) || b >= 3 && s[b-3:b] == "bot") {
		return
	}
	e := p + 1
	for e < len(s) && (redactAlnum(s[e]) || s[e] == '_' || s[e] == '-') {
		e++
	}
	if e-(p+1) != 35 {
		return
	}
	st.add(b, e, "telegram-bot-token")
}

// redactPEM removes the body of a PEM private key block and keeps its BEGIN
// and END lines. Line breaks may be real or JSON-escaped (\n). A block
// without an END line (cut off) loses every base64 line after BEGIN; an END
// line without a BEGIN (the start cut off) loses the base64 lines before it.
// Certificates and public keys are not secrets and stay.
func redactPEM(st *redactScan, p int) {
	s := st.s
	if s[p+5] == 'E' { // -----END
		if p == st.pemAt {
			return
		}
		if _, ok := redactPEMLabel(s, p+len("-----END ")); ok {
			st.add(redactPEMBodyBefore(s, p), p, "pem-private-key")
		}
		return
	}
	hdr, ok := redactPEMLabel(s, p+len("-----BEGIN "))
	if !ok {
		return
	}
	end, endAt := redactPEMBody(s, hdr)
	if endAt >= 0 {
		st.pemAt = endAt
	}
	st.add(hdr, end, "pem-private-key")
}

// redactPEMLabel reads a PEM label ending in PRIVATE KEY (or PRIVATE KEY
// BLOCK, for PGP) and the dashes after it; it returns the offset after them.
func redactPEMLabel(s string, i int) (int, bool) {
	j := i
	for j < len(s) && j-i < 64 && ('A' <= s[j] && s[j] <= 'Z' || '0' <= s[j] && s[j] <= '9' || s[j] == ' ') {
		j++
	}
	label := s[i:j]
	if !strings.HasPrefix(s[j:], "-----") ||
		!strings.HasSuffix(label, "PRIVATE KEY") && !strings.HasSuffix(label, "PRIVATE KEY BLOCK") {
		return 0, false
	}
	return j + 5, true
}

func redactB64(c byte) bool { return redactAlnum(c) || c == '+' || c == '/' || c == '=' }

// redactPEMBreaks skips line breaks and blanks, real or JSON-escaped.
func redactPEMBreaks(s string, i int) int {
	for i < len(s) {
		switch c := s[i]; {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			i++
		case c == '\\':
			j := i
			for j < len(s) && s[j] == '\\' {
				j++
			}
			if j == len(s) || s[j] != 'n' && s[j] != 'r' && s[j] != 't' {
				return i
			}
			i = j + 1
		default:
			return i
		}
	}
	return i
}

// redactPEMBody finds the end of the body that starts at i: the offset of
// the END line (returned twice) or, when there is none, the end of the last
// whole base64 line (and -1).
func redactPEMBody(s string, i int) (end, endAt int) {
	end = i
	body := false
	for {
		j := redactPEMBreaks(s, i)
		if strings.HasPrefix(s[j:], "-----END ") {
			return j, j
		}
		k := j
		for k < len(s) && redactB64(s[k]) {
			k++
		}
		if !body && k > j && k+1 < len(s) && s[k] == ':' && s[k+1] == ' ' { // Proc-Type: 4,ENCRYPTED
			for k < len(s) && s[k] != '\n' && s[k] != '\\' {
				k++
			}
			end, i = k, k
			continue
		}
		if k == j {
			return end, -1
		}
		body = true
		end = k
		if k == len(s) || redactPEMBreaks(s, k) == k {
			return end, -1
		}
		i = k
	}
}

// redactPEMBodyBefore walks back from an END line over whole base64 lines
// and returns where the first of them starts.
func redactPEMBodyBefore(s string, p int) int {
	start, i := p, p
	for {
		for i > 0 { // line breaks, real or escaped
			if c := s[i-1]; c == ' ' || c == '\t' || c == '\r' || c == '\n' {
				i--
			} else if i >= 2 && s[i-2] == '\\' && (c == 'n' || c == 'r' || c == 't') {
				for i -= 2; i > 0 && s[i-1] == '\\'; i-- {
				}
			} else {
				break
			}
		}
		k := i
		for k > 0 && redactB64(s[k-1]) {
			k--
		}
		if k < i && k > 0 && s[k-1] == '\\' { // the n of an escaped line break
			k++
		}
		if k == i {
			return start
		}
		if k > 0 {
			c := s[k-1]
			escaped := k >= 2 && s[k-2] == '\\' && (c == 'n' || c == 'r' || c == 't')
			if c != ' ' && c != '\t' && c != '\r' && c != '\n' && !escaped {
				return start
			}
		}
		start, i = k, k
	}
}

// Kinds of key a key=value pair can have.
const (
	redactKeyNone = iota
	redactKeySecret
	redactKeyAuthorization
	redactKeyCookie
)

func redactKeyChar(c byte) bool { return redactAlnum(c) || c == '_' || c == '-' || c == '.' }

// redactKeyKind classifies a key: prev is an optional word before it ("api"
// in "API key"). The key is compared lower-cased with '_', '-', '.' and
// blanks removed.
func redactKeyKind(prev, key string) int {
	var buf [160]byte
	n := 0
	for _, part := range [2]string{prev, key} {
		for i := 0; i < len(part) && n < len(buf); i++ {
			c := part[i]
			if c == '_' || c == '-' || c == '.' || c == ' ' {
				continue
			}
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			buf[n] = c
			n++
		}
	}
	k := string(buf[:n]) // does not escape: the compiler keeps it on the stack
	// suffix reports whether key ends in _word or -word, as HTTP_COOKIE does.
	suffix := func(word string) bool {
		i := len(key) - len(word) - 1
		return i >= 0 && (key[i] == '_' || key[i] == '-') && strings.EqualFold(key[i+1:], word)
	}
	switch {
	case k == "authorization" || k == "proxyauthorization" || suffix("authorization"):
		return redactKeyAuthorization
	case k == "cookie" || k == "setcookie" || suffix("cookie"): // not fCookie
		return redactKeyCookie
	}
	secret := k == "auth" || k == "sig" || k == "pwd" || k == "pass" ||
		strings.HasSuffix(k, "auth") && k != "oauth" ||
		suffix("pwd") || suffix("pass")
	for _, w := range [...]string{"password", "passwd", "passphrase", "secret", "token", "apikey",
		"accesskey", "privatekey", "accountkey", "signingkey", "sessionkey", "encryptionkey",
		"masterkey", "authkey", "credential", "signature"} {
		if secret {
			break
		}
		secret = strings.Contains(k, w)
	}
	if !secret {
		return redactKeyNone
	}
	// Counters, limits, names and pointers to secrets are not secrets:
	// max_tokens, token_type, secret_name, password_file, TokenExpiredError.
	for _, w := range [...]string{"tokens", "count", "type", "limit", "length", "len", "size", "ttl",
		"expiry", "expires", "expiresin", "expiresat", "expiration", "name", "names", "ref", "path",
		"file", "dir", "url", "uri", "endpoint", "prefix", "header", "field", "env", "version",
		"enabled", "required", "policy", "mode", "method", "format", "provider", "store", "usage",
		"index", "hint", "kind", "source", "budget", "details", "detail", "exception", "error",
		"failed", "invalid", "expired", "missing", "id"} {
		if strings.HasSuffix(k, w) && !(w == "id" && (strings.HasSuffix(k, "secretid") || strings.HasSuffix(k, "tokenid"))) {
			return redactKeyNone
		}
	}
	for _, w := range [...]string{"tokeniz", "pagetoken", "nexttoken", "continuationtoken",
		"stoptoken", "eostoken", "bostoken", "padtoken", "unktoken"} {
		if strings.Contains(k, w) {
			return redactKeyNone
		}
	}
	return redactKeySecret
}

// redactKeyValue removes the value of a key=value, key: value, key := value,
// "key": "value" (also with JSON-escaped quotes) or --key value pair whose
// key names a secret, and keeps the key. For Authorization and Cookie
// headers (and keys ending in those words) the whole header value goes,
// scheme and attributes included.
func redactKeyValue(st *redactScan, p int) {
	s := st.s
	if p < st.kvEnd {
		return
	}
	ks, ke := p, p
	for ks > 0 && p-ks < 64 && redactKeyChar(s[ks-1]) {
		ks--
	}
	for ke < len(s) && ke-p < 64 && redactKeyChar(s[ke]) {
		ke++
	}
	st.kvEnd = ke
	if ks > 0 && (s[ks-1] == '/' || s[ks-1] == ':') { // a URL path or ARN segment
		return
	}
	i := ke
	for j := i; j < len(s); j++ { // the closing quote of a quoted key: " ' \"
		if s[j] == '"' || s[j] == '\'' {
			i = j + 1
		}
		if s[j] != '\\' {
			break
		}
	}
	i = redactBlank(s, i)
	switch {
	case strings.HasPrefix(s[i:], ":=") || strings.HasPrefix(s[i:], "=>"):
		i += 2
	case i < len(s) && (s[i] == '=' || s[i] == ':'):
		if i+1 < len(s) && (s[i+1] == ':' || s[i+1] == '=') { // key::path, key == x
			return
		}
		i++
	case strings.HasPrefix(s[ks:], "--") && i > ke && i < len(s): // --password value
	default:
		return
	}
	kind := redactKeyKind("", s[ks:ke])
	if kind == redactKeyNone && ks >= 2 && s[ks-1] == ' ' { // "API key", "access token"
		ps := ks - 1
		for ps > 0 && ks-1-ps < 32 && redactKeyChar(s[ps-1]) {
			ps--
		}
		kind = redactKeyKind(s[ps:ks-1], s[ks:ke])
	}
	if kind == redactKeyNone {
		return
	}
	i = redactBlank(s, i)
	vs, ve := redactValue(s, i, ks, kind)
	v := s[vs:ve]
	if digits := strings.Trim(v, "0123456789") == ""; digits && (len(v) < 6 || s[i-1] == ':') {
		return // a count (pass: 12, secrets: 3) or a line or port (File.java:118, host:443)
	}
	if redactPlaceholder(v) || kind == redactKeySecret && strings.EqualFold(s[ks:ke], "pwd") && strings.HasPrefix(v, "/") {
		return
	}
	name := "secret-key-value"
	switch kind {
	case redactKeyAuthorization:
		name = "authorization-header"
	case redactKeyCookie:
		name = "cookie-header"
	}
	st.add(vs, ve, name)
}

func redactBlank(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// redactValue finds the value that starts at i. A quoted value ends at its
// closing quote (or the end of the line). An unquoted header value runs to
// the end of the line, or to the quote that opened before the key (as in
// curl -H "Authorization: ..."); other unquoted values end at a blank or
// punctuation that separates fields.
func redactValue(s string, i, ks, kind int) (vs, ve int) {
	j := i
	for j < len(s) && s[j] == '\\' {
		j++
	}
	if j < len(s) && (s[j] == '"' || j == i && s[j] == '\'') {
		q := s[i : j+1]
		vs = j + 1
		for k := vs; k < len(s); k++ {
			switch c := s[k]; {
			case c == '\n' || c == '\\' && k+1 < len(s) && s[k+1] == '\n': // quotes never span lines
				return vs, k
			case q == `"` && c == '\\':
				k++
			case len(q) > 1 && strings.HasPrefix(s[k:], q), len(q) == 1 && c == q[0]:
				return vs, k
			}
		}
		return vs, len(s)
	}
	k := i
	if kind == redactKeySecret {
		for k < len(s) && s[k] > ' ' && strings.IndexByte("\"'\\,;&()[]{}<>|`", s[k]) < 0 {
			k++
		}
		if k < len(s) && s[k] == '(' { // a call, as in sig := b.uint32()
			return i, i
		}
		return i, k
	}
	qc := "" // the quote the key sits in, if any
	if ks > 0 && (s[ks-1] == '"' || s[ks-1] == '\'') {
		j := ks - 1
		for j > 0 && s[j-1] == '\\' {
			j--
		}
		qc = s[j:ks]
	}
	digest := len(s)-i >= 7 && strings.EqualFold(s[i:i+7], "digest ")
	for ; k < len(s); k++ {
		c := s[k]
		if c == '\n' || c == '\r' || c == '\\' && k+1 < len(s) && (s[k+1] == 'n' || s[k+1] == 'r') {
			break
		}
		if qc != "" {
			if strings.HasPrefix(s[k:], qc) && (len(qc) > 1 || s[k-1] != '\\') {
				break
			}
			continue
		}
		if !digest && (c == '"' || c == '\'') {
			break
		}
	}
	for k > i && (s[k-1] == ' ' || s[k-1] == '\t') {
		k--
	}
	return i, k
}

// redactPlaceholder reports whether a value is empty, already redacted, or a
// stand-in rather than a secret: null, none, true, ${VAR}, %s, <your-token>,
// ****, a nested object or list.
func redactPlaceholder(v string) bool {
	if v == "" || strings.HasPrefix(v, RedactedMarker) || strings.Trim(v, "*") == "" {
		return true
	}
	switch strings.ToLower(v) {
	case "null", "nil", "none", "true", "false", "undefined", "redacted":
		return true
	}
	if len(v) > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X') && strings.Trim(v[2:], "0123456789abcdefABCDEF") == "" {
		return true // a hex constant
	}
	switch v[0] {
	case '$', '%', '{', '[', '(':
		return true
	case '<':
		return v[len(v)-1] == '>'
	}
	return false
}
