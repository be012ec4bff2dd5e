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
