package sdk

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"math"
	"time"

	"github.com/reasonix-ext/extension"
)

// InterceptFunc rules on one extension/intercept call. Its context ends at
// the host's timeoutMillis; returning after that is answered
// intercept_timeout. Any other error is answered with the internal error
// and logged, never sent.
type InterceptFunc func(ctx context.Context, c *Call) (Verdict, error)

// ObserveFunc receives one extension/event observation. Events are
// delivered one at a time, in the order the host sent them.
type ObserveFunc func(ctx context.Context, e *Event)

// Call is one extension/intercept call.
type Call struct {
	// Point is the hook point.
	Point extension.Point
	// Seq is the host's per-connection intercept sequence number.
	Seq int64
	// Payload is the point's payload document, already read from the
	// host and verified when it was externalized (D22).
	Payload json.RawMessage
	// Timeout is the host's budget for this call; 0 means none.
	Timeout time.Duration
}

// Decode strictly decodes the payload into v (D3): exact member names, no
// unknown or repeated members. Decode into the point's payload document,
// such as *extension.ToolPayload for tool.before (PROTOCOL.md §4.1).
func (c *Call) Decode(v any) error { return extension.Unmarshal(c.Payload, v) }

// Event is one extension/event observation.
type Event struct {
	// Point is the hook point observed.
	Point extension.Point
	// Payload is the point's payload document, read from the host when
	// it was externalized, as for a Call.
	Payload json.RawMessage
}

// Decode strictly decodes the payload into v, as [Call.Decode] does.
func (e *Event) Decode(v any) error { return extension.Unmarshal(e.Payload, v) }

// Verdict is an interceptor's ruling; build it with [Continue], [Block],
// [Replace], [Allow] or [Deny].
type Verdict struct {
	result extension.InterceptResult
	err    error // a replacement that could not be encoded
}

// verdict is the ruling d, with reason.
func verdict(d extension.Decision, reason string) Verdict {
	return Verdict{result: extension.InterceptResult{Decision: d, Reason: reason}}
}

// Continue passes the payload on unchanged.
func Continue() Verdict { return verdict(extension.DecisionContinue, "") }

// Block stops the operation with a reason the user sees (redacted by the
// host).
func Block(reason string) Verdict { return verdict(extension.DecisionBlock, reason) }

// Replace substitutes the payload with v: a json.RawMessage is sent
// verbatim, anything else is marshalled. The host re-validates it against
// the point's payload document (D16). Replacements always travel inline.
func Replace(v any) Verdict {
	raw, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return Verdict{err: err}
		}
	}
	if !json.Valid(raw) {
		return Verdict{err: errors.New("sdk: Replace needs valid JSON")}
	}
	return Verdict{result: extension.InterceptResult{Decision: extension.DecisionReplace, Replacement: raw}}
}

// Allow permits the operation; legal only at permission.decision, where it
// overrides a host deny (D16).
func Allow() Verdict { return verdict(extension.DecisionAllow, "") }

// Deny refuses the operation; legal only at permission.decision.
func Deny(reason string) Verdict { return verdict(extension.DecisionDeny, reason) }

// intercept answers extension/intercept (PROTOCOL.md §4.2).
func (s *server) intercept(ctx context.Context, p *extension.InterceptParams) (any, error) {
	fn := callback(s.opts.Intercept, p.Event)
	if fn == nil {
		return Continue().result, checkNull(p.Payload, p.Externalized)
	}
	c := &Call{Point: p.Event, Seq: p.Seq, Timeout: millis(p.TimeoutMillis)}
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	// D22: an externalized payload is read from the host, within the
	// call's deadline, before the callback sees it.
	var err error
	if c.Payload, err = s.rehydrate(ctx, p.Payload, p.Externalized); err != nil {
		if c.Timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, extension.NewError(extension.ReasonInterceptTimeout, "")
		}
		return nil, err
	}
	v, err := fn(ctx, c)
	if c.Timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// D18: past timeoutMillis the host has given up: whatever the
		// callback returned, the answer is intercept_timeout.
		return nil, extension.NewError(extension.ReasonInterceptTimeout, "")
	}
	if err = cmp.Or(err, v.err); err != nil {
		s.logf("interceptor for %s: %v", p.Event, err)
		return nil, extension.NewError(extension.ReasonInternal, "")
	}
	if v.result.Decision == "" {
		return Continue().result, nil // the zero Verdict continues
	}
	return v.result, nil
}

// event delivers extension/event, or returns why the event is dropped.
func (s *server) event(ctx context.Context, raw json.RawMessage) error {
	var p extension.EventParams
	err := extension.Decode(extension.MethodEvent, raw, &p)
	fn := callback(s.opts.Observe, p.Event)
	if err != nil || fn == nil {
		return err
	}
	if p.Payload, err = s.rehydrate(ctx, p.Payload, p.Externalized); err == nil {
		fn(ctx, &Event{Point: p.Event, Payload: p.Payload})
	}
	return err
}

// callback returns the callback m has for point p, else its "*" fallback,
// else nil.
func callback[F InterceptFunc | ObserveFunc](m map[extension.Point]F, p extension.Point) F {
	if fn := m[p]; fn != nil {
		return fn
	}
	return m["*"]
}

// millis is a timeoutMillis as a Duration; one too large for a Duration
// (about 292 years) is no deadline, not a wrapped one.
func millis(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

// checkNull refuses a null payload without its descriptor (D22), which
// no callback could see.
func checkNull(payload json.RawMessage, ext []extension.ExternalizedField) error {
	if string(payload) == "null" && len(ext) == 0 {
		return extension.NewError(extension.ReasonInvalidParams, "payload is null without an externalized /payload descriptor")
	}
	return nil
}

// rehydrate returns the payload a callback sees: the inline one, or the
// externalized one read from the host and verified (PROTOCOL.md §6.2).
// Its errors carry the protocol reason.
func (s *server) rehydrate(ctx context.Context, payload json.RawMessage, ext []extension.ExternalizedField) (json.RawMessage, error) {
	if err := checkNull(payload, ext); err != nil || len(ext) == 0 {
		return payload, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmp.Or(max(s.opts.ContentTimeout, 0), 30*time.Second))
		defer cancel()
	}
	return extension.Rehydrate(ctx, payload, ext, "/payload", s.readPage)
}

// readPage asks the host for one page of a content object; Rehydrate
// decodes it from the answer's result and calls it concurrently.
func (s *server) readPage(ctx context.Context, p extension.ContentReadParams) (json.RawMessage, error) {
	return s.connection().Call(ctx, extension.MethodContentRead, p)
}

// serverKey is the context key of the server whose callback a context
// belongs to.
type serverKey struct{}

// ReadContent reads the whole content object d names from the host and
// verifies it (PROTOCOL.md §6.3), for a callback that meets a descriptor
// of its own. ctx must be the context of a callback (or derived from
// it). Payloads are read for the callbacks already: Call.Payload and
// Event.Payload are never null placeholders.
func ReadContent(ctx context.Context, d extension.ExternalizedField) ([]byte, error) {
	s, ok := ctx.Value(serverKey{}).(*server)
	if !ok {
		return nil, errors.New("sdk: ReadContent needs the context of a callback")
	}
	return extension.Rehydrate(ctx, nil, []extension.ExternalizedField{d}, d.JSONPointer, s.readPage)
}
