package extension_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/reasonix-ext/extension"
)

func TestToolSlotOwnerHasTheFinalSayForItsToolD28(t *testing.T) {
	member := verdictPlugin("member", "continue", false, map[string]any{"intercepts": []string{"tool.before", "tool.after"}},
		map[string]string{"FIXTURE_SUBS": "tool.before,tool.after"})
	// The owner subscribes to neither tool point: the slot alone brings it
	// the operations on its tool, and only those.
	owner := verdictPlugin("rm-owner", "block", false, map[string]any{"intercepts": []string{"session.start"}, "replaces": []string{"tool:rm"}},
		map[string]string{"FIXTURE_SUBS": "session.start", "FIXTURE_OWNS": "tool:rm"})
	rt := startRuntime(t, nil, member, owner)
	for _, p := range []extension.Point{extension.ToolBefore, extension.ToolAfter} {
		_, err := rt.Intercept(bg, p, extension.ToolPayload{Name: "rm", Arguments: `{"path":"/"}`})
		var pe *extension.PluginError
		if !errors.As(err, &pe) || pe.Plugin != "rm-owner" || !errors.Is(err, extension.ErrSlotOwnerBlocked) {
			t.Fatalf("%s of rm = %v, want the owner's block to fail it (D17)", p, err)
		}
		out, err := rt.Intercept(bg, p, extension.ToolPayload{Name: "ls"})
		if err != nil || out.Blocked {
			t.Fatalf("%s of ls = %+v, %v; the owner of tool:rm has no say over ls", p, out, err)
		}
	}
}

func TestToolSlotOwnerInTheChainSpeaksLastForItsToolD28(t *testing.T) {
	// Subscribed to tool.before, the owner is an ordinary chain member for
	// other tools (its block is an outcome) and the final say for its own
	// (its block fails the operation).
	owner := verdictPlugin("rm-owner", "block", false, map[string]any{"intercepts": []string{"tool.before"}, "replaces": []string{"tool:rm"}},
		map[string]string{"FIXTURE_SUBS": "tool.before", "FIXTURE_OWNS": "tool:rm"})
	rt := startRuntime(t, nil, owner)
	out, err := rt.Intercept(bg, extension.ToolBefore, extension.ToolPayload{Name: "ls"})
	if err != nil || !out.Blocked || out.BlockedBy != "rm-owner" {
		t.Fatalf("ls: %+v, %v; want a chain block", out, err)
	}
	if _, err := rt.Intercept(bg, extension.ToolBefore, extension.ToolPayload{Name: "rm"}); !errors.Is(err, extension.ErrSlotOwnerBlocked) {
		t.Fatalf("rm: %v, want the slot owner's block", err)
	}
}

func TestProviderSlotOwnerHasTheFinalSayForItsRefD28(t *testing.T) {
	ref := "plugin/fx/fx/m"
	owner := verdictPlugin("owner", "block", false, map[string]any{"intercepts": []string{"session.start"}, "replaces": []string{"provider:" + ref}},
		map[string]string{"FIXTURE_SUBS": "session.start", "FIXTURE_OWNS": "provider:" + ref})
	rt := startRuntime(t, nil, owner, streamPlugin("fx", nil))
	req := extension.ProviderRequestPayload{Request: extension.ProviderRequest{Messages: []extension.ProviderMessage{}, Tools: []extension.ProviderToolSchema{}}}
	for _, p := range []extension.Point{extension.ProviderRequestPoint, extension.ProviderResponsePoint} {
		payload := any(req)
		if p == extension.ProviderResponsePoint {
			payload = extension.ProviderResponsePayload{Text: "hi"}
		}
		if _, err := rt.InterceptProvider(bg, ref, p, payload); !errors.Is(err, extension.ErrSlotOwnerBlocked) {
			t.Fatalf("%s for %s = %v, want the owner's final say", p, ref, err)
		}
		if out, err := rt.InterceptProvider(bg, "plugin/fx/fx/other", p, payload); err != nil || out.Blocked {
			t.Fatalf("%s for another ref = %+v, %v", p, out, err)
		}
		if out, err := rt.Intercept(bg, p, payload); err != nil || out.Blocked {
			t.Fatalf("%s without a ref = %+v, %v", p, out, err)
		}
	}
	if _, err := rt.InterceptProvider(bg, ref, extension.ToolBefore, extension.ToolPayload{Name: "x"}); err == nil {
		t.Fatal("InterceptProvider took tool.before")
	}
}

func TestBaseCatalogEntryNeedsTheProviderSlotD28(t *testing.T) {
	ref := "plugin/fx/fx/m"
	base := []extension.ProviderDescriptor{{Ref: "openai/gpt", Model: "gpt"}, {Ref: ref, Model: "host-model", DisplayName: "the host's"}}
	t.Run("with the slot its descriptor replaces the entry", func(t *testing.T) {
		p := streamPlugin("fx", nil)
		p.env["FIXTURE_DECL"] = `{"replaces":["provider:` + ref + `"],"providers":[{"ref":"` + ref + `","model":"m"}]}`
		p.runtime["replaces"] = []string{"provider:" + ref}
		rt := startRuntime(t, func(h *extension.Host) { h.BaseCatalog = base }, p)
		cat, err := rt.Catalog(bg)
		if err != nil || len(cat) != 2 || cat[0].Ref != "openai/gpt" || cat[1].Ref != ref || cat[1].Model != "m" {
			t.Fatalf("Catalog = %+v, %v; want the base order with fx's descriptor for %s", cat, err, ref)
		}
	})
	t.Run("without the slot the generation fails", func(t *testing.T) {
		h := testHost(installPlugins(t, streamPlugin("fx", nil)))
		h.BaseCatalog = base
		rt, err := h.Start(bg)
		var pe *extension.PluginError
		if err == nil {
			rt.Close()
		}
		if !errors.As(err, &pe) || pe.Plugin != "fx" || !errors.Is(err, extension.ReasonCapabilityNotDeclared) || !strings.Contains(err.Error(), `"provider:`+ref+`"`) {
			t.Fatalf("Start = %v, want fx told to add provider:%s to runtime.replaces", err, ref)
		}
	})
}

func TestCatalogIsFetchedOnceFilteredAndRedactedD25(t *testing.T) {
	secret := "sk-proj-FAKEfake0123456789abcdefFAKE"
	p := rawStreamPlugin()
	p.env["FIXTURE_CATALOG"] = `"result":{"providers":[` +
		`{"ref":"plugin/raw/fx/m","displayName":"Raw \u001b]0;owned\u0007 ` + secret + `","model":"m","efforts":["low"]},` +
		`{"ref":"plugin/other/fx/m"},{"ref":"plugin/raw/fx"},{"ref":"plugin/raw/a/b/c"}]}`
	log := newFrameLog()
	rt := startRuntime(t, func(h *extension.Host) { h.Conn.Tap = log.tap }, p)
	var wg sync.WaitGroup
	cats := make([][]extension.ProviderDescriptor, 8)
	for i := range cats {
		wg.Go(func() { cats[i], _ = rt.Catalog(bg) })
	}
	wg.Wait()
	if n := len(log.matching(">", extension.MethodProviderCatalog)); n != 1 {
		t.Fatalf("%d catalog requests for 8 concurrent first fetches, want 1", n)
	}
	for _, cat := range cats {
		if len(cat) != 1 || cat[0].Ref != "plugin/raw/fx/m" {
			t.Fatalf("catalog %+v, want only the descriptor in the namespace and of the catalog's shape", cat)
		}
		if d := cat[0].DisplayName; strings.Contains(d, secret) || strings.Contains(d, "\x1b") || !strings.Contains(d, `\x1b`) {
			t.Fatalf("display name %q, want it redacted (D25) and escaped (D27)", d)
		}
	}
}

func TestFailedCatalogIsSkippedWarnedAndAskedAgain(t *testing.T) {
	p := rawStreamPlugin()
	p.env["FIXTURE_CATALOG"] = `"error":{"code":-32000,"message":"down","data":{"reason":"provider_failed","retryable":true}}`
	log := newFrameLog()
	rt := startRuntime(t, func(h *extension.Host) { h.Conn.Tap = log.tap }, p)
	for range 2 {
		if cat, err := rt.Catalog(bg); err != nil || len(cat) != 0 {
			t.Fatalf("Catalog = %+v, %v; want nothing, no error", cat, err)
		}
	}
	if n := len(log.matching(">", extension.MethodProviderCatalog)); n != 2 {
		t.Fatalf("%d catalog requests, want a new one after each failure", n)
	}
	if w := rt.Warnings(); len(w) != 1 || !strings.Contains(w[0].Err.Error(), "down") {
		t.Fatalf("warnings %v, want one about the failed catalog", w)
	}
}

func TestNoHostSecretReachesASidecarD25(t *testing.T) {
	secrets := []string{"sk-proj-HOSTsecret0123456789abcdefHOST", "hunter2-db-password-HOST"}
	log := newFrameLog()
	rt, _ := conformanceRuntimeWith(t, nil, func(h *extension.Host) {
		h.Conn.Tap = log.tap
		h.Env = append(h.Env, "OPENAI_API_KEY="+secrets[0], "REASONIX_DB_PASSWORD="+secrets[1])
		h.BaseCatalog = []extension.ProviderDescriptor{{Ref: "openai/gpt", Model: "gpt"}}
	})
	if _, err := rt.Catalog(bg); err != nil {
		t.Fatal(err)
	}
	st, err := rt.OpenStream(bg, "plugin/conformance-ext/fake/echo", "low", extension.ProviderRequest{Messages: []extension.ProviderMessage{{Role: extension.RoleUser, Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := drain(st); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Intercept(bg, extension.InputReceive, extension.InputPayload{Text: "/fs hi"}); err != nil {
		t.Fatal(err)
	}
	rt.Observe(extension.SessionStart, extension.SessionPayload{Phase: "start"})
	rt.ResourcesChanged([]string{"a"})
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	out := log.matching(">")
	if len(out) < 8 {
		t.Fatalf("only %d frames went out", len(out))
	}
	for _, f := range out {
		for _, s := range secrets {
			if strings.Contains(f, s) {
				t.Fatalf("a frame to the sidecar carries a host secret: %s", f)
			}
		}
	}
}
