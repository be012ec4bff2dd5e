package extension

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

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
