package extension

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// osPipeConn connects a Conn to a testPeer through two os.Pipes, so that
// each peer.send is one write(2). close ends both sides; the barrier's
// loops call it per run, so that no run keeps its pipes open.
func osPipeConn(t *testing.T, h Handler, opts ConnOptions) (c *Conn, peer *testPeer, close func()) {
	t.Helper()
	connR, connW, peerR, peerW := osPipes(t)
	c = NewConn(connR, connW, h, opts)
	return c, &testPeer{in: bufio.NewReader(peerR), rc: peerR, out: peerW}, func() {
		c.Close()
		peerR.Close()
		peerW.Close()
	}
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

// TestHostBarrierD6RefusesAndAnswersARequestSentWithTheAnswer: a sidecar
// answers extension/initialize and sends a request of its own in the same
// write(2). The request was sent before the sidecar could have read
// extension/initialized, so it is pre-barrier however fast the host opens
// the barrier: it is never served, its protocol_error answer reaches the
// peer before the connection closes, and the connection ends with the
// barrier's protocol_error. 200 runs.
func TestHostBarrierD6RefusesAndAnswersARequestSentWithTheAnswer(t *testing.T) {
	hangWatchdog(t)
	for run := range 200 {
		var served atomic.Bool
		h := funcHandler{request: func(context.Context, string, json.RawMessage) (any, error) {
			served.Store(true)
			return nil, nil
		}}
		c, peer, closeAll := osPipeConn(t, h, ConnOptions{host: true, WriterDrainTimeout: time.Minute})
		hostHandshake(c)
		init := peer.recv(t)
		if init.Method != MethodInitialize {
			t.Fatalf("run %d: first frame %+v, want extension/initialize", run, init)
		}
		peer.send(t, `{"jsonrpc":"2.0","id":`+string(init.ID)+`,"result":{}}`+"\n"+`{"jsonrpc":"2.0","id":7,"method":"host/ui/publish","params":{}}`)
		answered := false
		for {
			line, err := peer.in.ReadBytes('\n')
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("run %d: %v", run, err)
			}
			f, err := parseOneFrame(line)
			if err != nil {
				t.Fatalf("run %d: %v", run, err)
			}
			answered = answered || string(f.ID) == "7" && f.Error != nil && f.Error.Code == codeInvalidRequest && strings.Contains(string(f.Error.Data), `"protocol_error"`)
		}
		if !answered {
			t.Fatalf("run %d: the connection closed without the protocol_error answer to id 7", run)
		}
		<-c.Done()
		if err := c.Err(); !errors.Is(err, ReasonProtocolError) || !errors.Is(err, errPreBarrier) || !strings.Contains(err.Error(), `request "host/ui/publish" before extension/initialized`) {
			t.Fatalf("run %d: the connection ended with %v, want the barrier's protocol_error", run, err)
		}
		closeAll()
		if served.Load() {
			t.Fatalf("run %d: the early request was served", run)
		}
	}
}

// TestHostBarrierD6PassesWhatIsSentAfterInitialized: once
// extension/initialized has been written, the sidecar's requests are
// served.
func TestHostBarrierD6PassesWhatIsSentAfterInitialized(t *testing.T) {
	hangWatchdog(t)
	c, peer, closeAll := osPipeConn(t, funcHandler{request: echoParams}, ConnOptions{host: true})
	t.Cleanup(closeAll)
	hostHandshake(c)
	init := peer.recv(t)
	peer.send(t, `{"jsonrpc":"2.0","id":`+string(init.ID)+`,"result":{}}`)
	if f := peer.recv(t); f.Method != MethodInitialized {
		t.Fatalf("got %+v, want extension/initialized", f)
	}
	peer.send(t, `{"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":1}}`)
	if f := peer.recv(t); string(f.ID) != "1" || string(f.Result) != `{"a":1}` {
		t.Fatalf("got %+v, want the request served", f)
	}
}

// initializeFrame is an extension/initialize request with the given id,
// protocol ID and version.
func initializeFrame(id int, protocolID, version string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"extension/initialize","params":{"protocolVersion":%q,"protocolId":%q,"manifest":{},"session":{"sessionId":"s","workspaceRoot":"/w","generation":1},"capabilities":{"contentRefs":true,"uiHost":"tui","protocolVersion":"1"}}}`, id, version, protocolID)
}

// TestSidecarBarrierD6 walks the sidecar's side of the handshake: what is
// served, refused and dropped at each stage, and what ends the connection.
func TestSidecarBarrierD6(t *testing.T) {
	hangWatchdog(t)
	notified := make(chan string, 8) // handled on the notification worker
	h := funcHandler{
		request: func(_ context.Context, method string, _ json.RawMessage) (any, error) {
			if method == MethodShutdown {
				return ShutdownResult{Accepted: true}, nil
			}
			return map[string]string{"served": method}, nil
		},
		notification: func(_ context.Context, method string, _ json.RawMessage) { notified <- method },
	}
	c, peer := newPipeConn(t, h, ConnOptions{Sidecar: true})
	peer.send(t, `{"jsonrpc":"2.0","method":"extension/event","params":{}}`) // dropped
	peer.send(t, `{"jsonrpc":"2.0","id":1,"method":"extension/intercept","params":{}}`)
	wantError(t, peer.recv(t), "1", codeInvalidRequest, "extension/intercept before extension/initialized", ReasonProtocolError)
	peer.send(t, `{"jsonrpc":"2.0","id":2,"method":"extension/initialize","params":{}}`)
	if f := peer.recv(t); string(f.ID) != "2" || f.Error == nil || f.Error.Code != codeInvalidParams {
		t.Fatalf("bad initialize params: got %+v, want invalid_params and the connection kept", f)
	}
	peer.send(t, initializeFrame(3, ProtocolID, "1"))
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
	if m := <-notified; m != MethodInitialized {
		t.Errorf("the first notification handled is %s, want extension/initialized (the early event is dropped)", m)
	}
	peer.send(t, initializeFrame(6, ProtocolID, "1"))
	wantError(t, peer.recv(t), "6", codeInvalidRequest, "extension/initialize after the handshake", ReasonProtocolError)
	peer.send(t, `{"jsonrpc":"2.0","id":7,"method":"extension/shutdown","params":{"timeoutMillis":0}}`)
	if f := peer.recv(t); string(f.Result) != `{"accepted":true}` {
		t.Fatalf("shutdown: got %+v", f)
	}
	<-c.Done()
	if err := c.Err(); !errors.Is(err, ErrClosed) {
		t.Errorf("after the shutdown answer: Err %v, want ErrClosed", err)
	}
	c.Close() // joins the notification worker
	if len(notified) != 0 {
		t.Errorf("%d more notifications handled, want only extension/initialized", len(notified))
	}
}

// TestSidecarHandshakeVersionRuleEndsTheConnection: a host speaking another
// version is answered, then the connection ends with that answer's error
// (PROTOCOL.md §3.3, the version check).
func TestSidecarHandshakeVersionRuleEndsTheConnection(t *testing.T) {
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
		peer.send(t, initializeFrame(1, tc.id, tc.version))
		f := peer.recv(t)
		wantError(t, f, "1", tc.reason.Code(), "", tc.reason)
		<-c.Done()
		if err := c.Err(); !errors.Is(err, tc.reason) {
			t.Errorf("%s %s: Err %v, want %s", tc.id, tc.version, err, tc.reason)
		}
	}
}

// TestHostBarrierSettlesOnlyOnceEveryEarlierFrameIsJudgedD6: the sidecar
// answers initialize and, in another write, sends a notification that the
// host reads before it writes extension/initialized, but judges only
// after. barrierSettled returns only once it has been judged, so the
// handshake sees the poisoned connection instead of a later "crash".
func TestHostBarrierSettlesOnlyOnceEveryEarlierFrameIsJudgedD6(t *testing.T) {
	hangWatchdog(t)
	read, resume := make(chan struct{}), make(chan struct{})
	var frames atomic.Int32
	c, peer, closeAll := osPipeConn(t, nil, ConnOptions{host: true, Tap: func(inbound bool, _ []byte) {
		if inbound && frames.Add(1) == 2 { // the stray notification: read, not yet judged
			close(read)
			<-resume
		}
	}})
	defer closeAll()
	called := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), MethodInitialize, struct{}{})
		called <- err
	}()
	req := peer.recv(t)
	peer.send(t, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{}}`)
	if err := <-called; err != nil {
		t.Fatal(err)
	}
	peer.send(t, `{"jsonrpc":"2.0","method":"extension/provider/stream/end","params":{}}`)
	<-read
	if err := c.Notify(context.Background(), MethodInitialized, InitializedParams{}); err != nil {
		t.Fatal(err)
	}
	close(resume)
	c.barrierSettled(context.Background())
	if err := c.Err(); !errors.Is(err, errPreBarrier) {
		t.Fatalf("after barrierSettled, Err = %v, want the pre-barrier notification's protocol_error", err)
	}
}
