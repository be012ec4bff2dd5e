package sdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reasonix-ext/extension"
	"github.com/reasonix-ext/extension/sdk"
)

// testProvider serves a catalog and streams from funcs.
type testProvider struct {
	catalog func(ctx context.Context) ([]extension.ProviderDescriptor, error)
	stream  func(ctx context.Context, open *extension.StreamOpenParams) (iter.Seq[extension.ProviderChunk], error)
}

func (p testProvider) Catalog(ctx context.Context) ([]extension.ProviderDescriptor, error) {
	return p.catalog(ctx)
}

func (p testProvider) Stream(ctx context.Context, open *extension.StreamOpenParams) (iter.Seq[extension.ProviderChunk], error) {
	return p.stream(ctx, open)
}

// yielding streams chunks.
func yielding(chunks ...extension.ProviderChunk) testProvider {
	return testProvider{stream: func(context.Context, *extension.StreamOpenParams) (iter.Seq[extension.ProviderChunk], error) {
		return slices.Values(chunks), nil
	}}
}

func withProvider(t *testing.T, pr sdk.Provider) *peer {
	t.Helper()
	opts := minimalOptions
	opts.Provider = pr
	return started(t, opts)
}

func openStream(id int, streamID string, seqBase int64) string {
	return request(id, extension.MethodStreamOpen, fmt.Sprintf(`{"streamId":%q,"providerRef":"plugin/t/p/m","model":"m","request":{"messages":[],"tools":[],"maxTokens":0},"seqBase":%d}`, streamID, seqBase))
}

// streamFrames reads the frames of one stream up to its end.
func (p *peer) streamFrames() (seqs []int64, chunks []extension.ProviderChunk, end extension.StreamEndParams) {
	p.t.Helper()
	for {
		f := p.recv()
		switch f.Method {
		case extension.MethodStreamChunk:
			var c extension.StreamChunkParams
			if err := extension.Decode(f.Method, f.Params, &c); err != nil {
				p.t.Fatalf("chunk %s: %v", f.raw, err)
			}
			seqs, chunks = append(seqs, c.Seq), append(chunks, c.Chunk)
		case extension.MethodStreamEnd:
			if err := extension.Decode(f.Method, f.Params, &end); err != nil {
				p.t.Fatalf("end %s: %v", f.raw, err)
			}
			return
		default:
			p.t.Fatalf("got %s inside a stream", f.raw)
		}
	}
}

func TestStreamNumbersFromMaxOfSeqBaseAndOneD21(t *testing.T) {
	for _, c := range []struct {
		base  int64
		first int64
	}{{0, 1}, {1, 1}, {5, 5}} {
		p := withProvider(t, yielding(sdk.Text("a"), sdk.Text("b"), sdk.Done()))
		// The answer comes before any chunk (PROTOCOL.md §5.6).
		wantResult(t, p.call(openStream(2, "s-full", c.base)), "2", acceptedResult)
		seqs, chunks, end := p.streamFrames()
		if !slices.Equal(seqs, []int64{c.first, c.first + 1, c.first + 2}) || len(chunks) != 3 || end.LastSeq != c.first+2 || end.Error != "" || end.Interrupted {
			t.Fatalf("seqBase %d: seqs %v, end %+v", c.base, seqs, end)
		}
	}
}

func TestStreamEndsWithTheErrorInsteadOfAnErrorChunk(t *testing.T) {
	for _, c := range []struct {
		name  string
		chunk extension.ProviderChunk
		want  string
	}{
		{"error chunk", sdk.ErrorChunk("quota exceeded"), "quota exceeded"},
		{"blank error chunk", sdk.ErrorChunk(""), extension.NewError(extension.ReasonProviderFailed, "").Message},
		{"invalid chunk", extension.ProviderChunk{Type: extension.ChunkUsage}, "the extension provider produced an invalid chunk"},
		{"unknown type", extension.ProviderChunk{Type: "image"}, "the extension provider produced an invalid chunk"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := withProvider(t, yielding(sdk.Text("a"), c.chunk, sdk.Text("never")))
			wantResult(t, p.call(openStream(2, "s", 1)), "2", acceptedResult)
			seqs, _, end := p.streamFrames()
			if !slices.Equal(seqs, []int64{1}) || end.LastSeq != 1 || end.Error != c.want || end.Interrupted {
				t.Fatalf("seqs %v, end %+v; want one chunk, then the end with error %q", seqs, end, c.want)
			}
		})
	}
}

func TestStreamCancelStopsTheStreamD21(t *testing.T) {
	p := withProvider(t, testProvider{stream: func(ctx context.Context, _ *extension.StreamOpenParams) (iter.Seq[extension.ProviderChunk], error) {
		return func(yield func(extension.ProviderChunk) bool) {
			if yield(sdk.Text("first")) {
				<-ctx.Done() // the host's cancel ends it
				yield(sdk.Text("after the cancel"))
			}
		}, nil
	}})
	wantResult(t, p.call(openStream(2, "s", 1)), "2", acceptedResult)
	if f := p.recv(); f.Method != extension.MethodStreamChunk {
		t.Fatalf("got %s, want the first chunk", f.raw)
	}
	// The answer and the end may come in either order; no chunk comes.
	p.send(request(3, extension.MethodStreamCancel, `{"streamId":"s"}`))
	var end extension.StreamEndParams
	for answered, ended := false, false; !answered || !ended; {
		switch f := p.recv(); f.Method {
		case "":
			wantResult(t, f, "3", `{"cancelled":true}`)
			answered = true
		case extension.MethodStreamEnd:
			extension.Decode(f.Method, f.Params, &end)
			ended = true
		default:
			t.Fatalf("after cancel: %s", f.raw)
		}
	}
	if end.LastSeq != 1 || !end.Interrupted || end.Error != "" {
		t.Fatalf("after cancel: end %+v; want interrupted, lastSeq 1", end)
	}
	wantResult(t, p.call(request(4, extension.MethodStreamCancel, `{"streamId":"s"}`)), "4", `{"cancelled":false}`)
	wantResult(t, p.call(request(5, extension.MethodStreamCancel, `{"streamId":"never-opened"}`)), "5", `{"cancelled":false}`)
}

func TestStreamOpenFailures(t *testing.T) {
	refuse := testProvider{stream: func(context.Context, *extension.StreamOpenParams) (iter.Seq[extension.ProviderChunk], error) {
		return nil, errors.New("no such model")
	}}
	p := withProvider(t, refuse)
	wantError(t, p.call(openStream(2, "s", 1)), "2", -32000, extension.ReasonProviderFailed)
	for i, params := range []string{
		`{"streamId":"","providerRef":"r","request":{"messages":[],"tools":[],"maxTokens":0},"seqBase":1}`,
		`{"streamId":"s","providerRef":"r","request":{"messages":null,"tools":[],"maxTokens":0},"seqBase":1}`,
		`{"streamId":"s","providerRef":"r","request":{"messages":[],"tools":[{"name":"t","parameters":[]}],"maxTokens":0},"seqBase":1}`,
		`{"streamId":"s","providerRef":"r","request":{"messages":[],"tools":[],"maxTokens":0},"seqBase":-1}`,
	} {
		id := fmt.Sprint(10 + i)
		wantError(t, p.call(request(10+i, extension.MethodStreamOpen, params)), id, -32602, extension.ReasonInvalidParams)
	}

	hold := withProvider(t, testProvider{stream: func(ctx context.Context, _ *extension.StreamOpenParams) (iter.Seq[extension.ProviderChunk], error) {
		return func(func(extension.ProviderChunk) bool) { <-ctx.Done() }, nil
	}})
	wantResult(t, hold.call(openStream(2, "dup", 1)), "2", acceptedResult)
	wantError(t, hold.call(openStream(3, "dup", 1)), "3", -32600, extension.ReasonProtocolError)

	none := started(t, minimalOptions)
	for i, m := range []string{extension.MethodProviderCatalog, extension.MethodStreamOpen, extension.MethodStreamCancel} {
		wantError(t, none.call(request(2+i, m, `{}`)), fmt.Sprint(2+i), -32601, extension.ReasonUnknownMethod)
	}
}

func TestCatalogAnswersTheProvidersDescriptors(t *testing.T) {
	descs := []extension.ProviderDescriptor{{Ref: "plugin/t/p/m", Model: "m", Tools: true}}
	p := withProvider(t, testProvider{catalog: func(context.Context) ([]extension.ProviderDescriptor, error) { return descs, nil }})
	wantResult(t, p.call(request(2, extension.MethodProviderCatalog, `{}`)), "2", `{"providers":[{"ref":"plugin/t/p/m","model":"m","tools":true}]}`)
	empty := withProvider(t, testProvider{catalog: func(context.Context) ([]extension.ProviderDescriptor, error) { return nil, nil }})
	wantResult(t, empty.call(request(2, extension.MethodProviderCatalog, `{}`)), "2", `{"providers":[]}`)
}

func TestServeRefusesProvidersItCannotServe(t *testing.T) {
	opts := minimalOptions
	opts.Providers = []extension.ProviderDescriptor{{Ref: "plugin/t/p/m"}}
	var out bytes.Buffer
	opts.Stdin, opts.Stdout = io.NopCloser(strings.NewReader(initializeRequest+"\n")), nopCloser{&out}
	if err := sdk.Serve(context.Background(), opts); !errors.Is(err, sdk.ErrProviderMissing) || !strings.Contains(err.Error(), "Options.Provider") {
		t.Fatalf("Serve = %v, want ErrProviderMissing saying what to set", err)
	}
	if out.Len() != 0 {
		t.Fatalf("Serve wrote %q before refusing", out.String())
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func TestChunkHelpersBuildValidChunksOfEachType(t *testing.T) {
	chunks := []extension.ProviderChunk{
		sdk.Text("t"), sdk.Reasoning("r", "sig"), sdk.ToolCallStart("c", "n"), sdk.ToolCallArgsDelta("c", "n", 3),
		sdk.ToolCall(extension.ProviderToolCall{ID: "c", Name: "n", Arguments: "{}"}), sdk.Usage(extension.ProviderUsage{TotalTokens: 1}),
		sdk.Done(), sdk.ErrorChunk("e"),
	}
	seen := map[extension.ChunkType]bool{}
	for _, c := range chunks {
		b, _ := json.Marshal(c)
		if err := extension.Validate("ProviderChunk", b); err != nil {
			t.Errorf("%s: %v", b, err)
		}
		seen[c.Type] = true
	}
	if len(seen) != 8 {
		t.Fatalf("helpers cover %d chunk types, want 8", len(seen))
	}
}

func TestOpenStreamsAreBoundedLikeCallbacks(t *testing.T) {
	opts := minimalOptions
	opts.MaxHandlers = 2
	opts.Provider = testProvider{stream: func(ctx context.Context, _ *extension.StreamOpenParams) (iter.Seq[extension.ProviderChunk], error) {
		return func(func(extension.ProviderChunk) bool) { <-ctx.Done() }, nil
	}}
	p := started(t, opts)
	wantResult(t, p.call(openStream(2, "a", 1)), "2", acceptedResult)
	wantResult(t, p.call(openStream(3, "b", 1)), "3", acceptedResult)
	wantError(t, p.call(openStream(4, "c", 1)), "4", -32099, "") // busy, and no data (D7's one exception)
	p.send(request(5, extension.MethodStreamCancel, `{"streamId":"a"}`))
	for answered, ended := false, false; !answered || !ended; { // in either order
		switch f := p.recv(); f.Method {
		case "":
			wantResult(t, f, "5", `{"cancelled":true}`)
			answered = true
		case extension.MethodStreamEnd:
			ended = true
		default:
			t.Fatalf("got %s", f.raw)
		}
	}
	wantResult(t, p.call(openStream(6, "c", 1)), "6", acceptedResult)
}

func TestSeqsNeverWrap(t *testing.T) {
	p := withProvider(t, yielding(sdk.Text("a"), sdk.Text("b")))
	wantResult(t, p.call(openStream(2, "s", math.MaxInt64)), "2", acceptedResult)
	seqs, _, end := p.streamFrames()
	if !slices.Equal(seqs, []int64{math.MaxInt64}) || end.LastSeq != math.MaxInt64 || end.Error == "" {
		t.Fatalf("seqs %v, end %+v; want the one seq that fits, then an error end", seqs, end)
	}
}

// TestD30ShutdownEndsEveryOpenStreamBeforeItsAnswer shuts the sidecar
// down 200 times with three streams: "done", which ended normally, "open",
// still producing, and "cancelled", whose cancel is sent right before the
// shutdown. Before the shutdown's answer "open" and "cancelled" each get
// exactly one stream/end, interrupted, with lastSeq 1; "done" gets no
// second end, and the sidecar stops after the answer.
func TestD30ShutdownEndsEveryOpenStreamBeforeItsAnswer(t *testing.T) {
	held := testProvider{stream: func(ctx context.Context, open *extension.StreamOpenParams) (iter.Seq[extension.ProviderChunk], error) {
		return func(yield func(extension.ProviderChunk) bool) {
			if yield(sdk.Text("first")) && open.StreamID != "done" {
				<-ctx.Done() // only the cancel or the shutdown stops it
			}
		}, nil
	}}
	for range 200 {
		p := withProvider(t, held)
		wantResult(t, p.call(openStream(2, "done", 1)), "2", acceptedResult)
		if seqs, _, end := p.streamFrames(); len(seqs) != 1 || end.Interrupted || end.LastSeq != 1 {
			t.Fatalf("done: seqs %v, end %+v; want one chunk and a normal end", seqs, end)
		}
		p.send(openStream(3, "open", 1))
		p.send(openStream(4, "cancelled", 1))
		for range 4 { // the two answers and the two first chunks, a chunk perhaps before the other's answer
			if f := p.recv(); f.Method != extension.MethodStreamChunk && !sameJSON(f.Result, acceptedResult) {
				t.Fatalf("got %s, want an open's answer or a stream's first chunk", f.raw)
			}
		}
		p.send(request(5, extension.MethodStreamCancel, `{"streamId":"cancelled"}`))
		p.send(request(6, extension.MethodShutdown, `{"timeoutMillis":5000}`))
		ends := map[string][]extension.StreamEndParams{}
		answered := false
		for f := range p.frames { // until the sidecar closes its stdout
			var fr frame
			if err := json.Unmarshal(f, &fr); err != nil {
				t.Fatalf("frame %s: %v", f, err)
			}
			switch {
			case fr.Method == extension.MethodStreamEnd && !answered:
				var end extension.StreamEndParams
				if err := extension.Decode(fr.Method, fr.Params, &end); err != nil {
					t.Fatalf("end %s: %v", f, err)
				}
				ends[end.StreamID] = append(ends[end.StreamID], end)
			case string(fr.ID) == "6":
				wantResult(t, fr, "6", acceptedResult)
				answered = true
			case string(fr.ID) != "5":
				t.Fatalf("got %s (after the shutdown's answer: %v); want the cancel's answer, the two ends, then the shutdown's answer", f, answered)
			}
		}
		want := extension.StreamEndParams{LastSeq: 1, Interrupted: true}
		for _, id := range []string{"open", "cancelled"} {
			want.StreamID = id
			if len(ends[id]) != 1 || ends[id][0] != want {
				t.Fatalf("%s: ends %+v before the shutdown's answer (answered: %v); want exactly %+v", id, ends[id], answered, want)
			}
		}
		if !answered || len(ends) != 2 {
			t.Fatalf("shutdown answered: %v, ends %+v; want the answer and no end for done", answered, ends)
		}
		if err := p.wait(); err != nil {
			t.Fatalf("Serve = %v, want nil after an answered shutdown", err)
		}
	}
}

// TestD30NoStreamOpensDuringShutdown: a stream/open that arrives while
// the shutdown is being handled is refused provider_interrupted, so no
// stream outlives the shutdown's answer without its end.
func TestD30NoStreamOpensDuringShutdown(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	opts := minimalOptions
	opts.Provider = yielding(sdk.Text("never"))
	opts.Shutdown = func(ctx context.Context) error {
		close(entered)
		select {
		case <-release:
		case <-ctx.Done(): // the test failed and closed the connection
		}
		return nil
	}
	p := started(t, opts)
	p.send(request(2, extension.MethodShutdown, `{"timeoutMillis":0}`))
	select {
	case <-entered:
	case <-time.After(hangGuard):
		t.Fatalf("the Shutdown callback did not run within %v (hang guard)", hangGuard)
	}
	wantError(t, p.call(openStream(3, "late", 1)), "3", -32000, extension.ReasonProviderInterrupted)
	close(release)
	wantResult(t, p.recv(), "2", acceptedResult)
}
