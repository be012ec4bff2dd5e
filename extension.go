// Package extension is the reference implementation of Reasonix Extension
// Protocol v1 ("reasonix.extension.v1"): strict JSON-RPC 2.0 over NDJSON
// between the Reasonix agent (the host) and its sidecar extensions, each a
// separate process spoken to on its stdin and stdout.
//
// The specification is PROTOCOL.md at the root of this module; its rulings
// D1-D28 are cited by ID beside the code that enforces them and in the
// names of the tests that prove them, and its sections as "PROTOCOL.md
// §3.4". This package doc states each rule in one sentence.
//
// # Who uses what
//
// A host vendors this package: [Host] starts a generation of the installed
// plugins' sidecars ([Host.Start], [Host.Reload]), and a [Runtime] puts
// hook points through them ([Runtime.Intercept], [Runtime.Observe]),
// serves their models ([Runtime.Catalog], [Runtime.OpenStream],
// [Runtime.InterceptProvider]), shows their UI through a [Frontend]
// ([Runtime.Action], [Runtime.Submit]) and stops them ([Runtime.Close]). Plugins are managed with [Install],
// [SetEnabled], [Remove] and [LoadPackages], and shown with [TrustPlugin].
// Errors to branch on: the [Reason] values, [PluginError], [StartError],
// [LaunchError], [SlotConflictError] and the Err* sentinels.
//
// A sidecar author imports the sibling package sdk, which builds on
// [Conn], [DecodeParams], [Unmarshal] and the DTOs of this package.
//
// An implementer in another language reads PROTOCOL.md, checks documents
// with [Validate] against the canonical schema ([CanonicalSchema],
// [GeneratedSchemaHash]), and finds the vocabulary here: [Methods],
// [Points], [Reasons] and the DTOs, one per $def. [Check] runs a sidecar
// in any language through every conformance scenario that applies to it
// and names the ruling each failure breaks (exthost check).
//
// # Schema
//
// D1: the canonical schema is generated from the DTOs and the registry and
// is byte-identical to the frozen contract; rules the schema cannot
// express are enforced in code (PROTOCOL.md §10).
//
// # Transport
//
// D2: one JSON object per "\n"-terminated line of at most [FrameBytes]
// including the newline; a longer inbound line is fatal, a longer outbound
// one fails only its call. D3: documents are decoded strictly, refusing
// unknown, duplicate and case-variant members, null for optional members,
// trailing data and integers with a fraction or exponent. D4: request ids
// are integers that fit in an int64, numbered from 1 by each side. D5:
// params, when present, are an object, and absent params read as {}. D26:
// the host's reader pushes back on a burst of notifications instead of
// failing the connection (PROTOCOL.md §2).
//
// # Lifecycle
//
// D8: only a plugin installed and enabled in <home>/plugin-packages.json,
// with a v1 manifest and a runtime block, ever starts, in exec form. D9:
// the sidecar's declaration must stay within the manifest expectation the
// host sends. D6: before extension/initialized the sidecar may send
// nothing but its answer to extension/initialize; anything else poisons
// the connection. D10: at most four sidecars initialize at once under one
// 30 s deadline, and a required plugin's failure fails the generation.
// D11: shutdown is bounded (shutdown request, stdin closed, 750 ms grace,
// kill, reap), and a clean stop exits with status 0. D12: the kill targets the sidecar's process group. D13: a
// sidecar that dies or stalls is crashed, and its calls fail with
// provider_interrupted, never falling back. D14: a reload swaps in a
// complete new generation or keeps the old one (PROTOCOL.md §3).
//
// # Interception
//
// D15: a point's chain runs its subscribers in priority, then plugin ID,
// then installed order, one after another. D16: the verdicts are
// continue, block, replace (strictly revalidated) and, at
// permission.decision only, allow and deny; an allow over a host deny is
// audited. D17: a slot has one owner, which has the final say after the
// chain. D28: a tool:<name> or provider:<ref> owner has it for its tool
// or ref. D18: intercept budgets are 5 s for input, tool and
// permission points and 30 s for the rest, and the host's timer rules. D19: a
// required-class plugin's failure fails the operation; an optional one's
// is warned once and skipped. D20: events never block the caller; past 16
// in flight per sidecar they are dropped and counted (PROTOCOL.md §4).
//
// # Providers
//
// D21: stream chunks are reassembled in order from seq 1, with a window
// of 256, duplicates dropped, and a gap failing the stream as
// stream_gap 5 s after it appeared or 1 s after stream/end; a caller's
// cancel ends the stream with stream_cancelled and tells the sidecar
// (PROTOCOL.md §5).
//
// # Content references
//
// D22: payloads over [InlinePayloadBytes] travel as content refs in a
// bounded per-connection store, read in pages of [ContentPageBytes] and
// verified by length and SHA-256 ([Rehydrate], [ReadContent]); a
// payload over [FrameBytes] is refused locally (PROTOCOL.md §6).
//
// # Structured UI
//
// D23: UI surfaces and prompts are structured data only: payloads decode
// strictly per kind and no string may hold raw HTML, a script or file
// URL, a Markdown image or a control character ([DecodeSurface]). D24: a
// publish of another session or generation is never shown, and the
// binding moves with a reload. A host shows what passes through its
// [Frontend]; [Runtime.Action] and [Runtime.Submit] call back
// (PROTOCOL.md §7).
//
// # Errors and security
//
// D7: every protocol error carries data {"reason","retryable"} from the
// frozen table of [Reason], and receivers classify by reason only; [Error]
// is the wire error. D25: whatever a sidecar says is redacted before a
// person or a log sees it ([Redactor]). D27: control characters and
// escape sequences from a sidecar are shown escaped ([TerminalSafe])
// (PROTOCOL.md §8, §9).
//
// A host sees a sidecar's stderr as it is written with [Host.OnStderr],
// redacted and escaped like everything else a sidecar says.
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
