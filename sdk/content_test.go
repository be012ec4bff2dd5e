package sdk_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reasonix-ext/extension"
	"github.com/reasonix-ext/extension/sdk"
)

// page is a host/content/read answer's result.
func page(ref string, offset int64, data []byte, next, total int64, sum string) string {
	r := extension.ContentReadResult{ContentRef: ref, Offset: offset, DataBase64: base64.StdEncoding.EncodeToString(data), NextOffset: next, TotalBytes: total, SHA256: sum, Encoding: extension.EncodingUTF8}
	b, _ := json.Marshal(r)
	return `"result":` + string(b)
}

func TestPayloadIsReadAndVerifiedBeforeTheCallbackD22(t *testing.T) {
	payload := []byte(`{"text":"` + strings.Repeat("p", 300_000) + `"}`)
	sum := sha256.Sum256(payload)
	hexSum := hex.EncodeToString(sum[:])
	ref := "content_0123456789abcdef01234567"
	desc := func(pointer string, total int64, sha string) string {
		return fmt.Sprintf(`{"jsonPointer":%q,"contentRef":%q,"totalBytes":%d,"sha256":%q}`, pointer, ref, total, sha)
	}
	good := desc("/payload", int64(len(payload)), hexSum)
	// honest answers the read at offset with the true pages.
	honest := func(offset int64) string {
		end := min(offset+extension.ContentRefChunkBytes, int64(len(payload)))
		next := end
		if end == int64(len(payload)) {
			next = 0
		}
		return page(ref, offset, payload[offset:end], next, int64(len(payload)), hexSum)
	}
	tampered := append([]byte(nil), payload...)
	tampered[100] = 'q'
	for _, c := range []struct {
		name    string
		inline  string
		ext     string
		answer  func(offset int64) string
		code    int
		reason  extension.Reason
		noReads bool
	}{
		{"honest", "null", "[" + good + "]", honest, 0, "", false},
		{"tampered bytes", "null", "[" + good + "]", func(o int64) string {
			end := min(o+extension.ContentRefChunkBytes, int64(len(payload)))
			next := end
			if end == int64(len(payload)) {
				next = 0
			}
			return page(ref, o, tampered[o:end], next, int64(len(payload)), hexSum)
		}, -32600, extension.ReasonProtocolError, false},
		{"wrong length", "null", "[" + desc("/payload", int64(len(payload))+1, hexSum) + "]", honest, -32600, extension.ReasonProtocolError, false},
		{"wrong hash", "null", "[" + desc("/payload", int64(len(payload)), strings.Repeat("0", 64)) + "]", honest, -32600, extension.ReasonProtocolError, false},
		{"wrong pointer", "null", "[" + desc("/replacement", int64(len(payload)), hexSum) + "]", honest, -32600, extension.ReasonProtocolError, true},
		{"two descriptors", "null", "[" + good + "," + good + "]", honest, -32600, extension.ReasonProtocolError, true},
		{"inline beside", `{"text":"x"}`, "[" + good + "]", honest, -32600, extension.ReasonProtocolError, true},
		{"over 8 MiB", "null", "[" + desc("/payload", extension.FrameBytes+1, hexSum) + "]", honest, -32000, extension.ReasonFrameTooLarge, true},
		{"unknown ref", "null", "[" + good + "]", func(int64) string {
			return `"error":{"code":-32000,"message":"The referenced content has expired.","data":{"reason":"content_ref_expired","retryable":true}}`
		}, -32000, extension.ReasonContentRefExpired, false},
		{"echo mismatch", "null", "[" + good + "]", func(o int64) string { return page(ref, o+1, payload[:10], 0, int64(len(payload)), hexSum) }, -32600, extension.ReasonProtocolError, false},
		{"bad encoding", "null", "[" + good + "]", func(o int64) string { return strings.Replace(honest(o), `"utf8"`, `"latin1"`, 1) }, -32600, extension.ReasonProtocolError, false},
		{"bad base64", "null", "[" + good + "]", func(o int64) string {
			return strings.Replace(honest(o), `"dataBase64":"`, `"dataBase64":"*`, 1)
		}, -32600, extension.ReasonProtocolError, false},
		{"page too large", "null", "[" + good + "]", func(o int64) string {
			return page(ref, o, payload[:extension.ContentRefChunkBytes+1], extension.ContentRefChunkBytes+1, int64(len(payload)), hexSum)
		}, -32600, extension.ReasonProtocolError, false},
		{"no progress", "null", "[" + good + "]", func(o int64) string { return page(ref, o, nil, o, int64(len(payload)), hexSum) }, -32600, extension.ReasonProtocolError, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := minimalOptions
			opts.Intercept = map[extension.Point]sdk.InterceptFunc{"*": func(ctx context.Context, call *sdk.Call) (sdk.Verdict, error) {
				if string(call.Payload) != string(payload) {
					return sdk.Verdict{}, fmt.Errorf("the callback saw %d bytes", len(call.Payload))
				}
				return sdk.Block("saw it"), nil
			}}
			p := started(t, opts)
			p.send(request(2, extension.MethodIntercept, `{"event":"input.receive","seq":1,"payload":`+c.inline+`,"timeoutMillis":0,"externalized":`+c.ext+`}`))
			reads := 0
			for {
				f := p.recv()
				if f.Method != extension.MethodContentRead {
					if c.reason == "" {
						wantResult(t, f, "2", `{"decision":"block","reason":"saw it"}`)
					} else {
						wantError(t, f, "2", c.code, c.reason)
					}
					break
				}
				reads++
				var rp extension.ContentReadParams
				json.Unmarshal(f.Params, &rp)
				p.send(`{"jsonrpc":"2.0","id":` + string(f.ID) + `,` + c.answer(rp.Offset) + `}`)
			}
			if c.noReads && reads > 0 {
				t.Fatalf("%d reads for a descriptor refused before reading", reads)
			}
			if c.name == "honest" && reads != 2 {
				t.Fatalf("%d pages for %d bytes, want 2", reads, len(payload))
			}
		})
	}
}

func TestReadContentNeedsACallbackContext(t *testing.T) {
	if _, err := sdk.ReadContent(context.Background(), extension.ExternalizedField{}); err == nil || !strings.Contains(err.Error(), "callback") {
		t.Fatalf("ReadContent outside a callback = %v", err)
	}
}

func TestReadContentFromACallbackAndObserversSeeTheirPayloadD22(t *testing.T) {
	data := []byte(`{"phase":"start","sessionPath":"` + strings.Repeat("s", 70_000) + `"}`)
	sum := sha256.Sum256(data)
	d := extension.ExternalizedField{JSONPointer: "/payload", ContentRef: "content_0123456789abcdef01234567", TotalBytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	db, _ := json.Marshal(d)
	observed := make(chan int, 1)
	opts := minimalOptions
	opts.Intercept = map[extension.Point]sdk.InterceptFunc{extension.ToolBefore: func(ctx context.Context, c *sdk.Call) (sdk.Verdict, error) {
		b, err := sdk.ReadContent(ctx, d) // a descriptor of the callback's own
		if err != nil {
			return sdk.Verdict{}, err
		}
		return sdk.Block(fmt.Sprint(len(b))), nil
	}}
	opts.Observe = map[extension.Point]sdk.ObserveFunc{extension.SessionStart: func(ctx context.Context, e *sdk.Event) { observed <- len(e.Payload) }}
	p := started(t, opts)
	serveReads := func(until func(frame) bool) {
		for {
			f := p.recv()
			if f.Method == extension.MethodContentRead {
				p.send(`{"jsonrpc":"2.0","id":` + string(f.ID) + `,` + page(d.ContentRef, 0, data, 0, d.TotalBytes, d.SHA256) + `}`)
				continue
			}
			if until(f) {
				return
			}
			t.Fatalf("unexpected %s", f.raw)
		}
	}
	p.send(intercept(2, extension.ToolBefore, `{"name":"x"}`))
	serveReads(func(f frame) bool {
		wantResult(t, f, "2", fmt.Sprintf(`{"decision":"block","reason":"%d"}`, len(data)))
		return true
	})
	p.send(`{"jsonrpc":"2.0","method":"extension/event","params":{"event":"session.start","payload":null,"externalized":[` + string(db) + `]}}`)
	if f := p.recv(); f.Method != extension.MethodContentRead {
		t.Fatalf("got %s, want the observer's payload read", f.raw)
	} else {
		p.send(`{"jsonrpc":"2.0","id":` + string(f.ID) + `,` + page(d.ContentRef, 0, data, 0, d.TotalBytes, d.SHA256) + `}`)
	}
	if n := <-observed; n != len(data) {
		t.Fatalf("the observer saw %d bytes, want %d", n, len(data))
	}
}

func TestAnEventsPayloadReadIsBoundedByContentTimeoutD22(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := make(chan string, 8)
		called := false
		opts := minimalOptions
		opts.ContentTimeout = 2 * time.Second
		opts.Logf = func(format string, args ...any) { logs <- fmt.Sprintf(format, args...) }
		opts.Observe = map[extension.Point]sdk.ObserveFunc{extension.SessionStart: func(context.Context, *sdk.Event) { called = true }}
		p := started(t, opts)
		d := `{"jsonPointer":"/payload","contentRef":"content_0123456789abcdef01234567","totalBytes":70000,"sha256":"` + strings.Repeat("ab", 32) + `"}`
		p.send(`{"jsonrpc":"2.0","method":"extension/event","params":{"event":"session.start","payload":null,"externalized":[` + d + `]}}`)
		if f := p.recv(); f.Method != extension.MethodContentRead {
			t.Fatalf("got %s, want the read", f.raw)
		}
		// The host never answers: after ContentTimeout the event is dropped.
		if line := <-logs; !strings.Contains(line, "dropped extension/event") || !strings.Contains(line, "deadline") {
			t.Fatalf("log %q, want the event dropped at its deadline", line)
		}
		if called {
			t.Fatal("the observer ran without its payload")
		}
		wantResult(t, p.call(intercept(9, extension.ToolBefore, `{"name":"ls"}`)), "9", continueResult)
	})
}
