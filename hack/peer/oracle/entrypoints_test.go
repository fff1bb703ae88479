package main

import (
	"path/filepath"
	"testing"

	"github.com/slicelet/slicelet/internal/testharness/entrypoints"
)

// TestEntryPointsAgree: the oracle's slicelet side judges every manifest of
// testdata/entrypoints (a byte-order mark among them) as internal/manifest's Read, and so the
// manifest directory, does.
func TestEntryPointsAgree(t *testing.T) {
	for _, c := range entrypoints.Load(t, filepath.Join("..", "..", "..", "testdata", "entrypoints")) {
		pods, err := sliceletDecode(c.File, c.File, c.Data)
		var names []string
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		for _, p := range pods {
			names = append(names, p.Namespace+"/"+p.Name)
		}
		c.Check(t, "oracle", err == nil, names, msg)
	}
}
