package podgen

import (
	"maps"
	"slices"
)

// Shrink returns the smallest manifest it finds by deleting one map key or list element at a
// time while the failure persists; m itself must fail. Each step hands every one-deletion
// candidate to fails at once (so a caller can decide them in one batch), which returns the
// index of the first candidate that still fails, or -1. apiVersion, kind and metadata.name are
// never deleted, so the result stays an identifiable pod. The search is greedy and
// deterministic, and takes at most one step per node of m.
func Shrink(m Manifest, fails func([]Manifest) int) Manifest {
	cur := Manifest(clone(map[string]any(m)).(map[string]any))
	for {
		cands := candidates(cur)
		if len(cands) == 0 {
			return cur
		}
		i := fails(cands)
		if i < 0 || i >= len(cands) {
			return cur
		}
		cur = cands[i]
	}
}

// candidates are the manifests with one node of m removed, biggest nodes first (a whole
// container before one of its fields).
func candidates(m Manifest) []Manifest {
	var out []Manifest
	var walk func(path []any, v any)
	walk = func(path []any, v any) {
		switch t := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(t)) {
				p := append(slices.Clone(path), k)
				if !protected(p) {
					out = append(out, Manifest(without(map[string]any(m), p).(map[string]any)))
				}
			}
			for _, k := range slices.Sorted(maps.Keys(t)) {
				walk(append(slices.Clone(path), k), t[k])
			}
		case []any:
			for i := range t {
				out = append(out, Manifest(without(map[string]any(m), append(slices.Clone(path), i)).(map[string]any)))
			}
			for i := range t {
				walk(append(slices.Clone(path), i), t[i])
			}
		}
	}
	walk(nil, map[string]any(m))
	return out
}

func protected(path []any) bool {
	if len(path) == 1 {
		return path[0] == "apiVersion" || path[0] == "kind" || path[0] == "metadata"
	}
	return len(path) == 2 && path[0] == "metadata" && path[1] == "name"
}

// without returns a deep copy of v with the node at path removed.
func without(v any, path []any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			if k == path[0] {
				if len(path) == 1 {
					continue
				}
				out[k] = without(e, path[1:])
				continue
			}
			out[k] = clone(e)
		}
		return out
	case []any:
		out := make([]any, 0, len(t))
		for i, e := range t {
			if i == path[0] {
				if len(path) == 1 {
					continue
				}
				out = append(out, without(e, path[1:]))
				continue
			}
			out = append(out, clone(e))
		}
		return out
	}
	return v
}

func clone(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = clone(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = clone(e)
		}
		return out
	}
	return v
}
