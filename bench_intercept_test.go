package extension_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reasonix-ext/extension"
)

// latencies records per-call durations and reports their median.
type latencies []time.Duration

func (l latencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	slices.Sort(l)
	b.ReportMetric(float64(l[len(l)/2].Nanoseconds()), "p50-ns")
}

var toolPayload = json.RawMessage(`{"name":"bash","arguments":"{\"cmd\":\"go test ./...\"}"}`)

// BenchmarkInterceptRoundTrip: one tool.before through a runtime of one
// SDK sidecar process, as a host does it: marshal, send, the sidecar's
// strict decode and answer, the host's strict decode of the result.
// Allocations are the host side's only (the sidecar is another process).
func BenchmarkInterceptRoundTrip(b *testing.B) {
	home := installPlugins(b, plugin{name: "bench", fixture: "verdict",
		env:     map[string]string{"FIXTURE_VERDICT": "continue", "FIXTURE_SUBS": "tool.before"},
		runtime: map[string]any{"intercepts": []string{"tool.before"}}})
	rt, err := testHost(home).Start(bg)
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	var lat latencies
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		out, err := rt.Intercept(bg, extension.ToolBefore, toolPayload)
		if err != nil || out.Blocked {
			b.Fatal(out, err)
		}
		lat = append(lat, time.Since(start))
	}
	lat.report(b)
}

// BenchmarkInterceptRoundTripBaseline is the same-run baseline: a bare
// JSON ping-pong with another process over a pipe pair, with no protocol
// at all.
func BenchmarkInterceptRoundTripBaseline(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fixtureEnv+"=pingpong")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	in := bufio.NewReader(stdout)
	var lat latencies
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		req, _ := json.Marshal(map[string]any{"id": i, "params": toolPayload})
		if _, err := stdin.Write(append(req, '\n')); err != nil {
			b.Fatal(err)
		}
		line, err := in.ReadBytes('\n')
		if err != nil {
			b.Fatal(err)
		}
		var reply map[string]json.RawMessage
		if err := json.Unmarshal(line, &reply); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	lat.report(b)
}

// TestPingPongBaselinePeerAnswers keeps the benchmark's baseline honest: its
// peer decodes each line and answers with the same id.
func TestPingPongBaselinePeerAnswers(t *testing.T) {
	usedFixtures["pingpong"] = true
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fixtureEnv+"=pingpong")
	cmd.Stdin = strings.NewReader(`{"id":7,"params":{}}` + "\n" + `{"id":8}` + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":7,"result":{"decision":"continue"}}` + "\n" + `{"id":8,"result":{"decision":"continue"}}` + "\n"
	if string(out) != want {
		t.Fatalf("got %q, want %q", out, want)
	}
}
