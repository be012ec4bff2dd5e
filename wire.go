package extension

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Framing (D2, PROTOCOL.md §2.1): one JSON value per "\n"-terminated
// line. The reader below never holds more than the frame limit of one line
// in memory, plus its fixed read buffer; the writer below writes one
// pre-encoded frame at a time, in chunks, so that a watchdog can observe its
// byte progress.

// readBufferSize is the fixed buffer the frame reader reads through, and
// writeChunkSize the largest single Write the frame writer issues. Both are
// small next to [FrameBytes].
const (
	readBufferSize = 64 << 10
	writeChunkSize = 64 << 10
)

// frameReader reads NDJSON frames from an io.Reader. It is used by one
// goroutine at a time; consumed may be called from any.
type frameReader struct {
	br    *bufio.Reader
	in    *countingReader
	limit int // bytes a line may take including its "\n"

	// line accumulates a line longer than the read buffer. Its capacity
	// never exceeds limit; it is reused across frames unless it grew past
	// lineKeepBytes.
	line []byte
}

// lineKeepBytes is the largest line buffer kept between frames; a larger
// one, needed for one big frame, is released before the next read.
const lineKeepBytes = 1 << 20

func newFrameReader(r io.Reader) *frameReader {
	return newFrameReaderSize(r, FrameBytes, readBufferSize)
}

// newFrameReaderSize is newFrameReader with an explicit limit and read
// buffer size, for tests.
func newFrameReaderSize(r io.Reader, limit, bufSize int) *frameReader {
	in := &countingReader{r: r}
	return &frameReader{br: bufio.NewReaderSize(in, bufSize), in: in, limit: limit}
}

// countingReader counts the bytes read from r. beforeRead, when set, is
// called with the count before each Read of r.
type countingReader struct {
	r          io.Reader
	n          atomic.Int64
	beforeRead func(n int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.beforeRead != nil {
		c.beforeRead(c.n.Load())
	}
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// consumed returns how many bytes have been read from the input so far,
// the read buffer's included; frameEnd, on the reader's goroutine, the
// offset just past the last frame returned. The barrier compares them: a
// frame whose last byte was read before the host began to write
// extension/initialized is pre-barrier (D6).
func (fr *frameReader) consumed() int64 { return fr.in.n.Load() }

func (fr *frameReader) frameEnd() int64 { return fr.in.n.Load() - int64(fr.br.Buffered()) }

// readFrame returns the next non-empty frame: one line without its "\n",
// with a trailing "\r" and surrounding spaces and tabs removed. The frame
// may alias an internal buffer and is valid until the next call.
//
// D2: a line including its "\n" may take at most limit bytes. A final line
// that ends at EOF without "\n" is still returned, and is counted as if it
// had its "\n", so the same content is accepted with or without it. A longer
// line yields an *Error with reason frame_too_large as soon as the limit is
// passed: the rest of the line is not read, and the reader must not be used
// again. At the end of the input readFrame returns io.EOF; a read error is
// returned as is.
func (fr *frameReader) readFrame() ([]byte, error) {
	for {
		raw, err := fr.readLine()
		if err != nil {
			return nil, err
		}
		// D2: strip the "\r" of a CRLF line and surrounding blanks; skip
		// empty lines.
		frame := bytes.TrimLeft(bytes.TrimRight(raw, " \t\r"), " \t")
		if len(frame) > 0 {
			return frame, nil
		}
	}
}

// readLine returns one raw line without its "\n".
func (fr *frameReader) readLine() ([]byte, error) {
	if cap(fr.line) > lineKeepBytes {
		fr.line = nil
	}
	fr.line = fr.line[:0]
	for {
		chunk, err := fr.br.ReadSlice('\n')
		more := errors.Is(err, bufio.ErrBufferFull) // no "\n" yet: the line goes on
		if err != nil && err != io.EOF && !more {
			return nil, err
		}
		size := len(fr.line) + len(chunk)
		if err == io.EOF && size == 0 {
			return nil, io.EOF
		}
		if err == nil {
			chunk = chunk[:len(chunk)-1] // the "\n", counted in size
		} else {
			// A line with no "\n" yet needs at least one more byte; a
			// final line without "\n" counts as if it had one.
			size++
		}
		if size > fr.limit {
			return nil, NewError(ReasonFrameTooLarge, fmt.Sprintf("inbound frame exceeds %d bytes including its newline", fr.limit)) // terminal
		}
		if len(fr.line) == 0 && !more {
			return chunk, nil // aliases the read buffer
		}
		// The line buffer grows in steps of four, so that the buffers
		// allocated for one line add up to well under twice the limit, and
		// never to a capacity above the limit (size, checked above, is
		// need plus the "\n").
		if need := len(fr.line) + len(chunk); need > cap(fr.line) {
			c := min(max(4*cap(fr.line), need, fr.br.Size()), fr.limit)
			fr.line = append(make([]byte, 0, c), fr.line...)
		}
		fr.line = append(fr.line, chunk...)
		if !more {
			return fr.line, nil
		}
	}
}

// frameWriter writes pre-encoded frames, each already ending in "\n". It is
// used by exactly one goroutine, so frames never interleave (D2); the
// progress stamp is read by the write-stall watchdog from another.
type frameWriter struct {
	w     io.Writer
	epoch time.Time // monotonic origin of progress

	// progress is the time since epoch, in nanoseconds plus one, of the
	// last byte progress of the write in progress; 0 when no write is in
	// progress.
	progress atomic.Int64
}

func (fw *frameWriter) stamp() { fw.progress.Store(int64(time.Since(fw.epoch)) + 1) }

// writeFrame writes frame completely, in chunks of at most writeChunkSize
// bytes, stamping the progress after each chunk.
func (fw *frameWriter) writeFrame(frame []byte) error {
	fw.stamp()
	defer fw.progress.Store(0)
	for len(frame) > 0 {
		n := min(len(frame), writeChunkSize)
		if _, err := fw.w.Write(frame[:n]); err != nil {
			return err
		}
		frame = frame[n:]
		fw.stamp()
	}
	return nil
}

// stalledFor returns how long the write in progress has made no byte
// progress, or 0 when no write is in progress.
func (fw *frameWriter) stalledFor() time.Duration {
	p := fw.progress.Load()
	if p == 0 {
		return 0
	}
	return time.Since(fw.epoch) - time.Duration(p-1)
}

// JSON-RPC envelopes (PROTOCOL.md §2.3, §2.4): decoding a frame into a
// message, and encoding the frames a Conn sends.

// msgID is a JSON-RPC request id: a JSON integer literal that fits in an
// int64 (D4). Each side numbers its own requests from 1.
type msgID int64

// msgKind tells the three JSON-RPC message shapes apart.
type msgKind uint8

const (
	kindRequest      msgKind = iota + 1 // method and id
	kindNotification                    // method, no id
	kindResponse                        // id and exactly one of result or error
)

func (k msgKind) String() string {
	return [...]string{"invalid", "request", "notification", "response"}[k]
}

// message is one decoded envelope. params and result are the raw member
// values, not yet strictly decoded; they never alias the frame buffer.
type message struct {
	kind   msgKind
	id     msgID           // requests and responses
	method string          // requests and notifications
	params json.RawMessage // nil when absent (D5: read as {})
	result json.RawMessage // successful responses
	err    *Error          // error responses, decoded per D7
}

// frameError describes a frame that is not a valid envelope: what to
// answer and with which id. It is never connection-fatal by itself.
type frameError struct {
	err   *Error  // code -32700 for text that is not JSON, -32600 otherwise
	id    msgID   // the id to echo when hasID
	hasID bool    // false: the answer carries id null (D4)
	kind  msgKind // the shape the frame claimed, when that much could be read
}

// envelope is a frame's top-level object. Only these exact member names
// count, other members are tolerated, and no member may repeat (D3).
type envelope struct {
	JSONRPC json.RawMessage `json:"jsonrpc,omitempty" proto:"raw"`
	ID      json.RawMessage `json:"id,omitempty" proto:"raw"`
	Method  json.RawMessage `json:"method,omitempty" proto:"raw"`
	Params  json.RawMessage `json:"params,omitempty" proto:"raw"`
	Result  json.RawMessage `json:"result,omitempty" proto:"raw"`
	Error   json.RawMessage `json:"error,omitempty" proto:"raw"`
}

func (envelope) openObject() {}

// mustNode returns the node of a private document type, built once.
func mustNode[T any]() func() *vnode {
	return sync.OnceValue(func() *vnode { return mustTypeNode(reflect.TypeFor[T]()) })
}

var envelopeNode = mustNode[envelope]()

// decodeMessage parses one frame, the line without its terminator (D2-D5).
func decodeMessage(line []byte) (message, *frameError) {
	s := scanner{data: line}
	switch c := s.peek(); {
	case c == 0:
		return message{}, &frameError{err: NewError(ReasonProtocolError, "parse error: empty frame")}
	case c != '{':
		if err := walk(rawNode, line, reflect.Value{}); err != nil {
			return message{}, walkError(line, err)
		}
		if c == '[' {
			return message{}, &frameError{err: invalidRequest("batch arrays are not supported")}
		}
		return message{}, &frameError{err: invalidRequest("a frame must be a JSON object")}
	}
	var env envelope
	if err := walk(envelopeNode(), line, reflect.ValueOf(&env).Elem()); err != nil {
		return message{}, walkError(line, err)
	}
	return buildMessage(&env)
}

// walkError answers a frame the walk failed on. D2: invalid UTF-8 is a
// protocol_error for that frame; a frame the walk accepts is valid UTF-8
// (the lexer checks every string, and any other byte above 0x7f is a
// syntax error), so only a failed one is looked at again. D3: a repeated
// member is ambiguous, whatever its name. Past these, the JSON syntax is
// all a walk can fail on.
func walkError(line []byte, err error) *frameError {
	ve := err.(*ValidationError)
	switch {
	case !utf8.Valid(line):
		return &frameError{err: NewError(ReasonProtocolError, "frame is not valid UTF-8")}
	case ve.rule == ruleDuplicate:
		return &frameError{err: invalidRequest("duplicate member " + quoteName(ve.detail))}
	}
	e := NewError(ReasonProtocolError, fmt.Sprintf("parse error: invalid JSON at byte %d: %s", ve.offset, ve.Msg))
	e.Code = codeParseError
	return &frameError{err: e}
}

func invalidRequest(msg string) *Error { return NewError(ReasonProtocolError, "invalid request: "+msg) }

// buildMessage checks the envelope rules of PROTOCOL.md §2.3 on the raw
// member values.
func buildMessage(env *envelope) (message, *frameError) {
	var m message
	var fe frameError // on the stack: a copy escapes only for a fault
	invalid := func(msg string) (message, *frameError) {
		f := fe
		f.err = invalidRequest(msg)
		return message{}, &f
	}
	switch {
	case env.Method != nil && env.ID != nil:
		fe.kind = kindRequest
	case env.Method != nil:
		fe.kind = kindNotification
	case env.ID != nil || env.Result != nil || env.Error != nil:
		// Response-shaped: whatever is wrong with it, its id included, it
		// is never answered, or two peers could trade error responses
		// forever.
		fe.kind = kindResponse
	}
	if env.ID != nil {
		id, ok := parseID(env.ID)
		if !ok {
			// D4: string, null, fractional and out-of-range ids get id null.
			return invalid("id must be an integer that fits in int64")
		}
		m.id, fe.id, fe.hasID = id, id, true
	}
	if string(env.JSONRPC) != `"2.0"` {
		return invalid(`jsonrpc must be exactly "2.0"`)
	}
	if env.Method != nil {
		method, ok := knownMethod(env.Method)
		if !ok {
			method, ok = plainString(env.Method)
		}
		switch {
		case env.Result != nil || env.Error != nil:
			return invalid("a request must not carry result or error")
		case !ok || method == "":
			return invalid("method must be a non-empty string")
		case env.Params != nil && env.Params[0] != '{':
			// D5: when present, params must be an object.
			return invalid("params must be an object")
		}
		m.kind, m.method, m.params = fe.kind, method, bytes.Clone(env.Params)
		return m, nil
	}
	switch {
	case env.ID == nil:
		return invalid("a frame needs a method or an id")
	case env.Params != nil:
		return invalid("a response must not carry params")
	case (env.Result == nil) == (env.Error == nil):
		return invalid("a response carries exactly one of result and error")
	case env.Error != nil:
		var ok bool
		if m.err, ok = decodeWireError(env.Error); !ok {
			return invalid("error must be an object with an integer code and a string message")
		}
	}
	m.kind, m.result = kindResponse, bytes.Clone(env.Result)
	return m, nil
}

// knownMethod returns the registry's own string for a raw method name
// that is one of the protocol's, without allocating one per frame.
func knownMethod(raw []byte) (string, bool) {
	if len(raw) < 2 {
		return "", false
	}
	m, ok := methodsByName()[string(raw[1:len(raw)-1])] // no allocation
	return m.Name, ok
}

// parseID accepts exactly a JSON integer literal without fraction, exponent,
// leading zero or "-0" that fits in an int64 (D4).
func parseID(raw []byte) (msgID, bool) {
	digits := bytes.TrimPrefix(raw, []byte("-"))
	if len(digits) == 0 || digits[0] == '0' && len(raw) > 1 || bytes.ContainsFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) {
		return 0, false // not an integer literal, a leading zero, or -0
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return msgID(n), err == nil
}

var (
	wireErrorNode = mustNode[wireError]()
	errorDataNode = mustNode[errorData]()
)

// decodeWireError reads a JSON-RPC error object. Its data is trusted as a
// protocol error only when it carries a frozen reason with the frozen
// retryable flag (D7); otherwise the raw data is kept.
func decodeWireError(raw []byte) (*Error, bool) {
	var o wireError
	if walk(wireErrorNode(), raw, reflect.ValueOf(&o).Elem()) != nil || o.Code != int64(int(o.Code)) {
		return nil, false
	}
	e := &Error{Code: int(o.Code), Message: o.Message}
	if o.Data != nil && string(o.Data) != "null" {
		var d errorData
		err := walk(errorDataNode(), o.Data, reflect.ValueOf(&d).Elem())
		if info, frozen := d.Reason.info(); err == nil && frozen && d.Retryable == info.Retryable {
			e.Reason = d.Reason
		} else {
			e.Data = bytes.Clone(o.Data)
		}
	}
	return e, true
}

// Frame encoders. Frames are compact JSON, HTML escaping disabled, followed
// by "\n" (PROTOCOL.md §2.1).

type requestFrame struct {
	JSONRPC string `json:"jsonrpc"`
	ID      *msgID `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

type responseFrame struct {
	JSONRPC string     `json:"jsonrpc"`
	ID      *msgID     `json:"id"` // null when the id is unknown
	Result  any        `json:"result,omitempty"`
	Error   *wireError `json:"error,omitempty"`
}

func encodeFrame(v any) ([]byte, error) {
	e := encoders.Get().(*frameEncoder)
	defer encoders.Put(e)
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return nil, err
	}
	frame := bytes.Clone(e.buf.Bytes()) // Encode ends the frame with "\n"
	if e.buf.Cap() > readBufferSize {
		e.buf = bytes.Buffer{} // a large frame's room is not kept
	}
	return frame, nil
}

// frameEncoder is an encoder with its buffer, pooled: a frame then costs
// one allocation, its own bytes, on the hot paths that encode one per
// call.
type frameEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var encoders = sync.Pool{New: func() any {
	e := new(frameEncoder)
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	return e
}}

// encodeRequest encodes a request frame, or a notification when id is nil.
// Params the caller encoded itself (a json.RawMessage object, as the SDK
// encodes a stream chunk's) for a method of the registry are checked by
// the strict walk's syntax pass and spliced in, not encoded again: a
// chunk is encoded once, which a stream's pace needs.
func encodeRequest(id *msgID, method string, params any) ([]byte, error) {
	raw, ok := params.(json.RawMessage)
	if _, known := methodsByName()[method]; !ok || !known || len(raw) == 0 {
		return encodeFrame(requestFrame{JSONRPC: "2.0", ID: id, Method: method, Params: orEmptyObject(params)})
	}
	raw, err := compactValue(raw)
	if err == nil && raw[0] != '{' {
		err = fmt.Errorf("the params of %s must be a JSON object (D5)", method)
	}
	if err != nil {
		return nil, err
	}
	b := append(make([]byte, 0, len(raw)+len(method)+64), `{"jsonrpc":"2.0",`...)
	if id != nil {
		b = append(strconv.AppendInt(append(b, `"id":`...), int64(*id), 10), ',')
	}
	b = append(append(append(b, `"method":"`...), method...), `","params":`...) // a registry name needs no escape
	return append(append(b, raw...), "}\n"...), nil
}

// preEncoded is a result a handler of this package has encoded itself:
// preHead bytes of room, then valid, compact JSON. The response's head is
// written into the room and its end appended, so a content page (D22) is
// never copied into its frame.
type preEncoded []byte

// preHead is the room before a preEncoded result: the longest head,
// {"jsonrpc":"2.0","id":-9223372036854775808,"result":, fits in it.
const preHead = 64

// encodeResult encodes a successful response. A nil result is sent as {}.
func encodeResult(id msgID, result any) ([]byte, error) {
	if raw, ok := result.(preEncoded); ok {
		var room [preHead]byte
		head := append(strconv.AppendInt(append(room[:0], `{"jsonrpc":"2.0","id":`...), int64(id), 10), `,"result":`...)
		b := raw[preHead-len(head):]
		copy(b, head)
		return append(b, "}\n"...), nil
	}
	return encodeFrame(responseFrame{JSONRPC: "2.0", ID: &id, Result: orEmptyObject(result)})
}

// orEmptyObject replaces a nil value, including a nil json.RawMessage
// (which would encode as null), with an empty object: D5, params when sent
// are an object.
func orEmptyObject(v any) any {
	if raw, ok := v.(json.RawMessage); v == nil || ok && len(raw) == 0 {
		return struct{}{}
	}
	return v
}

// encodeError encodes an error response; a nil id is sent as null.
func encodeError(id *msgID, e *Error) []byte {
	w := e.toWire()
	b, _ := encodeFrame(responseFrame{JSONRPC: "2.0", ID: id, Error: &w}) // cannot fail: toWire keeps only valid data
	return b
}
