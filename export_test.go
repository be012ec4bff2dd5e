package extension

import (
	"context"
	"slices"
	"sync/atomic"
	"time"
)

// Views of unexported parts for the external tests (package
// extension_test); they exist only in test builds.

func (s *sidecar) Call(ctx context.Context, method string, params, result any) error {
	return s.call(ctx, method, params, result)
}
func (s *sidecar) PID() int                      { return s.proc.pid }
func (s *sidecar) Stats() connStats              { return s.conn.stats() }
func (s *sidecar) Done() <-chan struct{}         { return s.conn.Done() }
func (rt *Runtime) SlotOwner(slot string) string { return rt.slots[slot] }

func (h *Host) InterceptBudget(p Point, manifestMillis int64) time.Duration {
	return h.withDefaults().interceptBudget(p, manifestMillis)
}

func (s *sidecar) ID() string                  { return s.spec.ID }
func (rt *Runtime) Session() SessionContext    { return rt.cfg.Session }
func (rt *Runtime) Sidecars() []*sidecar       { return rt.sidecars }
func (rt *Runtime) Sidecar(id string) *sidecar { return rt.byID[id] }

var ErrWriteStall = errWriteStall

// Views of a tail for the tests: the raw kept bytes, whether older bytes
// were dropped, the count written, and the redacted text.
func (t *tail) Bytes() []byte    { b, _ := t.snapshot(); return b }
func (t *tail) Truncated() bool  { _, dropped := t.snapshot(); return dropped }
func (t *tail) Redacted() string { return t.redacted() }
func (t *tail) Written() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.written
}

// The Conn's counters are read only by tests.

// connStats counts what a [Conn] has seen so far.
type connStats struct {
	// FramesOut counts the frames written completely.
	FramesOut uint64
	// DroppedNotifications counts the inbound notifications dropped
	// because the queue was full (ConnOptions.DropOverflowingNotifications).
	DroppedNotifications uint64
	// DroppedEvents counts the best-effort events dropped because the
	// event budget was used up (D20).
	DroppedEvents uint64
}

// stats returns the counters of the connection so far.
func (c *Conn) stats() connStats {
	return connStats{
		FramesOut:            c.framesOut.Load(),
		DroppedNotifications: c.droppedNotifications.Load(),
		DroppedEvents:        c.droppedEvents.Load(),
	}
}

// Sentinels the external tests match causes with; the product wraps them
// in the typed errors a host branches on.
var (
	ErrShellCommand     = errShellCommand
	ErrSlotOwnerBlocked = errSlotOwnerBlocked
)

// The frozen tables as the tests read them: the method registry, and a
// reason's row of the error table.
func Methods() []methodInfo      { return registry }
func (r Reason) Valid() bool     { _, ok := r.info(); return ok }
func (r Reason) Code() int       { return NewError(r, "").Code }
func (r Reason) Retryable() bool { info, _ := r.info(); return info.Retryable }
func (r Reason) Message() string { info, _ := r.info(); return info.Message }

// Functions the tests call directly, each the product's unexported one.
var (
	ParseAction = parseAction
	ReadContent = readContent
)

func (p Point) Valid() bool { return p.valid() }

func lookupMethod(name string) (methodInfo, bool) {
	m, ok := methodsByName()[name]
	return m, ok
}

// snapshot returns a copy of the kept bytes, oldest first, unredacted, and
// whether older bytes were dropped.
func (t *tail) snapshot() ([]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Concat(t.buf[t.next:], t.buf[:t.next]), t.written > int64(len(t.buf))
}

// gateWrites counts c's writes to its pipe in n and holds the writer's
// until open is closed, as a peer that reads nothing meanwhile would; a
// direct write still reaches the pipe at once, as a pipe with room takes
// it. Set before anything is sent: the first frame queued orders it
// before the writer's first read of it.
func (c *Conn) gateWrites(n *atomic.Int64, open <-chan struct{}) {
	w, now := c.fw.w, c.writeNow
	c.fw.w = writerFunc(func(p []byte) (int, error) {
		<-open
		n.Add(1)
		return w.Write(p)
	})
	c.writeNow = func(p []byte) (int, error) {
		n.Add(1)
		return now(p)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
