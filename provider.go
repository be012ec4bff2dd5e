package extension

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Provider methods (PROTOCOL.md §5).
const (
	MethodProviderCatalog = "extension/provider/catalog"
	MethodStreamOpen      = "extension/provider/stream/open"
	MethodStreamCancel    = "extension/provider/stream/cancel"
	MethodStreamChunk     = "extension/provider/stream/chunk"
	MethodStreamEnd       = "extension/provider/stream/end"
)

// ProviderDescriptor describes one model a sidecar serves, as
// plugin/<plugin>/<provider>/<model>. It never carries credentials.
type ProviderDescriptor struct {
	Ref                            string   `json:"ref" proto:"nonempty"`
	DisplayName                    string   `json:"displayName,omitempty"`
	Model                          string   `json:"model,omitempty"`
	ContextWindow                  int64    `json:"contextWindow,omitempty" proto:"min=0"`
	PricingCurrency                string   `json:"pricingCurrency,omitempty"`
	CacheHitPerMillion             float64  `json:"cacheHitPerMillion,omitempty" proto:"min=0"`
	InputPerMillion                float64  `json:"inputPerMillion,omitempty" proto:"min=0"`
	OutputPerMillion               float64  `json:"outputPerMillion,omitempty" proto:"min=0"`
	Vision                         bool     `json:"vision,omitempty"`
	Tools                          bool     `json:"tools,omitempty"`
	Reasoning                      bool     `json:"reasoning,omitempty"`
	Efforts                        []string `json:"efforts,omitempty"`
	DefaultEffort                  string   `json:"defaultEffort,omitempty"`
	ToolCallReasoning              bool     `json:"toolCallReasoning,omitempty"`
	ReasoningRoundTrip             bool     `json:"reasoningRoundTrip,omitempty"`
	WarnOnMissingToolCallReasoning bool     `json:"warnOnMissingToolCallReasoning,omitempty"`
}

// ProviderCatalogParams are the (empty) params of extension/provider/catalog.
type ProviderCatalogParams struct{}

// ProviderCatalogResult lists a sidecar's provider descriptors.
type ProviderCatalogResult struct {
	Providers []ProviderDescriptor `json:"providers"`
}

// Role is the author of a provider message.
type Role string

// The message roles.
const (
	RoleAssistant Role = "assistant"
	RoleSystem    Role = "system"
	RoleTool      Role = "tool"
	RoleUser      Role = "user"
)

func (Role) enumValues() []string {
	return enumStrings(RoleAssistant, RoleSystem, RoleTool, RoleUser)
}

// ProviderMessage is one conversation message. Its member names are
// snake_case on purpose (PROTOCOL.md §5.2).
type ProviderMessage struct {
	Role               Role               `json:"role,omitempty"`
	Content            string             `json:"content,omitempty" proto:"externalizable"`
	Images             []string           `json:"images,omitempty"`
	ReasoningContent   string             `json:"reasoning_content,omitempty"`
	ReasoningSignature string             `json:"reasoning_signature,omitempty"`
	ToolCalls          []ProviderToolCall `json:"tool_calls,omitempty"`
	ToolCallID         string             `json:"tool_call_id,omitempty"`
	Name               string             `json:"name,omitempty"`
}

// ProviderToolCall is one tool call; Arguments is JSON text.
type ProviderToolCall struct {
	ID               string `json:"id" proto:"nonempty"`
	Name             string `json:"name" proto:"nonempty"`
	Arguments        string `json:"arguments"`
	ThoughtSignature string `json:"thought_signature,omitempty"`
}

// ProviderToolSchema offers one tool to the model; Parameters must be a
// JSON object (PROTOCOL.md §5.2).
type ProviderToolSchema struct {
	Name        string          `json:"name" proto:"nonempty"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters" proto:"object"`
}

// ProviderResponseFormat asks for a response format such as "json_object".
type ProviderResponseFormat struct {
	Type string `json:"type" proto:"nonempty"`
}

// ProviderRequest is a credential-free model request.
type ProviderRequest struct {
	Messages       []ProviderMessage       `json:"messages"`
	Tools          []ProviderToolSchema    `json:"tools"`
	Temperature    *float64                `json:"temperature,omitempty"`
	MaxTokens      int64                   `json:"maxTokens" proto:"min=0"`
	ResponseFormat *ProviderResponseFormat `json:"responseFormat,omitempty"`
}

// ProviderUsage is token accounting, cache hits and misses included.
type ProviderUsage struct {
	PromptTokens     int64  `json:"promptTokens" proto:"min=0"`
	CompletionTokens int64  `json:"completionTokens" proto:"min=0"`
	TotalTokens      int64  `json:"totalTokens" proto:"min=0"`
	CacheHitTokens   int64  `json:"cacheHitTokens" proto:"min=0"`
	CacheMissTokens  int64  `json:"cacheMissTokens" proto:"min=0"`
	ReasoningTokens  int64  `json:"reasoningTokens" proto:"min=0"`
	FinishReason     string `json:"finishReason,omitempty"`
}

// ProviderErrorCode classifies a provider failure chunk.
type ProviderErrorCode string

// The provider error codes.
const (
	ProviderErrorFailed      ProviderErrorCode = "provider_failed"
	ProviderErrorInterrupted ProviderErrorCode = "provider_interrupted"
)

func (ProviderErrorCode) enumValues() []string {
	return enumStrings(ProviderErrorFailed, ProviderErrorInterrupted)
}

// ProviderError is the payload of an error chunk; Message must already be
// redacted by its producer (the host redacts it again).
type ProviderError struct {
	Code    ProviderErrorCode `json:"code"`
	Message string            `json:"message" proto:"nonempty"`
}

// ChunkType is the type of a stream chunk (PROTOCOL.md §5.3).
type ChunkType string

// The chunk types.
const (
	ChunkDone              ChunkType = "done"
	ChunkError             ChunkType = "error"
	ChunkReasoning         ChunkType = "reasoning"
	ChunkText              ChunkType = "text"
	ChunkToolCall          ChunkType = "tool_call"
	ChunkToolCallArgsDelta ChunkType = "tool_call_args_delta"
	ChunkToolCallStart     ChunkType = "tool_call_start"
	ChunkUsage             ChunkType = "usage"
)

func (ChunkType) enumValues() []string {
	return enumStrings(ChunkDone, ChunkError, ChunkReasoning, ChunkText, ChunkToolCall, ChunkToolCallArgsDelta, ChunkToolCallStart, ChunkUsage)
}

// ProviderChunk is one unit of a provider stream.
type ProviderChunk struct {
	Type      ChunkType         `json:"type"`
	Text      string            `json:"text,omitempty"`
	Signature string            `json:"signature,omitempty"`
	ToolCall  *ProviderToolCall `json:"toolCall,omitempty"`
	ArgChars  int64             `json:"argChars,omitempty" proto:"min=0"`
	Usage     *ProviderUsage    `json:"usage,omitempty"`
	Error     *ProviderError    `json:"error,omitempty"`
}

// invariant: an error chunk carries its error and only it does; a usage
// chunk carries its usage (PROTOCOL.md §5.3).
func (c *ProviderChunk) invariant() string {
	switch {
	case c.Type == ChunkError && c.Error == nil:
		return `a chunk of type "error" needs the error member`
	case c.Type != ChunkError && c.Error != nil:
		return `only a chunk of type "error" carries the error member`
	case c.Type == ChunkUsage && c.Usage == nil:
		return `a chunk of type "usage" needs the usage member`
	}
	return ""
}

// StreamOpenParams are the params of extension/provider/stream/open.
type StreamOpenParams struct {
	StreamID    string          `json:"streamId" proto:"nonempty"`
	ProviderRef string          `json:"providerRef" proto:"nonempty"`
	Model       string          `json:"model,omitempty"`
	Effort      string          `json:"effort,omitempty"`
	Request     ProviderRequest `json:"request"`
	SeqBase     int64           `json:"seqBase" proto:"min=0"`
}

// StreamOpenResult answers extension/provider/stream/open.
type StreamOpenResult struct {
	Accepted bool `json:"accepted"`
}

// StreamCancelParams are the params of extension/provider/stream/cancel.
type StreamCancelParams struct {
	StreamID string `json:"streamId" proto:"nonempty"`
}

// StreamCancelResult answers extension/provider/stream/cancel.
type StreamCancelResult struct {
	Cancelled bool `json:"cancelled"`
}

// StreamChunkParams are the params of extension/provider/stream/chunk.
type StreamChunkParams struct {
	StreamID string        `json:"streamId" proto:"nonempty"`
	Seq      int64         `json:"seq" proto:"min=1"`
	Chunk    ProviderChunk `json:"chunk"`
}

// StreamEndParams are the params of extension/provider/stream/end.
type StreamEndParams struct {
	StreamID    string `json:"streamId" proto:"nonempty"`
	LastSeq     int64  `json:"lastSeq" proto:"min=0"`
	Error       string `json:"error,omitempty"`
	Interrupted bool   `json:"interrupted,omitempty"`
}

// StreamOptions bounds provider catalogs and streams (D21, PROTOCOL.md
// §5). Every zero field takes the default its comment names.
type StreamOptions struct {
	// CatalogTimeout bounds one extension/provider/catalog call. Default
	// 10 s.
	CatalogTimeout time.Duration
	// OpenTimeout bounds the wait for the answer to
	// extension/provider/stream/open. Default 10 s.
	OpenTimeout time.Duration
	// CancelTimeout bounds the extension/provider/stream/cancel sent in
	// the background when a caller gives a stream up. Default 2 s.
	CancelTimeout time.Duration
	// Window is how far ahead of the next expected seq a chunk may wait;
	// a chunk beyond it fails the stream as interrupted. Default 256.
	Window int
	// GapTimeout is how long a missing seq may stay missing, from the
	// moment its gap appeared, and EndGapTimeout how long after the
	// stream's stream/end; either fails the stream with stream_gap.
	// Defaults 5 s and 1 s.
	GapTimeout, EndGapTimeout time.Duration
	// Queue is the number of entries of a stream's delivery queue, one of
	// them kept for the stream's outcome. Default 256.
	Queue int
	// MaxBufferedBytes bounds the text a stream holds that its caller has
	// not read, waiting behind a gap or in its queue (a chunk's text,
	// signature and tool call); past it the stream fails as interrupted.
	// Default 32 MiB.
	MaxBufferedBytes int
	// StallTimeout is how long the host waits, with a stream's queue full,
	// for its reader to take a chunk; then that stream alone fails as
	// interrupted. Meanwhile the host reads nothing more from the sidecar,
	// which slows it down (D26). Default 1 s.
	StallTimeout time.Duration
}

func (o StreamOptions) withDefaults() StreamOptions {
	o.CatalogTimeout = orDefault(o.CatalogTimeout, 10*time.Second)
	o.OpenTimeout = orDefault(o.OpenTimeout, 10*time.Second)
	o.CancelTimeout = orDefault(o.CancelTimeout, 2*time.Second)
	o.Window = orDefault(o.Window, streamWindow)
	o.GapTimeout = orDefault(o.GapTimeout, streamGapTimeout)
	o.EndGapTimeout = orDefault(o.EndGapTimeout, streamEndGapTimeout)
	o.Queue = max(orDefault(o.Queue, 256), 2) // one chunk and the outcome at least
	o.StallTimeout = orDefault(o.StallTimeout, time.Second)
	o.MaxBufferedBytes = orDefault(o.MaxBufferedBytes, 32<<20)
	return o
}

// pluginOfRef returns the plugin X of a plugin ref plugin/X/<rest>, X and
// rest non-empty (PROTOCOL.md §5.1), and false for any other ref.
func pluginOfRef(ref string) (string, bool) {
	rest, ok := strings.CutPrefix(ref, "plugin/")
	id, model, ok2 := strings.Cut(rest, "/")
	return id, ok && ok2 && id != "" && model != ""
}

// catalogRef reports whether ref is plugin/<id>/<provider>/<model>, the
// shape the host's model catalog takes (PROTOCOL.md §5.1).
func catalogRef(id, ref string) bool {
	return strings.HasPrefix(ref, "plugin/"+id+"/") && validPluginProviderRef(ref) && TerminalSafe(ref) == ref
}

// Catalog returns the model catalog of the generation: the host's
// Host.BaseCatalog, where a plugin that owns slot provider:<ref> replaces
// the entry of that ref with its own descriptor (D28), then the other
// descriptors of each running sidecar that declared providers, in
// installed order. A sidecar's catalog is fetched once per generation,
// concurrent first fetches sharing one request; descriptors outside the
// plugin's namespace or not of the form plugin/<id>/<provider>/<model>
// are left out, and visible strings are redacted (D25) and escaped (D27).
// A sidecar whose fetch fails is skipped, warned about once, and asked
// again next time. Catalog fails only when the generation is closed or
// ctx ends (then with ctx's error).
func (rt *Runtime) Catalog(ctx context.Context) ([]ProviderDescriptor, error) {
	if err := rt.begin(); err != nil {
		return nil, err
	}
	defer rt.end()
	list := slices.Clone(rt.cfg.BaseCatalog)
	for _, s := range rt.sidecars {
		if len(s.result.Providers) == 0 || s.usable() != nil {
			continue // a crashed sidecar's entries are gone (PROTOCOL.md §5.1)
		}
		descs, err := s.catalog(ctx)
		if ctx.Err() != nil {
			return nil, ctx.Err() // the caller gave up: no partial list, no warning
		}
		if err != nil {
			rt.warnOnce(MethodProviderCatalog, s.spec.ID, func() error {
				return fmt.Errorf("skipping the provider catalog of extension %s: %w", s.spec.ID, err)
			})
			continue
		}
		for _, d := range descs {
			d.Efforts = slices.Clone(d.Efforts) // the cache's own stays the cache's
			i := slices.IndexFunc(rt.cfg.BaseCatalog, func(b ProviderDescriptor) bool { return b.Ref == d.Ref })
			switch {
			case i < 0:
				list = append(list, d)
			case rt.slots["provider:"+d.Ref] == s.spec.ID:
				list[i] = d // D28: the slot owner's descriptor replaces the base entry
			}
		}
	}
	return list, nil
}

// catalogFetch is one extension/provider/catalog request that concurrent
// first fetches share.
type catalogFetch struct {
	done  chan struct{}
	descs []ProviderDescriptor
	err   error
}

// catalog returns the sidecar's cleaned catalog, fetching it once. The
// fetch belongs to no caller: it runs in the background, bounded by
// CatalogTimeout, so one caller giving up does not fail the others that
// wait for it; each waits until the fetch ends or its own ctx does.
func (s *sidecar) catalog(ctx context.Context) ([]ProviderDescriptor, error) {
	s.catMu.Lock()
	f := s.cat
	if f == nil {
		f = &catalogFetch{done: make(chan struct{})}
		s.cat = f
		if !s.background(func() { s.fetchCatalog(f) }) {
			f.err = Errorf(ReasonProviderInterrupted, "extension sidecar %s is shut down", s.spec.ID)
			s.cat = nil
			close(f.done)
		}
	}
	s.catMu.Unlock()
	select {
	case <-f.done:
		return f.descs, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fetchCatalog runs one extension/provider/catalog request for f.
func (s *sidecar) fetchCatalog(f *catalogFetch) {
	var res ProviderCatalogResult
	err := s.call(context.Background(), s.cfg.Streams.CatalogTimeout, MethodProviderCatalog, ProviderCatalogParams{}, &res)
	if errors.Is(err, errCallTimeout) {
		err = fmt.Errorf("extension %s did not answer %s within %v", s.spec.ID, MethodProviderCatalog, s.cfg.Streams.CatalogTimeout)
	}
	for _, d := range res.Providers {
		if err == nil && catalogRef(s.spec.ID, d.Ref) {
			d.DisplayName, d.Model, d.PricingCurrency, d.DefaultEffort = s.say(d.DisplayName), s.say(d.Model), s.say(d.PricingCurrency), s.say(d.DefaultEffort)
			for i := range d.Efforts {
				d.Efforts[i] = s.say(d.Efforts[i])
			}
			f.descs = append(f.descs, d)
		}
	}
	f.err = err
	if err != nil {
		s.catMu.Lock()
		s.cat = nil // asked again next time
		s.catMu.Unlock()
	}
	close(f.done)
}

// checkBaseCatalog fails a generation where a sidecar declares a ref of
// the host's base catalog without owning slot provider:<ref> (D28).
func (rt *Runtime) checkBaseCatalog() error {
	for _, s := range rt.sidecars {
		for _, d := range s.result.Providers {
			if slices.ContainsFunc(rt.cfg.BaseCatalog, func(b ProviderDescriptor) bool { return b.Ref == d.Ref }) && rt.slots["provider:"+d.Ref] != s.spec.ID {
				return &PluginError{Plugin: s.spec.ID, Op: MethodInitialize, Err: Errorf(ReasonCapabilityNotDeclared,
					"extension %s declares provider %q, which the host's base catalog already has; to replace that entry, add %q to the manifest's runtime.replaces", s.spec.ID, d.Ref, "provider:"+d.Ref)}
			}
		}
	}
	return nil
}

// resolve finds the sidecar that serves ref and the declared descriptor
// it names: the owner must be running and must have declared ref exactly
// or as a prefix of a declared ref (<ref>/...). There is no fallback to
// another provider (PROTOCOL.md §5.1).
func (rt *Runtime) resolve(ref string) (*sidecar, ProviderDescriptor, error) {
	id, ok := pluginOfRef(ref)
	if !ok {
		return nil, ProviderDescriptor{}, fmt.Errorf("extension: %q is not a plugin provider ref (plugin/<plugin>/<provider>/<model>)", ref)
	}
	s := rt.byID[id]
	if s == nil {
		return nil, ProviderDescriptor{}, Errorf(ReasonProviderInterrupted, "unknown provider ref %q: extension %s is not running", ref, id)
	}
	for _, d := range s.result.Providers {
		if d.Ref == ref || strings.HasPrefix(d.Ref, ref+"/") {
			return s, d, s.usable()
		}
	}
	return nil, ProviderDescriptor{}, Errorf(ReasonCapabilityNotDeclared, "unknown provider ref %q: extension %s does not declare it", ref, id)
}

// OpenStream opens a stream of the model ref (plugin/<plugin>/<provider>/
// <model>) for req, with the reasoning effort ("" for none), and returns
// it once the sidecar accepted it. Until the stream ends it is an
// operation of the generation (D14). Cancelling ctx, or [Stream.Close],
// gives the stream up: it ends with stream_cancelled and the sidecar is
// sent extension/provider/stream/cancel (D21).
//
// Errors: the ref's plugin is not running, or crashed (provider_interrupted,
// at once, D13), or did not declare ref (capability_not_declared); the
// sidecar's own error for the open, with its reason; provider_failed when
// it declined; stream_cancelled when ctx ended first. A failed open is
// never retried with another provider.
func (rt *Runtime) OpenStream(ctx context.Context, ref, effort string, req ProviderRequest) (*Stream, error) {
	s, d, err := rt.resolve(ref)
	if err != nil {
		return nil, err
	}
	if err := rt.begin(); err != nil {
		return nil, err
	}
	st := newStream(rt, s, randomID("es_"), d.Ref)
	if req.Messages == nil {
		req.Messages = []ProviderMessage{}
	}
	if req.Tools == nil {
		req.Tools = []ProviderToolSchema{}
	}
	// Registered before the open is sent: chunks may overtake its answer.
	s.streamsMu.Lock()
	s.streams[st.id] = st
	s.streamsMu.Unlock()
	// Then watched, under st.mu as finish reads it. No delivery can hold
	// st.mu yet: the sidecar does not know the id before the open; after
	// it, st.mu is not taken here, as a delivery may hold it until the
	// caller reads.
	st.mu.Lock()
	st.unwatch = context.AfterFunc(ctx, func() { st.stop(st.cancelled(ctx)) })
	st.mu.Unlock()
	params := StreamOpenParams{StreamID: st.id, ProviderRef: d.Ref, Model: d.Model, Effort: effort, Request: req, SeqBase: 1}
	var res StreamOpenResult
	err = s.call(ctx, s.cfg.Streams.OpenTimeout, MethodStreamOpen, params, &res)
	switch {
	case ctx.Err() != nil:
		err = st.cancelled(ctx)
	case errors.Is(err, errCallTimeout):
		err = Errorf(ReasonProviderInterrupted, "extension %s did not answer %s within %v", s.spec.ID, MethodStreamOpen, s.cfg.Streams.OpenTimeout)
	case err == nil && !res.Accepted:
		err = Errorf(ReasonProviderFailed, "extension %s declined provider stream %s", s.spec.ID, d.Ref)
	}
	if err != nil {
		st.stop(err)
		return nil, err
	}
	return st, nil
}
