package extension

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

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

// The handshake barrier (D6, PROTOCOL.md §3.4). A Conn keeps the host's
// side (ConnOptions.host, set by the Host) or the sidecar's
// (ConnOptions.Sidecar), or none. The rule for both: a frame read before
// extension/initialized has been written (host) or read (sidecar) is
// pre-barrier.
//
// The host's side: until it begins to write extension/initialized, the
// only frame the sidecar may send is the answer to a pending call
// (extension/initialize). Anything else read before that point, even when
// it is read after, poisons the connection: a request is answered
// protocol_error, the answer is flushed, and the connection ends with a
// protocol_error naming what was sent.
//
// The sidecar's side: before extension/initialize only it and
// extension/shutdown are served, between its answer and
// extension/initialized only extension/shutdown; other requests are
// answered protocol_error and the connection stays up, other
// notifications are dropped. The version rule of PROTOCOL.md §3.3 is
// applied to extension/initialize before the handler runs; an initialize
// answered with any error but invalid_params, and an answered
// extension/shutdown, end the connection once the answer is written (with
// that error, and with ErrClosed).

// errPreBarrier is the cause of the error a host connection ends
// with when the peer sent something before extension/initialized.
var errPreBarrier = errors.New("pre-barrier frame")

// handshakeState is where the sidecar's side of the handshake is.
type handshakeState uint8

const (
	awaitInitialize  handshakeState = iota
	initializing                    // an initialize is being answered: a second one is refused
	awaitInitialized                // answered; extension/initialized opens the barrier
	barrierOpen
)

// admit applies the barrier to one inbound frame on the reader goroutine,
// end being the count of input bytes read when the frame was. It reports
// whether the frame goes on to dispatch.
func (c *Conn) admit(m *message, fe *frameError, end int64) bool {
	switch {
	case c.opts.host:
		defer c.judge(end)
		// Post-barrier (read after the host began to write
		// extension/initialized), or the answer to extension/initialize.
		if at := c.openedAt.Load(); at >= 0 && end > at || fe == nil && m.kind == kindResponse && c.isPending(m.id) {
			return true
		}
		c.poison(m, fe)
		return false
	case c.opts.Sidecar && fe == nil: // a malformed frame is answered as such, whatever the barrier
		reject, admitted := c.sidecarAdmit(m)
		if reject != nil {
			c.sendAnswer(&outFrame{data: encodeError(&m.id, reject)})
		}
		return admitted
	}
	return true
}

// judge records, on the reader, that every frame within the first n input
// bytes has been judged (D6); checkSettled, which the writer also calls
// once it has stored openedAt, closes settled when both are known, so
// whichever of them comes second does.
func (c *Conn) judge(n int64) {
	if n > c.judged.Load() {
		c.judged.Store(n)
	}
	c.checkSettled()
}

func (c *Conn) checkSettled() {
	if at := c.openedAt.Load(); at >= 0 && c.judged.Load() >= at {
		c.settleOnce.Do(func() { close(c.settled) })
	}
}

// barrierSettled waits, on the host's side, until extension/initialized
// has been written and every frame read before it has been judged, or the
// connection ends, or ctx does. After it, a pre-barrier frame has already
// poisoned the connection: the handshake can tell a failed start from a
// later crash (D6).
func (c *Conn) barrierSettled(ctx context.Context) {
	select {
	case <-c.settled:
	case <-c.done:
	case <-ctx.Done():
	}
}

// poison ends a host connection on a pre-barrier frame (D6). A request is
// answered first, so the answer is flushed before the connection ends.
func (c *Conn) poison(m *message, fe *frameError) {
	what := fmt.Sprintf("%s %q", m.kind, m.method)
	switch {
	case fe != nil:
		what = "an unparsable frame (" + fe.err.Message + ")"
	case m.kind == kindResponse:
		what = fmt.Sprintf("a response to id %d", m.id)
	}
	err := causedError(errPreBarrier, ReasonProtocolError, "sent %s before extension/initialized", what)
	switch {
	case fe == nil && m.kind == kindRequest:
		c.sendAnswer(&outFrame{data: encodeError(&m.id, err)})
	case fe != nil && fe.kind == kindRequest:
		c.answerFrame(fe, err)
	}
	c.fail(err)
}

// sidecarAdmit moves the sidecar's handshake along for one well-formed
// frame and reports whether it goes on to dispatch; reject is the error to
// answer a request it refuses. A notification before the barrier opens is
// dropped, unanswered.
func (c *Conn) sidecarAdmit(m *message) (reject *Error, admitted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.side == barrierOpen && m.kind == kindRequest && m.method == MethodInitialize:
		// D6: the handshake happens once per connection.
		return errorf(ReasonProtocolError, "%s after the handshake", m.method), false
	case m.kind == kindResponse, c.side == barrierOpen:
		return nil, true
	case m.kind == kindNotification:
		if m.method == MethodInitialized && c.side == awaitInitialized {
			c.side = barrierOpen // on the reader: nothing can overtake it
		}
		return nil, c.side == barrierOpen
	case m.method == MethodShutdown:
		return nil, true
	case m.method == MethodInitialize && c.side == awaitInitialize:
		c.side = initializing // D6: one handshake, even when pipelined
		return nil, true
	}
	return errorf(ReasonProtocolError, "%s before extension/initialized", m.method), false
}

// answered applies the sidecar's side of the lifecycle to the answer of a
// request, handlerErr being the handler's error (nil for a result): it
// returns the error that ends the connection once the answer is written,
// or nil.
func (c *Conn) answered(method string, handlerErr error) error {
	if !c.opts.Sidecar {
		return nil
	}
	switch method {
	case MethodInitialize:
		c.mu.Lock()
		defer c.mu.Unlock()
		switch {
		case c.side != initializing:
		case handlerErr == nil:
			c.side = awaitInitialized
		case asWireError(handlerErr).Reason == ReasonInvalidParams:
			c.side = awaitInitialize // the host may try again
		default:
			return asWireError(handlerErr) // PROTOCOL.md §3.3: a refused handshake is fatal
		}
	case MethodShutdown:
		if handlerErr == nil {
			return ErrClosed // D11: answered, the sidecar's side closes
		}
	}
	return nil
}

// checkInitialize applies the sidecar's checks of PROTOCOL.md §3.3 to the
// initialize params: strictly decoded (invalid_params), the protocol ID,
// and the version rule.
func checkInitialize(raw []byte) error {
	var p InitializeParams
	if err := Decode(MethodInitialize, raw, &p); err != nil {
		return err
	}
	if p.ProtocolID != ProtocolID {
		return errorf(ReasonUnsupportedVersion, "this sidecar speaks %s, the host sent protocolId %q", ProtocolID, p.ProtocolID)
	}
	return checkVersion(p.ProtocolVersion)
}

// checkVersion is the version rule both sides apply to the
// protocolVersion the peer sent (PROTOCOL.md §3.3): an integer
// (protocol_error otherwise) equal to the major this side speaks
// (unsupported_version otherwise).
func checkVersion(v string) error {
	major, err := strconv.Atoi(v)
	if err != nil {
		return errorf(ReasonProtocolError, "protocolVersion %q is not an integer major version", v)
	}
	if major != protocolMajor {
		return errorf(ReasonUnsupportedVersion, "the peer speaks protocol major %d, this side speaks %d", major, protocolMajor)
	}
	return nil
}
