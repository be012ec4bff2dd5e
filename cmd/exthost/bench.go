package main

// exthost bench measures the host's hot paths, each beside a baseline
// measured in the same run: the machine is shared and noisy, so only the
// ratios mean much. Measured and baseline samples alternate in blocks,
// so that noise falls on both alike. The figures:
//
//   - intercept_rtt: one tool.before Intercept through the plugin, against
//     pingpong_limit, one round of the same frame with a child process
//     doing nothing but plain encoding/json into the same DTOs.
//   - intercept_chain4: one Intercept through four copies of the plugin,
//     against pingpong4_limit, one such round with each of four children.
//   - observe_throughput: events per second that reach the bench's own
//     sidecar (the streamer mode) offered by a tight loop of Observe, and
//     the fraction lost.
//   - stream_throughput: one provider stream of 10·n text chunks from
//     that sidecar through Runtime.OpenStream to the last Recv,
//     against stream_pipe, the same chunk frames from a child process
//     through a bare pipe (a buffered writer flushed when full), each
//     decoded into the same StreamChunkParams by plain json.Unmarshal.
//     per_sec is chunks per second; the ratio, of times, is at most 2
//     when the stream keeps at least half the pipe's rate.
//   - content_8mib: one input.receive Intercept of an 8 MiB payload,
//     externalized by the host and paged, verified and answered by that
//     sidecar's SDK, against content_pipe, the essential work of that
//     round trip: the same bytes encoded into base64 lines of 256 KiB
//     and written to a child that decodes them into one payload, which
//     it keeps, and answers its SHA-256, which is checked. The target is
//     a ratio of times of at most 2.5 (baseline/ours >= 0.4).
//   - startup_1, startup_4: Host.Start of one sidecar and of four started
//     together, against spawn_1 and spawn_4, as many minimal processes
//     (the echoline peer) started together until each has answered one
//     line.
//
// Every child, sidecars and peers alike, is this binary in one of its
// hidden modes (main.go), so both sides of a ratio start from the same
// binary, and runs with the bench's GOMAXPROCS.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/reasonix-ext/extension"
	"github.com/reasonix-ext/extension/internal/fullsidecar"
	"github.com/reasonix-ext/extension/sdk"
)

// defaultBenchRounds is the default of -n: the whole run stays well
// under 20 s on a 2-core machine.
const defaultBenchRounds = 2000

// copies is how many sidecars the 4-sidecar figures run.
const copies = 4

// benchTool is the tool.before payload of the intercept figures and
// their baselines: a realistic write call of about 300 bytes, which the
// reference plugin answers continue to.
var benchTool = extension.ToolPayload{
	Name:      "write",
	Arguments: `{"path":"internal/store/cache.go","content":"package store\n\n// Cache keeps the most recent lookups of the resolver.\ntype Cache struct {\n\tmu    sync.Mutex\n\titems map[string]entry\n}\n","mode":"0644","createDirs":true,"overwrite":false}`,
}

// result is one figure of the run. A field that does not apply is left
// zero and omitted from the JSON: no p50, per_sec or ratio is ever
// legitimately 0, while allocations and losses can be, so those two are
// pointers.
type result struct {
	Name        string   `json:"name"`
	P50         int64    `json:"p50_ns,omitempty"`
	P99         int64    `json:"p99_ns,omitempty"`
	PerSec      float64  `json:"per_sec,omitempty"`
	AllocsPerOp *float64 `json:"allocs_per_op,omitempty"`
	Baseline    string   `json:"baseline,omitempty"`
	BaselineP50 int64    `json:"baseline_p50_ns,omitempty"`
	// Ratio is the median over the run's blocks of the figure's p50 in a
	// block over its baseline's in the same block; RatioMin and RatioMax
	// are the least and the greatest, the spread a reader weighs it by.
	Ratio    float64  `json:"ratio,omitempty"`
	RatioMin float64  `json:"ratio_min,omitempty"`
	RatioMax float64  `json:"ratio_max,omitempty"`
	Lost     *float64 `json:"lost,omitempty"` // observe_throughput: the fraction of events lost, 0..1
}

// benchCommand measures the host's hot paths against same-run baselines
// and prints a table, or JSON.
func benchCommand(fs *flag.FlagSet) func(*env) int {
	asJSON := fs.Bool("json", false, `print {"results": [...]} instead of the table`)
	n := fs.Int("n", defaultBenchRounds, "timed calls of each latency figure and of its baseline; the startup figures time n/100 starts (at least 3) and observe_throughput offers 50*n events")
	return func(e *env) int {
		if *n < 1 {
			fmt.Fprintf(e.stderr, "exthost bench: -n %d: give a positive number of rounds\n", *n)
			return 2
		}
		results, err := runBench(e.ctx, *n, e.args)
		if e.ctx.Err() != nil {
			err = errInterrupted // the figure it was measuring failed with it
		}
		if err == nil && *asJSON {
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			err = enc.Encode(struct {
				Results []result `json:"results"`
			}{results})
		} else if err == nil {
			err = printBench(e.stdout, *n, results)
		}
		return e.exit(err)
	}
}

// bench is one run: what setup installed, in a temporary directory
// removed at the end.
type bench struct {
	ctx  context.Context // SIGINT or SIGTERM ends it
	n    int
	work string             // the temporary directory
	env  []string           // every child's environment: ours, plus our GOMAXPROCS
	one  sidecars           // the plugin measured, installed once
	four sidecars           // its copies bench-1..bench-4
	own  *extension.Runtime // the bench's own sidecar, running
}

// sidecars are plugins installed in one home, which a figure starts
// together in one generation of host.
type sidecars struct {
	host *extension.Host
	ids  []string
	hint string // why they may fail to start, or ""
}

// runBench measures every figure against the plugin in args (default:
// the reference plugin) and returns the results in the order they print.
func runBench(ctx context.Context, n int, args []string) ([]result, error) {
	work, err := os.MkdirTemp("", "exthost-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	b := &bench{
		ctx:  ctx,
		n:    n,
		work: work,
		// The baselines' peers and the sidecars run with the host's
		// parallelism, so neither side of a ratio has more CPUs.
		env: append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(runtime.GOMAXPROCS(0))),
	}
	targets, err := pluginTargets("", args, work)
	if err == nil {
		err = b.setup(targets[0].dir)
	}
	if err != nil {
		return nil, err
	}
	defer b.own.Close()
	var results []result
	// Each step measures one or more figures.
	for _, step := range []func() ([]result, error){
		b.intercepts("intercept_rtt", "pingpong_limit", b.one),
		b.intercepts("intercept_chain4", "pingpong4_limit", b.four),
		b.observeThroughput,
		b.streamThroughput,
		b.content8MiB,
		b.startup,
	} {
		r, err := step()
		if err != nil {
			return nil, err
		}
		results = append(results, r...)
	}
	return results, nil
}

// setup installs the plugin in the directory plugin once, in home1, and as its copies, in home4, and starts the bench's
// own sidecar, from a home of its own.
func (b *bench) setup(plugin string) error {
	home1 := filepath.Join(b.work, "home1")
	entry, err := extension.Install(home1, plugin, extension.InstallOptions{Link: true})
	if err != nil {
		return err
	}
	b.one = sidecars{host: b.host(home1), ids: []string{entry.Name}}
	home4 := filepath.Join(b.work, "home4")
	ids, err := installCopies(home4, plugin, filepath.Join(b.work, "copies"), copies)
	b.four = sidecars{host: b.host(home4), ids: ids, hint: copiesHint}
	b.four.host.MaxParallelStarts = copies
	if err != nil {
		return err
	}
	home := filepath.Join(b.work, "home-"+sidecarPeer)
	dir, err := modePlugin(b.work, sidecarPeer, &extension.Manifest{APIVersion: "reasonix.io/plugin/v1", Name: sidecarPeer, Version: "1.0.0", Runtime: &extension.RuntimeSpec{
		Capabilities: []string{"providers"}, Intercepts: []extension.Point{extension.InputReceive, extension.ToolBefore, extension.ToolAfter}}})
	if err = install(home, dir, err); err != nil {
		return fmt.Errorf("installing the bench's sidecar: %w", err)
	}
	b.own, err = sidecars{host: b.host(home), ids: []string{sidecarPeer}}.start(b.ctx, "the bench's sidecar")
	return err
}

// installCopies installs n copies of the plugin in pluginDir into home
// as bench-1..bench-n. Each is a copy of the directory, so that
// ${REASONIX_PLUGIN_ROOT} resolves inside it, whose manifest is the
// original with its name set to the copy's, runtime.replaces,
// providers, uiActions and capabilities removed (two plugins cannot own
// one slot, D17, and a provider ref names its plugin ID, D9), and
// $FULLSIDECAR_HOOKS_ONLY=1 added to runtime.env, which asks the
// reference sidecar to declare none of them. The rest, runtime.command
// and intercepts among it, is kept as it was.
func installCopies(home, pluginDir, under string, n int) ([]string, error) {
	path := filepath.Join(pluginDir, extension.ManifestFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := extension.ParseManifest(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if m.Runtime == nil {
		return nil, fmt.Errorf("%s has no runtime block: exthost bench measures sidecars", path)
	}
	m.Runtime.Replaces, m.Runtime.Providers, m.Runtime.UIActions, m.Runtime.Capabilities = nil, nil, nil, nil
	if m.Runtime.Env == nil {
		m.Runtime.Env = map[string]string{}
	}
	m.Runtime.Env[fullsidecar.HooksOnly] = "1"
	var ids []string
	for i := 1; i <= n; i++ {
		m.Name = fmt.Sprintf("bench-%d", i)
		dir := filepath.Join(under, m.Name)
		if err := os.CopyFS(dir, os.DirFS(pluginDir)); err != nil {
			return nil, fmt.Errorf("copying the plugin directory for %s: %w", m.Name, err)
		}
		if err := install(home, dir, writeManifest(dir, m)); err != nil {
			return nil, err
		}
		ids = append(ids, m.Name)
	}
	return ids, nil
}

// install installs the plugin directory dir in home, linked, unless
// making it failed with err.
func install(home, dir string, err error) error {
	if err == nil {
		_, err = extension.Install(home, dir, extension.InstallOptions{Link: true})
	}
	return err
}

// writeManifest writes m as the manifest of the plugin directory dir,
// making it if need be. The manifest written must parse back: the struct
// can hold what no manifest may say.
func writeManifest(dir string, m *extension.Manifest) error {
	raw, err := json.MarshalIndent(m, "", "  ")
	if err == nil {
		_, err = extension.ParseManifest(raw)
	}
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, extension.ManifestFile), raw, 0o644)
	}
	return err
}

// host returns a Host over home whose sidecars get the bench's
// environment.
func (b *bench) host(home string) *extension.Host {
	return &extension.Host{
		Home:    home,
		Session: extension.SessionContext{SessionID: "bench-session", WorkspaceRoot: b.work, Generation: 1},
		Env:     b.env,
	}
}

// copiesHint says why the copies of a plugin may fail to start.
const copiesHint = "the 4-sidecar figures run copies of the plugin, bench-1..bench-4, whose manifests grant no slot, provider, UI action or capability (two plugins cannot own one slot, D17) " +
	"and set " + fullsidecar.HooksOnly + "=1 in runtime.env, so a sidecar installed several times must then declare none of those, as sdk/examples/fullsidecar does"

// start starts a generation of s.host and checks that each of s.ids runs:
// an optional plugin that fails to start is only a warning to the host,
// but a figure without it would measure nothing. Errors name the figure,
// and end with s.hint when there is one.
func (s sidecars) start(ctx context.Context, figure string) (*extension.Runtime, error) {
	rt, err := s.host.Start(ctx)
	for i := 0; err == nil && i < len(s.ids); i++ {
		if _, ok := rt.Declaration(s.ids[i]); ok {
			continue
		}
		err = fmt.Errorf("%s did not start", s.ids[i])
		for _, w := range rt.Warnings() {
			if w.Plugin == s.ids[i] {
				err = fmt.Errorf("%w: %v", err, w.Err)
			}
		}
		rt.Close()
	}
	if err == nil {
		return rt, nil
	}
	err = fmt.Errorf("%s: %w", figure, err)
	if s.hint != "" {
		err = fmt.Errorf("%w; %s", err, s.hint)
	}
	return nil, err
}

// intercepts measures figure, one tool.before Intercept through the
// sidecars s, against baseline, one pingpong round with each of as many
// peers.
func (b *bench) intercepts(figure, baseline string, s sidecars) func() ([]result, error) {
	return func() ([]result, error) {
		rt, err := s.start(b.ctx, figure)
		if err != nil {
			return nil, err
		}
		defer rt.Close()
		// Each must intercept tool.before, the point measured.
		chain := rt.Chain(extension.ToolBefore)
		for _, id := range s.ids {
			if !slices.Contains(chain, id) {
				return nil, fmt.Errorf("%s: %s does not intercept tool.before (chain: %q), so there is nothing to measure: its runtime.intercepts and its subscriptions must name tool.before", figure, id, chain)
			}
		}
		peers, err := b.peers(pingpongPeer, len(s.ids), "")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", baseline, err)
		}
		defer stopAll(peers)
		ctx := b.ctx
		intercept := func() error {
			_, err := rt.Intercept(ctx, extension.ToolBefore, benchTool)
			return err
		}
		return interleave(b.n, max(10, b.n/20), true, op{name: figure, run: intercept, baseline: baseline}, op{name: baseline, run: rounds(peers)})
	}
}

// observeThroughput offers 50·n small tool.after events to the observer
// sidecar by a tight loop of Observe, then reads its count until it
// settles. per_sec is the events the observer received over the time from
// the loop's start until the count stopped rising (the first of two equal
// readings ~10 ms apart), so a loop that only fills the host's queue
// does not inflate it; lost is the fraction of the offered events that
// never reached the observer, dropped by the host (D20) or the SDK.
func (b *bench) observeThroughput() ([]result, error) {
	const name = "observe_throughput"
	rt := b.own
	count := func() (int64, error) {
		out, err := rt.Intercept(b.ctx, extension.ToolBefore, extension.ToolPayload{Name: "count"})
		if err != nil {
			return 0, fmt.Errorf("%s: reading the count: %w", name, err)
		}
		n, ok := strings.CutPrefix(out.Reason, "observed ")
		c, err := strconv.ParseInt(n, 10, 64)
		if !out.Blocked || !ok || err != nil {
			return 0, fmt.Errorf("%s: the observer answered %+v, not a block reason \"observed <count>\"", name, out)
		}
		return c, nil
	}
	before, err := count() // also warms the connection
	if err != nil {
		return nil, err
	}
	event := extension.ToolResultPayload{Name: "read", Arguments: `{"path":"go.mod"}`, Result: "module example.com/app\n"}
	offered := 50 * b.n
	begin := time.Now()
	for range offered {
		if err := rt.Observe(extension.ToolAfter, event); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	loopEnd := time.Now()
	last, err := count()
	lastAt := time.Now()
	for err == nil {
		time.Sleep(10 * time.Millisecond)
		var c int64
		if c, err = count(); err == nil && c == last {
			break
		}
		if time.Since(loopEnd) > 3*time.Second {
			return nil, fmt.Errorf("%s: the observer's count was still rising 3 s after the last event was offered (%d of %d)", name, last-before, offered)
		}
		last, lastAt = c, time.Now()
	}
	if err != nil {
		return nil, err
	}
	received := last - before
	if received <= 0 {
		return nil, fmt.Errorf("%s: the observer received none of the %d events offered; the host's warnings: %v", name, offered, rt.Warnings())
	}
	lost := float64(int64(offered)-received) / float64(offered)
	return []result{{Name: name, PerSec: float64(received) / lastAt.Sub(begin).Seconds(), Lost: &lost}}, nil
}

// streamThroughput measures stream_throughput against stream_pipe: max(3,
// n/200) streams of 10·n chunks each, alternating.
func (b *bench) streamThroughput() ([]result, error) {
	const name = "stream_throughput"
	child, err := b.startPeer(streamPipePeer, "")
	if err != nil {
		return nil, fmt.Errorf("stream_pipe: %w", err)
	}
	defer stopAll([]*peer{child})
	chunks := 10 * b.n
	count := strconv.Itoa(chunks)
	req := extension.ProviderRequest{Messages: []extension.ProviderMessage{{Role: extension.RoleUser, Content: count}}}
	ours := op{name: name, baseline: "stream_pipe", run: func() error {
		st, err := b.own.OpenStream(b.ctx, "plugin/"+sidecarPeer+"/bench/text", "", req)
		if err != nil {
			return err
		}
		defer st.Close()
		for got := 0; ; got++ {
			if _, err := st.Recv(); err == io.EOF && got == chunks {
				return nil
			} else if err != nil {
				return fmt.Errorf("after %d of %d chunks: %w", got, chunks, err)
			}
		}
	}}
	base := op{name: "stream_pipe", run: func() error {
		if _, err := io.WriteString(child.in, count+" es_0123456789abcdef01234567\n"); err != nil {
			return err
		}
		var p extension.StreamChunkParams
		for range chunks {
			line, err := child.out.ReadSlice('\n')
			if err == nil {
				err = json.Unmarshal(line, &struct {
					Params *extension.StreamChunkParams `json:"params"`
				}{&p})
			}
			if err != nil {
				return err
			}
		}
		return nil
	}}
	res, err := interleave(max(3, b.n/200), 1, false, base, ours)
	for i := range res {
		res[i].PerSec = float64(chunks) / time.Duration(res[i].P50).Seconds()
	}
	return res, err
}

// content8MiB measures content_8mib, one input.receive Intercept of an
// 8 MiB payload, which the host externalizes and the sidecar's SDK pages,
// verifies and answers, against content_pipe, the same 8 MiB encoded, a
// page at a time, into base64 lines of 256 KiB written to a child that
// decodes them into one payload and answers its hash: max(5, n/100) of
// each, alternating.
func (b *bench) content8MiB() ([]result, error) {
	const name = "content_8mib"
	payload := []byte(`{"text":"` + strings.Repeat("a", extension.FrameBytes-len(`{"text":""}`)) + `"}`)
	var page []byte // a page's line, written as the host writes a frame a page
	child, err := b.startPeer(contentPipePeer, "")
	if err != nil {
		return nil, fmt.Errorf("content_pipe: %w", err)
	}
	defer stopAll([]*peer{child})
	sum := sha256.Sum256(payload)
	ours := op{name: name, baseline: "content_pipe", run: func() error {
		out, err := b.own.Intercept(b.ctx, extension.InputReceive, json.RawMessage(payload))
		if err == nil && (out.Blocked || len(out.Replaced) > 0) {
			err = fmt.Errorf("the sidecar answered %+v, not continue", out)
		}
		return err
	}}
	base := op{name: "content_pipe", run: func() error {
		for off := 0; off < len(payload); off += extension.ContentRefChunkBytes {
			page = append(base64.StdEncoding.AppendEncode(page[:0], payload[off:min(off+extension.ContentRefChunkBytes, len(payload))]), '\n')
			if _, err := child.in.Write(page); err != nil {
				return err
			}
		}
		if _, err := io.WriteString(child.in, "\n"); err != nil { // the end of the payload
			return err
		}
		line, err := child.out.ReadString('\n')
		if err == nil && strings.TrimSpace(line) != hex.EncodeToString(sum[:]) {
			err = fmt.Errorf("the child hashed %q", line)
		}
		return err
	}}
	return interleave(max(5, b.n/100), 1, false, base, ours)
}

// startup measures startup_1 and startup_4, the ready time of one and of
// four sidecars started together, against spawn_1 and spawn_4, as many
// minimal processes started together until each has answered a line.
func (b *bench) startup() ([]result, error) {
	generation := func(figure string, s sidecars, baseline string) op {
		var rt *extension.Runtime
		return op{name: figure, baseline: baseline, run: func() (err error) {
			rt, err = s.start(b.ctx, figure)
			return err
		}, stop: func() error { return rt.Close() }} // untimed: the figure is the ready time
	}
	// The untimed Close falls inside the blocks that count mallocs, so
	// these figures report none.
	return interleave(max(3, b.n/100), 1, false,
		generation("startup_1", b.one, "spawn_1"), b.spawn(1),
		generation("startup_4", b.four, "spawn_4"), b.spawn(copies))
}

// peer is a running peer program and our ends of its stdin (also
// buffered, as w) and stdout.
type peer struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	w   *bufio.Writer
	out *bufio.Reader
}

// peers starts k copies of the peer program name together, one goroutine
// each, as the host launches each sidecar on its own. With a hello line,
// each must echo it before peers returns. On an error, the ones started
// are stopped.
func (b *bench) peers(name string, k int, hello string) ([]*peer, error) {
	peers := make([]*peer, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	for i := range k {
		wg.Go(func() { peers[i], errs[i] = b.startPeer(name, hello) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		stopAll(peers)
		return nil, err
	}
	return peers, nil
}

// startPeer starts the peer mode name, whose stderr is ours so that its
// complaints are seen, and has it echo hello, if any. The peer is
// returned whenever it started, for stopAll.
func (b *bench) startPeer(name, hello string) (*peer, error) {
	exe, err := executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, runArg, name)
	cmd.Env = b.env
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		return nil, err
	}
	p := &peer{cmd: cmd, in: in, w: bufio.NewWriter(in), out: bufio.NewReader(out)}
	if hello == "" {
		return p, nil
	}
	if _, err := io.WriteString(in, hello); err != nil {
		return p, err
	}
	line, err := p.out.ReadString('\n')
	if err == nil && line != hello {
		err = fmt.Errorf("%s answered %q", name, line)
	}
	return p, err
}

// stopAll ends the peers started: EOF on stdin makes each exit.
func stopAll(peers []*peer) error {
	var errs []error
	for _, p := range peers {
		if p != nil {
			p.in.Close()
			errs = append(errs, p.cmd.Wait())
		}
	}
	return errors.Join(errs...)
}

// spawn is spawn_<k>: k echoline peers started together, timed until
// each one's answer line has been read; stopping them is the untimed
// cleanup.
func (b *bench) spawn(k int) op {
	var peers []*peer
	return op{name: fmt.Sprint("spawn_", k), run: func() (err error) {
		peers, err = b.peers(echolinePeer, k, "ready?\n")
		return err
	}, stop: func() error { return stopAll(peers) }}
}

// rounds is one round with each peer in turn, all with the request ID
// of the round, the parent's side of the intercept baselines: to each, it
// writes an extension/intercept frame of benchTool whose payload it
// encodes as the host does, and reads and decodes the answer. The same
// DTOs as the host's, in envelopes, with plain json.Marshal and
// json.Unmarshal, synchronously, on one goroutine.
func rounds(peers []*peer) func() error {
	var id int64
	return func() error {
		id++
		for _, p := range peers {
			// Neither encoding can fail: strings, numbers, and the
			// payload json.Marshal made.
			payload, _ := json.Marshal(benchTool)
			frame, _ := json.Marshal(pingRequest{JSONRPC: "2.0", ID: id, Method: extension.MethodIntercept,
				Params: extension.InterceptParams{Event: extension.ToolBefore, Seq: id, Payload: payload, TimeoutMillis: 5000}})
			p.w.Write(frame)
			p.w.WriteByte('\n')
			if err := p.w.Flush(); err != nil {
				return fmt.Errorf("writing to the peer: %w", err)
			}
			line, err := p.out.ReadBytes('\n')
			if err != nil {
				return fmt.Errorf("reading the peer's answer: %w", err)
			}
			var a pingAnswer
			if err := json.Unmarshal(line, &a); err != nil {
				return err
			}
			if a.ID != id || a.Result.Decision != extension.DecisionContinue {
				return fmt.Errorf("the peer answered %s to request %d", line, id)
			}
		}
		return nil
	}
}

// op is one figure's sample: run does one timed operation, and stop,
// when set, is the untimed cleanup after each.
type op struct {
	name     string
	run      func() error
	stop     func() error
	baseline string // the name of the op it is measured against, or ""
}

// interleave runs warm untimed calls of each op, then n timed calls of
// each, in alternating blocks, so that the machine's noise falls on all of
// them alike, and returns each op's p50, p99, its ratio to its baseline
// and, when allocs, its mallocs per call, in the order of ops. The times go into preallocated slices and the mallocs are
// read around each block, so that neither is part of the figure.
func interleave(n, warm int, allocs bool, ops ...op) ([]result, error) {
	call := func(o op) (time.Duration, error) {
		start := time.Now()
		err := o.run()
		d := time.Since(start)
		if err == nil && o.stop != nil {
			if err = o.stop(); err != nil {
				err = fmt.Errorf("stopping: %w", err)
			}
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %w", o.name, err)
		}
		return d, nil
	}
	for _, o := range ops {
		for range warm {
			if _, err := call(o); err != nil {
				return nil, err
			}
		}
	}
	lat := make([][]time.Duration, len(ops))
	for i := range ops {
		lat[i] = make([]time.Duration, 0, n)
	}
	mallocs := make([]uint64, len(ops))
	blocks := make([][]int64, len(ops)) // each block's p50, in order
	block := max(1, min(50, n/10))
	var ms runtime.MemStats
	for done := 0; done < n; done += block {
		for i, o := range ops {
			runtime.ReadMemStats(&ms)
			before := ms.Mallocs
			for range min(block, n-done) {
				d, err := call(o)
				if err != nil {
					return nil, err
				}
				lat[i] = append(lat[i], d)
			}
			runtime.ReadMemStats(&ms)
			mallocs[i] += ms.Mallocs - before
			blocks[i] = append(blocks[i], percentile(slices.Sorted(slices.Values(lat[i][done:])), 50))
		}
	}
	results := make([]result, len(ops))
	for i, o := range ops {
		slices.Sort(lat[i])
		results[i] = result{Name: o.name, P50: percentile(lat[i], 50), P99: percentile(lat[i], 99)}
		if allocs {
			a := float64(mallocs[i]) / float64(n)
			results[i].AllocsPerOp = &a
		}
	}
	for i, o := range ops {
		if j := slices.IndexFunc(ops, func(b op) bool { return b.name == o.baseline }); j >= 0 {
			r := &results[i]
			r.Baseline, r.BaselineP50 = o.baseline, results[j].P50
			ratios := make([]float64, len(blocks[i]))
			for k := range ratios {
				ratios[k] = float64(blocks[i][k]) / float64(blocks[j][k])
			}
			slices.Sort(ratios)
			r.Ratio, r.RatioMin, r.RatioMax = ratios[(len(ratios)-1)/2], ratios[0], ratios[len(ratios)-1]
		}
	}
	return results, nil
}

// percentile is the nearest-rank pth percentile of sorted, in
// nanoseconds, at least 1: a coarse clock may read a call as 0, which
// would make a ratio infinite.
func percentile(sorted []time.Duration, p int) int64 {
	i := (len(sorted)*p + 99) / 100 // the rank, rounded up
	return max(1, sorted[max(i, 1)-1].Nanoseconds())
}

// printBench prints the results as a table under a line naming the
// machine; a blank cell is a field that does not apply.
func printBench(w io.Writer, n int, results []result) error {
	fmt.Fprintf(w, "exthost bench: %s/%s, %d CPUs, GOMAXPROCS=%d, %s, -n %d\n\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), n)
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "name\tp50\tp99\tper_sec\tallocs/op\tbaseline\tratio\tlost")
	for _, r := range results {
		cells := []string{r.Name, duration(r.P50), duration(r.P99), "", "", r.Baseline, "", ""}
		if r.PerSec > 0 {
			cells[3] = fmt.Sprintf("%.0f", r.PerSec)
		}
		if r.AllocsPerOp != nil {
			cells[4] = fmt.Sprintf("%.1f", *r.AllocsPerOp)
		}
		if r.Ratio > 0 {
			cells[6] = fmt.Sprintf("%.2f (%.2f-%.2f)", r.Ratio, r.RatioMin, r.RatioMax)
		}
		if r.Lost != nil {
			cells[7] = fmt.Sprintf("%.3f", *r.Lost)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Blank trailing cells would leave trailing spaces.
	for line := range strings.Lines(table.String()) {
		if _, err := fmt.Fprintln(w, strings.TrimRight(line, " \n")); err != nil {
			return err
		}
	}
	return nil
}

// duration prints ns with three or four significant digits, "" for 0.
func duration(ns int64) string {
	switch d := time.Duration(ns); {
	case d == 0:
		return ""
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", ns)
	case d < time.Millisecond:
		return fmt.Sprintf("%.1fµs", float64(ns)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(ns)/1e6)
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

// pingRequest is the frame of the intercept baselines that the bench
// writes, and pingAnswer the one the pingpong peer writes back: around
// the host's own DTOs.
type pingRequest struct {
	JSONRPC string                    `json:"jsonrpc"`
	ID      int64                     `json:"id"`
	Method  string                    `json:"method"`
	Params  extension.InterceptParams `json:"params"`
}

type pingAnswer struct {
	JSONRPC string                    `json:"jsonrpc"`
	ID      int64                     `json:"id"`
	Result  extension.InterceptResult `json:"result"`
}

// answerLines is the loop of the pipe peers, on one goroutine: it reads
// stdin a line at a time (a page's line of content-pipe, 349,528 bytes,
// fits its buffer), writes what answer makes of each to stdout, flushed
// after each line, and returns nil at EOF: the bench is done with the
// peer. An error ends the peer, and the bench reads EOF and reports the
// figure as failed.
func answerLines(answer func(line []byte, out *bufio.Writer) error) error {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	for {
		line, err := in.ReadSlice('\n')
		if err == io.EOF {
			return nil
		}
		if err == nil {
			err = answer(line, out)
		}
		if err == nil {
			err = out.Flush()
		}
		if err != nil {
			return err
		}
	}
}

// answerPing is the pingpong peer's answer: the least a sidecar can do
// with an extension/intercept frame. It decodes the line with plain
// json.Unmarshal into the same DTOs the SDK decodes it into
// (extension.InterceptParams inside an envelope, then the payload into
// extension.ToolPayload, as the reference plugin's tool.before does),
// and answers continue with json.Marshal.
func answerPing(line []byte, out *bufio.Writer) error {
	var req pingRequest
	var tool extension.ToolPayload
	err := json.Unmarshal(line, &req)
	if err == nil {
		err = json.Unmarshal(req.Params.Payload, &tool)
	}
	if err != nil {
		return err
	}
	b, err := json.Marshal(pingAnswer{JSONRPC: "2.0", ID: req.ID, Result: extension.InterceptResult{Decision: extension.DecisionContinue}})
	out.Write(b)
	out.WriteByte('\n')
	return err
}

// echoLine is the echoline peer's answer: the least a process can do to
// be "ready", the line it read.
func echoLine(line []byte, out *bufio.Writer) error {
	_, err := out.Write(line)
	return err
}

// streamText is the text of every chunk the bench's sidecar and the
// stream-pipe peer write.
const streamText = "a streamed piece of text "

// serveBench is the bench's own sidecar. Its tool.after observer only
// counts the events it receives, so observe_throughput measures
// delivery, not work; its tool.before interceptor answers block with the
// reason "observed <n>", which is how the bench reads the count through
// the protocol itself. It serves plugin/<id>/bench/text, whose stream is
// as many text chunks as the request's last message says, and answers
// input.receive continue once the SDK has read and verified its
// payload, however large.
func serveBench() error {
	// Events are observed on one goroutine while intercepts run on
	// others, hence the atomic.
	var count atomic.Int64
	id := cmp.Or(os.Getenv("REASONIX_PLUGIN_NAME"), sidecarPeer)
	return sdk.Serve(context.Background(), sdk.Options{
		Name: id, Version: "1.0.0",
		Providers: []extension.ProviderDescriptor{{Ref: "plugin/" + id + "/bench/text", Model: "text"}},
		Provider:  texts{},
		Observe: map[extension.Point]sdk.ObserveFunc{
			extension.ToolAfter: func(context.Context, *sdk.Event) { count.Add(1) },
		},
		Intercept: map[extension.Point]sdk.InterceptFunc{
			extension.ToolBefore: func(context.Context, *sdk.Call) (sdk.Verdict, error) {
				return sdk.Block(fmt.Sprint("observed ", count.Load())), nil
			},
			extension.InputReceive: func(context.Context, *sdk.Call) (sdk.Verdict, error) { return sdk.Continue(), nil },
		},
	})
}

type texts struct{}

func (texts) Catalog(context.Context) ([]extension.ProviderDescriptor, error) { return nil, nil }

func (texts) Stream(ctx context.Context, open *extension.StreamOpenParams) (iter.Seq[extension.ProviderChunk], error) {
	n := 0
	if m := open.Request.Messages; len(m) > 0 {
		n, _ = strconv.Atoi(m[len(m)-1].Content)
	}
	return func(yield func(extension.ProviderChunk) bool) {
		for range n {
			if !yield(sdk.Text(streamText)) {
				return
			}
		}
	}, nil
}

// chunkFrame is a stream chunk notification as the SDK writes it.
type chunkFrame struct {
	JSONRPC string                      `json:"jsonrpc"`
	Method  string                      `json:"method"`
	Params  extension.StreamChunkParams `json:"params"`
}

// pipeChunks is the stream-pipe peer's answer to a line "<count>
// <streamId>": that many of the streamer's chunk frames, as the SDK
// numbers them, through a buffered writer flushed when full and at the
// end.
func pipeChunks(line []byte, out *bufio.Writer) error {
	var n int64
	var id string
	if _, err := fmt.Sscan(string(line), &n, &id); err != nil {
		return err
	}
	f := chunkFrame{JSONRPC: "2.0", Method: extension.MethodStreamChunk, Params: extension.StreamChunkParams{StreamID: id, Chunk: sdk.Text(streamText)}}
	for seq := int64(1); seq <= n; seq++ {
		f.Params.Seq = seq
		b, _ := json.Marshal(f) // a text chunk always encodes
		out.Write(b)
		out.WriteByte('\n')
	}
	return nil
}

// hashContent is the content-pipe peer: it reads lines of base64 until
// an empty one, decodes them into one payload of its own, as the SDK
// does, and answers the payload's hex SHA-256.
func hashContent() error {
	var payload []byte
	return answerLines(func(line []byte, out *bufio.Writer) error {
		line = bytes.TrimSuffix(line, []byte("\n"))
		if len(line) == 0 {
			sum := sha256.Sum256(payload)
			fmt.Fprintln(out, hex.EncodeToString(sum[:]))
			payload = nil
			return nil
		}
		if payload == nil {
			payload = make([]byte, 0, extension.FrameBytes)
		}
		var err error
		payload, err = base64.StdEncoding.AppendDecode(payload, line)
		return err
	})
}
