package extension

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// tailText returns n bytes of lower-case words and line breaks, the same on
// every call, holding nothing the redactor would touch.
func tailText(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		switch r := rng.IntN(40); {
		case r == 0:
			b[i] = '\n'
		case r < 7:
			b[i] = ' '
		default:
			b[i] = byte('a' + rng.IntN(26))
		}
	}
	return b
}

// TestTailKeepsExactlyTheLastBytesOf100MiB writes a 100 MiB stream in
// random-sized pieces and compares what the tail kept with the true last
// 16384 bytes; the stream ends with a secret straddling the tail's start,
// which must not leak from Redacted.
func TestTailKeepsExactlyTheLastBytesOf100MiB(t *testing.T) {
	const total = 100 << 20
	secret := "ghp_FAKE0123456789abcdefghijklmnopqrstuv"
	// The final part: a line whose secret the cut splits 10 bytes in, then
	// enough ordinary lines that the cut falls there.
	var final bytes.Buffer
	final.WriteString("\nexport GITHUB_TOKEN=" + secret + " # deploy\n")
	cut := final.Len() - len(secret) - len(" # deploy\n") + 10
	filler := tailText(7, defaultTailSize-(final.Len()-cut))
	filler[len(filler)-1] = '\n'
	final.Write(filler)
	if got := final.Len() - defaultTailSize; got != cut {
		t.Fatalf("test setup: cut at %d, want %d", got, cut)
	}

	src := tailText(1, 1<<20)
	src = append(src, src...) // pieces up to 1 MiB never wrap
	rng := rand.New(rand.NewPCG(3, 4))
	var tl tail
	body := total - final.Len()
	for off := 0; off < body; {
		n := min(1+rng.IntN(64<<10), body-off)
		if rng.IntN(50) == 0 {
			n = min(1+rng.IntN(1<<20), body-off)
		}
		start := off % (1 << 20)
		if k, _ := tl.Write(src[start : start+n]); k != n {
			t.Fatalf("Write returned %d, want %d", k, n)
		}
		off += n
	}
	for rest := final.Bytes(); len(rest) > 0; {
		n := min(1+rng.IntN(4096), len(rest))
		tl.Write(rest[:n])
		rest = rest[n:]
	}

	want := final.Bytes()[final.Len()-defaultTailSize:]
	if got := tl.Bytes(); !bytes.Equal(got, want) {
		t.Errorf("kept %d bytes, not the last %d written (first difference at %d)", len(got), len(want), firstDiff(got, want))
	}
	if got := tl.Written(); got != total {
		t.Errorf("Written() = %d, want %d", got, total)
	}
	if !tl.Truncated() {
		t.Errorf("Truncated() = false after %d bytes, want true", total)
	}
	if c := cap(tl.buf); c != defaultTailSize {
		t.Errorf("buffer capacity %d after 100 MiB, want %d", c, defaultTailSize)
	}
	if leak := redactLeak(tl.Redacted(), secret); leak != "" {
		t.Errorf("Redacted() leaks %q of the secret cut by the tail's start", leak)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestTailD25CutSecretLeavesNoFragment writes each text so that the tail's
// start falls inside the secret and checks that no 8-byte run of it survives.
func TestTailD25CutSecretLeavesNoFragment(t *testing.T) {
	pem := "MIIEowIBAAKCAQEAFAKEr3ZlY2tzZWNyZXRrZXlib2R5\nbm90IGEgcmVhbCBrZXkgYXQgYWxsIGp1c3QgZmFrZQ==\n"
	tests := []struct {
		name   string
		text   string // the cut falls at the index of secret, plus into
		secret string
		into   int
		kept   string // must survive in Redacted
	}{
		{"vendor token mid-line", "log: using key ghp_FAKE0123456789abcdefghijklmnopqrstuv for push\nnext line stays\n", "ghp_FAKE0123456789abcdefghijklmnopqrstuv", 12, "next line stays"},
		{"key=value value", "export DB_PASSWORD=Zq8vFAKEpassw0rdValue\nok\n", "Zq8vFAKEpassw0rdValue", 3, "ok"},
		{"key cut before its value", "password: Zq8vFAKEpassw0rdValue\nok\n", "Zq8vFAKEpassw0rdValue", -4, "ok"},
		{"pem block without its BEGIN", "-----BEGIN RSA PRIVATE KEY-----\n" + pem + "-----END RSA PRIVATE KEY-----\nssh: done\n", strings.TrimSpace(pem), 5, "ssh: done"},
		{"one long line, token cut", "x ghp_FAKE0123456789abcdefghijklmnopqrstuv and more words", "ghp_FAKE0123456789abcdefghijklmnopqrstuv", 20, "more words"},
		{"one long line, key cut", "xx password: Zq8vFAKEpassw0rdValue and more", "Zq8vFAKEpassw0rdValue", -3, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := strings.Index(tt.text, tt.secret) + tt.into
			size := len(tt.text) - at
			tl := tail{size: size, redactor: newTestRedactor()}
			fmt.Fprint(&tl, strings.Repeat("filler words\n", 3), tt.text)
			if got := string(tl.Bytes()); got != tt.text[at:] {
				t.Fatalf("kept %q, want %q", got, tt.text[at:])
			}
			out := tl.Redacted()
			for _, part := range strings.Split(tt.secret, "\n") {
				if leak := redactLeak(out, part); leak != "" {
					t.Errorf("Redacted() = %q leaks %q", out, leak)
				}
			}
			if !strings.Contains(out, tt.kept) {
				t.Errorf("Redacted() = %q, want it to keep %q", out, tt.kept)
			}
		})
	}
}

// TestTailD25LongLineCutKeyLeavesNoValue cuts one long line (no line break
// kept) inside or right after the key of a credential, so the kept text
// starts with the rest of the key and the value follows it after a blank:
// the value must not survive, and what follows the value in the line may.
func TestTailD25LongLineCutKeyLeavesNoValue(t *testing.T) {
	tests := []struct {
		name, cut, kept string // cut is written and dropped, kept is what the tail keeps
		secret          string
		want            string // survives in Redacted, if not empty
	}{
		{"basic credential after a cut scheme", "curl -H Authorization: Ba", "sic dXNlcjpodW50ZXIyaHVudGVyMg== https://api.example.invalid/v1 done",
			"dXNlcjpodW50ZXIyaHVudGVyMg==", "https://api.example.invalid/v1 done"},
		{"bearer token after a cut scheme", "Authorization: Bea", "rer abcdefghijklmnop1234567890XYZ and then the request failed",
			"abcdefghijklmnop1234567890XYZ", "and then the request failed"},
		{"aws key after a cut key and a spaced equals", "[default] aws_secret_acce", "ss_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY region = us-east-1",
			"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""},
		{"password flag value after a cut flag", "mysql --pass", "word hunter2hunter2 -h db.internal --port 3306",
			"hunter2hunter2", "-h db.internal --port 3306"},
		{"json value after a cut key", `{"level":"debug","api_ke`, `y" : "abcd1234efgh5678ijkl", "n": 1}`,
			"abcd1234efgh5678ijkl", ""},
		{"scheme right after the cut", "Authorization:", " Digest username=bob, response=6629fae49393a05397450978507c4ef1",
			"6629fae49393a05397450978507c4ef1", ""},
		{"multi-word password after a cut key", "pass", "word: correct horse battery staple", "horse battery staple", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := tail{size: len(tt.kept), redactor: newTestRedactor()}
			fmt.Fprint(&tl, tt.cut, tt.kept)
			if got := string(tl.Bytes()); got != tt.kept {
				t.Fatalf("kept %q, want %q", got, tt.kept)
			}
			out := tl.Redacted()
			if leak := redactLeak(out, tt.secret); leak != "" {
				t.Errorf("Redacted() = %q leaks %q", out, leak)
			}
			if !strings.Contains(out, tt.want) {
				t.Errorf("Redacted() = %q, want it to keep %q", out, tt.want)
			}
		})
	}
}

func TestTailNotTruncatedKeepsEverything(t *testing.T) {
	tl := tail{redactor: newTestRedactor()}
	fmt.Fprint(&tl, "starting\n")
	fmt.Fprint(&tl, "token=Zq8vFAKEpassw0rdValue\n  ")
	if tl.Truncated() {
		t.Errorf("Truncated() = true, want false")
	}
	if got, want := tl.Redacted(), "starting\ntoken=[redacted]"; got != want {
		t.Errorf("Redacted() = %q, want %q", got, want)
	}
}

func TestTailZeroValueIsEmpty(t *testing.T) {
	var tl tail
	if got := tl.Redacted(); got != "" {
		t.Errorf("Redacted() = %q, want empty", got)
	}
	if tl.Truncated() || tl.Written() != 0 || len(tl.Bytes()) != 0 {
		t.Errorf("zero Tail: Truncated=%v Written=%d Bytes=%q, want false 0 empty", tl.Truncated(), tl.Written(), tl.Bytes())
	}
}

func TestTailSmallWritesWrapTheRing(t *testing.T) {
	tl := tail{size: 5}
	for _, w := range []string{"ab", "cd", "ef", "g", "hijk"} {
		tl.Write([]byte(w))
	}
	if got, want := string(tl.Bytes()), "ghijk"; got != want {
		t.Errorf("Bytes() = %q, want %q", got, want)
	}
	tl.Write([]byte("0123456789"))
	if got, want := string(tl.Bytes()), "56789"; got != want {
		t.Errorf("after a write longer than Size, Bytes() = %q, want %q", got, want)
	}
}

// TestTailConcurrentWriteAndRead is for the race detector: writers and
// readers share one Tail.
func TestTailConcurrentWriteAndRead(t *testing.T) {
	tl := tail{size: 1024, redactor: newTestRedactor()}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				fmt.Fprintf(&tl, "writer %d line %d token=FAKE%08d\n", w, i, i)
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			if out := tl.Redacted(); strings.Contains(out, "FAKE0") {
				t.Errorf("Redacted() leaked a token: %q", out)
				return
			}
			tl.Bytes()
			tl.Truncated()
		}
	})
	wg.Wait()
	if got, want := tl.Written(), int64(len(tl.Bytes())); got < want || len(tl.Bytes()) != 1024 {
		t.Errorf("Written()=%d, kept %d bytes, want 1024 kept", got, want)
	}
}

func Example_tail() {
	tl := &tail{size: 64, redactor: &Redactor{Environ: func() []string { return nil }}}
	fmt.Fprintln(tl, "starting sidecar with token=FAKEtok3nFAKEtok3n and a long first line")
	fmt.Fprintln(tl, "error: handshake failed: password=FAKEpassw0rd rejected")
	fmt.Println(tl.Truncated())
	fmt.Println(tl.Redacted())
	// Output:
	// true
	// error: handshake failed: password=[redacted] rejected
}

// TestTailLinesReachOnStderrRedactedAndEscapedD25D27 writes stderr in
// pieces that split lines, and finds each line passed whole, in order:
// a credential redacted, the lines of a PEM private key replaced whole
// (the redactor sees one line at a time), escape bytes shown escaped, a
// CRLF's "\r" dropped, a long line cut and marked, and a last line
// without its "\n" passed at the end.
func TestTailLinesReachOnStderrRedactedAndEscapedD25D27(t *testing.T) {
	var got []string
	tl := &tail{onLine: func(line string) { got = append(got, line) }}
	input := "starting up\r\nAuthorization: Bearer abcdefghijklmnop0123456789\n" +
		"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n" +
		"fake \x1b[32m[ok]\x1b[0m line\n" + strings.Repeat("x", stderrLineBytes+10) + "\nlast words"
	for i := 0; i < len(input); i += 7 { // pieces that split lines anywhere
		tl.Write([]byte(input[i:min(i+7, len(input))]))
	}
	tl.flush()
	want := []string{"starting up", "Authorization: " + RedactedMarker, RedactedMarker, RedactedMarker, RedactedMarker,
		`fake \x1b[32m[ok]\x1b[0m line`, strings.Repeat("x", stderrLineBytes) + " …(cut)", "last words"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("lines:\n%q\nwant:\n%q", got, want)
	}
}
