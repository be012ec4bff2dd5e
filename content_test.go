package extension_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/reasonix-ext/extension"
)

// hangGuard bounds a wait that only a hang would reach.
const hangGuard = 15 * time.Second

// inputOf is an input.receive payload whose compact encoding is n bytes,
// its text starting with prefix.
func inputOf(n int, prefix string) []byte {
	return []byte(`{"text":"` + prefix + strings.Repeat("a", n-len(`{"text":""}`)-len(prefix)) + `"}`)
}

func TestPayloadsAbove64KiBTravelByReferenceD22(t *testing.T) {
	log := newFrameLog()
	rt, _ := conformanceRuntimeWith(t, nil, func(h *extension.Host) { h.Conn.Tap = log.tap })
	at := inputOf(extension.ExternalizeFieldBytes, "at ")
	if _, err := rt.Intercept(bg, extension.InputReceive, at); err != nil {
		t.Fatal(err)
	}
	if f := log.await(t, ">", extension.MethodIntercept, `"seq":1,`); !strings.Contains(f, `"payload":`+string(at)+`,`) || strings.Contains(f, "externalized") {
		t.Fatalf("a 65536-byte payload went out as %.200s..., want inline and byte-identical", f)
	}
	over := inputOf(extension.ExternalizeFieldBytes+1, "over ")
	if _, err := rt.Intercept(bg, extension.InputReceive, over); err != nil {
		t.Fatal(err)
	}
	f := log.await(t, ">", extension.MethodIntercept, `"seq":2,`)
	if !strings.Contains(f, `"payload":null`) || !strings.Contains(f, `"externalized":[{"jsonPointer":"/payload","contentRef":"content_`) || !strings.Contains(f, `"totalBytes":65537`) {
		t.Fatalf("a 65537-byte payload went out as %s, want null and its descriptor at /payload", f)
	}
	// The SDK read it (its interceptor decodes the text) in one page.
	if n := len(log.matching("<", extension.MethodContentRead)); n != 1 {
		t.Fatalf("%d content reads, want 1", n)
	}
}

func TestContentRefRehydrationScenario9D22(t *testing.T) {
	rt, _ := conformanceRuntime(t, nil)
	payload := inputOf(100<<10, "/fs ")
	out, err := rt.Intercept(bg, extension.InputReceive, payload)
	if err != nil {
		t.Fatal(err)
	}
	v, err := extension.DecodePayload(extension.InputReceive, out.Payload)
	want := string(payload[len(`{"text":"/fs `):len(payload)-2]) + " [rewritten by fullsidecar]"
	if err != nil || v.(*extension.InputPayload).Text != want {
		t.Fatalf("the 100 KiB /fs input came back as %.80s... (%v), want it rewritten", out.Payload, err)
	}
}

func TestContentObjectSizeLimitD22(t *testing.T) {
	log := newFrameLog()
	rt, _ := conformanceRuntimeWith(t, nil, func(h *extension.Host) { h.Conn.Tap = log.tap })
	if _, err := rt.Intercept(bg, extension.InputReceive, inputOf(extension.FrameBytes, "max ")); err != nil {
		t.Fatalf("an 8 MiB payload: %v", err)
	}
	before := len(log.matching(">"))
	_, err := rt.Intercept(bg, extension.InputReceive, inputOf(extension.FrameBytes+1, "over "))
	if !errors.Is(err, extension.ReasonFrameTooLarge) {
		t.Fatalf("8 MiB + 1: %v, want frame_too_large", err)
	}
	if after := len(log.matching(">")); after != before {
		t.Fatalf("%d frames were written for the refused payload", after-before)
	}
	// An event that large is dropped, counted and warned, not an error.
	if err := rt.Observe(extension.SessionStart, inputOf(extension.FrameBytes+1, "")); err != nil {
		t.Fatalf("Observe of 8 MiB + 1: %v, want a drop", err)
	}
	if n := rt.Sidecar("conformance-ext").Stats().DroppedEvents; n != 1 {
		t.Fatalf("%d events dropped, want 1", n)
	}
	if w := rt.Warnings(); len(w) != 1 || !strings.Contains(w[0].Err.Error(), "frame_too_large") {
		t.Fatalf("warnings %v", w)
	}
}

func TestExternalizedReplacementIsCheckedD22(t *testing.T) {
	payload := inputOf(70_000, "echo ")
	for _, c := range []struct {
		mode string
		want extension.Reason
	}{
		{"echo", ""},
		{"length", extension.ReasonProtocolError},
		{"hash", extension.ReasonProtocolError},
		{"pointer", extension.ReasonProtocolError},
		{"two", extension.ReasonProtocolError},
		{"inline", extension.ReasonProtocolError},
		{"unknown", extension.ReasonContentRefExpired},
		{"huge", extension.ReasonFrameTooLarge},
	} {
		t.Run(c.mode, func(t *testing.T) {
			rt := startRuntime(t, nil, plugin{name: "r", fixture: "raw-replace", required: true,
				runtime: map[string]any{"intercepts": []string{"input.receive"}},
				env: map[string]string{"FIXTURE_MODE": c.mode,
					"FIXTURE_RESULT": `{"protocolVersion":"1","name":"r","version":"1","stateSchemaVersion":0,"subscriptions":["input.receive"]}`}})
			out, err := rt.Intercept(bg, extension.InputReceive, payload)
			if c.want == "" {
				if err != nil || string(out.Payload) != string(payload) || len(out.Replaced) != 1 {
					t.Fatalf("echo: %v; want the ref resolved to the original bytes", err)
				}
				return
			}
			var pe *extension.PluginError
			if !errors.As(err, &pe) || !errors.Is(err, c.want) {
				t.Fatalf("%s: %v, want a PluginError matching %s", c.mode, err, c.want)
			}
		})
	}
}

func TestSidecarPagingARefKeepsServingD22(t *testing.T) {
	rt := startRuntime(t, nil, plugin{name: "pager", fixture: "pager", runtime: map[string]any{"intercepts": []string{"input.receive", "tool.before"}, "timeoutMillis": 30000}})
	done := make(chan error, 1)
	go func() {
		// The sidecar pages this 8 MiB payload, then holds the call
		// until a tool.before has been answered meanwhile.
		_, err := rt.Intercept(bg, extension.InputReceive, inputOf(extension.FrameBytes, ""))
		done <- err
	}()
	ctx, cancel := context.WithTimeout(bg, hangGuard)
	defer cancel()
	for {
		out, err := rt.Intercept(ctx, extension.ToolBefore, extension.ToolPayload{Name: "x"})
		if err != nil {
			t.Fatalf("tool.before while the sidecar pages: %v", err)
		}
		if out.Blocked { // the pager has read the whole payload
			break
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("the paged intercept: %v", err)
	}
}
