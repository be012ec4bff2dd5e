package main

import (
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/reasonix-ext/extension"
)

// redactCommand is "exthost redact": standard input to standard output,
// credentials removed (D25), streamed in bounded memory.
func redactCommand(fs *flag.FlagSet) func(*env) int {
	explain := fs.Bool("explain", false, "report each removed credential (rule and input byte offset) on standard error")
	return func(e *env) int {
		s := streamRedactor{r: new(extension.Redactor)}
		if *explain {
			s.explain = func(f extension.Finding) {
				fmt.Fprintf(e.stderr, "exthost redact: %s at bytes %d-%d\n", f.Rule, f.Start, f.End)
			}
		}
		return e.exit(s.copy(e.stdout, e.stdin))
	}
}

// Bounds of streamRedactor, used when its fields are zero.
const (
	defaultChunk   = 256 << 10 // bytes gathered before each round
	defaultContext = 4 << 10   // bytes already written kept as left context
	defaultMaxHold = 4 << 20   // most bytes held at once
)

// streamRedactor redacts a stream in rounds. Each round gathers about chunk
// bytes, redacts them together with the last context bytes of the previous
// round (so a key=value pair or header split across rounds keeps its key),
// and writes up to the last line break: whole lines are never split.
//
// A line longer than chunk is cut context bytes before the end of what was
// read; a credential that spans the cut is written whole, or held back to
// the next round when it reaches the end of what was read. A credential
// still unfinished after maxHold bytes is replaced by one marker and the
// rest of its line is discarded, so memory stays bounded by maxHold. The
// context is at least 128 bytes (a whole PEM BEGIN line) and chunk at least
// twice the context.
type streamRedactor struct {
	r       *extension.Redactor
	chunk   int
	context int
	maxHold int
	explain func(extension.Finding) // if set, told about each removed span (input offsets)
}

func (s *streamRedactor) copy(dst io.Writer, src io.Reader) error {
	chunk, context, maxHold := cmp.Or(s.chunk, defaultChunk), cmp.Or(s.context, defaultContext), cmp.Or(s.maxHold, defaultMaxHold)
	context = max(context, 128) // room for a whole PEM BEGIN line
	chunk = max(chunk, 2*context)
	buf := make([]byte, 0, chunk+context)
	ctx := 0      // buf[:ctx] was written already and is left context
	base := 0     // input offset of buf[ctx]
	want := chunk // pending bytes to gather this round
	eof, discard := false, false
	var out bytes.Buffer
	for {
		for !eof && len(buf)-ctx < want {
			if len(buf) == cap(buf) {
				buf = slices.Grow(buf, len(buf))
			}
			n, err := src.Read(buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if err == io.EOF {
				eof = true
			} else if err != nil {
				return err
			}
		}
		if discard { // the rest of a line whose credential outgrew maxHold, up to its line break
			i := bytes.IndexByte(buf[ctx:], '\n')
			discard = i < 0 // no line break yet: all of pending goes
			if discard {
				i = len(buf) - ctx
			}
			base += i
			buf = append(buf[:ctx], buf[ctx+i:]...)
		}
		if len(buf) == ctx { // nothing pending, or all of it discarded
			if eof {
				return nil
			}
			continue
		}
		spans := s.spans(buf)
		end := len(buf)
		if !eof {
			end = max(ctx+1, len(buf)-context) // a long line is cut
			if i := bytes.LastIndexByte(buf[ctx:], '\n'); i >= 0 {
				end = ctx + i + 1
				if len(buf) < maxHold { // an END line further on may make them a PEM body
					end = max(ctx, bodyLines(buf[:end]))
				}
			}
			for _, sp := range spans {
				if sp.Start < end && end < sp.End {
					if sp.End < len(buf) {
						end = sp.End
					} else {
						end = sp.Start
					}
				}
			}
			if end <= ctx { // a credential runs from the start of pending to the end of what was read
				if len(buf) < maxHold {
					want = min(2*want, maxHold)
					continue
				}
				end, discard = len(buf), true
			}
		}
		out.Reset()
		last := ctx
		for _, sp := range spans {
			if sp.End <= last || sp.Start >= end {
				continue
			}
			out.Write(buf[last:max(last, sp.Start)])
			out.WriteString(extension.RedactedMarker)
			last = min(sp.End, end)
			if s.explain != nil {
				s.explain(extension.Finding{Rule: sp.Rule, Start: base + sp.Start - ctx, End: base + sp.End - ctx})
			}
		}
		out.Write(buf[last:end])
		if _, err := io.WriteString(dst, s.r.Redact(out.String())); err != nil {
			return err
		}
		// Keep the last context bytes written as left context.
		keep := max(0, end-context)
		base += end - ctx
		buf = append(buf[:0], buf[keep:]...)
		ctx = end - keep
		want = chunk
	}
}

// spans returns the findings in b merged where they overlap or touch,
// ordered by start.
func (s *streamRedactor) spans(b []byte) []extension.Finding {
	var merged []extension.Finding
	for _, f := range s.r.Findings(string(b)) {
		if n := len(merged); n > 0 && f.Start <= merged[n-1].End {
			merged[n-1].End = max(merged[n-1].End, f.End)
			continue
		}
		merged = append(merged, f)
	}
	return merged
}

// bodyLines returns where the run of whole lines of base64 that ends b
// (at a line break) starts: lines that an END line without its BEGIN
// further on makes the body of a PEM private key, which the Redactor
// removes (D25). Held back until such a line or other text comes, they
// are never written before it is known.
func bodyLines(b []byte) int {
	i := len(b)
	for i > 0 && (b[i-1] == '\n' || b[i-1] == '\r' || strings.IndexByte(base64Chars, b[i-1]) >= 0) {
		i--
	}
	if i > 0 { // the line i is in starts with other text
		i += bytes.IndexByte(b[i:], '\n') + 1
	}
	return i
}

// base64Chars are the bytes of a PEM body line.
const base64Chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
