package extension

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

func TestErrorsIsMatchesByReasonD7(t *testing.T) {
	local := errorf(ReasonProviderInterrupted, "extension sidecar %s crashed", "acme")
	wrapped := fmt.Errorf("intercept: %w", local)
	if !errors.Is(wrapped, ReasonProviderInterrupted) {
		t.Error("errors.Is(wrapped, ReasonProviderInterrupted) = false")
	}
	if errors.Is(wrapped, ReasonProviderFailed) {
		t.Error("errors.Is matched a different reason")
	}
	if !errors.Is(wrapped, NewError(ReasonProviderInterrupted, "another message")) {
		t.Error("errors.Is(*Error with the same reason, other message) = false: matching must ignore the message")
	}
	busy := &Error{Code: codeServerBusy, Message: "server busy"}
	if !errors.Is(busy, &Error{Code: codeServerBusy}) || errors.Is(busy, ReasonInternal) {
		t.Error("reason-less errors match by code only")
	}
}

func TestErrorsIsMatchesDecodedPeerErrorsD7(t *testing.T) {
	frame := `{"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"gone","data":{"reason":"content_ref_expired","retryable":true}}}`
	m, fe := decodeMessage([]byte(frame))
	if fe != nil {
		t.Fatal(fe)
	}
	if !errors.Is(m.err, ReasonContentRefExpired) || !m.err.Reason.Retryable() {
		t.Fatalf("decoded %v, want content_ref_expired, retryable", m.err)
	}
}

func TestPeerErrorDataIsTrustedOnlyWhenFrozenD7(t *testing.T) {
	cases := []struct {
		name, data string
		want       Reason
	}{
		{"frozen", `{"reason":"internal","retryable":true}`, ReasonInternal},
		{"with action", `{"reason":"internal","retryable":true,"action":"retry later"}`, ReasonInternal},
		{"extra members ignored", `{"reason":"internal","retryable":true,"extra":1}`, ReasonInternal},
		{"retryable disagrees with the table", `{"reason":"internal","retryable":false}`, ""},
		{"unknown reason", `{"reason":"teapot","retryable":false}`, ""},
		{"case variant member", `{"REASON":"internal","retryable":true}`, ""},
		{"non-string action", `{"reason":"internal","retryable":true,"action":1}`, ""},
		{"missing retryable", `{"reason":"internal"}`, ""},
		{"duplicate reason", `{"reason":"internal","reason":"stream_gap","retryable":true}`, ""},
		{"not an object", `"internal"`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, ok := decodeWireError([]byte(`{"code":-32603,"message":"m","data":` + c.data + `}`))
			if !ok {
				t.Fatal("the error object itself was rejected")
			}
			if e.Reason != c.want {
				t.Fatalf("reason %q, want %q", e.Reason, c.want)
			}
			if c.want == "" && string(e.Data) != c.data {
				t.Fatalf("raw data %s, want it kept as %s", e.Data, c.data)
			}
		})
	}
}

func TestErrorFrameCarriesExactlyReasonAndRetryableD7(t *testing.T) {
	id := msgID(3)
	frame := encodeError(&id, NewError(ReasonStreamGap, "missing chunk 2"))
	var got struct {
		ID    msgID `json:"id"`
		Error struct {
			Code    int            `json:"code"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(frame, &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != 3 || got.Error.Code != codeDomain || len(got.Error.Data) != 2 ||
		got.Error.Data["reason"] != "stream_gap" || got.Error.Data["retryable"] != true {
		t.Fatalf("frame %s", frame)
	}
	if frame[len(frame)-1] != '\n' {
		t.Error("a frame ends with a newline")
	}
	null := encodeError(nil, NewError(ReasonProtocolError, ""))
	var n map[string]any
	if err := json.Unmarshal(null, &n); err != nil || n["id"] != nil {
		t.Fatalf("frame %s: want id null", null)
	}
}

func TestHandlerErrorsBecomeInternalOnTheWire(t *testing.T) {
	if e := asWireError(errors.New("secret internals")); e.Reason != ReasonInternal || e.Message != ReasonInternal.Message() {
		t.Fatalf("asWireError(plain) = %v, want the frozen internal error", e)
	}
	if e := asWireError(fmt.Errorf("ctx: %w", ReasonInterceptTimeout)); e.Reason != ReasonInterceptTimeout {
		t.Fatalf("asWireError(wrapped Reason) = %v", e)
	}
	orig := NewError(ReasonInvalidParams, "bad seq")
	if e := asWireError(fmt.Errorf("x: %w", orig)); e != orig {
		t.Fatalf("asWireError(wrapped *Error) = %v, want the same *Error", e)
	}
}

func TestEncodersDisableHTMLEscaping(t *testing.T) {
	b, err := encodeRequest(nil, MethodEvent, map[string]string{"html": "<b>&</b>"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"jsonrpc":"2.0","method":"extension/event","params":{"html":"<b>&</b>"}}` + "\n"; string(b) != want {
		t.Fatalf("got %s want %s", b, want)
	}
}
