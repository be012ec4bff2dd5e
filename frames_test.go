package extension

import (
	"encoding/json"
	"strings"
	"testing"
)

// frameCase is one adversarial frame and the outcome v1 prescribes for it
// (D2-D5, PROTOCOL.md §2.4).
type frameCase struct {
	name  string
	frame string // one line, without its "\n"

	// The answer, when there is one: code and reason of the error, and the
	// id it echoes (echo false: id null). reply "" means no answer at all;
	// "result" means a successful answer from the handler.
	reply  string // "", "error", "result"
	code   int
	reason Reason
	echo   bool
	id     msgID

	dropped bool // rejected by the envelope rules but never answered

	// Every frame of the table keeps the connection: the only frame that
	// ends it, one longer than FrameBytes, has its own tests in
	// conn_frames_test.go.
}

const shutdownParams = `"params":{"timeoutMillis":5}`

func req(id, rest string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"extension/shutdown",` + rest + `}`
}

// adversarialFrames are the frames of issue 2's acceptance 3 and more.
// Frames that need the reader (the 8 MiB boundary) are in the Conn-level
// table of conn_frames_test.go.
func adversarialFrames() []frameCase {
	invalid := func(name, frame string) frameCase {
		return frameCase{name: name, frame: frame, reply: "error", code: codeInvalidRequest, reason: ReasonProtocolError}
	}
	invalidEcho := func(name, frame string, id msgID) frameCase {
		c := invalid(name, frame)
		c.echo, c.id = true, id
		return c
	}
	parse := func(name, frame string) frameCase {
		return frameCase{name: name, frame: frame, reply: "error", code: codeParseError, reason: ReasonProtocolError}
	}
	badParams := func(name, frame string, id msgID) frameCase {
		return frameCase{name: name, frame: frame, reply: "error", code: codeInvalidParams, reason: ReasonInvalidParams, echo: true, id: id}
	}
	// dropped: a malformed response is never answered (PROTOCOL.md §2.4).
	dropped := func(name, frame string, id msgID) frameCase {
		return frameCase{name: name, frame: frame, dropped: true, code: codeInvalidRequest, reason: ReasonProtocolError, echo: id != 0, id: id}
	}
	ok := func(name, frame string, id msgID) frameCase {
		return frameCase{name: name, frame: frame, reply: "result", echo: true, id: id}
	}
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	return []frameCase{
		ok("valid request", req("1", shutdownParams), 1),
		ok("unknown envelope members tolerated", `{"jsonrpc":"2.0","id":2,"x-trace":"t","method":"extension/shutdown",`+shutdownParams+`}`, 2),
		ok("escaped member name counts by its decoded value", `{"jsonrpc":"2.0","id":3,"\u006dethod":"extension/shutdown",`+shutdownParams+`}`, 3),
		ok("leading and trailing blanks", "  \t"+req("4", shutdownParams)+" \t", 4),
		ok("trailing carriage return", req("5", shutdownParams)+"\r", 5),
		ok("negative id fits int64", req("-7", shutdownParams), -7),
		ok("largest int64 id", req("9223372036854775807", shutdownParams), 9223372036854775807),
		ok("smallest int64 id", req("-9223372036854775808", shutdownParams), -9223372036854775808),
		ok("members in any order", `{`+shutdownParams+`,"method":"extension/shutdown","id":8,"jsonrpc":"2.0"}`, 8),

		// D2: invalid UTF-8 is a protocol_error for that frame.
		invalid("invalid UTF-8 in a string", req("9", `"params":{"timeoutMillis":5,"x":"`+"\xff\xfe"+`"}`)),
		invalid("overlong UTF-8 encoding", `{"jsonrpc":"2.0","id":10,"method":"`+"\xc0\xaf"+`"}`),
		invalid("invalid UTF-8 outside strings", "\xff"),

		// D3: duplicates, and only the exact member names count.
		invalid("duplicate id", `{"jsonrpc":"2.0","id":1,"id":2,"method":"extension/shutdown",`+shutdownParams+`}`),
		invalid("duplicate method", `{"jsonrpc":"2.0","id":1,"method":"extension/shutdown","method":"extension/intercept",`+shutdownParams+`}`),
		invalid("duplicate unknown member", `{"jsonrpc":"2.0","id":1,"x":1,"x":2,"method":"extension/shutdown",`+shutdownParams+`}`),
		invalid("duplicate through an escape", `{"jsonrpc":"2.0","\u0069d":1,"id":2,"method":"extension/shutdown"}`),
		badParams("duplicate key inside params", req("11", `"params":{"timeoutMillis":5,"timeoutMillis":6}`), 11),
		badParams(`"DECISION" beside "decision" in params`, `{"jsonrpc":"2.0","id":12,"method":"extension/intercept","params":{"event":"tool.before","EVENT":"input.receive","seq":1,"payload":{},"timeoutMillis":0}}`, 12),
		badParams(`"paramſ" is not params (D5: absent params read as {})`, `{"jsonrpc":"2.0","id":13,"method":"extension/shutdown","paramſ":{"timeoutMillis":5}}`, 13),
		badParams(`"Params" is not params`, `{"jsonrpc":"2.0","id":14,"method":"extension/shutdown","Params":{"timeoutMillis":5}}`, 14),
		{name: `"ID" is not id: the frame is a notification`, frame: `{"jsonrpc":"2.0","ID":15,"method":"extension/initialized","params":{}}`},
		dropped(`"ID" without method is a response without id`, `{"jsonrpc":"2.0","ID":15,"result":{}}`, 0),
		dropped("response with a string id", `{"jsonrpc":"2.0","id":"7","result":{}}`, 0),
		dropped("error response with a null id", `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"m"}}`, 0),
		dropped(`"Method" is not method: an id without method is a response`, `{"jsonrpc":"2.0","id":16,"Method":"extension/shutdown"}`, 16),
		invalid(`"JSONRPC" is not jsonrpc`, `{"JSONRPC":"2.0","method":"extension/initialized"}`),

		// D4: ids.
		invalid("string id", req(`"1"`, shutdownParams)),
		invalid("null id", req("null", shutdownParams)),
		invalid("fractional id", req("1.5", shutdownParams)),
		invalid("integral fraction id", req("1.0", shutdownParams)),
		invalid("exponent id", req("1e2", shutdownParams)),
		invalid("negative zero id", req("-0", shutdownParams)),
		invalid("30-digit id", req("123456789012345678901234567890", shutdownParams)),
		invalid("id just past int64", req("9223372036854775808", shutdownParams)),
		invalid("boolean id", req("true", shutdownParams)),
		invalid("object id", req(`{"n":1}`, shutdownParams)),
		invalid("array id", req("[1]", shutdownParams)),
		invalid("1 MB number literal as id", req(strings.Repeat("7", 1<<20), shutdownParams)),
		parse("leading-zero id is not JSON", req("01", shutdownParams)),

		// D5: params.
		invalidEcho("array params", req("17", `"params":[5]`), 17),
		invalidEcho("string params", req("18", `"params":"x"`), 18),
		invalidEcho("null params", req("19", `"params":null`), 19),
		invalidEcho("number params", req("20", `"params":5`), 20),
		badParams("absent params read as {}", `{"jsonrpc":"2.0","id":21,"method":"extension/shutdown"}`, 21),
		badParams("1 MB number literal in params", req("22", `"params":{"timeoutMillis":`+strings.Repeat("9", 1<<20)+`}`), 22),
		badParams("fraction in an integer param", req("23", `"params":{"timeoutMillis":5.0}`), 23),
		badParams("null for a param", req("24", `"params":{"timeoutMillis":null}`), 24),
		badParams("unknown param", req("25", `"params":{"timeoutMillis":5,"force":true}`), 25),

		// Shapes that are not one JSON object.
		invalid("batch array", `[`+req("1", shutdownParams)+`]`),
		invalid("empty batch", `[]`),
		invalid("bare number", `42`),
		invalid("bare string", `"extension/shutdown"`),
		invalid("bare true", `true`),
		invalid("bare null", `null`),
		parse("trailing object after the object", req("26", shutdownParams)+` {}`),
		parse("trailing garbage after the object", req("27", shutdownParams)+`x`),
		parse("byte order mark", "\xef\xbb\xbf"+req("28", shutdownParams)),
		parse("unterminated object", `{"jsonrpc":"2.0","id":29`),
		parse("trailing comma", `{"jsonrpc":"2.0","id":30,}`),
		parse("unterminated string", `{"jsonrpc":"2.0","method":"ext`),
		parse("raw control character in a string", "{\"jsonrpc\":\"2.0\",\"method\":\"a\x01\"}"),
		parse("bad escape", `{"jsonrpc":"2.0","method":"a\x"}`),
		parse("NUL byte", "{\x00}"),
		parse("single quotes", `{'jsonrpc':'2.0'}`),
		parse("100,000 levels of nesting", `{"jsonrpc":"2.0","id":31,"method":"extension/shutdown","params":{"x":`+deep+`}}`),

		// The jsonrpc member.
		invalidEcho("missing jsonrpc", `{"id":32,"method":"extension/shutdown",`+shutdownParams+`}`, 32),
		invalidEcho(`"jsonrpc":"1.0"`, `{"jsonrpc":"1.0","id":33,"method":"extension/shutdown",`+shutdownParams+`}`, 33),
		invalidEcho(`"jsonrpc":2.0 as a number`, `{"jsonrpc":2.0,"id":34,"method":"extension/shutdown",`+shutdownParams+`}`, 34),
		invalidEcho(`"jsonrpc":"2.0 " with a space`, `{"jsonrpc":"2.0 ","id":35,"method":"extension/shutdown",`+shutdownParams+`}`, 35),

		// Requests and responses that mix their members.
		dropped("response with both result and error", `{"jsonrpc":"2.0","id":36,"result":{},"error":{"code":-32603,"message":"m"}}`, 36),
		dropped("response with neither result nor error", `{"jsonrpc":"2.0","id":37}`, 37),
		dropped("an invalid id alone is response-shaped", `{"jsonrpc":"2.0","id":"37"}`, 0),
		dropped("a null id alone is response-shaped", `{"jsonrpc":"2.0","id":null}`, 0),
		dropped("response with params", `{"jsonrpc":"2.0","id":38,"result":{},"params":{}}`, 38),
		invalidEcho("request with result", `{"jsonrpc":"2.0","id":39,"method":"extension/shutdown","result":{}}`, 39),
		invalidEcho("request with error", `{"jsonrpc":"2.0","id":40,"method":"extension/shutdown","error":{"code":1,"message":"m"}}`, 40),
		invalidEcho("empty method", `{"jsonrpc":"2.0","id":41,"method":""}`, 41),
		invalidEcho("numeric method", `{"jsonrpc":"2.0","id":42,"method":7}`, 42),
		dropped("error without code", `{"jsonrpc":"2.0","id":43,"error":{"message":"m"}}`, 43),
		dropped("error with a string code", `{"jsonrpc":"2.0","id":44,"error":{"code":"-32000","message":"m"}}`, 44),
		dropped("error that is not an object", `{"jsonrpc":"2.0","id":45,"error":"boom"}`, 45),
		invalid("neither method nor id", `{"jsonrpc":"2.0","params":{}}`),
		invalid("empty object", `{}`),

		// Unknown methods and stray traffic.
		{name: "unknown method", frame: `{"jsonrpc":"2.0","id":46,"method":"extension/bogus","params":{}}`, reply: "error", code: codeMethodNotFound, reason: ReasonUnknownMethod, echo: true, id: 46},
		{name: "unknown notification is dropped", frame: `{"jsonrpc":"2.0","method":"extension/bogus","params":{}}`},
		{name: "response to an unknown id is dropped (D4)", frame: `{"jsonrpc":"2.0","id":999,"result":{}}`},
		{name: "error response to an unknown id is dropped", frame: `{"jsonrpc":"2.0","id":998,"error":{"code":-32000,"message":"m","data":{"reason":"internal","retryable":true}}}`},
	}
}

func TestAdversarialFrameTableIsLargeEnough(t *testing.T) {
	if n := len(adversarialFrames()); n < 60 {
		t.Fatalf("%d adversarial frames, want at least 60", n)
	}
}

// TestDecodeMessageAdversarialFrames checks the envelope-level half of each
// outcome: the code, reason and echoed id of every frame decodeMessage
// itself must reject.
func TestDecodeMessageAdversarialFrames(t *testing.T) {
	for _, c := range adversarialFrames() {
		t.Run(c.name, func(t *testing.T) {
			m, fe := decodeMessage([]byte(strings.TrimRight(strings.Trim(c.frame, " \t"), "\r")))
			envelopeError := c.dropped || c.reply == "error" && (c.code == codeInvalidRequest || c.code == codeParseError)
			if !envelopeError {
				if fe != nil {
					t.Fatalf("decodeMessage rejected a frame the envelope admits: %v", fe)
				}
				if c.echo && m.id != c.id {
					t.Fatalf("decoded id %d, want %d", m.id, c.id)
				}
				return
			}
			if fe == nil {
				t.Fatalf("decodeMessage accepted %.80q as %v", c.frame, m.kind)
			}
			if fe.err.Code != c.code || fe.err.Reason != c.reason {
				t.Fatalf("got code %d reason %s (%v), want code %d reason %s", fe.err.Code, fe.err.Reason, fe.err, c.code, c.reason)
			}
			if c.dropped != (fe.kind == kindResponse) {
				t.Fatalf("response-shaped %v, want %v", fe.kind == kindResponse, c.dropped)
			}
			if fe.hasID != c.echo || (c.echo && fe.id != c.id) {
				t.Fatalf("got id echo %v %d, want %v %d", fe.hasID, fe.id, c.echo, c.id)
			}
		})
	}
}

// TestInterceptRequestEncodedByHandMatchesEncodingJSON: the hand encoder of
// the host's most frequent frame writes exactly what encoding/json writes,
// payload compaction included, and refuses what it refuses.
func TestInterceptRequestEncodedByHandMatchesEncodingJSON(t *testing.T) {
	payloads := []string{`{}`, `{"name":"bash","arguments":"{\"cmd\":\"ls\"}"}`, "{\n  \"a\" : [1, 2,\t{\"b\":null}],\r\n \"c\":\"<&>\u2028é\"\n}", ``, `null`}
	for i, raw := range payloads {
		p := InterceptParams{Event: ToolBefore, Seq: int64(i + 1), Payload: json.RawMessage(raw), TimeoutMillis: 5000}
		if raw == "" {
			p.Payload = nil
		}
		id := msgID(9_000_000_000 + i)
		got, err := encodeRequest(&id, MethodIntercept, p)
		if err != nil {
			t.Fatalf("payload %q: %v", raw, err)
		}
		want, err := encodeFrame(requestFrame{JSONRPC: "2.0", ID: &id, Method: MethodIntercept, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("payload %q:\n got %s\nwant %s", raw, got, want)
		}
	}
	id := msgID(1)
	for _, raw := range []string{`{"a":`, ``} {
		bad := InterceptParams{Event: ToolBefore, Seq: 1, Payload: json.RawMessage(raw)}
		if _, err := encodeRequest(&id, MethodIntercept, bad); err == nil {
			t.Errorf("payload %q, which encoding/json refuses, was encoded", raw)
		}
	}
}
