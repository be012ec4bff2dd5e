package extension

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hangWatchdog panics with every goroutine's stack if the test is still
// running after a minute, so that a deadlock explains itself instead of
// waiting for the global test timeout.
func hangWatchdog(t *testing.T) {
	t.Helper()
	timer := time.AfterFunc(time.Minute, func() {
		panic(fmt.Sprintf("%s hung; goroutines:\n%s", t.Name(), allStacks()))
	})
	t.Cleanup(func() { timer.Stop() })
}

func allStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// connGoroutines returns the stacks of the goroutines that run code of a
// Conn, or that a Conn started.
func connGoroutines() []string {
	var found []string
	for g := range strings.SplitSeq(allStacks(), "\n\n") {
		if strings.Contains(g, "extension.(*Conn)") || strings.Contains(g, "extension.NewConn") {
			found = append(found, g)
		}
	}
	return found
}

// checkNoGoroutineLeft polls, for at most five seconds, until the number of
// goroutines is back to before and no goroutine of a Conn is left. Polling
// is fine here: Close has already joined everything, and the loop only
// lets exiting goroutines finish their last instructions.
func checkNoGoroutineLeft(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, left := runtime.NumGoroutine(), connGoroutines()
		if n <= before && len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines after Close: got %d (%d of a Conn), want at most %d and none of a Conn; goroutines:\n%s",
				n, len(left), before, allStacks())
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

// funcHandler is a Handler made of two optional functions.
type funcHandler struct {
	request      func(ctx context.Context, method string, params json.RawMessage) (any, error)
	notification func(ctx context.Context, method string, params json.RawMessage)
}

func (h funcHandler) HandleRequest(ctx context.Context, method string, params json.RawMessage) (any, error) {
	if h.request == nil {
		return nil, NewError(ReasonUnknownMethod, "method not found: "+method)
	}
	return h.request(ctx, method, params)
}

func (h funcHandler) HandleNotification(ctx context.Context, method string, params json.RawMessage) {
	if h.notification != nil {
		h.notification(ctx, method, params)
	}
}

// echoParams answers every request with its params.
func echoParams(_ context.Context, _ string, params json.RawMessage) (any, error) { return params, nil }

// wireFrame is a frame as the test peer reads it.
type wireFrame struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// testPeer is the raw other end of a Conn.
type testPeer struct {
	in  *bufio.Reader  // what the Conn wrote
	rc  io.Closer      // the read end of the Conn's output
	out io.WriteCloser // what the Conn reads
}

// newPipeConn connects a Conn to a testPeer through two io.Pipes.
func newPipeConn(t *testing.T, h Handler, opts ConnOptions) (*Conn, *testPeer) {
	t.Helper()
	connR, peerW := io.Pipe()
	peerR, connW := io.Pipe()
	c := NewConn(connR, connW, h, opts)
	t.Cleanup(func() {
		c.Close()
		peerR.Close()
		peerW.Close()
	})
	return c, &testPeer{in: bufio.NewReaderSize(peerR, 1<<20), rc: peerR, out: peerW}
}

func (p *testPeer) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.out, line+"\n"); err != nil {
		t.Fatalf("peer send %.80q: %v", line, err)
	}
}

// recv reads one frame and checks that it is exactly one JSON object.
func (p *testPeer) recv(t *testing.T) wireFrame {
	t.Helper()
	line, err := p.in.ReadBytes('\n')
	if err != nil {
		t.Fatalf("peer recv: %v", err)
	}
	f, err := parseOneFrame(line)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func parseOneFrame(line []byte) (wireFrame, error) {
	var f wireFrame
	line = bytes.TrimSuffix(line, []byte("\n"))
	if len(line) == 0 || line[0] != '{' || !json.Valid(line) {
		return f, fmt.Errorf("line %.200q is not exactly one JSON object", line)
	}
	if err := json.Unmarshal(line, &f); err != nil {
		return f, fmt.Errorf("line %.200q: %v", line, err)
	}
	if f.JSONRPC != "2.0" {
		return f, fmt.Errorf("line %.200q: jsonrpc %q, want \"2.0\"", line, f.JSONRPC)
	}
	return f, nil
}

// wantError checks that f is an error response with this id, code, message
// and reason ("" for no data).
func wantError(t *testing.T, f wireFrame, id string, code int, message string, reason Reason) {
	t.Helper()
	if f.Error == nil {
		t.Fatalf("frame: got %+v, want an error response", f)
	}
	if string(f.ID) != id || f.Error.Code != code || (message != "" && f.Error.Message != message) {
		t.Errorf("error response: got id %s code %d message %q, want id %s code %d message %q",
			f.ID, f.Error.Code, f.Error.Message, id, code, message)
	}
	var wantData string
	if reason != "" {
		wantData = fmt.Sprintf(`{"reason":%q,"retryable":%t}`, reason, reason.Retryable())
	}
	if string(f.Error.Data) != wantData {
		t.Errorf("error data: got %s, want %s", f.Error.Data, wantData)
	}
}

func TestConnPeerDeathFailsEveryPendingCall(t *testing.T) {
	hangWatchdog(t)
	before := runtime.NumGoroutine()
	c, peer := newPipeConn(t, nil, ConnOptions{})

	const callers = 100
	errs := make(chan error, callers)
	for range callers {
		go func() {
			_, err := c.Call(context.Background(), "never/answered", nil)
			errs <- err
		}()
	}
	// Once the peer has read every request, all of them are pending.
	for range callers {
		peer.recv(t)
	}
	peer.out.Close() // the peer dies

	<-c.Done()
	terminal := c.Err()
	if !errors.Is(terminal, io.EOF) {
		t.Errorf("Err: got %v, want an error wrapping io.EOF", terminal)
	}
	for i := range callers {
		if err := <-errs; err != terminal {
			t.Errorf("pending call %d: got %v, want the terminal error %v", i, err, terminal)
		}
	}
	if _, err := c.Call(context.Background(), "later", nil); err != c.Err() {
		t.Errorf("Call after the end: got %v, want the terminal error %v", err, c.Err())
	}
	if err := c.Notify(context.Background(), "later", nil); err != c.Err() {
		t.Errorf("Notify after the end: got %v, want the terminal error %v", err, c.Err())
	}
	c.Close()
	// After Close, which joins the writer: a frame is counted once its
	// write returns, which can be after the peer has read it.
	if got := c.stats().FramesOut; got != callers {
		t.Errorf("FramesOut: got %d, want %d (nothing written after the end)", got, callers)
	}
	peer.rc.Close()
	checkNoGoroutineLeft(t, before)
}

func TestConnCloseJoinsEveryGoroutineAndCancelsHandlers(t *testing.T) {
	hangWatchdog(t)
	before := runtime.NumGoroutine()
	entered := make(chan struct{})
	handlerErr := make(chan error, 1)
	h := funcHandler{
		request: func(ctx context.Context, _ string, _ json.RawMessage) (any, error) {
			close(entered)
			<-ctx.Done()
			handlerErr <- ctx.Err()
			return nil, ctx.Err()
		},
		notification: func(ctx context.Context, _ string, _ json.RawMessage) { <-ctx.Done() },
	}
	c, peer := newPipeConn(t, h, ConnOptions{})
	callErr := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), "pending", nil)
		callErr <- err
	}()
	peer.recv(t)
	peer.send(t, `{"jsonrpc":"2.0","method":"held"}`)
	peer.send(t, `{"jsonrpc":"2.0","id":1,"method":"held"}`)
	<-entered

	if err := c.Close(); err != nil {
		t.Errorf("Close: got %v, want nil", err)
	}
	if err := <-handlerErr; !errors.Is(err, context.Canceled) {
		t.Errorf("handler context: got %v, want context.Canceled", err)
	}
	if err := <-callErr; !errors.Is(err, ErrClosed) {
		t.Errorf("pending call: got %v, want ErrClosed", err)
	}
	if err := c.Err(); !errors.Is(err, ErrClosed) {
		t.Errorf("Err: got %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: got %v, want nil", err)
	}
	peer.rc.Close()
	peer.out.Close()
	checkNoGoroutineLeft(t, before)
}

func TestConnHandlerErrorsTravelPerD7(t *testing.T) {
	hangWatchdog(t)
	h := funcHandler{request: func(_ context.Context, method string, _ json.RawMessage) (any, error) {
		switch method {
		case "protocol":
			return nil, NewError(ReasonInvalidParams, "field x is missing")
		case "reason":
			return nil, fmt.Errorf("wrapped: %w", ReasonStreamGap)
		case "nil":
			return nil, nil
		case "unencodable":
			return make(chan int), nil
		}
		return nil, errors.New("local detail that must not travel")
	}}
	_, peer := newPipeConn(t, h, ConnOptions{})

	peer.send(t, `{"jsonrpc":"2.0","id":1,"method":"protocol"}`)
	wantError(t, peer.recv(t), "1", codeInvalidParams, "field x is missing", ReasonInvalidParams)
	peer.send(t, `{"jsonrpc":"2.0","id":2,"method":"reason"}`)
	wantError(t, peer.recv(t), "2", codeDomain, ReasonStreamGap.Message(), ReasonStreamGap)
	peer.send(t, `{"jsonrpc":"2.0","id":3,"method":"plain"}`)
	wantError(t, peer.recv(t), "3", codeInternal, ReasonInternal.Message(), ReasonInternal)
	peer.send(t, `{"jsonrpc":"2.0","id":4,"method":"unencodable"}`)
	wantError(t, peer.recv(t), "4", codeInternal, ReasonInternal.Message(), ReasonInternal)
	peer.send(t, `{"jsonrpc":"2.0","id":5,"method":"nil"}`)
	if f := peer.recv(t); string(f.ID) != "5" || string(f.Result) != "{}" {
		t.Errorf("nil result: got %+v, want id 5 result {}", f)
	}
}

func TestConnNilHandlerAnswersUnknownMethod(t *testing.T) {
	hangWatchdog(t)
	_, peer := newPipeConn(t, nil, ConnOptions{})
	peer.send(t, `{"jsonrpc":"2.0","id":7,"method":"x/y"}`)
	wantError(t, peer.recv(t), "7", codeMethodNotFound, "method not found: x/y", ReasonUnknownMethod)
}

// TestConnD2OversizedHandlerResponseIsReplacedByInternalD7: the small
// error that replaces an oversized response carries data like any other.
func TestConnD2OversizedHandlerResponseIsReplacedByInternalD7(t *testing.T) {
	hangWatchdog(t)
	h := funcHandler{request: func(context.Context, string, json.RawMessage) (any, error) {
		return strings.Repeat("r", FrameBytes), nil
	}}
	_, peer := newPipeConn(t, h, ConnOptions{})
	peer.send(t, `{"jsonrpc":"2.0","id":1,"method":"huge"}`)
	wantError(t, peer.recv(t), "1", codeInternal, "response exceeds frame size limit", ReasonInternal)
}

func TestConnD2OversizedOutboundFailsOnlyThatCall(t *testing.T) {
	hangWatchdog(t)
	c, peer := newPipeConn(t, nil, ConnOptions{})
	huge := map[string]string{"pad": strings.Repeat("o", FrameBytes)}

	if _, err := c.Call(context.Background(), "huge", huge); !errors.Is(err, ReasonFrameTooLarge) {
		t.Errorf("oversized Call: got %v, want reason frame_too_large", err)
	}
	if err := c.Notify(context.Background(), "huge", huge); !errors.Is(err, ReasonFrameTooLarge) {
		t.Errorf("oversized Notify: got %v, want reason frame_too_large", err)
	}
	if err := c.tryNotify("huge", huge); !errors.Is(err, ReasonFrameTooLarge) {
		t.Errorf("oversized TryNotify: got %v, want reason frame_too_large", err)
	}

	result := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), "small", nil)
		result <- err
	}()
	f := peer.recv(t)
	if f.Method != "small" || string(f.ID) != "2" {
		t.Errorf("next frame: got method %q id %s, want small with id 2", f.Method, f.ID)
	}
	peer.send(t, `{"jsonrpc":"2.0","id":2,"result":{}}`)
	if err := <-result; err != nil {
		t.Errorf("Call after the oversized one: %v", err)
	}
	if err := c.Err(); err != nil {
		t.Errorf("Err: got %v, want nil (connection up)", err)
	}
}

func TestConnD2OversizedInboundFrameIsFatal(t *testing.T) {
	hangWatchdog(t)
	c, peer := newPipeConn(t, nil, ConnOptions{WriterDrainTimeout: time.Minute})
	written := make(chan error, 1)
	go func() {
		// Blocks until the Conn closes its reader, which fails the
		// rest of this write.
		_, err := peer.out.Write(bytes.Repeat([]byte{'x'}, FrameBytes+1))
		written <- err
	}()
	wantError(t, peer.recv(t), "null", codeDomain, "", ReasonFrameTooLarge)
	<-c.Done()
	var e *Error
	if err := c.Err(); !errors.As(err, &e) || e.Reason != ReasonFrameTooLarge {
		t.Errorf("Err: got %v, want the *Error with reason frame_too_large", err)
	}
	if err := <-written; !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("peer write of the oversized line: got %v, want io.ErrClosedPipe (the Conn stopped reading)", err)
	}
}

func TestConnD2ExactLimitInboundFrameAccepted(t *testing.T) {
	hangWatchdog(t)
	h := funcHandler{request: func(_ context.Context, _ string, params json.RawMessage) (any, error) {
		return len(params), nil
	}}
	_, peer := newPipeConn(t, h, ConnOptions{})
	head, tail := `{"jsonrpc":"2.0","id":1,"method":"size","params":{"pad":"`, `"}}`
	pad := strings.Repeat("a", FrameBytes-1-len(head)-len(tail))
	peer.send(t, head+pad+tail) // exactly FrameBytes with its newline
	f := peer.recv(t)
	if want := fmt.Sprint(len(`{"pad":""}`) + len(pad)); string(f.ID) != "1" || string(f.Result) != want {
		t.Errorf("exact-limit request: got %+v, want id 1 result %s", f, want)
	}
}

func TestConnMalformedFramesAnsweredAndConnectionKept(t *testing.T) {
	hangWatchdog(t)
	c, peer := newPipeConn(t, funcHandler{request: echoParams}, ConnOptions{})
	tests := []struct {
		line string
		id   string
		code int
	}{
		{`{"jsonrpc":"2.0",`, "null", codeParseError},
		{`[{"jsonrpc":"2.0","id":1,"method":"m"}]`, "null", codeInvalidRequest},
		{`{"jsonrpc":"1.0","id":5,"method":"m"}`, "5", codeInvalidRequest},
		{`{"jsonrpc":"2.0","id":"5","method":"m"}`, "null", codeInvalidRequest},
		{`{"jsonrpc":"2.0","method":"m","params":[1]}`, "null", codeInvalidRequest},
	}
	for _, tt := range tests {
		peer.send(t, tt.line)
		wantError(t, peer.recv(t), tt.id, tt.code, "", ReasonProtocolError)
	}
	peer.send(t, `{"jsonrpc":"2.0","id":9,"method":"echo","params":{}}`)
	if f := peer.recv(t); string(f.ID) != "9" || f.Error != nil {
		t.Errorf("valid request after malformed ones: got %+v, want a result for id 9", f)
	}
	if got, want := c.stats().FramesIn, uint64(len(tests)+1); got != want {
		t.Errorf("FramesIn: got %d, want %d", got, want)
	}
}

func TestConnD4IDsStartAtOneAndIncrement(t *testing.T) {
	hangWatchdog(t)
	c, peer := newPipeConn(t, nil, ConnOptions{})
	for want := 1; want <= 3; want++ {
		result := make(chan json.RawMessage, 1)
		go func() {
			r, err := c.Call(context.Background(), "m", nil)
			if err != nil {
				t.Errorf("Call %d: %v", want, err)
			}
			result <- r
		}()
		f := peer.recv(t)
		if string(f.ID) != fmt.Sprint(want) || string(f.Params) != "{}" {
			t.Errorf("request %d: got id %s params %s, want id %d params {}", want, f.ID, f.Params, want)
		}
		peer.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"n":%d}}`, want, want))
		if got := <-result; string(got) != fmt.Sprintf(`{"n":%d}`, want) {
			t.Errorf("result %d: got %s", want, got)
		}
	}
}

func TestConnPeerErrorResponseMatchesByReason(t *testing.T) {
	hangWatchdog(t)
	c, peer := newPipeConn(t, nil, ConnOptions{})
	result := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), "m", nil)
		result <- err
	}()
	peer.recv(t)
	peer.send(t, `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"gone","data":{"reason":"content_ref_expired","retryable":true}}}`)
	if err := <-result; !errors.Is(err, ReasonContentRefExpired) {
		t.Errorf("Call: got %v, want reason content_ref_expired", err)
	}
}

func TestConnD4UnknownResponseDroppedAndCounted(t *testing.T) {
	hangWatchdog(t)
	c, peer := newPipeConn(t, funcHandler{request: echoParams}, ConnOptions{})
	peer.send(t, `{"jsonrpc":"2.0","id":99,"result":{}}`)
	peer.send(t, `{"jsonrpc":"2.0","id":98,"error":{"code":-32603,"message":"x"}}`)
	// The reader handles frames in order: once this is answered, both
	// responses have been dispatched.
	peer.send(t, `{"jsonrpc":"2.0","id":1,"method":"sync","params":{}}`)
	peer.recv(t)
	if got := c.stats().UnknownResponses; got != 2 {
		t.Errorf("UnknownResponses: got %d, want 2", got)
	}
	if err := c.Err(); err != nil {
		t.Errorf("Err: got %v, want nil (connection up)", err)
	}
}

func TestConnCallWithADoneContextSendsNothing(t *testing.T) {
	hangWatchdog(t)
	c, _ := newPipeConn(t, nil, ConnOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Call(ctx, "m", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Call: got %v, want context.Canceled", err)
	}
	if err := c.Notify(ctx, "n", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Notify: got %v, want context.Canceled", err)
	}
	if got := c.stats().FramesOut; got != 0 {
		t.Errorf("FramesOut: got %d, want 0", got)
	}
}

// A response racing its caller's deadline is either returned, or dropped
// and counted (as late when the reader had already taken the call, as
// unknown when the caller had already forgotten it): none vanishes.
func TestConnD4EveryResponseIsReturnedOrCounted(t *testing.T) {
	hangWatchdog(t)
	c, peer := newPipeConn(t, nil, ConnOptions{})
	var requests atomic.Int64
	go func() {
		for {
			line, err := peer.in.ReadBytes('\n')
			if err != nil {
				return
			}
			f, err := parseOneFrame(line)
			if err != nil || f.Method == "" {
				return
			}
			if f.Method == "call" {
				requests.Add(1)
			}
			if _, err := fmt.Fprintf(peer.out, `{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", f.ID); err != nil {
				return
			}
		}
	}()
	const n = 2000
	var returned int64
	for range n {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			runtime.Gosched()
			cancel()
		}()
		if _, err := c.Call(ctx, "call", nil); err == nil {
			returned++
		} else if !errors.Is(err, context.Canceled) {
			t.Fatalf("Call: %v", err)
		}
		cancel()
	}
	// The peer answers in order: once this returns, every earlier
	// response has been read and dispatched.
	if _, err := c.Call(context.Background(), "sync", nil); err != nil {
		t.Fatal(err)
	}
	st := c.stats()
	if got := returned + int64(st.UnknownResponses) + int64(st.LateResponses); got != requests.Load() {
		t.Fatalf("%d responses sent, %d returned + %d unknown + %d late = %d", requests.Load(), returned, st.UnknownResponses, st.LateResponses, got)
	}
	t.Logf("%d sent: %d returned, %d unknown, %d late", requests.Load(), returned, st.UnknownResponses, st.LateResponses)
}

// A handler's slot is free before its answer can reach the peer: a peer
// that sends each request after reading the previous answer is never
// told "server busy", even with a single slot.
func TestConnAnsweredSlotIsFreeBeforeThePeerSeesTheAnswer(t *testing.T) {
	hangWatchdog(t)
	_, peer := newPipeConn(t, funcHandler{request: echoParams}, ConnOptions{MaxHandlers: 1})
	for i := 1; i <= 2000; i++ {
		peer.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"echo","params":{}}`, i))
		if f := peer.recv(t); f.Error != nil || string(f.ID) != fmt.Sprint(i) {
			t.Fatalf("request %d: got id %s error %+v, want its result", i, f.ID, f.Error)
		}
	}
}

// TestConnTapSeesARequestBeforeItsAnswer: the tap sees an outbound frame
// before it is written, so a transcript never shows an answer ahead of
// its request, however the reader and the writer are scheduled. The
// Conn's output checks, at each write, that the tap has already seen the
// frame being written.
func TestConnTapSeesARequestBeforeItsAnswer(t *testing.T) {
	hangWatchdog(t)
	var mu sync.Mutex
	var seen []string
	tap := func(inbound bool, frame []byte) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("%t %s", inbound, frame))
	}
	connR, peerW := io.Pipe()
	peerR, pipeW := io.Pipe()
	var unseen atomic.Int32
	connW := writeCheck{pipeW, func(p []byte) {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 || seen[len(seen)-1] != "false "+strings.TrimSuffix(string(p), "\n") {
			unseen.Add(1)
		}
	}}
	c := NewConn(connR, connW, nil, ConnOptions{Tap: tap})
	t.Cleanup(func() { c.Close(); peerR.Close(); peerW.Close() })
	peer := &testPeer{in: bufio.NewReader(peerR), rc: peerR, out: peerW}
	done := make(chan error, 1)
	go func() { _, err := c.Call(context.Background(), "x/ping", struct{}{}); done <- err }()
	req := peer.recv(t)
	peer.send(t, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{}}`)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := unseen.Load(); n != 0 {
		t.Errorf("%d frames were written before the tap saw them", n)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{`false {"jsonrpc":"2.0","id":1,"method":"x/ping","params":{}}`, `true {"jsonrpc":"2.0","id":1,"result":{}}`}
	if !slices.Equal(seen, want) {
		t.Fatalf("tap saw %q, want %q", seen, want)
	}
}

// writeCheck is a WriteCloser that runs check on each write before it.
type writeCheck struct {
	io.WriteCloser
	check func(p []byte)
}

func (w writeCheck) Write(p []byte) (int, error) {
	w.check(p)
	return w.WriteCloser.Write(p)
}
