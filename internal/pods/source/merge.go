package source

import (
	"fmt"
	"sort"

	"github.com/slicelet/slicelet/internal/pods"
)

// Merge combines the sources' snapshots into the pods to run and the problems to show, the same
// way every time for the same input: snapshots of the file source first, then the API source,
// then any other source by name (snapshots of one source keep their order), pods in snapshot
// order. The first pod of a namespace/name wins — so a file pod beats an API pod of the same
// name — and every later one becomes a Problem "duplicate name across sources" naming both
// origins. A pod whose UID an earlier pod already has is a Problem as well (the controller
// tells pods apart by UID). All snapshots' own problems are kept, in the same source order.
func Merge(snapshots ...pods.Snapshot) (desired []pods.Desired, problems []pods.Problem) {
	ordered := append([]pods.Snapshot(nil), snapshots...)
	rank := func(src string) int {
		switch src {
		case pods.SourceFile:
			return 0
		case pods.SourceAPI:
			return 1
		}
		return 2
	}
	sort.SliceStable(ordered, func(i, j int) bool {
		ri, rj := rank(ordered[i].Source), rank(ordered[j].Source)
		if ri != rj {
			return ri < rj
		}
		return ri == 2 && ordered[i].Source < ordered[j].Source
	})
	type winner struct{ source, origin string }
	seen := map[string]winner{}
	seenUID := map[string]winner{}
	for _, s := range ordered {
		problems = append(problems, s.Problems...)
		for _, d := range s.Pods {
			k := podKey(d.Pod)
			if w, dup := seen[k]; dup {
				msg := fmt.Sprintf("pod %s: duplicate name across sources: %s (%s source) is used, this one (%s source) is not",
					k, w.origin, w.source, d.Source)
				if w.source == d.Source {
					msg = fmt.Sprintf("pod %s: duplicate name: already defined by %s", k, w.origin)
				}
				problems = append(problems, pods.Problem{Origin: originOf(d), Error: msg})
				continue
			}
			if w, dup := seenUID[string(d.Pod.UID)]; dup {
				problems = append(problems, pods.Problem{Origin: originOf(d), Error: fmt.Sprintf(
					"pod %s: metadata.uid: Duplicate value: %q: already used by %s (%s source)", k, d.Pod.UID, w.origin, w.source)})
				continue
			}
			seen[k] = winner{source: d.Source, origin: originOf(d)}
			seenUID[string(d.Pod.UID)] = seen[k]
			desired = append(desired, d)
		}
	}
	return desired, problems
}

// originOf names where a desired pod came from: the file, or "api:<namespace>/<name>".
func originOf(d pods.Desired) string {
	if d.Source == pods.SourceAPI {
		return "api:" + podKey(d.Pod)
	}
	return d.Origin
}
