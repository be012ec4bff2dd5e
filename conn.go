package extension

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
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
	// barrier and lifecycle (D6, D11; see barrier.go); false keeps none.
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

	// WriteStallTimeout fails the connection with [errWriteStall] when a
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
// The connection ends at the first terminal error: the peer's EOF, a read or
// write error, an oversized inbound frame, a write stall, a barrier
// violation or [Conn.Close]. At that moment every pending call
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
	kick     chan struct{}             // wakes the writer for a direct write's rest
	backlog  atomic.Int64              // frames queued or held by the writer, rest included: no direct write then
	writeNow func([]byte) (int, error) // one non-blocking write to w; nil when w has none (direct.go)

	wmu   sync.Mutex // held while writing to w; protects the following
	rest  *outFrame  // what a direct write left unwritten, written before anything else
	batch []*outFrame
	wbuf  []byte

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

	done       chan struct{} // closed once err is set
	readerDone chan struct{} // closed when the reader returns
	writerDone chan struct{} // closed when the writer returns
	drainStop  chan struct{} // closed by the supervisor when the drain time is up

	closeReader func() error // closes r once
	closeWriter func() error // closes w once
	wg          sync.WaitGroup

	// Counters of what the connection has seen (tests read them).
	framesIn, framesOut, unknownResponses, droppedEvents, malformedResponses, droppedNotifications, lateResponses atomic.Uint64

	mu      sync.Mutex               // protects the following
	err     error                    // the terminal error; set once, never cleared
	nextID  msgID                    // the id of the last request sent (D4: the first is 1)
	pending map[msgID]chan callReply // the requests waiting for their response
	side    handshakeState           // the sidecar side: where its handshake is (D6)
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
		fw:          newFrameWriter(w),
		ctx:         ctx,
		cancel:      cancel,
		writeq:      make(chan *outFrame, opts.WriteQueue),
		kick:        make(chan struct{}, 1),
		writeNow:    directWriter(w),
		notifq:      make(chan message, opts.NotificationQueue),
		handlerSem:  make(chan struct{}, opts.MaxHandlers),
		done:        make(chan struct{}),
		readerDone:  make(chan struct{}),
		writerDone:  make(chan struct{}),
		drainStop:   make(chan struct{}),
		closeReader: sync.OnceValue(r.Close),
		closeWriter: sync.OnceValue(w.Close),
		pending:     make(map[msgID]chan callReply),
	}
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

	close(c.done)
	c.cancel()
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
