package sdk_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/reasonix-ext/extension"
	"github.com/reasonix-ext/extension/sdk"
)

func TestServeRefusesActionsItCannotAnswer(t *testing.T) {
	opts := minimalOptions
	opts.UIActions = []extension.UIActionDecl{{ActionID: "go"}}
	opts.Stdin, opts.Stdout = io.NopCloser(strings.NewReader("")), nopCloser{io.Discard}
	if err := sdk.Serve(context.Background(), opts); !errors.Is(err, sdk.ErrActionMissing) {
		t.Fatalf("Serve = %v, want ErrActionMissing", err)
	}
}

func TestActionAndSubmitCallbacks(t *testing.T) {
	none := started(t, minimalOptions)
	wantError(t, none.call(request(2, extension.MethodUIAction, `{"actionId":"go","sessionId":"s-1","generation":1}`)), "2", -32601, extension.ReasonUnknownMethod)
	wantError(t, none.call(request(3, extension.MethodUISubmit, `{"surfaceId":"f","sessionId":"s-1","generation":1,"values":{}}`)), "3", -32601, extension.ReasonUnknownMethod)

	opts := minimalOptions
	opts.Action = func(ctx context.Context, a *extension.UIActionParams) (extension.UIActionResult, error) {
		if a.ActionID == "fail" {
			return extension.UIActionResult{}, errors.New("no can do")
		}
		return extension.UIActionResult{Accepted: true, Message: a.Args["x"]}, nil
	}
	opts.Submit = func(ctx context.Context, s *extension.UISubmitParams) error {
		if s.SurfaceID == "bad" {
			return errors.New("rejected")
		}
		return nil
	}
	p := started(t, opts)
	wantResult(t, p.call(request(2, extension.MethodUIAction, `{"actionId":"go","sessionId":"s-1","generation":1,"args":{"x":"y"}}`)), "2", `{"accepted":true,"message":"y"}`)
	wantResult(t, p.call(request(3, extension.MethodUIAction, `{"actionId":"fail","sessionId":"s-1","generation":1}`)), "3", `{"accepted":false,"message":"no can do"}`)
	wantError(t, p.call(request(4, extension.MethodUIAction, `{"actionId":"","sessionId":"s-1","generation":1}`)), "4", -32602, extension.ReasonInvalidParams)
	wantResult(t, p.call(request(5, extension.MethodUISubmit, `{"surfaceId":"f","sessionId":"s-1","generation":1,"values":{"a":1}}`)), "5", `{"accepted":true}`)
	wantResult(t, p.call(request(6, extension.MethodUISubmit, `{"surfaceId":"bad","sessionId":"s-1","generation":1,"values":{}}`)), "6", `{"accepted":false}`)
	wantError(t, p.call(request(7, extension.MethodUISubmit, `{"surfaceId":"f","sessionId":"s-1","generation":1,"values":null}`)), "7", -32602, extension.ReasonInvalidParams)
}

func TestHostUIChecksBeforeSendingAndMapsAnswers(t *testing.T) {
	results := make(chan error, 8)
	opts := minimalOptions
	opts.Action = func(ctx context.Context, a *extension.UIActionParams) (extension.UIActionResult, error) {
		ui := sdk.UI(ctx)
		switch a.ActionID {
		case "refused":
			results <- ui.Publish(ctx, "s", extension.UIStatusPayload{Label: "<script>x</script>"})
		case "status":
			results <- ui.Publish(ctx, "s", extension.UIStatusPayload{Label: "ok"})
		case "confirm":
			_, err := ui.Confirm(ctx, "q", "Sure?")
			results <- err
		case "select":
			choice, err := ui.Select(ctx, "q", "Which?", []string{"a", "b"})
			if err == nil && choice != "b" {
				err = errors.New("chose " + choice)
			}
			results <- err
		}
		return extension.UIActionResult{Accepted: true}, nil
	}
	p := started(t, opts)
	action := func(id int, name string) {
		p.send(request(id, extension.MethodUIAction, `{"actionId":"`+name+`","sessionId":"s-1","generation":1}`))
	}

	action(2, "refused") // checked locally: nothing but the answer is sent
	wantResult(t, p.recv(), "2", `{"accepted":true}`)
	if err := <-results; !errors.Is(err, extension.ReasonInvalidParams) || !strings.Contains(err.Error(), "/label") {
		t.Fatalf("a refused payload: %v", err)
	}

	action(3, "status") // sent with the handshake's session; a stale answer is ErrStale
	f := p.recv()
	if f.Method != extension.MethodUIPublish || !strings.Contains(string(f.Params), `"sessionId":"s-1","generation":1,"kind":"status"`) {
		t.Fatalf("got %s, want the publish", f.raw)
	}
	p.send(`{"jsonrpc":"2.0","id":` + string(f.ID) + `,"result":{"accepted":false}}`)
	wantResult(t, p.recv(), "3", `{"accepted":true}`)
	if err := <-results; !errors.Is(err, sdk.ErrStale) {
		t.Fatalf("a publish not accepted: %v, want ErrStale", err)
	}

	action(4, "confirm") // dismissal is its own error
	f = p.recv()
	if f.Method != extension.MethodUIRequest || !strings.Contains(string(f.Params), `"kind":"confirm"`) {
		t.Fatalf("got %s, want the confirm request", f.raw)
	}
	p.send(`{"jsonrpc":"2.0","id":` + string(f.ID) + `,"result":{"cancelled":true}}`)
	wantResult(t, p.recv(), "4", `{"accepted":true}`)
	if err := <-results; !errors.Is(err, sdk.ErrDismissed) {
		t.Fatalf("a dismissed prompt: %v, want ErrDismissed", err)
	}

	action(5, "select")
	f = p.recv()
	p.send(`{"jsonrpc":"2.0","id":` + string(f.ID) + `,"result":{"cancelled":false,"values":{"value":"b"}}}`)
	wantResult(t, p.recv(), "5", `{"accepted":true}`)
	if err := <-results; err != nil {
		t.Fatalf("select: %v", err)
	}
	if err := sdk.UI(context.Background()).Publish(context.Background(), "s", extension.UIStatusPayload{Label: "x"}); err == nil || !strings.Contains(err.Error(), "callback") {
		t.Fatalf("UI outside a callback: %v", err)
	}
}
