package extension

import "encoding/json"

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
