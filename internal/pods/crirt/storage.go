package crirt

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/slices"
)

// LogDirs returns where the pod's logs live, for ephemeral-storage accounting: each
// container's log directory (LogRoot/<ns>_<name>_<uid>/<container>) and the pod's log directory
// itself. Writable layers live in the runtime's store (WritableLayers); emptyDir volumes are
// the pod worker's (worker.EmptyDirs). A pod whose UID is not valid has none.
func (r *Runtime) LogDirs(pod *v1.Pod) (containers map[string][]string, other []string) {
	if slices.ValidateUID(string(pod.UID)) != nil {
		return nil, nil
	}
	logs := r.podLogDir(pod.Namespace, pod.Name, string(pod.UID))
	containers = map[string][]string{}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			containers[c.Name] = []string{logs + "/" + c.Name}
		}
	}
	return containers, []string{logs}
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
			Filter: &runtimeapi.ContainerStatsFilter{LabelSelector: managedSelector(string(pod.UID))},
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
