package extension

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
)

//go:generate go run ./cmd/extension-protocol-gen

// The frozen limits, in bytes (PROTOCOL.md §1.3). The fourth,
// contentRefObjectBytes, the largest content object, is FrameBytes (D22).
const (
	// FrameBytes: one NDJSON frame, including its "\n" (D2).
	FrameBytes = 8 << 20
	// ExternalizeFieldBytes: a payload larger than this travels as a content ref.
	ExternalizeFieldBytes = 64 << 10
	// ContentRefChunkBytes: the most raw bytes one host/content/read page carries.
	ContentRefChunkBytes = 256 << 10
)

// methodInfo is one entry of the frozen method registry (PROTOCOL.md
// §2.6), which the canonical schema lists under "methods".
type methodInfo struct {
	Name string
	// Direction is host_to_extension_request, extension_to_host_request,
	// host_to_extension_notification or extension_to_host_notification.
	Direction string
	// Class is lifecycle, intercept, observation, provider, ui or content.
	Class string
	// params and result are the types of the params and result documents,
	// their names the $def names; result is nil for notifications.
	params, result reflect.Type
}

// notification reports whether the method is a notification.
func (m methodInfo) notification() bool { return strings.HasSuffix(m.Direction, "_notification") }

func method(name, direction, class string, params, result any) methodInfo {
	return methodInfo{Name: name, Direction: direction, Class: class, params: reflect.TypeOf(params), result: reflect.TypeOf(result)} // result nil: a notification
}

const (
	h2eRequest = "host_to_extension_request"
	e2hRequest = "extension_to_host_request"
	h2eNotify  = "host_to_extension_notification"
	e2hNotify  = "extension_to_host_notification"
)

// registry holds the 16 methods sorted by name.
var registry = []methodInfo{
	method(MethodEvent, h2eNotify, "observation", EventParams{}, nil),
	method(MethodInitialize, h2eRequest, "lifecycle", InitializeParams{}, InitializeResult{}),
	method(MethodInitialized, h2eNotify, "lifecycle", InitializedParams{}, nil),
	method(MethodIntercept, h2eRequest, "intercept", InterceptParams{}, InterceptResult{}),
	method(MethodProviderCatalog, h2eRequest, "provider", ProviderCatalogParams{}, ProviderCatalogResult{}),
	method(MethodStreamCancel, h2eRequest, "provider", StreamCancelParams{}, StreamCancelResult{}),
	method(MethodStreamChunk, e2hNotify, "provider", StreamChunkParams{}, nil),
	method(MethodStreamEnd, e2hNotify, "provider", StreamEndParams{}, nil),
	method(MethodStreamOpen, h2eRequest, "provider", StreamOpenParams{}, StreamOpenResult{}),
	method(MethodResourcesChanged, h2eNotify, "observation", ResourcesChangedParams{}, nil),
	method(MethodShutdown, h2eRequest, "lifecycle", ShutdownParams{}, ShutdownResult{}),
	method(MethodUIAction, h2eRequest, "ui", UIActionParams{}, UIActionResult{}),
	method(MethodUISubmit, h2eRequest, "ui", UISubmitParams{}, UISubmitResult{}),
	method(MethodContentRead, e2hRequest, "content", ContentReadParams{}, ContentReadResult{}),
	method(MethodUIPublish, e2hRequest, "ui", UIPublishParams{}, UIPublishResult{}),
	method(MethodUIRequest, e2hRequest, "ui", UIRequestParams{}, UIRequestResult{}),
}

// methodsByName indexes the registry: every inbound frame and every strict
// decode of params or a result looks a method up.
var methodsByName = sync.OnceValue(func() map[string]methodInfo {
	byName := map[string]methodInfo{}
	for _, m := range registry {
		byName[m.Name] = m
	}
	return byName
})

// dtoTypes maps the name of every $def to its Go DTO: the 41 structs the
// registry's params and results reach.
var dtoTypes = sync.OnceValue(func() map[string]reflect.Type {
	types := map[string]reflect.Type{}
	var visit func(t reflect.Type)
	visit = func(t reflect.Type) {
		switch {
		case t == nil: // a notification's result
		case t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map:
			visit(t.Elem())
		case t.Kind() == reflect.Struct && types[t.Name()] == nil:
			types[t.Name()] = t
			for i := range t.NumField() {
				visit(t.Field(i).Type)
			}
		}
	}
	for _, m := range registry {
		visit(m.params)
		visit(m.result)
	}
	return types
})

// vkind is the JSON type a node admits.
type vkind uint8

const (
	vAny    vkind = iota // a free-form value: every member name inside is checked for duplicates
	vRaw                 // a free-form value checked for syntax only (envelope members)
	vObject              // a struct, or a map when isMap
	vArray
	vString
	vInteger
	vNumber
	vBoolean
	vNull // only ever reported: no node admits null by type
)

func (k vkind) String() string {
	return [...]string{"any value", "any value", "an object", "an array", "a string", "an integer", "a number", "a boolean", "null"}[k]
}

// vnode is one node of the tree the strict walk follows, built from a Go
// type once (typeNode). Struct nodes are shared; every struct field gets
// its own node for its scalar rules.
type vnode struct {
	kind vkind
	def  string // the type name of a struct node (its $def); "" otherwise

	props    []vprop // struct members, sorted by name
	index    map[string]int
	required uint64 // bit i: props[i].required
	open     bool   // an unknown member is skipped (openObject) or kept (rest), not refused
	rest     int    // 1 + the index of the field that keeps unknown members (proto:"rest"); 0 when none
	isMap    bool
	elem     *vnode // array items, map values

	enum           []string
	nonempty       bool   // minLength 1 in the schema; whitespace-only refused too
	sha256         bool   // exactly 64 lowercase hex characters (not in the schema)
	object         bool   // a free-form value that must be a JSON object (not in the schema)
	externalizable bool   // x-externalizable: may be a null placeholder (D22)
	unsigned       bool   // the Go field is unsigned: no sign at all
	min            *int64 // minimum
}

type vprop struct {
	name     string
	node     *vnode
	field    int  // index of the Go struct field
	required bool // no omitempty
}

// enumType is implemented by the string types whose values are frozen; the
// values are sorted.
type enumType interface{ enumValues() []string }

// invariant is implemented by the documents with a rule across members
// (PROTOCOL.md §5.3): it reports what is wrong, "" when the document is
// fine.
type invariant interface{ invariant() string }

// openObject is implemented by the private documents whose unknown members
// are skipped: envelopes and error objects, where only exact names count.
// Every other struct refuses an unknown member, naming a case-variant
// match (D3).
type openObject interface{ openObject() }

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	enumIface      = reflect.TypeFor[enumType]()
	openIface      = reflect.TypeFor[openObject]()
)

// tagNode builds the node of one field. Its proto struct tag starts it: the
// rules the JSON Schema cannot say (PROTOCOL.md §10) next to the ones it
// can. fieldNode completes it from the Go type; each rule only acts on the
// kinds it names (sha256 on strings, object on free-form values...).
func tagNode(f reflect.StructField) (*vnode, error) {
	n := &vnode{}
	flags := map[string]*bool{"nonempty": &n.nonempty, "externalizable": &n.externalizable, "sha256": &n.sha256, "object": &n.object}
	for _, part := range strings.Split(f.Tag.Get("proto"), ",") {
		bound, isMin := strings.CutPrefix(part, "min=")
		switch flag := flags[part]; {
		case part == "":
		case flag != nil:
			*flag = true
		case part == "raw":
			n.kind = vRaw // kept only by a json.RawMessage
		case isMin:
			v, err := strconv.ParseInt(bound, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("bad proto tag %q", part)
			}
			n.min = &v
		default:
			return nil, fmt.Errorf("unknown proto tag %q", part)
		}
	}
	return fieldNode(f.Type, n)
}

// nodes caches the struct nodes by type; building happens under nodesMu,
// lazily, one type (and what it reaches) at a time. A type that cannot be
// decoded into is not cached: building it again fails the same way.
var (
	nodesMu sync.Mutex
	nodes   = map[reflect.Type]*vnode{}
)

// typeNode returns the node of a struct type, building it on first use.
func typeNode(t reflect.Type) (*vnode, error) {
	nodesMu.Lock()
	defer nodesMu.Unlock()
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("extension: cannot decode into %v: want a struct", t)
	}
	return structNode(t)
}

// mustTypeNode is typeNode for the fixed types of the package: the DTOs
// and the private documents, which their tests build.
func mustTypeNode(t reflect.Type) *vnode {
	n, err := typeNode(t)
	if err != nil {
		panic(err) // covered by TestSchemaHashMatchesFrozenContractD1 and the documents' tests
	}
	return n
}

func structNode(t reflect.Type) (*vnode, error) {
	if n := nodes[t]; n != nil {
		return n, nil
	}
	n := &vnode{kind: vObject, def: t.Name(), index: map[string]int{}, open: reflect.PointerTo(t).Implements(openIface)}
	nodes[t] = n // referenced by itself before it is complete: no type of the protocol is recursive
	if err := n.fill(t); err != nil {
		delete(nodes, t)
		return nil, fmt.Errorf("extension: cannot decode into %v: %w", t, err)
	}
	return n, nil
}

func (n *vnode) fill(t reflect.Type) error {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Tag.Get("proto") == "rest" && f.Type == reflect.TypeFor[map[string]json.RawMessage]():
			n.rest, n.open = i+1, true
			continue
		case name == "-" || !f.IsExported():
			continue
		case f.Anonymous:
			return fmt.Errorf("embedded field %s is not supported", f.Name)
		case name == "":
			name = f.Name
		}
		child, err := tagNode(f)
		if err != nil {
			return fmt.Errorf("field %s: %w", f.Name, err)
		}
		n.props = append(n.props, vprop{name: name, node: child, field: i, required: opts != "omitempty"})
	}
	if len(n.props) > 64 {
		return fmt.Errorf("more than 64 members")
	}
	slices.SortFunc(n.props, func(a, b vprop) int { return strings.Compare(a.name, b.name) })
	for i, p := range n.props {
		n.index[p.name] = i
		if p.required {
			n.required |= 1 << i
		}
	}
	return nil
}

// fieldNode completes n, the node of one field (or of an element or map
// value), from the field's Go type; a struct field gets the shared node of
// its struct instead.
func fieldNode(t reflect.Type, n *vnode) (*vnode, error) {
	if t == rawMessageType {
		return n, nil // vAny, or vRaw when tagged raw
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch k := t.Kind(); {
	case t.Implements(enumIface):
		n.kind, n.enum = vString, reflect.Zero(t).Interface().(enumType).enumValues()
	case k == reflect.String:
		n.kind = vString
	case k == reflect.Bool:
		n.kind = vBoolean
	case k >= reflect.Int && k <= reflect.Int64:
		n.kind = vInteger
	case k >= reflect.Uint && k <= reflect.Uint64:
		n.kind, n.unsigned = vInteger, true
	case k == reflect.Float32 || k == reflect.Float64:
		n.kind = vNumber
	case k == reflect.Slice || k == reflect.Map && t.Key().Kind() == reflect.String:
		elem, err := fieldNode(t.Elem(), &vnode{})
		if err != nil {
			return nil, err
		}
		n.kind, n.elem, n.isMap = vArray, elem, k == reflect.Map
		if n.isMap {
			n.kind = vObject
		}
	case k == reflect.Struct:
		return structNode(t)
	default:
		return nil, fmt.Errorf("type %v is not supported", t)
	}
	return n, nil
}

// schema renders n as a property schema of the canonical document,
// adding the $defs it reaches to defs.
func (n *vnode) schema(defs map[string]any) any {
	if n.def != "" {
		if _, done := defs[n.def]; !done {
			defs[n.def] = nil
			props := map[string]any{}
			var required []string
			for _, p := range n.props {
				props[p.name] = p.node.schema(defs)
				if p.required {
					required = append(required, p.name)
				}
			}
			obj := map[string]any{"type": "object", "additionalProperties": false, "properties": props}
			if len(required) > 0 {
				obj["required"] = required // sorted, as props are
			}
			defs[n.def] = obj
		}
		return map[string]any{"$ref": "#/$defs/" + n.def}
	}
	s := map[string]any{}
	switch n.kind {
	case vAny:
		if !n.externalizable {
			return true
		}
	case vObject:
		s["type"], s["additionalProperties"] = "object", n.elem.schema(defs)
	case vArray:
		s["type"], s["items"] = "array", n.elem.schema(defs)
	default:
		s["type"] = [...]string{vString: "string", vInteger: "integer", vNumber: "number", vBoolean: "boolean"}[n.kind]
	}
	if n.enum != nil {
		s["enum"] = n.enum
	} else if n.nonempty {
		s["minLength"] = 1
	}
	if n.min != nil {
		s["minimum"] = *n.min
	}
	if n.externalizable {
		s["x-externalizable"] = true
	}
	return s
}

// canonicalSchema renders the canonical schema once from the DTOs and the
// registry (D1). encoding/json sorts map keys byte-wise at every level and
// writes compact output with no trailing newline: the canonical form.
var canonicalSchema = sync.OnceValue(func() []byte {
	defs := map[string]any{}
	def := func(t reflect.Type) any {
		if t == nil {
			return nil // a notification's result
		}
		return mustTypeNode(t).schema(defs)
	}
	methods := map[string]any{}
	for _, m := range registry {
		methods[m.Name] = map[string]any{"class": m.Class, "direction": m.Direction, "notification": m.notification(), "params": def(m.params), "result": def(m.result)}
	}
	b, err := json.Marshal(map[string]any{
		"$defs":           defs,
		"$id":             ProtocolID,
		"$schema":         "https://json-schema.org/draft/2020-12/schema",
		"errors":          reasons,
		"interceptEvents": Point("").enumValues(),
		"limits": map[string]any{
			"contentRefChunkBytes":  ContentRefChunkBytes,
			"contentRefObjectBytes": FrameBytes,
			"externalizeFieldBytes": ExternalizeFieldBytes,
			"frameBytes":            FrameBytes,
		},
		"methods":       methods,
		"protocol":      ProtocolID,
		"protocolID":    ProtocolID,
		"protocolMajor": protocolMajor,
		"title":         "Reasonix Extension Protocol v1",
	})
	if err != nil {
		panic(err)
	}
	return b
})

// CanonicalSchema returns the canonical v1 schema generated from the Go
// DTOs and the method, limit and error registry (D1): compact JSON, keys
// sorted at every level, no trailing newline. It is byte-identical to the
// frozen contract and to schema.generated.json.
func CanonicalSchema() []byte { return slices.Clone(canonicalSchema()) }
