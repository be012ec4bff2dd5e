package extension

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"testing"
)

// interceptFrame is a ~300-byte extension/intercept frame, the shape of the
// host's most frequent request.
var interceptFrame = []byte(`{"jsonrpc":"2.0","id":42,"method":"extension/intercept","params":{"event":"tool.before","seq":42,"payload":{"name":"bash","arguments":"{\"cmd\":\"go test ./...\",\"cwd\":\"/home/dev/project\",\"timeout\":120,\"env\":{\"GOFLAGS\":\"-count=1\"}}","readOnly":false,"id":"call-7"},"timeoutMillis":5000}}`)

// BenchmarkStrictDecode measures what a peer does with every inbound
// intercept: decode the envelope (exact member names, duplicates, id rules),
// validate the params against InterceptParams, then unmarshal them.
func BenchmarkStrictDecode(b *testing.B) {
	b.SetBytes(int64(len(interceptFrame)))
	b.ReportAllocs()
	for b.Loop() {
		m, fe := decodeMessage(interceptFrame)
		if fe != nil {
			b.Fatal(fe)
		}
		var p InterceptParams
		if err := DecodeParams(m.method, m.params, &p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStrictDecodeBaseline is the same-run baseline: one plain
// json.Unmarshal of the same frame into the same DTO inside an envelope,
// with none of the strict rules.
func BenchmarkStrictDecodeBaseline(b *testing.B) {
	b.SetBytes(int64(len(interceptFrame)))
	b.ReportAllocs()
	for b.Loop() {
		var env struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      int64           `json:"id"`
			Method  string          `json:"method"`
			Params  InterceptParams `json:"params"`
		}
		if err := json.Unmarshal(interceptFrame, &env); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateManyMembers validates free-form objects of growing size;
// the cost per member stays flat (the duplicate check is linear, D3).
func BenchmarkValidateManyMembers(b *testing.B) {
	for _, n := range []int{1000, 4000, 16000, 64000} {
		var doc []byte
		doc = append(doc, `{"decision":"replace","replacement":{`...)
		for i := range n {
			if i > 0 {
				doc = append(doc, ',')
			}
			doc = fmt.Appendf(doc, `"member%d":%d`, i, i)
		}
		doc = append(doc, "}}"...)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				if err := Validate("InterceptResult", doc); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/member")
		})
	}
}

// BenchmarkStrictDecodeTokenBaseline is the same frame read without the
// package's lexer: encoding/json's token API with a set of member names
// per object for the duplicate check alone (none of the exact-name,
// unknown-member or integer-literal rules), then json.Unmarshal of the
// params into the DTO. It is the figure scan.go's comment cites for why the
// hand-written lexer stays; it does less than the strict walk, so the
// comparison favours it.
func BenchmarkStrictDecodeTokenBaseline(b *testing.B) {
	b.SetBytes(int64(len(interceptFrame)))
	b.ReportAllocs()
	for b.Loop() {
		dec := json.NewDecoder(bytes.NewReader(interceptFrame))
		dec.UseNumber()
		var seen []map[string]bool // per open container; nil for an array
		var wantKey []bool         // per open container: a member name comes next
		valueDone := func() {
			if top := len(seen) - 1; top >= 0 && seen[top] != nil {
				wantKey[top] = true
			}
		}
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if t, ok := tok.(json.Delim); ok {
				if t == '{' || t == '[' {
					var names map[string]bool
					if t == '{' {
						names = map[string]bool{}
					}
					seen, wantKey = append(seen, names), append(wantKey, t == '{')
					continue
				}
				seen, wantKey = seen[:len(seen)-1], wantKey[:len(wantKey)-1]
				valueDone()
				continue
			}
			if name, ok := tok.(string); ok {
				if top := len(seen) - 1; top >= 0 && seen[top] != nil && wantKey[top] {
					if seen[top][name] {
						b.Fatal("duplicate")
					}
					seen[top][name], wantKey[top] = true, false
					continue
				}
			}
			valueDone()
		}
		var env struct {
			Params InterceptParams `json:"params"`
		}
		if err := json.Unmarshal(interceptFrame, &env); err != nil {
			b.Fatal(err)
		}
	}
}
