package extension

// The inbound half of a Conn: the reader goroutine, the dispatch of what
// it reads, the request handlers and the notification worker.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
)

// readLoop is the reader goroutine: it reads frames until the input ends
// or the connection does, and hands each to dispatch. It returns early,
// leaving readerDone open, when reading has moved on to a new reader
// while it ran a handler (runInline).
func (c *Conn) readLoop() {
	for {
		if waitClosed(c.done, 0) {
			close(c.readerDone)
			return // nothing is dispatched once the connection has ended
		}
		line, err := c.fr.readFrame()
		if err != nil {
			var tooLarge *Error
			switch {
			case errors.As(err, &tooLarge) && tooLarge.Reason == ReasonFrameTooLarge:
				// D2: an oversized inbound frame is fatal. One
				// best-effort error frame with id null, then the
				// frame_too_large error ends the connection.
				c.fail(tooLarge) // first: the answer must not delay the end
				c.sendAnswer(&outFrame{data: encodeError(nil, tooLarge)})
			case err == io.EOF:
				c.fail(fmt.Errorf("extension: peer closed the connection: %w", io.EOF))
			default:
				c.fail(fmt.Errorf("extension: read frame: %w", err))
			}
			close(c.readerDone)
			return
		}
		c.framesIn.Add(1)
		c.opts.Tap(true, line)
		m, fe := decodeMessage(line)
		if c.admit(&m, fe, c.fr.frameEnd()) && !c.dispatch(m, fe) {
			return // another goroutine reads now
		}
	}
}

// dispatch routes one decoded frame, on the reader goroutine. It reports
// whether this goroutine is still the reader.
func (c *Conn) dispatch(m message, fe *frameError) bool {
	if fe != nil && fe.kind == kindResponse {
		// PROTOCOL.md §2.4: a malformed response is dropped, never
		// answered: answering it could start an endless exchange of
		// error responses between two peers.
		c.malformedResponses.Add(1)
		c.opts.Logf("extension: dropped a malformed response: %v", fe.err)
		return true
	}
	if fe != nil {
		// PROTOCOL.md §2.4: a malformed frame is answered, with its id
		// when the id itself is valid, and the connection survives.
		c.answerFrame(fe, fe.err)
		return true
	}
	switch m.kind {
	case kindRequest:
		select {
		case c.handlerSem <- struct{}{}:
			return c.runInline(m)
		default:
			// PROTOCOL.md §2.5: past MaxHandlers, answer at once.
			c.sendAnswer(&outFrame{data: encodeError(&m.id, &Error{Code: codeServerBusy, Message: "server busy"})})
		}
	case kindNotification:
		if c.notifQueued.Load() == 0 && c.notifyMu.TryLock() {
			// Nothing is queued or being handled: this one is next in
			// order, handled here without waking the worker.
			return c.runInline(m)
		}
		c.queueNotification(m)
	case kindResponse:
		call := c.take(m.id)
		if call == nil {
			// D4: a response to an unknown id is dropped and counted.
			c.unknownResponses.Add(1)
			c.opts.Logf("extension: dropped a response to unknown id %d", m.id)
			return true
		}
		if m.err != nil {
			call <- callReply{err: m.err, peer: true}
		} else {
			call <- callReply{result: m.result, peer: true}
		}
	}
	return true
}

// queueNotification hands m to the notification worker. When the queue
// is full, the host's reader waits for room (D26: the pipe slows the peer
// down); with DropOverflowingNotifications it waits at most InlineBound,
// then drops m (PROTOCOL.md §2.5, the sidecar side of D26).
func (c *Conn) queueNotification(m message) {
	c.notifQueued.Add(1)
	select {
	case c.notifq <- m:
		return
	default:
	}
	if !c.opts.DropOverflowingNotifications {
		select {
		case c.notifq <- m:
			return
		case <-c.done:
		}
	} else if c.waitForRoom(m) {
		return
	} else if n := c.droppedNotifications.Add(1); isPowerOf10(n) {
		// A line per drop would slow the reader down in the very burst
		// that overflows it: the 1st, 10th, 100th...
		c.opts.Logf("extension: dropped %s: %d notifications already queued (%d dropped so far)", m.method, c.opts.NotificationQueue, n)
	}
	c.notifQueued.Add(-1) // not queued
}

// isPowerOf10 reports whether n is 1, 10, 100...
func isPowerOf10(n uint64) bool {
	for n >= 10 && n%10 == 0 {
		n /= 10
	}
	return n == 1
}

// waitForRoom queues m if the notification queue has room within
// InlineBound, and reports whether it did. The wait is bounded, so an
// observer that calls the peer while the queue is full still gets its
// answer once what does not fit is dropped (D26's reason for dropping);
// but a burst that comes while the handler before it is off its CPU for a
// moment no longer overflows at once: with drops at once, 3-15% of a tight
// loop of 100,000 events was lost on 2 busy cores.
func (c *Conn) waitForRoom(m message) bool {
	t := getTimer(c.opts.InlineBound)
	defer putTimer(t)
	select {
	case c.notifq <- m:
		return true
	case <-t.C:
	case <-c.done:
	}
	return false
}

// runInline handles a request, holding a handler slot, or a notification,
// holding notifyMu, on the reader goroutine, and reports whether this
// goroutine is still the reader. If the handler is still running after
// InlineBound, or a Call is made meanwhile, migrate starts a new reader and
// this goroutine ends with the handler. A hand-off per frame to another
// goroutine, and its wake-up, was the largest cost of a sidecar's round
// trip (profiled under exthost bench) and halved its event throughput.
func (c *Conn) runInline(m message) bool {
	token := c.inlineSeq.Add(1) // never 0
	c.inline.Store(token)
	c.inlineTimer.Reset(c.opts.InlineBound)
	if m.kind == kindRequest {
		c.handleRequest(m)
	} else {
		c.handleNotification(m)
		c.notifyMu.Unlock()
	}
	c.inlineMu.Lock()
	still := c.inline.CompareAndSwap(token, 0)
	c.inlineMu.Unlock()
	if still {
		// Only while the timer is still this reader's: after a migration
		// the new reader may have armed it for its own handler.
		c.inlineTimer.Stop()
	}
	return still
}

// migrate moves reading on to a new goroutine if a handler is running on
// the reader. The reader's goroutine is counted in wg until its handler
// returns, and inlineMu keeps it from returning between the swap and
// wg.Go, so the new one is added while the count is above zero and Close
// joins it. A late timer may migrate the next handler early, which costs
// one goroutine.
func (c *Conn) migrate() {
	c.inlineMu.Lock()
	defer c.inlineMu.Unlock()
	if token := c.inline.Load(); token != 0 && c.inline.CompareAndSwap(token, 0) {
		c.wg.Go(c.readLoop)
	}
}

// answerFrame answers a frame that claimed to be a request with err, with
// the frame's id when it could be read and null otherwise; other frames
// are not answered.
func (c *Conn) answerFrame(fe *frameError, err *Error) {
	var id *msgID
	if fe.hasID {
		id = &fe.id
	}
	c.sendAnswer(&outFrame{data: encodeError(id, err)})
}

// handleRequest answers one request, holding a handler slot, which is
// freed as its answer is taken to be written.
func (c *Conn) handleRequest(m message) {
	data, then, err := c.answer(c.ctx, m)
	if len(data) > FrameBytes {
		// PROTOCOL.md §2.4: an oversized response is replaced by a small
		// internal error response, with its data like every other (D7).
		c.opts.Logf("extension: response to %s is %d bytes, over the frame limit", m.method, len(data))
		data = encodeError(&m.id, NewError(ReasonInternal, "response exceeds frame size limit"))
	}
	// Like every answer, it is still written while the connection drains
	// after its end (best effort, within WriterDrainTimeout).
	c.sendAnswer(&outFrame{data: data, slot: true, endAfter: c.answered(m.method, err)})
	if then != nil {
		then() // after the answer is queued or written: what then sends follows it
	}
}

// answer calls the handler and encodes its response frame; err is the
// handler's error, nil when it answered with a result; then is the Then
// of a result that is an [AnswerThen].
func (c *Conn) answer(ctx context.Context, m message) (data []byte, then func(), err error) {
	defer func() {
		if p := recover(); p != nil {
			c.opts.Logf("extension: handler for %s panicked: %v\n%s", m.method, p, debug.Stack())
			err = NewError(ReasonInternal, "")
			data = encodeError(&m.id, err.(*Error))
		}
	}()
	var result any
	switch {
	case c.opts.Sidecar && m.method == MethodInitialize:
		err = checkInitialize(m.params) // PROTOCOL.md §3.3: the version rule, before the handler
	case c.h == nil:
		err = NewError(ReasonUnknownMethod, "method not found: "+m.method)
	}
	if err == nil && c.h != nil {
		result, err = c.h.HandleRequest(ctx, m.method, m.params)
		if at, ok := result.(AnswerThen); ok && err == nil {
			result, then = at.Result, at.Then
		}
	}
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			c.opts.Logf("extension: handler for %s: %v", m.method, err)
		}
		return encodeError(&m.id, asWireError(err)), nil, err
	}
	data, err = encodeResult(m.id, result)
	if err != nil {
		c.opts.Logf("extension: encode result of %s: %v", m.method, err)
		e := NewError(ReasonInternal, "")
		return encodeError(&m.id, e), then, e
	}
	return data, then, nil
}

// notifyLoop is the notification worker: one notification at a time, in
// arrival order, until the connection ends.
func (c *Conn) notifyLoop() {
	for {
		select {
		case m := <-c.notifq:
			if waitClosed(c.done, 0) {
				return // the connection ended while m was queued
			}
			// One at a time: after the one the reader may be handling.
			c.notifyMu.Lock()
			c.handleNotification(m)
			c.notifyMu.Unlock()
			c.notifQueued.Add(-1)
		case <-c.done:
			return
		}
	}
}

func (c *Conn) handleNotification(m message) {
	defer func() {
		if p := recover(); p != nil {
			c.opts.Logf("extension: notification handler for %s panicked: %v\n%s", m.method, p, debug.Stack())
		}
	}()
	if c.h != nil {
		c.h.HandleNotification(c.ctx, m.method, m.params)
	}
}
