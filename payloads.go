package extension

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// The payload documents of the 17 hook points (PROTOCOL.md §4.1). They
// travel in the free-form payload of extension/intercept and extension/event
// and are not part of the frozen schema. Every member is optional on the
// wire; a replacement is strictly decoded into the point's document and then
// checked by the point's rules (D16, see DecodePayload).

// InputPayload is the payload of input.receive.
type InputPayload struct {
	Text string `json:"text,omitempty"`
}

// AgentStartPayload is the payload of agent.before_start.
type AgentStartPayload struct {
	Model     string `json:"model,omitempty"`
	ToolCount int64  `json:"toolCount,omitempty"`
	SessionID string `json:"sessionId,omitempty"`
}

// SystemPromptPayload is the payload of system_prompt.build.
type SystemPromptPayload struct {
	Prompt        string `json:"prompt,omitempty"`
	WorkspaceRoot string `json:"workspaceRoot,omitempty"`
}

// ContextPayload is the payload of context.prepare.
type ContextPayload struct {
	Messages []ProviderMessage `json:"messages,omitempty"`
}

// ProviderRequestPayload is the payload of provider.request.
type ProviderRequestPayload struct {
	Request ProviderRequest `json:"request"`
}

// ProviderResponsePayload is the payload of provider.response.
type ProviderResponsePayload struct {
	Text      string             `json:"text,omitempty"`
	Reasoning string             `json:"reasoning,omitempty"`
	Signature string             `json:"signature,omitempty"`
	Calls     []ProviderToolCall `json:"calls,omitempty"`
	Usage     *ProviderUsage     `json:"usage,omitempty"`
}

// ToolPayload is the payload of tool.before; Arguments is JSON-object text.
type ToolPayload struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

// ToolResultPayload is the payload of tool.after.
type ToolResultPayload struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	Result    string `json:"result,omitempty"`
	IsError   bool   `json:"isError,omitempty"`
}

// PermissionPayload is the payload of permission.decision. HostDecision is
// the host's own ruling, "allow" or "deny", filled before dispatch.
type PermissionPayload struct {
	Name         string `json:"name,omitempty"`
	Arguments    string `json:"arguments,omitempty"`
	ReadOnly     bool   `json:"readOnly,omitempty"`
	HostDecision string `json:"hostDecision,omitempty"`
}

// CompactionPreparePayload is the payload of compaction.prepare.
type CompactionPreparePayload struct {
	Messages []ProviderMessage `json:"messages,omitempty"`
	Guidance string            `json:"guidance,omitempty"`
}

// CompactionCompletePayload is the payload of compaction.complete.
type CompactionCompletePayload struct {
	Summary string `json:"summary,omitempty"`
}

// SessionPayload is the payload of the five session.* points; Phase names
// the point: "start", "end", "load", "save" or "rotate".
type SessionPayload struct {
	SessionPath string `json:"sessionPath,omitempty"`
	Phase       string `json:"phase,omitempty"`
}

// FrontendPayload is the payload of frontend.event.
type FrontendPayload struct {
	Kind   string `json:"kind,omitempty"`
	Text   string `json:"text,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Point is one of the 17 frozen hook points shared by extension/intercept
// and extension/event (PROTOCOL.md §4.1).
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

// pointInfo is one row of the table of PROTOCOL.md §4.1.
type pointInfo struct {
	point   Point
	slot    string       // the slot whose owner has the final say there (D17); "" for none
	fast    bool         // in the 5-second timeout family (D18)
	payload reflect.Type // the payload document
}

// pointTable holds the 17 points, sorted.
var pointTable = []pointInfo{
	{AgentBeforeStart, "", false, reflect.TypeFor[AgentStartPayload]()},
	{CompactionComplete, "compaction", false, reflect.TypeFor[CompactionCompletePayload]()},
	{CompactionPrepare, "compaction", false, reflect.TypeFor[CompactionPreparePayload]()},
	{ContextPrepare, "context", false, reflect.TypeFor[ContextPayload]()},
	{FrontendEvent, "frontend_events", false, reflect.TypeFor[FrontendPayload]()},
	{InputReceive, "", true, reflect.TypeFor[InputPayload]()},
	{PermissionDecision, "permission", true, reflect.TypeFor[PermissionPayload]()},
	{ProviderRequestPoint, "provider_request", false, reflect.TypeFor[ProviderRequestPayload]()},
	{ProviderResponsePoint, "provider_response", false, reflect.TypeFor[ProviderResponsePayload]()},
	{SessionEnd, "session_policy", false, reflect.TypeFor[SessionPayload]()},
	{SessionLoad, "session_policy", false, reflect.TypeFor[SessionPayload]()},
	{SessionRotate, "session_policy", false, reflect.TypeFor[SessionPayload]()},
	{SessionSave, "session_policy", false, reflect.TypeFor[SessionPayload]()},
	{SessionStart, "session_policy", false, reflect.TypeFor[SessionPayload]()},
	{SystemPromptBuild, "system_prompt", false, reflect.TypeFor[SystemPromptPayload]()},
	{ToolAfter, "", true, reflect.TypeFor[ToolResultPayload]()},
	{ToolBefore, "", true, reflect.TypeFor[ToolPayload]()},
}

// points lists the 17 points, sorted.
var points = column(pointTable, func(row pointInfo) Point { return row.point })

// Points returns the 17 hook points, sorted.
func Points() []Point { return slices.Clone(points) }

// Valid reports whether p is one of the 17 hook points.
func (p Point) Valid() bool { return slices.Contains(points, p) }

func (Point) enumValues() []string { return enumStrings(points...) }

// info returns the table row of p; ok is false for an unknown point.
func (p Point) info() (pointInfo, bool) {
	return find(pointTable, func(row pointInfo) bool { return row.point == p })
}

// slotOf returns the slot whose owner has the final say at p (D17), or "".
func slotOf(p Point) string { info, _ := p.info(); return info.slot }

// enumStrings lists the values of an enum type, for its enumValues.
func enumStrings[T ~string](vs ...T) []string {
	return column(vs, func(v T) string { return string(v) })
}

// find returns the first row of a table that match accepts, and whether
// there is one.
func find[R any](rows []R, match func(R) bool) (row R, ok bool) {
	if i := slices.IndexFunc(rows, match); i >= 0 {
		return rows[i], true
	}
	return row, false
}

// column returns f of each row, in order: one column of a table.
func column[R, T any](rows []R, f func(R) T) []T {
	out := make([]T, len(rows))
	for i, row := range rows {
		out[i] = f(row)
	}
	return out
}

// DecodePayload strictly decodes a payload or replacement document of
// point p into a fresh value of its payload type and checks the point's
// replacement rules (D16, PROTOCOL.md §4.1). It returns the decoded value,
// such as *ToolPayload for tool.before; a failure names the JSON pointer.
func DecodePayload(p Point, doc []byte) (any, error) {
	info, ok := p.info()
	if !ok {
		return nil, fmt.Errorf("%q is not a hook point", p)
	}
	if len(bytes.TrimSpace(doc)) == 0 {
		return nil, fmt.Errorf("%s replacement is empty", p)
	}
	v := reflect.New(info.payload).Interface()
	if err := Unmarshal(doc, v); err != nil {
		return nil, err
	}
	if pointer, msg := replacementRule(p, v); msg != "" {
		return nil, &ValidationError{Def: info.payload.Name(), Pointer: pointer, Msg: msg}
	}
	return v, nil
}

// replacementRule applies the replacement rules of PROTOCOL.md §4.1 to a
// decoded payload document; it returns the offending member's pointer and
// what is wrong, or "" when the document may replace the payload.
func replacementRule(p Point, v any) (pointer, msg string) {
	switch x := v.(type) {
	case *InputPayload:
		return nonBlank("text", x.Text)
	case *AgentStartPayload:
		return nonBlank("sessionId", x.SessionID)
	case *SystemPromptPayload:
		return nonBlank("workspaceRoot", x.WorkspaceRoot)
	case *ContextPayload:
		if x.Messages == nil {
			return "/messages", "messages must be present as an array (it may be [])"
		}
	case *CompactionPreparePayload:
		if x.Messages == nil {
			return "/messages", "messages must be present as an array (it may be [])"
		}
	case *ToolPayload:
		return toolRule(x.Name, x.Arguments)
	case *ToolResultPayload:
		return toolRule(x.Name, x.Arguments)
	case *PermissionPayload:
		if x.HostDecision != "allow" && x.HostDecision != "deny" {
			return "/hostDecision", `hostDecision must be "allow" or "deny"`
		}
		return toolRule(x.Name, x.Arguments)
	case *CompactionCompletePayload:
		return nonBlank("summary", x.Summary)
	case *SessionPayload:
		// The five phases are exactly the points session.<phase>.
		if !Point("session." + x.Phase).Valid() {
			return "/phase", fmt.Sprintf("phase %q is not start, end, load, save or rotate", x.Phase)
		}
		if Point("session."+x.Phase) != p {
			return "/phase", fmt.Sprintf("phase %q does not match the point %s", x.Phase, p)
		}
	case *FrontendPayload:
		return nonBlank("kind", x.Kind)
	}
	return "", ""
}

// nonBlank is the rule of a member that must not be empty or blank.
func nonBlank(member, value string) (pointer, msg string) {
	if strings.TrimSpace(value) == "" {
		return "/" + member, member + " must not be empty"
	}
	return "", ""
}

// jsonObjectNode admits any JSON object, every member name inside checked
// for duplicates (D3).
var jsonObjectNode = &vnode{kind: vAny, object: true, def: "arguments"} // def names it in errors

// toolRule: a tool needs a name, and its arguments are empty or the text
// of a JSON object read as strictly as the frames around it (D3): no
// duplicate member can hide one value behind another.
func toolRule(name, args string) (pointer, msg string) {
	if pointer, msg := nonBlank("name", name); msg != "" || args == "" { // a blank name fails, no arguments pass
		return pointer, msg
	}
	if err := walk(jsonObjectNode, []byte(args), reflect.Value{}); err != nil {
		if err.(*ValidationError).rule == ruleKind {
			return "/arguments", "arguments must be the text of a JSON object"
		}
		return "/arguments", err.Error()
	}
	return "", ""
}
