package devices

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// The PodResources API's rate limit (the kubelet's podresources.DefaultQPS and
// DefaultBurstTokens): a request over it is answered ResourceExhausted.
const (
	podResourcesQPS   = 100
	podResourcesBurst = 10
)

// Pods are the pods the PodResources API reports: the active ones (the kubelet's
// KubeletPodResourcesListUseActivePods), and one by namespace and name.
type Pods interface {
	ActivePods() []*v1.Pod
	PodByName(namespace, name string) (*v1.Pod, bool)
}

// PodResources serves the kubelet's PodResources API (k8s.io/kubelet/pkg/apis/podresources/v1):
// List, Get and GetAllocatableResources, with the devices of the device manager. slicelet has
// no CPU, memory or DRA manager: cpu_ids, memory and dynamic_resources stay empty, as on a
// kubelet with the none policies.
type PodResources struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	m    *Manager
	pods Pods
}

// NewPodResources returns the PodResources API over m and pods.
func NewPodResources(m *Manager, pods Pods) *PodResources { return &PodResources{m: m, pods: pods} }

// List implements the API: every active pod, its containers and restartable init containers
// with their devices.
func (s *PodResources) List(context.Context, *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	pods := s.pods.ActivePods()
	out := &podresourcesapi.ListPodResourcesResponse{PodResources: make([]*podresourcesapi.PodResources, 0, len(pods))}
	for _, p := range pods {
		out.PodResources = append(out.PodResources, s.podResources(p))
	}
	return out, nil
}

// Get implements the API: one pod by namespace and name.
func (s *PodResources) Get(_ context.Context, r *podresourcesapi.GetPodResourcesRequest) (*podresourcesapi.GetPodResourcesResponse, error) {
	p, ok := s.pods.PodByName(r.GetPodNamespace(), r.GetPodName())
	if !ok {
		return nil, fmt.Errorf("pod %s in namespace %s not found", r.GetPodName(), r.GetPodNamespace())
	}
	return &podresourcesapi.GetPodResourcesResponse{PodResources: s.podResources(p)}, nil
}

// GetAllocatableResources implements the API: the healthy devices of every plugin.
func (s *PodResources) GetAllocatableResources(context.Context, *podresourcesapi.AllocatableResourcesRequest) (*podresourcesapi.AllocatableResourcesResponse, error) {
	out := &podresourcesapi.AllocatableResourcesResponse{}
	all := s.m.Allocatable()
	for _, name := range sortedKeys(all) {
		for _, d := range all[name] {
			out.Devices = append(out.Devices, containerDevices(name, d.ID, d.GetTopology().GetNodes())...)
		}
	}
	return out, nil
}

func (s *PodResources) podResources(p *v1.Pod) *podresourcesapi.PodResources {
	out := &podresourcesapi.PodResources{Name: p.Name, Namespace: p.Namespace}
	add := func(c *v1.Container) {
		cr := &podresourcesapi.ContainerResources{Name: c.Name}
		for _, a := range s.m.ContainerAllocations(string(p.UID), c.Name) {
			for _, node := range sortedKeys(a.DeviceIDs) {
				for _, id := range a.DeviceIDs[node] {
					var nodes []int64
					if node != noTopology {
						nodes = []int64{node}
					}
					cr.Devices = append(cr.Devices, containerDevicesOn(a.Resource, id, nodes)...)
				}
			}
		}
		out.Containers = append(out.Containers, cr)
	}
	for i := range p.Spec.InitContainers {
		if c := &p.Spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	for i := range p.Spec.Containers {
		add(&p.Spec.Containers[i])
	}
	return out
}

// containerDevices is one device of a resource as the API lists it: once per NUMA node it
// is on, or once without topology (the kubelet's containerDevicesFromResourceDeviceInstances).
func containerDevices[N interface{ GetID() int64 }](resource, id string, nodes []N) []*podresourcesapi.ContainerDevices {
	ids := make([]int64, 0, len(nodes))
	for _, n := range nodes {
		ids = append(ids, n.GetID())
	}
	return containerDevicesOn(resource, id, ids)
}

func containerDevicesOn(resource, id string, nodes []int64) []*podresourcesapi.ContainerDevices {
	if len(nodes) == 0 {
		return []*podresourcesapi.ContainerDevices{{ResourceName: resource, DeviceIds: []string{id}}}
	}
	var out []*podresourcesapi.ContainerDevices
	for _, n := range nodes {
		out = append(out, &podresourcesapi.ContainerDevices{ResourceName: resource, DeviceIds: []string{id},
			Topology: &podresourcesapi.TopologyInfo{Nodes: []*podresourcesapi.NUMANode{{ID: n}}}})
	}
	return out
}

// PodResourcesServer is the PodResources API on its unix socket.
type PodResourcesServer struct {
	grpc *grpc.Server
	wg   sync.WaitGroup
}

// ServePodResources serves api on socket (its directory created 0750, a stale socket
// replaced), rate limited as the kubelet's, until Stop.
func ServePodResources(socket string, api *PodResources, log *slog.Logger) (*PodResourcesServer, error) {
	if err := os.MkdirAll(filepath.Dir(socket), 0o750); err != nil {
		return nil, fmt.Errorf("pod resources socket: %w", err)
	}
	if err := os.Remove(socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("pod resources socket: %w", err)
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("pod resources socket: %w", err)
	}
	limiter := rate.NewLimiter(podResourcesQPS, podResourcesBurst)
	s := &PodResourcesServer{grpc: grpc.NewServer(grpc.MaxRecvMsgSize(maxPluginMessage), grpc.MaxConcurrentStreams(maxConcurrentRegistrations),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			if !limiter.Allow() {
				return nil, status.Error(codes.ResourceExhausted, "rejected by rate limit")
			}
			return handler(ctx, req)
		}))}
	podresourcesapi.RegisterPodResourcesListerServer(s.grpc, api)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.grpc.Serve(ln); err != nil {
			log.Error("pod resources server stopped", "error", err)
		}
	}()
	log.Info("pod resources socket serving", "socket", socket)
	return s, nil
}

// Stop stops serving.
func (s *PodResourcesServer) Stop() {
	s.grpc.Stop()
	s.wg.Wait()
}
