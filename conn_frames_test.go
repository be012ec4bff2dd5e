package extension

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

// strictHandler answers like a real peer: unknown methods get
// unknown_method, known ones have their params strictly decoded.
type strictHandler struct{}

func (strictHandler) HandleRequest(ctx context.Context, method string, params json.RawMessage) (any, error) {
	m, ok := lookupMethod(method)
	if !ok {
		return nil, NewError(ReasonUnknownMethod, "method not found: "+method)
	}
	if err := DecodeParams(method, params, reflect.New(m.params).Interface()); err != nil {
		return nil, err
	}
	return map[string]bool{"ok": true}, nil
}

func (strictHandler) HandleNotification(context.Context, string, json.RawMessage) {}

// framePeer is a Conn under test and the raw ends a test drives it with.
type framePeer struct {
	conn *Conn
	in   *io.PipeWriter // frames to the Conn
	out  *bufio.Reader  // frames from the Conn
}

func newFramePeer(t *testing.T) *framePeer {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := NewConn(inR, outW, strictHandler{}, ConnOptions{})
	t.Cleanup(func() {
		inW.Close()
		outR.Close()
		c.Close()
	})
	return &framePeer{conn: c, in: inW, out: bufio.NewReaderSize(outR, 1<<16)}
}

// send writes one line; a Conn that has ended may stop reading, which is
// not the test's failure.
func (p *framePeer) send(t *testing.T, line string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.WriteString(p.in, line+"\n")
	}()
	select {
	case <-done:
	case <-p.conn.Done():
	case <-time.After(30 * time.Second): // hang guard only
		t.Fatal("the Conn stopped reading")
	}
}

// answer reads the next frame the Conn writes.
func (p *framePeer) answer(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	type result struct {
		line []byte
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		line, err := p.out.ReadBytes('\n')
		ch <- result{line, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("reading the answer: %v", r.err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(r.line, &m); err != nil {
			t.Fatalf("the Conn wrote invalid JSON %q: %v", r.line, err)
		}
		return m
	case <-time.After(30 * time.Second): // hang guard only
		t.Fatal("no answer")
		return nil
	}
}

const pingFrame = `{"jsonrpc":"2.0","id":424242,"method":"extension/shutdown","params":{"timeoutMillis":1}}`

// TestConnAdversarialFrames sends every frame of the adversarial table
// through a Conn and checks the whole outcome: the answer's code, reason
// and id, and that the connection survives. Frames that get no answer are
// followed by a ping whose answer must come next.
func TestConnAdversarialFrames(t *testing.T) {
	for _, c := range adversarialFrames() {
		t.Run(c.name, func(t *testing.T) {
			p := newFramePeer(t)
			p.send(t, c.frame)
			if c.reply == "" || c.dropped {
				p.send(t, pingFrame)
			}
			a := p.answer(t)
			switch {
			case c.reply == "" || c.dropped:
				if string(a["id"]) != "424242" {
					t.Fatalf("got %v, want no answer to the frame and then the ping's", a)
				}
			case c.reply == "result":
				if string(a["id"]) != jsonInt(c.id) || a["result"] == nil {
					t.Fatalf("got %v, want a result for id %d", a, c.id)
				}
			default:
				checkErrorFrame(t, a, c.code, c.reason, c.echo, c.id)
			}
			if c.dropped {
				if n := p.conn.stats().MalformedResponses; n != 1 {
					t.Fatalf("MalformedResponses = %d, want 1", n)
				}
			}
			select {
			case <-p.conn.Done():
				t.Fatalf("the connection ended: %v", p.conn.Err())
			default:
			}
		})
	}
}

func jsonInt(id msgID) string { b, _ := json.Marshal(id); return string(b) }

func checkErrorFrame(t *testing.T, a map[string]json.RawMessage, code int, reason Reason, echo bool, id msgID) {
	t.Helper()
	var e struct {
		Code int `json:"code"`
		Data struct {
			Reason    Reason `json:"reason"`
			Retryable bool   `json:"retryable"`
		} `json:"data"`
	}
	if err := json.Unmarshal(a["error"], &e); err != nil {
		t.Fatalf("answer %v has no error object: %v", a, err)
	}
	wantID := "null"
	if echo {
		wantID = jsonInt(id)
	}
	if e.Code != code || e.Data.Reason != reason || e.Data.Retryable != reason.Retryable() || string(a["id"]) != wantID {
		t.Fatalf("got code %d reason %s id %s, want code %d reason %s id %s (%s)", e.Code, e.Data.Reason, a["id"], code, reason, wantID, a["error"])
	}
}

// frameOfLength builds an intercept request whose line, with its "\n",
// is exactly n bytes.
func frameOfLength(n int) string {
	head := `{"jsonrpc":"2.0","id":5,"method":"extension/intercept","params":{"event":"tool.before","seq":1,"timeoutMillis":0,"payload":{"pad":"`
	tail := `"}}}`
	return head + strings.Repeat("a", n-1-len(head)-len(tail)) + tail
}

func TestConnD2FrameOfExactly8MiBIsAnswered(t *testing.T) {
	p := newFramePeer(t)
	line := frameOfLength(FrameBytes)
	if len(line)+1 != FrameBytes {
		t.Fatalf("built %d bytes", len(line)+1)
	}
	p.send(t, line)
	if a := p.answer(t); string(a["id"]) != "5" || a["result"] == nil {
		t.Fatalf("got %v, want the result for id 5", a)
	}
	p.send(t, pingFrame)
	if a := p.answer(t); string(a["id"]) != "424242" {
		t.Fatalf("the connection did not survive: %v", a)
	}
}

func TestConnD2FrameOf8MiBPlusOneIsFatal(t *testing.T) {
	p := newFramePeer(t)
	p.send(t, frameOfLength(FrameBytes+1))
	checkErrorFrame(t, p.answer(t), codeDomain, ReasonFrameTooLarge, false, 0)
	<-p.conn.Done()
	if err := p.conn.Err(); !errorsIsReason(err, ReasonFrameTooLarge) {
		t.Fatalf("terminal error %v, want frame_too_large", err)
	}
}

func errorsIsReason(err error, r Reason) bool {
	e, ok := err.(*Error)
	return ok && e.Reason == r
}
