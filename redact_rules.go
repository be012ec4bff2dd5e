package extension

// The rules of the Redactor (D25): one scanner per shape of credential.

import (
	"cmp"
	"regexp"
	"slices"
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
	digit    bool     // after its prefix the token must contain a letter and a digit
	yieldTo  []string // prefixes that belong to a more specific rule
}

// redactRules is the rule set of D25. Order matters only for the rule name a
// Finding reports when two rules remove the same text.
func redactRules() []redactRule {
	tokens := []redactTokenRule{
		{name: "anthropic-key", prefixes: []string{"sk-ant-"}, re: `^sk-ant-[a-z]+[0-9]*-[A-Za-z0-9_-]{20,}`},
		{name: "openrouter-key", prefixes: []string{"sk-or-v1-"}, re: `^sk-or-v1-[A-Za-z0-9]{32,}`},
		{name: "openai-key", prefixes: []string{"sk-"}, re: `^sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}`, digit: true, yieldTo: []string{"sk-ant-", "sk-or-"}},
		{name: "github-token", prefixes: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}, re: `^(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})`},
		{name: "gitlab-token", prefixes: []string{"glpat-", "gldt-", "glrt-", "glptt-"}, re: `^gl(?:pat|dt|rt|ptt)-[A-Za-z0-9_-]{20,}`},
		{name: "slack-token", prefixes: []string{"xoxb-", "xoxa-", "xoxp-", "xoxr-", "xoxs-", "xoxe-", "xapp-"}, re: `^(?:xox[abprse]|xapp-[0-9])-[A-Za-z0-9-]{20,}`},
		{name: "slack-webhook", prefixes: []string{"hooks.slack.com/"}, re: `^hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9_/-]{16,})`},
		{name: "aws-access-key-id", prefixes: []string{"AKIA", "ASIA", "AROA", "AIDA", "AGPA", "ANPA", "AIPA", "ANVA"}, re: `^A[A-Z]{3}[A-Z0-9]{16}`, alnumEnd: true},
		{name: "google-api-key", prefixes: []string{"AIza"}, re: `^AIza[0-9A-Za-z_-]{35}`, alnumEnd: true},
		{name: "stripe-key", prefixes: []string{"sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"}, re: `^(?:[sr]k_(?:live|test)_[A-Za-z0-9]{20,}|whsec_[A-Za-z0-9+/]{24,})`},
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
		{name: "jwt", prefixes: []string{"eyJ"}, re: `^eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*`, window: 1 << 16},
		{name: "azure-storage-key", prefixes: []string{"accountkey="}, fold: true, re: `^(?i:accountkey)=([A-Za-z0-9+/]{20,}={0,2})`},
		{name: "azure-storage-key", prefixes: []string{"sharedaccesssignature="}, fold: true, re: `^(?i:sharedaccesssignature)=([^;\s"'\\]+)`},
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
		redactRule{name: "db-password-flag", anchors: []string{"mysql", "mariadb"}, match: redactDBPasswordFlag},
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
	window := cmp.Or(t.window, 512)
	return redactRule{name: t.name, anchors: t.prefixes, fold: t.fold, match: func(st *redactScan, s string, p int) {
		if !redactBoundary(s, p) || slices.ContainsFunc(t.yieldTo, func(d string) bool { return strings.HasPrefix(s[p:], d) }) {
			return
		}
		w := s[p:min(len(s), p+window)]
		st.work += len(w) // at most: the match is anchored at p
		m := re.FindStringSubmatchIndex(w)
		if m == nil || t.alnumEnd && m[1] < len(w) && isAlnum(w[m[1]]) {
			return
		}
		start, end := m[0], m[1]
		if t.digit {
			body := w[start+len(t.prefixes[0]) : end]
			for _, kind := range [...]string{"proj-", "svcacct-", "admin-"} {
				body = strings.TrimPrefix(body, kind)
			}
			if !redactLetterDigit(body) {
				return
			}
		}
		if len(m) > 2 && m[2] >= 0 {
			start, end = m[2], m[3]
		}
		if strings.HasPrefix(w[start:], RedactedMarker) {
			return
		}
		if end == len(w) { // cut by the window: take the rest of the token too
			end = redactRun(s, p+end, len(s), redactKeyChar) - p
		}
		st.add(p+start, p+end, t.name)
	}}
}

// isAlnum reports whether c is an ASCII letter or digit.
func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// redactBoundary reports whether a token may start at p: nothing before it,
// or something other than a letter, digit, '_' or '-', or a JSON escape
// (\n, \r, \t, \uXXXX) right before it.
func redactBoundary(s string, p int) bool {
	return p == 0 || !isAlnum(s[p-1]) && s[p-1] != '_' && s[p-1] != '-' ||
		redactEscape(s, p) || p >= 6 && s[p-6] == '\\' && s[p-5] == 'u' && strings.Trim(s[p-4:p], redactHexDigits) == ""
}

const redactHexDigits = "0123456789abcdefABCDEF"

// redactContains reports whether s contains one of words.
func redactContains(s string, words ...string) bool {
	return slices.ContainsFunc(words, func(w string) bool { return strings.Contains(s, w) })
}

// redactLetterDigit reports whether tok has a letter and a digit, as random
// keys (and the example sk-real-secret-value-123456) do and
// hyphenated words (sk-learn-compatible-estimator-wrapper) do not.
func redactLetterDigit(tok string) bool {
	return strings.ContainsAny(tok, redactLetters) && strings.ContainsAny(tok, "0123456789")
}

const redactLetters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

func redactKeyChar(c byte) bool { return isAlnum(c) || c == '_' || c == '-' || c == '.' }

// redactKeyKind classifies a key: prev is an optional word before it ("api"
// in "API key"). It returns the rule that removes the key's value
// (secret-key-value, authorization-header or cookie-header), or "" when the
// key names no secret, and whether the key is a password's, whose unquoted
// value may hold blanks. The key is compared lower-cased with '_', '-', '.'
// and blanks removed.
func redactKeyKind(prev, key string) (rule string, password bool) {
	var buf [160]byte // room for both: prev is at most 32 bytes, key 128
	b := buf[:0]
	for _, part := range [2]string{prev, key} {
		for i := 0; i < len(part); i++ {
			if c := part[i]; c != '_' && c != '-' && c != '.' && c != ' ' {
				b = append(b, redactLower[c])
			}
		}
	}
	k := string(b) // does not escape: the compiler keeps it on the stack
	// suffix reports whether key ends in _word or -word, as HTTP_COOKIE does.
	suffix := func(word string) bool {
		i := len(key) - len(word) - 1
		return i >= 0 && (key[i] == '_' || key[i] == '-') && strings.EqualFold(key[i+1:], word)
	}
	switch {
	case k == "authorization" || k == "proxyauthorization" || suffix("authorization"):
		return "authorization-header", false
	case k == "cookie" || k == "setcookie" || suffix("cookie"): // not fCookie
		return "cookie-header", false
	}
	password = k == "pwd" || k == "pass" || suffix("pwd") || suffix("pass") ||
		redactContains(k, "password", "passwd", "passphrase")
	secret := password || k == "sig" || strings.HasSuffix(k, "auth") && k != "oauth" ||
		redactContains(k, "secret", "token", "apikey", "accesskey", "privatekey", "accountkey",
			"signingkey", "sessionkey", "encryptionkey", "masterkey", "authkey", "credential", "signature")
	if !secret {
		return "", false
	}
	// Counters, limits, names and pointers to secrets are not secrets:
	// max_tokens, token_type, secret_name, password_file, TokenExpiredError.
	for _, w := range [...]string{"tokens", "count", "type", "limit", "length", "len", "size", "ttl",
		"expiry", "expires", "expiresin", "expiresat", "expiration", "name", "names", "ref", "path",
		"file", "dir", "url", "uri", "endpoint", "prefix", "header", "field", "env", "version",
		"enabled", "required", "policy", "mode", "method", "format", "provider", "store", "usage",
		"index", "hint", "kind", "source", "budget", "details", "detail", "exception", "error",
		"failed", "invalid", "expired", "missing", "id"} {
		// The last byte first: most keys end in none of these words.
		if len(k) >= len(w) && k[len(k)-1] == w[len(w)-1] && k[len(k)-len(w):] == w &&
			!(w == "id" && (strings.HasSuffix(k, "secretid") || strings.HasSuffix(k, "tokenid"))) {
			return "", false
		}
	}
	if redactContains(k, "tokeniz", "pagetoken", "nexttoken", "continuationtoken",
		"stoptoken", "eostoken", "bostoken", "padtoken", "unktoken") {
		return "", false
	}
	return "secret-key-value", password
}

// redactKeyValue removes the value of a key=value, key: value, key := value,
// "key": "value" (also with JSON-escaped quotes) or --key value pair whose
// key names a secret, and keeps the key. For Authorization headers (and
// keys ending in that word) the whole header value goes, scheme included;
// for Cookie headers the cookie values (redactCookies). The unquoted value
// of a password after ':' or a spaced '=' (YAML, INI) runs over blanks to
// the next key.
//
// It stays linear in the input: every byte of a value is scanned once.
// A value that is redacted ends the rule's hits before its end (done); a
// value that is rejected (a placeholder, a count) is marked examined, so the
// keys inside it are not examined again.
func redactKeyValue(st *redactScan, s string, p int) {
	ks, ke := p, redactRun(s, p, 64, redactKeyChar)
	for ks > 0 && p-ks < 64 && redactKeyChar(s[ks-1]) && !redactEscape(s, ks) { // \nkey
		ks--
	}
	st.examined(ke)
	st.work += ke - ks
	if ks > 0 && (s[ks-1] == '/' || s[ks-1] == ':') { // a URL path or ARN segment
		return
	}
	i := ke
	if j := redactPastBackslashes(s, ke); j < len(s) && (s[j] == '"' || s[j] == '\'') { // the closing quote of a quoted key: " ' \"
		i = j + 1
	}
	i = redactBlank(s, i)
	st.work += i - ke
	st.examined(i)
	examined := i
	words := false // the value may hold blanks (password: correct horse)
	switch {
	case strings.HasPrefix(s[i:], ":=") || strings.HasPrefix(s[i:], "=>"):
		i += 2
	case i+1 < len(s) && (s[i] == '=' || s[i] == ':') && (s[i+1] == ':' || s[i+1] == '='): // key::path, key == x
		return
	case i < len(s) && (s[i] == '=' || s[i] == ':'):
		words = s[i] == ':' && redactBlank(s, i+1) > i+1 || s[i] == '=' && (s[i-1] == ' ' || s[i-1] == '\t')
		i++
	case strings.HasPrefix(s[ks:], "--") && i > ke && i < len(s): // --password value
	default:
		return
	}
	rule, password := redactKeyKind("", s[ks:ke])
	if rule == "" && ks >= 2 && s[ks-1] == ' ' { // "API key", "access token"
		ps := redactRunBack(s, ks-1, 32, redactKeyChar)
		st.work += ks - ps
		rule, password = redactKeyKind(s[ps:ks-1], s[ks:ke])
	}
	if rule == "" {
		return
	}
	i = redactBlank(s, i)
	header := rule != "secret-key-value" // authorization-header, cookie-header
	vs, ve, end := redactValue(s, i, ks, header, words && password)
	st.work += end - examined
	// The value is not a secret when it is a placeholder, a count (pass: 12,
	// secrets: 3), a line or port (File.java:118, host:443), a call (sig :=
	// b.uint32()), except in a header a word of prose, or the directory of
	// a pwd.
	v := s[vs:ve]
	call := vs == i && ve < len(s) && s[ve] == '(' && strings.Trim(v, redactLetters+"0123456789_.") == ""
	if redactPlaceholder(v) || strings.Trim(v, "0123456789") == "" && (len(v) < 6 || s[i-1] == ':') ||
		!header && (call || redactProse(v)) ||
		strings.EqualFold(s[ks:ke], "pwd") && (strings.HasPrefix(v, "/") || redactDrivePath(v)) {
		st.examined(ve)
		return
	}
	if rule == "cookie-header" {
		redactCookies(st, s, vs, ve)
		return
	}
	st.add(vs, ve, rule)
}

// redactCookies removes the value of each name=value pair of the Cookie or
// Set-Cookie header value s[vs:ve], and a pair without a name, unless it
// is a placeholder; cookie names and the attributes of Set-Cookie (Path=/,
// HttpOnly), known by their names, stay (§9.2).
func redactCookies(st *redactScan, s string, vs, ve int) {
	st.examined(ve)
	for pair := range strings.SplitSeq(s[vs:ve], ";") {
		name, _, _ := strings.Cut(pair, "=")
		v := strings.TrimLeft(pair[strings.IndexByte(pair, '=')+1:], " \t") // the value, or a pair without a name
		if at := vs + len(pair) - len(v); !redactWord(strings.TrimSpace(name), "path", "domain", "expires", "max-age",
			"samesite", "secure", "httponly", "partitioned", "priority") && !redactPlaceholder(v) {
			st.add(at, at+len(strings.TrimRight(v, " \t")), "cookie-header")
		}
		vs += len(pair) + 1
	}
}

// redactBlank returns the end of the run of blanks at i.
func redactBlank(s string, i int) int {
	return redactRun(s, i, len(s), func(c byte) bool { return c == ' ' || c == '\t' })
}

// redactValueStop is what ends an unquoted value of a secret key.
func redactValueStop(c byte) bool {
	return c <= ' ' || strings.IndexByte("\"'\\,;&()[]{}<>|`", c) >= 0
}

// redactValue finds the value that starts at i, and the end of what it
// examined. A quoted value ends at its closing quote (or the end of the
// line). An unquoted header value runs to the end of the line, or to the
// quote that opened before the key (as in curl -H "Authorization: ..."), or
// to the ']' closing a '[' in front of it (as Go prints an http.Header);
// one starting with '{' or '(' is a nested structure and not examined.
// Other unquoted values end at a blank or punctuation that separates fields,
// except that with words set they run on over blanks up to a word that is a
// key (has ':' or '='), a comment or punctuation.
func redactValue(s string, i, ks int, header, words bool) (vs, ve, end int) {
	if header && i < len(s) && (s[i] == '{' || s[i] == '(') { // a nested structure
		return i, i + 1, i + 1
	}
	bracket := header && i < len(s) && s[i] == '[' // as Go prints an http.Header
	if bracket {
		i++
	}
	if j := redactPastBackslashes(s, i); j < len(s) && (s[j] == '"' || j == i && s[j] == '\'') {
		q := s[i : j+1]
		vs = j + 1
		for k := vs; k < len(s); k++ {
			switch c := s[k]; {
			case c == '\n' || c == '\\' && k+1 < len(s) && s[k+1] == '\n', // quotes never span lines
				strings.HasPrefix(s[k:], q):
				return vs, k, k + 1
			case q == `"` && c == '\\':
				k++
			}
		}
		return vs, len(s), len(s)
	}
	k := i
	if !header {
		w := s[i:min(len(s), i+128)]
		n := redactPlaceholderLen(w) // ${NAME} holds '{'
		if n == 0 && strings.HasPrefix(w, "${") {
			if j := strings.IndexAny(w, "}\n\r\\"); j >= 0 && w[j] == '}' { // ${NAME:-default}, a value
				n = j + 1
			}
		}
		path := redactDrivePath(w) // C:\dir holds '\', but not a JSON-escaped line break
		for k += n; k < len(s); k++ {
			inPath := path && s[k] == '\\' && !(k+1 < len(s) && (s[k+1] == 'n' || s[k+1] == 'r') && s[k-1] != '\\')
			if redactValueStop(s[k]) && !inPath {
				break
			}
		}
		end = k
		for words && k < len(s) && (s[k] == ' ' || s[k] == '\t') {
			w := redactBlank(s, k)
			end = redactRun(s, w, len(s), func(c byte) bool { return !redactValueStop(c) })
			if end == w || s[w] == '#' || strings.ContainsAny(s[w:end], ":=") {
				break
			}
			k = end
		}
		return i, k, end
	}
	qc := "" // the quote the key sits in, if any
	if ks > 0 && (s[ks-1] == '"' || s[ks-1] == '\'') {
		qc = s[len(strings.TrimRight(s[:ks-1], `\`)):ks]
	}
	digest := len(s)-i >= 7 && strings.EqualFold(s[i:i+7], "digest ")
	for ; k < len(s); k++ {
		c := s[k]
		if c == '\n' || c == '\r' || c == '\\' && k+1 < len(s) && (s[k+1] == 'n' || s[k+1] == 'r') || bracket && c == ']' ||
			qc != "" && strings.HasPrefix(s[k:], qc) && (len(qc) > 1 || s[k-1] != '\\') || // the key's closing quote
			qc == "" && !digest && (c == '"' || c == '\'') { // Digest values quote their parameters
			break
		}
	}
	return i, i + len(strings.TrimRight(s[i:k], " \t")), k
}

// redactPlaceholder reports whether a value is empty, already redacted, or a
// stand-in rather than a secret: null, none, true, a short hex constant,
// ${VAR} and the other forms of redactPlaceholderLen, <your-token>, ****, a
// nested object or list.
func redactPlaceholder(v string) bool {
	// A hex constant of up to 64 bits, not a 256-bit private key.
	hex := len(v) > 2 && len(v) <= 18 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X') && strings.Trim(v[2:], redactHexDigits) == ""
	return v == "" || strings.HasPrefix(v, RedactedMarker) || strings.Trim(v, "*") == "" || hex ||
		redactWord(v, "null", "nil", "none", "true", "false", "undefined", "redacted") ||
		redactPlaceholderLen(v) == len(v) ||
		strings.IndexByte("{[(", v[0]) >= 0 || // a nested structure
		v[0] == '<' && v[len(v)-1] == '>' // <your-token>
}

// redactPlaceholderLen returns the length of the placeholder v starts with,
// or 0: ${NAME}, ${NAME:?message}, ${{ expression }}, $(command), $NAME
// (upper case),
// %NAME%, %(name)s and printf verbs such as %s, %v and %-10d.
func redactPlaceholderLen(v string) int {
	if len(v) < 2 {
		return 0
	}
	line := v // what a placeholder must close in
	if j := strings.IndexAny(v, "\n\r\\"); j >= 0 {
		line = v[:j]
	}
	ident := func(t string, upper bool) int {
		n := 0
		for n < len(t) && (t[n] == '_' || 'A' <= t[n] && t[n] <= 'Z' || !upper && 'a' <= t[n] && t[n] <= 'z' || n > 0 && '0' <= t[n] && t[n] <= '9') {
			n++
		}
		return n
	}
	switch {
	case strings.HasPrefix(v, "${{"):
		if j := strings.Index(line, "}}"); j > 3 {
			return j + 2
		}
	case strings.HasPrefix(v, "${"): // ${NAME}, ${NAME:?message}; not ${NAME:-default}, whose default may be a secret
		n := ident(v[2:], false)
		rest := v[2+n:]
		if j := strings.Index(line, "}"); n > 0 && j > 0 && (strings.HasPrefix(rest, "}") || strings.HasPrefix(rest, ":?") || strings.HasPrefix(rest, "?")) {
			return j + 1
		}
	case strings.HasPrefix(v, "$("):
		if j := strings.Index(line, ")"); j > 2 {
			return j + 1
		}
	case v[0] == '$':
		if n := ident(v[1:], true); n > 0 {
			return n + 1
		}
	case strings.HasPrefix(v, "%("):
		if j := strings.Index(line, ")"); j > 2 && j+1 < len(v) && isAlnum(v[j+1]) {
			return j + 2
		}
	case v[0] == '%':
		if n := ident(v[1:], false); n > 0 && 1+n < len(v) && v[1+n] == '%' {
			return n + 2
		}
		j := len(v) - len(strings.TrimLeft(v[1:], "-+# 0123456789.")) // flags, width, precision
		if j < len(v) && j < 8 && strings.IndexByte(redactLetters, v[j]) >= 0 {
			return j + 1
		}
	}
	return 0
}

// redactProse reports whether the first word of a value is prose or an
// algorithm name rather than a secret, as in "the secret: nothing", "found 3
// secrets: a, b", "passwd: all authentication tokens updated" and
// "signing_key: ed25519". A passphrase that starts with one of these words
// is missed; none of them is a credential on its own.
func redactProse(v string) bool {
	v = v[:redactRun(v, 0, len(v), func(c byte) bool { return c != ' ' && c != '\t' })] // the first word
	return redactWord(v, "a", "an", "all", "any", "nothing", "not", "no", "is", "are", "was", "were", "has", "have",
		"will", "must", "cannot", "set", "unset", "empty", "missing", "required", "optional",
		"invalid", "incorrect", "wrong", "expired", "revoked", "rotated", "changed", "updated",
		"unchanged", "ok", "yes", "hidden", "masked", "omitted", "provided",
		"ed25519", "ed448", "rsa", "ecdsa", "dsa", "eddsa", "hmac", "hs256", "hs384", "hs512",
		"rs256", "rs384", "rs512", "es256", "es384", "es512", "ps256", "aes", "aes128", "aes256",
		"sha1", "sha256", "sha512", "x25519")
}

// redactWord reports whether v is one of words, ASCII letters folded. Equal
// lengths: only ASCII letters fold here, never the long s or the Kelvin
// sign, which EqualFold would take for s and k.
func redactWord(v string, words ...string) bool {
	return slices.ContainsFunc(words, func(w string) bool { return len(v) == len(w) && strings.EqualFold(v, w) })
}

// redactDrivePath reports whether v is a Windows path: C:\... or C:/...,
// or \\server\share.
func redactDrivePath(v string) bool {
	return len(v) >= 3 && ('A' <= v[0] && v[0] <= 'Z' || 'a' <= v[0] && v[0] <= 'z') && v[1] == ':' && (v[2] == '\\' || v[2] == '/') ||
		strings.HasPrefix(v, `\\`)
}
