package extension_test

// The benchmarks of the paths that exthost bench measures, with the same
// payload and the same baseline: go test -bench 'InterceptRTT|Observe'.
// They run only under -bench; the two tests below keep their fixtures
// honest (and used, as TestMain requires).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reasonix-ext/extension"
	"github.com/reasonix-ext/extension/sdk"
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

// rttTool is exthost bench's tool.before payload: a realistic write call
// of about 300 bytes.
var rttTool = extension.ToolPayload{
	Name:      "write",
	Arguments: `{"path":"internal/store/cache.go","content":"package store\n\n// Cache keeps the most recent lookups of the resolver.\ntype Cache struct {\n\tmu    sync.Mutex\n\titems map[string]entry\n}\n","mode":"0644","createDirs":true,"overwrite":false}`,
}

// BenchmarkInterceptRTT is one tool.before through a runtime of one SDK
// sidecar that answers continue. Allocations are the host process's.
func BenchmarkInterceptRTT(b *testing.B) {
	home := installPlugins(b, plugin{name: "rtt", fixture: "sdk",
		env:     map[string]string{"FIXTURE_DECL": `{"subscriptions":["tool.before"]}`},
		runtime: map[string]any{"intercepts": []string{"tool.before"}}})
	rt, err := testHost(home).Start(bg)
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	if chain := rt.Chain(extension.ToolBefore); len(chain) != 1 {
		b.Fatalf("tool.before chain %q, want the one fixture", chain)
	}
	var lat latencies
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if _, err := rt.Intercept(bg, extension.ToolBefore, rttTool); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	lat.report(b)
}

// BenchmarkInterceptRTTBaseline is its same-run baseline: a two-process
// ping-pong of the same frame, both sides decoding into the same DTOs with
// plain encoding/json, synchronously.
func BenchmarkInterceptRTTBaseline(b *testing.B) {
	p := startPingPongDTO(b)
	var lat latencies
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if err := p.round(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	lat.report(b)
}

// BenchmarkObserve offers tool.after events to one SDK sidecar that counts
// them, by a tight loop of Observe (ns/op and allocs/op are the loop's),
// then reads the count until it settles: delivered/s is the events the
// sidecar received over the time until then, lost the fraction dropped on
// the way (D20), hostdrop the part of it the host dropped at its budget.
func BenchmarkObserve(b *testing.B) {
	rt := startObserveCount(b)
	defer rt.Close()
	before := observedCount(b, rt)
	event := extension.ToolResultPayload{Name: "read", Arguments: `{"path":"go.mod"}`, Result: "module example.com/app\n"}
	offered := 0
	start := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if err := rt.Observe(extension.ToolAfter, event); err != nil {
			b.Fatal(err)
		}
		offered++
	}
	// The count has settled when two readings ~10 ms apart agree; it was
	// final by the first of them.
	last, lastAt := observedCount(b, rt), time.Now()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		c := observedCount(b, rt)
		if c == last {
			break
		}
		last, lastAt = c, time.Now()
	}
	received := last - before
	b.ReportMetric(float64(received)/lastAt.Sub(start).Seconds(), "delivered/s")
	b.ReportMetric(float64(int64(offered)-received)/float64(offered), "lost")
	b.ReportMetric(float64(rt.Sidecars()[0].Stats().DroppedEvents)/float64(offered), "hostdrop")
}

// observedCount reads the observe-count fixture's count through its
// tool.before answer.
func observedCount(tb testing.TB, rt *extension.Runtime) int64 {
	tb.Helper()
	out, err := rt.Intercept(bg, extension.ToolBefore, extension.ToolPayload{Name: "count"})
	if err != nil {
		tb.Fatal(err)
	}
	n, ok := strings.CutPrefix(out.Reason, "observed ")
	n, _, _ = strings.Cut(n, ";")
	c, err := strconv.ParseInt(n, 10, 64)
	if !out.Blocked || !ok || err != nil {
		tb.Fatalf("the fixture answered %+v, want a block reason \"observed <count>\"", out)
	}
	return c
}

// pingPongDTO is the parent's side of the baseline.
type pingPongDTO struct {
	in  *bufio.Reader
	out *bufio.Writer
	id  int64
}

// The baseline's envelopes around the host's DTOs.
type (
	dtoRequest struct {
		JSONRPC string                    `json:"jsonrpc"`
		ID      int64                     `json:"id"`
		Method  string                    `json:"method"`
		Params  extension.InterceptParams `json:"params"`
	}
	dtoAnswer struct {
		JSONRPC string                    `json:"jsonrpc"`
		ID      int64                     `json:"id"`
		Result  extension.InterceptResult `json:"result"`
	}
)

// startPingPongDTO starts the pingpong-dto fixture, stopped at cleanup.
func startPingPongDTO(tb testing.TB) *pingPongDTO {
	tb.Helper()
	usedFixtures["pingpong-dto"] = true
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(exe)
	// A race-enabled child would sleep a second at exit.
	cmd.Env = append(os.Environ(), fixtureEnv+"=pingpong-dto", "GORACE=atexit_sleep_ms=0")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stdin.Close(); cmd.Wait() })
	return &pingPongDTO{in: bufio.NewReader(stdout), out: bufio.NewWriter(stdin)}
}

// round writes one intercept frame of rttTool, encoding the payload as
// the host does, and decodes the answer.
func (p *pingPongDTO) round() error {
	p.id++
	payload, err := json.Marshal(rttTool)
	if err != nil {
		return err
	}
	frame, err := json.Marshal(dtoRequest{JSONRPC: "2.0", ID: p.id, Method: extension.MethodIntercept,
		Params: extension.InterceptParams{Event: extension.ToolBefore, Seq: p.id, Payload: payload, TimeoutMillis: 5000}})
	if err != nil {
		return err
	}
	p.out.Write(frame)
	p.out.WriteByte('\n')
	if err := p.out.Flush(); err != nil {
		return err
	}
	line, err := p.in.ReadBytes('\n')
	if err != nil {
		return err
	}
	var a dtoAnswer
	if err := json.Unmarshal(line, &a); err != nil {
		return err
	}
	if a.ID != p.id || a.Result.Decision != extension.DecisionContinue {
		return fmt.Errorf("the peer answered %s to request %d", line, p.id)
	}
	return nil
}

// fixturePingPongDTO is the baseline's child: it decodes each line into
// InterceptParams in an envelope, and the payload into ToolPayload, as an
// SDK sidecar's tool.before does, and answers continue.
func fixturePingPongDTO() {
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return
		}
		var req dtoRequest
		var tool extension.ToolPayload
		err = json.Unmarshal(line, &req)
		if err == nil {
			err = json.Unmarshal(req.Params.Payload, &tool)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "pingpong-dto fixture:", err)
			os.Exit(1)
		}
		b, _ := json.Marshal(dtoAnswer{JSONRPC: "2.0", ID: req.ID, Result: extension.InterceptResult{Decision: extension.DecisionContinue}})
		out.Write(append(b, '\n'))
		if out.Flush() != nil {
			return
		}
	}
}

// fixtureObserveCount is an SDK sidecar that counts the tool.after events
// it observes and answers every tool.before with block "observed <count>".
func fixtureObserveCount() {
	var count atomic.Int64               // observed on one goroutine, read by intercepts on others
	var resources atomic.Pointer[string] // the paths of the last extension/resources/changed
	err := sdk.Serve(context.Background(), sdk.Options{
		Name: os.Getenv("REASONIX_PLUGIN_NAME"), Version: "1.0.0", Logf: func(string, ...any) {},
		Observe: map[extension.Point]sdk.ObserveFunc{
			extension.ToolAfter: func(context.Context, *sdk.Event) { count.Add(1) },
		},
		ResourcesChanged: func(_ context.Context, paths []string) {
			joined := strings.Join(paths, ",")
			resources.Store(&joined)
		},
		Intercept: map[extension.Point]sdk.InterceptFunc{
			extension.ToolBefore: func(context.Context, *sdk.Call) (sdk.Verdict, error) {
				reason := fmt.Sprint("observed ", count.Load())
				if r := resources.Load(); r != nil {
					reason += "; resources " + *r
				}
				return sdk.Block(reason), nil
			},
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "observe-count fixture:", err)
		os.Exit(1)
	}
}

func TestInterceptRTTBaselinePeerAnswers(t *testing.T) {
	p := startPingPongDTO(t)
	for range 2 {
		if err := p.round(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestObserveCountFixtureCounts offers three events, which fit any queue,
// and waits for the fixture to report all three.
func TestObserveCountFixtureCounts(t *testing.T) {
	rt := startObserveCount(t)
	defer rt.Close()
	for range 3 {
		if err := rt.Observe(extension.ToolAfter, extension.ToolResultPayload{Name: "read", Result: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	// The events precede the intercepts on the wire, but the sidecar may
	// still be handling one when an intercept is answered: ask again (each
	// ask is a real round trip, no sleep), a bounded number of times.
	for i := 0; ; i++ {
		c := observedCount(t, rt)
		if c == 3 {
			return
		}
		if c > 3 || i == 10_000 {
			t.Fatalf("the fixture counted %d events, want 3", c)
		}
	}
}

// startObserveCount starts a generation of one observe-count sidecar,
// which observes tool.after and reports its count at tool.before.
func startObserveCount(tb testing.TB) *extension.Runtime {
	tb.Helper()
	home := installPlugins(tb, plugin{name: "observe", fixture: "observe-count",
		runtime: map[string]any{"intercepts": []string{"tool.before", "tool.after"}}})
	rt, err := testHost(home).Start(bg)
	if err != nil {
		tb.Fatal(err)
	}
	return rt
}
