package crirt

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/slices"
)

// StorageDirs returns where the pod keeps local storage outside the runtime's own store, for
// ephemeral-storage accounting: its emptyDir volumes (StateDir/pods/<uid>/volumes/<name>), each
// container's log directory (LogRoot/<ns>_<name>_<uid>/<container>) and the pod's log directory
// itself. Writable layers live in the runtime's store: WritableLayers reports them. A pod whose
// UID is not valid has none.
func (r *Runtime) StorageDirs(pod *v1.Pod) (volumes map[string]string, containers map[string][]string, other []string) {
	if slices.ValidateUID(string(pod.UID)) != nil {
		return nil, nil, nil
	}
	volumes = lifecycle.EmptyDirs(pod, func(name string) string { return r.emptyDirPath(string(pod.UID), name) })
	logs := r.podLogDir(pod)
	containers = map[string][]string{}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			containers[c.Name] = []string{logs + "/" + c.Name}
		}
	}
	return volumes, containers, []string{logs}
}

// LayerUsage is a container's writable layer as the runtime reports it.
type LayerUsage struct {
	Bytes, Inodes uint64
}

// WritableLayers reports the writable-layer usage of the pod's containers by container name
// (CRI ListContainerStats; every instance of a name is summed: a dead container's layer stays
// on disk until it is removed). A runtime without container stats reports none.
func (r *Runtime) WritableLayers(ctx context.Context, pod *v1.Pod) (map[string]LayerUsage, error) {
	resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.ListContainerStatsResponse, error) {
		return r.rs.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{
			Filter: &runtimeapi.ContainerStatsFilter{LabelSelector: map[string]string{LabelPodUID: string(pod.UID), LabelManaged: "true"}},
		})
	})
	if status.Code(err) == codes.Unimplemented {
		return map[string]LayerUsage{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: container stats: %w", pod.Namespace, pod.Name, err)
	}
	out := map[string]LayerUsage{}
	for _, st := range resp.Stats {
		name := st.GetAttributes().GetMetadata().GetName()
		wl := st.GetWritableLayer()
		if name == "" || wl == nil {
			continue
		}
		u := out[name]
		u.Bytes += wl.GetUsedBytes().GetValue()
		u.Inodes += wl.GetInodesUsed().GetValue()
		out[name] = u
	}
	return out, nil
}
