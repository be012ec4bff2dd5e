package extension

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// The payload documents of the 17 hook points (CONTRACT-NOTES §3.4). They
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

// payloadType returns the payload document of p.
func payloadType(p Point) reflect.Type {
	var v any
	switch p {
	case InputReceive:
		v = InputPayload{}
	case AgentBeforeStart:
		v = AgentStartPayload{}
	case SystemPromptBuild:
		v = SystemPromptPayload{}
	case ContextPrepare:
		v = ContextPayload{}
	case ProviderRequestPoint:
		v = ProviderRequestPayload{}
	case ProviderResponsePoint:
		v = ProviderResponsePayload{}
	case ToolBefore:
		v = ToolPayload{}
	case ToolAfter:
		v = ToolResultPayload{}
	case PermissionDecision:
		v = PermissionPayload{}
	case CompactionPrepare:
		v = CompactionPreparePayload{}
	case CompactionComplete:
		v = CompactionCompletePayload{}
	case SessionStart, SessionEnd, SessionLoad, SessionSave, SessionRotate:
		v = SessionPayload{}
	case FrontendEvent:
		v = FrontendPayload{}
	default:
		return nil
	}
	return reflect.TypeOf(v)
}

// payloadSchema compiles the payload documents with the same reflection
// builder and validator as the frozen schema, so a replacement gets the
// strict rules of D3: exact member names, no duplicates, no null, no
// trailing data.
var payloadSchema = sync.OnceValue(func() map[string]*vnode {
	b := &schemaBuilder{defs: map[string]any{}}
	for _, p := range Points() {
		b.def(payloadType(p))
	}
	doc, err := json.Marshal(map[string]any{"$defs": b.defs})
	if err != nil {
		panic("extension: marshalling the payload schema: " + err.Error())
	}
	types := map[string]reflect.Type{}
	for name := range b.defs {
		types[name] = nil
	}
	for _, p := range Points() {
		collectTypes(payloadType(p), types)
	}
	defs, err := compileSchema(doc, types)
	if err != nil {
		panic("extension: compiling the payload schema: " + err.Error())
	}
	return defs
})

// collectTypes records t and every struct it reaches by name.
func collectTypes(t reflect.Type, into map[string]reflect.Type) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || into[t.Name()] != nil {
		return
	}
	into[t.Name()] = t
	for i := 0; i < t.NumField(); i++ {
		collectTypes(t.Field(i).Type, into)
	}
}

// DecodePayload strictly decodes a payload or replacement document of
// point p into a fresh value of its payload type and checks the point's
// rules (D16, CONTRACT-NOTES §3.4). It returns the decoded value, such as
// *ToolPayload for tool.before; a failure names the JSON pointer.
func DecodePayload(p Point, doc []byte) (any, error) {
	t := payloadType(p)
	if t == nil {
		return nil, fmt.Errorf("%q is not a hook point", p)
	}
	if len(strings.TrimSpace(string(doc))) == 0 {
		return nil, fmt.Errorf("%s replacement is empty", p)
	}
	if err := validateNode(t.Name(), payloadSchema()[t.Name()], doc); err != nil {
		return nil, err
	}
	out := reflect.New(t)
	if err := json.Unmarshal(doc, out.Interface()); err != nil {
		return nil, err
	}
	if err := checkPayload(p, doc, out.Interface()); err != nil {
		return nil, err
	}
	return out.Interface(), nil
}

// checkPayload applies the replacement rules of CONTRACT-NOTES §3.4.
func checkPayload(p Point, doc []byte, v any) error {
	invalid := func(pointer, format string, args ...any) error {
		return &ValidationError{Def: reflect.TypeOf(v).Elem().Name(), Pointer: pointer, Msg: fmt.Sprintf(format, args...)}
	}
	blank := func(s string) bool { return strings.TrimSpace(s) == "" }
	present := func(name string) bool {
		var vals [1][]byte
		return exactMembers(doc, vals[:], name) && vals[0] != nil
	}
	switch x := v.(type) {
	case *InputPayload:
		if blank(x.Text) {
			return invalid("/text", "text must not be empty")
		}
	case *AgentStartPayload:
		if blank(x.SessionID) {
			return invalid("/sessionId", "sessionId must not be empty")
		}
	case *SystemPromptPayload:
		if blank(x.WorkspaceRoot) {
			return invalid("/workspaceRoot", "workspaceRoot must not be empty")
		}
	case *ContextPayload:
		if !present("messages") {
			return invalid("/messages", "messages must be present as an array (it may be [])")
		}
	case *CompactionPreparePayload:
		if !present("messages") {
			return invalid("/messages", "messages must be present as an array (it may be [])")
		}
	case *ProviderResponsePayload:
		for i, c := range x.Calls {
			if blank(c.ID) || blank(c.Name) {
				return invalid(fmt.Sprintf("/calls/%d", i), "every call needs an id and a name")
			}
		}
	case *ToolPayload:
		return checkTool(invalid, x.Name, x.Arguments)
	case *ToolResultPayload:
		return checkTool(invalid, x.Name, x.Arguments)
	case *PermissionPayload:
		if x.HostDecision != "allow" && x.HostDecision != "deny" {
			return invalid("/hostDecision", `hostDecision must be "allow" or "deny"`)
		}
		return checkTool(invalid, x.Name, x.Arguments)
	case *CompactionCompletePayload:
		if blank(x.Summary) {
			return invalid("/summary", "summary must not be empty")
		}
	case *SessionPayload:
		switch x.Phase {
		case "start", "end", "load", "save", "rotate":
		default:
			return invalid("/phase", "phase %q is not start, end, load, save or rotate", x.Phase)
		}
		if Point("session."+x.Phase) != p {
			return invalid("/phase", "phase %q does not match the point %s", x.Phase, p)
		}
	case *FrontendPayload:
		if blank(x.Kind) {
			return invalid("/kind", "kind must not be empty")
		}
	}
	return nil
}

// checkTool: a tool needs a name, and its arguments are empty or the text
// of a JSON object.
func checkTool(invalid func(string, string, ...any) error, name, args string) error {
	if strings.TrimSpace(name) == "" {
		return invalid("/name", "name must not be empty")
	}
	if args == "" {
		return nil
	}
	// The text is a JSON object read as strictly as the frames around it
	// (D3): no duplicate member can hide one value behind another.
	s := scanner{data: []byte(args)}
	if s.peek() != '{' {
		return invalid("/arguments", "arguments must be the text of a JSON object")
	}
	if _, err := s.value(&dupState{}); err != nil {
		return invalid("/arguments", "arguments: %v", err)
	}
	if err := s.end(); err != nil {
		return invalid("/arguments", "arguments: %v", err)
	}
	return nil
}
