package extension

import (
	"context"
	"time"
)

// Views of unexported parts for the external tests (package
// extension_test); they exist only in test builds.

func (s *Sidecar) Call(ctx context.Context, method string, params, result any) error {
	return s.call(ctx, method, params, result)
}
func (s *Sidecar) PID() int                      { return s.proc.pid }
func (s *Sidecar) Stats() ConnStats              { return s.conn.Stats() }
func (s *Sidecar) Done() <-chan struct{}         { return s.conn.Done() }
func (rt *Runtime) SlotOwner(slot string) string { return rt.slots[slot] }

func (h *Host) InterceptBudget(p Point, manifestMillis int64) time.Duration {
	return h.withDefaults().interceptBudget(p, manifestMillis)
}
