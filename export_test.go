package extension

import (
	"context"
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

func (s *sidecar) ID() string                    { return s.id }
func (s *sidecar) Declaration() InitializeResult { return s.result }
func (rt *Runtime) Session() SessionContext      { return rt.cfg.Session }
func (rt *Runtime) Sidecars() []*sidecar         { return rt.sidecars }
func (rt *Runtime) Sidecar(id string) *sidecar   { return rt.byID[id] }
func (w Warning) String() string                 { return w.Plugin + ": " + w.Err.Error() }

// Enable and Disable are SetEnabled, as the tests were first written.
func Enable(home, name string) error  { return SetEnabled(home, name, true) }
func Disable(home, name string) error { return SetEnabled(home, name, false) }

var ErrWriteStall = errWriteStall
