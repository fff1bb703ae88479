package podfields

import (
	"reflect"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Leaves lists the JSON paths of every leaf field of v1.Pod, in declaration order: lists are
// written "[*]", maps, quantities, times and int-or-strings are leaves. It is what the registry
// must cover (TestRegistryCoversPod).
func Leaves() []string {
	var out []string
	for _, l := range LeafFields() {
		out = append(out, l.Path)
	}
	return out
}

// Leaf is one leaf field of v1.Pod: its JSON path, as Leaves writes it, and its Go type with
// pointers removed (a list of scalars' leaf, "...[*]", has the element's type).
type Leaf struct {
	Path string
	Type reflect.Type
}

// LeafFields is Leaves with each leaf's type, for generators that need to know what a field
// holds (hack/peer/podgen's structural generator).
func LeafFields() []Leaf {
	var out []Leaf
	walkType(reflect.TypeOf(v1.Pod{}), "", map[reflect.Type]bool{}, func(p string, t reflect.Type) { out = append(out, Leaf{Path: p, Type: t}) })
	return out
}

var leafTypes = map[reflect.Type]bool{
	reflect.TypeOf(resource.Quantity{}):    true,
	reflect.TypeOf(metav1.Time{}):          true,
	reflect.TypeOf(metav1.MicroTime{}):     true,
	reflect.TypeOf(intstr.IntOrString{}):   true,
	reflect.TypeOf(metav1.FieldsV1{}):      true,
	reflect.TypeOf(metav1.Duration{}):      true,
	reflect.TypeOf(metav1.LabelSelector{}): true,
}

// walkType calls leaf for every leaf path below t. A type met again below itself is a leaf
// (v1.Pod has no recursive types today; this keeps a future one from looping).
func walkType(t reflect.Type, path string, seen map[reflect.Type]bool, leaf func(string, reflect.Type)) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case leafTypes[t] || seen[t]:
		leaf(path, t)
		return
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8:
		walkType(t.Elem(), path+"[*]", seen, leaf)
		return
	case t.Kind() != reflect.Struct:
		leaf(path, t)
		return
	}
	seen[t] = true
	defer delete(seen, t)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, inline := jsonName(f)
		if name == "-" {
			continue
		}
		p := path
		if !inline {
			p = join(path, name)
		}
		walkType(f.Type, p, seen, leaf)
	}
}

// jsonName is the field's JSON name and whether it is inlined (an embedded struct).
func jsonName(f reflect.StructField) (string, bool) {
	tag := f.Tag.Get("json")
	name, opts, _ := strings.Cut(tag, ",")
	if strings.Contains(opts, "inline") || (f.Anonymous && name == "") {
		return "", true
	}
	if name == "" {
		name = f.Name
	}
	return name, false
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
