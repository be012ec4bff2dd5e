package extension

// The inbound half of a Conn: the reader goroutine, the dispatch of what
// it reads, the request handlers and the notification worker.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
)

// readLoop is the reader goroutine: it reads frames until the input ends
// or the connection does, and hands each to dispatch.
func (c *Conn) readLoop() {
	defer close(c.readerDone)
	for {
		select {
		case <-c.done:
			return // nothing is dispatched once the connection has ended
		default:
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
				c.sendAnswer(encodeError(nil, tooLarge))
			case err == io.EOF:
				c.fail(fmt.Errorf("extension: peer closed the connection: %w", io.EOF))
			default:
				c.fail(fmt.Errorf("extension: read frame: %w", err))
			}
			return
		}
		c.framesIn.Add(1)
		if c.opts.Tap != nil {
			c.opts.Tap(true, line)
		}
		c.dispatch(decodeMessage(line))
	}
}

// dispatch routes one decoded frame, on the reader goroutine.
func (c *Conn) dispatch(m Message, fe *FrameError) {
	if c.opts.Gate != nil {
		// D6: the gate sees every frame before anything is dispatched.
		if err := c.opts.Gate(&m, fe); err != nil {
			switch {
			case fe == nil && m.Kind == KindRequest:
				c.sendAnswer(encodeError(&m.ID, asWireError(err)))
			case fe != nil && fe.Kind == KindRequest && fe.HasID:
				c.sendAnswer(encodeError(&fe.ID, asWireError(err)))
			}
			return
		}
	}
	if fe != nil && fe.Kind == KindResponse {
		// CONTRACT-NOTES §1.2: a malformed response is dropped, never
		// answered: answering it could start an endless exchange of
		// error responses between two peers.
		c.malformedResponses.Add(1)
		c.opts.Logf("extension: dropped a malformed response: %v", fe.Err)
		return
	}
	if fe != nil {
		// CONTRACT-NOTES §1.2: a malformed frame is answered, with its
		// id when the id itself is valid, and the connection survives.
		var id *ID
		if fe.HasID {
			id = &fe.ID
		}
		c.sendAnswer(encodeError(id, fe.Err))
		return
	}
	switch m.Kind {
	case KindRequest:
		select {
		case c.handlerSem <- struct{}{}:
			c.wg.Go(func() { c.handleRequest(m) })
		default:
			// CONTRACT-NOTES §1.3: past MaxHandlers, answer at once.
			c.sendAnswer(encodeError(&m.ID, &Error{Code: CodeServerBusy, Message: "server busy"}))
		}
	case KindNotification:
		select {
		case c.notifq <- m:
		default:
			if c.opts.DropOverflowingNotifications {
				// CONTRACT-NOTES §1.3 (sidecar side): an observation that
				// does not fit is dropped with a log line.
				c.droppedNotifications.Add(1)
				c.opts.Logf("extension: dropped %s: %d notifications already queued", m.Method, c.opts.NotificationQueue)
				return
			}
			// CONTRACT-NOTES §1.3 (host side): notifications, such as
			// stream chunks, are never dropped silently; overflow fails
			// the connection.
			c.fail(fmt.Errorf("extension: inbound notification queue overflow (%d queued) at %s", c.opts.NotificationQueue, m.Method))
		}
	case KindResponse:
		c.mu.Lock()
		call := c.pending[m.ID]
		delete(c.pending, m.ID)
		c.mu.Unlock()
		if call == nil {
			// D4: a response to an unknown id is dropped and counted.
			c.unknownResponses.Add(1)
			c.opts.Logf("extension: dropped a response to unknown id %d", m.ID)
			return
		}
		if m.Error != nil {
			call.reply <- callReply{err: m.Error, peer: true}
		} else {
			call.reply <- callReply{result: m.Result, peer: true}
		}
	}
}

// sendAnswer queues an answer from the reader. It waits for room, but not
// past the writer's end, and is still flushed after the connection ended.
func (c *Conn) sendAnswer(data []byte) {
	select {
	case c.writeq <- &outFrame{data: data}:
	case <-c.writerDone:
	}
}

// handleRequest runs on its own goroutine, holding a handler token.
func (c *Conn) handleRequest(m Message) {
	hooks := new(answerHooks)
	data := c.answer(context.WithValue(c.ctx, answerHooksKey{}, hooks), m)
	if len(data) > FrameBytes {
		// CONTRACT-NOTES §1.1: an oversized response is replaced by a
		// small error response.
		c.opts.Logf("extension: response to %s is %d bytes, over the frame limit", m.Method, len(data))
		data = encodeError(&m.ID, &Error{Code: CodeInternal, Message: "response exceeds frame size limit"})
	}
	// Like every answer, it is still written while the connection drains
	// after its end (best effort, within WriterDrainTimeout).
	// The slot is freed by the writer as the answer leaves the queue
	// (freeSlot), or here when it never gets there.
	select {
	case c.writeq <- &outFrame{data: data, hooks: hooks, slot: true}:
	case <-c.writerDone:
		<-c.handlerSem
	}
}

// answer calls the handler and encodes its response frame.
func (c *Conn) answer(ctx context.Context, m Message) (data []byte) {
	defer func() {
		if p := recover(); p != nil {
			c.opts.Logf("extension: handler for %s panicked: %v\n%s", m.Method, p, debug.Stack())
			data = encodeError(&m.ID, NewError(ReasonInternal, ""))
		}
	}()
	if c.h == nil {
		return encodeError(&m.ID, NewError(ReasonUnknownMethod, "method not found: "+m.Method))
	}
	result, err := c.h.HandleRequest(ctx, m.Method, m.Params)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			c.opts.Logf("extension: handler for %s: %v", m.Method, err)
		}
		return encodeError(&m.ID, asWireError(err))
	}
	data, err = encodeResult(m.ID, result)
	if err != nil {
		c.opts.Logf("extension: encode result of %s: %v", m.Method, err)
		return encodeError(&m.ID, NewError(ReasonInternal, ""))
	}
	return data
}

// notifyLoop is the notification worker: one notification at a time, in
// arrival order, until the connection ends.
func (c *Conn) notifyLoop() {
	for {
		select {
		case m := <-c.notifq:
			select {
			case <-c.done:
				return // the connection ended while m was queued
			default:
			}
			c.handleNotification(m)
		case <-c.done:
			return
		}
	}
}

func (c *Conn) handleNotification(m Message) {
	defer func() {
		if p := recover(); p != nil {
			c.opts.Logf("extension: notification handler for %s panicked: %v\n%s", m.Method, p, debug.Stack())
		}
	}()
	if c.h != nil {
		c.h.HandleNotification(c.ctx, m.Method, m.Params)
	}
}

// AfterAnswer arranges for f to run once the answer to a request has been
// written completely; ctx is the context the request's handler received, or
// one derived from it. This is how a handler answers and then ends the
// connection, as extension/shutdown does: it calls AfterAnswer with a
// function that calls [Conn.Fail], and returns its answer.
//
// f runs on the Conn's writer goroutine, so it must not block and must not
// call [Conn.Close]. An answer queued when the connection ends is still
// written while the writer drains (within WriterDrainTimeout); if it is
// never written, f does not run. If ctx is not a handler's context, f runs
// at once.
func AfterAnswer(ctx context.Context, f func()) {
	h, _ := ctx.Value(answerHooksKey{}).(*answerHooks)
	if h == nil || h.add(f) {
		f()
	}
}

// answerHooksKey is the context key of a request's answerHooks.
type answerHooksKey struct{}

// answerHooks holds the functions to run once a request's answer is
// written.
type answerHooks struct {
	mu      sync.Mutex // protects the following
	written bool       // the answer has been written; later hooks run at once
	fns     []func()
}

// add queues f, or reports that the answer is already written and f should
// run now.
func (h *answerHooks) add(f func()) (runNow bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.written {
		return true
	}
	h.fns = append(h.fns, f)
	return false
}

// markWritten runs the queued functions, on the writer goroutine.
func (h *answerHooks) markWritten() {
	h.mu.Lock()
	fns := h.fns
	h.written, h.fns = true, nil
	h.mu.Unlock()
	for _, f := range fns {
		f()
	}
}
