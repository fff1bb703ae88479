package podgen

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/internal/pods/podfields"
)

// TestCatalogueCoversEveryLeaf: every leaf of v1.Pod is bent, and every leaf with more than
// one valid value (all but booleans) to an invalid or boundary value too.
func TestCatalogueCoversEveryLeaf(t *testing.T) {
	byLeaf := map[string][]Bend{}
	for _, b := range Catalogue() {
		byLeaf[b.Leaf] = append(byLeaf[b.Leaf], b)
	}
	leaves := podfields.LeafFields()
	for _, l := range leaves {
		bs := byLeaf[l.Path]
		if len(bs) == 0 {
			t.Errorf("%s (%s): no bend: give its type or name values in values.go", l.Path, l.Type)
			continue
		}
		if l.Type.Kind() == reflect.Bool || strings.HasPrefix(l.Path, "spec.ephemeralContainers[*].") {
			continue
		}
		bad := false
		for _, b := range bs {
			bad = bad || b.Class != Valid
		}
		if !bad {
			t.Errorf("%s (%s): only valid values", l.Path, l.Type)
		}
	}
	paths := map[string]bool{}
	for _, l := range leaves {
		for p := l.Path; p != ""; p, _ = splitLast(p) {
			paths[p] = true
			paths[strings.TrimSuffix(p, "[*]")] = true
		}
	}
	for _, b := range Catalogue() {
		if !paths[b.Leaf] {
			t.Errorf("bend %s: %s is no path of v1.Pod", b, b.Leaf)
		}
	}
	t.Logf("%d leaves, %d bends", len(leaves), len(Catalogue()))
}

// TestEveryNamedTypeHasValues: a named string type (an enumeration, usually) has its set in
// enums or is declared free-form, so that a new enumeration in k8s.io/api is not bent as a
// plain string.
func TestEveryNamedTypeHasValues(t *testing.T) {
	for _, l := range podfields.LeafFields() {
		if l.Type.Kind() != reflect.String || l.Type.Name() == "string" {
			continue
		}
		if _, ok := enums[l.Type.String()]; ok {
			continue
		}
		if _, ok := freeForm[l.Type.String()]; !ok {
			t.Errorf("%s: type %s is neither in enums nor in freeForm", l.Path, l.Type)
		}
	}
}

// get reads the leaf at a registry path the way setter.set writes it (first list elements).
func get(m Manifest, path string) (any, bool) {
	var cur any = map[string]any(m)
	for _, seg := range segments(path) {
		name, isList := strings.CutSuffix(seg, "[*]")
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = mm[name]
		if !ok {
			return nil, false
		}
		if isList {
			l, ok := cur.([]any)
			if !ok || len(l) == 0 {
				return nil, false
			}
			cur = l[0]
		}
	}
	return cur, true
}

// TestLeafBendsSetTheirValue: every value bend lands at its path, and the unions on the way
// keep one member.
func TestLeafBendsSetTheirValue(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i, b := range Catalogue() {
		if !strings.HasPrefix(b.What, `"`) || !isLeaf(b.Leaf) {
			continue
		}
		m := basePod(r, fmt.Sprintf("t%d", i))
		b.apply(&setter{m: m})
		got, ok := get(m, b.Leaf)
		if !ok || show(got) != b.What {
			t.Errorf("%s: got %v (%v)", b, got, ok)
			continue
		}
		checkUnions(t, b, m)
	}
}

var leafSet = func() map[string]bool {
	m := map[string]bool{}
	for _, l := range podfields.Leaves() {
		m[l] = true
	}
	return m
}()

func isLeaf(path string) bool { return leafSet[path] }

// checkUnions walks the manifest and fails on a union node with two members.
func checkUnions(t *testing.T, b Bend, m Manifest) {
	var walk func(pattern string, v any)
	walk = func(pattern string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if u, ok := lookup(unions, pattern); ok && pattern != "" {
				n := 0
				for _, mem := range u.members {
					if _, ok := x[mem]; ok {
						n++
					}
				}
				// Node selector terms and preferences may have both of theirs.
				if n > 1 && !strings.HasSuffix(pattern, "nodeSelectorTerms[*]") && !strings.HasSuffix(pattern, "preference") {
					t.Errorf("%s: %s has %d members of its union: %v", b, pattern, n, x)
				}
			}
			for k, e := range x {
				walk(join(pattern, k), e)
			}
		case []any:
			for _, e := range x {
				walk(pattern+"[*]", e)
			}
		}
	}
	walk("", map[string]any(m))
}

// TestValidBendsDecode: a pod bent only to valid values decodes strictly as a v1.Pod (an
// unknown field or a wrong type would mean a broken path or skeleton).
func TestValidBendsDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i, b := range Catalogue() {
		if b.Class != Valid {
			continue
		}
		m := basePod(r, fmt.Sprintf("t%d", i))
		b.apply(&setter{m: m})
		var pod v1.Pod
		if err := yaml.UnmarshalStrict(m.YAML(), &pod); err != nil {
			t.Errorf("%s: %v\n%s", b, err, m.YAML())
		}
	}
}

// TestStructuralPodIsDeterministic, and every bend of the catalogue is met within
// len(catalogue) consecutive pods.
func TestStructuralPodIsDeterministic(t *testing.T) {
	cat := Catalogue()
	seen := map[string]bool{}
	for i := 0; i < len(cat); i++ {
		a, ba := StructuralPod(7, i)
		if i < 300 {
			b, _ := StructuralPod(7, i)
			if !bytes.Equal(a.YAML(), b.YAML()) {
				t.Fatalf("pod %d differs between two generations", i)
			}
		}
		if a.Name() != fmt.Sprintf("s7-%d", i) && !strings.HasPrefix(ba[0].Leaf, "metadata.name") && (len(ba) < 2 || !strings.HasPrefix(ba[1].Leaf, "metadata.name")) {
			t.Fatalf("pod %d is named %q", i, a.Name())
		}
		seen[ba[0].String()] = true
	}
	for _, b := range cat {
		if !seen[b.String()] {
			t.Errorf("%s never bent in %d pods", b, len(cat))
		}
	}
}
