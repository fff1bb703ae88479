package verdict

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/testharness/runtimetest"
)

var update = flag.Bool("update", false, "rewrite testdata/corpus-outcomes.txt")

const (
	corpusDir    = "../../../testdata/corpus"
	outcomesFile = "../../../testdata/corpus-outcomes.txt"
)

// TestCorpus decodes every manifest of testdata/corpus through the one decoding path
// (manifest.ReadFile: defaults, validation, the registry's refusals) and asks each runtime's
// validation about the pods (for the systemd runtime after runtimetest.HostCommands, as it runs
// host commands, not images; what depends on this host's files is left to the integration test,
// which runs them); the outcomes must be testdata/corpus-outcomes.txt's.
func TestCorpus(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(corpusDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 40 {
		t.Fatalf("the corpus holds %d manifests, want at least 40", len(files))
	}
	var b strings.Builder
	b.WriteString("# What each runtime does with each manifest of testdata/corpus: runs, or refused with the\n")
	b.WriteString("# paths of the fields it refuses. The systemd runtime is given the pods with host commands\n")
	b.WriteString("# for images (runtimetest.HostCommands). Checked by internal/pods/verdict TestCorpus\n")
	b.WriteString("# (-update rewrites it); the runs are run by internal/agent TestIntegrationCorpus.\n")
	runs := 0
	for _, f := range files {
		name := filepath.Base(f)
		pods, err := manifest.ReadFile(f)
		for _, rt := range []string{"cri", "systemd"} {
			result := "runs"
			if err != nil {
				result = refused(errorPaths(err))
			} else if paths := runtimePaths(t, rt, pods); len(paths) > 0 {
				result = refused(paths)
			} else {
				runs++
			}
			fmt.Fprintf(&b, "%-36s %-8s %s\n", name, rt, result)
		}
	}
	if runs < 20 {
		t.Errorf("only %d of %d runs succeed: the corpus should mostly be pods slicelet runs", runs, 2*len(files))
	}
	if *update {
		if err := os.WriteFile(outcomesFile, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(outcomesFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != b.String() {
		t.Errorf("outcomes differ from %s (go test ./internal/pods/verdict -run TestCorpus -update):\n%s", outcomesFile, b.String())
	}
}

// runtimePaths are the paths of the fields runtime rt refuses in pods.
func runtimePaths(t *testing.T, rt string, pods []*v1.Pod) []string {
	var paths []string
	for _, p := range pods {
		if rt == "systemd" {
			p = p.DeepCopy()
			runtimetest.HostCommands(p)
		}
		v, err := Spec(rt, p) // the host's files are the integration test's business
		if err != nil {
			t.Fatal(err)
		}
		for _, pr := range v.Problems {
			path, _, _ := strings.Cut(pr, ": ")
			paths = append(paths, path)
		}
	}
	return paths
}

// errorPaths are the field paths of a decoding error's problems ("decode" for a problem without
// one).
func errorPaths(err error) []string {
	var list []error
	if m, ok := err.(interface{ Unwrap() []error }); ok {
		list = m.Unwrap()
	} else {
		list = []error{err}
	}
	var paths []string
	for _, e := range list {
		var fe *field.Error
		if errors.As(e, &fe) {
			paths = append(paths, fe.Field)
		} else {
			paths = append(paths, "decode")
		}
	}
	return paths
}

// refused renders the refused paths, sorted and without duplicates.
func refused(paths []string) string {
	sort.Strings(paths)
	var out []string
	for i, p := range paths {
		if i == 0 || p != paths[i-1] {
			out = append(out, p)
		}
	}
	return "refused " + strings.Join(out, ",")
}
