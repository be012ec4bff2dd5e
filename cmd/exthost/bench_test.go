package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/reasonix-ext/extension"
)

// TestBenchJSONNamesEveryFigure runs a short bench for real and checks
// the shape of its JSON: every figure present, each measured one with its
// baseline. No duration or ratio is checked: they depend on the machine.
func TestBenchJSONNamesEveryFigure(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"bench", "-json", "-n", "20"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errb.String(), out.String())
	}
	var doc struct {
		Results []struct {
			Name        string   `json:"name"`
			P50         int64    `json:"p50_ns"`
			P99         int64    `json:"p99_ns"`
			PerSec      float64  `json:"per_sec"`
			AllocsPerOp *float64 `json:"allocs_per_op"`
			Baseline    string   `json:"baseline"`
			BaselineP50 int64    `json:"baseline_p50_ns"`
			Ratio       float64  `json:"ratio"`
			RatioMin    float64  `json:"ratio_min"`
			RatioMax    float64  `json:"ratio_max"`
			Lost        *float64 `json:"lost"`
		} `json:"results"`
	}
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields() // exactly the documented fields
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("the output is not the documented JSON: %v\n%s", err, out.String())
	}
	baselines := map[string]string{
		"intercept_rtt":     "pingpong_limit",
		"intercept_chain4":  "pingpong4_limit",
		"startup_1":         "spawn_1",
		"startup_4":         "spawn_4",
		"stream_throughput": "stream_pipe",
		"content_8mib":      "content_pipe",
	}
	seen := map[string]bool{}
	for _, r := range doc.Results {
		seen[r.Name] = true
		if strings.HasPrefix(r.Name, "stream_") && r.PerSec <= 0 {
			t.Errorf("%s: per_sec %v, want the chunks per second", r.Name, r.PerSec)
		}
		switch base, measured := baselines[r.Name]; {
		case r.Name == "observe_throughput":
			if r.PerSec <= 0 || r.Lost == nil || *r.Lost < 0 || *r.Lost > 1 || r.Baseline != "" || r.Ratio != 0 {
				t.Errorf("%s: per_sec %v, lost %v, baseline %q, ratio %v; want per_sec > 0, 0 <= lost <= 1 and no baseline", r.Name, r.PerSec, r.Lost, r.Baseline, r.Ratio)
			}
		case measured:
			if r.P50 <= 0 || r.P99 < r.P50 || r.Baseline != base || r.BaselineP50 <= 0 || r.Ratio <= 0 {
				t.Errorf("%s: p50 %d, p99 %d, baseline %q (p50 %d), ratio %v; want positive figures against %s", r.Name, r.P50, r.P99, r.Baseline, r.BaselineP50, r.Ratio, base)
			}
			if !(0 < r.RatioMin && r.RatioMin <= r.Ratio && r.Ratio <= r.RatioMax) {
				t.Errorf("%s: ratio %v, its spread %v-%v; want the median of the blocks' ratios within their least and greatest", r.Name, r.Ratio, r.RatioMin, r.RatioMax)
			}
		default: // a baseline
			if r.P50 <= 0 || r.P99 < r.P50 || r.Baseline != "" || r.Ratio != 0 {
				t.Errorf("%s: p50 %d, p99 %d, baseline %q, ratio %v; want a positive p50 and no baseline of its own", r.Name, r.P50, r.P99, r.Baseline, r.Ratio)
			}
		}
	}
	for _, name := range []string{"pingpong_limit", "pingpong4_limit", "intercept_rtt", "intercept_chain4", "observe_throughput", "startup_1", "startup_4", "spawn_1", "spawn_4", "stream_throughput", "stream_pipe", "content_8mib", "content_pipe"} {
		if !seen[name] {
			t.Errorf("no figure %s in\n%s", name, out.String())
		}
	}
}

func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "a", "b"},
		{"bench", "-no-such-flag"},
		{"bench", "-n", "0"},
	} {
		if code, _, stderr := runExthost("", args...); code != 2 || stderr == "" {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a message", args, code, stderr)
		}
	}
}

// TestBenchCopiesStartBesideTheReferencePlugin installs the reference
// plugin and the bench's four trimmed copies of it in one home: all five
// start, the full install still declares its slot, provider and UI
// action, and the copies, whose manifests grant none and ask for the
// subscriptions alone, declare none.
func TestBenchCopiesStartBesideTheReferencePlugin(t *testing.T) {
	work := t.TempDir()
	dir, err := referencePlugin(work)
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(work, "home")
	if _, err := extension.Install(home, dir, extension.InstallOptions{Link: true}); err != nil {
		t.Fatal(err)
	}
	ids, err := installCopies(home, dir, filepath.Join(work, "copies"), copies)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := (&extension.Host{Home: home, Session: extension.SessionContext{SessionID: "s", WorkspaceRoot: work}}).Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	full, ok := rt.Declaration("fullsidecar")
	if !ok {
		t.Fatalf("fullsidecar did not start: %v", rt.Warnings())
	}
	if !slices.Equal(full.Replaces, []string{"system_prompt"}) || len(full.Providers) != 1 || full.Providers[0].Ref != "plugin/fullsidecar/fake/echo" ||
		len(full.UIActions) != 1 || full.UIActions[0].ActionID != "demo" {
		t.Errorf("the full install declares %+v; want the system_prompt slot, the provider plugin/fullsidecar/fake/echo and the UI action demo", full)
	}
	for _, id := range ids {
		decl, ok := rt.Declaration(id)
		if !ok {
			t.Fatalf("%s did not start: %v", id, rt.Warnings())
		}
		if len(decl.Replaces)+len(decl.Providers)+len(decl.UIActions) > 0 || !slices.Equal(decl.Subscriptions, full.Subscriptions) {
			t.Errorf("%s declares %+v; want the subscriptions of the full install and nothing more", id, decl)
		}
	}
	if got, want := rt.Chain(extension.ToolBefore), append(slices.Clone(ids), "fullsidecar"); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Errorf("tool.before chain %q, want %q", got, want)
	}
}

// TestBenchNamesTheFigureWhenCopiesCannotStart installs copies of a
// sidecar that declares its slot whatever its manifest grants: the start
// fails, and the error names the figure and says why.
func TestBenchNamesTheFigureWhenCopiesCannotStart(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stubborn sidecar is a shell script")
	}
	dir := t.TempDir()
	// It answers initialize (id 1, the host's first request) claiming the
	// system_prompt slot, then reads until EOF.
	script := "#!/bin/sh\nread -r line\n" +
		`printf '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"1","name":"%s","version":"1.0.0","replaces":["system_prompt"],"stateSchemaVersion":0}}\n' "$REASONIX_PLUGIN_NAME"` +
		"\ncat >/dev/null\n"
	manifest := `{"apiVersion":"reasonix.io/plugin/v1","name":"stubborn","version":"1.0.0",` +
		`"runtime":{"command":"${REASONIX_PLUGIN_ROOT}/sidecar.sh","intercepts":["tool.before"],"replaces":["system_prompt"]}}`
	writeScriptPlugin(t, dir, script, manifest)
	work := t.TempDir()
	home := filepath.Join(work, "home")
	ids, err := installCopies(home, dir, filepath.Join(work, "copies"), copies)
	if err != nil {
		t.Fatal(err)
	}
	b := &bench{work: work}
	rt, err := sidecars{host: b.host(home), ids: ids, hint: copiesHint}.start(context.Background(), "intercept_chain4")
	if err == nil {
		rt.Close()
		t.Fatal("the copies started, want an error")
	}
	for _, want := range []string{"intercept_chain4: bench-1 did not start", `replaces "system_prompt"`, "sdk/examples/fullsidecar"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
