// Package extension is the reference implementation of Reasonix Extension
// Protocol v1 ("reasonix.extension.v1"): strict JSON-RPC 2.0 over NDJSON
// between the Reasonix agent (the host) and its sidecar extensions, each a
// separate process spoken to on its stdin and stdout.
//
// The specification is PROTOCOL.md at the root of this module; its rulings
// D1-D31 are cited by ID beside the code that enforces them and in the
// names of the tests that prove them, and its sections as "PROTOCOL.md
// §3.4". This package doc states each rule in one sentence.
//
// # Who uses what
//
// A host author vendors this package. [Host] is the whole configuration,
// each bound a field with its default; [Host.Start] and [Host.Reload]
// build a generation, a [Runtime], that puts hook points through the
// sidecars ([Runtime.Intercept], [Runtime.InterceptProvider],
// [Runtime.Observe], [Runtime.ResourcesChanged], [Runtime.Chain]), serves
// their models ([Runtime.Catalog], [Runtime.OpenStream], [Stream]), shows
// their UI through the [Frontend] the host implements ([Surface],
// [Prompt], [Runtime.Actions], [Runtime.Action], [Runtime.Submit]) and
// stops them ([Runtime.Close]). [InterceptOutcome], [AuditRecord],
// [Runtime.Declaration] and [Runtime.Warnings] report what happened.
// Plugins are installed and listed with [Install], [LoadPackages],
// [SetEnabled] and [Remove], and shown before they run with
// [TrustPlugin] ([TrustSummary]); [Redactor] (its [Redactor.RedactJSON]
// for the frames a Tap sees) and [TerminalSafe] clean what a sidecar says. The errors to branch on are a [Reason] (matched by
// errors.Is on any [*Error]), [*StartError], [*PluginError],
// [*ManifestError], [ErrNoRuntime] and [ErrClosed].
//
// A sidecar author imports the sibling package sdk, which builds on
// [Conn] ([NewConn], [ConnOptions], [Handler], [AnswerThen]), [Decode],
// [Unmarshal], [DecodePayload], [DecodeSurface], [Rehydrate], [NewError]
// and the DTOs: the method constants, the params and results, the 17
// [Point] values and their payload documents, the provider and UI
// documents.
//
// An implementer in another language reads PROTOCOL.md and the canonical
// schema ([CanonicalSchema], [GeneratedSchemaHash]), checks documents
// with [Validate] (a [*ValidationError] names the JSON pointer), and runs
// a sidecar in any language through [Check] ([CheckOptions],
// [CheckReport]), which names the ruling each failure breaks (exthost
// check). The DTOs, one per $def, and the limits ([FrameBytes],
// [ExternalizeFieldBytes], [ContentRefChunkBytes]) are the vocabulary.
//
// # Schema
//
// D1: the canonical schema is generated from the DTOs and the registry and
// is byte-identical to the frozen contract; rules the schema cannot
// express are enforced in code (PROTOCOL.md §10).
//
// # Transport
//
// D2: one JSON object per "\n"-terminated line of at most [FrameBytes]
// including the newline; a longer inbound line is fatal, a longer outbound
// one fails only its call. D3: documents are decoded strictly, refusing
// unknown, duplicate and case-variant members, null for optional members,
// trailing data and integers with a fraction or exponent. D4: request ids
// are integers that fit in an int64, numbered from 1 by each side. D5:
// params, when present, are an object, and absent params read as {}. D26:
// the host's reader pushes back on a burst of notifications instead of
// failing the connection (PROTOCOL.md §2).
//
// # Lifecycle
//
// D8: only a plugin installed and enabled in <home>/plugin-packages.json,
// with a v1 manifest and a runtime block, ever starts, in exec form. D9:
// the sidecar's declaration must stay within the manifest expectation the
// host sends. D6: before extension/initialized the sidecar may send
// nothing but its answer to extension/initialize; anything else poisons
// the connection. D10: at most four sidecars initialize at once under one
// 30 s deadline, and a required plugin's failure fails the generation.
// D11: shutdown is bounded (shutdown request, stdin closed, 750 ms grace,
// kill, reap), and a clean stop exits with status 0. D12: the kill targets the sidecar's process group. D13: a
// sidecar that dies or stalls is crashed, and its calls fail with
// provider_interrupted, never falling back. D14: a reload swaps in a
// complete new generation or keeps the old one (PROTOCOL.md §3).
//
// # Interception
//
// D15: a point's chain runs its subscribers in priority, then plugin ID,
// then the record's order, one after another. D16: the verdicts are
// continue, block, replace (strictly revalidated) and, at
// permission.decision only, allow and deny; an allow over a host deny is
// audited. D17: a slot has one owner, which has the final say after the
// chain. D28: a tool:<name> or provider:<ref> owner has it for its tool
// or ref. D18: intercept budgets are 5 s for input, tool and
// permission points and 30 s for the rest, and the host's timer rules. D19: a
// required-class plugin's failure fails the operation; an optional one's
// is warned once and skipped. D20: events never block the caller; past 16
// in flight per sidecar they are dropped and counted (PROTOCOL.md §4).
//
// # Providers
//
// D21: stream chunks are reassembled in order from seq 1, with a window
// of 256, duplicates dropped, and a gap failing the stream as
// stream_gap 5 s after it appeared or 1 s after stream/end; a caller's
// cancel ends the stream with stream_cancelled and tells the sidecar
// (PROTOCOL.md §5).
//
// # Content references
//
// D22: payloads over [ExternalizeFieldBytes] travel as content refs in a
// bounded per-connection store, read in pages of [ContentRefChunkBytes] and
// verified by length and SHA-256 ([Rehydrate]); a
// payload over [FrameBytes] is refused locally (PROTOCOL.md §6).
//
// # Structured UI
//
// D23: UI surfaces and prompts are structured data only: payloads decode
// strictly per kind and no string may hold raw HTML, a script or file
// URL, a Markdown image or a control character ([DecodeSurface]). D24: a
// publish of another session or generation is never shown, and the
// binding moves with a reload. A host shows what passes through its
// [Frontend]; [Runtime.Action] and [Runtime.Submit] call back
// (PROTOCOL.md §7).
//
// # Errors and security
//
// D7: every protocol error carries data {"reason","retryable"} from the
// frozen table of [Reason], and receivers classify by reason only; [Error]
// is the wire error. D25: whatever a sidecar says is redacted before a
// person or a log sees it ([Redactor]). D27: control characters and
// escape sequences from a sidecar are shown escaped ([TerminalSafe])
// (PROTOCOL.md §8, §9).
//
// A host sees a sidecar's stderr as it is written with [Host.OnStderr],
// redacted and escaped like everything else a sidecar says.
//
// # Differences from plain JSON-RPC 2.0
//
// No batches, no string or null ids, params only as an object, a size limit
// per frame, a barrier before the first exchange, and error data with a
// frozen reason on every protocol error. A malformed response is dropped,
// never answered.
package extension

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ProtocolID is the frozen protocol identifier sent in extension/initialize.
const ProtocolID = "reasonix.extension.v1"

// ProtocolVersion is the protocol major version as it travels on the wire:
// the string "1".
const ProtocolVersion = "1"

// protocolMajor is the protocol major version as an integer.
const protocolMajor = 1

// Host starts runtime generations of the installed sidecars. Configure it
// with its fields; every duration and bound whose field is zero takes the
// default its comment names. A Host may be used for many generations.
type Host struct {
	// Home holds plugin-packages.json, the trust and launch record (D8).
	Home string
	// Session is sent to every sidecar of a generation. SessionID and
	// WorkspaceRoot must not be blank.
	Session SessionContext
	// UIHost is the front end kind the sidecars are told about; "" means
	// headless.
	UIHost UIHost
	// Env is the base environment of sidecars; nil means os.Environ().
	// Sidecars are full trust and inherit it unfiltered.
	Env []string
	// Redactor cleans every sidecar-supplied string that reaches errors,
	// warnings and logs (D25); nil means a default Redactor. For each
	// sidecar the values of the environment its manifest gives it are
	// redacted too, whatever their names.
	Redactor *Redactor

	// StartupTimeout is the one deadline shared by every sidecar of a
	// generation (D10). Default 30 s.
	StartupTimeout time.Duration
	// MaxParallelStarts bounds how many sidecars initialize at once (D10).
	// Default 4.
	MaxParallelStarts int
	// InitializeTimeout bounds one sidecar's extension/initialize inside
	// the shared deadline. Default 30 s.
	InitializeTimeout time.Duration
	// ShutdownTimeout is the timeoutMillis of extension/shutdown and how
	// long the host waits for its answer (D11). Default 5 s.
	ShutdownTimeout time.Duration
	// StdinGrace is how long a sidecar may take to exit after its stdin
	// closes before its process group is killed (D11). Default 750 ms.
	StdinGrace time.Duration
	// ReapTimeout bounds the wait for a killed sidecar to be reaped (D11).
	// Default 5 s.
	ReapTimeout time.Duration
	// ExitDrain is how long, after a sidecar's process exits, the host
	// still reads the frames it wrote before its connection is failed,
	// and, once its process group is gone, the stderr it wrote before the
	// tail is closed; a grandchild holding a pipe cannot stretch it.
	// Default 250 ms.
	ExitDrain time.Duration
	// StderrTailBytes is how much of a sidecar's stderr is kept for
	// diagnostics (D10). Default 16 KiB.
	StderrTailBytes int
	// OnStderr, if set, receives each line a sidecar writes to its stderr,
	// as it is written: redacted (D25, a PEM private key's lines
	// replaced whole), escaped (D27), and cut at 4096 bytes. It runs on
	// that sidecar's stderr goroutine, one line at a time in order, and
	// must not block.
	OnStderr func(plugin, line string)
	// BaseCatalog is the host's own model catalog, which Runtime.Catalog
	// starts from. A sidecar may declare a ref of it only when it owns
	// slot provider:<ref>, and then its descriptor replaces the entry
	// (D28); any other such declaration fails the generation.
	BaseCatalog []ProviderDescriptor
	// CatalogTimeout bounds one extension/provider/catalog call. Default
	// 10 s.
	CatalogTimeout time.Duration
	// OpenTimeout bounds the wait for the answer to
	// extension/provider/stream/open. Default 10 s.
	OpenTimeout time.Duration
	// CancelTimeout bounds the extension/provider/stream/cancel sent in
	// the background when a caller gives a stream up. Default 2 s.
	CancelTimeout time.Duration
	// StreamWindow is how far ahead of the next expected seq a chunk may
	// wait; a chunk beyond it fails the stream as interrupted (D21).
	// Default 256.
	StreamWindow int
	// GapTimeout is how long a missing seq may stay missing, from the
	// moment its gap appeared, and EndGapTimeout how long after the
	// stream's stream/end; either fails the stream with stream_gap (D21).
	// Defaults 5 s and 1 s.
	GapTimeout, EndGapTimeout time.Duration
	// StreamQueue is the number of entries of a stream's delivery queue,
	// one of them kept for the stream's outcome. Default 256.
	StreamQueue int
	// MaxStreamBytes bounds the bytes a stream holds that its caller has
	// not read, waiting behind a gap or in its queue: each chunk weighs
	// its whole encoded size, or the strings it holds once escaped when
	// they are more, whichever members carry them (D21); past it the
	// stream fails as interrupted. Default 32 MiB.
	MaxStreamBytes int
	// StreamIdleTimeout is how long a stream may go without a chunk or
	// its end arriving; then it fails as interrupted, naming the idle
	// time (D21). Default 120 s, which a slow model's pauses pass; a
	// negative value turns it off, leaving the caller's context the only
	// bound.
	StreamIdleTimeout time.Duration
	// StreamStallTimeout is how long the host waits, with a stream's queue
	// full, for its reader to take a chunk; then that stream alone fails as
	// interrupted. Meanwhile the host reads nothing more from the sidecar,
	// which slows it down (D26). Default 1 s.
	StreamStallTimeout time.Duration
	// MaxContentObjects is how many externalized payloads each sidecar's
	// content store holds; storing one more evicts the oldest (D22).
	// Default 64.
	MaxContentObjects int
	// MaxContentBytes is how many bytes each sidecar's content store holds
	// in all; storing past it evicts the oldest until it fits (D22).
	// Default 64 MiB.
	MaxContentBytes int

	// Frontend, if set, receives the sidecars' structured UI: surfaces
	// and prompts, checked (D23) and of the current generation only
	// (D24). Nil means no UI: host/ui/publish and host/ui/request are
	// answered unknown_method.
	Frontend Frontend
	bound    *binding // the session and generation shown now (D24), shared by the generations

	// Conn configures each sidecar connection: queue bounds and the
	// write-stall watchdog (D13, default 10 s). The host keeps its own
	// side of the barrier on these connections (D6).
	Conn ConnOptions

	// FastInterceptTimeout is the intercept budget of input.receive,
	// tool.before, tool.after and permission.decision (D18). Default 5 s.
	FastInterceptTimeout time.Duration
	// InterceptTimeout is the intercept budget of the other 13 points
	// (D18). Default 30 s.
	InterceptTimeout time.Duration
	// MaxInterceptTimeout clamps a manifest's runtime.timeoutMillis, which
	// replaces the budget of every point of that plugin (D18). Default 60 s.
	MaxInterceptTimeout time.Duration

	// OnWarning, if set, receives each warning as it happens, a
	// [*PluginError] naming the plugin and what it failed: optional
	// sidecars that failed to start, in the record's order (D10); optional
	// interceptors skipped after a failure or violation, and dropped
	// events, once per plugin and category per generation (D19, D20). It
	// may be called from several goroutines at once.
	OnWarning func(*PluginError)
	// OnAudit, if set, receives each audit record: an extension allow
	// that overrode a host deny at permission.decision (D16). It may be
	// called from several goroutines at once.
	OnAudit func(AuditRecord)
	// OnCrash, if set, is called once per crashed sidecar with an error of
	// reason provider_interrupted naming the plugin (D13). It runs on the
	// sidecar's watcher goroutine after every pending call has failed, and
	// Runtime.Close waits for it: it must not call Close or Reload itself,
	// but may start a goroutine that does (an idle reload is how a crashed
	// sidecar comes back).
	OnCrash func(plugin string, err error)
}

// defaultMaxInterceptTimeout is the default of Host.MaxInterceptTimeout
// (D18), which TrustSummary.Text shows too.
const defaultMaxInterceptTimeout = 60 * time.Second

// withDefaults returns a copy of h with every zero field that has a
// default set to it; a generation reads its settings from the copy.
func (h Host) withDefaults() *Host {
	h.StartupTimeout = orDefault(h.StartupTimeout, 30*time.Second)                       // D10
	h.InitializeTimeout = orDefault(h.InitializeTimeout, 30*time.Second)                 // D10
	h.ShutdownTimeout = orDefault(h.ShutdownTimeout, 5*time.Second)                      // D11
	h.StdinGrace = orDefault(h.StdinGrace, 750*time.Millisecond)                         // D11
	h.ReapTimeout = orDefault(h.ReapTimeout, 5*time.Second)                              // D11
	h.ExitDrain = orDefault(h.ExitDrain, 250*time.Millisecond)                           // D11, D13
	h.FastInterceptTimeout = orDefault(h.FastInterceptTimeout, 5*time.Second)            // D18
	h.InterceptTimeout = orDefault(h.InterceptTimeout, 30*time.Second)                   // D18
	h.MaxInterceptTimeout = orDefault(h.MaxInterceptTimeout, defaultMaxInterceptTimeout) // D18
	h.MaxParallelStarts = orDefault(h.MaxParallelStarts, 4)                              // D10
	h.StderrTailBytes = orDefault(h.StderrTailBytes, defaultTailSize)
	h.UIHost = cmp.Or(h.UIHost, UIHostHeadless)
	h.Redactor = cmp.Or(h.Redactor, defaultRedactor()) // one compiled default for every generation
	if h.Env == nil {
		h.Env = os.Environ()
	}
	h.Conn.host = true
	h.CatalogTimeout = orDefault(h.CatalogTimeout, 10*time.Second)
	h.OpenTimeout = orDefault(h.OpenTimeout, 10*time.Second)
	h.CancelTimeout = orDefault(h.CancelTimeout, 2*time.Second)
	h.StreamWindow = orDefault(h.StreamWindow, streamWindow)            // D21
	h.GapTimeout = orDefault(h.GapTimeout, streamGapTimeout)            // D21
	h.EndGapTimeout = orDefault(h.EndGapTimeout, streamEndGapTimeout)   // D21
	h.StreamQueue = max(orDefault(h.StreamQueue, 256), 2)               // one chunk and the outcome at least
	h.StreamStallTimeout = orDefault(h.StreamStallTimeout, time.Second) // D26
	h.MaxStreamBytes = orDefault(h.MaxStreamBytes, 32<<20)              // D21
	if h.StreamIdleTimeout >= 0 {
		h.StreamIdleTimeout = orDefault(h.StreamIdleTimeout, 120*time.Second) // D21
	}
	h.MaxContentObjects = orDefault(h.MaxContentObjects, 64) // D22
	h.MaxContentBytes = orDefault(h.MaxContentBytes, 64<<20) // D22
	return &h
}

// Runtime is one generation of started sidecars: their slot ownership and
// the chains built from them. Create it with [Host.Start]; Close stops it.
type Runtime struct {
	cfg        *Host
	sidecars   []*sidecar // started, in the record's order
	byID       map[string]*sidecar
	slots      map[string]string    // slot → owning plugin (D17)
	paramSlots bool                 // some plugin owns a tool:<name> slot (D28)
	chains     map[Point][]*sidecar // D15 order, without the point's slot owner

	mu       sync.Mutex // protects warnings, warned
	warnings []*PluginError
	warned   map[string]bool // category|plugin already warned (D19, D20)

	ops inflight // operations in flight, for reload-on-idle (D14)

	reloading atomic.Bool // a reload of this generation is waiting or building (D14)
	closeOnce sync.Once
	closeErr  error
}

// Declaration returns the answer the running sidecar of plugin id gave to
// extension/initialize (D9), and false when no sidecar of that plugin
// runs in this generation.
func (rt *Runtime) Declaration(id string) (InitializeResult, bool) {
	if s := rt.byID[id]; s != nil {
		return s.result, true
	}
	return InitializeResult{}, false
}

// Warnings returns the generation's warnings so far: first the startup
// warnings in the record's order, then those of its operations as they came.
func (rt *Runtime) Warnings() []*PluginError {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return slices.Clone(rt.warnings)
}

// Start builds one runtime generation (D10): every installed, enabled
// runtime plugin in the record's order, at most MaxParallelStarts initializing
// at once, all under one StartupTimeout deadline. Slot claims are checked
// first, so a collision starts nothing (D17). A required plugin's failure
// stops every started sidecar and fails Start; an optional one's becomes a
// warning, and Start succeeds, even when no plugin started at all. What did
// not start, and why, is in the runtime's Warnings, with or without
// OnWarning: each a *PluginError whose Op is "start" and whose Err wraps
// the launch gate's refusal or, for a sidecar that failed to start, a
// *StartError (stage, elapsed time, stderr tail). A plugin started when
// Declaration knows it.
func (h *Host) Start(ctx context.Context) (*Runtime, error) {
	return h.start(ctx, h.Session.Generation)
}

// start builds generation gen from a copy of h with its defaults applied,
// and on success binds the UI to it (D24).
func (h *Host) start(ctx context.Context, gen uint64) (*Runtime, error) {
	cfg := h.withDefaults()
	cfg.bound = h.binding()
	cfg.Session.Generation = gen
	if strings.TrimSpace(cfg.Session.SessionID) == "" || strings.TrimSpace(cfg.Session.WorkspaceRoot) == "" {
		return nil, errors.New("extension: Host.Session needs a SessionID and a WorkspaceRoot")
	}
	gates, err := launchablePlugins(cfg.Home, cfg.Session.WorkspaceRoot)
	if err != nil {
		return nil, err
	}
	for _, g := range gates {
		if g.err != nil && g.required {
			// D10: a required plugin that may not launch fails the
			// generation before anything starts.
			return nil, fmt.Errorf("required extension runtime %s failed to start: %w", g.id, g.err)
		}
	}
	rt := &Runtime{cfg: cfg, byID: map[string]*sidecar{}, warned: map[string]bool{}}
	if err := rt.claimSlots(gates); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartupTimeout)
	defer cancel()
	started, errs := make([]*sidecar, len(gates)), make([]error, len(gates))
	sem := make(chan struct{}, cfg.MaxParallelStarts)
	var wg sync.WaitGroup
	for i, g := range gates {
		// D10: launches begin in the record's order; the semaphore keeps at
		// most MaxParallelStarts in their initialization, and nothing
		// launches once the shared deadline has passed.
		errs[i] = g.err // a refusal of the launch gate
		if g.err != nil {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			errs[i] = &StartError{Plugin: g.id, Stage: "launch", Required: g.required, Err: fmt.Errorf("startup stopped before launch: %w", ctx.Err())}
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			started[i], errs[i] = launchSidecar(ctx, g.spec, cfg, rt)
		})
	}
	wg.Wait()
	// Startup warnings come in the record's order (D10), refusals of the
	// launch gate and failed starts alike, once the outcome is known.
	var failed error
	var warnings []*PluginError
	for i, err := range errs {
		switch id := gates[i].id; {
		case err == nil:
			rt.sidecars = append(rt.sidecars, started[i])
			rt.byID[id] = started[i]
		case gates[i].required && failed == nil:
			failed = fmt.Errorf("required extension runtime %s failed to start: %w", id, err)
		case !gates[i].required:
			warnings = append(warnings, &PluginError{Plugin: id, Op: "start", Err: fmt.Errorf("optional extension runtime failed to start: %w", err)})
		}
	}
	if failed == nil {
		failed = rt.checkBaseCatalog()
	}
	if failed != nil {
		rt.Close()
		return nil, failed
	}
	for _, w := range warnings {
		rt.warn(w)
	}
	rt.buildChains()
	cfg.bound.set(cfg.Session) // D24: the UI shows this generation now, before an old one retires
	return rt, nil
}

func (rt *Runtime) warn(w *PluginError) {
	rt.mu.Lock()
	rt.warnings = append(rt.warnings, w)
	rt.mu.Unlock()
	if rt.cfg.OnWarning != nil {
		rt.cfg.OnWarning(w)
	}
}

// warnOnce warns that plugin failed op, once per plugin and category per
// generation (D19, D20); err is built only for that first time, since a
// drop at a full queue can come on every event.
func (rt *Runtime) warnOnce(category, plugin, op string, err func() error) {
	rt.mu.Lock()
	key := category + "|" + plugin
	seen := rt.warned[key]
	rt.warned[key] = true
	rt.mu.Unlock()
	if !seen {
		rt.warn(&PluginError{Plugin: plugin, Op: op, Err: err()})
	}
}

// claimSlots records each slot's owner from the replaces of the manifests
// that passed the launch gate and fails on the second claimant, before
// anything starts (D17).
func (rt *Runtime) claimSlots(gates []gated) error {
	rt.slots = map[string]string{}
	for _, g := range gates {
		if g.spec == nil {
			continue // refused: it claims nothing
		}
		for _, slot := range g.spec.Runtime.Replaces {
			if owner, taken := rt.slots[slot]; taken && owner != g.id {
				// D17: a slot has one owner; the second claim starts nothing.
				return &StartError{Plugin: g.id, Stage: "launch", Required: g.required, Err: fmt.Errorf("slot %q is claimed by both %s and %s; a slot has exactly one owner", slot, owner, g.id)}
			}
			rt.slots[slot] = g.id
			rt.paramSlots = rt.paramSlots || strings.HasPrefix(slot, "tool:")
		}
	}
	return nil
}

// Close stops every sidecar of the generation in parallel (D11) and joins
// everything they started. It returns the stop errors joined (reason
// shutdown_timeout for a sidecar that had to be killed), or nil. Close is
// idempotent.
func (rt *Runtime) Close() error {
	rt.closeOnce.Do(func() {
		rt.ops.close()
		errs := make([]error, len(rt.sidecars))
		var wg sync.WaitGroup
		for i, s := range rt.sidecars {
			wg.Go(func() { errs[i] = s.stop() })
		}
		wg.Wait()
		rt.closeErr = errors.Join(errs...)
	})
	return rt.closeErr
}

// begin and end bracket an operation so that a reload can wait for idle.
func (rt *Runtime) begin() error {
	if !rt.ops.enter() {
		return errorf(ReasonProviderInterrupted, "the runtime generation is closed or retired")
	}
	return nil
}

func (rt *Runtime) end() { rt.ops.leave() }

// inflight counts what runs on behalf of its owner, a generation's
// operations or a sidecar's background calls, so that the owner can stop
// taking more and wait for those running: the one idle and join mechanism
// of both.
type inflight struct {
	mu     sync.Mutex // protects the following
	n      int
	closed bool          // no more enter
	idle   chan struct{} // closed when n falls to 0; nil while nobody waits
}

// enter counts one more unless closed, and reports whether it did.
func (f *inflight) enter() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.n++
	return true
}

func (f *inflight) leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n--; f.n == 0 && f.idle != nil {
		close(f.idle)
		f.idle = nil
	}
}

func (f *inflight) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
}

// join takes no more and waits for what runs; a sidecar's background
// calls end at the latest with its connection.
func (f *inflight) join() {
	f.close()
	f.wait(context.Background())
}

// wait waits until nothing runs, or ctx ends.
func (f *inflight) wait(ctx context.Context) error {
	f.mu.Lock()
	if f.n == 0 {
		f.mu.Unlock()
		return nil
	}
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	idle := f.idle
	f.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errReloadPending is returned by Reload when another reload is already
// waiting or building: at most one waits (D14).
var errReloadPending = errors.New("extension: a reload is already waiting")

// Reload replaces old with a new generation (D14). It waits until old is
// idle, builds a complete new generation (start, handshake, slot
// ownership) with the session's generation number incremented, and only
// on full success retires old: old takes no new operation, finishes the
// ones in flight, and stops. On failure old keeps serving untouched and the
// error says why. The caller swaps its pointer to the returned Runtime;
// operations started on old after Reload returned fail with
// provider_interrupted. One reload of a generation runs at a time;
// another asked for meanwhile gets an error saying a reload is already waiting.
func (h *Host) Reload(ctx context.Context, old *Runtime) (*Runtime, error) {
	if !old.reloading.CompareAndSwap(false, true) {
		return nil, errReloadPending
	}
	defer old.reloading.Store(false)
	if err := old.ops.wait(ctx); err != nil {
		return nil, err
	}
	next, err := h.start(ctx, old.cfg.Session.Generation+1) // D24: bound to next, old's late publishes are stale
	if err != nil {
		return nil, fmt.Errorf("reload: the new generation failed, the old one keeps serving: %w", err)
	}
	// D14: old takes no new operation, lets the ones in flight finish
	// (until ctx ends), then closes.
	old.ops.close()
	old.ops.wait(ctx)
	old.Close()
	return next, nil
}
