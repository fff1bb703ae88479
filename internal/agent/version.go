package agent

import (
	"runtime/debug"
	"strings"
)

// kubeletVersion is the Node's kubeletVersion: the Kubernetes version of the API slicelet
// speaks (k8s.io/api v0.X.Y is Kubernetes v1.X.Y), with slicelet and its version as semver
// build metadata ("v1.37.2+slicelet.v0.4.0"): `kubectl get nodes` shows slicelet, and what
// parses the field as a version still can.
func kubeletVersion(slicelet string) string {
	kube := "v1.0.0"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "k8s.io/api" && strings.HasPrefix(m.Version, "v0.") {
				kube = "v1." + strings.TrimPrefix(m.Version, "v0.")
			}
		}
	}
	meta := strings.Map(func(r rune) rune {
		if r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '-'
	}, slicelet)
	return kube + "+slicelet." + meta
}
