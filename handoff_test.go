package extension

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

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
// a call made then still returns with its context's error, and another
// with its own timeout's (D18): a direct write is one non-blocking attempt
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
	if _, err := c.call(context.Background(), 50*time.Millisecond, "ping", nil); !errors.Is(err, errCallTimeout) {
		t.Fatalf("call with a full pipe: got %v, want its own timeout", err)
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
