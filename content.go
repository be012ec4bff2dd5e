package extension

import (
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

// put stores data, at most FrameBytes (the caller checks), evicting the
// oldest objects until both bounds hold, and returns its descriptor at
// pointer.
func (cs *contentStore) put(data []byte, pointer string) ExternalizedField {
	sum := sha256.Sum256(data)
	d := ExternalizedField{JSONPointer: pointer, ContentRef: randomID("content_"), TotalBytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
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

// read answers host/content/read as a result value; the host reads its
// own store this way for an externalized replacement.
func (cs *contentStore) read(ctx context.Context, p ContentReadParams) (ContentReadResult, error) {
	chunk, res, err := cs.page(p)
	res.DataBase64 = base64.StdEncoding.EncodeToString(chunk)
	return res, err
}

// answer is read's result encoded by hand, with the bytes encoded
// straight into it: the same JSON encoding/json writes for it (every
// string in it is plain: a host-minted ref, base64, hex, "utf8"), at a
// third of its cost for 8 MiB of pages (exthost bench, content_8mib).
func (cs *contentStore) answer(p ContentReadParams) (preEncoded, error) {
	chunk, res, err := cs.page(p)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, base64.StdEncoding.EncodedLen(len(chunk))+len(res.ContentRef)+200)
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
// the stored copy at /payload (D22). payload is compact when large.
func (cs *contentStore) externalize(payload json.RawMessage) (json.RawMessage, []ExternalizedField) {
	if len(payload) <= ExternalizeFieldBytes {
		return payload, nil
	}
	return json.RawMessage("null"), []ExternalizedField{cs.put(payload, "/payload")}
}

// randomID is prefix and 24 lowercase hex digits of 12 random bytes: the
// host's content refs and stream ids (PROTOCOL.md §5.2, §6.2).
func randomID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// readPage reads one page of a content object, as host/content/read
// answers it.
type readPage = func(ctx context.Context, p ContentReadParams) (ContentReadResult, error)

// Rehydrate resolves the externalizable member of an owner document
// (PROTOCOL.md §6.2): inline is the member as it came (nil when absent),
// ext the document's externalized array and pointer the member's
// pointer ("/payload" or "/replacement"). Without descriptors it returns
// inline. Otherwise inline must be absent or null and ext one descriptor
// at pointer (else protocol_error), then the object is read through read
// and verified by readContent. The errors carry the reason of §6.2:
// protocol_error, frame_too_large or content_ref_expired.
func Rehydrate(ctx context.Context, inline json.RawMessage, ext []ExternalizedField, pointer string, read func(context.Context, ContentReadParams) (ContentReadResult, error)) (json.RawMessage, error) {
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
func readContent(ctx context.Context, d ExternalizedField, read readPage) ([]byte, error) {
	if d.TotalBytes > FrameBytes {
		return nil, errorf(ReasonFrameTooLarge, "content %s is %d bytes, over the %d-byte limit", d.ContentRef, d.TotalBytes, FrameBytes)
	}
	bad := func(format string, args ...any) error {
		return errorf(ReasonProtocolError, "content %s: "+format, append([]any{d.ContentRef}, args...)...)
	}
	// The next page is asked for as soon as its offset is known, before
	// this one is decoded and hashed, so the two sides work at once: an
	// 8 MiB read took a quarter less (exthost bench, content_8mib). The
	// prefetch ends with this call: its context is cancelled and it is
	// waited for.
	ctx, cancel := context.WithCancel(ctx)
	var pending chan pageRead
	defer func() {
		cancel()
		if pending != nil {
			<-pending
		}
	}()
	fetch := func(offset int64) chan pageRead {
		ch := make(chan pageRead, 1)
		go func() {
			page, err := read(ctx, ContentReadParams{ContentRef: d.ContentRef, Offset: offset})
			ch <- pageRead{page, err}
		}()
		return ch
	}
	// The hash runs on its own goroutine, a page behind the decoding.
	hashed, sum := make(chan []byte, 4), make(chan string, 1)
	go func(in <-chan []byte) {
		h := sha256.New()
		for b := range in {
			h.Write(b)
		}
		sum <- hex.EncodeToString(h.Sum(nil))
	}(hashed)
	hashing := true
	defer func() {
		if hashing {
			close(hashed)
			<-sum
		}
	}()
	data := make([]byte, 0, d.TotalBytes)
	var text []byte // a page's base64, copied out of its string into one reused buffer
	pending = fetch(0)
	for offset := int64(0); pending != nil; {
		r := <-pending
		pending = nil
		page := r.page
		switch {
		case r.err != nil:
			return nil, r.err
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
		if page.NextOffset != 0 {
			pending = fetch(page.NextOffset)
		}
		before := len(data)
		var err error
		text = append(text[:0], page.DataBase64...)
		if data, err = base64.StdEncoding.AppendDecode(data, text); err != nil {
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
		offset = page.NextOffset
	}
	close(hashed)
	hashing = false
	digest := <-sum
	switch {
	case int64(len(data)) != d.TotalBytes:
		return nil, bad("read %d bytes; the descriptor says %d", len(data), d.TotalBytes)
	case !strings.EqualFold(digest, d.SHA256):
		return nil, bad("the bytes read do not match its SHA-256")
	}
	return data, nil
}

// pageRead is one page read ahead by ReadContent.
type pageRead struct {
	page ContentReadResult
	err  error
}
