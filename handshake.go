package extension

// Lifecycle methods (PROTOCOL.md §3). The host sends
// extension/initialize first; the sidecar answers its declaration; the host
// checks it against the manifest (D9) and opens the barrier with
// extension/initialized (D6); extension/shutdown ends it (D11).
const (
	MethodInitialize  = "extension/initialize"
	MethodInitialized = "extension/initialized"
	MethodShutdown    = "extension/shutdown"
)

// UIHost names the kind of front end the host runs.
type UIHost string

// The UI host kinds.
const (
	UIHostACP      UIHost = "acp"
	UIHostDesktop  UIHost = "desktop"
	UIHostHeadless UIHost = "headless"
	UIHostTUI      UIHost = "tui"
)

func (UIHost) enumValues() []string {
	return enumStrings(UIHostACP, UIHostDesktop, UIHostHeadless, UIHostTUI)
}

// InitializeParams are the params of extension/initialize.
type InitializeParams struct {
	ProtocolVersion string              `json:"protocolVersion" proto:"nonempty"`
	ProtocolID      string              `json:"protocolId" proto:"nonempty"`
	Manifest        ManifestExpectation `json:"manifest"`
	Session         SessionContext      `json:"session"`
	Capabilities    HostCapabilities    `json:"capabilities"`
}

// ManifestExpectation is what the host will accept from the sidecar,
// copied from the manifest's runtime block (D9).
type ManifestExpectation struct {
	Intercepts   []string `json:"intercepts,omitempty"`
	Replaces     []string `json:"replaces,omitempty"`
	Providers    []string `json:"providers,omitempty"`
	UIActions    []string `json:"uiActions,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
}

// SessionContext identifies the session and runtime generation a sidecar
// serves; every sidecar of one generation gets the same value.
type SessionContext struct {
	SessionID     string `json:"sessionId" proto:"nonempty"`
	WorkspaceRoot string `json:"workspaceRoot" proto:"nonempty"`
	Generation    uint64 `json:"generation"`
}

// HostCapabilities describes the host to the sidecar.
type HostCapabilities struct {
	ContentRefs     bool   `json:"contentRefs"`
	UIHost          UIHost `json:"uiHost"`
	ProtocolVersion string `json:"protocolVersion" proto:"nonempty"`
}

// InitializeResult is the sidecar's declaration.
type InitializeResult struct {
	ProtocolVersion    string               `json:"protocolVersion" proto:"nonempty"`
	Name               string               `json:"name" proto:"nonempty"`
	Version            string               `json:"version" proto:"nonempty"`
	Subscriptions      []string             `json:"subscriptions,omitempty"`
	Replaces           []string             `json:"replaces,omitempty"`
	Providers          []ProviderDescriptor `json:"providers,omitempty"`
	UIActions          []UIActionDecl       `json:"uiActions,omitempty"`
	StateSchemaVersion int64                `json:"stateSchemaVersion" proto:"min=0"`
}

// InitializedParams are the (empty) params of extension/initialized.
type InitializedParams struct{}

// ShutdownParams are the params of extension/shutdown.
type ShutdownParams struct {
	TimeoutMillis int64 `json:"timeoutMillis" proto:"min=0"`
}

// ShutdownResult answers extension/shutdown.
type ShutdownResult struct {
	Accepted bool `json:"accepted"`
}
