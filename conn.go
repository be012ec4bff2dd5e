package extension

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Sentinel errors of a [Conn]. Match them with [errors.Is]; the errors a
// Conn returns wrap them with detail.
var (
	// ErrClosed is the terminal error of a connection ended by
	// [Conn.Close], or by [Conn.Fail] with a nil error.
	ErrClosed = errors.New("extension: connection closed")
	// ErrWriteStall is the terminal error of a connection whose writer made
	// no byte progress for [ConnOptions.WriteStallTimeout].
	ErrWriteStall = errors.New("extension: write stalled")
	// ErrQueueFull is returned by [Conn.TryNotify] when the event budget
	// is used up; the event was not sent.
	ErrQueueFull = errors.New("extension: event queue full")
)

// ConnOptions configures a [Conn]. The zero value works: each field says
// what its zero value means. The defaults are the bounds of
// CONTRACT-NOTES §1.3.
type ConnOptions struct {
	// MaxHandlers bounds the inbound requests handled at once. Past it a
	// request is answered at once with -32099 "server busy" and no data.
	// A request counts until the writer takes its answer from the queue,
	// so answers waiting on a stalled peer count too, and a peer that has
	// read an answer always finds its slot free again. Zero means 64, the
	// host's bound; the SDK sets 32.
	MaxHandlers int

	// NotificationQueue bounds the inbound notifications waiting for the
	// single notification worker, which handles them one at a time in
	// arrival order. Overflow fails the connection, unless
	// DropOverflowingNotifications is set. Zero means 256.
	NotificationQueue int

	// DropOverflowingNotifications makes an inbound notification that
	// does not fit the queue be dropped, counted and logged instead of
	// failing the connection. The SDK sets it: a sidecar may lose an
	// observation but not its life to a burst of events (CONTRACT-NOTES
	// §1.3). The host leaves it false, so stream chunks are never lost.
	DropOverflowingNotifications bool

	// WriteQueue bounds the outbound frames waiting for the writer.
	// Blocking senders ([Conn.Call], [Conn.Notify], responses) wait for
	// room until their context is done. Zero means 256.
	WriteQueue int

	// EventBudget bounds the frames sent by [Conn.TryNotify] that are
	// queued or being written; they count inside WriteQueue. Past it
	// TryNotify returns [ErrQueueFull] at once. Zero means 16.
	EventBudget int

	// WriteStallTimeout fails the connection with [ErrWriteStall] when a
	// write makes no byte progress for this long; the watchdog checks
	// every WriteStallTimeout/2, but not more often than every millisecond.
	// Zero means 10s.
	WriteStallTimeout time.Duration

	// WriterDrainTimeout bounds how long, once the connection has ended,
	// the writer may still flush answers already queued (such as the
	// rejection a Gate wrote before failing the connection) before the
	// writer is closed. Zero means 100ms.
	WriterDrainTimeout time.Duration

	// Gate, when set, sees every inbound frame before anything else
	// does, on the read goroutine: m is the decoded message, or fe is
	// non-nil for a frame that is not a valid envelope. Returning nil lets
	// the frame through. Returning an error stops it: a request (also a
	// malformed one whose id could be read) is answered with the error
	// converted as a handler's error is, and anything else is dropped.
	// To end the connection as well, the Gate calls [Conn.Fail] before it
	// returns; its answer is still flushed within WriterDrainTimeout. The
	// handshake uses this to enforce the barrier (D6). A frame can arrive
	// before NewConn has returned, so a Gate that needs its Conn must get
	// it through something synchronised, such as a channel. Nil means
	// every frame passes.
	Gate func(m *Message, fe *FrameError) error

	// Tap, when set, sees every frame: each inbound line as read (before
	// the Gate) and each outbound frame once written, without its "\n".
	// The slice is only valid during the call. It runs on the reader and
	// the writer goroutines, possibly at the same time, so it must be safe
	// for concurrent use, and it must not block. Nil means no tap.
	Tap func(inbound bool, frame []byte)

	// Logf receives diagnostics: handler panics, dropped responses, the
	// reason the connection ended. It may be called from any goroutine of
	// the Conn. Nil discards them; the package never prints.
	Logf func(format string, args ...any)
}

// withDefaults returns o with every zero (or negative) bound replaced by its
// default.
func (o ConnOptions) withDefaults() ConnOptions {
	if o.MaxHandlers <= 0 {
		o.MaxHandlers = 64
	}
	if o.NotificationQueue <= 0 {
		o.NotificationQueue = 256
	}
	if o.WriteQueue <= 0 {
		o.WriteQueue = 256
	}
	if o.EventBudget <= 0 {
		o.EventBudget = 16
	}
	if o.WriteStallTimeout <= 0 {
		o.WriteStallTimeout = 10 * time.Second
	}
	if o.WriterDrainTimeout <= 0 {
		o.WriterDrainTimeout = 100 * time.Millisecond
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return o
}

// Handler serves the requests and notifications a [Conn] receives.
type Handler interface {
	// HandleRequest answers one request. The returned result is JSON-
	// encoded (nil is sent as {}). A returned *Error or Reason travels
	// as is; any other error becomes the frozen internal error and its
	// text stays local (it goes to Logf). A panic becomes the internal
	// error too, and the connection survives. Requests are handled
	// concurrently, up to ConnOptions.MaxHandlers; ctx is cancelled when
	// the connection ends.
	HandleRequest(ctx context.Context, method string, params json.RawMessage) (any, error)

	// HandleNotification handles one notification. Notifications are
	// handled one at a time, in arrival order. A panic is logged and the
	// connection survives.
	HandleNotification(ctx context.Context, method string, params json.RawMessage)
}

// ConnStats counts what a [Conn] has seen so far.
type ConnStats struct {
	// FramesIn counts the non-empty inbound lines, valid or not.
	FramesIn uint64
	// FramesOut counts the frames written completely.
	FramesOut uint64
	// UnknownResponses counts the responses dropped because their id
	// matched no pending call (D4).
	UnknownResponses uint64
	// DroppedNotifications counts the inbound notifications dropped
	// because the queue was full (ConnOptions.DropOverflowingNotifications).
	DroppedNotifications uint64
	// MalformedResponses counts the response-shaped frames (a result or
	// error member, no method) dropped because their envelope was invalid.
	MalformedResponses uint64
	// DroppedEvents counts the [Conn.TryNotify] calls that returned
	// [ErrQueueFull].
	DroppedEvents uint64
	// LateResponses counts the responses that arrived as their caller's
	// context ended and were dropped: the caller had already given up.
	LateResponses uint64
}

// Conn is one bidirectional JSON-RPC 2.0 peer over NDJSON (D2-D5): it sends
// calls and notifications, serves the peer's through a [Handler], and ends
// with one terminal error that every pending and later call receives.
//
// A Conn starts these goroutines, each joined by [Conn.Close]:
//   - the reader (readLoop): reads, gates and dispatches inbound frames;
//   - the writer (writeLoop): the only one that writes to w;
//   - the notification worker (notifyLoop);
//   - the supervisor (superviseLoop): the write-stall watchdog, and the
//     teardown once the connection has ended;
//   - one goroutine per inbound request being handled.
//
// The connection ends at the first terminal error: the peer's EOF, a read or
// write error, an oversized inbound frame, a write stall, [Conn.Fail] or
// [Conn.Close]. At that moment every pending call fails with it and the
// handlers' context is cancelled; then r is closed, the answers already
// queued get up to [ConnOptions.WriterDrainTimeout] to be flushed, and w is
// closed.
type Conn struct {
	r    io.ReadCloser
	w    io.WriteCloser
	h    Handler
	opts ConnOptions
	fr   *frameReader // used by the reader only
	fw   *frameWriter // used by the writer only; progress read by the supervisor

	ctx    context.Context // handlers' context, cancelled when the connection ends
	cancel context.CancelFunc

	writeq     chan *outFrame // frames for the writer
	notifq     chan Message   // notifications for the notification worker
	handlerSem chan struct{}  // one token per running request handler
	events     atomic.Int64   // TryNotify frames queued or being written

	done       chan struct{} // closed once err is set
	readerDone chan struct{} // closed when the reader returns
	writerDone chan struct{} // closed when the writer returns
	drainStop  chan struct{} // closed by the supervisor when the drain time is up

	closeReader func() error // closes r once
	closeWriter func() error // closes w once
	wg          sync.WaitGroup

	framesIn, framesOut, unknownResponses, droppedEvents, malformedResponses, droppedNotifications, lateResponses atomic.Uint64

	mu      sync.Mutex // protects the following
	err     error      // the terminal error; set once, never cleared
	nextID  ID         // the id of the last request sent (D4: the first is 1)
	pending map[ID]*pendingCall
}

// pendingCall is a request waiting for its response. Its channel has room
// for the one result it ever receives, so delivering never blocks.
type pendingCall struct {
	reply chan callReply
}

type callReply struct {
	result json.RawMessage
	err    error
	peer   bool // a response from the peer, not the connection's end
}

// NewConn returns a Conn that reads frames from r and writes frames to w,
// and starts its goroutines. Inbound requests and notifications go to h; a
// nil h knows no method (requests are answered unknown_method). Closing r
// must unblock a Read in progress and closing w a Write in progress, as it
// does for pipes and network connections.
func NewConn(r io.ReadCloser, w io.WriteCloser, h Handler, opts ConnOptions) *Conn {
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{
		r:           r,
		w:           w,
		h:           h,
		opts:        opts,
		fr:          newFrameReader(r),
		fw:          newFrameWriter(w),
		ctx:         ctx,
		cancel:      cancel,
		writeq:      make(chan *outFrame, opts.WriteQueue),
		notifq:      make(chan Message, opts.NotificationQueue),
		handlerSem:  make(chan struct{}, opts.MaxHandlers),
		done:        make(chan struct{}),
		readerDone:  make(chan struct{}),
		writerDone:  make(chan struct{}),
		drainStop:   make(chan struct{}),
		closeReader: sync.OnceValue(r.Close),
		closeWriter: sync.OnceValue(w.Close),
		pending:     make(map[ID]*pendingCall),
	}
	c.wg.Go(c.readLoop)
	c.wg.Go(c.writeLoop)
	c.wg.Go(c.notifyLoop)
	c.wg.Go(c.superviseLoop)
	return c
}

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
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.nextID++
	id := c.nextID
	c.mu.Unlock()

	data, err := encodeRequest(&id, method, params)
	if err != nil {
		return nil, fmt.Errorf("extension: encode %s params: %w", method, err)
	}
	if len(data) > FrameBytes {
		// D2: an oversized outbound frame fails only this call.
		return nil, outboundTooLarge("request", method, len(data))
	}

	call := &pendingCall{reply: make(chan callReply, 1)}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.pending[id] = call
	c.mu.Unlock()

	f := &outFrame{data: data, call: true}
	select {
	case c.writeq <- f:
	case <-ctx.Done():
		c.forget(id, call)
		return nil, fmt.Errorf("extension: call %s: %w", method, ctx.Err())
	case <-c.done:
		return nil, c.Err()
	}
	select {
	case r := <-call.reply:
		return r.result, r.err
	case <-ctx.Done():
		c.forget(id, call)
		// A frame not yet started is skipped; one being written is
		// finished, so the peer never sees a torn frame (D2).
		f.state.CompareAndSwap(frameQueued, frameSkipped)
		return nil, fmt.Errorf("extension: call %s: %w", method, ctx.Err())
	}
}

// forget removes a pending call whose caller gave up; its response, if one
// comes later, is dropped and counted as unknown. When the call is already
// gone, its reply was taken off the table and is being delivered: it is
// received here, and counted as late when it is the peer's response, so no
// response goes unaccounted for.
func (c *Conn) forget(id ID, call *pendingCall) {
	c.mu.Lock()
	_, waiting := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if !waiting {
		if r := <-call.reply; r.peer {
			c.lateResponses.Add(1)
			c.opts.Logf("extension: dropped a response to id %d that came as its caller gave up", id)
		}
	}
}

// isPending reports whether a request with this id was sent and is still
// waiting for its response. The handshake gate uses it to tell the one
// allowed response from a stray one (D6).
func (c *Conn) isPending(id ID) bool {
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
	select {
	case c.writeq <- f:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("extension: notify %s: %w", method, ctx.Err())
	case <-c.done:
		return c.Err()
	}
}

// TryNotify sends a best-effort notification, such as an event, without
// ever blocking. When [ConnOptions.EventBudget] such notifications are
// already queued or being written, or the write queue is full, it returns
// an error matching [ErrQueueFull] and the notification is not sent.
func (c *Conn) TryNotify(method string, params any) error {
	f, err := c.newNotification(method, params)
	if err != nil {
		return err
	}
	f.event = true
	if c.events.Add(1) > int64(c.opts.EventBudget) {
		c.events.Add(-1)
		c.droppedEvents.Add(1)
		return fmt.Errorf("%w: %s dropped, %d events pending", ErrQueueFull, method, c.opts.EventBudget)
	}
	select {
	case c.writeq <- f:
		return nil
	default:
		c.events.Add(-1)
		c.droppedEvents.Add(1)
		return fmt.Errorf("%w: %s dropped, write queue full", ErrQueueFull, method)
	}
}

// newNotification encodes a notification frame, or returns the error that
// keeps it from being sent.
func (c *Conn) newNotification(method string, params any) (*outFrame, error) {
	if err := c.Err(); err != nil {
		return nil, err
	}
	data, err := encodeRequest(nil, method, params)
	if err != nil {
		return nil, fmt.Errorf("extension: encode %s params: %w", method, err)
	}
	if len(data) > FrameBytes {
		// D2: an oversized outbound frame fails only this call.
		return nil, outboundTooLarge("notification", method, len(data))
	}
	return &outFrame{data: data}, nil
}

func outboundTooLarge(what, method string, n int) *Error {
	return NewError(ReasonFrameTooLarge, fmt.Sprintf("outbound %s %s is %d bytes, over the %d-byte frame limit", what, method, n, FrameBytes))
}

// Fail ends the connection with err as its terminal error, unless it has
// already ended; a nil err means [ErrClosed]. It does not wait for the
// goroutines to finish (that is [Conn.Close]), so it is safe to call from
// any goroutine, including a Gate and a handler.
func (c *Conn) Fail(err error) {
	if err == nil {
		err = ErrClosed
	}
	c.fail(err)
}

// fail records the terminal error if none is set yet, then fails every
// pending call with it, cancels the handlers' context and closes done,
// which starts the supervisor's teardown.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()

	close(c.done)
	c.cancel()
	for _, call := range pending {
		call.reply <- callReply{err: err}
	}
	if !errors.Is(err, ErrClosed) {
		c.opts.Logf("extension: connection ended: %v", err) // an ordinary close is not news
	}
}

// Close ends the connection with [ErrClosed] unless it has already ended,
// closes r and w, and waits for every goroutine the Conn started, including
// the running handlers, which see their context cancelled. It is idempotent
// and returns the first error from closing r or w. Close must not be called
// from a handler or a Gate, which it would wait for; they call [Conn.Fail].
//
// Close is as prompt as what it waits for: handlers must return once their
// context is cancelled, the Tap and AfterAnswer functions must not block,
// and closing r and w must interrupt a Read or Write in progress (true for
// pipes and sockets, not for a blocking terminal or file).
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	c.wg.Wait()
	// An answer a handler queued after the writer had stopped is never
	// written; dropping it frees its handler slot.
	c.dropQueued()
	if err := c.closeReader(); err != nil {
		return err
	}
	return c.closeWriter()
}

// Done returns a channel that is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns the terminal error once the connection has ended, nil before.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Stats returns the counters of the connection so far.
func (c *Conn) Stats() ConnStats {
	return ConnStats{
		FramesIn:             c.framesIn.Load(),
		FramesOut:            c.framesOut.Load(),
		UnknownResponses:     c.unknownResponses.Load(),
		MalformedResponses:   c.malformedResponses.Load(),
		DroppedNotifications: c.droppedNotifications.Load(),
		DroppedEvents:        c.droppedEvents.Load(),
		LateResponses:        c.lateResponses.Load(),
	}
}
