package extension_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reasonix-ext/extension"
	"github.com/reasonix-ext/extension/sdk"
)

// The chaos test: one sidecar that, from a seed, fails in one of the ways
// real sidecars fail at one operation of its life, and a host driving
// random operations through it, reloading after each fault.

var (
	chaosSeed = flag.Uint64("chaos.seed", 0, "replay the chaos test with this seed (0: a new one)")
	soak      = flag.Bool("soak", false, "run the chaos test for 10,000 operations instead of 1,000")
)

// The faults of the chaos sidecar.
const (
	faultNone        = "none"
	faultKill        = "kill"         // the process exits at once
	faultStall       = "stall"        // the handler never returns
	faultStopReading = "stop-reading" // stdin is no longer read, and the handler never returns
	faultFlood       = "stderr-flood" // 1 MiB of stderr, then a correct answer
	faultCloseStdout = "close-stdout" // stdout is closed and the handler never returns
	faultHalfFrame   = "half-frame"   // half a frame, then the process exits
	faultGarbage     = "garbage"      // a line that is not JSON, then a correct answer
	faultDupChunk    = "dup-chunk"    // a stream's chunk 2 is sent twice
	faultDropChunk   = "drop-chunk"   // a stream's chunk 2 is never sent
	faultLate        = "late"         // the answer comes after the host's deadline
)

var chaosFaults = []string{faultKill, faultStall, faultStopReading, faultFlood, faultCloseStdout,
	faultHalfFrame, faultGarbage, faultDupChunk, faultDropChunk, faultLate}

// chaosPlan is what a chaos sidecar started with seed does: fault at its
// operation number at (from 0), the last of its life; fault is faultNone
// for a third of the lives. The sidecar and the test both compute it.
func chaosPlan(seed uint64) (fault string, at int) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	fault = faultNone
	if rng.IntN(3) != 0 {
		fault = chaosFaults[rng.IntN(len(chaosFaults))]
	}
	return fault, rng.IntN(12)
}

// chaosBudget is every bound the chaos host sets (an intercept, a stream's
// open, a UI call) in a life whose fault is a stall, stop-reading or late
// answer, which only a bound ends; chaosRoomy is the bound in the other
// lives, so that no correct operation of theirs races a clock on a busy
// machine. A late answer waits for its caller to give up, then longer.
const (
	chaosBudget = time.Second
	chaosRoomy  = 10 * time.Second
)

// timedOut reports whether only a bound ends the fault's operation.
func timedOut(fault string) bool {
	return fault == faultStall || fault == faultStopReading || fault == faultLate
}

// fixtureChaos is the chaos sidecar: an SDK sidecar that owns tool:echo,
// rewrites inputs to their hash (it reads large ones by content ref),
// serves plugin/chaos/fx/m and the UI action ping, behind a filter of its
// stdin and stdout that injects the planned fault.
func fixtureChaos() {
	seed, _ := strconv.ParseUint(os.Getenv("CHAOS_SEED"), 10, 64)
	fault, at := chaosPlan(seed)
	inR, inW := io.Pipe()
	out := &chaosOut{real: os.Stdout, fault: fault}
	c := &chaosSidecar{fault: fault, at: at, out: out, reading: make(chan struct{})}
	go func() { // stdin → the SDK, until the fault stops it
		r := bufio.NewReaderSize(os.Stdin, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			select {
			case <-c.reading:
				select {} // stop-reading: never again
			default:
			}
			inW.Write(line)
			if err != nil {
				inW.Close()
				return
			}
		}
	}()
	decl := extension.ProviderDescriptor{Ref: "plugin/chaos/fx/m", DisplayName: "chaos", Model: "m"}
	err := sdk.Serve(context.Background(), sdk.Options{
		Name: "chaos", Version: "1.0.0", Logf: func(string, ...any) {},
		Stdin: inR, Stdout: out,
		Replaces:  []string{"tool:echo"},
		Providers: []extension.ProviderDescriptor{decl}, Provider: c,
		UIActions: []extension.UIActionDecl{{ActionID: "ping"}}, Action: c.action,
		Intercept: map[extension.Point]sdk.InterceptFunc{
			extension.ToolBefore: c.echo, extension.InputReceive: c.hash,
		},
	})
	if err != nil {
		os.Exit(1)
	}
}

type chaosSidecar struct {
	fault   string
	at      int
	out     *chaosOut
	reading chan struct{} // closed to stop reading stdin

	mu  sync.Mutex
	ops int
}

// op counts one operation and, at the planned one, injects the fault:
// it reports whether the operation is to be answered late.
func (c *chaosSidecar) op(stream bool) (late bool) {
	c.mu.Lock()
	n := c.ops
	c.ops++
	c.mu.Unlock()
	if n != c.at {
		return false
	}
	switch c.fault {
	case faultKill:
		os.Exit(7)
	case faultStall:
		select {}
	case faultStopReading:
		close(c.reading)
		select {}
	case faultFlood:
		os.Stderr.Write(bytes.Repeat([]byte("flood of stderr\n"), 1<<20/16))
	case faultCloseStdout:
		c.out.close()
		select {}
	case faultHalfFrame:
		c.out.write([]byte(`{"jsonrpc":"2.0","id":`))
		os.Exit(3)
	case faultGarbage:
		c.out.write([]byte("garbage \x01 not json\n"))
	case faultDupChunk, faultDropChunk:
		c.out.armed.Store(stream)
	case faultLate:
		return true
	}
	return false
}

// wait holds a late answer until the host has given up on it: the
// callback's own deadline (an intercept), a stream's cancel, or three
// budgets (a UI call, whose caller alone bounds it).
func (c *chaosSidecar) wait(ctx context.Context, late bool) {
	if late {
		t := time.NewTimer(3 * chaosBudget)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		time.Sleep(50 * time.Millisecond) // then answer, late on purpose
	}
}

func (c *chaosSidecar) echo(ctx context.Context, call *sdk.Call) (sdk.Verdict, error) {
	c.wait(ctx, c.op(false))
	var tool extension.ToolPayload
	if err := call.Decode(&tool); err != nil {
		return sdk.Verdict{}, err
	}
	return sdk.Replace(extension.ToolPayload{Name: tool.Name, Arguments: strings.TrimSuffix(tool.Arguments, "}") + `,"seen":true}`}), nil
}

func (c *chaosSidecar) hash(ctx context.Context, call *sdk.Call) (sdk.Verdict, error) {
	c.wait(ctx, c.op(false))
	var in extension.InputPayload
	if err := call.Decode(&in); err != nil {
		return sdk.Verdict{}, err
	}
	sum := sha256.Sum256([]byte(in.Text))
	return sdk.Replace(extension.InputPayload{Text: "sha256:" + hex.EncodeToString(sum[:])}), nil
}

func (c *chaosSidecar) action(ctx context.Context, a *extension.UIActionParams) (extension.UIActionResult, error) {
	c.wait(ctx, c.op(false))
	if err := sdk.UI(ctx).Publish(ctx, "chaos-status", extension.UIStatusPayload{Label: "ping " + a.Args["n"]}); err != nil {
		return extension.UIActionResult{}, err
	}
	return extension.UIActionResult{Accepted: true, Message: "pong " + a.Args["n"]}, nil
}

func (c *chaosSidecar) Catalog(context.Context) ([]extension.ProviderDescriptor, error) {
	return []extension.ProviderDescriptor{{Ref: "plugin/chaos/fx/m", DisplayName: "chaos", Model: "m"}}, nil
}

func (c *chaosSidecar) Stream(ctx context.Context, open *extension.StreamOpenParams) (iter.Seq[extension.ProviderChunk], error) {
	c.wait(ctx, c.op(true))
	n, _ := strconv.Atoi(open.Request.Messages[0].Content)
	return func(yield func(extension.ProviderChunk) bool) {
		for i := 1; i <= n && yield(sdk.Text(strconv.Itoa(i))); i++ {
		}
	}, nil
}

// chaosOut is the sidecar's stdout behind the fault filter: it writes
// whole lines, and once armed duplicates or drops the stream chunk of
// seq 2.
type chaosOut struct {
	real  *os.File
	fault string
	armed atomic.Bool
	mu    sync.Mutex
	rest  []byte
}

func (o *chaosOut) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rest = append(o.rest, p...)
	for {
		i := bytes.IndexByte(o.rest, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := o.rest[:i+1]
		if o.armed.Load() && bytes.Contains(line, []byte(`"method":"extension/provider/stream/chunk"`)) && bytes.Contains(line, []byte(`"seq":2,`)) {
			switch o.fault {
			case faultDupChunk:
				o.real.Write(line)
				o.real.Write(line)
			case faultDropChunk:
			}
		} else if _, err := o.real.Write(line); err != nil {
			return 0, err
		}
		o.rest = o.rest[i+1:]
	}
}

func (o *chaosOut) write(p []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.real.Write(p)
}

func (o *chaosOut) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.real.Close()
}

func (o *chaosOut) Close() error { o.close(); return nil }

// chaosFrontend records the statuses the chaos sidecar publishes.
type chaosFrontend struct {
	mu     sync.Mutex
	labels []string
}

func (f *chaosFrontend) Show(s extension.Surface) {
	if s.Status != nil {
		f.mu.Lock()
		f.labels = append(f.labels, s.Status.Label)
		f.mu.Unlock()
	}
}

func (f *chaosFrontend) Ask(context.Context, extension.Prompt) (map[string]json.RawMessage, bool, error) {
	return nil, true, nil
}

func (f *chaosFrontend) saw(label string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.labels, label)
}

// The operations the chaos test drives.
const (
	opIntercept = "intercept"
	opEvent     = "event"
	opStream    = "stream"
	opContent   = "content"
	opUI        = "ui"
)

var chaosOps = []string{opIntercept, opEvent, opStream, opContent, opUI}

// TestChaosEveryFaultEndsInATypedErrorD13D18D19D21D22 drives 1,000 random
// operations (10,000 with -soak) through chaos sidecars, each of which
// fails once, at a random operation, in one of ten ways. After every
// operation: a correct result, or, exactly for the faulted one, the typed
// error its fault must give; never a silent loss, never a fallback to the
// decoy plugin that serves another provider; nothing left of the
// operation, and once the generation is reloaded nothing left of the old
// one (goroutines, descriptors, processes). The seed is logged; -chaos.seed replays it.
func TestChaosEveryFaultEndsInATypedErrorD13D18D19D21D22(t *testing.T) {
	seed := *chaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	total := 1000
	if *soak {
		total = 10000
	}
	t.Logf("chaos seed %d (replay: go test -run TestChaos -chaos.seed %d .)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))

	mark := filepath.Join(t.TempDir(), "decoy-called")
	decoy, _ := json.Marshal(extension.InitializeResult{ProtocolVersion: "1", Name: "decoy", Version: "1",
		Providers: []extension.ProviderDescriptor{{Ref: "plugin/decoy/fx/m", Model: "m"}}})
	home := installPlugins(t,
		plugin{name: "chaos", fixture: "chaos", required: true, runtime: map[string]any{
			"intercepts": []string{"tool.before", "input.receive"}, "replaces": []string{"tool:echo"},
			"capabilities": []string{"providers", "ui"}, "providers": []string{"plugin/chaos/fx/m"}, "uiActions": []string{"ping"}}},
		plugin{name: "decoy", fixture: "stream", env: map[string]string{"FIXTURE_DECL": string(decoy), "FIXTURE_MARK": mark},
			runtime: map[string]any{"capabilities": []string{"providers"}}})
	fe := &chaosFrontend{}
	h := testHost(home)
	h.Frontend = fe
	h.GapTimeout, h.EndGapTimeout = chaosRoomy, 200*time.Millisecond
	h.ShutdownTimeout, h.StdinGrace = 300*time.Millisecond, 200*time.Millisecond
	life := uint64(0)
	h.Env = append(os.Environ(), "") // the last entry is the life's CHAOS_SEED
	setLife := func() (string, int) {
		life++
		h.Env[len(h.Env)-1] = fmt.Sprintf("CHAOS_SEED=%d", seed^life)
		fault, at := chaosPlan(seed ^ life)
		// A generation takes the Host's bounds when it starts.
		h.FastInterceptTimeout, h.OpenTimeout = chaosRoomy, chaosRoomy
		if timedOut(fault) {
			h.FastInterceptTimeout, h.OpenTimeout = chaosBudget, chaosBudget
		}
		return fault, at
	}

	base := snapshot() // before any sidecar
	fault, at := setLife()
	rt, err := h.Start(bg)
	if err != nil {
		t.Fatal(err)
	}
	steady := settledSnapshot() // a generation of two sidecars, idle
	defer func() { rt.Close() }()

	counts := map[string]int{}
	faultToError := map[string][]time.Duration{} // by fault: from the operation's start to the caller's error
	slowest := map[string]time.Duration{}        // by operation: the slowest correct one
	requests := 0                                // operations the current chaos sidecar has counted
	for i := range total {
		op := chaosOps[rng.IntN(len(chaosOps))]
		last := op != opEvent && requests == at // the life's last operation, faulted or not
		faulted := last && fault != faultNone
		if op != opEvent {
			requests++
		}
		start := time.Now()
		limit := chaosRoomy
		if faulted && timedOut(fault) && op == opUI {
			limit = chaosBudget // a UI call has no bound but its caller's (PROTOCOL.md §7.4)
		}
		wrong, err := chaosOp(rt, fe, op, rng, i, limit)
		took := time.Since(start)
		want := chaosExpect(fault, op, faulted)
		where := fmt.Sprintf("seed %d, operation %d (%s), life %d with fault %s at %d", seed, i, op, life, fault, at)
		switch {
		case wrong != "":
			t.Fatalf("%s: wrong result: %s", where, wrong)
		case want == nil && err != nil:
			t.Fatalf("%s: want a correct result, got %v", where, err)
		case want != nil && !want(err):
			t.Fatalf("%s: want the fault's typed error, got %v", where, err)
		}
		if err == nil {
			slowest[op] = max(slowest[op], took) // how far a correct operation is from its bound
		}
		if !last {
			if extra := leftSince(steady); len(extra) > 0 {
				t.Fatalf("%s: after the operation %s is left", where, strings.Join(extra, "; "))
			}
			continue
		}
		counts[fault]++
		if err != nil {
			faultToError[fault] = append(faultToError[fault], took)
		}
		fault, at = setLife()
		next, err := h.Reload(bg, rt)
		if err != nil {
			t.Fatalf("%s: reload: %v", where, err)
		}
		rt, requests = next, 0
		if extra := leftSince(steady); len(extra) > 0 {
			t.Fatalf("%s: after the reload the old generation left %s", where, strings.Join(extra, "; "))
		}
	}
	// The last life may end stalled: its shutdown times out, or the
	// sidecar gives up its callbacks and exits non-zero.
	var pe *extension.PluginError
	if err := rt.Close(); err != nil && !errors.Is(err, extension.ReasonShutdownTimeout) && !(errors.As(err, &pe) && pe.Op == "shutdown") {
		t.Errorf("close: %v", err)
	}
	if extra := leftSince(base); len(extra) > 0 {
		t.Errorf("after Close: %s", strings.Join(extra, "; "))
	}
	if _, err := os.Stat(mark); err == nil {
		t.Errorf("the decoy provider was called: a stream fell back to another plugin")
	}
	var p99 []string
	for _, f := range slices.Sorted(maps.Keys(faultToError)) {
		d := faultToError[f]
		slices.Sort(d)
		p99 = append(p99, fmt.Sprintf("%s %v (%d)", f, d[min(len(d)-1, len(d)*99/100)].Round(time.Millisecond), len(d)))
	}
	t.Logf("%d operations, %d lives; lives by fault %v; from the faulted operation's start to the caller's error, p99 by fault: %s; the slowest correct operation by kind: %v",
		total, life, counts, strings.Join(p99, ", "), slowest)
}

// chaosExpect returns how the operation's error must look: nil for a
// correct result, else a test of the error.
func chaosExpect(fault, op string, faulted bool) func(error) bool {
	is := func(r extension.Reason) func(error) bool { return func(err error) bool { return errors.Is(err, r) } }
	if !faulted {
		return nil
	}
	switch fault {
	case faultKill, faultCloseStdout, faultHalfFrame:
		return is(extension.ReasonProviderInterrupted) // D13
	case faultStall, faultStopReading, faultLate:
		switch op {
		case opStream:
			return is(extension.ReasonProviderInterrupted) // the open's bound
		case opUI:
			return func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }
		}
		return is(extension.ReasonInterceptTimeout) // D18
	case faultDropChunk:
		if op == opStream {
			return is(extension.ReasonStreamGap) // D21
		}
	}
	return nil // the fault does not touch the result
}

// chaosOp runs one operation; wrong describes a result that is not the
// correct one (never acceptable), err a failure.
func chaosOp(rt *extension.Runtime, fe *chaosFrontend, op string, rng *rand.Rand, i int, limit time.Duration) (wrong string, err error) {
	ctx, cancel := context.WithTimeout(bg, limit)
	defer cancel()
	switch op {
	case opIntercept:
		args := fmt.Sprintf(`{"n":%d}`, i)
		out, err := rt.Intercept(ctx, extension.ToolBefore, extension.ToolPayload{Name: "echo", Arguments: args})
		if err != nil {
			return "", err
		}
		want, _ := json.Marshal(extension.ToolPayload{Name: "echo", Arguments: fmt.Sprintf(`{"n":%d,"seen":true}`, i)})
		if string(out.Payload) != string(want) {
			return fmt.Sprintf("payload %s, want %s", out.Payload, want), nil
		}
	case opContent:
		text := strings.Repeat(fmt.Sprintf("%04d", rng.IntN(10000)), 20000) // 80 KB, over 64 KiB: by content ref (D22)
		out, err := rt.Intercept(ctx, extension.InputReceive, extension.InputPayload{Text: text})
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256([]byte(text))
		want, _ := json.Marshal(extension.InputPayload{Text: "sha256:" + hex.EncodeToString(sum[:])})
		if string(out.Payload) != string(want) {
			return fmt.Sprintf("payload %.100s, want %s", out.Payload, want), nil
		}
	case opEvent:
		return "", rt.Observe(extension.ToolBefore, extension.ToolPayload{Name: "echo"})
	case opStream:
		n := 2 + rng.IntN(4) // a chunk 2 for the dup and drop faults
		st, err := rt.OpenStream(ctx, "plugin/chaos/fx/m", "", extension.ProviderRequest{
			Messages: []extension.ProviderMessage{{Role: extension.RoleUser, Content: strconv.Itoa(n)}}, Tools: []extension.ProviderToolSchema{}})
		if err != nil {
			return "", err
		}
		defer st.Close()
		for k := 1; ; k++ {
			c, err := st.Recv()
			if errors.Is(err, io.EOF) {
				if k != n+1 {
					return fmt.Sprintf("the stream ended after %d of %d chunks", k-1, n), nil
				}
				return "", nil
			}
			if err != nil {
				return "", err
			}
			if c.Text != strconv.Itoa(k) {
				return fmt.Sprintf("chunk %d is %q", k, c.Text), nil
			}
		}
	case opUI:
		n := strconv.Itoa(i)
		res, err := rt.Action(ctx, "sess-test", "/chaos:ping", map[string]string{"n": n})
		if err != nil {
			return "", err
		}
		if res.Message != "pong "+n || !fe.saw("ping "+n) {
			return fmt.Sprintf("action answered %q (status shown: %t), want pong %s", res.Message, fe.saw("ping "+n), n), nil
		}
	}
	return "", nil
}
