package main

import (
	"strings"
	"testing"
)

func TestDeliberateDivergence(t *testing.T) {
	const (
		rbd     = `a.yaml: spec.volumes[0].rbd: Forbidden: needs a volume plugin slicelet does not have; use hostPath or emptyDir`
		bogus   = `a.yaml: spec.initContainers[0].resources.limits.kubernetes.io/bogus: Invalid value: "kubernetes.io/bogus": slicelet can only enforce limits on cpu, memory, ephemeral-storage, hugepages-<size> and extended resources (a device plugin's devices)`
		genuine = `a.yaml: spec.containers[0].ports[0].containerPort: Invalid value: 0: must be between 1 and 65535, inclusive`
	)
	refused := func(refusal string) difference {
		return difference{field: "accepted", slicelet: "no (" + oneLine(refusal) + ")", kubelet: "yes", refusal: refusal}
	}
	tests := []struct {
		name string
		d    difference
		want []string // parts of the reason; none: not deliberate
	}{
		{"one registry refusal", refused(rbd), []string{"by its registry"}},
		{"registry and unenforceable limit, past the printed length", refused(rbd + "\n" + bogus), []string{"by its registry", "cannot enforce"}},
		{"a deliberate refusal does not hide a genuine one", refused(rbd + "\n" + genuine), nil},
		{"a decoding error is no field refusal", refused("a.yaml: yaml: line 3: mapping values are not allowed"), nil},
		{"slicelet accepts what the kubelet refuses as a static pod's secret", difference{field: "accepted", slicelet: "yes",
			kubelet: "no (spec.volumes[0].secret: Forbidden: static pods may not reference secrets)"}, []string{"own sources"}},
		{"a different fact is no refusal", difference{field: "qos", slicelet: "Burstable", kubelet: "BestEffort"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			why := deliberateDivergence(tt.d)
			if (why != "") != (tt.want != nil) {
				t.Fatalf("deliberateDivergence = %q, want deliberate %v", why, tt.want != nil)
			}
			for _, w := range tt.want {
				if !strings.Contains(why, w) {
					t.Errorf("reason %q lacks %q", why, w)
				}
			}
		})
	}
}
