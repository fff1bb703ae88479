package manifest

import (
	"encoding/json"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// quantityProblems finds the quantities of a Pod document (JSON) that do not parse, with their
// field paths: resources of containers, init containers and ephemeral containers, pod-level
// resources, overhead, emptyDir size limits and resourceFieldRef divisors. A document that is not
// shaped like a pod has none; the strict decode reports its problems.
func quantityProblems(j []byte) field.ErrorList {
	var doc map[string]any
	if json.Unmarshal(j, &doc) != nil {
		return nil
	}
	var errs field.ErrorList
	spec, _ := doc["spec"].(map[string]any)
	sp := field.NewPath("spec")
	resources := func(p *field.Path, r any) {
		m, _ := r.(map[string]any)
		for _, kind := range []string{"limits", "requests"} {
			errs = append(errs, checkList(p.Child(kind), m[kind])...)
		}
	}
	for _, list := range []string{"initContainers", "containers", "ephemeralContainers"} {
		cs, _ := spec[list].([]any)
		for i, c := range cs {
			cm, _ := c.(map[string]any)
			cp := sp.Child(list).Index(i)
			resources(cp.Child("resources"), cm["resources"])
			env, _ := cm["env"].([]any)
			for k, e := range env {
				em, _ := e.(map[string]any)
				vf, _ := em["valueFrom"].(map[string]any)
				rf, _ := vf["resourceFieldRef"].(map[string]any)
				if d, ok := rf["divisor"]; ok {
					errs = append(errs, checkQuantity(cp.Child("env").Index(k).Child("valueFrom", "resourceFieldRef", "divisor"), d)...)
				}
			}
		}
	}
	resources(sp.Child("resources"), spec["resources"])
	errs = append(errs, checkList(sp.Child("overhead"), spec["overhead"])...)
	vols, _ := spec["volumes"].([]any)
	for i, v := range vols {
		vm, _ := v.(map[string]any)
		ed, _ := vm["emptyDir"].(map[string]any)
		if l, ok := ed["sizeLimit"]; ok {
			errs = append(errs, checkQuantity(sp.Child("volumes").Index(i).Child("emptyDir", "sizeLimit"), l)...)
		}
	}
	return errs
}

// checkList checks every quantity of a resource list, in name order.
func checkList(p *field.Path, list any) field.ErrorList {
	m, _ := list.(map[string]any)
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	var errs field.ErrorList
	for _, n := range names {
		errs = append(errs, checkQuantity(p.Child(n), m[n])...)
	}
	return errs
}

// checkQuantity checks one quantity, written as a string or a number.
func checkQuantity(p *field.Path, v any) field.ErrorList {
	var s string
	switch q := v.(type) {
	case string:
		s = q
	case float64:
		s = fmt.Sprint(q)
	case nil:
		return nil
	default:
		return field.ErrorList{field.Invalid(p, v, "must be a quantity, e.g. 500m or 128Mi")}
	}
	if _, err := resource.ParseQuantity(s); err != nil {
		return field.ErrorList{field.Invalid(p, s, "must be a quantity, e.g. 500m or 128Mi: "+err.Error())}
	}
	return nil
}
