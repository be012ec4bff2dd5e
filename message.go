package extension

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// ID is a JSON-RPC request id. v1 ids are JSON integer literals that fit in
// an int64 (D4); each side numbers its own requests from 1.
type ID int64

// MessageKind tells the three JSON-RPC message shapes apart.
type MessageKind uint8

// The message kinds.
const (
	KindRequest      MessageKind = iota + 1 // method and id
	KindNotification                        // method, no id
	KindResponse                            // id and exactly one of result or error
)

// String returns "request", "notification" or "response".
func (k MessageKind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindNotification:
		return "notification"
	case KindResponse:
		return "response"
	}
	return "invalid"
}

// Message is one decoded JSON-RPC envelope. Params and Result are the raw
// member values, not yet strictly decoded; they never alias the frame
// buffer they were read from.
type Message struct {
	Kind   MessageKind
	ID     ID              // requests and responses
	Method string          // requests and notifications
	Params json.RawMessage // requests and notifications; nil when absent (D5: read as {})
	Result json.RawMessage // successful responses
	Error  *Error          // error responses, decoded per D7
}

// FrameError describes a frame that is not a valid envelope: what to
// answer, and with which id. It is never connection-fatal by itself.
type FrameError struct {
	// Err is the error to answer: code -32700 for text that is not JSON,
	// -32600 otherwise, always with reason protocol_error (D7).
	Err *Error
	// ID is the id to echo; HasID is false when the answer carries id null
	// (the id was absent or itself invalid, D4).
	ID    ID
	HasID bool
	// Kind is the shape the frame claimed, when that much could be read.
	Kind MessageKind
}

// Error returns the message of the error to answer.
func (e *FrameError) Error() string { return e.Err.Error() }

// Unwrap returns the *Error to answer.
func (e *FrameError) Unwrap() error { return e.Err }

// envelope member names; only these exact names count (D3).
const (
	memberJSONRPC = "jsonrpc"
	memberID      = "id"
	memberMethod  = "method"
	memberParams  = "params"
	memberResult  = "result"
	memberError   = "error"
)

// decodeMessage parses one frame: the line without its terminator. Unknown
// members are tolerated at the envelope level, but duplicates of any member
// and anything that is not exactly one JSON object are not (D3, D4, D5).
func decodeMessage(line []byte) (Message, *FrameError) {
	if !utf8.Valid(line) {
		// D2: invalid UTF-8 is a protocol_error for that frame.
		return Message{}, &FrameError{Err: NewError(ReasonProtocolError, "frame is not valid UTF-8")}
	}
	var spans [6][]byte // raw values of the six members, by memberIndex
	s := scanner{data: line}
	if err := s.envelope(&spans); err != nil {
		return Message{}, err
	}
	return buildMessage(&spans)
}

// memberIndex maps an exact envelope member name to its slot in spans.
func memberIndex(name []byte) int {
	switch string(name) {
	case memberJSONRPC:
		return 0
	case memberID:
		return 1
	case memberMethod:
		return 2
	case memberParams:
		return 3
	case memberResult:
		return 4
	case memberError:
		return 5
	}
	return -1
}

func invalidRequest(msg string) *Error { return NewError(ReasonProtocolError, "invalid request: "+msg) }

// buildMessage checks the envelope rules of CONTRACT-NOTES §1.2 on the raw
// member values.
func buildMessage(spans *[6][]byte) (Message, *FrameError) {
	jsonrpc, idRaw, methodRaw, params, result, errRaw := spans[0], spans[1], spans[2], spans[3], spans[4], spans[5]
	var m Message
	fe := &FrameError{}
	if methodRaw == nil && (result != nil || errRaw != nil) {
		// Response-shaped: whatever is wrong with it, it is never
		// answered, or two peers could trade error responses forever.
		fe.Kind = KindResponse
	}
	if idRaw != nil {
		id, ok := parseID(idRaw)
		if !ok {
			// D4: string, null, fractional and out-of-range ids get id null.
			fe.Err = invalidRequest("id must be an integer that fits in int64")
			return m, fe
		}
		m.ID, fe.ID, fe.HasID = id, id, true
	}
	switch {
	case methodRaw != nil:
		fe.Kind = KindRequest
		if idRaw == nil {
			fe.Kind = KindNotification
		}
	case idRaw != nil:
		fe.Kind = KindResponse
	}
	if string(jsonrpc) != `"2.0"` {
		fe.Err = invalidRequest(`jsonrpc must be exactly "2.0"`)
		return m, fe
	}
	if methodRaw != nil {
		if result != nil || errRaw != nil {
			fe.Err = invalidRequest("a request must not carry result or error")
			return m, fe
		}
		method, ok := plainString(methodRaw)
		if !ok || method == "" {
			fe.Err = invalidRequest("method must be a non-empty string")
			return m, fe
		}
		if params != nil && (len(params) == 0 || params[0] != '{') {
			// D5: when present, params must be an object.
			fe.Err = invalidRequest("params must be an object")
			return m, fe
		}
		m.Kind, m.Method, m.Params = fe.Kind, method, cloneRaw(params)
		return m, nil
	}
	if idRaw == nil {
		fe.Err = invalidRequest("a frame needs a method or an id")
		return m, fe
	}
	if params != nil {
		fe.Err = invalidRequest("a response must not carry params")
		return m, fe
	}
	if (result == nil) == (errRaw == nil) {
		fe.Err = invalidRequest("a response carries exactly one of result and error")
		return m, fe
	}
	m.Kind = KindResponse
	if result != nil {
		m.Result = cloneRaw(result)
		return m, nil
	}
	e, ok := decodeWireError(errRaw)
	if !ok {
		fe.Err = invalidRequest("error must be an object with an integer code and a string message")
		return m, fe
	}
	m.Error = e
	return m, nil
}

// parseID accepts exactly a JSON integer literal without fraction, exponent,
// leading zero or "-0" that fits in an int64 (D4).
func parseID(raw []byte) (ID, bool) {
	if len(raw) == 0 || len(raw) > 20 {
		return 0, false
	}
	digits := raw
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || (digits[0] == '0' && len(raw) > 1) {
		return 0, false // leading zero, or -0
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, false
	}
	return ID(n), true
}

// plainString decodes a raw JSON string value.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(raw[1:len(raw)-1], '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func cloneRaw(raw []byte) json.RawMessage {
	if raw == nil {
		return nil
	}
	return append(json.RawMessage(nil), raw...)
}

// decodeWireError reads a JSON-RPC error object leniently: code and message
// are required; data is trusted as a protocol error only when it carries a
// frozen reason with the frozen retryable flag (CONTRACT-NOTES §9.3). An
// optional string member "action" is accepted and ignored (D7).
func decodeWireError(raw []byte) (*Error, bool) {
	var v [3][]byte // code, message, data
	if !exactMembers(raw, v[:], "code", "message", "data") || v[0] == nil || v[1] == nil {
		return nil, false
	}
	n, ok := parseID(v[0])
	msg, isString := plainString(v[1])
	if !ok || !isString || int64(n) != int64(int(n)) {
		return nil, false
	}
	e := &Error{Code: int(n), Message: msg}
	if v[2] != nil && string(v[2]) != "null" {
		if r, ok := decodeErrorData(v[2]); ok {
			e.Reason = r
		} else {
			e.Data = cloneRaw(v[2])
		}
	}
	return e, true
}

// decodeErrorData accepts data as a protocol error only when it carries a
// frozen reason with the frozen retryable flag; a string member "action" is
// accepted and ignored, other members are ignored too (D7).
func decodeErrorData(data []byte) (Reason, bool) {
	var v [3][]byte // reason, retryable, action
	if !exactMembers(data, v[:], "reason", "retryable", "action") || v[0] == nil || v[1] == nil {
		return "", false
	}
	name, ok := plainString(v[0])
	r := Reason(name)
	if !ok || !r.Valid() || string(v[1]) != strconv.FormatBool(r.Retryable()) {
		return "", false
	}
	if v[2] != nil {
		if _, ok := plainString(v[2]); !ok {
			return "", false
		}
	}
	return r, true
}

// exactMembers scans a JSON object and stores in values[i] the raw value of
// the member named exactly names[i]. Other members are skipped; duplicate
// members and anything but one object make it fail (D3).
func exactMembers(raw []byte, values [][]byte, names ...string) bool {
	if len(raw) == 0 || raw[0] != '{' {
		return false
	}
	var dup dupState
	s := scanner{data: raw}
	more, err := s.openObject()
	for more && err == nil {
		var key, v []byte
		var escaped bool
		if key, escaped, err = s.key(); err != nil || dup.seen(0, key, escaped) {
			return false
		}
		if v, err = s.value(nil); err != nil {
			return false
		}
		name := unquote(key, escaped)
		for i, n := range names {
			if n == name {
				values[i] = v
			}
		}
		more, err = s.nextMember()
	}
	return err == nil && s.end() == nil
}

// Frame encoders. Frames are compact JSON, HTML escaping disabled, followed
// by "\n" (CONTRACT-NOTES §1.1).

type requestFrame struct {
	JSONRPC string `json:"jsonrpc"`
	ID      *ID    `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

type responseFrame struct {
	JSONRPC string     `json:"jsonrpc"`
	ID      *ID        `json:"id"` // null when the id is unknown
	Result  any        `json:"result,omitempty"`
	Error   *wireError `json:"error,omitempty"`
}

func encodeFrame(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil // Encode ends the frame with "\n"
}

// encodeRequest encodes a request frame, or a notification when id is nil.
func encodeRequest(id *ID, method string, params any) ([]byte, error) {
	params = orEmptyObject(params) // D5: params, when sent, is an object

	return encodeFrame(requestFrame{JSONRPC: "2.0", ID: id, Method: method, Params: params})
}

// encodeResult encodes a successful response. A nil result is sent as {}.
func encodeResult(id ID, result any) ([]byte, error) {
	result = orEmptyObject(result)
	return encodeFrame(responseFrame{JSONRPC: "2.0", ID: &id, Result: result})
}

// orEmptyObject replaces a nil value, including a nil json.RawMessage
// (which would encode as null), with an empty object.
func orEmptyObject(v any) any {
	if raw, ok := v.(json.RawMessage); v == nil || ok && len(raw) == 0 {
		return struct{}{}
	}
	return v
}

// encodeError encodes an error response; a nil id is sent as null.
func encodeError(id *ID, e *Error) []byte {
	w := e.toWire()
	b, err := encodeFrame(responseFrame{JSONRPC: "2.0", ID: id, Error: &w})
	if err != nil {
		// Only a caller-supplied Data that is not valid JSON can fail;
		// the answer goes out without it rather than not at all.
		w.Data = nil
		b, _ = encodeFrame(responseFrame{JSONRPC: "2.0", ID: id, Error: &w})
	}
	return b
}

// FrameBytes is the frozen limit on one NDJSON frame, including its "\n".
const FrameBytes = 8 << 20
