// Package extension is the reference implementation of Reasonix Extension
// Protocol v1 (protocol ID "reasonix.extension.v1"): strict JSON-RPC 2.0 over
// NDJSON between the Reasonix agent (the host) and its sidecar extensions.
//
// The package is what a host vendors to speak the protocol; the sibling
// package sdk is what a sidecar author imports. Both share the wire, the DTOs
// and the validator defined here, so there is one implementation of each.
package extension

// ProtocolID is the frozen protocol identifier sent in extension/initialize.
const ProtocolID = "reasonix.extension.v1"

// ProtocolVersion is the protocol major version as it travels on the wire:
// the string "1".
const ProtocolVersion = "1"

// ProtocolMajor is the protocol major version as an integer.
const ProtocolMajor = 1
