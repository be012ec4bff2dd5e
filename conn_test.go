package extension

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
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
// The diagnostics a Conn logs for the responses it drops, one Logf call
// each: a test counts the drops of one kind with logCounts.
const (
	logUnknownResponse   = "extension: dropped a response to unknown id %d"
	logLateResponse      = "extension: dropped a response to id %d that came as its caller gave up"
	logMalformedResponse = "extension: dropped a malformed response: %v"
)

// logCounts returns opts with a Logf that counts the calls by format, and
// the count of one format so far.
func logCounts(opts ConnOptions) (ConnOptions, func(format string) int) {
	var mu sync.Mutex
	counts := make(map[string]int)
	opts.Logf = func(format string, _ ...any) {
		mu.Lock()
		defer mu.Unlock()
		counts[format]++
	}
	return opts, func(format string) int {
		mu.Lock()
		defer mu.Unlock()
		return counts[format]
	}
}

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
	var framesIn atomic.Uint64 // the non-empty inbound lines, valid or not
	_, peer := newPipeConn(t, funcHandler{request: echoParams}, ConnOptions{Tap: func(inbound bool, _ []byte) {
		if inbound {
			framesIn.Add(1)
		}
	}})
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
	if got, want := framesIn.Load(), uint64(len(tests)+1); got != want {
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
	opts, logged := logCounts(ConnOptions{})
	c, peer := newPipeConn(t, funcHandler{request: echoParams}, opts)
	peer.send(t, `{"jsonrpc":"2.0","id":99,"result":{}}`)
	peer.send(t, `{"jsonrpc":"2.0","id":98,"error":{"code":-32603,"message":"x"}}`)
	// The reader handles frames in order: once this is answered, both
	// responses have been dispatched.
	peer.send(t, `{"jsonrpc":"2.0","id":1,"method":"sync","params":{}}`)
	peer.recv(t)
	if got := logged(logUnknownResponse); got != 2 {
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
	opts, logged := logCounts(ConnOptions{})
	c, peer := newPipeConn(t, nil, opts)
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
	unknown, late := int64(logged(logUnknownResponse)), int64(logged(logLateResponse))
	if got := returned + unknown + late; got != requests.Load() {
		t.Fatalf("%d responses sent, %d returned + %d unknown + %d late = %d", requests.Load(), returned, unknown, late, got)
	}
	t.Logf("%d sent: %d returned, %d unknown, %d late", requests.Load(), returned, unknown, late)
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

// strictHandler answers like a real peer: unknown methods get
// unknown_method, known ones have their params strictly decoded.
type strictHandler struct{}

func (strictHandler) HandleRequest(ctx context.Context, method string, params json.RawMessage) (any, error) {
	m, ok := lookupMethod(method)
	if !ok {
		return nil, NewError(ReasonUnknownMethod, "method not found: "+method)
	}
	if err := Decode(method, params, reflect.New(m.params).Interface()); err != nil {
		return nil, err
	}
	return map[string]bool{"ok": true}, nil
}

func (strictHandler) HandleNotification(context.Context, string, json.RawMessage) {}

// framePeer is a Conn under test and the raw ends a test drives it with.
type framePeer struct {
	conn   *Conn
	logged func(format string) int // the Conn's diagnostics of one format
	in     *io.PipeWriter          // frames to the Conn
	out    *bufio.Reader           // frames from the Conn
}

func newFramePeer(t *testing.T) *framePeer {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	opts, logged := logCounts(ConnOptions{})
	c := NewConn(inR, outW, strictHandler{}, opts)
	t.Cleanup(func() {
		inW.Close()
		outR.Close()
		c.Close()
	})
	return &framePeer{conn: c, logged: logged, in: inW, out: bufio.NewReaderSize(outR, 1<<16)}
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
				if n := p.logged(logMalformedResponse); n != 1 {
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

func TestConnNotificationsHandledOneAtATimeInOrder(t *testing.T) {
	hangWatchdog(t)
	const n = 50
	got := make(chan string, n)
	var running sync.Mutex
	h := funcHandler{notification: func(_ context.Context, method string, _ json.RawMessage) {
		if !running.TryLock() {
			t.Errorf("notification %s ran while another was running", method)
			return
		}
		defer running.Unlock()
		got <- method
	}}
	_, peer := newPipeConn(t, h, ConnOptions{})
	for i := range n {
		peer.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","method":"n%d"}`, i))
	}
	for i := range n {
		if m, want := <-got, fmt.Sprintf("n%d", i); m != want {
			t.Errorf("notification %d: got %s, want %s", i, m, want)
		}
	}
}

// TestConnNotificationBurstPushesBackD26: on the host's side a full
// notification queue makes the reader wait for room, so a burst of 200,000
// notifications behind a held worker is handled whole, in order, and the
// connection survives (before D26 the 258th failed it).
func TestConnNotificationBurstPushesBackD26(t *testing.T) {
	hangWatchdog(t)
	const n = 200_000
	release := make(chan struct{})
	var handled atomic.Int64
	done := make(chan struct{})
	h := funcHandler{notification: func(_ context.Context, method string, _ json.RawMessage) {
		if method == "n0" {
			<-release
		}
		if want := fmt.Sprintf("n%d", handled.Load()); method != want {
			t.Errorf("handled %s, want %s: notifications out of order", method, want)
		}
		if handled.Add(1) == n {
			close(done)
		}
	}}
	const queue = 256
	full := make(chan struct{})
	var seen atomic.Int64
	c, peer := newPipeConn(t, h, ConnOptions{NotificationQueue: queue, Tap: func(inbound bool, _ []byte) {
		// n0 is held on the reader, the worker may hold n1 (it waits for
		// n0) and the queue takes 256 more: the frame after those can only
		// wait (or, before D26, fail the connection).
		if inbound && seen.Add(1) == queue+3 {
			close(full)
		}
	}})
	go func() {
		var b bytes.Buffer
		for i := range n {
			fmt.Fprintf(&b, "{\"jsonrpc\":\"2.0\",\"method\":\"n%d\"}\n", i)
		}
		peer.out.Write(b.Bytes())
	}()
	<-full
	close(release)
	select {
	case <-done:
	case <-c.Done():
		t.Fatalf("the connection ended after %d notifications: %v", handled.Load(), c.Err())
	}
	if err := c.Err(); err != nil {
		t.Fatalf("Err after the burst: %v, want the connection alive", err)
	}
}

// TestConnDropOverflowingNotificationsKeepsTheConnection: with the SDK's
// policy, a notification that does not fit is dropped and counted, and the
// connection goes on (PROTOCOL.md §2.5; the sidecar half of D26).
func TestConnDropOverflowingNotificationsKeepsTheConnection(t *testing.T) {
	hangWatchdog(t)
	entered := make(chan struct{}, 1)
	h := funcHandler{
		notification: func(ctx context.Context, _ string, _ json.RawMessage) {
			entered <- struct{}{}
			<-ctx.Done()
		},
		request: func(context.Context, string, json.RawMessage) (any, error) { return map[string]bool{"ok": true}, nil },
	}
	c, peer := newPipeConn(t, h, ConnOptions{NotificationQueue: 1, DropOverflowingNotifications: true})
	peer.send(t, `{"jsonrpc":"2.0","method":"n0"}`)
	<-entered
	// n0 is held by its handler on the old reader. Of n1-n5, the worker
	// may take one (it waits for n0), the queue holds one, the rest are
	// dropped.
	for i := 1; i <= 5; i++ {
		peer.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","method":"n%d"}`, i))
	}
	peer.send(t, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if f := peer.recv(t); string(f.ID) != "1" || string(f.Result) != `{"ok":true}` {
		t.Fatalf("answer: got %+v, want the ping's result", f)
	}
	if n := c.stats().DroppedNotifications; n < 3 || n > 4 {
		t.Fatalf("DroppedNotifications = %d, want 3 or 4 of 5", n)
	}
	select {
	case <-c.Done():
		t.Fatalf("the connection ended: %v", c.Err())
	default:
	}
}

// TestConnErrorWithInvalidDataIsStillAnswered: a handler's *Error whose
// Data is not JSON is answered without it, never with an empty frame.
func TestConnErrorWithInvalidDataIsStillAnswered(t *testing.T) {
	hangWatchdog(t)
	h := funcHandler{request: func(context.Context, string, json.RawMessage) (any, error) {
		return nil, &Error{Code: codeDomain, Message: "custom", Data: json.RawMessage("{bad")}
	}}
	_, peer := newPipeConn(t, h, ConnOptions{Tap: func(bool, []byte) {}})
	peer.send(t, `{"jsonrpc":"2.0","id":1,"method":"x"}`)
	f := peer.recv(t)
	if string(f.ID) != "1" || f.Error == nil || f.Error.Code != codeDomain || f.Error.Message != "custom" || f.Error.Data != nil {
		t.Fatalf("answer: got %+v, want the error without its data", f)
	}
}

func TestConnHandlerPanicBecomesInternalErrorAndConnectionSurvives(t *testing.T) {
	hangWatchdog(t)
	var logged bytes.Buffer
	var logMu sync.Mutex
	h := funcHandler{request: func(_ context.Context, method string, params json.RawMessage) (any, error) {
		if method == "boom" {
			panic("secret panic text")
		}
		return params, nil
	}}
	c, peer := newPipeConn(t, h, ConnOptions{Logf: func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintf(&logged, format, args...)
	}})

	peer.send(t, `{"jsonrpc":"2.0","id":1,"method":"boom"}`)
	f := peer.recv(t)
	wantError(t, f, "1", codeInternal, ReasonInternal.Message(), ReasonInternal)
	peer.send(t, `{"jsonrpc":"2.0","id":2,"method":"echo","params":{"a":1}}`)
	if f := peer.recv(t); string(f.ID) != "2" || string(f.Result) != `{"a":1}` {
		t.Errorf("request after the panic: got %+v, want id 2 result {\"a\":1}", f)
	}
	select {
	case <-c.Done():
		t.Errorf("connection ended after a handler panic: %v", c.Err())
	default:
	}
	logMu.Lock()
	defer logMu.Unlock()
	if !strings.Contains(logged.String(), "secret panic text") {
		t.Errorf("log: got %q, want the panic value", logged.String())
	}
}

func TestConnServerBusyPastMaxHandlers(t *testing.T) {
	hangWatchdog(t)
	entered, release := make(chan struct{}, 2), make(chan struct{})
	h := funcHandler{request: func(context.Context, string, json.RawMessage) (any, error) {
		entered <- struct{}{}
		<-release
		return map[string]bool{"ok": true}, nil
	}}
	_, peer := newPipeConn(t, h, ConnOptions{MaxHandlers: 2})

	peer.send(t, `{"jsonrpc":"2.0","id":1,"method":"hold"}`)
	peer.send(t, `{"jsonrpc":"2.0","id":2,"method":"hold"}`)
	<-entered
	<-entered
	peer.send(t, `{"jsonrpc":"2.0","id":3,"method":"hold"}`)
	wantError(t, peer.recv(t), "3", codeServerBusy, "server busy", "")

	close(release)
	for range 2 {
		if f := peer.recv(t); f.Error != nil || string(f.Result) != `{"ok":true}` {
			t.Errorf("held request: got %+v, want result {\"ok\":true}", f)
		}
	}
}

// TestDroppedNotificationsAreLoggedAtPowersOfTen: the drop log names the
// 1st, 10th, 100th... drop, so a burst costs a few lines, not one each.
func TestDroppedNotificationsAreLoggedAtPowersOfTen(t *testing.T) {
	var logged []uint64
	for n := uint64(0); n <= 100_000; n++ {
		if isPowerOf10(n) {
			logged = append(logged, n)
		}
	}
	if want := []uint64{1, 10, 100, 1000, 10_000, 100_000}; fmt.Sprint(logged) != fmt.Sprint(want) {
		t.Fatalf("logged at %v, want %v", logged, want)
	}
}

// TestConnQueuesANotificationOnceAfterWaitingForRoom: with the SDK's
// policy, a notification that finds the queue full waits for room and is
// then handled exactly once (a bug queued it a second time).
func TestConnQueuesANotificationOnceAfterWaitingForRoom(t *testing.T) {
	hangWatchdog(t)
	var mu sync.Mutex
	handled := map[string]int{}
	done := make(chan struct{})
	var c *Conn
	h := funcHandler{notification: func(_ context.Context, method string, _ json.RawMessage) {
		mu.Lock()
		defer mu.Unlock()
		if handled[method]++; method == "n4" {
			close(done)
		}
	}}
	read := make(chan string, 8)
	c, peer := newPipeConn(t, h, ConnOptions{NotificationQueue: 1, DropOverflowingNotifications: true, InlineBound: time.Hour,
		Tap: func(inbound bool, frame []byte) {
			if inbound {
				read <- string(frame)
			}
		}})
	c.notifyMu.Lock() // nothing can be handled: n1 goes to the worker, n2 to the queue, n3 waits for room
	for i := 1; i <= 3; i++ {
		peer.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","method":"n%d"}`, i))
		<-read
	}
	c.notifyMu.Unlock()
	peer.send(t, `{"jsonrpc":"2.0","method":"n4"}`) // read once n3 is queued
	<-done
	mu.Lock()
	defer mu.Unlock()
	if want := map[string]int{"n1": 1, "n2": 1, "n3": 1, "n4": 1}; fmt.Sprint(handled) != fmt.Sprint(want) {
		t.Fatalf("handled %v, want each notification once", handled)
	}
}

// The reader runs request handlers itself and moves reading on when one
// takes long or calls the peer (runInline, migrate); senders write their
// own frames when nothing is queued (direct). These tests pin what that
// must never cost, without measuring any duration.

// TestConnAnswersASecondRequestWhileTheFirstHandlerIsBlocked: a handler
// that does not return keeps its request, not the connection: reading
// moves on after InlineBound, and the next request is answered first.
func TestConnAnswersASecondRequestWhileTheFirstHandlerIsBlocked(t *testing.T) {
	hangWatchdog(t)
	release := make(chan struct{})
	h := funcHandler{request: func(_ context.Context, method string, _ json.RawMessage) (any, error) {
		if method == "hold" {
			<-release
		}
		return map[string]string{"method": method}, nil
	}}
	for _, pipes := range []struct {
		name string
		conn func(*testing.T, Handler, ConnOptions) (*Conn, *testPeer)
	}{
		{"io.Pipe", newPipeConn},
		{"os.Pipe", func(t *testing.T, h Handler, o ConnOptions) (*Conn, *testPeer) {
			c, p, closeAll := osPipeConn(t, h, o)
			t.Cleanup(closeAll)
			return c, p
		}},
	} {
		t.Run(pipes.name, func(t *testing.T) {
			_, peer := pipes.conn(t, h, ConnOptions{})
			peer.send(t, `{"jsonrpc":"2.0","id":1,"method":"hold"}`)
			peer.send(t, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
			if f := peer.recv(t); string(f.ID) != "2" || string(f.Result) != `{"method":"ping"}` {
				t.Fatalf("first answer: got %+v, want the ping's (id 2) while hold is blocked", f)
			}
			release <- struct{}{}
			if f := peer.recv(t); string(f.ID) != "1" || string(f.Result) != `{"method":"hold"}` {
				t.Fatalf("second answer: got %+v, want hold's (id 1)", f)
			}
		})
	}
}

// TestConnHandlerThatCallsThePeerGetsItsAnswer: a handler that sends a
// request of its own needs the reader for the response; the call moves
// reading on at once, so this works even with an InlineBound that never
// runs out.
func TestConnHandlerThatCallsThePeerGetsItsAnswer(t *testing.T) {
	hangWatchdog(t)
	var c *Conn
	h := funcHandler{request: func(ctx context.Context, _ string, _ json.RawMessage) (any, error) {
		return c.Call(ctx, "peer/echo", map[string]int{"n": 7})
	}}
	c, peer := newPipeConn(t, h, ConnOptions{InlineBound: time.Hour})
	peer.send(t, `{"jsonrpc":"2.0","id":1,"method":"ask"}`)
	call := peer.recv(t)
	if call.Method != "peer/echo" || string(call.ID) != "1" {
		t.Fatalf("got %+v, want the handler's own request peer/echo with id 1", call)
	}
	peer.send(t, `{"jsonrpc":"2.0","id":1,"result":{"echo":7}}`)
	if f := peer.recv(t); string(f.ID) != "1" || string(f.Result) != `{"echo":7}` {
		t.Fatalf("answer to ask: got %+v, want the peer's result passed through", f)
	}
}

// TestConnCallerWithAFullPipeReturnsAtItsDeadline: the peer reads
// nothing, a large notification fills the pipe and holds the writer, and
// a call made then still returns with its context's error, and so does
// the next one (D18): a direct write is one non-blocking attempt
// and never a blocking write on the caller's goroutine.
func TestConnCallerWithAFullPipeReturnsAtItsDeadline(t *testing.T) {
	hangWatchdog(t)
	c, _, closeAll := osPipeConn(t, nil, ConnOptions{})
	defer closeAll()
	if c.writeNow == nil {
		t.Fatal("an os.Pipe must get direct writes on Unix")
	}
	big := strings.Repeat("x", 4<<20) // far over any pipe buffer
	if err := c.Notify(context.Background(), "big", map[string]string{"s": big}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Call(ctx, "ping", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Call with a full pipe: got %v, want its context's deadline", err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if _, err := c.Call(ctx2, "ping", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second Call with the pipe still full: got %v, want its context's deadline", err)
	}
	if err := c.Err(); err != nil {
		t.Fatalf("the connection ended: %v; a full pipe within the stall bound is not an error", err)
	}
}

// TestConnMigratedReaderLeavesTheNewReadersTimerAlone: a reader whose
// handler outlived InlineBound ends once it returns, and must not disarm
// the timer the new reader armed for a handler of its own, or nothing
// would be read behind that one. On the bubble's fake clock the timer
// fires only when every goroutine waits, so the run is the same each time.
func TestConnMigratedReaderLeavesTheNewReadersTimerAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		finishSlow, blockStarted, unblock := make(chan struct{}), make(chan struct{}), make(chan struct{})
		release := sync.OnceFunc(func() { close(unblock) })
		h := funcHandler{request: func(ctx context.Context, method string, _ json.RawMessage) (any, error) {
			switch method {
			case "slow":
				<-finishSlow
			case "block":
				close(blockStarted)
				select {
				case <-unblock:
				case <-ctx.Done():
				}
			case "release":
				release()
			}
			return map[string]string{"m": method}, nil
		}}
		_, peer := newPipeConn(t, h, ConnOptions{InlineBound: 50 * time.Millisecond})
		peer.send(t, `{"jsonrpc":"2.0","id":1,"method":"slow"}`)
		peer.send(t, `{"jsonrpc":"2.0","id":2,"method":"block"}`) // read once slow's timer moved reading on
		<-blockStarted                                            // the second reader runs block, its timer armed
		close(finishSlow)
		if f := peer.recv(t); string(f.ID) != "1" {
			t.Fatalf("got %+v, want slow's answer", f)
		}
		// The first reader has ended. Reading must move on from block: on
		// the fake clock, InlineBound after block began. (The bound below
		// is on that clock too; the Conn's watchdog ticks keep it moving.)
		answered := make(chan map[string]bool)
		go func() {
			peer.send(t, `{"jsonrpc":"2.0","id":3,"method":"release"}`)
			ids := map[string]bool{}
			for range 2 {
				ids[string(peer.recv(t).ID)] = true
			}
			answered <- ids
		}()
		select {
		case ids := <-answered:
			if !ids["2"] || !ids["3"] {
				t.Fatalf("answers %v, want block's and release's", ids)
			}
		case <-time.After(time.Hour):
			release() // lets the bubble end
			<-answered
			t.Fatal("release was read only once block returned: the first reader stopped the timer the second had armed")
		}
	})
}

// TestConnWriterBatchesNotifications: a notification never takes the
// direct write meant for requests and answers, so the writer writes the
// notifications queued behind a peer that reads nothing in a few large
// writes. 10,000 stream chunks, counted through the write path, take at
// most 0.05 writes each; taking the direct write while the pipe had room,
// they took one each until it filled.
func TestConnWriterBatchesNotifications(t *testing.T) {
	const chunks = 10000
	connR, peerW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	peerR, connW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := NewConn(connR, connW, nil, ConnOptions{WriteQueue: chunks + 1})
	defer func() {
		c.Close()
		peerW.Close()
		peerR.Close()
	}()
	var writes atomic.Int64
	open := make(chan struct{})
	c.gateWrites(&writes, open)
	read := make(chan int)
	go func() {
		n, in := 0, bufio.NewReader(peerR)
		for ; n < chunks; n++ {
			if _, err := in.ReadBytes('\n'); err != nil {
				break
			}
		}
		read <- n
	}()
	for seq := int64(1); seq <= chunks; seq++ {
		if err := c.Notify(context.Background(), MethodStreamChunk, StreamChunkParams{StreamID: "es_0123456789abcdef01234567", Seq: seq, Chunk: ProviderChunk{Type: ChunkText, Text: "a few tokens"}}); err != nil {
			t.Fatal(err)
		}
	}
	close(open) // the peer reads from now on
	if n := <-read; n != chunks {
		t.Fatalf("the peer read %d chunks, want %d", n, chunks)
	}
	if w := writes.Load(); float64(w)/chunks > 0.05 {
		t.Errorf("%d writes for %d chunks (%.3f a chunk), want at most 0.05 a chunk", w, chunks, float64(w)/chunks)
	}
}
