package extension

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

	weight int64 // what the chunk weighs against Host.MaxStreamBytes while the host holds it (D21)
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

// Catalog returns the model catalog of the generation: the host's
// Host.BaseCatalog, where a plugin that owns slot provider:<ref> replaces
// the entry of that ref with its own descriptor (D28), then the other
// descriptors of each running sidecar that declared providers, in
// the record's order. A sidecar's catalog is fetched once per generation,
// concurrent first fetches sharing one request; descriptors whose ref the
// sidecar did not declare at the handshake, or not of the form
// plugin/<id>/<provider>/<model>, are left out with a warning naming them
// (D9), and visible strings are redacted (D25) and escaped (D27).
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
		f, err := s.catalog(ctx)
		if ctx.Err() != nil {
			return nil, ctx.Err() // the caller gave up: no partial list, no warning
		}
		if err != nil {
			rt.warnOnce(MethodProviderCatalog, s.spec.ID, MethodProviderCatalog, func() error {
				return fmt.Errorf("skipping the provider catalog of extension %s: %w", s.spec.ID, err)
			})
			continue
		}
		if len(f.dropped) > 0 {
			rt.warnOnce(MethodProviderCatalog+"/undeclared", s.spec.ID, MethodProviderCatalog, func() error {
				return fmt.Errorf("left out of the catalog of extension %s, which did not declare them at the handshake: %s", s.spec.ID, strings.Join(f.dropped, ", "))
			})
		}
		for _, d := range f.descs {
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
	done    chan struct{}
	descs   []ProviderDescriptor
	dropped []string // the refs left out, quoted
	err     error
}

// catalog returns the sidecar's cleaned catalog, fetching it once. The
// fetch belongs to no caller: it runs in the background, bounded by
// CatalogTimeout, so one caller giving up does not fail the others that
// wait for it; each waits until the fetch ends or its own ctx does.
func (s *sidecar) catalog(ctx context.Context) (*catalogFetch, error) {
	s.catMu.Lock()
	f := s.cat
	if f == nil {
		f = &catalogFetch{done: make(chan struct{})}
		s.cat = f
		if !s.background(func() { s.fetchCatalog(f) }) {
			f.err = errorf(ReasonProviderInterrupted, "extension sidecar %s is shut down", s.spec.ID)
			s.cat = nil
			close(f.done)
		}
	}
	s.catMu.Unlock()
	select {
	case <-f.done:
		return f, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fetchCatalog runs one extension/provider/catalog request for f.
func (s *sidecar) fetchCatalog(f *catalogFetch) {
	defer close(f.done)
	var res ProviderCatalogResult
	if f.err = s.callWithin(context.Background(), s.cfg.CatalogTimeout, MethodProviderCatalog, ProviderCatalogParams{}, &res); f.err != nil {
		s.catMu.Lock()
		s.cat = nil // asked again next time
		s.catMu.Unlock()
		return
	}
	for _, d := range res.Providers {
		// The catalog takes plugin/<id>/<provider>/<model> (PROTOCOL.md
		// §5.1), and only a ref OpenStream would open (D9).
		if _, ok := s.declared(d.Ref); !ok || !validPluginProviderRef(d.Ref) || TerminalSafe(d.Ref) != d.Ref {
			f.dropped = append(f.dropped, strconv.Quote(s.safe(d.Ref)))
			continue
		}
		d.DisplayName, d.Model, d.PricingCurrency, d.DefaultEffort = s.safe(d.DisplayName), s.safe(d.Model), s.safe(d.PricingCurrency), s.safe(d.DefaultEffort)
		for i := range d.Efforts {
			d.Efforts[i] = s.safe(d.Efforts[i])
		}
		f.descs = append(f.descs, d)
	}
}

// callWithin is call bounded by timeout: a sidecar that does not answer
// in time, while ctx lasts, is an interruption.
func (s *sidecar) callWithin(ctx context.Context, timeout time.Duration, method string, params, result any) error {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := s.call(cctx, method, params, result)
	if ctx.Err() == nil && cctx.Err() != nil {
		return errorf(ReasonProviderInterrupted, "extension %s did not answer %s within %v", s.spec.ID, method, timeout)
	}
	return err
}

// checkBaseCatalog fails a generation where a sidecar declares a ref of
// the host's base catalog without owning slot provider:<ref> (D28).
func (rt *Runtime) checkBaseCatalog() error {
	for _, s := range rt.sidecars {
		for _, d := range s.result.Providers {
			if slices.ContainsFunc(rt.cfg.BaseCatalog, func(b ProviderDescriptor) bool { return b.Ref == d.Ref }) && rt.slots["provider:"+d.Ref] != s.spec.ID {
				return &PluginError{Plugin: s.spec.ID, Op: MethodInitialize, Err: errorf(ReasonCapabilityNotDeclared,
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
	// A plugin ref is plugin/<id>/<rest>, id and rest non-empty (PROTOCOL.md §5.1).
	rest, ok := strings.CutPrefix(ref, "plugin/")
	id, model, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || id == "" || model == "" {
		return nil, ProviderDescriptor{}, fmt.Errorf("extension: %q is not a plugin provider ref (plugin/<plugin>/<provider>/<model>)", ref)
	}
	s := rt.byID[id]
	if s == nil {
		return nil, ProviderDescriptor{}, errorf(ReasonProviderInterrupted, "unknown provider ref %q: extension %s is not running", ref, id)
	}
	if d, ok := s.declared(ref); ok {
		return s, d, s.usable()
	}
	return nil, ProviderDescriptor{}, errorf(ReasonCapabilityNotDeclared, "unknown provider ref %q: extension %s does not declare it", ref, id)
}

// declared returns the descriptor the sidecar declared at the handshake
// for ref: exactly, or one under it (<ref>/...).
func (s *sidecar) declared(ref string) (ProviderDescriptor, bool) {
	i := slices.IndexFunc(s.result.Providers, func(d ProviderDescriptor) bool { return d.Ref == ref || strings.HasPrefix(d.Ref, ref+"/") })
	if i < 0 {
		return ProviderDescriptor{}, false
	}
	return s.result.Providers[i], true
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
	st := &Stream{rt: rt, s: s, id: randomID("es_"), ref: d.Ref, out: make(chan ProviderChunk, s.cfg.StreamQueue-1), done: make(chan struct{}), aborted: make(chan struct{})}
	st.r = reassembler{redact: s.safe, window: int64(s.cfg.StreamWindow), gapTimeout: s.cfg.GapTimeout, endGapTimeout: s.cfg.EndGapTimeout,
		idle: max(s.cfg.StreamIdleTimeout, 0), heard: time.Now()}
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
	// Then watched, under st.mu as conclude reads it. No delivery can hold
	// st.mu yet: the sidecar does not know the id before the open; after
	// it, st.mu is not taken here, as a delivery may hold it until the
	// caller reads.
	st.mu.Lock()
	st.unwatch = context.AfterFunc(ctx, func() { st.stop(st.cancelled(ctx)) })
	st.mu.Unlock()
	params := StreamOpenParams{StreamID: st.id, ProviderRef: d.Ref, Model: d.Model, Effort: effort, Request: req, SeqBase: 1}
	var res StreamOpenResult
	err = s.callWithin(ctx, s.cfg.OpenTimeout, MethodStreamOpen, params, &res)
	switch {
	case ctx.Err() != nil:
		err = st.cancelled(ctx)
	case err == nil && !res.Accepted:
		err = errorf(ReasonProviderFailed, "extension %s declined provider stream %s", s.spec.ID, d.Ref)
	}
	if err != nil {
		st.stop(err)
		return nil, err
	}
	return st, nil
}

// The default bounds of stream reassembly (D21, PROTOCOL.md §5.4); the
// stream fields of [Host] replace them.
const (
	// streamWindow is how far ahead of the next expected seq a chunk may
	// be: a chunk with seq >= next+streamWindow fails the stream as
	// interrupted (rule 2). So at most streamWindow-1 chunks ever wait.
	streamWindow = 256

	// streamGapTimeout is how long a seq may stay missing, counted from
	// the moment the gap it is in first appeared (rule 5).
	streamGapTimeout = 5 * time.Second

	// streamEndGapTimeout is how long a gap may stay open after the
	// stream's first stream/end (rule 5).
	streamEndGapTimeout = time.Second
)

// streamStep is what one call of a [reassembler] released: chunks to be
// delivered as they are, in order, and, in exactly one call of a stream's
// life, the stream's terminal outcome.
type streamStep struct {
	chunks []ProviderChunk // released by this call, in seq order
	done   bool            // the stream ended with this call
	err    error           // when done: nil for a clean end
}

// reassembler puts the chunks of one provider stream back in order and
// decides how the stream ends, by the host's ordering rules of D21
// (PROTOCOL.md §5.4, rules 1-7; rule 8 as far as a malformed end goes).
// It is a pure unit: it starts no goroutine and arms no timer. Its owner
// feeds it the stream's chunks and ends, keeps one timer armed for
// [reassembler.deadline] and calls [reassembler.expire] when it fires;
// each call is told the time, which must not go back. Every call returns what became
// deliverable; after the step that is done, every call returns an empty
// step.
//
// One goroutine owns a reassembler: it holds no lock. Its owner sets
// every bound and redact before the first call (a Host's stream takes the
// Host's, defaulted by [Host]).
//
// Memory is bounded by the window whatever the sidecar sends: at most
// window-1 waiting chunks and window+1 gap marks. (The bytes
// of a waiting chunk are bounded by the frame limit, D2.)
type reassembler struct {
	// redact redacts the error text of a stream/end before it becomes an
	// error's message (D21: the host redacts provider error text again,
	// D25).
	redact func(string) string
	// window, gapTimeout and endGapTimeout are the bounds of rules 2 and 5;
	// idle, when not 0, how long the stream may go without a chunk or an
	// end from heard on (D21).
	window                    int64
	gapTimeout, endGapTimeout time.Duration
	idle                      time.Duration
	heard                     time.Time // when the last chunk or end came, or the stream opened

	delivered int64      // seqs 1..delivered have been released; next expected is delivered+1
	win       []waitSlot // the window, indexed by seq % window; nil until a chunk waits
	waiting   int        // chunks waiting in win
	known     int64      // the highest seq known to exist: seen in a chunk, or the end's lastSeq
	marks     []gapMark  // when the seqs above delivered became known, oldest first
	ended     bool       // the first stream/end has come
	last      StreamEndParams
	endAt     time.Time // when the first stream/end came
	finished  bool      // the terminal outcome has been returned
}

// waitSlot is one place of the window.
type waitSlot struct {
	chunk ProviderChunk
	ok    bool
}

// gapMark records that at time at, known rose to upTo: every seq up to
// upTo that is still missing has been missing since at, or earlier.
// Marks have increasing upTo; the first one with upTo above delivered
// dates the oldest missing seq, which is always the next expected one.
type gapMark struct {
	upTo int64
	at   time.Time
}

// chunk takes the chunk numbered seq (rules 1, 2 and 4). A seq below the
// next expected one, or one already waiting, is a replay and is dropped;
// the first copy is the one delivered.
func (r *reassembler) chunk(seq int64, c ProviderChunk, now time.Time) streamStep {
	st := r.expire(now)
	if r.finished {
		return st
	}
	r.heard = now
	next := r.delivered + 1
	switch {
	case seq < next: // rule 1 (a seq below 1 is malformed and dropped too, rule 8)
		return st
	case r.ended && seq > r.last.LastSeq: // rule 4
		return r.conclude(st, pastEnd(seq, r.last.LastSeq))
	case seq-next >= r.window: // rule 2; no overflow, as next >= 1
		return r.conclude(st, errorf(ReasonProviderInterrupted,
			"chunk %d is outside the window of %d chunks from chunk %d", seq, r.window, next))
	case seq == next:
		st.chunks = append(st.chunks, c)
		r.delivered = seq
		r.release(&st)
	default:
		if r.win == nil {
			r.win = make([]waitSlot, r.window)
		}
		slot := &r.win[seq%r.window]
		if slot.ok { // rule 1: a replay of a waiting chunk
			return st
		}
		*slot = waitSlot{chunk: c, ok: true}
		r.waiting++
	}
	r.learn(seq, now)
	r.endIfComplete(&st)
	return st
}

// end takes a stream/end (rules 3, 4, 6 and 7). An end with a negative
// lastSeq is malformed and dropped (rule 8); the decoder drops it first.
func (r *reassembler) end(p StreamEndParams, now time.Time) streamStep {
	st := r.expire(now)
	if r.finished || p.LastSeq < 0 {
		return st
	}
	r.heard = now
	if r.ended { // rule 3
		if p.LastSeq == r.last.LastSeq && p.Error == r.last.Error && p.Interrupted == r.last.Interrupted {
			return st
		}
		return r.conclude(st, errorf(ReasonProviderInterrupted,
			"a second stream/end (lastSeq %d) differs from the first (lastSeq %d)", p.LastSeq, r.last.LastSeq))
	}
	r.ended, r.last, r.endAt = true, p, now
	// Rule 4: a waiting chunk past the end. Before the end, known is the
	// highest seq a chunk came with; while chunks wait, it is one of them.
	if r.waiting > 0 && r.known > p.LastSeq {
		return r.conclude(st, pastEnd(r.known, p.LastSeq))
	}
	r.learn(p.LastSeq, now)
	r.endIfComplete(&st)
	return st
}

// pastEnd is the interruption of rule 4.
func pastEnd(seq, lastSeq int64) *Error {
	return errorf(ReasonProviderInterrupted, "chunk %d is past the stream's last chunk %d", seq, lastSeq)
}

// deadline returns when the stream fails unless a chunk or an end comes
// first: the gap timers of rule 5 while a seq is missing, the idle bound
// (D21) when it is set; false when neither applies (or the stream is
// over). Its owner keeps one timer armed for it, re-reading it after every
// call, and calls [reassembler.expire] when it fires.
func (r *reassembler) deadline() (time.Time, bool) {
	gap, ok := r.gapDeadline()
	if idle := r.heard.Add(r.idle); r.idle > 0 && !r.finished && (!ok || idle.Before(gap)) {
		return idle, true
	}
	return gap, ok
}

// gapDeadline is the deadline of rule 5 alone.
func (r *reassembler) gapDeadline() (time.Time, bool) {
	if r.finished || r.known <= r.delivered {
		return time.Time{}, false
	}
	// The next expected seq is missing (were it here, it would have been
	// released) and, being the lowest, has been missing the longest.
	d := r.marks[0].at.Add(r.gapTimeout)
	if end := r.endAt.Add(r.endGapTimeout); r.ended && end.Before(d) {
		d = end
	}
	return d, true
}

// expire fails the stream when now has reached its deadline: with
// stream_gap when the gap is still open (rule 5), else as interrupted
// for its silence (D21). chunk and end call it first, so that a chunk
// that comes at or after the deadline is too late even if it beats the
// owner's timer.
func (r *reassembler) expire(now time.Time) streamStep {
	if d, ok := r.gapDeadline(); ok && !now.Before(d) {
		return r.conclude(streamStep{}, r.gapError())
	}
	if r.idle > 0 && !r.finished && !now.Before(r.heard.Add(r.idle)) {
		return r.conclude(streamStep{}, errorf(ReasonProviderInterrupted, "nothing came on the stream for %v", r.idle))
	}
	return streamStep{}
}

// abort ends the stream with err, which its owner decides (the caller's
// cancellation, stream_cancelled; the sidecar's crash, an interruption;
// PROTOCOL.md §5.5): waiting chunks are discarded. It returns the
// terminal step, or an empty one when the stream was already over.
func (r *reassembler) abort(err error) streamStep {
	if r.finished {
		return streamStep{}
	}
	return r.conclude(streamStep{}, err)
}

// release moves the chunks that now follow on from the window into st.
func (r *reassembler) release(st *streamStep) {
	for r.waiting > 0 {
		slot := &r.win[(r.delivered+1)%r.window]
		if !slot.ok {
			break
		}
		st.chunks = append(st.chunks, slot.chunk)
		*slot = waitSlot{}
		r.waiting--
		r.delivered++
	}
	r.marks = slices.DeleteFunc(r.marks, func(m gapMark) bool { return m.upTo <= r.delivered })
}

// learn records that seq exists (a chunk came with it, or it is the end's
// lastSeq): every seq below it that is missing is missing from now on, if
// it was not already (rule 5).
func (r *reassembler) learn(seq int64, now time.Time) {
	if seq <= r.known {
		return
	}
	r.known = seq
	if seq > r.delivered {
		r.marks = append(r.marks, gapMark{upTo: seq, at: now})
	}
}

// endIfComplete ends the stream when chunks 1 to lastSeq have all been delivered
// (rules 6 and 7). Chunks delivered past lastSeq before the end came do
// not change that (rule 4 names only chunks waiting or arriving later).
func (r *reassembler) endIfComplete(st *streamStep) {
	if r.ended && r.delivered >= r.last.LastSeq {
		*st = r.conclude(*st, r.outcome())
	}
}

// outcome is the terminal outcome of rule 7: an interruption when the end
// says interrupted, a failure when it carries error text, else a clean
// end. The text is redacted; a blank one becomes the reason's frozen
// message, which is also the interruption's default.
func (r *reassembler) outcome() error {
	reason := ReasonProviderFailed
	switch {
	case r.last.Interrupted:
		reason = ReasonProviderInterrupted
	case r.last.Error == "":
		return nil
	}
	text := ""
	if strings.TrimSpace(r.last.Error) != "" {
		text = strings.TrimSpace(r.redact(r.last.Error))
	}
	return NewError(reason, text)
}

// conclude makes st the terminal step with err and lets go of the window.
func (r *reassembler) conclude(st streamStep, err error) streamStep {
	r.finished = true
	r.win, r.marks, r.waiting = nil, nil, 0
	st.done, st.err = true, err
	return st
}

// gapError is the stream_gap failure of rule 5, naming every missing seq
// as ranges ("missing chunks 2, 5-7"). The caller sees an interruption:
// the error matches ReasonProviderInterrupted as well as ReasonStreamGap
// under errors.Is.
func (r *reassembler) gapError() *Error {
	next := r.delivered + 1
	top := min(r.known, next+r.window-1)
	waits := func(seq int64) bool { return seq <= top && r.win != nil && r.win[seq%r.window].ok }
	var runs []string
	for from := next; from <= r.known; from++ {
		if waits(from) {
			continue
		}
		to := from // the last seq of the run of missing ones from from
		for to < top && !waits(to+1) {
			to++
		}
		if to >= top {
			to = r.known // no chunk waits above the window
		}
		runs = append(runs, strconv.FormatInt(from, 10))
		if to > from {
			runs[len(runs)-1] += "-" + strconv.FormatInt(to, 10)
		}
		from = to
	}
	return causedError(ReasonProviderInterrupted, ReasonStreamGap, "missing chunks %s", strings.Join(runs, ", "))
}

// Stream is one open provider stream (PROTOCOL.md §5): [Stream.Recv]
// returns its chunks in seq order, whatever order they arrived in, then
// its outcome. Open it with [Runtime.OpenStream]. Recv and Close may be
// called from different goroutines.
type Stream struct {
	rt  *Runtime
	s   *sidecar
	id  string
	ref string
	// out is the delivery queue; the outcome is the queue's last entry,
	// kept apart (PROTOCOL.md §5.4 rule 9).
	out     chan ProviderChunk
	done    chan struct{} // closed when err is set: no chunk joins out after it
	err     error
	aborted chan struct{} // closed by stop: a delivery waiting for room gives up
	abort   sync.Once
	held    atomic.Int64 // chunkBytes of the chunks kept and not yet read

	mu       sync.Mutex // protects the following; held while delivering
	r        reassembler
	timer    *time.Timer // the timer of r.deadline
	armed    time.Time   // when timer fires; zero when stopped
	finished bool
	unwatch  func() bool // stops watching the caller's context
}

// ID returns the stream's id, es_ and 24 hex digits, as sent in stream/open.
func (st *Stream) ID() string { return st.id }

// Recv returns the next chunk in seq order. After the last one it returns
// io.EOF when the stream ended cleanly, or the stream's error: an
// interruption (provider_interrupted, which a gap's stream_gap error
// matches too under errors.Is), a failure (provider_failed) with the
// sidecar's redacted text, or stream_cancelled. An error chunk is a chunk
// like the others, its message redacted again by the host.
func (st *Stream) Recv() (ProviderChunk, error) {
	select {
	case c := <-st.out:
		return st.read(c), nil
	case <-st.done:
		select {
		case c := <-st.out: // delivered before the end: still read in order
			return st.read(c), nil
		default:
		}
		return ProviderChunk{}, cmp.Or(st.err, io.EOF)
	}
}

// read accounts for c, taken by the caller.
func (st *Stream) read(c ProviderChunk) ProviderChunk {
	st.held.Add(-c.weight)
	c.weight = 0
	return c
}

// weigh sets what c, whose params were encoded in size bytes, weighs
// against MaxStreamBytes: that size, or the strings it holds when they
// are more (escaping can lengthen them), whichever members carry them
// (D21).
func weigh(c ProviderChunk, size int) ProviderChunk {
	n := len(c.Text) + len(c.Signature)
	if t := c.ToolCall; t != nil {
		n += len(t.ID) + len(t.Name) + len(t.Arguments) + len(t.ThoughtSignature)
	}
	if c.Usage != nil {
		n += len(c.Usage.FinishReason)
	}
	if c.Error != nil {
		n += len(c.Error.Message)
	}
	c.weight = int64(max(n, size))
	return c
}

// Close gives the stream up when it has not ended: chunks not yet read
// are dropped, Recv returns stream_cancelled, and the sidecar is sent
// extension/provider/stream/cancel in the background (D21). Close is
// idempotent; after the end it only drops what was not read.
func (st *Stream) Close() {
	st.stop(errorf(ReasonStreamCancelled, "provider stream %s of %s was closed by its caller", st.id, st.ref))
}

// cancelled is the outcome of a stream whose caller's ctx ended.
func (st *Stream) cancelled(ctx context.Context) error {
	return causedError(context.Cause(ctx), ReasonStreamCancelled, "provider stream %s of %s was cancelled: %v", st.id, st.ref, context.Cause(ctx))
}

// stop ends the stream from the host's side with err, dropping what is
// unread; when the stream was still open, the sidecar is told in the
// background.
func (st *Stream) stop(err error) {
	st.abort.Do(func() { close(st.aborted) })
	st.mu.Lock()
	open := !st.finished
	st.conclude(err)
	st.mu.Unlock()
	for len(st.out) > 0 {
		select {
		case <-st.out:
		default: // a concurrent Recv took it
		}
	}
	if open {
		st.s.background(func() {
			st.s.callWithin(context.Background(), st.s.cfg.CancelTimeout, MethodStreamCancel, StreamCancelParams{StreamID: st.id}, &StreamCancelResult{}) // the answer changes nothing (PROTOCOL.md §5.5)
		})
	}
}

// disconnected ends the stream of a sidecar whose connection ended: what
// was delivered is still read, what waits behind a gap is dropped
// (PROTOCOL.md §5.5).
func (st *Stream) disconnected(cause error) {
	st.abort.Do(func() { close(st.aborted) })
	st.mu.Lock()
	st.conclude(causedError(cause, ReasonProviderInterrupted, "extension sidecar %s disconnected during provider stream %s: %s", st.s.spec.ID, st.ref, st.s.safe(fmt.Sprint(cause))))
	st.mu.Unlock()
}

// chunk and end take the stream's notifications, on the connection's
// notification goroutine; expire runs when the gap timer fires.
func (st *Stream) chunk(seq int64, c ProviderChunk) {
	st.mu.Lock()
	defer st.mu.Unlock()
	kept := int64(st.r.waiting) + st.r.delivered
	step := st.r.chunk(seq, c, time.Now())
	if int64(st.r.waiting)+st.r.delivered > kept { // c waits or was released, not dropped
		if limit := int64(st.s.cfg.MaxStreamBytes); st.held.Add(c.weight) > limit {
			st.conclude(errorf(ReasonProviderInterrupted, "provider stream %s of %s holds over %d bytes its caller has not read", st.id, st.ref, limit))
			return
		}
	}
	st.apply(step)
}

func (st *Stream) end(p StreamEndParams) {
	st.step(func(now time.Time) streamStep { return st.r.end(p, now) })
}

func (st *Stream) expire() { st.step(st.r.expire) }

// step runs a step of the reassembler, told the time, and applies it.
func (st *Stream) step(f func(now time.Time) streamStep) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.apply(f(time.Now()))
}

// apply delivers what a step of the reassembler released and re-arms the
// gap timer; st.mu is held.
func (st *Stream) apply(step streamStep) {
	if st.finished {
		return
	}
	for _, c := range step.chunks {
		if !st.deliver(c) {
			return
		}
	}
	if step.done {
		st.conclude(step.err)
		return
	}
	d, ok := st.r.deadline()
	switch now := time.Now(); {
	case !ok && st.timer != nil:
		st.timer.Stop()
		st.armed = time.Time{}
	case !ok:
	case st.timer == nil:
		st.timer, st.armed = time.AfterFunc(d.Sub(now), st.expire), d
	case d.Before(st.armed) || !st.armed.After(now):
		// A deadline that only moved later (the idle bound, after each
		// chunk) leaves the timer as it is: firing early, it re-arms here.
		st.timer.Reset(d.Sub(now))
		st.armed = d
	}
}

// deliver queues c for Recv. With the queue full it waits up to
// StallTimeout, so the connection's reader waits too and the sidecar is
// slowed down (D26); then the stream alone fails (PROTOCOL.md §5.4 rule
// 9). It reports whether c was queued.
func (st *Stream) deliver(c ProviderChunk) bool {
	select {
	case st.out <- c:
		return true
	default:
	}
	t := time.NewTimer(st.s.cfg.StreamStallTimeout)
	defer t.Stop()
	select {
	case st.out <- c:
		return true
	case <-t.C:
		st.conclude(errorf(ReasonProviderInterrupted, "provider stream %s of %s: its reader took no chunk for %v with %d waiting", st.id, st.ref, st.s.cfg.StreamStallTimeout, cap(st.out)))
	case <-st.aborted: // stop or disconnected finishes it
	}
	return false
}

// conclude records the outcome once: the stream leaves its sidecar's table,
// its timer and its context watch stop, and its operation ends (D14).
// st.mu is held.
func (st *Stream) conclude(err error) {
	if st.finished {
		return
	}
	st.finished, st.err = true, err
	st.r.abort(err)
	close(st.done)
	if st.timer != nil {
		st.timer.Stop()
	}
	if st.unwatch != nil {
		st.unwatch()
	}
	st.s.streamsMu.Lock()
	delete(st.s.streams, st.id)
	st.s.streamsMu.Unlock()
	st.rt.end()
}
