package extension

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// methodFixtures reads testdata/methods.json: one valid params (and, for
// requests, result) document per method.
func methodFixtures(t testing.TB) map[string]map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile("testdata/methods.json")
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]map[string]json.RawMessage
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestEveryMethodFixtureRoundTrips(t *testing.T) {
	fixtures := methodFixtures(t)
	for _, m := range Methods() {
		t.Run(m.Name, func(t *testing.T) {
			f, ok := fixtures[m.Name]
			if !ok || f["params"] == nil || (m.result != nil) != (f["result"] != nil) {
				t.Fatalf("testdata/methods.json lacks a complete fixture for %s", m.Name)
			}
			check := func(raw json.RawMessage, typ reflect.Type, decode func(string, json.RawMessage, any) error) {
				v := reflect.New(typ)
				if err := decode(m.Name, raw, v.Interface()); err != nil {
					t.Fatalf("strict decode of the %s fixture: %v", typ.Name(), err)
				}
				out, err := json.Marshal(v.Interface())
				if err != nil {
					t.Fatal(err)
				}
				if !jsonEqual(raw, out) {
					t.Errorf("%s did not round-trip:\n in: %s\nout: %s", typ.Name(), raw, out)
				}
			}
			check(f["params"], m.params, Decode)
			if m.result != nil {
				check(f["result"], m.result, Decode)
			}
		})
	}
}

// validInstance builds a document of node n in which every property is
// present with a valid value, so that single mutations isolate one rule.
func validInstance(n *vnode, depth int) any {
	switch n.kind {
	case vObject:
		obj := map[string]any{}
		if n.isMap {
			obj["k"] = validInstance(n.elem, depth+1)
			return obj
		}
		for _, p := range n.props {
			obj[p.name] = propInstance(n, p, depth)
		}
		return obj
	case vArray:
		return []any{validInstance(n.elem, depth+1)}
	case vString:
		if n.enum != nil {
			return n.enum[0]
		}
		return "x"
	case vInteger:
		if n.min != nil {
			return *n.min + 1
		}
		return 7
	case vNumber:
		return 1.5
	case vBoolean:
		return true
	}
	return map[string]any{"free": []any{1, "two"}}
}

func propInstance(owner *vnode, p vprop, depth int) any {
	switch {
	case p.node.sha256:
		return strings.Repeat("ab", 32)
	case p.node.object:
		return map[string]any{"type": "object"}
	case owner.def == "ProviderChunk" && p.name == "type":
		return string(ChunkError) // every member present is legal only for an error chunk
	}
	return validInstance(p.node, depth+1)
}

// compiledDefs returns the node of every $def, by name.
func compiledDefs() map[string]*vnode {
	out := map[string]*vnode{}
	for name, t := range dtoTypes() {
		n, err := typeNode(t)
		if err != nil {
			panic(err)
		}
		out[name] = n
	}
	return out
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wrongType returns a value of a JSON type the node does not admit.
func wrongType(n *vnode) any {
	switch n.kind {
	case vString:
		return 12
	case vObject, vArray:
		return "not a container"
	default:
		return map[string]any{}
	}
}

// expectRejection asserts doc fails validation against def at pointer.
func expectRejection(t *testing.T, def string, doc []byte, pointer, msgPart string) {
	t.Helper()
	err := Validate(def, doc)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Validate(%s, %s) = %v, want a *ValidationError", def, doc, err)
	}
	if ve.Pointer != pointer || !strings.Contains(ve.Msg, msgPart) {
		t.Fatalf("Validate(%s, %s):\n got pointer %q msg %q\nwant pointer %q msg containing %q", def, doc, ve.Pointer, ve.Msg, pointer, msgPart)
	}
}

// TestEveryDefRejectsEachViolation mutates a valid instance of each of the
// 41 $defs once per rule: each missing required key, each unknown key,
// each wrong JSON type and each enum violation is rejected, and the error
// names the JSON pointer of the offending member.
func TestEveryDefRejectsEachViolation(t *testing.T) {
	defs := compiledDefs()
	if len(defs) != 41 {
		t.Fatalf("%d compiled defs, want 41", len(defs))
	}
	names := make([]string, 0, len(defs))
	for name := range defs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		n := defs[name]
		t.Run(name, func(t *testing.T) {
			base := validInstance(n, 0).(map[string]any)
			if err := Validate(name, mustJSON(t, base)); err != nil {
				t.Fatalf("the valid instance is rejected: %v", err)
			}
			mutate := func(f func(m map[string]any)) []byte {
				m := map[string]any{}
				for k, v := range base {
					m[k] = v
				}
				f(m)
				return mustJSON(t, m)
			}
			for i, p := range n.props {
				if n.required&(1<<i) != 0 {
					expectRejection(t, name, mutate(func(m map[string]any) { delete(m, p.name) }), "/"+p.name, "missing required member")
				}
				if p.node.kind != vAny && !p.node.object {
					expectRejection(t, name, mutate(func(m map[string]any) { m[p.name] = wrongType(p.node) }), "/"+p.name, "want ")
				}
				if p.node.enum != nil {
					expectRejection(t, name, mutate(func(m map[string]any) { m[p.name] = "not-a-member" }), "/"+p.name, "is not one of")
				}
			}
			expectRejection(t, name, mutate(func(m map[string]any) { m["zzUnknown"] = 1 }), "/zzUnknown", "unknown member")
		})
	}
}

// TestStrictRulesBeyondTheSchemaD3 covers the rules of PROTOCOL.md §10
// that the JSON Schema cannot say.
func TestStrictRulesBeyondTheSchemaD3(t *testing.T) {
	init := func(s string) string {
		return `{"protocolVersion":"1","protocolId":"reasonix.extension.v1","manifest":{},` + s + `,"capabilities":{"contentRefs":true,"uiHost":"tui","protocolVersion":"1"}}`
	}
	sha := strings.Repeat("0f", 32)
	cases := []struct {
		name, def, doc, pointer, msg string
	}{
		{"case variant of decision (GHSA-wvj2-96wp-fq3f)", "InterceptResult", `{"decision":"continue","DECISION":"allow"}`, "/DECISION", "case-sensitive"},
		{"Unicode folding variant", "InterceptParams", `{"event":"tool.before","seq":1,"payload":{},"timeoutMillis":0,"timeoutMilliſ":1}`, "/timeoutMilliſ", "case-sensitive"},
		{"duplicate member", "InterceptResult", `{"decision":"continue","decision":"block"}`, "/decision", "duplicate member"},
		{"duplicate member through an escape", "InterceptResult", `{"decision":"continue","\u0064ecision":"block"}`, "/decision", "duplicate member"},
		{"duplicate inside a free-form payload", "InterceptResult", `{"decision":"replace","replacement":{"a":1,"a":2}}`, "/replacement/a", "duplicate member"},
		{"duplicate inside a map", "UISubmitParams", `{"surfaceId":"f","sessionId":"s","generation":1,"values":{"k":1,"k":2}}`, "/values/k", "duplicate member"},
		{"null for an optional member", "InterceptResult", `{"decision":"continue","externalized":null}`, "/externalized", "null is not allowed"},
		{"null for a required member", "ResourcesChangedParams", `{"paths":null}`, "/paths", "null is not allowed"},
		{"null publish payload", "UIPublishParams", `{"surfaceId":"a","sessionId":"s","generation":1,"kind":"status","payload":null}`, "/payload", "null is not allowed"},
		{"null nextOffset", "ContentReadResult", `{"contentRef":"c","offset":0,"dataBase64":"","nextOffset":null,"totalBytes":0,"sha256":"` + sha + `","encoding":"utf8"}`, "/nextOffset", "null is not allowed"},
		{"whitespace-only nonempty", "InitializeParams", init(`"session":{"sessionId":" \t","workspaceRoot":"/w","generation":1}`), "/session/sessionId", "blank"},
		{"empty nonempty", "StreamCancelParams", `{"streamId":""}`, "/streamId", "must not be empty"},
		{"uppercase sha256", "ExternalizedField", `{"jsonPointer":"/payload","contentRef":"c","totalBytes":1,"sha256":"` + strings.ToUpper(sha) + `"}`, "/sha256", "lowercase hex"},
		{"short sha256", "ExternalizedField", `{"jsonPointer":"/payload","contentRef":"c","totalBytes":1,"sha256":"abc"}`, "/sha256", "lowercase hex"},
		{"negative uint generation", "InitializeParams", init(`"session":{"sessionId":"s","workspaceRoot":"/w","generation":-1}`), "/session/generation", "negative"},
		{"negative zero for an unsigned integer", "UIActionParams", `{"actionId":"a","sessionId":"s","generation":-0}`, "/generation", "negative"},
		{"a huge unknown member name is quoted short", "ShutdownParams", `{"timeoutMillis":1,"` + strings.Repeat("x", 4096) + `":1}`, "/" + strings.Repeat("x", 4096), `"` + strings.Repeat("x", 64) + `"…`},
		{"fractional integer", "ShutdownParams", `{"timeoutMillis":1.5}`, "/timeoutMillis", "want an integer"},
		{"1.0 is not an integer", "ShutdownParams", `{"timeoutMillis":1.0}`, "/timeoutMillis", "want an integer"},
		{"exponent integer", "ShutdownParams", `{"timeoutMillis":1e3}`, "/timeoutMillis", "want an integer"},
		{"integer out of int64 range", "ShutdownParams", `{"timeoutMillis":9223372036854775808}`, "/timeoutMillis", "out of range"},
		{"below minimum", "InterceptParams", `{"event":"tool.before","seq":0,"payload":{},"timeoutMillis":0}`, "/seq", "at least 1"},
		{"negative minimum 0", "ContentReadParams", `{"contentRef":"c","offset":-1}`, "/offset", "at least 0"},
		{"negative price", "ProviderDescriptor", `{"ref":"r","inputPerMillion":-0.5}`, "/inputPerMillion", "out of bounds"},
		{"negative price that rounds to -0", "ProviderDescriptor", `{"ref":"r","inputPerMillion":-1e-400}`, "/inputPerMillion", "out of bounds"},
		{"negative price that rounds to -0 with a fraction", "ProviderDescriptor", `{"ref":"r","inputPerMillion":-0.0001e-400}`, "/inputPerMillion", "out of bounds"},
		{"number out of float64 range", "ProviderDescriptor", `{"ref":"r","inputPerMillion":1e999}`, "/inputPerMillion", "out of range"},
		{"trailing data", "ShutdownParams", `{"timeoutMillis":5} {}`, "", "trailing data"},
		{"error chunk without error", "ProviderChunk", `{"type":"error"}`, "", `needs the error member`},
		{"text chunk with error", "ProviderChunk", `{"type":"text","error":{"code":"provider_failed","message":"m"}}`, "", `only a chunk of type "error"`},
		{"usage chunk without usage", "StreamChunkParams", `{"streamId":"s","seq":1,"chunk":{"type":"usage"}}`, "/chunk", "needs the usage member"},
		{"non-object tool parameters", "ProviderRequest", `{"messages":[],"tools":[{"name":"t","parameters":[]}],"maxTokens":0}`, "/tools/0/parameters", "JSON object"},
		{"null request arrays", "ProviderRequest", `{"messages":null,"tools":[],"maxTokens":0}`, "/messages", "null is not allowed"},
		{"blank responseFormat type", "ProviderRequest", `{"messages":[],"tools":[],"maxTokens":0,"responseFormat":{"type":"  "}}`, "/responseFormat/type", "blank"},
		{"blank stream id", "StreamOpenParams", `{"streamId":" ","providerRef":"p","request":{"messages":[],"tools":[],"maxTokens":0},"seqBase":1}`, "/streamId", "blank"},
		{"empty enum value", "ProviderMessage", `{"role":""}`, "/role", "is not one of"},
		{"pointer escaping", "UIActionParams", `{"actionId":"a","sessionId":"s","generation":1,"args":{"a/b~c":1}}`, "/args/a~1b~0c", "want a string"},
		{"array index in pointer", "ResourcesChangedParams", `{"paths":["a",2]}`, "/paths/1", "want a string"},
		{"not an object", "ShutdownParams", `[]`, "", "want an object"},
		{"syntax error", "ShutdownParams", `{"timeoutMillis":}`, "/timeoutMillis", "unexpected character"},
		{"control character in string", "StreamCancelParams", "{\"streamId\":\"a\x01\"}", "/streamId", "control character"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { expectRejection(t, c.def, []byte(c.doc), c.pointer, c.msg) })
	}
}

func TestStrictRulesAccept(t *testing.T) {
	for _, c := range []struct{ def, doc string }{
		{"InterceptParams", `{"event":"input.receive","seq":1,"payload":null,"timeoutMillis":0}`}, // D22 placeholder
		{"InterceptResult", `{"decision":"replace","replacement":null}`},
		{"ShutdownParams", " {\"timeoutMillis\":-0}\r\n"},
		{"ProviderDescriptor", `{"ref":"r","inputPerMillion":0,"cacheHitPerMillion":2.5e-1}`},
		{"ProviderDescriptor", `{"ref":"r","inputPerMillion":-0.0,"outputPerMillion":-0e5}`}, // negative zero is zero: not below 0
		{"UIRequestResult", `{"cancelled":false,"values":{"v":null}}`},
		{"InterceptParams", `{"event":"tool.before","seq":9223372036854775807,"payload":{"a":{"a":{"a":1}}},"timeoutMillis":0}`},
	} {
		if err := Validate(c.def, []byte(c.doc)); err != nil {
			t.Errorf("Validate(%s, %s) = %v, want nil", c.def, c.doc, err)
		}
	}
}

// TestNestingBoundCountsTheOutermostLevelD3: 10000 levels in all are
// accepted and 10001 refused, the outermost value being level 1, in a
// document and in a frame, whose envelope counts.
func TestNestingBoundCountsTheOutermostLevelD3(t *testing.T) {
	nest := func(levels int) string { return strings.Repeat("[", levels) + strings.Repeat("]", levels) }
	// InterceptResult is level 1, the replacement's arrays levels 2 and up.
	if err := Validate("InterceptResult", []byte(`{"decision":"replace","replacement":`+nest(9999)+`}`)); err != nil {
		t.Errorf("10000 levels in a document: %v, want accepted", err)
	}
	if err := Validate("InterceptResult", []byte(`{"decision":"replace","replacement":`+nest(10000)+`}`)); err == nil {
		t.Error("10001 levels in a document accepted")
	}
	// The envelope is level 1, params 2, the payload's arrays 3 and up.
	frame := func(arrays int) []byte {
		return []byte(`{"jsonrpc":"2.0","method":"extension/event","params":{"event":"input.receive","payload":` + nest(arrays) + `}}`)
	}
	if _, fe := decodeMessage(frame(9998)); fe != nil {
		t.Errorf("10000 levels in a frame: %v, want accepted", fe.err)
	}
	if _, fe := decodeMessage(frame(9999)); fe == nil || fe.err.Code != codeParseError {
		t.Errorf("10001 levels in a frame: %+v, want a parse error", fe)
	}
}

func TestDeepNestingIsBoundedNotRecursedD3(t *testing.T) {
	doc := `{"decision":"replace","replacement":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`
	err := Validate("InterceptResult", []byte(doc))
	if err == nil || !strings.Contains(err.Error(), "nesting deeper than") {
		t.Fatalf("Validate of 100,000 levels = %v, want a nesting error", err)
	}
}

func TestDecodeMapsParamsToInvalidParamsAndResultsToProtocolError(t *testing.T) {
	var p ShutdownParams
	err := Decode(MethodShutdown, json.RawMessage(`{"timeoutMillis":"5"}`), &p)
	var ve *ValidationError
	if !errors.Is(err, ReasonInvalidParams) || !errors.As(err, &ve) || ve.Pointer != "/timeoutMillis" {
		t.Fatalf("Decode of params = %v, want invalid_params wrapping a pointer error", err)
	}
	var r ShutdownResult
	if err := Decode(MethodShutdown, json.RawMessage(`{}`), &r); !errors.Is(err, ReasonProtocolError) {
		t.Fatalf("Decode of a result = %v, want protocol_error", err)
	}
	if err := Decode(MethodShutdown, json.RawMessage(`{"timeoutMillis":1}`), &InterceptResult{}); !errors.Is(err, ReasonInternal) {
		t.Fatalf("Decode into another method's DTO = %v, want internal", err)
	}
	if err := Decode("extension/bogus", nil, &p); !errors.Is(err, ReasonUnknownMethod) {
		t.Fatalf("Decode(bogus) = %v, want unknown_method", err)
	}
}

// TestAbsentParamsReadAsEmptyObjectD5: absent params read as {} and are
// then validated like any other, so a method with a required member
// refuses them and one without accepts them.
func TestAbsentParamsReadAsEmptyObjectD5(t *testing.T) {
	var p ShutdownParams
	if err := Decode(MethodShutdown, nil, &p); !errors.Is(err, ReasonInvalidParams) || !strings.Contains(err.Error(), "timeoutMillis") {
		t.Fatalf("Decode(shutdown, nil) = %v, want invalid_params naming timeoutMillis", err)
	}
	var ip InitializedParams
	if err := Decode(MethodInitialized, nil, &ip); err != nil {
		t.Fatalf("Decode(initialized, nil) = %v, want nil", err)
	}
}

// TestDuplicateDetectionInLargeObjectsD3: past the linear threshold the
// check switches to a set and still finds every duplicate, escaped
// spellings included, at any depth.
func TestDuplicateDetectionInLargeObjectsD3(t *testing.T) {
	members := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"k%d":%d`, i, i)
		}
		return b.String()
	}
	big := members(100000)
	if err := Validate("InterceptResult", []byte(`{"decision":"replace","replacement":{`+big+`}}`)); err != nil {
		t.Fatalf("100,000 distinct members rejected: %v", err)
	}
	for _, dup := range []string{`"k99999":0`, `"k17":0`, `"\u006b5":0`} {
		doc := `{"decision":"replace","replacement":{"nested":{` + big + `,` + dup + `}}}`
		if err := Validate("InterceptResult", []byte(doc)); err == nil || !strings.Contains(err.Error(), "duplicate member") {
			t.Errorf("duplicate %s among 100,000 members: %v, want a duplicate error", dup, err)
		}
	}
	// A small object after a large one at the same depth starts clean.
	doc := `{"decision":"replace","replacement":[{` + members(40) + `},{"k1":1,"k2":2}]}`
	if err := Validate("InterceptResult", []byte(doc)); err != nil {
		t.Fatalf("sibling objects: %v", err)
	}
}

// TestFreeValueStillDecodesAfterTheFastSkipGivesUp: a payload whose fast
// skip gives up (nesting past its 64 levels) is walked again from the
// start; the duplicate sets the fast skip built for a large inner object
// must be gone by then, or the walk finds its own names "already seen".
func TestFreeValueStillDecodesAfterTheFastSkipGivesUp(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"event":"tool.before","seq":1,"timeoutMillis":5,"payload":{"a":{`)
	for i := range 17 { // past dupLinear: the object's names go into a set
		fmt.Fprintf(&b, `"k%d":1,`, i)
	}
	b.WriteString(`"z":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}}}`)
	var p InterceptParams
	if err := Unmarshal([]byte(b.String()), &p); err != nil {
		t.Fatalf("valid document refused: %v", err)
	}
}

// TestPlainWordAgreesWithPlainByte: the eight-byte test of the string
// scan says "plain" exactly when every byte is plainByte, for every byte
// value at every position and for random mixes.
func TestPlainWordAgreesWithPlainByte(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(b []byte) {
		want := true
		for _, c := range b {
			want = want && plainByte[c]
		}
		if got := plainWord(binary.LittleEndian.Uint64(b)); got != want {
			t.Fatalf("%q: got %v want %v", b, got, want)
		}
	}
	for range 200_000 {
		b := make([]byte, 8)
		for i := range b {
			switch r.IntN(4) {
			case 0:
				b[i] = byte(r.IntN(256))
			default:
				b[i] = byte(0x20 + r.IntN(0x60))
			}
		}
		check(b)
	}
	for c := range 256 {
		for pos := range 8 {
			b := []byte("abcdefgh")
			b[pos] = byte(c)
			check(b)
		}
	}
}

// TestPooledWalkerHoldsNoDocument: a walker released to the pool keeps no
// reference into the document it read (a frame can be 8 MiB), and gives
// back the room a large document made it grow.
func TestPooledWalkerHoldsNoDocument(t *testing.T) {
	w := &walker{dup: dupState{sets: map[int]map[string]bool{}}}
	w.path = append(w.path, pathToken{key: []byte(`"x"`)})
	w.dup.names = append(w.dup.names, []byte(`"x"`))
	w.path, w.dup.names = w.path[:0], w.dup.names[:0] // as a walk leaves them
	w.release()
	if w.path[:1][0].key != nil || w.dup.names[:1][0] != nil {
		t.Fatal("a released walker still points into the document")
	}
	big := &walker{path: make([]pathToken, 0, 2*walkerKeep), dup: dupState{names: make([][]byte, 0, 2*walkerKeep), sets: map[int]map[string]bool{}}}
	big.release()
	if big.path != nil || big.dup.names != nil {
		t.Fatal("a walker grown past walkerKeep kept its room")
	}
}

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
		if err := Decode(m.method, m.params, &p); err != nil {
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
// params into the DTO. It is the figure validate.go's lexer comment cites for why the
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
