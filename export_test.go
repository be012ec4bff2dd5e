package extension

import (
	"context"
	"fmt"
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
func (w Warning) String() string               { return fmt.Sprintf("%s: %v", w.Plugin, w.Err) }

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
