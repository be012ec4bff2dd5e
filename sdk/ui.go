package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/reasonix-ext/extension"
)

// ActionFunc answers one extension/ui/action. An error is answered
// {"accepted":false} with the error's text as the message.
type ActionFunc func(ctx context.Context, a *extension.UIActionParams) (extension.UIActionResult, error)

// SubmitFunc takes the values of one extension/ui/submit. An error is
// answered {"accepted":false}.
type SubmitFunc func(ctx context.Context, s *extension.UISubmitParams) error

// ErrActionMissing is returned by Serve, before anything is read or
// written, when Options declares UIActions but has no Action callback.
var ErrActionMissing = errors.New("sdk: Options.UIActions declares actions but Options.Action is nil; set Action to answer them, or declare none")

// ErrDismissed is the error of a prompt the user dismissed: distinct
// from an answer, even an empty one.
var ErrDismissed = errors.New("sdk: the user dismissed the prompt")

// ErrStale is the error of a publish the host did not accept: it is
// bound to another session or generation now (D24).
var ErrStale = errors.New("sdk: the host did not accept the surface: it shows another session or generation now")

// HostUI publishes surfaces and asks questions through the host's user
// interface (PROTOCOL.md §7). Get it with [UI] from a callback's context.
// Every payload is checked before it is sent, by the rules the host
// applies (D23): a refused one is never sent.
type HostUI struct{ s *server }

// UI returns the host UI of the connection whose callback ctx belongs to,
// or nil outside a callback.
func UI(ctx context.Context) *HostUI {
	s, ok := ctx.Value(serverKey{}).(*server)
	if !ok {
		return nil
	}
	return &HostUI{s}
}

// Publish shows payload as the surface surfaceID, replacing an earlier
// one of that id. payload is an extension.UIStatusPayload,
// UICardPayload, UIFormPayload or UINotificationPayload (or a pointer to
// one), which sets the surface's kind. A payload the host would refuse
// fails here with invalid_params; [ErrStale] when the host did not accept
// it.
func (u *HostUI) Publish(ctx context.Context, surfaceID string, payload any) error {
	var kind extension.SurfaceKind
	switch payload.(type) {
	case extension.UIStatusPayload, *extension.UIStatusPayload:
		kind = extension.SurfaceStatus
	case extension.UICardPayload, *extension.UICardPayload:
		kind = extension.SurfaceCard
	case extension.UIFormPayload, *extension.UIFormPayload:
		kind = extension.SurfaceForm
	case extension.UINotificationPayload, *extension.UINotificationPayload:
		kind = extension.SurfaceNotification
	default:
		return fmt.Errorf("sdk: Publish takes a UI payload document, not %T", payload)
	}
	session, raw, err := u.prepare(surfaceID, kind, payload)
	if err != nil {
		return err
	}
	res, err := call[extension.UIPublishResult](ctx, u.s, extension.MethodUIPublish, extension.UIPublishParams{SurfaceID: surfaceID, SessionID: session.SessionID, Generation: session.Generation, Kind: kind, Payload: raw})
	if err == nil && !res.Accepted {
		err = ErrStale
	}
	return err
}

// prepare checks a surface id and a payload the way the host will.
func (u *HostUI) prepare(surfaceID string, kind extension.SurfaceKind, payload any) (extension.SessionContext, json.RawMessage, error) {
	// The session and generation of the handshake.
	var session extension.SessionContext
	if u == nil {
		return session, nil, errors.New("sdk: no connection: use UI with the context of a callback")
	}
	p := u.s.session.Load()
	if p == nil {
		return session, nil, errors.New("sdk: not ready: the handshake has not happened")
	}
	session = *p
	if surfaceID == "" {
		return session, nil, extension.NewError(extension.ReasonInvalidParams, "a surface needs an id")
	}
	raw, err := json.Marshal(payload)
	var v any
	if err == nil {
		v, err = extension.DecodeSurface(kind, raw)
	}
	// A select or multiselect field without options no user could answer.
	if form, ok := v.(*extension.UIFormPayload); ok {
		for i, f := range form.Fields {
			if (f.Kind == extension.PromptSelect || f.Kind == extension.PromptMultiselect) && len(f.Options) == 0 {
				return session, nil, extension.NewError(extension.ReasonInvalidParams, fmt.Sprintf("/fields/%d is a %s field without options", i, f.Kind))
			}
		}
	}
	return session, raw, err
}

// Ask puts the form to the user as a prompt of kind and returns the
// answers by field key; [ErrDismissed] when the user dismissed it (or the
// host dropped a stale prompt, D24).
func (u *HostUI) Ask(ctx context.Context, surfaceID string, kind extension.PromptKind, form extension.UIFormPayload) (map[string]json.RawMessage, error) {
	if form.Fields == nil {
		form.Fields = []extension.UIFormField{}
	}
	session, raw, err := u.prepare(surfaceID, extension.SurfaceForm, form)
	if err != nil {
		return nil, err
	}
	res, err := call[extension.UIRequestResult](ctx, u.s, extension.MethodUIRequest, extension.UIRequestParams{SurfaceID: surfaceID, SessionID: session.SessionID, Generation: session.Generation, Kind: kind, Payload: raw})
	switch {
	case err != nil:
		return nil, err
	case res.Cancelled:
		return nil, ErrDismissed
	}
	return res.Values, nil
}

// ask asks a single question, field key "value", and decodes its answer.
func ask[T any](ctx context.Context, u *HostUI, surfaceID string, kind extension.PromptKind, message string, options []string) (T, error) {
	var v T
	values, err := u.Ask(ctx, surfaceID, kind, extension.UIFormPayload{Message: message, Fields: []extension.UIFormField{{Key: "value", Label: message, Kind: kind, Options: options, Required: true}}})
	if err != nil {
		return v, err
	}
	raw, ok := values["value"]
	if !ok {
		return v, ErrDismissed
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("sdk: the host answered %s with %s: %w", kind, raw, err)
	}
	return v, nil
}

// Confirm asks a yes-or-no question.
func (u *HostUI) Confirm(ctx context.Context, surfaceID, message string) (bool, error) {
	return ask[bool](ctx, u, surfaceID, extension.PromptConfirm, message, nil)
}

// Input asks for a line of text.
func (u *HostUI) Input(ctx context.Context, surfaceID, message string) (string, error) {
	return ask[string](ctx, u, surfaceID, extension.PromptInput, message, nil)
}

// Select asks for one of options.
func (u *HostUI) Select(ctx context.Context, surfaceID, message string, options []string) (string, error) {
	return ask[string](ctx, u, surfaceID, extension.PromptSelect, message, options)
}

// Multiselect asks for any of options.
func (u *HostUI) Multiselect(ctx context.Context, surfaceID, message string, options []string) ([]string, error) {
	return ask[[]string](ctx, u, surfaceID, extension.PromptMultiselect, message, options)
}

// call sends one request to the host and strictly decodes its result.
func call[R any](ctx context.Context, s *server, method string, params any) (R, error) {
	var res R
	raw, err := s.connection().Call(ctx, method, params)
	if err == nil {
		err = extension.Decode(method, raw, &res)
	}
	return res, err
}

// action answers extension/ui/action (PROTOCOL.md §7.4): accepted:false,
// with its text as the message, for the callback's error.
func (s *server) action(ctx context.Context, p *extension.UIActionParams) (any, error) {
	res, err := s.opts.Action(ctx, p)
	if err != nil {
		s.logf("Action %s: %v", p.ActionID, err)
		return extension.UIActionResult{Accepted: false, Message: err.Error()}, nil
	}
	return res, nil
}

// submit answers extension/ui/submit (PROTOCOL.md §7.4): accepted:false
// for the callback's error.
func (s *server) submit(ctx context.Context, p *extension.UISubmitParams) (any, error) {
	err := s.opts.Submit(ctx, p)
	if err != nil {
		s.logf("Submit %s: %v", p.SurfaceID, err)
	}
	return extension.UISubmitResult{Accepted: err == nil}, nil
}
