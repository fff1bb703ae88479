package crirt

import (
	"context"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/podstats"
)

// ContainerCgroups names the pod's containers among the child cgroups of its pod slice
// (podstats.Namer): with the systemd cgroup driver a container's cgroup is
// <prefix>-<container id>.scope (containerd's cri-containerd-<id>.scope, CRI-O's
// crio-<id>.scope), with the cgroupfs driver the bare <container id>; the instance is the
// container's attempt. The sandbox's cgroup and anything else not a container of the pod is
// left out.
func (r *Runtime) ContainerCgroups(ctx context.Context, pod *v1.Pod, dirs []string) (map[string]podstats.ContainerCgroup, error) {
	list, err := r.listContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: managedSelector(string(pod.UID))})
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*runtimeapi.Container, len(list))
	for _, c := range list {
		byID[c.Id] = c
	}
	out := map[string]podstats.ContainerCgroup{}
	for _, dir := range dirs {
		if c, ok := byID[cgroupContainerID(dir)]; ok {
			out[dir] = podstats.ContainerCgroup{Name: c.GetMetadata().GetName(), Instance: int(c.GetMetadata().GetAttempt())}
		}
	}
	return out, nil
}

// cgroupContainerID is the container ID a container cgroup's directory name carries:
// "cri-containerd-<id>.scope" → <id>; a name without a unit suffix is the ID itself.
func cgroupContainerID(dir string) string {
	if base, ok := strings.CutSuffix(dir, ".scope"); ok {
		if i := strings.LastIndexByte(base, '-'); i >= 0 {
			return base[i+1:]
		}
		return base
	}
	return dir
}
