package extension

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
)

//go:generate go run ./cmd/extension-protocol-gen

// The four frozen limits, in bytes (CONTRACT-NOTES §0). [FrameBytes] is
// declared with the wire.
const (
	// ExternalizeFieldBytes: a payload larger than this travels as a content ref.
	ExternalizeFieldBytes = 64 << 10
	// ContentRefChunkBytes: the most raw bytes one host/content/read page carries.
	ContentRefChunkBytes = 256 << 10
	// ContentRefObjectBytes: the largest content object.
	ContentRefObjectBytes = 8 << 20
)

// Direction says who sends a method and whether it expects an answer.
type Direction string

// The four directions, named from the host's point of view.
const (
	HostToExtensionRequest      Direction = "host_to_extension_request"
	ExtensionToHostRequest      Direction = "extension_to_host_request"
	HostToExtensionNotification Direction = "host_to_extension_notification"
	ExtensionToHostNotification Direction = "extension_to_host_notification"
)

// MethodClass groups methods by concern.
type MethodClass string

// The method classes.
const (
	ClassLifecycle   MethodClass = "lifecycle"
	ClassIntercept   MethodClass = "intercept"
	ClassObservation MethodClass = "observation"
	ClassProvider    MethodClass = "provider"
	ClassUI          MethodClass = "ui"
	ClassContent     MethodClass = "content"
)

// Method is one entry of the frozen method registry.
type Method struct {
	Name      string
	Direction Direction
	Class     MethodClass
	// Params and Result are the $def names of the params and result
	// documents; Result is "" for notifications.
	Params, Result string

	params, result reflect.Type
}

// Notification reports whether the method is a notification.
func (m Method) Notification() bool {
	return m.Direction == HostToExtensionNotification || m.Direction == ExtensionToHostNotification
}

func method(name string, d Direction, c MethodClass, params, result any) Method {
	m := Method{Name: name, Direction: d, Class: c, params: reflect.TypeOf(params)}
	m.Params = m.params.Name()
	if result != nil {
		m.result = reflect.TypeOf(result)
		m.Result = m.result.Name()
	}
	return m
}

// registry is built once; callers get copies.
var registry = sync.OnceValue(func() []Method {
	return []Method{
		method(MethodEvent, HostToExtensionNotification, ClassObservation, EventParams{}, nil),
		method(MethodInitialize, HostToExtensionRequest, ClassLifecycle, InitializeParams{}, InitializeResult{}),
		method(MethodInitialized, HostToExtensionNotification, ClassLifecycle, InitializedParams{}, nil),
		method(MethodIntercept, HostToExtensionRequest, ClassIntercept, InterceptParams{}, InterceptResult{}),
		method(MethodProviderCatalog, HostToExtensionRequest, ClassProvider, ProviderCatalogParams{}, ProviderCatalogResult{}),
		method(MethodStreamCancel, HostToExtensionRequest, ClassProvider, StreamCancelParams{}, StreamCancelResult{}),
		method(MethodStreamChunk, ExtensionToHostNotification, ClassProvider, StreamChunkParams{}, nil),
		method(MethodStreamEnd, ExtensionToHostNotification, ClassProvider, StreamEndParams{}, nil),
		method(MethodStreamOpen, HostToExtensionRequest, ClassProvider, StreamOpenParams{}, StreamOpenResult{}),
		method(MethodResourcesChanged, HostToExtensionNotification, ClassObservation, ResourcesChangedParams{}, nil),
		method(MethodShutdown, HostToExtensionRequest, ClassLifecycle, ShutdownParams{}, ShutdownResult{}),
		method(MethodUIAction, HostToExtensionRequest, ClassUI, UIActionParams{}, UIActionResult{}),
		method(MethodUISubmit, HostToExtensionRequest, ClassUI, UISubmitParams{}, UISubmitResult{}),
		method(MethodContentRead, ExtensionToHostRequest, ClassContent, ContentReadParams{}, ContentReadResult{}),
		method(MethodUIPublish, ExtensionToHostRequest, ClassUI, UIPublishParams{}, UIPublishResult{}),
		method(MethodUIRequest, ExtensionToHostRequest, ClassUI, UIRequestParams{}, UIRequestResult{}),
	}
})

// Methods returns the 16 frozen methods sorted by name.
func Methods() []Method { return append([]Method(nil), registry()...) }

// LookupMethod returns the registry entry of name.
func LookupMethod(name string) (Method, bool) {
	for _, m := range registry() {
		if m.Name == name {
			return m, true
		}
	}
	return Method{}, false
}

// enumType is implemented by the string types whose values are frozen.
type enumType interface{ enumValues() []string }

var (
	rawMessageType = reflect.TypeOf(json.RawMessage(nil))
	enumIface      = reflect.TypeOf((*enumType)(nil)).Elem()
)

// fieldTags is the parsed proto struct tag of one DTO field. It carries the
// rules the JSON Schema cannot say (CONTRACT-NOTES §3.1) next to the ones
// it can.
type fieldTags struct {
	nonempty       bool // minLength 1 in the schema; whitespace-only also rejected
	externalizable bool // x-externalizable; null allowed as a placeholder (D22)
	sha256         bool // exactly 64 lowercase hex characters (code only)
	object         bool // free-form value that must be a JSON object (code only)
	min            *int64
}

func parseTags(f reflect.StructField) fieldTags {
	var t fieldTags
	for _, part := range strings.Split(f.Tag.Get("proto"), ",") {
		switch {
		case part == "nonempty":
			t.nonempty = true
		case part == "externalizable":
			t.externalizable = true
		case part == "sha256":
			t.sha256 = true
		case part == "object":
			t.object = true
		case strings.HasPrefix(part, "min="):
			n, err := strconv.ParseInt(part[len("min="):], 10, 64)
			if err != nil {
				panic("extension: bad min tag on " + f.Name)
			}
			t.min = &n
		}
	}
	return t
}

// jsonName returns a field's member name and whether it is optional.
func jsonName(f reflect.StructField) (name string, optional bool) {
	tag := f.Tag.Get("json")
	name, opts, _ := strings.Cut(tag, ",")
	return name, opts == "omitempty"
}

// schemaBuilder walks the DTOs by reflection and collects $defs.
type schemaBuilder struct{ defs map[string]any }

func (b *schemaBuilder) def(t reflect.Type) map[string]any {
	ref := map[string]any{"$ref": "#/$defs/" + t.Name()}
	if _, done := b.defs[t.Name()]; done {
		return ref
	}
	obj := map[string]any{"type": "object", "additionalProperties": false}
	b.defs[t.Name()] = obj
	props := map[string]any{}
	var required []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, optional := jsonName(f)
		props[name] = b.property(f.Type, parseTags(f))
		if !optional {
			required = append(required, name)
		}
	}
	obj["properties"] = props
	if len(required) > 0 {
		sort.Strings(required)
		obj["required"] = required
	}
	return ref
}

func (b *schemaBuilder) property(t reflect.Type, tags fieldTags) any {
	if t == rawMessageType {
		if tags.externalizable {
			return map[string]any{"x-externalizable": true}
		}
		return true
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s := map[string]any{}
	switch {
	case t.Implements(enumIface):
		values := reflect.Zero(t).Interface().(enumType).enumValues()
		s["type"], s["enum"] = "string", values
	case t.Kind() == reflect.String:
		s["type"] = "string"
		if tags.nonempty {
			s["minLength"] = 1
		}
	case t.Kind() == reflect.Bool:
		s["type"] = "boolean"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		s["type"] = "integer"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		s["type"] = "number"
	case t.Kind() == reflect.Slice:
		s["type"], s["items"] = "array", b.property(t.Elem(), fieldTags{})
	case t.Kind() == reflect.Map:
		s["type"], s["additionalProperties"] = "object", b.property(t.Elem(), fieldTags{})
	case t.Kind() == reflect.Struct:
		return b.def(t)
	default:
		panic("extension: no schema for " + t.String())
	}
	if tags.min != nil {
		s["minimum"] = *tags.min
	}
	if tags.externalizable {
		s["x-externalizable"] = true
	}
	return s
}

// schemaDocument builds the canonical schema as a generic JSON value.
func schemaDocument() map[string]any {
	b := &schemaBuilder{defs: map[string]any{}}
	methods := map[string]any{}
	for _, m := range registry() {
		entry := map[string]any{
			"class":        m.Class,
			"direction":    m.Direction,
			"notification": m.Notification(),
			"params":       b.def(m.params),
			"result":       nil,
		}
		if m.result != nil {
			entry["result"] = b.def(m.result)
		}
		methods[m.Name] = entry
	}
	var errs []any
	for _, r := range Reasons() {
		errs = append(errs, map[string]any{
			"jsonRpcCode": r.Code(), "message": r.Message(), "reason": r, "retryable": r.Retryable(),
		})
	}
	return map[string]any{
		"$defs":           b.defs,
		"$id":             ProtocolID,
		"$schema":         "https://json-schema.org/draft/2020-12/schema",
		"errors":          errs,
		"interceptEvents": Point("").enumValues(),
		"limits": map[string]any{
			"contentRefChunkBytes":  ContentRefChunkBytes,
			"contentRefObjectBytes": ContentRefObjectBytes,
			"externalizeFieldBytes": ExternalizeFieldBytes,
			"frameBytes":            FrameBytes,
		},
		"methods":       methods,
		"protocol":      ProtocolID,
		"protocolID":    ProtocolID,
		"protocolMajor": ProtocolMajor,
		"title":         "Reasonix Extension Protocol v1",
	}
}

// canonicalSchema is computed once from the DTOs and the registry (D1).
var canonicalSchema = sync.OnceValue(func() []byte {
	// encoding/json sorts map keys byte-wise at every level and writes
	// compact output with no trailing newline: the canonical form.
	b, err := json.Marshal(schemaDocument())
	if err != nil {
		panic("extension: marshalling the schema: " + err.Error())
	}
	return b
})

// CanonicalSchema returns the canonical v1 schema generated from the Go
// DTOs and the method, limit and error registry (D1): compact JSON, keys
// sorted at every level, no trailing newline. It is byte-identical to the
// frozen contract and to schema.generated.json.
func CanonicalSchema() []byte { return append([]byte(nil), canonicalSchema()...) }

// SchemaHash returns "sha256:" and the lowercase hex SHA-256 of
// [CanonicalSchema]. The committed constant [GeneratedSchemaHash] must equal it.
func SchemaHash() string {
	sum := sha256.Sum256(canonicalSchema())
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Identity renders the protocol identity line, e.g.
// "reasonix.extension.v1 major=1 schema=sha256:...".
func Identity() string {
	return fmt.Sprintf("%s major=%d schema=%s", ProtocolID, ProtocolMajor, SchemaHash())
}
