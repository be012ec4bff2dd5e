package extension

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Sentinel errors of a [Conn]. Match them with [errors.Is]; the errors a
// Conn returns wrap them with detail.
var (
	// ErrClosed is the terminal error of a connection ended by
	// [Conn.Close], or by the sidecar's answer to extension/shutdown (D11).
	ErrClosed = errors.New("extension: connection closed")
	// errWriteStall is the terminal error of a connection whose writer made
	// no byte progress for [ConnOptions.WriteStallTimeout] (D13).
	errWriteStall = errors.New("extension: write stalled")
)

// errQueueFull is returned by tryNotify when the event budget is used up.
var errQueueFull = errors.New("extension: event queue full")

// ConnOptions configures a [Conn]. The zero value works: each field says
// what its zero value means. The defaults are the bounds of PROTOCOL.md
// §2.5.
type ConnOptions struct {
	// Sidecar makes the Conn keep the sidecar's side of the handshake
	// barrier and lifecycle (D6, D11; see handshake.go); false keeps none.
	// The SDK sets it; a Host keeps the host's side on its own connections.
	Sidecar bool
	host    bool // the host's side of the barrier, set by Host

	// MaxHandlers bounds the inbound requests handled at once. Past it a
	// request is answered at once with -32099 "server busy" and no data.
	// A request counts until the writer takes its answer from the queue,
	// so answers waiting on a stalled peer count too, and a peer that has
	// read an answer always finds its slot free again. Zero means 64, the
	// host's bound; the SDK sets 32.
	MaxHandlers int

	// InlineBound is how long a request handler runs on the reader
	// goroutine before reading moves on to a new goroutine. Most answers
	// take microseconds, and starting a goroutine per request was the
	// largest cost of a sidecar's round trip (profiled under exthost
	// bench; README, Performance); a slow handler still keeps its
	// concurrency, and a request waits at most this long behind one. Reading also moves on at once when a Call is
	// made while a handler runs inline (its answer needs the reader).
	// Zero means 200µs.
	InlineBound time.Duration

	// NotificationQueue bounds the inbound notifications waiting for the
	// single notification worker, which handles them one at a time in
	// arrival order. When it is full the reader waits for room (D26), so
	// the pipe slows the peer down and a burst never fails the
	// connection; a notification handler must therefore not wait for a
	// response from the peer. Zero means 256.
	NotificationQueue int

	// DropOverflowingNotifications makes an inbound notification that
	// does not fit the queue within InlineBound be dropped, counted and
	// logged (the 1st, 10th, 100th... drop) instead of waiting for room as
	// long as it takes. The SDK
	// sets it: an observer that calls the host from its callback could
	// otherwise deadlock (D26, PROTOCOL.md §2.5). The host leaves it
	// false, so stream chunks are never lost.
	DropOverflowingNotifications bool

	// WriteQueue bounds the outbound frames waiting for the writer.
	// Blocking senders ([Conn.Call], [Conn.Notify], answers) wait for room
	// until their context is done. Zero means 256.
	WriteQueue int

	// EventBudget bounds the best-effort events (D20) that are queued or
	// being written; they count inside WriteQueue. Zero means 16.
	EventBudget int

	// WriteStallTimeout fails the connection with errWriteStall when a
	// write makes no byte progress for this long; the watchdog looks every
	// WriteStallTimeout/20, so it fires within 5% of the bound (D13).
	// Zero means 10s.
	WriteStallTimeout time.Duration

	// WriterDrainTimeout bounds how long, once the connection has ended,
	// the writer may still flush answers already queued (such as the
	// barrier's protocol_error answer, D6) before the writer is closed.
	// Zero means 100ms.
	WriterDrainTimeout time.Duration

	// Tap, when set, sees every frame: each inbound line as read and each
	// outbound frame just before it is written (so before any answer to
	// it), without its "\n". The slice is only valid during the call. It
	// runs on the reader and the writer goroutines, possibly at the same
	// time, so it must be safe for concurrent use, and it must not block.
	// Nil means no tap.
	Tap func(inbound bool, frame []byte)

	// Logf receives diagnostics: handler panics, dropped responses, the
	// reason the connection ended. It may be called from any goroutine of
	// the Conn. Nil discards them; the package never prints.
	Logf func(format string, args ...any)
}

// withDefaults returns o with every zero (or negative) bound replaced by its
// default, and a nil Tap or Logf by one that does nothing.
func (o ConnOptions) withDefaults() ConnOptions {
	o.MaxHandlers = orDefault(o.MaxHandlers, 64)
	o.InlineBound = orDefault(o.InlineBound, 200*time.Microsecond)
	o.NotificationQueue = orDefault(o.NotificationQueue, 256)
	o.WriteQueue = orDefault(o.WriteQueue, 256)
	o.EventBudget = orDefault(o.EventBudget, 16)
	o.WriteStallTimeout = orDefault(o.WriteStallTimeout, 10*time.Second)
	o.WriterDrainTimeout = orDefault(o.WriterDrainTimeout, 100*time.Millisecond)
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Tap == nil {
		o.Tap = func(bool, []byte) {}
	}
	return o
}

// orDefault returns v, or def when v is zero or negative.
func orDefault[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// Handler serves the requests and notifications a [Conn] receives.
type Handler interface {
	// HandleRequest answers one request. The returned result is JSON-
	// encoded (nil is sent as {}). A returned *Error or Reason travels
	// as is; any other error becomes the frozen internal error and its
	// text stays local (it goes to Logf). A panic becomes the internal
	// error too, and the connection survives. Requests are handled
	// concurrently, up to ConnOptions.MaxHandlers: each starts on the
	// reader goroutine, which moves on after ConnOptions.InlineBound or
	// at the handler's first Call. ctx is cancelled when the connection
	// ends.
	HandleRequest(ctx context.Context, method string, params json.RawMessage) (any, error)

	// HandleNotification handles one notification. Notifications are
	// handled one at a time, in arrival order. A panic is logged and the
	// connection survives.
	HandleNotification(ctx context.Context, method string, params json.RawMessage)
}

// AnswerThen is a result a [Handler] returns to run Then once the answer
// (Result, encoded as any result is) has been handed to the writer, or
// has failed to be: a frame sent from Then is written after the answer.
// The SDK starts a stream's chunks this way, after the answer to
// stream/open (PROTOCOL.md §5.6). Then runs on the handler's goroutine and
// must not block.
type AnswerThen struct {
	Result any
	Then   func()
}

// Conn is one bidirectional JSON-RPC 2.0 peer over NDJSON (D2-D6): it sends
// calls and notifications, serves the peer's through a [Handler], keeps its
// side of the handshake barrier, and ends with one terminal error that
// every pending and later call receives.
//
// A Conn starts these goroutines, each joined by [Conn.Close]:
//   - the reader (readLoop): reads, admits and dispatches inbound frames,
//     and runs handlers itself (runInline); when one runs too
//     long or calls the peer, reading moves on to a new reader goroutine
//     and the old one ends with its handler;
//   - the writer (writeLoop): writes the queued frames; a sender writes
//     its own frame when nothing is queued (direct), under the same lock;
//   - the notification worker (notifyLoop), for the notifications that
//     arrive while another is being handled; the reader handles the
//     others itself, in the same order, one at a time;
//   - the supervisor (superviseLoop): the write-stall watchdog, and the
//     teardown once the connection has ended.
//
// The connection ends at the first terminal error: the peer's EOF, a read
// error, an oversized inbound frame, a write stall, a barrier violation or
// [Conn.Close]; or a write error, once the reader has read what the peer
// wrote before it closed its end (at most WriterDrainTimeout later). At
// that moment every pending call
// fails with it and the handlers' context is cancelled; then r is closed,
// the answers already queued get up to [ConnOptions.WriterDrainTimeout] to
// be flushed, and w is closed.
type Conn struct {
	h    Handler
	opts ConnOptions
	fr   *frameReader // used by the reader; its byte count read by the writer
	fw   *frameWriter // used by the writer only; progress read by the supervisor

	ctx    context.Context // handlers' context, cancelled when the connection ends
	cancel context.CancelFunc

	writeq   chan *outFrame            // frames for the writer
	wake     chan struct{}             // wakes the writer for a direct write's leftover
	backlog  atomic.Int64              // frames queued or held by the writer, leftover included: no direct write then
	writeNow func([]byte) (int, error) // one non-blocking write to w; nil when w has none (sys_unix.go)

	wmu      sync.Mutex // held while writing to w; protects the following
	leftover *outFrame  // what a direct write left unwritten, written before anything else
	batch    []*outFrame
	wbuf     []byte

	inline      atomic.Uint64 // the token of the handler running on the reader, 0 when none
	inlineSeq   atomic.Uint64
	inlineTimer *time.Timer   // migrates reading after InlineBound
	inlineMu    sync.Mutex    // held by migrate and by runInline's last step: no reader ends before its successor is in wg
	notifq      chan message  // notifications for the notification worker
	notifQueued atomic.Int64  // notifications queued or with the worker: none is handled inline then
	notifyMu    sync.Mutex    // held while a notification is handled, inline or by the worker
	handlerSem  chan struct{} // one token per running request handler
	events      atomic.Int64  // best-effort events queued or being written

	// openedAt is the count of input bytes read when the host began to
	// write extension/initialized, -1 before (the host side, D6).
	openedAt atomic.Int64
	// judged is the count of input bytes whose every complete frame the
	// host's barrier has judged; settled is closed once judged reaches
	// openedAt, so the handshake knows no frame sent before the barrier
	// opened is still to be judged (D6).
	judged     atomic.Int64
	settled    chan struct{}
	settleOnce sync.Once

	done       <-chan struct{} // ctx.Done(): closed once err is set
	readerDone chan struct{}   // closed when the reader returns
	writerDone chan struct{}   // closed when the writer returns
	drainStop  chan struct{}   // closed by the supervisor when the drain time is up
	writeDead  context.Context // cancelled, the first write error its cause, once nothing more is written
	stopWrites context.CancelCauseFunc

	closeReader func() error // closes r once
	closeWriter func() error // closes w once
	wg          sync.WaitGroup

	// Counters of what the connection has seen (tests read them; the
	// responses it drops the tests count from Logf).
	framesOut, droppedEvents, droppedNotifications atomic.Uint64

	mu      sync.Mutex               // protects the following
	err     error                    // the terminal error; set once, never cleared
	nextID  msgID                    // the id of the last request sent (D4: the first is 1)
	pending map[msgID]chan callReply // the requests waiting for their response
	// spare holds reply channels whose reply was taken, for the next
	// calls, so the intercept's hot path makes none. They are kept per
	// connection, not in a global pool: a channel made under another
	// goroutine group (a testing/synctest bubble) does not block durably
	// in this one's.
	spare chan chan callReply
	side  handshakeState // the sidecar side: where its handshake is (D6)
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
		h:           h,
		opts:        opts,
		fr:          newFrameReader(r),
		fw:          &frameWriter{w: w, epoch: time.Now()},
		ctx:         ctx,
		cancel:      cancel,
		writeq:      make(chan *outFrame, opts.WriteQueue),
		wake:        make(chan struct{}, 1),
		writeNow:    directWriter(w),
		notifq:      make(chan message, opts.NotificationQueue),
		handlerSem:  make(chan struct{}, opts.MaxHandlers),
		done:        ctx.Done(),
		readerDone:  make(chan struct{}),
		writerDone:  make(chan struct{}),
		drainStop:   make(chan struct{}),
		closeReader: sync.OnceValue(r.Close),
		closeWriter: sync.OnceValue(w.Close),
		pending:     make(map[msgID]chan callReply),
		spare:       make(chan chan callReply, 8),
	}
	c.writeDead, c.stopWrites = context.WithCancelCause(context.Background())
	c.openedAt.Store(-1)
	c.settled = make(chan struct{})
	if opts.host {
		// Every complete frame read before the reader asks for more bytes
		// has been judged: bufio reads only when no line is buffered.
		c.fr.in.beforeRead = func(n int64) { c.judge(n) }
	}
	c.inlineTimer = time.AfterFunc(time.Hour, c.migrate)
	c.inlineTimer.Stop()
	c.wg.Go(c.readLoop)
	c.wg.Go(c.writeLoop)
	c.wg.Go(c.notifyLoop)
	c.wg.Go(c.superviseLoop)
	return c
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

	c.cancel() // closes done
	for _, call := range pending {
		call <- callReply{err: err}
	}
	if !errors.Is(err, ErrClosed) {
		c.opts.Logf("extension: connection ended: %v", err) // an ordinary close is not news
	}
}

// Close ends the connection with [ErrClosed] unless it has already ended,
// closes r and w, and waits for every goroutine the Conn started, including
// the running handlers, which see their context cancelled. It is idempotent
// and returns the first error from closing r or w. Close must not be called
// from a handler, which it would wait for.
//
// Close is as prompt as what it waits for: handlers must return once their
// context is cancelled, the Tap must not block, and closing r and w must
// interrupt a Read or Write in progress (true for pipes and sockets, not
// for a blocking terminal or file).
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	c.wg.Wait()
	c.inlineTimer.Stop()
	// An answer a handler queued after the writer had stopped is never
	// written; dropping it frees its handler slot.
	c.dropQueued()
	// The supervisor's teardown has closed both (once); the first error.
	return cmp.Or(c.closeReader(), c.closeWriter())
}

// Done returns a channel that is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns the terminal error once the connection has ended, nil before.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// The inbound half of a Conn: the reader goroutine, the dispatch of what
// it reads, the request handlers and the notification worker.

// readLoop is the reader goroutine: it reads frames until the input ends
// or the connection does, and hands each to dispatch. It returns early,
// leaving readerDone open, when reading has moved on to a new reader
// while it ran a handler (runInline).
func (c *Conn) readLoop() {
	for !waitClosed(c.done, 0) { // nothing is dispatched once the connection has ended
		line, err := c.fr.readFrame()
		if err != nil {
			switch tooLarge, ok := err.(*Error); {
			case ok && tooLarge.Reason == ReasonFrameTooLarge:
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
			break
		}
		c.opts.Tap(true, line)
		m, fe := decodeMessage(line)
		if c.admit(&m, fe, c.fr.frameEnd()) && !c.dispatch(m, fe) {
			return // another goroutine reads now
		}
	}
	close(c.readerDone)
}

// dispatch routes one decoded frame, on the reader goroutine. It reports
// whether this goroutine is still the reader.
func (c *Conn) dispatch(m message, fe *frameError) bool {
	switch {
	case fe != nil && fe.kind == kindResponse:
		// PROTOCOL.md §2.4: a malformed response is dropped, never
		// answered: answering it could start an endless exchange of
		// error responses between two peers.
		c.opts.Logf("extension: dropped a malformed response: %v", fe.err)
	case fe != nil:
		// PROTOCOL.md §2.4: a malformed frame is answered, with its id
		// when the id itself is valid, and the connection survives.
		c.answerFrame(fe, fe.err)
	case m.kind == kindRequest:
		select {
		case c.handlerSem <- struct{}{}:
			return c.runInline(m)
		default:
			// PROTOCOL.md §2.5: past MaxHandlers, answer at once.
			c.sendAnswer(&outFrame{data: encodeError(&m.id, &Error{Code: codeServerBusy, Message: "server busy"})})
		}
	case m.kind == kindNotification:
		if c.notifQueued.Load() == 0 && c.notifyMu.TryLock() {
			// Nothing is queued or being handled: this one is next in
			// order, handled here without waking the worker.
			return c.runInline(m)
		}
		c.queueNotification(m)
	case m.kind == kindResponse:
		switch call := c.takeCall(m.id); {
		case call == nil:
			// D4: a response to an unknown id is dropped and logged.
			c.opts.Logf("extension: dropped a response to unknown id %d", m.id)
		case m.err != nil:
			call <- callReply{err: m.err, peer: true}
		default:
			call <- callReply{result: m.result, peer: true}
		}
	}
	return true
}

// queueNotification hands m to the notification worker. When the queue
// is full, the host's reader waits for room (D26: the pipe slows the peer
// down); with DropOverflowingNotifications it waits at most InlineBound,
// then drops m (PROTOCOL.md §2.5, the sidecar side of D26). That wait is
// bounded, so an observer that calls the peer while the queue is full
// still gets its answer once what does not fit is dropped (D26's reason
// for dropping); but a burst that comes while the handler before it is off
// its CPU for a moment no longer overflows at once (exthost bench's
// observe_throughput loses far fewer events this way than with drops at
// once).
func (c *Conn) queueNotification(m message) {
	c.notifQueued.Add(1)
	select {
	case c.notifq <- m:
		return
	default:
	}
	var timeout <-chan time.Time // never, unless notifications may be dropped
	if c.opts.DropOverflowingNotifications {
		t := time.NewTimer(c.opts.InlineBound)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case c.notifq <- m:
		return
	case <-timeout:
	case <-c.done:
	}
	if timeout != nil {
		// Dropped, also when the connection ends meanwhile. A line per
		// drop would slow the reader down in the very burst that
		// overflows it: the 1st, 10th, 100th...
		if n := c.droppedNotifications.Add(1); isPowerOf10(n) {
			c.opts.Logf("extension: dropped %s: %d notifications already queued (%d dropped so far)", m.method, c.opts.NotificationQueue, n)
		}
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
		}
		if err != nil {
			data = encodeError(&m.id, asWireError(err))
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
	switch {
	case err != nil && !errors.As(err, new(*Error)):
		c.opts.Logf("extension: handler for %s: %v", m.method, err)
	case err == nil:
		if data, err = encodeResult(m.id, result); err != nil {
			c.opts.Logf("extension: encode result of %s: %v", m.method, err)
			err = NewError(ReasonInternal, "")
		}
	}
	return data, then, err // an error's frame is encoded on the way out
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

// The outbound half of a Conn: calls and notifications, the writer
// goroutine that alone writes frames, and the supervisor that watches it
// for stalls and tears the connection down.

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
	var call chan callReply
	select {
	case call = <-c.spare:
	default:
		call = make(chan callReply, 1)
	}
	c.mu.Lock()
	if err := c.err; err != nil {
		c.mu.Unlock()
		return nil, err
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = call
	c.mu.Unlock()

	f, err := c.newFrame(&id, method, params)
	if err == nil && !c.send(f, ctx.Done(), c.done) {
		err = c.notSent("call", method, ctx)
	}
	if err != nil {
		c.forget(id, call)
		return nil, err
	}
	if c.inline.Load() != 0 {
		// The reader is running a handler, maybe this call's caller:
		// reading moves on, or the response could never be read.
		c.migrate()
	}
	select {
	case r := <-call:
		select {
		case c.spare <- call: // its one reply taken: nobody holds it now
		default:
		}
		return r.result, r.err
	case <-ctx.Done():
	}
	c.forget(id, call)
	// A frame not yet started is skipped; one being written is finished,
	// so the peer never sees a torn frame (D2).
	f.state.CompareAndSwap(frameQueued, frameSkipped)
	return nil, fmt.Errorf("extension: call %s: %w", method, ctx.Err())
}

// forget removes a pending call whose caller gave up; its response, if one
// comes later, is dropped and logged as unknown. When the call is already
// gone, its reply was taken off the table and is being delivered: it is
// received here, and logged as late when it is the peer's response, so no
// response goes unaccounted for.
func (c *Conn) forget(id msgID, call chan callReply) {
	if c.takeCall(id) == nil && (<-call).peer { // taken: its reply is received here
		c.opts.Logf("extension: dropped a response to id %d that came as its caller gave up", id)
	}
}

// takeCall removes the pending call with this id from the table and returns
// it, nil when there is none: its reply is then the taker's to deliver.
func (c *Conn) takeCall(id msgID) chan callReply {
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
	f, err := c.newFrame(nil, method, params)
	if err != nil {
		return err
	}
	// D6: the host's extension/initialized opens the barrier.
	f.opens = c.opts.host && method == MethodInitialized
	if !c.send(f, ctx.Done(), c.done) {
		return c.notSent("notify", method, ctx)
	}
	return nil
}

// notSent returns why a call or notification (what) was not sent: the
// connection's terminal error, else ctx's error (wrapped).
func (c *Conn) notSent(what, method string, ctx context.Context) error {
	if err := c.Err(); err != nil {
		return err
	}
	return fmt.Errorf("extension: %s %s: %w", what, method, ctx.Err())
}

// sendRaw queues line, without its "\n", as it is, waiting for room until
// the connection ends: the checker's probes are frames a Conn refuses to
// build (a malformed envelope, an oversized line).
func (c *Conn) sendRaw(line []byte) {
	c.send(&outFrame{data: append(slices.Clip(line), '\n')}, nil, c.done)
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
	f, err := c.newFrame(nil, method, params)
	if err != nil {
		c.events.Add(-1)
		return err
	}
	f.event = true
	if c.send(f, nil, nil) {
		return nil
	}
	// Not sent: the event gives its budget back and counts as dropped.
	c.events.Add(-1)
	c.droppedEvents.Add(1)
	return fmt.Errorf("%w: %s dropped, write queue full", errQueueFull, method)
}

// newFrame encodes a request frame, or a notification frame when id is
// nil, or returns the error that keeps it from being sent: for a
// notification, first, the connection's end (Call checks it itself as it
// takes its id).
func (c *Conn) newFrame(id *msgID, method string, params any) (*outFrame, error) {
	if id == nil && c.Err() != nil {
		return nil, c.Err()
	}
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
	if !c.send(f, nil, c.writerDone) {
		c.freeSlot(f)
	}
}

// send hands f to the wire and reports whether it did: the calling
// goroutine writes it at once when it can (direct); otherwise it joins the
// write queue, waiting for room until cancel or end is closed (a nil
// channel never is). With both nil it does not wait.
func (c *Conn) send(f *outFrame, cancel, end <-chan struct{}) bool {
	if c.direct(f) {
		return true
	}
	c.backlog.Add(1) // before the frame is queued: no direct write may overtake it
	select {
	case c.writeq <- f:
		return true
	default:
	}
	if cancel != nil || end != nil {
		select {
		case c.writeq <- f:
			return true
		case <-cancel:
		case <-end:
		}
	}
	c.backlog.Add(-1)
	return false
}

// direct writes a request or an answer f on the calling goroutine when
// nothing is queued or being written, so the writer goroutine is not woken
// for it: one of the host's three hand-offs per call that profiling
// exthost bench's intercept_rtt found. It makes one non-blocking attempt;
// whatever the pipe does not take is left to the writer (leftover), which
// writes it before any other frame, so no frame is torn (D2) and a full
// pipe never blocks the caller past its deadline (D18). It reports whether
// f was taken care of; false leaves f to the queue. A notification goes
// there, unless it is a best-effort event, which the write it may take at
// once keeps from being dropped (D20): nobody waits on one, and the writer
// writes whatever is queued together, a stream's chunks in few writes
// instead of one each; so does the frame that opens the barrier, whose
// writer records where it opened (D6, writeFrames).
func (c *Conn) direct(f *outFrame) bool {
	if c.writeNow == nil || !f.call && !f.slot && !f.event || c.backlog.Load() != 0 || !c.wmu.TryLock() {
		return false
	}
	defer c.wmu.Unlock()
	if c.backlog.Load() != 0 || waitClosed(c.done, 0) || waitClosed(c.writeDead.Done(), 0) {
		return false // once the connection has ended, the writer drains in order
	}
	if !c.begin(f) {
		return true // skipped: its caller gave up
	}
	n, err := c.writeNow(f.data)
	switch {
	case err != nil:
		c.writeFailed(err)
	case n < len(f.data):
		f.data = f.data[n:]
		c.leftover = f
		c.backlog.Add(1)
		select {
		case c.wake <- struct{}{}:
		default:
		}
	default:
		c.written(f)
	}
	return true
}

// writeLoop is the writer goroutine. It and direct writers hold wmu while
// they write to w (D2: frames never interleave). Once the connection has
// ended it drains: it still writes what is queued, in order, so that a
// barrier's rejection, the frame_too_large error frame or a late answer
// reaches the peer after the notifications queued before it, never ahead
// of them. Requests are dropped then: their callers have already failed.
// It stops when the reader has stopped and the queue is empty, or when the
// supervisor ends the drain; what is left in the queue is dropped.
func (c *Conn) writeLoop() {
	defer close(c.writerDone)
	defer c.dropQueued()
	done, last := c.done, false
	var readerDone, drainStop <-chan struct{} // watched once the connection has ended
	for !last {
		var f *outFrame
		select {
		case f = <-c.writeq:
		case <-c.wake: // a direct write left its rest
		case <-done:
			done, readerDone, drainStop = nil, c.readerDone, c.drainStop
			continue
		case <-readerDone:
			// Nothing more is coming from the reader: flush what is
			// queued, a direct write's leftover included, and stop.
			f, last = c.dequeue(), true
		case <-drainStop:
			return
		}
		if !c.writeBatch(f) {
			return // the connection has failed: nothing more is written
		}
	}
}

// writeBatch writes a direct write's leftover, if any, then f (when not nil)
// and the frames queued behind it, several small frames in one write of up
// to writeChunkSize bytes. A request is dropped once the connection has
// ended: its caller has failed. It reports whether the writer may go on.
func (c *Conn) writeBatch(f *outFrame) bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	batch, size := c.batch[:0], 0
	if r := c.leftover; r != nil {
		c.leftover = nil
		c.backlog.Add(-1)
		batch, size = append(batch, r), len(r.data) // begun by direct
	}
	for f != nil || len(batch) > 0 {
		// Nothing joins a batch whose last frame ends the connection.
		if f != nil && (size == 0 || size+len(f.data) <= writeChunkSize) && (len(batch) == 0 || batch[len(batch)-1].endAfter == nil) {
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
				c.release(g)
			}
			if f != nil {
				c.backlog.Add(-1)
				c.release(f)
			}
			return false
		}
		batch, size = batch[:0], 0
	}
	c.batch = batch[:0]
	return true
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
	c.wbuf = c.wbuf[:0]
	for _, f := range batch {
		if f.opens {
			// D6: whatever was read before this point was sent before
			// the sidecar could have seen extension/initialized.
			c.openedAt.Store(c.fr.consumed())
			c.checkSettled()
		}
		if len(batch) > 1 {
			c.wbuf = append(c.wbuf, f.data...)
			data = c.wbuf
		}
	}
	if err := c.fw.writeFrame(data); err != nil {
		c.writeFailed(err)
		return false
	}
	for _, f := range batch {
		c.written(f)
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

// written accounts for a frame written in full.
func (c *Conn) written(f *outFrame) {
	c.framesOut.Add(1)
	c.release(f)
	if f.endAfter != nil {
		c.fail(f.endAfter)
	}
}

// dropQueued discards what is left in the queue, returning the event
// budget and the handler slots its frames held.
func (c *Conn) dropQueued() {
	for f := c.dequeue(); f != nil; f = c.dequeue() {
		c.backlog.Add(-1)
		c.release(f)
	}
}

// release returns the event budget and the handler slot of a frame that
// leaves the writer, written or not.
func (c *Conn) release(f *outFrame) {
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

// writeFailed stops the writing after a write error. The connection ends
// with that error once the reader has read what is left of the input, or
// WriterDrainTimeout later (superviseLoop).
func (c *Conn) writeFailed(err error) {
	c.stopWrites(fmt.Errorf("extension: write frame: %w", err)) // the first error stays the cause
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
		case <-c.writeDead.Done():
			// The peer closed its end; what it wrote before, such as its
			// answer to extension/shutdown (D11), is still read until the
			// input ends, for as long as a drain may take.
			waitClosed(c.readerDone, c.opts.WriterDrainTimeout)
			c.fail(context.Cause(c.writeDead))
			break watch
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
