package extension

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rawPipePeer connects a Conn to the test through two os.Pipes, so that
// each of the peer's writes is one write(2).
func rawPipePeer(t *testing.T, h Handler, opts ConnOptions) (*Conn, *bufio.Reader, *os.File) {
	t.Helper()
	connR, connW, peerR, peerW := osPipes(t)
	c := NewConn(connR, connW, h, opts)
	t.Cleanup(func() {
		c.Close()
		peerR.Close()
		peerW.Close()
	})
	return c, bufio.NewReader(peerR), peerW
}

// hostHandshake plays the host's side of the handshake on c: it calls
// extension/initialize and, once answered, opens the barrier.
func hostHandshake(c *Conn) {
	go func() {
		if _, err := c.Call(context.Background(), MethodInitialize, struct{}{}); err == nil {
			c.Notify(context.Background(), MethodInitialized, InitializedParams{})
		}
	}()
}

// earlyRequestInOneWrite plays a sidecar that answers initialize and sends
// a request of its own in the same write(2), then reads what the host
// writes until the end. It returns the frames it read.
func earlyRequestInOneWrite(t *testing.T, in *bufio.Reader, out *os.File) []wireFrame {
	t.Helper()
	init, err := parseOneFrame(mustReadLine(t, in))
	if err != nil || init.Method != MethodInitialize {
		t.Fatalf("first frame %+v (%v), want extension/initialize", init, err)
	}
	both := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n"+`{"jsonrpc":"2.0","id":7,"method":"host/ui/publish","params":{}}`+"\n", init.ID)
	if _, err := out.WriteString(both); err != nil {
		t.Fatal(err)
	}
	var got []wireFrame
	for {
		line, err := in.ReadBytes('\n')
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		f, err := parseOneFrame(line)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f)
	}
}

func mustReadLine(t *testing.T, in *bufio.Reader) []byte {
	t.Helper()
	line, err := in.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	return line
}

// TestHostBarrierD6NeverServesARequestSentWithTheAnswer: a request written
// in the same write(2) as the answer to extension/initialize was sent
// before the sidecar could have read extension/initialized, so it is
// pre-barrier however fast the host opens the barrier: never served, and
// the connection ends with protocol_error. 200 runs.
func TestHostBarrierD6NeverServesARequestSentWithTheAnswer(t *testing.T) {
	hangWatchdog(t)
	for run := range 200 {
		var served atomic.Bool
		h := funcHandler{request: func(context.Context, string, json.RawMessage) (any, error) {
			served.Store(true)
			return nil, nil
		}}
		c, in, out := rawPipePeer(t, h, ConnOptions{host: true, WriterDrainTimeout: time.Minute})
		hostHandshake(c)
		earlyRequestInOneWrite(t, in, out)
		<-c.Done()
		if err := c.Err(); !errors.Is(err, ReasonProtocolError) || !errors.Is(err, errPreBarrier) || !strings.Contains(err.Error(), `request "host/ui/publish" before extension/initialized`) {
			t.Fatalf("run %d: the connection ended with %v, want the barrier's protocol_error", run, err)
		}
		c.Close()
		if served.Load() {
			t.Fatalf("run %d: the early request was served", run)
		}
	}
}

// TestHostBarrierD6AnswersTheEarlyRequestBeforeTheEnd: the protocol_error
// answer the barrier promises reaches the peer before the connection
// closes, in every one of 200 runs.
func TestHostBarrierD6AnswersTheEarlyRequestBeforeTheEnd(t *testing.T) {
	hangWatchdog(t)
	for run := range 200 {
		c, in, out := rawPipePeer(t, nil, ConnOptions{host: true, WriterDrainTimeout: time.Minute})
		hostHandshake(c)
		got := earlyRequestInOneWrite(t, in, out)
		answered := false
		for _, f := range got {
			if string(f.ID) == "7" && f.Error != nil && f.Error.Code == codeInvalidRequest && strings.Contains(string(f.Error.Data), `"protocol_error"`) {
				answered = true
			}
		}
		if !answered {
			t.Fatalf("run %d: read %+v before the end, want the protocol_error answer to id 7", run, got)
		}
		c.Close()
	}
}

// TestHostBarrierD6PassesWhatIsSentAfterInitialized: once
// extension/initialized has been written, the sidecar's requests are
// served.
func TestHostBarrierD6PassesWhatIsSentAfterInitialized(t *testing.T) {
	hangWatchdog(t)
	c, in, out := rawPipePeer(t, funcHandler{request: echoParams}, ConnOptions{host: true})
	hostHandshake(c)
	init, _ := parseOneFrame(mustReadLine(t, in))
	fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", init.ID)
	if f, _ := parseOneFrame(mustReadLine(t, in)); f.Method != MethodInitialized {
		t.Fatalf("got %+v, want extension/initialized", f)
	}
	fmt.Fprintln(out, `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":1}}`)
	if f, _ := parseOneFrame(mustReadLine(t, in)); string(f.ID) != "1" || string(f.Result) != `{"a":1}` {
		t.Fatalf("got %+v, want the request served", f)
	}
}

// TestSidecarBarrierD6 walks the sidecar's side of the handshake: what is
// served, refused and dropped at each stage, and what ends the connection.
func TestSidecarBarrierD6(t *testing.T) {
	hangWatchdog(t)
	const init = `{"jsonrpc":"2.0","id":%d,"method":"extension/initialize","params":{"protocolVersion":%q,"protocolId":"reasonix.extension.v1","manifest":{},"session":{"sessionId":"s","workspaceRoot":"/w","generation":1},"capabilities":{"contentRefs":true,"uiHost":"tui","protocolVersion":"1"}}}`
	var notified atomic.Int32
	h := funcHandler{
		request: func(_ context.Context, method string, _ json.RawMessage) (any, error) {
			if method == MethodShutdown {
				return ShutdownResult{Accepted: true}, nil
			}
			return map[string]string{"served": method}, nil
		},
		notification: func(context.Context, string, json.RawMessage) { notified.Add(1) },
	}
	c, peer := newPipeConn(t, h, ConnOptions{Sidecar: true})
	peer.send(t, `{"jsonrpc":"2.0","method":"extension/event","params":{}}`) // dropped
	peer.send(t, `{"jsonrpc":"2.0","id":1,"method":"extension/intercept","params":{}}`)
	wantError(t, peer.recv(t), "1", codeInvalidRequest, "extension/intercept before extension/initialized", ReasonProtocolError)
	peer.send(t, `{"jsonrpc":"2.0","id":2,"method":"extension/initialize","params":{}}`)
	if f := peer.recv(t); string(f.ID) != "2" || f.Error == nil || f.Error.Code != codeInvalidParams {
		t.Fatalf("bad initialize params: got %+v, want invalid_params and the connection kept", f)
	}
	peer.send(t, fmt.Sprintf(init, 3, "1"))
	if f := peer.recv(t); string(f.Result) != `{"served":"extension/initialize"}` {
		t.Fatalf("initialize: got %+v, want it served", f)
	}
	peer.send(t, `{"jsonrpc":"2.0","id":4,"method":"extension/intercept","params":{}}`)
	wantError(t, peer.recv(t), "4", codeInvalidRequest, "extension/intercept before extension/initialized", ReasonProtocolError)
	peer.send(t, `{"jsonrpc":"2.0","method":"extension/initialized","params":{}}`)
	peer.send(t, `{"jsonrpc":"2.0","id":5,"method":"extension/intercept","params":{}}`)
	if f := peer.recv(t); string(f.Result) != `{"served":"extension/intercept"}` {
		t.Fatalf("after initialized: got %+v, want the request served", f)
	}
	peer.send(t, fmt.Sprintf(init, 6, "1"))
	wantError(t, peer.recv(t), "6", codeInvalidRequest, "extension/initialize after the handshake", ReasonProtocolError)
	if n := notified.Load(); n != 1 {
		t.Errorf("%d notifications handled, want 1 (extension/initialized; the early event is dropped)", n)
	}
	peer.send(t, `{"jsonrpc":"2.0","id":7,"method":"extension/shutdown","params":{"timeoutMillis":0}}`)
	if f := peer.recv(t); string(f.Result) != `{"accepted":true}` {
		t.Fatalf("shutdown: got %+v", f)
	}
	<-c.Done()
	if err := c.Err(); !errors.Is(err, ErrClosed) {
		t.Errorf("after the shutdown answer: Err %v, want ErrClosed", err)
	}
}

// TestSidecarBarrierD9VersionRuleEndsTheConnection: a host speaking another
// version is answered, then the connection ends with that answer's error.
func TestSidecarBarrierD9VersionRuleEndsTheConnection(t *testing.T) {
	hangWatchdog(t)
	cases := []struct {
		id, version string
		reason      Reason
	}{
		{"reasonix.extension.v1", "2", ReasonUnsupportedVersion},
		{"reasonix.extension.v1", "v1", ReasonProtocolError},
		{"reasonix.extension.v9", "1", ReasonUnsupportedVersion},
	}
	for _, tc := range cases {
		c, peer := newPipeConn(t, funcHandler{request: echoParams}, ConnOptions{Sidecar: true})
		peer.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"extension/initialize","params":{"protocolVersion":%q,"protocolId":%q,"manifest":{},"session":{"sessionId":"s","workspaceRoot":"/w","generation":1},"capabilities":{"contentRefs":true,"uiHost":"tui","protocolVersion":"1"}}}`, tc.version, tc.id))
		f := peer.recv(t)
		wantError(t, f, "1", tc.reason.Code(), "", tc.reason)
		<-c.Done()
		if err := c.Err(); !errors.Is(err, tc.reason) {
			t.Errorf("%s %s: Err %v, want %s", tc.id, tc.version, err, tc.reason)
		}
	}
}
