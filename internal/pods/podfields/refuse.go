package podfields

import (
	"reflect"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Refusals returns a Forbidden error, with its field path and the registry's reason, for every
// field of pod that is set and refused by the registry (e.g. `spec.volumes[0].secret: Forbidden:
// static pods may not reference secrets (...)`). A refused field is reported once, at its
// entry's path; the fields below it are not looked at.
func Refusals(pod *v1.Pod) field.ErrorList {
	var errs field.ErrorList
	walkValue(reflect.ValueOf(pod).Elem(), "", nil, func(pattern string, p *field.Path, v reflect.Value) bool {
		e, ok := registry[pattern]
		if !ok || e.Handling != Refused {
			return true
		}
		if v.IsZero() || (e.Allowed != nil && e.Allowed(pod)) {
			return false
		}
		errs = append(errs, field.Forbidden(p, e.Note))
		return false
	})
	return errs
}

// walkValue calls visit for every field below v with its registry pattern and its concrete
// path; visit returns whether to descend.
func walkValue(v reflect.Value, pattern string, p *field.Path, visit func(string, *field.Path, reflect.Value) bool) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	t := v.Type()
	switch {
	case leafTypes[t]:
		return
	case v.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8:
		for i := 0; i < v.Len(); i++ {
			ip := p.Index(i)
			if visit(pattern+"[*]", ip, v.Index(i)) {
				walkValue(v.Index(i), pattern+"[*]", ip, visit)
			}
		}
		return
	case v.Kind() != reflect.Struct:
		return
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, inline := jsonName(f)
		if name == "-" {
			continue
		}
		if inline {
			walkValue(v.Field(i), pattern, p, visit)
			continue
		}
		fp := field.NewPath(name)
		if p != nil {
			fp = p.Child(name)
		}
		fpat := join(pattern, name)
		if visit(fpat, fp, v.Field(i)) {
			walkValue(v.Field(i), fpat, fp, visit)
		}
	}
}
