package extension

import (
	"bytes"
	"cmp"
	"slices"
	"strings"
	"sync"
)

// defaultTailSize is how many of the most recent bytes of a sidecar's
// stderr a tail keeps unless told otherwise: 16 KiB (D10).
const defaultTailSize = 16384

// tail is an io.Writer that keeps the most recent bytes written to it, for
// a sidecar's stderr (D10, D25). Memory stays at size bytes whatever is
// written. Writes never fail, so a chatty sidecar cannot block on its
// stderr pipe because of the host. What it kept is surfaced only
// redacted and escaped (D25, D27). It is safe for concurrent use; size and redactor must not
// change after the first Write.
type tail struct {
	size     int       // bytes kept; zero means defaultTailSize
	redactor *Redactor // nil means a default Redactor

	// onLine, when set, receives each line as it is completed, redacted
	// and escaped (Host.OnStderr); only the drain goroutine writes, so
	// lines arrive in order.
	onLine func(line string)
	line   []byte // the line being written, at most stderrLineBytes
	cut    bool   // the line being written is longer and was cut
	inPEM  bool   // inside a PEM private key block: its lines are redacted whole

	mu      sync.Mutex // protects the following
	buf     []byte     // grows to size, then used as a ring
	next    int        // once len(buf) == size: offset of the oldest byte, where the next byte goes
	written int64      // bytes written in total
}

// stderrLineBytes is where a stderr line passed to Host.OnStderr is cut.
const stderrLineBytes = 4096

// Write keeps the last bytes of p and passes each completed line to
// onLine. It always returns len(p), nil.
func (t *tail) Write(p []byte) (int, error) {
	if t.onLine != nil {
		t.lines(p)
	}
	n := len(p)
	size := cmp.Or(max(t.size, 0), defaultTailSize) // zero or less means the default
	t.mu.Lock()
	defer t.mu.Unlock()
	t.written += int64(n)
	if t.buf == nil {
		t.buf = make([]byte, 0, size)
	}
	if len(p) > size { // only the last size bytes of p stay
		p = p[len(p)-size:]
	}
	if len(t.buf) < size { // still filling
		k := min(size-len(t.buf), len(p))
		t.buf = append(t.buf, p[:k]...)
		p = p[k:]
	}
	for len(p) > 0 { // ring: overwrite the oldest bytes
		k := copy(t.buf[t.next:], p)
		p = p[k:]
		t.next = (t.next + k) % size
	}
	return n, nil
}

// snapshot returns a copy of the kept bytes, oldest first, unredacted, and
// whether older bytes were dropped.
func (t *tail) snapshot() ([]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Concat(t.buf[t.next:], t.buf[:t.next]), t.written > int64(len(t.buf))
}

// redacted returns the kept text, trimmed of surrounding white space and
// credential-redacted, such that a secret cut by the tail's start leaves
// nothing behind (D25). Once older bytes have been dropped, the kept text
// starts mid-line, so everything up to and including the first line break
// is dropped. When no line break was kept, the cut may have split a key from
// its value ("...word hunter2" of "--password hunter2", "...rer abc..." of
// "Bearer abc...") or a value in two, so the first two blank-separated runs
// are dropped: the fragment and what may be its value. The whole text is
// dropped instead when the value may run to the end of the line: when the
// fragment ends in ':' or '=', or the second run is only separators (=, :,
// :=, =>, quotes, as in `ss_key = ...` or `y" : "..."`) or an HTTP
// authentication scheme (Basic, Bearer, Digest, ...). The rest is redacted
// as a whole, so a PEM private key whose BEGIN line was cut off still loses
// its base64 lines before END.
func (t *tail) redacted() string {
	raw, truncated := t.snapshot()
	text := string(raw)
	if truncated {
		text = tailDropFragment(text)
	}
	// D25, then D27 before the trim: TrimSpace would drop a trailing
	// vertical tab or form feed unseen.
	return strings.TrimSpace(TerminalSafe(cmp.Or(t.redactor, defaultRedactor()).Redact(text)))
}

// tailDropFragment drops what is left of the line that the tail's start cut
// (see tail.redacted).
func tailDropFragment(text string) string {
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		return text[i+1:]
	}
	i := tailRun(text, 0, false) // the fragment, possibly empty
	j := tailRun(text, i, true)
	k := tailRun(text, j, false) // what may be the fragment's value, none when k == j
	if i > 0 && (text[i-1] == ':' || text[i-1] == '=') || strings.Trim(text[j:k], `=:"'\>`) == "" ||
		slices.ContainsFunc(tailAuthSchemes, func(scheme string) bool { return strings.EqualFold(text[j:k], scheme) }) {
		return "" // the value may run to the end of the line
	}
	return text[k:]
}

// tailRun returns the end of the run of blank (or, if not blank, non-blank)
// bytes at i.
func tailRun(text string, i int, blank bool) int {
	return redactRun(text, i, len(text), func(c byte) bool { return (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') == blank })
}

// tailAuthSchemes are the HTTP authentication schemes, whose credentials
// follow them to the end of the line.
var tailAuthSchemes = []string{"basic", "bearer", "digest", "token", "bot", "apikey", "negotiate",
	"ntlm", "oauth", "hoba", "mutual", "vapid", "hawk", "aws4-hmac-sha256", "scram-sha-1", "scram-sha-256"}

// lines splits p into lines for onLine, cutting each at stderrLineBytes.
func (t *tail) lines(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		room := stderrLineBytes - len(t.line)
		t.cut = t.cut || len(chunk) > room
		t.line = append(t.line, chunk[:min(len(chunk), room)]...)
		if i < 0 {
			return
		}
		t.flush()
		p = p[i+1:]
	}
}

// flush passes the line being written, if any, to onLine: redacted (D25),
// the lines of a PEM private key replaced whole since the redactor sees
// one line at a time, then escaped (D27).
func (t *tail) flush() {
	if t.onLine == nil || (len(t.line) == 0 && !t.cut) {
		return
	}
	text := strings.TrimSuffix(string(t.line), "\r")
	begin := strings.Contains(text, "-----BEGIN ") && strings.Contains(text, "PRIVATE KEY")
	switch {
	case begin || t.inPEM:
		t.inPEM = !strings.Contains(text, "-----END ")
		text = RedactedMarker
	default:
		text = cmp.Or(t.redactor, defaultRedactor()).Redact(text)
	}
	if t.cut {
		text += " …(cut)"
	}
	t.line, t.cut = t.line[:0], false
	t.onLine(TerminalSafe(text))
}
