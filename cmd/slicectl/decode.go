package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	strictjson "sigs.k8s.io/json"
)

// decodeStrict decodes one JSON value of an input file into v and says where a problem is:
// where is the field path of the value ("" for a whole file, whose syntax errors then carry
// their line and column). It is the one strict decoder of slicectl's offline inputs.
//
// Two passes, each for what its library types: encoding/json decodes the value and reports
// syntax errors (with their offset), type mismatches (with the field and the JSON value),
// an empty input and trailing data; sigs.k8s.io/json (the API server's decoder) then reports
// every unknown or duplicate field with its path, keys matched case-sensitively as Kubernetes
// does. Neither pass looks at an error's text.
func decodeStrict(data []byte, v any, where string) error {
	at := func(field string) string {
		switch {
		case where == "":
			return field
		case field == "":
			return where
		}
		return where + "." + field
	}
	prefix := func() string {
		if where == "" {
			return ""
		}
		return where + ": "
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	err := dec.Decode(v)
	if err == nil {
		if _, tokErr := dec.Token(); tokErr != io.EOF {
			return fmt.Errorf("%sunexpected data after the JSON value", prefix())
		}
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case err == nil:
	case errors.As(err, &syn):
		if where != "" {
			return fmt.Errorf("%s: invalid JSON: %w", where, syn)
		}
		line, col := lineCol(data, syn.Offset-1) // Offset is just past the offending byte
		return fmt.Errorf("line %d, column %d: invalid JSON: %w", line, col, syn)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fmt.Errorf("%sgot a JSON %s, want an object", prefix(), typ.Value)
		}
		return fmt.Errorf("%s: got a JSON %s, want %s", at(typ.Field), typ.Value, jsonKind(typ.Type.String()))
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%sempty", prefix())
	default: // a field's own decoder refused its value (a resource.Quantity, say)
		return fmt.Errorf("%s%w", prefix(), err)
	}

	strictErrs, err := strictjson.UnmarshalStrict(data, v)
	if err != nil {
		return fmt.Errorf("%s%w", prefix(), err)
	}
	if len(strictErrs) == 0 {
		return nil
	}
	// Each is a strictjson.FieldError whose message names its kind and its path below v
	// (unknown field "spec.containerz"); all of them on one line, as the API server says them.
	args := []any{prefix()}
	for _, e := range strictErrs {
		args = append(args, e)
	}
	return fmt.Errorf("%s"+strings.TrimSuffix(strings.Repeat("%w, ", len(strictErrs)), ", "), args...)
}

// jsonKind says what a Go type means in JSON words.
func jsonKind(goType string) string {
	switch {
	case strings.Contains(goType, "int"):
		return "an integer"
	case strings.Contains(goType, "string"):
		return "a string"
	case goType == "bool" || goType == "*bool":
		return "true or false"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	}
	return "an object"
}

// lineCol turns a byte offset into data's 1-based line and column.
func lineCol(data []byte, off int64) (int, int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}
