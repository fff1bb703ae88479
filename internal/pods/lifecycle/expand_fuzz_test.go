package lifecycle

import (
	"testing"

	"github.com/slicelet/slicelet/internal/execlimits"
)

// FuzzExpandedLen: execlimits.ExpandedLen, which validation uses to bound a container's
// arguments without expanding them, is exactly the length of Expand's result.
func FuzzExpandedLen(f *testing.F) {
	for _, s := range []string{"", "plain", "$(A)", "$$(A)$(B)", "$(", "$", "a$b$(C", "$(A)$(UNDEFINED)$$$"} {
		f.Add(s, "value-of-a", "$(A)")
	}
	f.Fuzz(func(t *testing.T, s, a, b string) {
		vars := map[string]string{"A": a}
		vars["B"] = Expand(b, vars)
		lens := map[string]int64{"A": int64(len(vars["A"])), "B": int64(len(vars["B"]))}
		if got, want := execlimits.ExpandedLen(s, lens), int64(len(Expand(s, vars))); got != want {
			t.Fatalf("ExpandedLen(%q) = %d, len(Expand) = %d", s, got, want)
		}
	})
}
