package extension

// The outbound half of a Conn: calls and notifications, the writer
// goroutine that alone writes frames, and the supervisor that watches it
// for stalls and tears the connection down.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
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
	return c.call(ctx, 0, method, params)
}

// errCallTimeout is the error of a call whose own timeout ended it.
var errCallTimeout = errors.New("extension: call timed out")

// call is Call with an optional timeout of its own (0: none), which ends
// the call with an error matching errCallTimeout. A pooled timer bounds
// it: the intercept hot path would otherwise build a context per call
// (a context per call was one of the host's allocations and timers
// under exthost bench's intercept_rtt).
func (c *Conn) call(ctx context.Context, timeout time.Duration, method string, params any) (json.RawMessage, error) {
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
	var expired <-chan time.Time
	if timeout > 0 {
		t := getTimer(timeout)
		defer putTimer(t)
		expired = t.C
	}
	gaveUp := func() error {
		c.forget(id, call)
		if ctx.Err() != nil {
			return fmt.Errorf("extension: call %s: %w", method, ctx.Err())
		}
		return fmt.Errorf("%w: %s after %v", errCallTimeout, method, timeout)
	}
	switch c.send(f, ctx.Done(), c.done, expired) {
	case sendStopA, sendStopC:
		return nil, gaveUp()
	case sendStopB:
		return nil, c.Err()
	}
	if c.inline.Load() != 0 {
		// The reader is running a handler, maybe this call's caller:
		// reading moves on, or the response could never be read.
		c.migrate()
	}
	select {
	case r := <-call:
		return r.result, r.err
	case <-ctx.Done():
	case <-expired:
	}
	err = gaveUp()
	// A frame not yet started is skipped; one being written is finished,
	// so the peer never sees a torn frame (D2).
	f.state.CompareAndSwap(frameQueued, frameSkipped)
	return nil, err
}

// timerPool holds stopped timers with empty channels, for getTimer.
var timerPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// getTimer returns a pooled timer set to fire after d; putTimer stops it
// and returns it to the pool. A tick that fired meanwhile is drained, so
// the next user never sees it even with GODEBUG=asynctimerchan=1 (with Go
// 1.23 timers Stop already guarantees that).
func getTimer(d time.Duration) *time.Timer {
	t := timerPool.Get().(*time.Timer)
	t.Reset(d)
	return t
}

func putTimer(t *time.Timer) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	timerPool.Put(t)
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
	switch c.send(f, ctx.Done(), c.done, nil) {
	case sendStopA:
		return fmt.Errorf("extension: notify %s: %w", method, ctx.Err())
	case sendStopB:
		return c.Err()
	}
	return nil
}

// tryNotify sends a best-effort event without ever blocking (D20). When
// EventBudget events are already queued or being written, or the write
// queue is full, it returns an error matching errQueueFull and the event is
// not sent.
func (c *Conn) tryNotify(method string, params any) error {
	// The budget first: an event that will be dropped is not encoded.
	if c.events.Add(1) > int64(c.opts.EventBudget) {
		c.events.Add(-1)
		c.droppedEvents.Add(1)
		return fmt.Errorf("%w: %s dropped, %d events pending", errQueueFull, method, c.opts.EventBudget)
	}
	f, err := c.newNotification(method, params)
	if err != nil {
		c.events.Add(-1)
		return err
	}
	f.event = true
	if c.send(f, nil, nil, nil) == sendDone {
		return nil
	}
	// Not sent: the event gives its budget back and counts as dropped.
	c.events.Add(-1)
	c.droppedEvents.Add(1)
	return fmt.Errorf("%w: %s dropped, write queue full", errQueueFull, method)
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

// sendAnswer sends an answer from a handler or the reader. It waits for
// room, but not past the writer's end, and is still flushed after the
// connection ended.
func (c *Conn) sendAnswer(f *outFrame) {
	if c.send(f, c.writerDone, nil, nil) != sendDone {
		c.freeSlot(f)
	}
}

// sendResult is how send ended: the frame was taken, or which of its
// stop channels fired first, or (not waiting) the queue was full.
type sendResult int

const (
	sendDone sendResult = iota
	sendStopA
	sendStopB
	sendStopC
	sendFull
)

// send hands f to the wire: the calling goroutine writes it at once when
// it can (direct); otherwise it joins the write queue, waiting for room
// until a, b or t fires (a nil channel never does). With all three nil it
// does not wait: a full queue is sendFull.
func (c *Conn) send(f *outFrame, a, b <-chan struct{}, t <-chan time.Time) sendResult {
	if c.direct(f) {
		return sendDone
	}
	c.backlog.Add(1) // before the frame is queued: no direct write may overtake it
	r := sendFull
	if a == nil && b == nil && t == nil {
		select {
		case c.writeq <- f:
			return sendDone
		default:
		}
	} else {
		select {
		case c.writeq <- f:
			return sendDone
		case <-a:
			r = sendStopA
		case <-b:
			r = sendStopB
		case <-t:
			r = sendStopC
		}
	}
	c.backlog.Add(-1)
	return r
}

// direct writes f on the calling goroutine when nothing is queued or being
// written, so the writer goroutine is not woken for it: one of the host's
// three hand-offs per call that profiling exthost bench's intercept_rtt
// found. It makes one
// non-blocking attempt; whatever the pipe does not take is left to the
// writer (rest), which writes it before any other frame, so no frame is
// torn (D2) and a full pipe never blocks the caller past its deadline
// (D18). It reports whether f was taken care of; false leaves f to the
// queue.
func (c *Conn) direct(f *outFrame) bool {
	if c.writeNow == nil || c.backlog.Load() != 0 || !c.wmu.TryLock() {
		return false
	}
	defer c.wmu.Unlock()
	if c.backlog.Load() != 0 || waitClosed(c.done, 0) {
		return false // once the connection has ended, the writer drains in order
	}
	if !c.begin(f) {
		return true // skipped: its caller gave up
	}
	if f.opens {
		// D6, as in writeFrames; the rest, if any, does not store it again.
		c.openedAt.Store(c.fr.consumed())
		c.checkSettled()
		f.opens = false
	}
	n, err := c.writeNow(f.data)
	switch {
	case err != nil:
		c.fail(fmt.Errorf("extension: write frame: %w", err))
	case n < len(f.data):
		f.data = f.data[n:]
		c.rest = f
		c.backlog.Add(1)
		select {
		case c.kick <- struct{}{}:
		default:
		}
	default:
		c.finish(f)
	}
	return true
}

// writeLoop is the writer goroutine. It and direct writers hold wmu while
// they write to w (D2: frames never interleave). Once the connection has
// ended it drains.
func (c *Conn) writeLoop() {
	defer close(c.writerDone)
	for {
		if waitClosed(c.done, 0) {
			c.drain()
			return
		}
		var f *outFrame
		select {
		case f = <-c.writeq:
		case <-c.kick: // a direct write left its rest
		case <-c.done:
			continue // back to the check above, which drains
		}
		if !c.writeBatch(f) {
			c.dropQueued() // the connection has failed: nothing more is written
			return
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
			case <-c.kick:
			default:
				c.writeBatch(nil) // a direct write's rest, if any
				return
			}
		} else {
			select {
			case f = <-c.writeq:
			case <-c.kick:
			case <-c.readerDone:
				readerStopped = true
				continue
			case <-c.drainStop:
				c.dropQueued()
				return
			}
		}
		if !c.writeBatch(f) {
			c.dropQueued()
			return
		}
	}
}

// writeBatch writes a direct write's rest, if any, then f (when not nil)
// and the frames queued behind it, several small frames in one write of up
// to writeChunkSize bytes. A request is dropped once the connection has
// ended: its caller has failed. It reports whether the writer may go on.
func (c *Conn) writeBatch(f *outFrame) bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	batch, size := c.batch[:0], 0
	if r := c.rest; r != nil {
		c.rest = nil
		c.backlog.Add(-1)
		batch, size = append(batch, r), len(r.data) // begun by direct
	}
	for f != nil || len(batch) > 0 {
		if f != nil && (size == 0 || size+len(f.data) <= writeChunkSize) && !endsBatch(batch) {
			c.backlog.Add(-1)
			if f.call && waitClosed(c.done, 0) {
				f.state.Store(frameSkipped)
			} else if c.begin(f) {
				batch, size = append(batch, f), size+len(f.data)
			}
			f = c.dequeue()
			continue
		}
		if !c.writeFrames(batch) {
			// The connection has failed: what was taken for this batch
			// gives back its budget (slots are freed as frames begin).
			for _, g := range batch {
				if g.event {
					c.events.Add(-1)
				}
			}
			if f != nil {
				c.backlog.Add(-1)
				c.dropFrame(f)
			}
			return false
		}
		batch, size = batch[:0], 0
	}
	c.batch = batch[:0]
	return true
}

// endsBatch reports whether the batch's last frame ends the connection
// once written: nothing is written with it after it.
func endsBatch(batch []*outFrame) bool {
	return len(batch) > 0 && batch[len(batch)-1].endAfter != nil
}

// dequeue takes the next queued frame without waiting, nil when none is.
func (c *Conn) dequeue() *outFrame {
	select {
	case f := <-c.writeq:
		return f
	default:
		return nil
	}
}

// writeFrames writes a batch of begun frames in one write (the single
// frame of a batch without a copy) and finishes them.
func (c *Conn) writeFrames(batch []*outFrame) bool {
	data := batch[0].data
	if len(batch) > 1 {
		c.wbuf = c.wbuf[:0]
		for _, f := range batch {
			c.wbuf = append(c.wbuf, f.data...)
		}
		data = c.wbuf
	}
	for _, f := range batch {
		if f.opens {
			// D6: whatever was read before this point was sent before
			// the sidecar could have seen extension/initialized.
			c.openedAt.Store(c.fr.consumed())
			c.checkSettled()
		}
	}
	if err := c.fw.writeFrame(data); err != nil {
		c.fail(fmt.Errorf("extension: write frame: %w", err))
		return false
	}
	for _, f := range batch {
		c.finish(f)
	}
	return true
}

// begin starts the writing of f unless its caller gave up first, and
// reports whether it did. The frame's handler slot is freed and the tap
// sees it before it is written, so a transcript never shows the peer's
// answer ahead of it.
func (c *Conn) begin(f *outFrame) bool {
	c.freeSlot(f)
	if !f.state.CompareAndSwap(frameQueued, frameWriting) {
		return false // skipped: the caller gave up before the write began
	}
	c.opts.Tap(false, f.data[:len(f.data)-1])
	return true
}

// finish accounts for a frame written in full.
func (c *Conn) finish(f *outFrame) {
	c.framesOut.Add(1)
	if f.event {
		c.events.Add(-1)
	}
	if f.endAfter != nil {
		c.fail(f.endAfter)
	}
}

// dropQueued discards what is left in the queue, returning the event
// budget and the handler slots its frames held.
func (c *Conn) dropQueued() {
	for {
		select {
		case f := <-c.writeq:
			c.backlog.Add(-1)
			c.dropFrame(f)
		default:
			return
		}
	}
}

// dropFrame returns the event budget and the handler slot of a frame that
// will not be written.
func (c *Conn) dropFrame(f *outFrame) {
	if f.event {
		c.events.Add(-1)
	}
	c.freeSlot(f)
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
