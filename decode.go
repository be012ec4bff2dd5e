package extension

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
)

// DecodeParams strictly decodes the params of method into v, a pointer to
// the method's params DTO: absent or empty params read as {} (D5), then the
// document is validated against the method's $def (see [Validate]) and only
// then unmarshalled. A failure is an *Error with reason invalid_params
// that wraps the *ValidationError naming the JSON pointer.
func DecodeParams(method string, params json.RawMessage, v any) error {
	m, ok := LookupMethod(method)
	if !ok {
		return NewError(ReasonUnknownMethod, "method not found: "+method)
	}
	return strictDecode(m.Params, m.params, params, v, ReasonInvalidParams)
}

// DecodeResult strictly decodes the result of method into v, a pointer to
// the method's result DTO. A peer's malformed result is the peer's protocol
// violation, so a failure is an *Error with reason protocol_error that
// wraps the *ValidationError (CONTRACT-NOTES §3.1).
func DecodeResult(method string, result json.RawMessage, v any) error {
	m, ok := LookupMethod(method)
	if !ok || m.result == nil {
		return NewError(ReasonUnknownMethod, "method has no result: "+method)
	}
	return strictDecode(m.Result, m.result, result, v, ReasonProtocolError)
}

// DecodeDef strictly decodes doc, a document of the $def named def, into v.
// Failures are *ValidationError.
func DecodeDef(def string, doc []byte, v any) error {
	if err := Validate(def, doc); err != nil {
		return err
	}
	return json.Unmarshal(doc, v)
}

var emptyObject = []byte("{}")

func strictDecode(def string, want reflect.Type, doc []byte, v any, reason Reason) error {
	if rv := reflect.TypeOf(v); rv == nil || rv.Kind() != reflect.Pointer || rv.Elem() != want {
		return Errorf(ReasonInternal, "decoding %s needs a *%s, got %T", def, want.Name(), v)
	}
	if len(bytes.TrimSpace(doc)) == 0 {
		doc = emptyObject // D5
	}
	if err := Validate(def, doc); err != nil {
		return Errorf(reason, "invalid %s: %w", def, err)
	}
	if err := json.Unmarshal(doc, v); err != nil {
		// Validation admits only what the DTO can hold; reaching this is a
		// bug in the rules, reported rather than hidden.
		return Errorf(reason, "invalid %s: %w", def, fmt.Errorf("decoding after validation: %w", err))
	}
	return nil
}
