package extension

import (
	"strings"
	"sync"
)

// DefaultTailSize is how many of the most recent bytes of a sidecar's stderr
// a [Tail] keeps unless told otherwise: 16 KiB (D10).
const DefaultTailSize = 16384

// Tail is an [io.Writer] that keeps the most recent bytes written to it, for
// a sidecar's stderr (D10, D25). Memory stays at Size bytes whatever is
// written. Writes never fail, so a chatty sidecar cannot block on its stderr
// pipe because of the host.
//
// What it kept is surfaced only through [Tail.Redacted]; [Tail.Bytes] is the
// raw text, for tests and callers that redact it themselves.
//
// The zero value keeps [DefaultTailSize] bytes and redacts with [Redact]. A
// Tail is safe for concurrent use; Size and Redactor must not change after
// the first Write.
type Tail struct {
	// Size is how many of the most recent bytes are kept. Zero means
	// DefaultTailSize.
	Size int

	// Redactor redacts what Redacted returns. Nil means the Redactor behind
	// the package-level Redact.
	Redactor *Redactor

	mu      sync.Mutex // protects the following
	buf     []byte     // grows to size, then used as a ring
	next    int        // once len(buf) == size: offset of the oldest byte, where the next byte goes
	written int64      // bytes written in total
}

func (t *Tail) size() int {
	if t.Size > 0 {
		return t.Size
	}
	return DefaultTailSize
}

// Write keeps the last bytes of p. It always returns len(p), nil.
func (t *Tail) Write(p []byte) (int, error) {
	n := len(p)
	size := t.size()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.written += int64(n)
	if t.buf == nil {
		t.buf = make([]byte, 0, size)
	}
	if len(p) >= size { // p alone fills the tail
		t.buf = append(t.buf[:0], p[len(p)-size:]...)
		t.next = 0
		return n, nil
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

// snapshot returns a copy of the kept bytes, oldest first, and whether
// older bytes were dropped.
func (t *Tail) snapshot() ([]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]byte, 0, len(t.buf))
	out = append(out, t.buf[t.next:]...)
	out = append(out, t.buf[:t.next]...)
	return out, t.written > int64(len(t.buf))
}

// Bytes returns a copy of the kept bytes, oldest first, unredacted: they may
// hold credentials.
func (t *Tail) Bytes() []byte {
	b, _ := t.snapshot()
	return b
}

// Truncated reports whether more was written than the tail keeps.
func (t *Tail) Truncated() bool {
	_, truncated := t.snapshot()
	return truncated
}

// Written returns the number of bytes written in total.
func (t *Tail) Written() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.written
}

// Redacted returns the kept text, trimmed of surrounding white space and
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
func (t *Tail) Redacted() string {
	raw, truncated := t.snapshot()
	text := string(raw)
	if truncated {
		text = tailDropFragment(text)
	}
	r := t.Redactor
	if r == nil {
		r = defaultRedactor()
	}
	return strings.TrimSpace(r.Redact(text))
}

// tailDropFragment drops what is left of the line that the tail's start cut
// (see Tail.Redacted).
func tailDropFragment(text string) string {
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		return text[i+1:]
	}
	i := tailRunEnd(text, 0) // the fragment, possibly empty
	if i > 0 && (text[i-1] == ':' || text[i-1] == '=') {
		return ""
	}
	j := i
	for j < len(text) && tailBlank(text[j]) {
		j++
	}
	k := tailRunEnd(text, j) // what may be the fragment's value
	if k == j || strings.Trim(text[j:k], `=:"'\>`) == "" || tailAuthScheme(text[j:k]) {
		return ""
	}
	return text[k:]
}

func tailBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' }

// tailRunEnd returns the end of the run of non-blank bytes at i.
func tailRunEnd(text string, i int) int {
	for i < len(text) && !tailBlank(text[i]) {
		i++
	}
	return i
}

// tailAuthScheme reports whether w names an HTTP authentication scheme,
// whose credentials follow it to the end of the line.
func tailAuthScheme(w string) bool {
	for _, scheme := range [...]string{"basic", "bearer", "digest", "token", "bot", "apikey", "negotiate",
		"ntlm", "oauth", "hoba", "mutual", "vapid", "hawk", "aws4-hmac-sha256", "scram-sha-1", "scram-sha-256"} {
		if strings.EqualFold(w, scheme) {
			return true
		}
	}
	return false
}
