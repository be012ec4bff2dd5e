package extension

import "encoding/json"

// Structured UI methods (PROTOCOL.md §7).
const (
	MethodUIAction  = "extension/ui/action"
	MethodUISubmit  = "extension/ui/submit"
	MethodUIPublish = "host/ui/publish"
	MethodUIRequest = "host/ui/request"
)

// SurfaceKind is the kind of a published surface.
type SurfaceKind string

// The surface kinds.
const (
	SurfaceCard         SurfaceKind = "card"
	SurfaceForm         SurfaceKind = "form"
	SurfaceNotification SurfaceKind = "notification"
	SurfaceStatus       SurfaceKind = "status"
)

func (SurfaceKind) enumValues() []string {
	return enumStrings(SurfaceCard, SurfaceForm, SurfaceNotification, SurfaceStatus)
}

// PromptKind is the kind of a blocking host/ui/request prompt.
type PromptKind string

// The prompt kinds.
const (
	PromptConfirm     PromptKind = "confirm"
	PromptInput       PromptKind = "input"
	PromptMultiselect PromptKind = "multiselect"
	PromptSelect      PromptKind = "select"
)

func (PromptKind) enumValues() []string {
	return enumStrings(PromptConfirm, PromptInput, PromptMultiselect, PromptSelect)
}

// UIActionDecl declares one action a sidecar offers as /<plugin>:<action>.
type UIActionDecl struct {
	ActionID string `json:"actionId" proto:"nonempty"`
	Label    string `json:"label,omitempty"`
}

// UIActionParams are the params of extension/ui/action.
type UIActionParams struct {
	ActionID   string            `json:"actionId" proto:"nonempty"`
	SessionID  string            `json:"sessionId" proto:"nonempty"`
	Generation uint64            `json:"generation"`
	Args       map[string]string `json:"args,omitempty"`
}

// UIActionResult answers extension/ui/action.
type UIActionResult struct {
	Accepted bool   `json:"accepted"`
	Message  string `json:"message,omitempty"`
}

// UISubmitParams are the params of extension/ui/submit.
type UISubmitParams struct {
	SurfaceID  string                     `json:"surfaceId" proto:"nonempty"`
	SessionID  string                     `json:"sessionId" proto:"nonempty"`
	Generation uint64                     `json:"generation"`
	Values     map[string]json.RawMessage `json:"values"`
}

// UISubmitResult answers extension/ui/submit.
type UISubmitResult struct {
	Accepted bool `json:"accepted"`
}

// UIPublishParams are the params of host/ui/publish.
type UIPublishParams struct {
	SurfaceID  string          `json:"surfaceId" proto:"nonempty"`
	SessionID  string          `json:"sessionId" proto:"nonempty"`
	Generation uint64          `json:"generation"`
	Kind       SurfaceKind     `json:"kind"`
	Payload    json.RawMessage `json:"payload"`
}

// UIPublishResult answers host/ui/publish.
type UIPublishResult struct {
	Accepted bool `json:"accepted"`
}

// UIRequestParams are the params of host/ui/request.
type UIRequestParams struct {
	SurfaceID  string          `json:"surfaceId" proto:"nonempty"`
	SessionID  string          `json:"sessionId" proto:"nonempty"`
	Generation uint64          `json:"generation"`
	Kind       PromptKind      `json:"kind"`
	Payload    json.RawMessage `json:"payload"`
}

// UIRequestResult answers host/ui/request.
type UIRequestResult struct {
	Cancelled bool                       `json:"cancelled"`
	Values    map[string]json.RawMessage `json:"values,omitempty"`
}
