package extension

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// JSON-RPC 2.0 error codes used by the protocol (PROTOCOL.md §8). The
// domain reasons of the frozen table all use codeDomain.
const (
	codeParseError     = -32700 // the line is not JSON
	codeInvalidRequest = -32600 // the envelope is not a valid request or response
	codeMethodNotFound = -32601 // the method is not registered
	codeInvalidParams  = -32602 // the params do not match the method's $def
	codeInternal       = -32603 // the handler failed
	codeServerBusy     = -32099 // too many inbound requests in flight
	codeDomain         = -32000 // every other frozen reason
)

// Reason is one of the 14 frozen error reasons of v1 (D7). It is carried in
// the data member of every protocol error and is the only thing a receiver
// classifies by. A Reason is itself an error, so a caller can write
//
//	if errors.Is(err, extension.ReasonProviderInterrupted) { ... }
//
// on errors built locally and on errors decoded from the peer alike.
type Reason string

// The frozen reasons, sorted as in the schema's errors array.
const (
	ReasonCapabilityNotDeclared Reason = "capability_not_declared"
	ReasonContentRefExpired     Reason = "content_ref_expired"
	ReasonFrameTooLarge         Reason = "frame_too_large"
	ReasonInterceptTimeout      Reason = "intercept_timeout"
	ReasonInternal              Reason = "internal"
	ReasonInvalidParams         Reason = "invalid_params"
	ReasonProtocolError         Reason = "protocol_error"
	ReasonProviderFailed        Reason = "provider_failed"
	ReasonProviderInterrupted   Reason = "provider_interrupted"
	ReasonShutdownTimeout       Reason = "shutdown_timeout"
	ReasonStreamCancelled       Reason = "stream_cancelled"
	ReasonStreamGap             Reason = "stream_gap"
	ReasonUnknownMethod         Reason = "unknown_method"
	ReasonUnsupportedVersion    Reason = "unsupported_version"
)

// reasonInfo is one row of the frozen reason table. Its fields are in the
// order of their names in the schema, so the table marshals as the
// schema's errors array.
type reasonInfo struct {
	Code      int    `json:"jsonRpcCode"`
	Message   string `json:"message"`
	Reason    Reason `json:"reason"`
	Retryable bool   `json:"retryable"`
}

// reasons is the frozen reason table, sorted by reason as in the schema.
var reasons = []reasonInfo{
	{codeDomain, "The extension used a capability its manifest did not declare.", ReasonCapabilityNotDeclared, false},
	{codeDomain, "The referenced content has expired.", ReasonContentRefExpired, true},
	{codeDomain, "The frame exceeds the frozen protocol size limit.", ReasonFrameTooLarge, false},
	{codeDomain, "The extension did not answer an intercept within its timeout.", ReasonInterceptTimeout, true},
	{codeInternal, "An internal extension protocol error occurred.", ReasonInternal, true},
	{codeInvalidParams, "The params do not match the registered method schema.", ReasonInvalidParams, false},
	{codeInvalidRequest, "The extension protocol frame or envelope is invalid.", ReasonProtocolError, false},
	{codeDomain, "The extension provider stream failed.", ReasonProviderFailed, true},
	{codeDomain, "The extension provider stream was interrupted.", ReasonProviderInterrupted, true},
	{codeDomain, "The extension did not shut down within the requested timeout.", ReasonShutdownTimeout, true},
	{codeDomain, "The provider stream was cancelled.", ReasonStreamCancelled, false},
	{codeDomain, "A provider stream chunk is missing from the ordered sequence.", ReasonStreamGap, true},
	{codeMethodNotFound, "The method is not registered in Extension Protocol v1.", ReasonUnknownMethod, false},
	{codeDomain, "The peer's extension protocol version is not supported.", ReasonUnsupportedVersion, false},
}

// info returns the frozen row of r and whether r is one of the 14; the
// row of any other reason is zero.
func (r Reason) info() (reasonInfo, bool) {
	i := slices.IndexFunc(reasons, func(row reasonInfo) bool { return row.Reason == r })
	if i < 0 {
		return reasonInfo{}, false
	}
	return reasons[i], true
}

// Error makes a Reason usable as an errors.Is target; it returns the reason name.
func (r Reason) Error() string { return string(r) }

// Error is a JSON-RPC error: one built locally to be sent or returned, or one
// decoded from the peer. When Reason is set the error is a protocol error of
// the frozen table and travels with data {"reason","retryable"} (D7).
//
// [errors.Is] matches an *Error against a [Reason] or against another *Error
// with the same Reason, never by message.
type Error struct {
	// Code is the JSON-RPC error code.
	Code int
	// Message is the human-readable text. Messages received from a sidecar
	// are redacted by the host before they reach an Error.
	Message string
	// Reason is the frozen reason, or "" when the error carries none (a
	// transport-level error such as -32099 "server busy", or a peer error
	// whose data is not a valid protocol error).
	Reason Reason
	// Data is the raw data member of a received error whose data is not a
	// valid {"reason","retryable"} object; nil otherwise.
	Data json.RawMessage
	// Err is an optional local cause; it never travels on the wire.
	Err error
}

// NewError returns a protocol error with the frozen code of reason and the
// given message; an empty message means the frozen one.
func NewError(reason Reason, message string) *Error {
	info, _ := reason.info()
	return &Error{Code: cmp.Or(info.Code, codeInternal), Message: cmp.Or(message, info.Message), Reason: reason} // no frozen code is 0
}

// errorf is [NewError] with a formatted message. A %w verb is honoured: the
// wrapped error becomes Err and stays reachable with errors.As.
func errorf(reason Reason, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return causedError(errors.Unwrap(err), reason, "%s", err)
}

// causedError is [NewError] with a formatted message and Err set to cause:
// the cause stays reachable with errors.Is and errors.As, but unlike a %w
// operand its text is not part of the message.
func causedError(cause error, reason Reason, format string, args ...any) *Error {
	e := NewError(reason, fmt.Sprintf(format, args...))
	e.Err = cause
	return e
}

// Error returns "<reason>: <message>" or "jsonrpc error <code>: <message>".
func (e *Error) Error() string {
	if e.Reason != "" {
		return string(e.Reason) + ": " + e.Message
	}
	return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message)
}

// Unwrap returns the local cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// Is matches target when it is a Reason equal to e.Reason, or an *Error
// with the same non-empty Reason (or, for reason-less errors, the same Code).
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Reason:
		return e.Reason != "" && e.Reason == t
	case *Error:
		return t.Reason == e.Reason && (t.Reason != "" || t.Code == e.Code)
	}
	return false
}

// errorData is the data member of a protocol error (D7). Senders emit
// exactly reason and retryable; a receiver also accepts an optional string
// action, which it ignores, and tolerates other members.
type errorData struct {
	Reason    Reason `json:"reason"`
	Retryable bool   `json:"retryable"`
	Action    string `json:"action,omitempty"`
}

func (errorData) openObject() {}

// wireError is the JSON-RPC error object, as it is encoded and read: code
// and message are required, other members are tolerated when read
// (PROTOCOL.md §8.3), and data is read as raw JSON.
type wireError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty" proto:"raw"`
}

func (wireError) openObject() {}

// toWire encodes e as a JSON-RPC error object. A protocol error carries
// exactly the two data members of D7. A caller-supplied Data that is not
// valid JSON is left out, so that the object always encodes: the answer
// goes out without it rather than not at all.
func (e *Error) toWire() wireError {
	w := wireError{Code: int64(e.Code), Message: e.Message}
	if e.Reason != "" {
		info, _ := e.Reason.info()
		w.Data, _ = json.Marshal(errorData{Reason: e.Reason, Retryable: info.Retryable})
	} else if json.Valid(e.Data) {
		w.Data = e.Data
	}
	return w
}

// asWireError converts any handler error into the *Error that is sent. A
// protocol error travels as is; anything else becomes the frozen internal
// error, and its text stays local (PROTOCOL.md §8.3).
func asWireError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var r Reason
	errors.As(err, &r) // "" when err holds no Reason
	if _, frozen := r.info(); !frozen {
		r = ReasonInternal
	}
	return NewError(r, "")
}

// The typed errors a host branches on, one per kind of failure: a plugin
// that did not start ([*StartError]), a plugin that failed an operation
// ([*PluginError]) and a manifest or install record that cannot be used
// ([*ManifestError]). Each unwraps to its cause, so a protocol [Reason]
// inside still matches errors.Is.

// StartError reports a plugin whose sidecar did not start (D8, D10, D17):
// the launch gate refused it, it claims a slot another plugin owns, or
// its spawn or its handshake failed.
type StartError struct {
	// Plugin is the plugin ID (the installed name).
	Plugin string
	// Stage is where the start failed: "launch" (the launch gate or a slot
	// conflict; nothing was started), "pipes", "spawn" or "handshake".
	Stage string
	// Required is the manifest's runtime.required: a required plugin's
	// failure fails the generation (D10). A manifest that is readable JSON
	// but not a valid manifest still counts as required when it says
	// runtime.required is true: a broken required plugin fails closed.
	Required bool
	// Elapsed is how long the start ran before it failed.
	Elapsed time.Duration
	// Stderr is the sidecar's redacted stderr tail, at most the tail size.
	Stderr string
	// Err is the cause.
	Err error
}

// Error renders the D10 diagnostic.
func (e *StartError) Error() string {
	if e.Stage == "launch" {
		return fmt.Sprintf("extension %q cannot be launched: %v", e.Plugin, e.Err)
	}
	msg := fmt.Sprintf("extension sidecar %s startup %s failed after %v: %v",
		e.Plugin, e.Stage, e.Elapsed.Round(time.Millisecond), e.Err)
	if e.Stderr != "" {
		msg += "; stderr: " + e.Stderr
	}
	return msg
}

// Unwrap returns the cause.
func (e *StartError) Unwrap() error { return e.Err }

// PluginError reports a failed operation on one plugin: install, enable,
// disable or remove; an operation at a hook point that a required-class
// plugin (D19) or a slot owner (D17) failed; and, as a warning, what an
// optional plugin failed (D10, D19, D20). Err carries the cause, such as
// a protocol reason (intercept_timeout, provider_interrupted, or
// protocol_error for a violation such as an invalid replacement).
type PluginError struct {
	// Plugin is the plugin ID (the installed name).
	Plugin string
	// Op is the operation: install, enable, disable, remove, or the hook
	// point of a failed operation, such as tool.before.
	Op string
	// Err is the cause.
	Err error
}

// Error returns "plugin "<name>" failed <op>: <cause>".
func (e *PluginError) Error() string {
	return fmt.Sprintf("plugin %q failed %s: %v", e.Plugin, e.Op, e.Err)
}

// Unwrap returns the cause.
func (e *PluginError) Unwrap() error { return e.Err }

// ManifestError reports a manifest or a plugin-packages.json that cannot
// be used, naming the file, the member and what to fix.
type ManifestError struct {
	// Path is the file when it was read from disk, or the plugin
	// directory when that does not exist.
	Path string
	// Field is the offending member as a path such as "runtime.priority",
	// "runtime.args[1]", `runtime.env["K"]` or "packages[2].scope"; empty
	// when the document as a whole is wrong.
	Field string
	// Msg says what is wrong and what to do.
	Msg string
	// Err is the underlying cause: an I/O error, or errCorruptPackages
	// for a record whose content cannot be used.
	Err error
}

// Error returns "<file>: <field>: <message>", or "<file>: <message>"
// without a field.
func (e *ManifestError) Error() string {
	file := cmp.Or(e.Path, ManifestFile)
	if e.Field == "" {
		return file + ": " + e.Msg
	}
	return file + ": " + e.Field + ": " + e.Msg
}

// Unwrap returns the underlying cause, if any.
func (e *ManifestError) Unwrap() error { return e.Err }
