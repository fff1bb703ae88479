package lifecycle

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// SubPath is the sub-path of the volume a mount takes, checked as the kubelet's makeMounts
// does (pkg/kubelet/kubelet_pods.go): subPath as written, or subPathExpr with $(VAR) expanded
// from the container's resolved env (kubecontainer.ExpandContainerVolumeMounts: a variable
// that is not defined or is empty is an error naming it); an absolute path or one with a ".."
// element is an error in the kubelet's words. "" means the whole volume.
func SubPath(m *v1.VolumeMount, env []v1.EnvVar) (string, error) {
	sub := m.SubPath
	if m.SubPathExpr != "" {
		vars := make(map[string]string, len(env))
		for _, e := range env {
			vars[e.Name] = e.Value
		}
		var missing []string
		sub = ExpandWith(m.SubPathExpr, func(name string) (string, bool) {
			v, ok := vars[name]
			if !ok || v == "" {
				missing = append(missing, name)
			}
			return v, ok
		})
		if len(missing) > 0 {
			slices.Sort(missing)
			return "", fmt.Errorf("missing value for %s", strings.Join(slices.Compact(missing), ", "))
		}
	}
	if sub == "" {
		return "", nil
	}
	if filepath.IsAbs(sub) {
		return "", fmt.Errorf("error SubPath `%s` must not be an absolute path", sub)
	}
	if slices.Contains(strings.Split(filepath.ToSlash(sub), "/"), "..") {
		// pkg/volume/validation ValidatePathNoBacksteps.
		return "", fmt.Errorf("unable to provision SubPath `%s`: %w", sub, errors.New("must not contain '..'"))
	}
	return sub, nil
}
