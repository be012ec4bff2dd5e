package extension

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

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
