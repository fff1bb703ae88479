package podgen

import (
	"bytes"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func TestPodIsDeterministicAndDecodes(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 500; i++ {
		a, b := Pod(7, i).YAML(), Pod(7, i).YAML()
		if !bytes.Equal(a, b) {
			t.Fatalf("pod %d differs between two generations:\n%s\n%s", i, a, b)
		}
		var pod v1.Pod
		if err := yaml.UnmarshalStrict(a, &pod); err != nil {
			t.Fatalf("pod %d does not decode as a v1.Pod: %v\n%s", i, err, a)
		}
		if pod.Name != Pod(7, i).Name() || len(pod.Spec.Containers) == 0 {
			t.Fatalf("pod %d: name %q, %d containers", i, pod.Name, len(pod.Spec.Containers))
		}
		seen[string(a)] = true
	}
	if len(seen) != 500 {
		t.Errorf("%d distinct manifests of 500", len(seen))
	}
}

func TestPodCoversTheGrammar(t *testing.T) {
	want := []string{"initContainers", "restartPolicy: Always", "hugepages-2Mi", "ephemeral-storage", "priorityClassName", "priority:", "1001m", "0.5Gi", "1e3", "limits:", "requests:", "kube-system"}
	var all bytes.Buffer
	for i := 0; i < 2000; i++ {
		all.Write(Pod(1, i).YAML())
	}
	for _, w := range want {
		if !strings.Contains(all.String(), w) {
			t.Errorf("2000 pods never contain %q", w)
		}
	}
}

func TestShrink(t *testing.T) {
	// The failure: some container asks for hugepages-2Mi. The minimal manifest keeps one
	// container with that one resource and nothing else.
	hasHuge := func(m Manifest) bool { return bytes.Contains(m.YAML(), []byte("hugepages-2Mi")) }
	var start Manifest
	for i := 0; ; i++ {
		if m := Pod(3, i); hasHuge(m) {
			start = m
			break
		}
	}
	calls := 0
	got := Shrink(start, func(cands []Manifest) int {
		calls++
		for i, c := range cands {
			if hasHuge(c) {
				return i
			}
		}
		return -1
	})
	if !hasHuge(got) {
		t.Fatalf("shrunk manifest lost the failure:\n%s", got.YAML())
	}
	for _, k := range []string{"apiVersion", "kind", "metadata"} {
		if _, ok := got[k]; !ok {
			t.Errorf("shrunk manifest lost %s", k)
		}
	}
	if n := strings.Count(string(got.YAML()), "\n"); n > 9 {
		t.Errorf("shrunk manifest has %d lines, want at most 9:\n%s", n, got.YAML())
	}
	if calls == 0 {
		t.Error("fails was never called")
	}
}
