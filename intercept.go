package extension

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Interception and observation methods (PROTOCOL.md §4).
const (
	MethodIntercept        = "extension/intercept"
	MethodEvent            = "extension/event"
	MethodResourcesChanged = "extension/resources/changed"
)

// Decision is an interceptor's verdict (D16).
type Decision string

// The verdicts.
const (
	DecisionAllow    Decision = "allow"
	DecisionBlock    Decision = "block"
	DecisionContinue Decision = "continue"
	DecisionDeny     Decision = "deny"
	DecisionReplace  Decision = "replace"
)

func (Decision) enumValues() []string {
	return enumStrings(DecisionAllow, DecisionBlock, DecisionContinue, DecisionDeny, DecisionReplace)
}

// InterceptParams are the params of extension/intercept. Payload is the
// point's payload document, or null when it is externalized (D22).
type InterceptParams struct {
	Event         Point               `json:"event"`
	Seq           int64               `json:"seq" proto:"min=1"`
	Payload       json.RawMessage     `json:"payload" proto:"externalizable"`
	TimeoutMillis int64               `json:"timeoutMillis" proto:"min=0"`
	Externalized  []ExternalizedField `json:"externalized,omitempty"`
}

// InterceptResult answers extension/intercept.
type InterceptResult struct {
	Decision     Decision            `json:"decision"`
	Reason       string              `json:"reason,omitempty"`
	Replacement  json.RawMessage     `json:"replacement,omitempty" proto:"externalizable"`
	Externalized []ExternalizedField `json:"externalized,omitempty"`
}

// EventParams are the params of the extension/event observation.
type EventParams struct {
	Event        Point               `json:"event"`
	Payload      json.RawMessage     `json:"payload" proto:"externalizable"`
	Externalized []ExternalizedField `json:"externalized,omitempty"`
}

// ResourcesChangedParams are the params of extension/resources/changed.
type ResourcesChangedParams struct {
	Paths []string `json:"paths"`
}

// interceptBudget is the time one sidecar has to answer one intercept at
// p (D18): the point's family default, or the manifest's timeoutMillis for
// every point when it is > 0, clamped to the maximum.
func (cfg *Host) interceptBudget(p Point, manifestMillis int64) time.Duration {
	if manifestMillis > 0 {
		if manifestMillis >= cfg.MaxInterceptTimeout.Milliseconds() {
			return cfg.MaxInterceptTimeout // also keeps a huge value from overflowing
		}
		return time.Duration(manifestMillis) * time.Millisecond
	}
	if pointTable[p].fast {
		return cfg.FastInterceptTimeout
	}
	return cfg.InterceptTimeout
}

// InterceptOutcome is the result of putting one hook point through the
// runtime's sidecars (D15-D17).
type InterceptOutcome struct {
	// Payload is the final payload: the host's own, or the last valid
	// replacement, compacted.
	Payload json.RawMessage
	// Blocked reports that an interceptor stopped the operation; BlockedBy
	// names it and Reason is its redacted reason.
	Blocked   bool
	BlockedBy string
	Reason    string
	// Replaced lists the plugins whose replacement was applied, in order.
	Replaced []string
	// Skipped lists the optional plugins whose ruling was skipped because
	// they failed here (a timeout, a crash, an illegal answer, D19), in
	// order. Each is warned about once a generation; this says it every
	// time.
	Skipped []string
	// Permission is the first extension ruling at permission.decision,
	// allow or deny, by PermissionBy; "" when every interceptor continued
	// and the host's decision stands.
	Permission   Decision
	PermissionBy string
	// Audit is set when an extension allow overrode the host's deny.
	Audit *AuditRecord

	sum string // the SHA-256 of Payload from compactPayload, or ""
}

// AuditRecord records an extension allow that overrode the host's deny at
// permission.decision (D16). Reason is redacted.
type AuditRecord struct {
	Plugin string
	Point  Point
	Time   time.Time
	Tool   string
	Reason string
}

// errSlotOwnerBlocked is the cause of a [PluginError] when the slot
// owner answered block: from the owner, block fails the operation (D17).
var errSlotOwnerBlocked = errors.New("the slot owner blocked the operation")

// errExternalized is the cause of a violation whose replacement came by
// reference and did not read back as its descriptor says (D22).
var errExternalized = errors.New("externalized replacement")

// buildChains orders each point's interceptors (D15): the sidecars that
// subscribed to it in their handshake, by priority, then plugin ID
// byte-wise, then the record's order, which the stable sort keeps from
// rt.sidecars. A point's slot owner is left out: it speaks once, last
// (D17).
func (rt *Runtime) buildChains() {
	rt.chains = map[Point][]*sidecar{}
	for _, p := range points {
		owner := rt.slots[slotOf(p)]
		var chain []*sidecar
		for _, s := range rt.sidecars {
			if s.spec.ID != owner && slices.Contains(s.result.Subscriptions, string(p)) {
				chain = append(chain, s)
			}
		}
		slices.SortStableFunc(chain, func(a, b *sidecar) int {
			return cmp.Or(cmp.Compare(a.spec.Runtime.Priority, b.spec.Runtime.Priority), strings.Compare(a.spec.ID, b.spec.ID))
		})
		rt.chains[p] = chain
	}
}

// Chain returns the plugin IDs of point p's interceptors in the order they
// run (D15), followed by the slot owner, if any (D17).
func (rt *Runtime) Chain(p Point) []string {
	var ids []string
	for _, s := range rt.chains[p] {
		ids = append(ids, s.spec.ID)
	}
	if id := rt.slots[slotOf(p)]; rt.byID[id] != nil {
		ids = append(ids, id)
	}
	return ids
}

// Intercept puts one operation at hook point p through the runtime: the
// chain of interceptors in D15 order, each seeing its predecessor's output,
// then the point's slot owners, which have the final say (D17): the owner
// of the point's slot, then, at tool.before and tool.after, the owner of
// tool:<name> for the payload's tool (D28). payload is the point's payload
// document, a JSON object (a json.RawMessage or []byte is used as is;
// one over 64 KiB becomes the content of a ref, D22, so it must not be
// changed while sidecars may read it, until Intercept returns). A
// block stops the operation and is reported in the outcome. A failure or
// violation of a required-class plugin, anything but continue, replace or
// a permission ruling from a slot owner, and a slot owner that is not
// running fail the operation with a *PluginError; an optional plugin's
// failure is warned once and skipped (D19). Intercept never falls back to
// another plugin (D13).
func (rt *Runtime) Intercept(ctx context.Context, p Point, payload any) (*InterceptOutcome, error) {
	return rt.intercept(ctx, p, payload, "")
}

// InterceptProvider is [Intercept] at provider.request or provider.response
// for a stream of the model ref: the owner of slot provider:<ref>, if any,
// speaks last (D28). A host puts the request through it, opens the stream
// with the final request, and puts the assembled response through it.
func (rt *Runtime) InterceptProvider(ctx context.Context, ref string, p Point, payload any) (*InterceptOutcome, error) {
	if p != ProviderRequestPoint && p != ProviderResponsePoint {
		return nil, fmt.Errorf("extension: InterceptProvider takes provider.request or provider.response, not %q", p)
	}
	return rt.intercept(ctx, p, payload, ref)
}

func (rt *Runtime) intercept(ctx context.Context, p Point, payload any, ref string) (*InterceptOutcome, error) {
	cur, sum, err := rt.operation(p, payload)
	if err != nil {
		return nil, err
	}
	defer rt.end()
	out := &InterceptOutcome{Payload: cur, sum: sum}
	var host PermissionPayload
	if p == PermissionDecision {
		Unmarshal(cur, &host) // the host's own document, read strictly (D3); a bad one reads as no decision
	}
	chain, owners := rt.speakers(p, cur, ref)
	for _, s := range chain {
		ruled, err := rt.rule(ctx, s, p, out, host.HostDecision, false)
		if err != nil {
			return nil, err
		}
		if out.Blocked {
			return out, nil
		}
		if ruled {
			break // D16: the first allow or deny ends the chain
		}
	}
	for _, o := range owners {
		owner := rt.byID[o.plugin]
		if owner == nil {
			// D17, D19: the owner is required-class; a missing one fails
			// the operation rather than letting the host default stand.
			return nil, &PluginError{Plugin: o.plugin, Op: string(p),
				Err: errorf(ReasonProviderInterrupted, "extension %s owns the %s slot but is not running", o.plugin, o.slot)}
		}
		if _, err := rt.rule(ctx, owner, p, out, host.HostDecision, true); err != nil {
			return nil, err
		}
	}
	if out.Permission == DecisionAllow && host.HostDecision == "deny" {
		// D16: an extension allow over a host deny is audited.
		var tool PermissionPayload
		Unmarshal(out.Payload, &tool)
		out.Audit = &AuditRecord{Plugin: out.PermissionBy, Point: p, Time: time.Now(), Tool: tool.Name, Reason: out.Reason}
		if rt.cfg.OnAudit != nil {
			rt.cfg.OnAudit(*out.Audit)
		}
	}
	return out, nil
}

// slotClaim is a slot and the plugin that owns it.
type slotClaim struct{ slot, plugin string }

// speakers returns who rules on one operation at p, in the order they
// speak: the chain of p (D15), then the slot owners that have the final
// say: the owner of p's slot (D17), then the owner of the parameterized
// slot the operation names (D28): tool:<name> for the tool of a
// tool.before or tool.after payload as the host sent it, provider:<ref>
// for a stream of ref. That second owner, which the chain may hold (the
// first one it never does), speaks last only: it leaves the chain.
func (rt *Runtime) speakers(p Point, payload json.RawMessage, ref string) (chain []*sidecar, claims []slotClaim) {
	chain = rt.chains[p]
	if id := rt.slots[slotOf(p)]; id != "" {
		claims = append(claims, slotClaim{slotOf(p), id})
	}
	param := ""
	switch {
	case (p == ToolBefore || p == ToolAfter) && rt.paramSlots:
		var tool ToolResultPayload // tool.before's members and more
		Unmarshal(payload, &tool)  // read strictly (D3): a payload without a name names no slot
		if tool.Name != "" {
			param = "tool:" + tool.Name
		}
	case ref != "":
		param = "provider:" + ref
	}
	if id := rt.slots[param]; param != "" && id != "" && (len(claims) == 0 || claims[0].plugin != id) {
		claims = append(claims, slotClaim{param, id})
		chain = slices.DeleteFunc(slices.Clone(chain), func(s *sidecar) bool { return s.spec.ID == id })
	}
	return chain, claims
}

// operation checks the point and encodes the payload document of an
// Intercept or Observe, which must be a JSON object, then begins the
// operation; when it succeeds the caller ends it. sum is compactPayload's.
func (rt *Runtime) operation(p Point, payload any) (raw json.RawMessage, sum string, err error) {
	if !p.valid() {
		return nil, "", fmt.Errorf("extension: %q is not a hook point", p)
	}
	switch v := payload.(type) {
	case json.RawMessage:
		raw = v
	case []byte:
		raw = v
	default:
		if raw, err = json.Marshal(payload); err != nil {
			return nil, "", fmt.Errorf("extension: encoding the payload: %w", err)
		}
	}
	// D22: the size that counts is the compact one, as it is sent or
	// stored.
	raw, sum, err = compactPayload(raw)
	if err != nil || raw[0] != '{' {
		return nil, "", errors.New("extension: a payload must be a JSON object")
	}
	if len(raw) > FrameBytes {
		return nil, "", errorf(ReasonFrameTooLarge, "the %s payload is %d bytes compacted, over the %d-byte limit of a content object", p, len(raw), FrameBytes)
	}
	return raw, sum, rt.begin()
}

// rule asks one sidecar and applies its verdict to out (D16, D17): a
// block sets out.Blocked; ruled reports an allow or deny, which ends the
// chain; err fails the operation.
func (rt *Runtime) rule(ctx context.Context, s *sidecar, p Point, out *InterceptOutcome, hostDecision string, owner bool) (ruled bool, err error) {
	res, err := rt.callIntercept(ctx, s, p, out.Payload, out.sum)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err() // the caller gave up; nobody is at fault
		}
		return false, rt.failure(out, s, p, "error", err, owner)
	}
	violation := func(format string, args ...any) error {
		return rt.failure(out, s, p, "violation", errorf(ReasonProtocolError, "extension %s at %s: "+format, append([]any{s.spec.ID, p}, args...)...), owner)
	}
	switch res.Decision {
	case DecisionContinue:
	case DecisionBlock:
		reason := s.safe(res.Reason)
		if owner {
			// D17: from the slot owner, block fails the operation.
			return false, &PluginError{Plugin: s.spec.ID, Op: string(p), Err: fmt.Errorf("%w: %s", errSlotOwnerBlocked, reason)}
		}
		out.Blocked, out.BlockedBy, out.Reason = true, s.spec.ID, reason
	case DecisionReplace:
		// D22: an externalized replacement names a ref of this
		// connection's store, read and verified as a sidecar reads one.
		repl, err := Rehydrate(ctx, res.Replacement, res.Externalized, "/replacement", s.content.read)
		if err != nil {
			return false, rt.failure(out, s, p, "violation", fmt.Errorf("extension %s at %s: %w: %w", s.spec.ID, p, errExternalized, s.redactErr(err)), owner)
		}
		v, err := DecodePayload(p, repl)
		if err != nil {
			return false, violation("invalid replacement: %s", s.safe(err.Error()))
		}
		if pp, ok := v.(*PermissionPayload); ok && pp.HostDecision != hostDecision {
			// D16: the host's own ruling is not the extension's to rewrite;
			// an override is an audited allow, never a silent edit.
			return false, violation("a replacement may not change hostDecision")
		}
		// D16: the whole validated value replaces the payload, compacted
		// (DecodePayload accepted it).
		out.Payload, _ = compactValue(repl)
		out.sum = "" // hashed when it is externalized
		out.Replaced = append(out.Replaced, s.spec.ID)
	case DecisionAllow, DecisionDeny:
		if p != PermissionDecision {
			// D16: allow and deny are legal only at permission.decision.
			return false, violation("%s is legal only at permission.decision", res.Decision)
		}
		// D16, D17: the first chain ruling ends the chain; the slot owner's
		// ruling, if any, has the final say.
		out.Permission, out.PermissionBy, out.Reason = res.Decision, s.spec.ID, s.safe(res.Reason)
		return true, nil
	default:
		return false, violation("unknown decision %q", res.Decision)
	}
	return false, nil
}

// failure decides what a plugin's failure or violation means (D19): for a
// slot owner or any required-class plugin (its manifest says required, or
// it owns any slot) the operation fails; an optional plugin is warned
// about once per plugin and category ("error" for a call that failed,
// "violation" for an illegal answer) and skipped.
func (rt *Runtime) failure(out *InterceptOutcome, s *sidecar, p Point, category string, err error, owner bool) error {
	// A plugin owns a slot exactly when its manifest claims one: the start
	// records every claim in rt.slots or fails.
	if owner || s.spec.Runtime.Required || len(s.spec.Runtime.Replaces) > 0 {
		return &PluginError{Plugin: s.spec.ID, Op: string(p), Err: err}
	}
	rt.warnOnce(category, s.spec.ID, string(p), func() error { return fmt.Errorf("skipping optional extension %s at %s: %w", s.spec.ID, p, err) })
	out.Skipped = append(out.Skipped, s.spec.ID)
	return nil
}

// callIntercept sends one extension/intercept with the plugin's budget.
// The host's timer is authoritative: at the deadline the call fails with
// intercept_timeout and a late answer is discarded (D18).
func (rt *Runtime) callIntercept(ctx context.Context, s *sidecar, p Point, payload json.RawMessage, sum string) (InterceptResult, error) {
	budget := rt.cfg.interceptBudget(p, s.spec.Runtime.TimeoutMillis)
	// The sidecar is told what it really has: the budget, or less when
	// the caller's deadline comes first, in whole milliseconds rounded up
	// (0 would mean no deadline at all).
	wire := budget
	if dl, ok := ctx.Deadline(); ok {
		wire = min(wire, time.Until(dl))
	}
	millis := max(1, (wire+time.Millisecond-1)/time.Millisecond)
	params := InterceptParams{Event: p, Seq: s.seq.Add(1), TimeoutMillis: int64(millis)}
	params.Payload, params.Externalized = s.content.externalize(payload, sum) // D22
	var res InterceptResult
	bctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	err := s.call(bctx, MethodIntercept, params, &res)
	switch {
	case err == nil, ctx.Err() != nil:
	case bctx.Err() != nil:
		return res, errorf(ReasonInterceptTimeout, "extension %s did not answer %s within %v", s.spec.ID, p, budget)
	case errors.Is(err, ReasonInterceptTimeout):
		// The sidecar's own deadline (the timeoutMillis it was sent) came
		// first: the same outcome, so the same error, whichever timer won.
		return res, errorf(ReasonInterceptTimeout, "extension %s ran out of its %v for %s (it answered intercept_timeout)", s.spec.ID, budget, p)
	}
	return res, err
}

// Observe sends an extension/event for point p to every interceptor of p
// and its slot owner (D20). It never blocks: each sidecar has a bounded
// queue of events in flight, and an event that does not fit is dropped,
// counted, and warned about once per plugin per generation.
func (rt *Runtime) Observe(p Point, payload any) error {
	raw, sum, err := rt.operation(p, payload)
	switch {
	case err == nil:
		defer rt.end()
	case !errors.Is(err, ReasonFrameTooLarge):
		return err
	}
	if len(raw) > ExternalizeFieldBytes {
		// The store gets a copy of its own: the sidecars page an event's
		// payload after Observe returned, when the caller may have reused
		// its buffer.
		raw = bytes.Clone(raw)
	}
	chain, owners := rt.speakers(p, raw, "")
	send := func(id string, s *sidecar) {
		if err != nil {
			// D20, D22: an event too large to store (err is
			// frame_too_large) is dropped, counted and warned about, never
			// the caller's error.
			if s != nil {
				s.conn.droppedEvents.Add(1)
			}
			rt.warnOnce(MethodEvent, id, MethodEvent, func() error { return fmt.Errorf("extension %s dropped the %s event: %w", id, p, err) })
			return
		}
		params := EventParams{Event: p, Payload: raw}
		if s != nil {
			params.Payload, params.Externalized = s.content.externalize(raw, sum) // refs are per connection
		}
		rt.bestEffort(id, s, MethodEvent, params, p)
	}
	for _, s := range chain {
		send(s.spec.ID, s)
	}
	for _, o := range owners {
		send(o.plugin, rt.byID[o.plugin])
	}
	return nil
}

// ResourcesChanged tells every sidecar of the generation that the
// resources at paths changed (extension/resources/changed). Like Observe
// it never blocks (D20): a sidecar whose queue is full misses it, which is
// counted and warned about once per plugin per generation. It fails only
// when the generation is closed.
func (rt *Runtime) ResourcesChanged(paths []string) error {
	if err := rt.begin(); err != nil {
		return err
	}
	defer rt.end()
	if paths == nil {
		paths = []string{} // paths is required: never null
	}
	params := ResourcesChangedParams{Paths: paths}
	for _, s := range rt.sidecars {
		rt.bestEffort(s.spec.ID, s, MethodResourcesChanged, params, "")
	}
	return nil
}

// bestEffort sends a notification to plugin id's sidecar s (nil when it is
// not running) without blocking (D20); p is the point of an event. A
// notification not sent is warned about once per plugin per generation and
// method; a drop at a full queue is also counted by the connection
// (droppedEvents).
func (rt *Runtime) bestEffort(id string, s *sidecar, method string, params any, p Point) {
	var err error // built only for a plugin that is not running: this runs per event
	if s == nil {
		err = errorf(ReasonProviderInterrupted, "extension %s is not running", id)
	} else if err = s.usable(); err == nil {
		err = s.conn.tryNotify(method, params)
	}
	if err != nil {
		rt.warnOnce(method, id, method, func() error {
			what := method
			if p != "" {
				what = "the " + string(p) + " event"
			}
			return fmt.Errorf("extension %s dropped %s: %v", id, what, err)
		})
	}
}

// The payload documents of the 17 hook points (PROTOCOL.md §4.1). They
// travel in the free-form payload of extension/intercept and extension/event
// and are not part of the frozen schema. Every member is optional on the
// wire; a replacement is strictly decoded into the point's document and then
// checked by the point's rules (D16, see DecodePayload).

// InputPayload is the payload of input.receive.
type InputPayload struct {
	Text string `json:"text,omitempty"`
}

// AgentStartPayload is the payload of agent.before_start.
type AgentStartPayload struct {
	Model     string `json:"model,omitempty"`
	ToolCount int64  `json:"toolCount,omitempty"`
	SessionID string `json:"sessionId,omitempty"`
}

// SystemPromptPayload is the payload of system_prompt.build.
type SystemPromptPayload struct {
	Prompt        string `json:"prompt,omitempty"`
	WorkspaceRoot string `json:"workspaceRoot,omitempty"`
}

// ContextPayload is the payload of context.prepare.
type ContextPayload struct {
	Messages []ProviderMessage `json:"messages,omitempty"`
}

// ProviderRequestPayload is the payload of provider.request.
type ProviderRequestPayload struct {
	Request ProviderRequest `json:"request"`
}

// ProviderResponsePayload is the payload of provider.response.
type ProviderResponsePayload struct {
	Text      string             `json:"text,omitempty"`
	Reasoning string             `json:"reasoning,omitempty"`
	Signature string             `json:"signature,omitempty"`
	Calls     []ProviderToolCall `json:"calls,omitempty"`
	Usage     *ProviderUsage     `json:"usage,omitempty"`
}

// ToolPayload is the payload of tool.before; Arguments is JSON-object text.
type ToolPayload struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

// ToolResultPayload is the payload of tool.after.
type ToolResultPayload struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	Result    string `json:"result,omitempty"`
	IsError   bool   `json:"isError,omitempty"`
}

// PermissionPayload is the payload of permission.decision. HostDecision is
// the host's own ruling, "allow" or "deny", filled before dispatch.
type PermissionPayload struct {
	Name         string `json:"name,omitempty"`
	Arguments    string `json:"arguments,omitempty"`
	ReadOnly     bool   `json:"readOnly,omitempty"`
	HostDecision string `json:"hostDecision,omitempty"`
}

// CompactionPreparePayload is the payload of compaction.prepare.
type CompactionPreparePayload struct {
	Messages []ProviderMessage `json:"messages,omitempty"`
	Guidance string            `json:"guidance,omitempty"`
}

// CompactionCompletePayload is the payload of compaction.complete.
type CompactionCompletePayload struct {
	Summary string `json:"summary,omitempty"`
}

// SessionPayload is the payload of the five session.* points; Phase names
// the point: "start", "end", "load", "save" or "rotate".
type SessionPayload struct {
	SessionPath string `json:"sessionPath,omitempty"`
	Phase       string `json:"phase,omitempty"`
}

// FrontendPayload is the payload of frontend.event.
type FrontendPayload struct {
	Kind   string `json:"kind,omitempty"`
	Text   string `json:"text,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Point is one of the 17 frozen hook points shared by extension/intercept
// and extension/event (PROTOCOL.md §4.1).
type Point string

// The 17 hook points, sorted as in the schema.
const (
	AgentBeforeStart      Point = "agent.before_start"
	CompactionComplete    Point = "compaction.complete"
	CompactionPrepare     Point = "compaction.prepare"
	ContextPrepare        Point = "context.prepare"
	FrontendEvent         Point = "frontend.event"
	InputReceive          Point = "input.receive"
	PermissionDecision    Point = "permission.decision"
	ProviderRequestPoint  Point = "provider.request"
	ProviderResponsePoint Point = "provider.response"
	SessionEnd            Point = "session.end"
	SessionLoad           Point = "session.load"
	SessionRotate         Point = "session.rotate"
	SessionSave           Point = "session.save"
	SessionStart          Point = "session.start"
	SystemPromptBuild     Point = "system_prompt.build"
	ToolAfter             Point = "tool.after"
	ToolBefore            Point = "tool.before"
)

// pointInfo is one row of the table of PROTOCOL.md §4.1.
type pointInfo struct {
	slot    string       // the slot whose owner has the final say there (D17); "" for none
	fast    bool         // in the 5-second timeout family (D18)
	payload reflect.Type // the payload document
}

// pointTable holds the 17 points.
var pointTable = map[Point]pointInfo{
	AgentBeforeStart:      {"", false, reflect.TypeFor[AgentStartPayload]()},
	CompactionComplete:    {"compaction", false, reflect.TypeFor[CompactionCompletePayload]()},
	CompactionPrepare:     {"compaction", false, reflect.TypeFor[CompactionPreparePayload]()},
	ContextPrepare:        {"context", false, reflect.TypeFor[ContextPayload]()},
	FrontendEvent:         {"frontend_events", false, reflect.TypeFor[FrontendPayload]()},
	InputReceive:          {"", true, reflect.TypeFor[InputPayload]()},
	PermissionDecision:    {"permission", true, reflect.TypeFor[PermissionPayload]()},
	ProviderRequestPoint:  {"provider_request", false, reflect.TypeFor[ProviderRequestPayload]()},
	ProviderResponsePoint: {"provider_response", false, reflect.TypeFor[ProviderResponsePayload]()},
	SessionEnd:            {"session_policy", false, reflect.TypeFor[SessionPayload]()},
	SessionLoad:           {"session_policy", false, reflect.TypeFor[SessionPayload]()},
	SessionRotate:         {"session_policy", false, reflect.TypeFor[SessionPayload]()},
	SessionSave:           {"session_policy", false, reflect.TypeFor[SessionPayload]()},
	SessionStart:          {"session_policy", false, reflect.TypeFor[SessionPayload]()},
	SystemPromptBuild:     {"system_prompt", false, reflect.TypeFor[SystemPromptPayload]()},
	ToolAfter:             {"", true, reflect.TypeFor[ToolResultPayload]()},
	ToolBefore:            {"", true, reflect.TypeFor[ToolPayload]()},
}

// points lists the 17 points, sorted.
var points = slices.Sorted(maps.Keys(pointTable))

// Points returns the 17 hook points, sorted.
func Points() []Point { return slices.Clone(points) }

// valid reports whether p is one of the 17 hook points.
func (p Point) valid() bool { _, ok := pointTable[p]; return ok }

func (Point) enumValues() []string { return enumStrings(points...) }

// slotOf returns the slot whose owner has the final say at p (D17), or "".
func slotOf(p Point) string { return pointTable[p].slot }

// enumStrings lists the values of an enum type, for its enumValues.
func enumStrings[T ~string](vs ...T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// DecodePayload strictly decodes a payload or replacement document of
// point p into a fresh value of its payload type and checks the point's
// replacement rules (D16, PROTOCOL.md §4.1). It returns the decoded value,
// such as *ToolPayload for tool.before; a failure names the JSON pointer.
func DecodePayload(p Point, doc []byte) (any, error) {
	info, ok := pointTable[p]
	if !ok {
		return nil, fmt.Errorf("%q is not a hook point", p)
	}
	if len(bytes.TrimSpace(doc)) == 0 {
		return nil, fmt.Errorf("%s replacement is empty", p)
	}
	v := reflect.New(info.payload).Interface()
	if err := Unmarshal(doc, v); err != nil {
		return nil, err
	}
	if pointer, msg := replacementRule(p, v); msg != "" {
		return nil, &ValidationError{Def: info.payload.Name(), Pointer: pointer, Msg: msg}
	}
	return v, nil
}

// replacementRule applies the replacement rules of PROTOCOL.md §4.1 to a
// decoded payload document; it returns the offending member's pointer and
// what is wrong, or "" when the document may replace the payload.
func replacementRule(p Point, v any) (pointer, msg string) {
	switch x := v.(type) {
	case *InputPayload:
		return nonBlank("text", x.Text)
	case *AgentStartPayload:
		return nonBlank("sessionId", x.SessionID)
	case *SystemPromptPayload:
		return nonBlank("workspaceRoot", x.WorkspaceRoot)
	case *ContextPayload:
		if x.Messages == nil {
			return "/messages", "messages must be present as an array (it may be [])"
		}
	case *CompactionPreparePayload:
		if x.Messages == nil {
			return "/messages", "messages must be present as an array (it may be [])"
		}
	case *ToolPayload:
		return toolRule(x.Name, x.Arguments)
	case *ToolResultPayload:
		return toolRule(x.Name, x.Arguments)
	case *PermissionPayload:
		if x.HostDecision != "allow" && x.HostDecision != "deny" {
			return "/hostDecision", `hostDecision must be "allow" or "deny"`
		}
		return toolRule(x.Name, x.Arguments)
	case *CompactionCompletePayload:
		return nonBlank("summary", x.Summary)
	case *SessionPayload:
		// The five phases are exactly the points session.<phase>.
		if !Point("session." + x.Phase).valid() {
			return "/phase", fmt.Sprintf("phase %q is not start, end, load, save or rotate", x.Phase)
		}
		if Point("session."+x.Phase) != p {
			return "/phase", fmt.Sprintf("phase %q does not match the point %s", x.Phase, p)
		}
	case *FrontendPayload:
		return nonBlank("kind", x.Kind)
	}
	return "", ""
}

// nonBlank is the rule of a member that must not be empty or blank.
func nonBlank(member, value string) (pointer, msg string) {
	if strings.TrimSpace(value) == "" {
		return "/" + member, member + " must not be empty"
	}
	return "", ""
}

// jsonObjectNode admits any JSON object, every member name inside checked
// for duplicates (D3).
var jsonObjectNode = &vnode{kind: vAny, object: true, def: "arguments"} // def names it in errors

// toolRule: a tool needs a name, and its arguments are empty or the text
// of a JSON object read as strictly as the frames around it (D3): no
// duplicate member can hide one value behind another.
func toolRule(name, args string) (pointer, msg string) {
	if pointer, msg := nonBlank("name", name); msg != "" || args == "" { // a blank name fails, no arguments pass
		return pointer, msg
	}
	if err := walk(jsonObjectNode, []byte(args), reflect.Value{}); err != nil {
		if err.(*ValidationError).rule == ruleKind {
			return "/arguments", "arguments must be the text of a JSON object"
		}
		return "/arguments", err.Error()
	}
	return "", ""
}
