package extension

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

// seedFrames returns every line of testdata/frames/*.ndjson.
func seedFrames(f *testing.F) [][]byte {
	paths, err := filepath.Glob("testdata/frames/*.ndjson")
	if err != nil || len(paths) == 0 {
		f.Fatalf("no seed frames in testdata/frames: %v", err)
	}
	var frames [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, FrameBytes)
		for sc.Scan() {
			frames = append(frames, bytes.Clone(sc.Bytes()))
		}
	}
	return frames
}

// FuzzDecodeMessage: decodeMessage never panics, accepts only valid JSON,
// and what it accepts re-encodes to a frame that decodes to the same message.
func FuzzDecodeMessage(f *testing.F) {
	for _, fr := range seedFrames(f) {
		f.Add(fr)
	}
	for _, c := range adversarialFrames() {
		if len(c.frame) < 4096 {
			f.Add([]byte(c.frame))
		}
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		m, fe := decodeMessage(line)
		if fe != nil {
			if fe.err == nil || fe.err.Reason != ReasonProtocolError {
				t.Fatalf("a rejected frame must answer protocol_error, got %v", fe.err)
			}
			return
		}
		if !json.Valid(line) {
			t.Fatalf("decodeMessage accepted invalid JSON %q", line)
		}
		var again []byte
		var err error
		switch m.kind {
		case kindRequest:
			id := m.id
			again, err = encodeRequest(&id, m.method, m.params)
		case kindNotification:
			again, err = encodeRequest(nil, m.method, m.params)
		case kindResponse:
			if m.err != nil {
				again = encodeError(&m.id, m.err)
			} else {
				again, err = encodeResult(m.id, m.result)
			}
		default:
			t.Fatalf("accepted a message of kind %v", m.kind)
		}
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", m, err)
		}
		m2, fe := decodeMessage(bytes.TrimSuffix(again, []byte("\n")))
		if fe != nil {
			t.Fatalf("re-encoded frame %q rejected: %v", again, fe)
		}
		if m.kind != m2.kind || m.id != m2.id || m.method != m2.method || (m.err == nil) != (m2.err == nil) {
			t.Fatalf("round trip changed the message:\n%+v\n%+v", m, m2)
		}
		if m.params == nil && m.kind != kindResponse {
			m.params = json.RawMessage("{}") // encodeRequest sends {} for absent params
		}
		if !jsonEqual(m.params, m2.params) || !jsonEqual(m.result, m2.result) {
			t.Fatalf("round trip changed params or result:\n%+v\n%+v", m, m2)
		}
	})
}

// jsonEqual compares two documents as JSON values; nil equals only nil.
func jsonEqual(a, b []byte) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	// Numbers compare as their literals: 2e2144 is valid JSON that no
	// float64 holds.
	decode := func(doc []byte, v *any) error {
		d := json.NewDecoder(bytes.NewReader(doc))
		d.UseNumber()
		return d.Decode(v)
	}
	var x, y any
	if decode(a, &x) != nil || decode(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// FuzzValidate: Validate never panics; what it accepts encoding/json can
// decode into the DTO, Unmarshal decodes to the same value, and the DTO
// re-encodes to a document that is valid again.
func FuzzValidate(f *testing.F) {
	defs := compiledDefs()
	types := dtoTypes()
	names := make([]string, 0, len(defs))
	for n := range defs {
		names = append(names, n)
	}
	sort.Strings(names)
	index := map[string]uint8{}
	for i, n := range names {
		index[n] = uint8(i)
	}
	fixtures := methodFixtures(f)
	for _, m := range Methods() {
		f.Add(index[m.params.Name()], []byte(fixtures[m.Name]["params"]))
		if m.result != nil {
			f.Add(index[m.result.Name()], []byte(fixtures[m.Name]["result"]))
		}
	}
	f.Fuzz(func(t *testing.T, def uint8, doc []byte) {
		name := names[int(def)%len(names)]
		if Validate(name, doc) != nil {
			return
		}
		v := reflect.New(types[name])
		if err := json.Unmarshal(doc, v.Interface()); err != nil {
			t.Fatalf("Validate accepted %s %q but json.Unmarshal failed: %v", name, doc, err)
		}
		// Differential: the one strict walk decodes what it accepts to
		// exactly what encoding/json makes of it.
		w := reflect.New(types[name])
		if err := Unmarshal(doc, w.Interface()); err != nil {
			t.Fatalf("Validate accepted %s %q but Unmarshal refused it: %v", name, doc, err)
		}
		if !reflect.DeepEqual(v.Interface(), w.Interface()) {
			t.Fatalf("%s %q: Unmarshal decoded %+v, encoding/json %+v", name, doc, w.Elem().Interface(), v.Elem().Interface())
		}
		out, err := json.Marshal(v.Interface())
		if err != nil {
			t.Fatalf("re-encoding %s: %v", name, err)
		}
		if err := Validate(name, out); err != nil {
			t.Fatalf("re-encoded %s %s is invalid: %v (from %q)", name, out, err, doc)
		}
	})
}
