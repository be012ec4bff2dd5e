package extension

import "encoding/json"

// Interception and observation methods (CONTRACT-NOTES §5).
const (
	MethodIntercept        = "extension/intercept"
	MethodEvent            = "extension/event"
	MethodResourcesChanged = "extension/resources/changed"
)

// Point is one of the 17 frozen hook points shared by extension/intercept
// and extension/event.
type Point string

// The 17 hook points, sorted as in the schema.
const (
	AgentBeforeStart      Point = "agent.before_start"
	CompactionComplete    Point = "compaction.complete"
	CompactionPrepare     Point = "compaction.prepare"
	ContextPrepare        Point = "context.prepare"
	FrontendEvent         Point = "frontend.event"
	InputReceive          Point = "input.receive"
	PermissionDecision    Point = "permission.decision"
	ProviderRequestPoint  Point = "provider.request"
	ProviderResponsePoint Point = "provider.response"
	SessionEnd            Point = "session.end"
	SessionLoad           Point = "session.load"
	SessionRotate         Point = "session.rotate"
	SessionSave           Point = "session.save"
	SessionStart          Point = "session.start"
	SystemPromptBuild     Point = "system_prompt.build"
	ToolAfter             Point = "tool.after"
	ToolBefore            Point = "tool.before"
)

// Points returns the 17 hook points, sorted.
func Points() []Point {
	return []Point{
		AgentBeforeStart, CompactionComplete, CompactionPrepare, ContextPrepare,
		FrontendEvent, InputReceive, PermissionDecision, ProviderRequestPoint,
		ProviderResponsePoint, SessionEnd, SessionLoad, SessionRotate, SessionSave,
		SessionStart, SystemPromptBuild, ToolAfter, ToolBefore,
	}
}

func (Point) enumValues() []string {
	ps := Points()
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p)
	}
	return out
}

// Valid reports whether p is one of the 17 hook points.
func (p Point) Valid() bool {
	for _, q := range Points() {
		if p == q {
			return true
		}
	}
	return false
}

// Decision is an interceptor's verdict (D16).
type Decision string

// The verdicts.
const (
	DecisionAllow    Decision = "allow"
	DecisionBlock    Decision = "block"
	DecisionContinue Decision = "continue"
	DecisionDeny     Decision = "deny"
	DecisionReplace  Decision = "replace"
)

func (Decision) enumValues() []string {
	return []string{"allow", "block", "continue", "deny", "replace"}
}

// InterceptParams are the params of extension/intercept. Payload is the
// point's payload document, or null when it is externalized (D22).
type InterceptParams struct {
	Event         Point               `json:"event"`
	Seq           int64               `json:"seq" proto:"min=1"`
	Payload       json.RawMessage     `json:"payload" proto:"externalizable"`
	TimeoutMillis int64               `json:"timeoutMillis" proto:"min=0"`
	Externalized  []ExternalizedField `json:"externalized,omitempty"`
}

// InterceptResult answers extension/intercept.
type InterceptResult struct {
	Decision     Decision            `json:"decision"`
	Reason       string              `json:"reason,omitempty"`
	Replacement  json.RawMessage     `json:"replacement,omitempty" proto:"externalizable"`
	Externalized []ExternalizedField `json:"externalized,omitempty"`
}

// EventParams are the params of the extension/event observation.
type EventParams struct {
	Event        Point               `json:"event"`
	Payload      json.RawMessage     `json:"payload" proto:"externalizable"`
	Externalized []ExternalizedField `json:"externalized,omitempty"`
}

// ResourcesChangedParams are the params of extension/resources/changed.
type ResourcesChangedParams struct {
	Paths []string `json:"paths"`
}
