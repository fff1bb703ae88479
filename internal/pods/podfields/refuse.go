package podfields

import (
	"reflect"
	"regexp"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Origin is where a pod comes from: it decides what some fields mean on the node.
type Origin int

const (
	// Manifest is a static pod: the manifest directory's or the local API's.
	Manifest Origin = iota
	// APIServer is a pod a Kubernetes API server bound to the node (cluster mode): the API
	// server has validated it, and serves the objects it references.
	APIServer
)

// In returns the entry's handling of a pod of origin o, and its note there: where the field
// takes effect, or why it is refused or has no effect, in words true for that origin.
func (e Entry) In(o Origin) (Handling, string) {
	h, note := e.Handling, e.Note
	if o == APIServer {
		if e.ClusterHandling != "" {
			h = e.ClusterHandling
		}
		if e.Cluster != "" {
			note = e.Cluster
		}
	}
	return h, note
}

// Refusals returns a Forbidden error, with its field path and the registry's reason, for every
// field of a static pod (origin Manifest) that is set and refused by the registry (e.g.
// `spec.volumes[0].persistentVolumeClaim: Forbidden: static pods may not reference
// persistentvolumeclaims (...)`). A refused field is reported once, at its entry's path; the
// fields below it are not looked at.
func Refusals(pod *v1.Pod) field.ErrorList { return RefusalsFrom(pod, Manifest) }

// RefusalsFrom is Refusals for a pod of origin o: the fields refused there, with the reason
// that holds there.
func RefusalsFrom(pod *v1.Pod, o Origin) field.ErrorList {
	var errs field.ErrorList
	walkValue(reflect.ValueOf(pod).Elem(), "", nil, func(pattern string, p *field.Path, v reflect.Value) bool {
		e, ok := registry[pattern]
		if !ok {
			return true
		}
		h, note := e.In(o)
		if h != Refused {
			return true
		}
		if unset(v) || (e.Allowed != nil && e.Allowed(pod)) {
			return false
		}
		errs = append(errs, field.Forbidden(p, note))
		return false
	})
	return errs
}

// IsRefusal reports whether err is a refusal of a field refused for a pod of origin o: a
// Forbidden error at the path of an entry refused there, whatever its wording (RefusalsFrom's,
// or a validator's that refuses the same field for that origin, as the kubelet's static-pod
// checks do). Cluster mode uses it to take the static pods' refusals out of the manifest
// validation it shares.
func IsRefusal(err *field.Error, o Origin) bool {
	if err == nil || err.Type != field.ErrorTypeForbidden {
		return false
	}
	e, ok := registry[indexPattern.ReplaceAllString(err.Field, "[*]")]
	if !ok {
		return false
	}
	h, _ := e.In(o)
	return h == Refused
}

// ForOrigin is errs, a pod's validation on the manifest path (which gives the static pods'
// refusals, Refusals), for a pod of origin o: the static pods' refusals taken out and o's, with
// their reasons, put in their place. The rest of errs stays as it is.
func ForOrigin(errs field.ErrorList, pod *v1.Pod, o Origin) field.ErrorList {
	if o == Manifest {
		return errs
	}
	var out field.ErrorList
	for _, e := range errs {
		if !IsRefusal(e, Manifest) {
			out = append(out, e)
		}
	}
	return append(out, RefusalsFrom(pod, o)...)
}

// unset reports whether a field's value is absent from the pod: its zero value, or an empty list
// or map, which a manifest may spell out ("tolerations: []") and which means the same as leaving
// the field out.
func unset(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Slice, reflect.Map:
		return v.Len() == 0
	}
	return v.IsZero()
}

// indexPattern matches a list index of a field path ("[3]").
var indexPattern = regexp.MustCompile(`\[[0-9]+\]`)

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
