// Package extension is the reference implementation of Reasonix Extension
// Protocol v1 (protocol ID "reasonix.extension.v1"): strict JSON-RPC 2.0 over
// NDJSON between the Reasonix agent (the host) and its sidecar extensions.
//
// A host vendors this package to start, drive and stop sidecars; a sidecar
// author imports the sibling package sdk. Both share the wire, the DTOs and
// the validator defined here, so there is one implementation of each. The
// rulings of DECISIONS.md are cited by ID (D1-D25) beside the code that
// enforces them and in the names of the tests that prove them.
//
// # Schema
//
// The frozen contract is the canonical schema, generated from the Go DTOs of
// this package and the method registry by reflection ([CanonicalSchema],
// [SchemaHash], [GenerateArtifacts], D1). It is byte-identical to the frozen
// file; [GeneratedSchemaHash] is its sha256. [Methods] lists the 16 methods
// with their direction and class; [Points] the 17 hook points; [Reasons] the
// 14 error reasons.
//
// # Framing
//
// One JSON object per "\n"-terminated line, at most [FrameBytes] including
// the newline; a longer inbound line is fatal, a longer outbound one fails
// only its call (D2). Frames are written by one goroutine and never
// interleave.
//
// # Envelopes and strict decoding
//
// Ids are integers that fit in an int64 (D4); params, when present, are an
// object (D5). Only the exact member names count and duplicates are refused
// (D3). Params and results are decoded by validating them against their
// $def first and unmarshalling them second ([DecodeParams], [DecodeResult],
// [Validate]); a failure is a [*ValidationError] naming the JSON pointer.
// [Conn] is one JSON-RPC peer over a reader and a writer, used by both sides.
//
// # Errors
//
// Every protocol error carries data {"reason","retryable"} (D7). [Reason]
// holds the frozen table; [Error] is the wire error, matched by reason with
// errors.Is on errors built locally and received alike. Local failures carry
// where and why: [StartError], [InterceptError], [LaunchError].
//
// # Plugins and the launch gate
//
// Only a plugin recorded as installed and enabled in
// <home>/plugin-packages.json, whose reasonix-plugin.json has a runtime
// block, can start (D8; [LaunchablePlugins], [Install], [ParseManifest]).
// Sidecars are full trust: [TrustSummary] says what running one grants.
//
// # Handshake
//
// The host sends extension/initialize with the manifest expectation; the
// sidecar's declaration must stay within it (D9); until the host sends
// extension/initialized the sidecar may send nothing but that answer (D6).
//
// # Runtime generations
//
// [Host.Start] starts every runtime plugin under one deadline, at most four
// initializing at once (D10); [Runtime.Close] stops them, bounded (D11), and
// kills their process groups (D12); a sidecar that dies or stalls is crashed
// and its calls fail with provider_interrupted (D13); [Host.Reload] swaps a
// complete new generation in, or keeps the old one (D14).
//
// # Interception
//
// [Runtime.Intercept] runs a hook point's interceptors in D15 order, applies
// their verdicts (D16), gives the slot owner the final say (D17), under the
// budgets of D18, failing the operation only for required-class plugins
// (D19). [Runtime.Observe] sends events without ever blocking (D20).
//
// # Redaction
//
// Every sidecar-supplied string that reaches an error, a warning or a log
// goes through a [Redactor] (D25). [Tail] keeps a sidecar's stderr bounded;
// [Secret] holds a credential that never prints.
//
// # Differences from plain JSON-RPC 2.0
//
// No batches, no string or null ids, params only as an object, a size limit
// per frame, a barrier before the first exchange, and error data with a
// frozen reason on every protocol error. A malformed response is dropped,
// never answered.
package extension

// ProtocolID is the frozen protocol identifier sent in extension/initialize.
const ProtocolID = "reasonix.extension.v1"

// ProtocolVersion is the protocol major version as it travels on the wire:
// the string "1".
const ProtocolVersion = "1"

// protocolMajor is the protocol major version as an integer.
const protocolMajor = 1
