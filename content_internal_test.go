package extension

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
)

// storeSidecar is a sidecar with only its content store, which is all
// host/content/read touches.
func storeSidecar(maxBytes int) *sidecar {
	h := Host{MaxContentBytes: maxBytes}.withDefaults()
	s := &sidecar{}
	s.content.maxObjects, s.content.maxBytes = h.MaxContentObjects, h.MaxContentBytes
	return s
}

// readRequest asks s's HandleRequest for one page.
func readRequest(s *sidecar, params string) (ContentReadResult, error) {
	res, err := s.HandleRequest(context.Background(), MethodContentRead, json.RawMessage(params))
	if err != nil {
		return ContentReadResult{}, err
	}
	// The hand-encoded page must be what encoding/json writes for the
	// same result, and strictly decodable.
	var p ContentReadParams
	json.Unmarshal([]byte(params), &p)
	chunk, want, _ := s.content.page(p)
	want.DataBase64 = base64.StdEncoding.EncodeToString(chunk)
	got := res.(preEncoded)[preHead:] // after the room for the frame's head
	if b, _ := json.Marshal(want); string(b) != string(got) {
		return ContentReadResult{}, errors.New("the hand-encoded page differs from encoding/json's: " + string(got)[:80])
	}
	var page ContentReadResult
	err = Decode(MethodContentRead, json.RawMessage(got), &page)
	return page, err
}

func TestContentReadPagesD22(t *testing.T) {
	s := storeSidecar(0)
	for _, c := range []struct {
		size  int
		pages []int64 // the offsets of the pages, in order
	}{
		{700 << 10, []int64{0, 262144, 524288}},
		{262144 + 1, []int64{0, 262144}},
		{262144, []int64{0}},
		{0, []int64{0}},
	} {
		data := bytes.Repeat([]byte("x"), c.size)
		d := s.content.put(data, "")
		var mu sync.Mutex // the pages are read concurrently
		var got []int64
		read := func(ctx context.Context, p ContentReadParams) (json.RawMessage, error) {
			mu.Lock()
			got = append(got, p.Offset)
			mu.Unlock()
			b, _ := json.Marshal(p)
			page, err := readRequest(s, string(b))
			b, _ = json.Marshal(page)
			return b, err
		}
		back, err := ReadContent(context.Background(), d, read)
		slices.Sort(got) // in the order they were asked for, not called
		if err != nil || !bytes.Equal(back, data) || len(got) != len(c.pages) {
			t.Fatalf("%d bytes: read %d bytes in pages %v (%v), want pages %v", c.size, len(back), got, err, c.pages)
		}
		for i := range got {
			if got[i] != c.pages[i] {
				t.Fatalf("%d bytes: pages %v, want %v", c.size, got, c.pages)
			}
		}
		last, _ := readRequest(s, `{"contentRef":"`+d.ContentRef+`","offset":`+itoa(c.pages[len(c.pages)-1])+`}`)
		if last.NextOffset != 0 {
			t.Fatalf("%d bytes: the last page has nextOffset %d", c.size, last.NextOffset)
		}
		end, err := readRequest(s, `{"contentRef":"`+d.ContentRef+`","offset":`+itoa(int64(c.size))+`}`)
		if err != nil || end.DataBase64 != "" || end.NextOffset != 0 {
			t.Fatalf("%d bytes: offset == totalBytes gave %+v, %v; want an empty last page", c.size, end, err)
		}
		if _, err := readRequest(s, `{"contentRef":"`+d.ContentRef+`","offset":`+itoa(int64(c.size+1))+`}`); !errors.Is(err, ReasonContentRefExpired) {
			t.Fatalf("past the end: %v, want content_ref_expired", err)
		}
		if _, err := readRequest(s, `{"contentRef":"`+d.ContentRef+`","offset":-1}`); !errors.Is(err, ReasonInvalidParams) {
			t.Fatalf("a negative offset: %v, want invalid_params", err)
		}
	}
	if _, err := readRequest(s, `{"contentRef":"content_000000000000000000000000","offset":0}`); !errors.Is(err, ReasonContentRefExpired) {
		t.Fatalf("an unknown ref: %v, want content_ref_expired", err)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestContentStoreEvictsOldestFirstD22(t *testing.T) {
	expired := func(s *sidecar, d ExternalizedField) bool {
		_, err := readRequest(s, `{"contentRef":"`+d.ContentRef+`","offset":0}`)
		return errors.Is(err, ReasonContentRefExpired)
	}
	s := storeSidecar(0)
	var refs []ExternalizedField
	for range 64 {
		refs = append(refs, s.content.put([]byte(`{}`), ""))
	}
	if expired(s, refs[0]) {
		t.Fatal("the first of 64 objects was evicted")
	}
	refs = append(refs, s.content.put([]byte(`{}`), ""))
	if !expired(s, refs[0]) || expired(s, refs[1]) || expired(s, refs[64]) {
		t.Fatal("the 65th object must evict the first, and only it")
	}

	s = storeSidecar(1000)
	a, b := s.content.put(make([]byte, 400), ""), s.content.put(make([]byte, 400), "")
	c := s.content.put(make([]byte, 400), "")
	if !expired(s, a) || expired(s, b) || expired(s, c) {
		t.Fatal("the byte cap must evict the oldest until the new object fits")
	}
	s.content.close()
	if !expired(s, b) || !expired(s, c) {
		t.Fatal("a closed connection's refs must be gone")
	}
}

// FuzzReadContent feeds ReadContent a descriptor and the pages a hostile
// peer answers, each line of the input after the first (the descriptor)
// the result read at an offset: whatever they say, ReadContent must
// end, never read past the object's bounds, and return only bytes whose
// length and SHA-256 are the descriptor's (D22, PROTOCOL.md §6.3).
func FuzzReadContent(f *testing.F) {
	s := storeSidecar(0)
	for _, size := range []int{0, 10, ContentRefChunkBytes, ContentRefChunkBytes + 1} {
		d := s.content.put(bytes.Repeat([]byte("z"), size), "")
		dj, _ := json.Marshal(d)
		seed := string(dj)
		for off := int64(0); ; {
			pj, _ := s.content.read(context.Background(), ContentReadParams{ContentRef: d.ContentRef, Offset: off})
			seed += "\n" + string(pj)
			var page ContentReadResult
			Unmarshal(pj, &page)
			if page.NextOffset == 0 {
				break
			}
			off = page.NextOffset
		}
		f.Add(seed)
	}
	f.Add(`{"jsonPointer":"/payload","contentRef":"c","totalBytes":3,"sha256":"00"}` + "\n" + `{"contentRef":"c","offset":0,"dataBase64":"YQ==","nextOffset":1,"totalBytes":3,"sha256":"00","encoding":"utf8"}`)
	f.Fuzz(func(t *testing.T, input string) {
		lines := bytes.Split([]byte(input), []byte("\n"))
		var d ExternalizedField
		if Unmarshal(lines[0], &d) != nil {
			return
		}
		// The pages are read concurrently: the line after the
		// descriptor that answers an offset is the page the host would
		// answer there, whichever read comes first.
		read := func(ctx context.Context, p ContentReadParams) (json.RawMessage, error) {
			if i := 1 + p.Offset/ContentRefChunkBytes; i < int64(len(lines)) {
				return lines[i], nil
			}
			return nil, NewError(ReasonContentRefExpired, "")
		}
		data, err := ReadContent(context.Background(), d, read)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Reason == "" {
				t.Fatalf("error %v carries no protocol reason", err)
			}
			return
		}
		sum := sha256.Sum256(data)
		if int64(len(data)) != d.TotalBytes || !strings.EqualFold(hex.EncodeToString(sum[:]), d.SHA256) {
			t.Fatalf("accepted %d bytes that do not match %+v", len(data), d)
		}
	})
}

// TestStoredEventPayloadIsTheHostsOwnCopyD22: a sidecar may page an
// event's payload after Observe returned, so the caller reusing its buffer
// must not change what the store holds.
func TestStoredEventPayloadIsTheHostsOwnCopyD22(t *testing.T) {
	// A sidecar that is not ready: the event is stored for it, then not
	// sent (the store is all this looks at).
	s := storeSidecar(0)
	s.spec = &launchSpec{ID: "s"}
	rt := &Runtime{cfg: &Host{}, chains: map[Point][]*sidecar{InputReceive: {s}}, byID: map[string]*sidecar{}, warned: map[string]bool{}}
	payload := []byte(`{"text":"` + strings.Repeat("a", ExternalizeFieldBytes) + `"}`)
	if err := rt.Observe(InputReceive, json.RawMessage(payload)); err != nil {
		t.Fatal(err)
	}
	want := string(payload)
	for i := range payload {
		payload[i] = 'x'
	}
	s.content.mu.Lock()
	defer s.content.mu.Unlock()
	if len(s.content.order) != 1 || string(s.content.objs[s.content.order[0]].data) != want {
		t.Fatal("the stored event payload changed with the caller's buffer")
	}
}

// TestD22APageAheadThatFailsNeitherCorruptsNorReorders: while the pages
// before it are decoded, the page two ahead fails, comes short, comes
// tampered or comes as another page; the read gives that page's error,
// or (for a short page, which §6.3 allows) exactly the object's bytes,
// never a mix. Page 2 answers only once page 3 has been asked for, so
// it is read while the pages before it are still in flight.
func TestD22APageAheadThatFailsNeitherCorruptsNorReorders(t *testing.T) {
	s := storeSidecar(0)
	data := make([]byte, 4*ContentRefChunkBytes+100)
	for i := range data {
		data[i] = byte(i * 7 % 251)
	}
	d := s.content.put(data, "")
	const k2 = 2 * ContentRefChunkBytes
	tampered := bytes.Clone(data)
	tampered[k2+10]++
	pageAt := func(off int64, chunk []byte) json.RawMessage { // nextOffset: its end
		b, _ := json.Marshal(ContentReadResult{ContentRef: d.ContentRef, Offset: off, DataBase64: base64.StdEncoding.EncodeToString(chunk), NextOffset: off + int64(len(chunk)), TotalBytes: d.TotalBytes, SHA256: d.SHA256, Encoding: EncodingUTF8})
		return b
	}
	for _, c := range []struct {
		name   string
		answer func(off int64) (json.RawMessage, error) // page 2's answer
		want   Reason                                   // "": the object's bytes
	}{
		{"fails", func(int64) (json.RawMessage, error) { return nil, NewError(ReasonContentRefExpired, "") }, ReasonContentRefExpired},
		{"short", func(off int64) (json.RawMessage, error) { return pageAt(off, data[off:off+1000]), nil }, ""},
		{"short, claiming a whole page", func(off int64) (json.RawMessage, error) {
			return bytes.Replace(pageAt(off, data[off:off+1000]), []byte(itoa(off+1000)), []byte(itoa(off+ContentRefChunkBytes)), 1), nil
		}, ReasonProtocolError},
		{"tampered", func(off int64) (json.RawMessage, error) {
			return pageAt(off, tampered[off:off+ContentRefChunkBytes]), nil
		}, ReasonProtocolError},
		{"another page", func(off int64) (json.RawMessage, error) {
			return s.content.read(context.Background(), ContentReadParams{ContentRef: d.ContentRef, Offset: off + ContentRefChunkBytes})
		}, ReasonProtocolError},
	} {
		asked3 := make(chan struct{})
		var once sync.Once
		read := func(ctx context.Context, p ContentReadParams) (json.RawMessage, error) {
			switch p.Offset {
			case k2:
				<-asked3
				return c.answer(p.Offset)
			case k2 + ContentRefChunkBytes:
				once.Do(func() { close(asked3) })
			}
			return s.content.read(ctx, p)
		}
		got, err := ReadContent(context.Background(), d, read)
		switch {
		case c.want == "" && (err != nil || !bytes.Equal(got, data)):
			t.Fatalf("%s: %d bytes (%v), want the object's %d", c.name, len(got), err, len(data))
		case c.want != "" && (!errors.Is(err, c.want) || got != nil):
			t.Fatalf("%s: %d bytes (%v), want no bytes and %s", c.name, len(got), err, c.want)
		}
	}
}

// TestD22AnOperationsPayloadIsHashedAsItIsValidated: the SHA-256 a large
// payload's descriptors carry comes from its validation, once for every
// connection, and is the hash of the bytes stored, compacted or not.
func TestD22AnOperationsPayloadIsHashedAsItIsValidated(t *testing.T) {
	s := storeSidecar(0)
	for _, doc := range []string{`{"text":"` + strings.Repeat("a", ExternalizeFieldBytes) + `"}`, `{ "text": "` + strings.Repeat("a", ExternalizeFieldBytes) + `" }`} {
		compact, sum, err := compactPayload([]byte(doc))
		if spaced := len(compact) != len(doc); err != nil || spaced != (sum == "") {
			t.Fatalf("compactPayload gave sum %q (%v); want one for a compact payload only", sum, err)
		}
		_, ext := s.content.externalize(compact, sum)
		if len(ext) != 1 || ext[0].SHA256 != hexSHA256(compact) {
			t.Fatalf("externalized as %+v, want the SHA-256 of the %d compact bytes", ext, len(compact))
		}
	}
}
