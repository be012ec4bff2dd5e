package extension_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reasonix-ext/extension"
)

// frameLog collects the frames a Host's tap sees, for tests that look at
// the wire.
type frameLog struct {
	mu     sync.Mutex
	frames []string // "<" inbound, ">" outbound, then the frame
	grew   chan struct{}
}

func newFrameLog() *frameLog { return &frameLog{grew: make(chan struct{}, 1)} }

func (l *frameLog) tap(inbound bool, frame []byte) {
	dir := ">"
	if inbound {
		dir = "<"
	}
	l.mu.Lock()
	l.frames = append(l.frames, dir+string(frame))
	l.mu.Unlock()
	select {
	case l.grew <- struct{}{}:
	default:
	}
}

// matching returns the frames that contain every one of parts.
func (l *frameLog) matching(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, f := range l.frames {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(f, p)
		}
		if ok {
			out = append(out, f)
		}
	}
	return out
}

// await returns the first frame containing every one of parts, waiting
// for it as frames come; reaching the guard fails the test (it hung).
func (l *frameLog) await(t *testing.T, parts ...string) string {
	t.Helper()
	guard := time.After(15 * time.Second)
	for {
		if m := l.matching(parts...); len(m) > 0 {
			return m[0]
		}
		select {
		case <-l.grew:
		case <-guard:
			t.Fatalf("no frame with %q came", parts)
		}
	}
}

// drain reads a stream to its end.
func drain(st *extension.Stream) ([]extension.ProviderChunk, error) {
	var chunks []extension.ProviderChunk
	for {
		c, err := st.Recv()
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return chunks, err
		}
		chunks = append(chunks, c)
	}
}

func TestConformanceProviderCatalogScenario6(t *testing.T) {
	rt, _ := conformanceRuntime(t, nil)
	cat, err := rt.Catalog(bg)
	if err != nil || len(cat) != 1 {
		t.Fatalf("Catalog = %+v, %v; want the one descriptor", cat, err)
	}
	d := cat[0]
	if d.Ref != "plugin/conformance-ext/fake/echo" || d.Model != "echo" || !d.Tools || !d.Reasoning || d.ContextWindow != 64000 {
		t.Fatalf("descriptor %+v", d)
	}
}

// echoAnswer is the stream the reference plugin serves (conformance
// scenario 7).
var echoAnswer = []extension.ProviderChunk{
	{Type: extension.ChunkText, Text: "fake-hello "},
	{Type: extension.ChunkText, Text: "fake-world"},
	{Type: extension.ChunkToolCall, ToolCall: &extension.ProviderToolCall{ID: "call-1", Name: "lookup", Arguments: `{"query":"reasonix"}`}},
	{Type: extension.ChunkUsage, Usage: &extension.ProviderUsage{PromptTokens: 5, CompletionTokens: 7, TotalTokens: 12, CacheHitTokens: 2, CacheMissTokens: 3, ReasoningTokens: 4, FinishReason: "stop"}},
	{Type: extension.ChunkDone},
}

func TestConformanceProviderStreamScenario7D21(t *testing.T) {
	log := newFrameLog()
	rt, _ := conformanceRuntimeWith(t, nil, func(h *extension.Host) { h.Conn.Tap = log.tap })
	st, err := rt.OpenStream(bg, "plugin/conformance-ext/fake/echo", "low", extension.ProviderRequest{
		Messages: []extension.ProviderMessage{{Role: extension.RoleUser, Content: "hi"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !regexp.MustCompile(`^es_[0-9a-f]{24}$`).MatchString(st.ID()) {
		t.Fatalf("stream id %q, want es_ and 24 lowercase hex digits", st.ID())
	}
	chunks, err := drain(st)
	if err != nil || !reflect.DeepEqual(chunks, echoAnswer) {
		t.Fatalf("stream = %+v, %v; want the five chunks of scenario 7 and a clean end", chunks, err)
	}
	open := log.await(t, ">", extension.MethodStreamOpen)
	for _, want := range []string{`"streamId":"` + st.ID() + `"`, `"seqBase":1`, `"model":"echo"`, `"effort":"low"`, `"providerRef":"plugin/conformance-ext/fake/echo"`, `"tools":[]`} {
		if !strings.Contains(open, want) {
			t.Errorf("open frame %s lacks %s", open, want)
		}
	}
	for seq := 1; seq <= 5; seq++ {
		if n := len(log.matching("<", extension.MethodStreamChunk, `"seq":`+strconv.Itoa(seq)+`,`)); n != 1 {
			t.Errorf("%d chunk frames with seq %d, want 1", n, seq)
		}
	}
	if end := log.await(t, "<", extension.MethodStreamEnd); !strings.Contains(end, `"params":{"streamId":"`+st.ID()+`","lastSeq":5}`) {
		t.Errorf("end frame %s, want lastSeq 5 with no error or interrupted", end)
	}
}

func TestConformanceProviderStreamCancelScenario8D21(t *testing.T) {
	log := newFrameLog()
	rt, _ := conformanceRuntimeWith(t, nil, func(h *extension.Host) { h.Conn.Tap = log.tap }, "FULLSIDECAR_STREAM_INTERVAL_MS=150")
	st, err := rt.OpenStream(bg, "plugin/conformance-ext/fake/echo", "", extension.ProviderRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.Recv()
	if err != nil || first.Text != "fake-hello " {
		t.Fatalf("first chunk %+v, %v", first, err)
	}
	st.Close()
	if c, err := st.Recv(); !errors.Is(err, extension.ReasonStreamCancelled) {
		t.Fatalf("Recv after Close = %+v, %v; want stream_cancelled", c, err)
	}
	log.await(t, ">", extension.MethodStreamCancel, st.ID())
	end := log.await(t, "<", extension.MethodStreamEnd, st.ID())
	var frame struct {
		Params extension.StreamEndParams `json:"params"`
	}
	if err := json.Unmarshal([]byte(end[1:]), &frame); err != nil || !frame.Params.Interrupted || frame.Params.LastSeq < 1 {
		t.Fatalf("end frame %s, want interrupted:true and lastSeq >= 1", end)
	}
	// No chunk above lastSeq, and none after the end.
	for _, f := range log.matching("<", extension.MethodStreamChunk, st.ID()) {
		var c struct {
			Params extension.StreamChunkParams `json:"params"`
		}
		json.Unmarshal([]byte(f[1:]), &c)
		if c.Params.Seq > frame.Params.LastSeq {
			t.Errorf("chunk %d was sent past lastSeq %d", c.Params.Seq, frame.Params.LastSeq)
		}
	}
	if n := len(log.matching("<", extension.MethodStreamChunk, st.ID())); int64(n) != frame.Params.LastSeq {
		t.Errorf("%d chunks sent, lastSeq %d", n, frame.Params.LastSeq)
	}
}

// streamPlugin is the stream fixture as plugin name, serving
// plugin/<name>/fx/m, with extra environment in env.
func streamPlugin(name string, env map[string]string) plugin {
	e := map[string]string{"FIXTURE_DECL": `{"providers":[{"ref":"plugin/` + name + `/fx/m","model":"m"}]}`}
	for k, v := range env {
		e[k] = v
	}
	return plugin{name: name, fixture: "stream", env: e, runtime: map[string]any{"capabilities": []string{"providers"}}}
}

// ask opens a stream of ref whose request's one message says what.
func ask(t *testing.T, rt *extension.Runtime, ref, what string) *extension.Stream {
	t.Helper()
	st, err := rt.OpenStream(bg, ref, "", extension.ProviderRequest{Messages: []extension.ProviderMessage{{Role: extension.RoleUser, Content: what}}})
	if err != nil {
		t.Fatalf("OpenStream(%s, %q): %v", ref, what, err)
	}
	t.Cleanup(st.Close)
	return st
}

func TestStreamChunkTypesRoundTripThroughTheSDKD21(t *testing.T) {
	rt := startRuntime(t, nil, streamPlugin("fx", nil))
	chunks, err := drain(ask(t, rt, "plugin/fx/fx/m", "types"))
	// Seven types travel as chunks, usage with its cache and reasoning
	// tokens; the SDK ends the stream with an error chunk's message
	// instead of sending it (PROTOCOL.md §5.6), and the host redacts it.
	want := []extension.ProviderChunk{
		{Type: extension.ChunkText, Text: "some text"},
		{Type: extension.ChunkReasoning, Text: "thinking", Signature: "sig-1"},
		{Type: extension.ChunkToolCallStart, ToolCall: &extension.ProviderToolCall{ID: "call-1", Name: "lookup"}},
		{Type: extension.ChunkToolCallArgsDelta, ToolCall: &extension.ProviderToolCall{ID: "call-1", Name: "lookup"}, ArgChars: 11},
		{Type: extension.ChunkToolCall, ToolCall: &extension.ProviderToolCall{ID: "call-1", Name: "lookup", Arguments: `{"q":"x"}`, ThoughtSignature: "ts"}},
		{Type: extension.ChunkUsage, Usage: &extension.ProviderUsage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3, CacheHitTokens: 4, CacheMissTokens: 5, ReasoningTokens: 6, FinishReason: "stop"}},
		{Type: extension.ChunkDone},
	}
	if !reflect.DeepEqual(chunks, want) {
		t.Fatalf("chunks %+v\nwant %+v", chunks, want)
	}
	if !errors.Is(err, extension.ReasonProviderFailed) || !strings.Contains(err.Error(), "upstream failed") || strings.Contains(err.Error(), "sk-proj-") {
		t.Fatalf("outcome %v, want provider_failed with the error chunk's message, redacted", err)
	}
}

func TestSixteenConcurrentStreamsStayApartD21(t *testing.T) {
	rt := startRuntime(t, nil, streamPlugin("fx", nil))
	const streams, chunks = 16, 300
	var wg sync.WaitGroup
	errs := make([]error, streams)
	for i := range streams {
		st := ask(t, rt, "plugin/fx/fx/m", "ids:300")
		wg.Go(func() {
			got, err := drain(st)
			switch {
			case err != nil:
				errs[i] = err
			case len(got) != chunks:
				errs[i] = errors.New("stream " + st.ID() + " got " + strconv.Itoa(len(got)) + " chunks")
			default:
				for j, c := range got {
					if c.Text != st.ID()+":"+strconv.Itoa(j+1) {
						errs[i] = errors.New("stream " + st.ID() + " got " + c.Text + " at " + strconv.Itoa(j+1))
						break
					}
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func TestLongStreamArrivesCompleteAndInOrderD21(t *testing.T) {
	n := 200_000
	if testing.Short() {
		n = 20_000
	}
	rt := startRuntime(t, nil, streamPlugin("fx", nil))
	st := ask(t, rt, "plugin/fx/fx/m", "count:"+strconv.Itoa(n))
	for i := 1; ; i++ {
		c, err := st.Recv()
		if err == io.EOF && i == n+1 {
			return
		}
		if err != nil || c.Text != strconv.Itoa(i) {
			t.Fatalf("chunk %d = %+v, %v", i, c, err)
		}
	}
}

func TestStreamOfAKilledSidecarIsInterruptedAndNeverFallsBackD13(t *testing.T) {
	mark := t.TempDir() + "/other-called"
	rt := startRuntime(t, nil, streamPlugin("fx", nil), streamPlugin("other", map[string]string{"FIXTURE_MARK": mark}))
	st := ask(t, rt, "plugin/fx/fx/m", "hold")
	if c, err := st.Recv(); err != nil || c.Text != "first" {
		t.Fatalf("first chunk %+v, %v", c, err)
	}
	s := rt.Sidecar("fx")
	proc, err := os.FindProcess(s.PID())
	if err == nil {
		err = proc.Kill()
	}
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Recv()
	if !errors.Is(err, extension.ReasonProviderInterrupted) || !strings.Contains(err.Error(), "fx") {
		t.Fatalf("Recv after the kill = %v, want provider_interrupted naming the plugin", err)
	}
	<-s.Done()
	_, err = rt.OpenStream(bg, "plugin/fx/fx/m", "", extension.ProviderRequest{})
	if !errors.Is(err, extension.ReasonProviderInterrupted) || !strings.Contains(err.Error(), "fx") {
		t.Fatalf("second open = %v, want provider_interrupted at once", err)
	}
	if n := s.Stats().FramesOut; n > 4 { // initialize, initialized, open: nothing after the crash
		t.Errorf("%d frames written to the crashed sidecar", n)
	}
	rt.Close()
	if _, err := os.Stat(mark); !os.IsNotExist(err) {
		t.Fatalf("the other plugin's provider was called (%v): a crashed provider must never be replaced", err)
	}
}

func TestStreamWhoseReaderStopsFailsAloneD26(t *testing.T) {
	rt := startRuntime(t, func(h *extension.Host) {
		h.StreamQueue, h.StreamStallTimeout = 4, 50*time.Millisecond
	}, streamPlugin("fx", nil))
	stuck := ask(t, rt, "plugin/fx/fx/m", "count:1000") // never read until the end
	moving := ask(t, rt, "plugin/fx/fx/m", "count:1000")
	if got, err := drain(moving); err != nil || len(got) != 1000 {
		t.Fatalf("the stream being read got %d chunks, %v; want all 1000", len(got), err)
	}
	got, err := drain(stuck)
	if !errors.Is(err, extension.ReasonProviderInterrupted) || !strings.Contains(err.Error(), "took no chunk") || len(got) > 3 {
		t.Fatalf("the stream nobody read: %d chunks, %v; want at most its queue (3) then an interruption", len(got), err)
	}
	// The connection survived: a new stream still works.
	if got, err := drain(ask(t, rt, "plugin/fx/fx/m", "count:3")); err != nil || len(got) != 3 {
		t.Fatalf("a later stream: %d chunks, %v", len(got), err)
	}
}

// rawStreamPlugin is the raw-stream fixture declaring plugin/raw/fx/m;
// frames are the lines it writes for each stream/open.
func rawStreamPlugin(frames ...string) plugin {
	if len(frames) == 0 {
		frames = []string{"$ANSWER"}
	}
	return plugin{name: "raw", fixture: "raw-stream", runtime: map[string]any{"capabilities": []string{"providers"}}, env: map[string]string{
		"FIXTURE_RESULT": `{"protocolVersion":"1","name":"raw","version":"1","stateSchemaVersion":0,"providers":[{"ref":"plugin/raw/fx/m","model":"m"}]}`,
		"FIXTURE_FRAMES": strings.Join(frames, "\n"),
	}}
}

func chunkLine(seq int, text string) string {
	return `{"jsonrpc":"2.0","method":"extension/provider/stream/chunk","params":{"streamId":"$ID","seq":` + strconv.Itoa(seq) + `,"chunk":{"type":"text","text":"` + text + `"}}}`
}

func endLine(members string) string {
	return `{"jsonrpc":"2.0","method":"extension/provider/stream/end","params":{"streamId":"$ID",` + members + `}}`
}

func texts(chunks []extension.ProviderChunk) string {
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString(c.Text)
	}
	return b.String()
}

func TestStreamReassemblyThroughTheHostD21(t *testing.T) {
	rt := startRuntime(t, nil, rawStreamPlugin(
		chunkLine(3, "c"), chunkLine(1, "a"), // before the open's answer: kept
		"$ANSWER",
		chunkLine(1, "A"), // a replay: dropped
		`{"jsonrpc":"2.0","method":"extension/provider/stream/chunk","params":{"streamId":"$ID","seq":0,"chunk":{"type":"text"}}}`,                                    // malformed: dropped
		`{"jsonrpc":"2.0","method":"extension/provider/stream/chunk","params":{"streamId":"es_000000000000000000000000","seq":2,"chunk":{"type":"text","text":"X"}}}`, // another stream: dropped
		chunkLine(2, "b"),
		endLine(`"lastSeq":3`),
		chunkLine(4, "late"), // after the end of a finished stream: dropped
	))
	chunks, err := drain(ask(t, rt, "plugin/raw/fx/m", ""))
	if err != nil || texts(chunks) != "abc" {
		t.Fatalf("stream %q, %v; want abc and a clean end", texts(chunks), err)
	}
	// The connection survived all of it.
	if chunks, err := drain(ask(t, rt, "plugin/raw/fx/m", "")); err != nil || texts(chunks) != "abc" {
		t.Fatalf("second stream %q, %v", texts(chunks), err)
	}
}

func TestStreamOutcomesThroughTheHostD21(t *testing.T) {
	secret := "sk-proj-FAKEfake0123456789abcdefFAKE"
	cases := []struct {
		name   string
		frames []string
		chunks string
		want   []extension.Reason
		text   string
	}{
		{"gap after the end", []string{"$ANSWER", chunkLine(1, "a"), chunkLine(3, "c"), chunkLine(6, "f"), endLine(`"lastSeq":7`)},
			"a", []extension.Reason{extension.ReasonStreamGap, extension.ReasonProviderInterrupted}, "missing chunks 2, 4-5, 7"},
		{"conflicting end", []string{"$ANSWER", chunkLine(1, "a"), chunkLine(3, "c"), endLine(`"lastSeq":3`), endLine(`"lastSeq":4`)},
			"a", []extension.Reason{extension.ReasonProviderInterrupted}, "differs"},
		{"beyond the window", []string{"$ANSWER", chunkLine(1, "a"), chunkLine(258, "x")},
			"a", []extension.Reason{extension.ReasonProviderInterrupted}, "window"},
		{"end with an error", []string{"$ANSWER", chunkLine(1, "a"), endLine(`"lastSeq":1,"error":"quota exceeded for ` + secret + `"`)},
			"a", []extension.Reason{extension.ReasonProviderFailed}, "quota exceeded"},
		{"end interrupted", []string{"$ANSWER", endLine(`"lastSeq":0,"interrupted":true`)},
			"", []extension.Reason{extension.ReasonProviderInterrupted}, ""},
		{"zero chunks", []string{"$ANSWER", endLine(`"lastSeq":0`)}, "", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rt := startRuntime(t, func(h *extension.Host) { h.EndGapTimeout = 20 * time.Millisecond }, rawStreamPlugin(c.frames...))
			chunks, err := drain(ask(t, rt, "plugin/raw/fx/m", ""))
			if texts(chunks) != c.chunks {
				t.Errorf("chunks %q, want %q", texts(chunks), c.chunks)
			}
			if c.want == nil && err != nil {
				t.Fatalf("outcome %v, want a clean end", err)
			}
			for _, r := range c.want {
				if !errors.Is(err, r) {
					t.Errorf("outcome %v does not match %s", err, r)
				}
			}
			if err != nil && (!strings.Contains(err.Error(), c.text) || strings.Contains(err.Error(), secret)) {
				t.Errorf("outcome %q, want it to say %q, redacted", err, c.text)
			}
		})
	}
}

func TestStreamErrorChunkIsRedactedAgainD21(t *testing.T) {
	secret := "sk-proj-FAKEfake0123456789abcdefFAKE"
	rt := startRuntime(t, nil, rawStreamPlugin("$ANSWER",
		`{"jsonrpc":"2.0","method":"extension/provider/stream/chunk","params":{"streamId":"$ID","seq":1,"chunk":{"type":"error","error":{"code":"provider_interrupted","message":"lost `+secret+` \u001b[2J"}}}}`,
		endLine(`"lastSeq":1`)))
	chunks, err := drain(ask(t, rt, "plugin/raw/fx/m", ""))
	if err != nil || len(chunks) != 1 || chunks[0].Error == nil {
		t.Fatalf("chunks %+v, %v; want the error chunk delivered", chunks, err)
	}
	if e := chunks[0].Error; e.Code != extension.ProviderErrorInterrupted || strings.Contains(e.Message, secret) || strings.Contains(e.Message, "\x1b") || !strings.Contains(e.Message, "lost") {
		t.Fatalf("error chunk %+v, want its message redacted and escaped (D25, D27)", e)
	}
}

func TestStreamOpenFailuresD21(t *testing.T) {
	declined := rawStreamPlugin()
	declined.env["FIXTURE_OPEN"] = `"result":{"accepted":false}`
	broken := rawStreamPlugin()
	broken.name = "broken"
	broken.env["FIXTURE_RESULT"] = strings.ReplaceAll(broken.env["FIXTURE_RESULT"], "plugin/raw/", "plugin/broken/")
	broken.env["FIXTURE_OPEN"] = `"error":{"code":-32000,"message":"gone","data":{"reason":"provider_interrupted","retryable":true}}`
	rt := startRuntime(t, nil, declined, broken, streamPlugin("fx", nil))
	req := extension.ProviderRequest{}
	for _, c := range []struct {
		ref  string
		want extension.Reason
		text string
	}{
		{"plugin/raw/fx/m", extension.ReasonProviderFailed, "declined provider stream plugin/raw/fx/m"},
		{"plugin/broken/fx/m", extension.ReasonProviderInterrupted, "gone"},
		{"plugin/fx/fx/other", extension.ReasonCapabilityNotDeclared, "does not declare"},
		{"plugin/nobody/fx/m", extension.ReasonProviderInterrupted, "not running"},
		{"plugin/fx/fx", "", ""}, // a prefix of a declared ref resolves to it
	} {
		st, err := rt.OpenStream(bg, c.ref, "", req)
		if c.want == "" {
			if err != nil {
				t.Errorf("OpenStream(%s) = %v, want the declared plugin/fx/fx/m", c.ref, err)
			} else {
				st.Close()
			}
			continue
		}
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("OpenStream(%s) = %v, want %s saying %q", c.ref, err, c.want, c.text)
		}
	}
	st, err := rt.OpenStream(bg, "plugin/fx/fx/m", "", extension.ProviderRequest{Messages: []extension.ProviderMessage{{Content: "refuse"}}})
	if !errors.Is(err, extension.ReasonProviderFailed) {
		t.Errorf("a refused stream: %v, %v; want provider_failed", st, err)
	}
	if _, err := rt.OpenStream(bg, "openai/gpt", "", req); err == nil || !strings.Contains(err.Error(), "not a plugin provider ref") {
		t.Errorf("a host ref: %v", err)
	}
}

func TestStreamCallerContextCancelsD21(t *testing.T) {
	log := newFrameLog()
	rt := startRuntime(t, func(h *extension.Host) { h.Conn.Tap = log.tap }, streamPlugin("fx", nil))
	ctx, cancel := context.WithCancel(bg)
	st, err := rt.OpenStream(ctx, "plugin/fx/fx/m", "", extension.ProviderRequest{Messages: []extension.ProviderMessage{{Content: "hold"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := st.Recv(); !errors.Is(err, extension.ReasonStreamCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Recv after cancel = %v, want stream_cancelled wrapping the context's error", err)
	}
	log.await(t, ">", extension.MethodStreamCancel, st.ID())
	end := log.await(t, "<", extension.MethodStreamEnd, st.ID())
	if !strings.Contains(end, `"lastSeq":1,"interrupted":true`) {
		t.Fatalf("the sidecar's end %s, want lastSeq 1, interrupted", end)
	}
}

func TestAnOpenStreamKeepsTheGenerationBusyD14(t *testing.T) {
	p := streamPlugin("fx", nil)
	home := installPlugins(t, p)
	h := testHost(home)
	rt, err := h.Start(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	st := ask(t, rt, "plugin/fx/fx/m", "hold")
	// While the stream is open the generation is not idle: a reload waits
	// for it, here until its context gives up.
	ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
	defer cancel()
	if _, err := h.Reload(ctx, rt); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Reload with a stream open = %v, want it to wait for idle", err)
	}
	st.Close()
	next, err := h.Reload(bg, rt)
	if err != nil {
		t.Fatalf("Reload once the stream closed: %v", err)
	}
	next.Close()
}

func TestStreamHoldsBoundedBytesD21(t *testing.T) {
	text := strings.Repeat("t", 300)
	frames := []string{"$ANSWER"} // seq 1 never comes: everything waits
	for seq := 2; seq <= 8; seq++ {
		frames = append(frames, chunkLine(seq, text))
	}
	rt := startRuntime(t, func(h *extension.Host) { h.MaxStreamBytes = 1000 }, rawStreamPlugin(frames...))
	chunks, err := drain(ask(t, rt, "plugin/raw/fx/m", ""))
	if len(chunks) != 0 || !errors.Is(err, extension.ReasonProviderInterrupted) || !strings.Contains(err.Error(), "1000 bytes") {
		t.Fatalf("%d chunks, %v; want an interruption once 1000 bytes wait", len(chunks), err)
	}
}

func TestStreamChunkStringsReachTheCallerEscapedD27(t *testing.T) {
	rt := startRuntime(t, nil, rawStreamPlugin("$ANSWER",
		`{"jsonrpc":"2.0","method":"extension/provider/stream/chunk","params":{"streamId":"$ID","seq":1,"chunk":{"type":"text","text":"ok\n\tthen \u001b]0;owned\u0007 \u009b31m"}}}`,
		`{"jsonrpc":"2.0","method":"extension/provider/stream/chunk","params":{"streamId":"$ID","seq":2,"chunk":{"type":"tool_call","toolCall":{"id":"c\u001b[2J","name":"n","arguments":"{}"}}}}`,
		`{"jsonrpc":"2.0","method":"extension/provider/stream/chunk","params":{"streamId":"$ID","seq":3,"chunk":{"type":"usage","usage":{"promptTokens":1,"completionTokens":1,"totalTokens":2,"cacheHitTokens":0,"cacheMissTokens":0,"reasoningTokens":0,"finishReason":"stop\u001b[2J"}}}}`,
		endLine(`"lastSeq":3`)))
	chunks, err := drain(ask(t, rt, "plugin/raw/fx/m", ""))
	if err != nil || len(chunks) != 3 {
		t.Fatalf("chunks %+v, %v", chunks, err)
	}
	if got, want := chunks[0].Text, "ok\n\tthen \\x1b]0;owned\\x07 \\u009b31m"; got != want {
		t.Fatalf("text %q, want %q: tab and newline kept, every other control escaped", got, want)
	}
	if id := chunks[1].ToolCall.ID; id != `c\x1b[2J` {
		t.Fatalf("tool call id %q, want it escaped", id)
	}
	if r := chunks[2].Usage.FinishReason; r != `stop\x1b[2J` {
		t.Fatalf("finish reason %q, want it escaped", r)
	}
}
