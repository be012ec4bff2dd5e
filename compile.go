package extension

// Compiling the schema: the $defs of a schema document become vnode trees
// the validator walks, with the rules the schema cannot express laid over
// them from the Go DTOs.

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// compiledSchema maps every $def name to its compiled node.
var compiledSchema = sync.OnceValue(func() map[string]*vnode {
	defs, err := compileSchema(canonicalSchema(), dtoTypes())
	if err != nil {
		panic("extension: compiling the canonical schema: " + err.Error())
	}
	return defs
})

// dtoTypes maps every $def name to its Go DTO.
func dtoTypes() map[string]reflect.Type {
	types := map[string]reflect.Type{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || types[t.Name()] != nil {
			return
		}
		types[t.Name()] = t
		for i := 0; i < t.NumField(); i++ {
			walk(t.Field(i).Type)
		}
	}
	for _, m := range registry() {
		walk(m.params)
		if m.result != nil {
			walk(m.result)
		}
	}
	return types
}

// compileSchema compiles the $defs of a schema document that uses the
// keywords of the v1 schema: $ref, type, properties, required,
// additionalProperties (false or a schema), items, enum, minLength,
// minimum, maximum, the true schema and x-externalizable. types supplies
// the Go DTO of each $def for the rules the schema cannot express.
func compileSchema(doc []byte, types map[string]reflect.Type) (map[string]*vnode, error) {
	var root struct {
		Defs map[string]map[string]any `json:"$defs"`
	}
	if err := json.Unmarshal(doc, &root); err != nil {
		return nil, err
	}
	defs := map[string]*vnode{}
	for name := range root.Defs {
		defs[name] = &vnode{def: name}
	}
	c := &compiler{defs: defs}
	for name, raw := range root.Defs {
		if err := c.fill(defs[name], raw); err != nil {
			return nil, fmt.Errorf("$defs/%s: %w", name, err)
		}
		defs[name].check = defInvariants[name]
		if t := types[name]; t != nil {
			overlayGoRules(defs[name], t)
		}
	}
	return defs, nil
}

type compiler struct{ defs map[string]*vnode }

func (c *compiler) node(raw any) (*vnode, error) {
	switch v := raw.(type) {
	case bool:
		if !v {
			return nil, fmt.Errorf("the false schema is not used by v1")
		}
		return &vnode{kind: vAny}, nil
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok {
			name, found := strings.CutPrefix(ref, "#/$defs/")
			if !found || c.defs[name] == nil {
				return nil, fmt.Errorf("unresolvable $ref %q", ref)
			}
			return c.defs[name], nil
		}
		n := &vnode{}
		return n, c.fill(n, v)
	}
	return nil, fmt.Errorf("unexpected schema %T", raw)
}

func (c *compiler) fill(n *vnode, s map[string]any) error {
	switch s["type"] {
	case nil:
		n.kind = vAny
	case "object":
		n.kind = vObject
	case "array":
		n.kind = vArray
	case "string":
		n.kind = vString
	case "integer":
		n.kind = vInteger
	case "number":
		n.kind = vNumber
	case "boolean":
		n.kind = vBoolean
	default:
		return fmt.Errorf("unsupported type %v", s["type"])
	}
	if props, ok := s["properties"].(map[string]any); ok {
		names := make([]string, 0, len(props))
		for name := range props {
			names = append(names, name)
		}
		slices.Sort(names)
		if len(names) > 64 {
			return fmt.Errorf("more than 64 properties")
		}
		n.index = map[string]int{}
		for i, name := range names {
			child, err := c.node(props[name])
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			var ext bool
			if m, ok := props[name].(map[string]any); ok {
				ext, _ = m["x-externalizable"].(bool)
			}
			n.props = append(n.props, vprop{name: name, node: child, externalizable: ext})
			n.index[name] = i
		}
	}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			i, ok := n.index[r.(string)]
			if !ok {
				return fmt.Errorf("required %v is not a property", r)
			}
			n.required |= 1 << i
		}
	}
	switch a := s["additionalProperties"].(type) {
	case bool:
		n.open = a
	case map[string]any:
		child, err := c.node(a)
		if err != nil {
			return err
		}
		n.open, n.addl = true, child
	}
	if n.open && n.addl != nil && n.addl.kind == vAny {
		n.addl = nil
	}
	if items, ok := s["items"]; ok {
		child, err := c.node(items)
		if err != nil {
			return err
		}
		n.items = child
	}
	if enum, ok := s["enum"].([]any); ok {
		for _, e := range enum {
			n.enum = append(n.enum, e.(string))
		}
	}
	if ml, ok := s["minLength"].(float64); ok {
		n.minLength = int(ml)
	}
	if m, ok := s["minimum"].(float64); ok {
		v := int64(m)
		n.min = &v
	}
	if m, ok := s["maximum"].(float64); ok {
		v := int64(m)
		n.max = &v
	}
	return nil
}

// overlayGoRules lays the tag rules of a DTO's fields over its def node.
func overlayGoRules(n *vnode, t reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _ := jsonName(f)
		j, ok := n.index[name]
		if !ok {
			continue
		}
		tags := parseTags(f)
		p := &n.props[j]
		p.nonempty, p.sha256, p.object = tags.nonempty, tags.sha256, tags.object
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		p.unsigned = ft.Kind() >= reflect.Uint && ft.Kind() <= reflect.Uint64
	}
}
