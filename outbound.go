package extension

// The outbound half of a Conn: calls and notifications, the writer
// goroutine that alone writes frames, and the supervisor that watches it
// for stalls and tears the connection down.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"
)

// callReply is what a pending call receives, once: its channel has room
// for it, so delivering never blocks.
type callReply struct {
	result json.RawMessage
	err    error
	peer   bool // a response from the peer, not the connection's end
}

// outFrame is one encoded frame in the write queue.
type outFrame struct {
	data     []byte
	state    atomic.Int32 // frameQueued, then frameWriting or frameSkipped
	event    bool         // a best-effort event: counts against EventBudget
	call     bool         // a request: dropped once the connection has ended, its caller has failed
	slot     bool         // an answer holding a handler slot, freed as it leaves the queue
	opens    bool         // extension/initialized from the host: opens the barrier (D6)
	endAfter error        // once written, the connection ends with this error
}

const (
	frameQueued int32 = iota
	frameWriting
	frameSkipped
)

// Call sends a request and waits for its response. It returns the raw
// result, the peer's error as an *Error, the terminal error of the
// connection if it ends first, or ctx's error (wrapped) if ctx is done
// first; a request whose writing has not started by then is never sent.
//
// D2: a request that would exceed [FrameBytes] fails locally with reason
// frame_too_large and the connection stays up. Every call takes the next id
// (D4), even one that fails locally.
func (c *Conn) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("extension: call %s: %w", method, err)
	}
	call := make(chan callReply, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = call
	c.mu.Unlock()

	f, err := newFrame(&id, method, params)
	if err != nil {
		c.forget(id, call)
		return nil, err
	}
	select {
	case c.writeq <- f:
	case <-ctx.Done():
		c.forget(id, call)
		return nil, fmt.Errorf("extension: call %s: %w", method, ctx.Err())
	case <-c.done:
		return nil, c.Err()
	}
	select {
	case r := <-call:
		return r.result, r.err
	case <-ctx.Done():
		c.forget(id, call)
		// A frame not yet started is skipped; one being written is
		// finished, so the peer never sees a torn frame (D2).
		f.state.CompareAndSwap(frameQueued, frameSkipped)
		return nil, fmt.Errorf("extension: call %s: %w", method, ctx.Err())
	}
}

// callResult is Call, then the strict decoding of the result into result,
// a pointer to the method's result DTO.
func (c *Conn) callResult(ctx context.Context, method string, params, result any) error {
	raw, err := c.Call(ctx, method, params)
	if err != nil {
		return err
	}
	return DecodeResult(method, raw, result)
}

// forget removes a pending call whose caller gave up; its response, if one
// comes later, is dropped and counted as unknown. When the call is already
// gone, its reply was taken off the table and is being delivered: it is
// received here, and counted as late when it is the peer's response, so no
// response goes unaccounted for.
func (c *Conn) forget(id msgID, call chan callReply) {
	if c.take(id) == nil {
		if r := <-call; r.peer {
			c.lateResponses.Add(1)
			c.opts.Logf("extension: dropped a response to id %d that came as its caller gave up", id)
		}
	}
}

// take removes the pending call with this id from the table and returns
// it, nil when there is none: its reply is then the taker's to deliver.
func (c *Conn) take(id msgID) chan callReply {
	c.mu.Lock()
	defer c.mu.Unlock()
	call := c.pending[id]
	delete(c.pending, id)
	return call
}

// isPending reports whether a request with this id was sent and is still
// waiting for its response.
func (c *Conn) isPending(id msgID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.pending[id]
	return ok
}

// Notify sends a notification, waiting for room in the write queue until
// ctx is done. It returns once the notification is queued, or the
// connection's terminal error, or ctx's error (wrapped). An oversized
// notification fails locally with reason frame_too_large (D2).
func (c *Conn) Notify(ctx context.Context, method string, params any) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("extension: notify %s: %w", method, err)
	}
	f, err := c.newNotification(method, params)
	if err != nil {
		return err
	}
	// D6: the host's extension/initialized opens the barrier.
	f.opens = c.opts.host && method == MethodInitialized
	select {
	case c.writeq <- f:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("extension: notify %s: %w", method, ctx.Err())
	case <-c.done:
		return c.Err()
	}
}

// tryNotify sends a best-effort event without ever blocking (D20). When
// EventBudget events are already queued or being written, or the write
// queue is full, it returns an error matching errQueueFull and the event is
// not sent.
func (c *Conn) tryNotify(method string, params any) error {
	f, err := c.newNotification(method, params)
	if err != nil {
		return err
	}
	f.event = true
	if c.events.Add(1) > int64(c.opts.EventBudget) {
		err = fmt.Errorf("%w: %s dropped, %d events pending", errQueueFull, method, c.opts.EventBudget)
	} else {
		select {
		case c.writeq <- f:
			return nil
		default:
			err = fmt.Errorf("%w: %s dropped, write queue full", errQueueFull, method)
		}
	}
	// Not sent: the event gives its budget back and counts as dropped.
	c.events.Add(-1)
	c.droppedEvents.Add(1)
	return err
}

// newNotification encodes a notification frame, or returns the error that
// keeps it from being sent.
func (c *Conn) newNotification(method string, params any) (*outFrame, error) {
	if err := c.Err(); err != nil {
		return nil, err
	}
	return newFrame(nil, method, params)
}

// newFrame encodes a request frame, or a notification frame when id is
// nil, or returns the error that keeps it from being sent.
func newFrame(id *msgID, method string, params any) (*outFrame, error) {
	data, err := encodeRequest(id, method, params)
	if err != nil {
		return nil, fmt.Errorf("extension: encode %s params: %w", method, err)
	}
	if len(data) > FrameBytes {
		// D2: an oversized outbound frame fails only this call.
		what := "request"
		if id == nil {
			what = "notification"
		}
		return nil, NewError(ReasonFrameTooLarge, fmt.Sprintf("outbound %s %s is %d bytes, over the %d-byte frame limit", what, method, len(data), FrameBytes))
	}
	return &outFrame{data: data, call: id != nil}, nil
}

// sendAnswer queues an answer from the reader. It waits for room, but not
// past the writer's end, and is still flushed after the connection ended.
func (c *Conn) sendAnswer(f *outFrame) {
	select {
	case c.writeq <- f:
	case <-c.writerDone:
		c.freeSlot(f)
	}
}

// writeLoop is the writer goroutine, the only one that writes to w (D2:
// frames never interleave). Once the connection has ended it drains.
func (c *Conn) writeLoop() {
	defer close(c.writerDone)
	for {
		if waitClosed(c.done, 0) {
			c.drain()
			return
		}
		select {
		case f := <-c.writeq:
			if !c.write(f) {
				c.dropQueued() // the connection has failed: nothing more is written
				return
			}
		case <-c.done:
			// Back to the check above, which drains.
		}
	}
}

// drain is the writer once the connection has ended: it still writes what
// is queued, in order, so that a barrier's rejection, the frame_too_large
// error frame or a late answer reaches the peer after the notifications
// queued before it, never ahead of them. Requests are dropped: their
// callers have already failed. It stops when the reader has stopped and
// the queue is empty, or when the supervisor ends the drain.
func (c *Conn) drain() {
	readerStopped := false
	for {
		var f *outFrame
		if readerStopped {
			// Nothing more is coming from the reader: flush what is
			// queued and stop.
			select {
			case f = <-c.writeq:
			default:
				return
			}
		} else {
			select {
			case f = <-c.writeq:
			case <-c.readerDone:
				readerStopped = true
				continue
			case <-c.drainStop:
				c.dropQueued()
				return
			}
		}
		if !f.call && !c.write(f) {
			c.dropQueued()
			return
		}
	}
}

// dropQueued discards what is left in the queue, returning the event
// budget and the handler slots its frames held.
func (c *Conn) dropQueued() {
	for {
		select {
		case f := <-c.writeq:
			if f.event {
				c.events.Add(-1)
			}
			c.freeSlot(f)
		default:
			return
		}
	}
}

// write writes one frame unless its caller gave up before it started. It
// reports whether the writer may go on.
func (c *Conn) write(f *outFrame) bool {
	if f.event {
		defer c.events.Add(-1)
	}
	c.freeSlot(f)
	if !f.state.CompareAndSwap(frameQueued, frameWriting) {
		return true // skipped: the caller gave up before the write began
	}
	if f.opens {
		// D6: whatever was read before this point was sent before the
		// sidecar could have seen extension/initialized.
		c.openedAt.Store(c.fr.consumed())
	}
	// Before the write: the peer's answer cannot be tapped first.
	c.opts.Tap(false, f.data[:len(f.data)-1])
	if err := c.fw.writeFrame(f.data); err != nil {
		c.fail(fmt.Errorf("extension: write frame: %w", err))
		return false
	}
	c.framesOut.Add(1)
	if f.endAfter != nil {
		c.fail(f.endAfter)
	}
	return true
}

// freeSlot frees the handler slot an answer holds. It runs as the answer
// leaves the queue, before it is written: a peer that has read an answer
// can always send the next request into the slot it freed (MaxHandlers),
// while answers waiting for a stalled writer still count against it.
func (c *Conn) freeSlot(f *outFrame) {
	if f.slot {
		f.slot = false
		<-c.handlerSem
	}
}

// superviseLoop is the supervisor goroutine. While the connection lives it
// is the write-stall watchdog; once it has ended, it tears down: it closes
// r, which stops the reader, gives the writer WriterDrainTimeout to flush
// the answers still queued, then closes w, which unblocks a stuck write.
func (c *Conn) superviseLoop() {
	tick := time.NewTicker(max(c.opts.WriteStallTimeout/20, time.Millisecond))
	defer tick.Stop()
watch:
	for {
		select {
		case <-tick.C:
			if d := c.fw.stalledFor(); d >= c.opts.WriteStallTimeout {
				// D13: no write progress for the timeout is a crash.
				c.fail(fmt.Errorf("%w: no byte progress for %v", errWriteStall, d.Round(time.Millisecond)))
				c.closeWriter()
			}
		case <-c.done:
			break watch
		}
	}
	c.closeReader()
	if !waitClosed(c.writerDone, c.opts.WriterDrainTimeout) {
		close(c.drainStop)
	}
	c.closeWriter()
}
