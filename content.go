package extension

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
)

// MethodContentRead pages an externalized content object (PROTOCOL.md §6).
const MethodContentRead = "host/content/read"

// ContentEncoding is the encoding label of a content page; v1 has one.
type ContentEncoding string

// EncodingUTF8 is the only v1 content encoding.
const EncodingUTF8 ContentEncoding = "utf8"

func (ContentEncoding) enumValues() []string { return enumStrings(EncodingUTF8) }

// ExternalizedField describes one payload field moved into the host's
// content store (D22): its JSON pointer, content ref, size and hash.
type ExternalizedField struct {
	JSONPointer string `json:"jsonPointer" proto:"nonempty"`
	ContentRef  string `json:"contentRef" proto:"nonempty"`
	TotalBytes  int64  `json:"totalBytes" proto:"min=0"`
	SHA256      string `json:"sha256" proto:"sha256"`
}

// ContentReadParams are the params of host/content/read.
type ContentReadParams struct {
	ContentRef string `json:"contentRef" proto:"nonempty"`
	Offset     int64  `json:"offset" proto:"min=0"`
}

// ContentReadResult is one page of a content object.
type ContentReadResult struct {
	ContentRef string          `json:"contentRef" proto:"nonempty"`
	Offset     int64           `json:"offset" proto:"min=0"`
	DataBase64 string          `json:"dataBase64"`
	NextOffset int64           `json:"nextOffset,omitempty" proto:"min=0"`
	TotalBytes int64           `json:"totalBytes" proto:"min=0"`
	SHA256     string          `json:"sha256" proto:"sha256"`
	Encoding   ContentEncoding `json:"encoding"`
}

// contentStore is one connection's store of externalized payloads
// (PROTOCOL.md §6.4): objects by ref, evicted oldest first, all gone once
// closed.
type contentStore struct {
	maxObjects, maxBytes int // Host.MaxContentObjects, Host.MaxContentBytes

	mu     sync.Mutex // protects the following
	objs   map[string]contentObject
	order  []string // refs, oldest first
	bytes  int
	closed bool
}

type contentObject struct {
	data []byte
	sum  string // lowercase hex SHA-256 of data
}

// put stores data, at most FrameBytes (the caller checks), whose
// lowercase hex SHA-256 is sum ("": put hashes it), evicting the oldest
// objects until both bounds hold, and returns its descriptor at /payload.
func (cs *contentStore) put(data []byte, sum string) ExternalizedField {
	if sum == "" {
		sum = hexSHA256(data)
	}
	d := ExternalizedField{JSONPointer: "/payload", ContentRef: randomID("content_"), TotalBytes: int64(len(data)), SHA256: sum}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return d // the connection has ended: nothing will read it
	}
	if cs.objs == nil {
		cs.objs = map[string]contentObject{}
	}
	for len(cs.order) > 0 && (len(cs.order)+1 > cs.maxObjects || cs.bytes+len(data) > cs.maxBytes) {
		cs.bytes -= len(cs.objs[cs.order[0]].data)
		delete(cs.objs, cs.order[0])
		cs.order = cs.order[1:]
	}
	cs.objs[d.ContentRef] = contentObject{data: data, sum: d.SHA256}
	cs.order = append(cs.order, d.ContentRef)
	cs.bytes += len(data)
	return d
}

// page finds the page p asks for (PROTOCOL.md §6.3): its bytes, and the
// result that carries them, without dataBase64.
func (cs *contentStore) page(p ContentReadParams) ([]byte, ContentReadResult, error) {
	cs.mu.Lock()
	obj, ok := cs.objs[p.ContentRef]
	cs.mu.Unlock()
	if !ok || p.Offset > int64(len(obj.data)) {
		return nil, ContentReadResult{}, NewError(ReasonContentRefExpired, "")
	}
	end := min(p.Offset+ContentRefChunkBytes, int64(len(obj.data)))
	res := ContentReadResult{ContentRef: p.ContentRef, Offset: p.Offset, TotalBytes: int64(len(obj.data)), SHA256: obj.sum, Encoding: EncodingUTF8}
	if end < int64(len(obj.data)) {
		res.NextOffset = end
	}
	return obj.data[p.Offset:end], res, nil
}

// read answers host/content/read as the frame's result: the host reads
// its own store this way for an externalized replacement.
func (cs *contentStore) read(_ context.Context, p ContentReadParams) (json.RawMessage, error) {
	b, err := cs.answer(p)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(b[preHead:]), nil
}

// answer is the ContentReadResult of page p encoded by hand, after the
// room for its frame's head (preEncoded), with the bytes encoded straight
// into it: the same JSON encoding/json writes (every
// string in it is plain: a host-minted ref, base64, hex, "utf8"), at a
// third of its cost for 8 MiB of pages (exthost bench, content_8mib).
func (cs *contentStore) answer(p ContentReadParams) (preEncoded, error) {
	chunk, res, err := cs.page(p)
	if err != nil {
		return nil, err
	}
	b := make([]byte, preHead, preHead+base64.StdEncoding.EncodedLen(len(chunk))+len(res.ContentRef)+200)
	b = append(append(append(b, `{"contentRef":"`...), res.ContentRef...), `","offset":`...)
	b = strconv.AppendInt(b, res.Offset, 10)
	b = base64.StdEncoding.AppendEncode(append(b, `,"dataBase64":"`...), chunk)
	b = append(b, '"')
	if res.NextOffset > 0 {
		b = strconv.AppendInt(append(b, `,"nextOffset":`...), res.NextOffset, 10)
	}
	b = strconv.AppendInt(append(b, `,"totalBytes":`...), res.TotalBytes, 10)
	b = append(append(append(b, `,"sha256":"`...), res.SHA256...), `","encoding":"utf8"}`...)
	return b, nil
}

// close drops every object: refs die with their connection.
func (cs *contentStore) close() {
	cs.mu.Lock()
	cs.objs, cs.order, cs.bytes, cs.closed = nil, nil, 0, true
	cs.mu.Unlock()
}

// externalize returns payload as it is sent on this connection: inline
// when it is at most ExternalizeFieldBytes, else null with the descriptor of
// the stored copy at /payload (D22). payload is compact when large; sum
// is its SHA-256 from compactPayload.
func (cs *contentStore) externalize(payload json.RawMessage, sum string) (json.RawMessage, []ExternalizedField) {
	if len(payload) <= ExternalizeFieldBytes {
		return payload, nil
	}
	return json.RawMessage("null"), []ExternalizedField{cs.put(payload, sum)}
}

// compactPayload is compactValue for the payload of an operation. A
// payload too large to travel inline is hashed on another goroutine
// while the walk validates it: sum is the SHA-256 its descriptors carry
// (D22), on every connection it is externalized on, or "" when it
// travels inline, was compacted (put then hashes what it stores) or is
// too large to store.
func compactPayload(raw []byte) (compact json.RawMessage, sum string, err error) {
	if len(raw) <= ExternalizeFieldBytes || len(raw) > FrameBytes {
		compact, err = compactValue(raw)
		return compact, "", err
	}
	sums := make(chan string, 1)
	go func() { sums <- hexSHA256(raw) }()
	compact, err = compactValue(raw)
	if sum = <-sums; len(compact) != len(raw) {
		sum = ""
	}
	return compact, sum, err
}

// hexSHA256 is the lowercase hex SHA-256 of b.
func hexSHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// randomID is prefix and 24 lowercase hex digits of 12 random bytes: the
// host's content refs and stream ids (PROTOCOL.md §5.2, §6.2).
func randomID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// readAhead is how many pages readContent asks for beyond the one it
// decodes, at the offsets a host paging ContentRefChunkBytes at a time
// answers: the two sides work at once, and an 8 MiB read waits for no
// round trip but the first (exthost bench, content_8mib). A peer paging
// otherwise is read a page at a time.
const readAhead = 3

// Rehydrate resolves the externalizable member of an owner document
// (PROTOCOL.md §6.2): inline is the member as it came (nil when absent),
// ext the document's externalized array and pointer the member's
// pointer ("/payload" or "/replacement"). Without descriptors it returns
// inline. Otherwise inline must be absent or null and ext one descriptor
// at pointer (else protocol_error), then the object is read through read
// and verified by readContent. read returns the result of one
// host/content/read answer as it came, and is called concurrently: up to
// 1+readAhead (4) reads are in flight at once. The errors carry the
// reason of §6.2: protocol_error, frame_too_large or content_ref_expired.
func Rehydrate(ctx context.Context, inline json.RawMessage, ext []ExternalizedField, pointer string, read func(context.Context, ContentReadParams) (json.RawMessage, error)) (json.RawMessage, error) {
	switch {
	case len(ext) == 0:
		return inline, nil
	case inline != nil && string(inline) != "null":
		return nil, errorf(ReasonProtocolError, "%s has an inline value beside its externalized descriptor", pointer)
	case len(ext) != 1:
		return nil, errorf(ReasonProtocolError, "externalized holds %d descriptors; want exactly one, for %s", len(ext), pointer)
	case ext[0].JSONPointer != pointer:
		return nil, errorf(ReasonProtocolError, "the externalized descriptor points at %q; want %q", ext[0].JSONPointer, pointer)
	}
	return readContent(ctx, ext[0], read)
}

// readContent reads the whole object d describes, page by page from
// offset 0, and checks each page and the total (PROTOCOL.md §6.3): the
// echoed ref and offset, the encoding, the size bound (frame_too_large),
// the base64, the page size, progress, and at the end the byte count and
// SHA-256 against d. Every other failure is protocol_error; the reader's
// own errors (content_ref_expired for an unknown ref) pass as they are.
// Pages are read ahead (readAhead) but decoded in order: a page ahead
// that fails fails the read only when its turn comes.
func readContent(ctx context.Context, d ExternalizedField, read func(context.Context, ContentReadParams) (json.RawMessage, error)) ([]byte, error) {
	if d.TotalBytes > FrameBytes {
		return nil, errorf(ReasonFrameTooLarge, "content %s is %d bytes, over the %d-byte limit", d.ContentRef, d.TotalBytes, FrameBytes)
	}
	bad := func(format string, args ...any) error {
		return errorf(ReasonProtocolError, "content %s: "+format, append([]any{d.ContentRef}, args...)...)
	}
	// Every read ends with this call: its context is cancelled and it is
	// waited for.
	ctx, cancel := context.WithCancel(ctx)
	var reads sync.WaitGroup
	defer reads.Wait()
	defer cancel()
	fetch := func(offset int64) chan contentPage {
		ch := make(chan contentPage, 1)
		reads.Go(func() { ch <- decodePage(read(ctx, ContentReadParams{ContentRef: d.ContentRef, Offset: offset})) })
		return ch
	}
	// The hash runs on its own goroutine, a page behind the decoding;
	// digest ends it, at the end of the read or when it fails.
	hashed, sum := make(chan []byte, 4), make(chan string, 1)
	go func() {
		h := sha256.New()
		for b := range hashed {
			h.Write(b)
		}
		sum <- hex.EncodeToString(h.Sum(nil))
	}()
	digest := sync.OnceValue(func() string {
		close(hashed)
		return <-sum
	})
	defer digest()
	data := make([]byte, 0, d.TotalBytes)
	ahead, next := readAhead, int64(0) // next: the offset to ask for next
	var pending []chan contentPage     // the pages asked for, in order
	for offset := int64(0); ; {
		for len(pending) == 0 || len(pending) <= ahead && next < d.TotalBytes {
			pending = append(pending, fetch(next))
			next += ContentRefChunkBytes
		}
		page := <-pending[0]
		pending = pending[1:]
		switch {
		case page.err != nil:
			return nil, page.err
		case page.ContentRef != d.ContentRef || page.Offset != offset:
			return nil, bad("the page for offset %d echoes %s at %d", offset, page.ContentRef, page.Offset)
		case page.Encoding != EncodingUTF8:
			return nil, bad("encoding %q is not utf8", page.Encoding)
		case page.TotalBytes > FrameBytes:
			return nil, errorf(ReasonFrameTooLarge, "content %s is %d bytes, over the %d-byte limit", d.ContentRef, page.TotalBytes, FrameBytes)
		case page.TotalBytes != d.TotalBytes || !strings.EqualFold(page.SHA256, d.SHA256):
			return nil, bad("the page at %d describes another object (%d bytes, sha256 %.12s...)", offset, page.TotalBytes, page.SHA256)
		case page.NextOffset != 0 && page.NextOffset <= offset:
			return nil, bad("nextOffset %d makes no progress from %d", page.NextOffset, offset)
		}
		before := len(data)
		var err error
		if data, err = base64.StdEncoding.AppendDecode(data, page.DataBase64); err != nil {
			return nil, bad("the page at %d is not standard base64: %v", offset, err)
		}
		switch n := len(data) - before; {
		case n > ContentRefChunkBytes:
			return nil, bad("the page at %d holds %d bytes, over %d", offset, n, ContentRefChunkBytes)
		case int64(len(data)) > d.TotalBytes:
			return nil, bad("more than the %d bytes described", d.TotalBytes)
		case page.NextOffset != 0 && page.NextOffset != offset+int64(n):
			// Bytes are neither skipped nor read twice, and every page
			// but the last carries some: the pages are at most
			// totalBytes, however the peer answers.
			return nil, bad("nextOffset %d is not the page's end, %d", page.NextOffset, offset+int64(n))
		}
		hashed <- data[before:] // never written again, even if data grows
		if page.NextOffset == 0 {
			break
		}
		if page.NextOffset != offset+ContentRefChunkBytes {
			// A page shorter than the pages read ahead assumed: those are
			// left to end unread, and the rest is read a page at a time.
			ahead, pending, next = 0, nil, page.NextOffset
		}
		offset = page.NextOffset
	}
	switch {
	case int64(len(data)) != d.TotalBytes:
		return nil, bad("read %d bytes; the descriptor says %d", len(data), d.TotalBytes)
	case !strings.EqualFold(digest(), d.SHA256):
		return nil, bad("the bytes read do not match its SHA-256")
	}
	return data, nil
}

// contentPage is one page read by readContent: a ContentReadResult whose
// dataBase64 stays in the frame it came in (the strict walk checks it as
// it checks ContentReadResult, member for member, and the base64 is
// decoded from there), or the read's failure.
type contentPage struct {
	ContentRef string          `json:"contentRef" proto:"nonempty"`
	Offset     int64           `json:"offset" proto:"min=0"`
	DataBase64 json.RawMessage `json:"dataBase64" proto:"raw"`
	NextOffset int64           `json:"nextOffset,omitempty" proto:"min=0"`
	TotalBytes int64           `json:"totalBytes" proto:"min=0"`
	SHA256     string          `json:"sha256" proto:"sha256"`
	Encoding   ContentEncoding `json:"encoding"`

	err error // the read or its decoding failed: the members are not set
}

// decodePage strictly decodes the result a read returned, unless the
// read failed, into a contentPage whose DataBase64 is the base64 text,
// unquoted (D3). A dataBase64 that is no plain string (escapes, or not a
// string at all) and any failure take Decode itself, so a page is
// exactly as strict as Decode and fails with its error.
func decodePage(raw json.RawMessage, err error) (p contentPage) {
	if err != nil {
		return contentPage{err: err}
	}
	if Unmarshal(raw, &p) == nil && len(p.DataBase64) >= 2 && p.DataBase64[0] == '"' && !bytes.Contains(p.DataBase64, []byte(`\`)) {
		p.DataBase64 = p.DataBase64[1 : len(p.DataBase64)-1] // the string's text: no escape to decode
		return p
	}
	var res ContentReadResult
	err = Decode(MethodContentRead, raw, &res)
	return contentPage{ContentRef: res.ContentRef, Offset: res.Offset, DataBase64: []byte(res.DataBase64), NextOffset: res.NextOffset, TotalBytes: res.TotalBytes, SHA256: res.SHA256, Encoding: res.Encoding, err: err}
}
