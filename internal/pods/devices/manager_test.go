package devices

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubernetes/pkg/kubelet/checkpointmanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/checkpoint"
)

// corruptCheckpoint changes a pod UID in the checkpoint without its checksum.
func corruptCheckpoint(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte("uid-1"), []byte("uid-2"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointReadByKubelet: the kubelet's checkpoint manager reads slicelet's checkpoint.
func TestCheckpointReadByKubelet(t *testing.T) {
	dir := t.TempDir()
	allocs := []Allocation{{PodUID: "uid-1", Container: "c", Resource: "example.com/gpu", DeviceIDs: map[int64][]string{-1: {"dev-a"}},
		Response: &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"GPU": "a"}}}}
	if err := WriteCheckpoint(filepath.Join(dir, CheckpointFile), allocs, map[string][]string{"example.com/gpu": {"dev-a"}}); err != nil {
		t.Fatal(err)
	}
	cm, err := checkpointmanager.NewCheckpointManager(dir)
	if err != nil {
		t.Fatal(err)
	}
	cp := checkpoint.New(nil, nil)
	if err := cm.GetCheckpoint(CheckpointFile, cp); err != nil {
		t.Fatalf("the kubelet's checkpoint manager: %v", err)
	}
	entries, registered := cp.GetData()
	if len(entries) != 1 || entries[0].PodUID != "uid-1" || !reflect.DeepEqual(registered, map[string][]string{"example.com/gpu": {"dev-a"}}) {
		t.Errorf("the kubelet read %+v %v", entries, registered)
	}
}

// fakePlugin is a device plugin serving on a unix socket, recording the calls it gets.
type fakePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	opts    *pluginapi.DevicePluginOptions
	devices chan []*pluginapi.Device

	mu        sync.Mutex
	allocated [][]string
	preStart  [][]string
	preferred []*pluginapi.ContainerPreferredAllocationRequest
	prefer    []string
}

func (p *fakePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return p.opts, nil
}

func (p *fakePlugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	for {
		select {
		case d, ok := <-p.devices:
			if !ok {
				return nil
			}
			if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: d}); err != nil {
				return err
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

func (p *fakePlugin) GetPreferredAllocation(_ context.Context, r *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.preferred = append(p.preferred, r.ContainerRequests...)
	return &pluginapi.PreferredAllocationResponse{ContainerResponses: []*pluginapi.ContainerPreferredAllocationResponse{{DeviceIDs: p.prefer}}}, nil
}

func (p *fakePlugin) Allocate(_ context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := &pluginapi.AllocateResponse{}
	for _, c := range r.ContainerRequests {
		p.allocated = append(p.allocated, c.DevicesIds)
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs:    map[string]string{"FAKE_DEVICES": strings.Join(c.DevicesIds, ",")},
			Mounts:  []*pluginapi.Mount{{ContainerPath: "/fake", HostPath: "/var/fake", ReadOnly: true}},
			Devices: []*pluginapi.DeviceSpec{{ContainerPath: "/dev/fake0", HostPath: "/dev/null", Permissions: "rw"}},
		})
	}
	return out, nil
}

func (p *fakePlugin) PreStartContainer(_ context.Context, r *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.preStart = append(p.preStart, r.DevicesIds)
	return &pluginapi.PreStartContainerResponse{}, nil
}

// serve starts p on dir/name and returns a stop function.
func (p *fakePlugin) serve(t *testing.T, dir, name string) func() {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go srv.Serve(ln)
	return srv.Stop
}

// register registers the plugin's socket name with the manager's registration socket, as a
// plugin does.
func register(t *testing.T, dir, endpoint, resource string, opts *pluginapi.DevicePluginOptions) error {
	return registerVersion(t, dir, pluginapi.Version, endpoint, resource, opts)
}

func registerVersion(t *testing.T, dir, version, endpoint, resource string, opts *pluginapi.DevicePluginOptions) error {
	t.Helper()
	cc, err := grpc.NewClient("unix://"+filepath.Join(dir, KubeletSocket), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(cc).Register(ctx, &pluginapi.RegisterRequest{Version: version, Endpoint: endpoint, ResourceName: resource, Options: opts})
	return err
}

func gpuPod(uid, name string, n int64) *v1.Pod {
	q := *resource.NewQuantity(n, resource.DecimalSI)
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID("uid-" + uid), Name: name, Namespace: "default"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Resources: v1.ResourceRequirements{
			Limits: v1.ResourceList{"example.com/gpu": q}, Requests: v1.ResourceList{"example.com/gpu": q}}}}}}
}

// shortDir is a temporary directory whose socket paths fit sun_path.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestManagerWithPlugin(t *testing.T) {
	dir := shortDir(t)
	changed := make(chan struct{}, 16)
	m := New(Options{Dir: dir, OnChange: func() { changed <- struct{}{} }})
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	defer m.Stop()

	// A registration is checked before the plugin is dialled.
	for _, bad := range []struct{ version, endpoint, resource, want string }{
		{"v1alpha", "p.sock", "example.com/gpu", `requested API version "v1alpha" is not supported by kubelet`},
		{pluginapi.Version, "p.sock", "cpu", `the ResourceName "cpu" is invalid`},
		{pluginapi.Version, "../p.sock", "example.com/gpu", "must be the name of a socket"},
		{pluginapi.Version, "kubelet.sock", "example.com/gpu", "must be the name of a socket"},
		{pluginapi.Version, "missing.sock", "example.com/gpu", "failed to dial device plugin"},
	} {
		if err := registerVersion(t, dir, bad.version, bad.endpoint, bad.resource, nil); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("registration %+v: %v, want %q", bad, err, bad.want)
		}
	}

	opts := &pluginapi.DevicePluginOptions{PreStartRequired: true, GetPreferredAllocationAvailable: true}
	p := &fakePlugin{opts: opts, devices: make(chan []*pluginapi.Device, 4), prefer: []string{"dev-2"}}
	defer p.serve(t, dir, "gpu.sock")()
	p.devices <- []*pluginapi.Device{{ID: "dev-1", Health: pluginapi.Healthy}, {ID: "dev-2", Health: pluginapi.Healthy}, {ID: "dev-3", Health: pluginapi.Unhealthy}}
	if err := register(t, dir, "gpu.sock", "example.com/gpu", opts); err != nil {
		t.Fatalf("register: %v", err)
	}
	waitFor(t, changed, func() bool { c, _ := m.Capacity(); q := c["example.com/gpu"]; return q.Value() == 3 })
	if _, alloc := m.Capacity(); alloc.Name("example.com/gpu", resource.DecimalSI).Value() != 2 {
		t.Errorf("allocatable = %v, want 2 healthy devices", alloc)
	}

	pod := gpuPod("1", "a", 1)
	if ok, reason, msg := m.Admit(context.Background(), pod, false, nil, true); !ok {
		t.Fatalf("admission refused: %s %s", reason, msg)
	}
	if got := p.allocated; !reflect.DeepEqual(got, [][]string{{"dev-2"}}) {
		t.Errorf("Allocate got %v, want the preferred dev-2", got)
	}
	if len(p.preferred) != 1 || !reflect.DeepEqual(p.preferred[0].AvailableDeviceIDs, []string{"dev-1", "dev-2"}) || p.preferred[0].AllocationSize != 1 {
		t.Errorf("GetPreferredAllocation got %+v", p.preferred)
	}
	run, err := m.RunOptions(context.Background(), pod, &pod.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(run.Envs, []EnvVar{{"FAKE_DEVICES", "dev-2"}}) || len(run.Mounts) != 1 || len(run.Devices) != 1 {
		t.Errorf("run options %+v", run)
	}
	if !reflect.DeepEqual(p.preStart, [][]string{{"dev-2"}}) {
		t.Errorf("PreStartContainer got %v", p.preStart)
	}

	// Two more devices than are healthy and free: refused with the kubelet's reason.
	ok, reason, msg := m.Admit(context.Background(), gpuPod("2", "b", 2), false, []*v1.Pod{pod}, true)
	if ok || reason != ReasonUnexpectedAdmissionError ||
		msg != "Allocate failed due to requested number of devices unavailable for example.com/gpu. Requested: 2, Available: 1, which is unexpected" {
		t.Errorf("admission = %v %q %q", ok, reason, msg)
	}
	// A static pod asking for a resource no plugin registered is refused; an API pod is not.
	other := gpuPod("3", "c", 1)
	other.Spec.Containers[0].Resources.Limits = v1.ResourceList{"example.com/fpga": resource.MustParse("1")}
	if ok, _, msg := m.Admit(context.Background(), other, true, []*v1.Pod{pod}, true); ok || msg != "Allocate failed due to cannot allocate unregistered device example.com/fpga, which is unexpected" {
		t.Errorf("static pod with an unknown extended resource: %v %q", ok, msg)
	}
	if ok, _, msg := m.Admit(context.Background(), other, false, []*v1.Pod{pod}, true); !ok {
		t.Errorf("API pod with an unknown extended resource refused: %q", msg)
	}

	// The allocation survives a restart: a new manager reads the checkpoint; until the plugin
	// registers again the resource is there with no device, and the pod keeps its device.
	m.Stop()
	m2 := New(Options{Dir: dir, OnChange: func() { changed <- struct{}{} }})
	if err := m2.Start(); err != nil {
		t.Fatal(err)
	}
	defer m2.Stop()
	if _, err := os.Stat(filepath.Join(dir, "gpu.sock")); !os.IsNotExist(err) {
		t.Errorf("the plugin's socket was not removed at start: %v", err)
	}
	c, a := m2.Capacity()
	if q, ok := c["example.com/gpu"]; !ok || q.Value() != 0 || a.Name("example.com/gpu", resource.DecimalSI).Value() != 0 {
		t.Errorf("after restart: capacity %v allocatable %v, want example.com/gpu at 0", c, a)
	}
	if al := m2.AdmissionAllocatable(pod, a); al.Name("example.com/gpu", resource.DecimalSI).Value() != 1 {
		t.Errorf("the running pod's admission allocatable = %v, want its device counted", al)
	}
	if ok, reason, msg := m2.Admit(context.Background(), pod, false, nil, false); !ok {
		t.Errorf("the running pod re-admitted after the restart: %s %s", reason, msg)
	}
	if got := m2.ContainerAllocations(string(pod.UID), "main"); len(got) != 1 || !reflect.DeepEqual(got[0].IDs(), []string{"dev-2"}) {
		t.Errorf("after restart the pod holds %+v, want dev-2", got)
	}
	// The plugin registers again (it saw the registration socket come back).
	p2 := &fakePlugin{opts: &pluginapi.DevicePluginOptions{}, devices: make(chan []*pluginapi.Device, 4)}
	defer p2.serve(t, dir, "gpu2.sock")()
	p2.devices <- []*pluginapi.Device{{ID: "dev-1", Health: pluginapi.Healthy}, {ID: "dev-2", Health: pluginapi.Healthy}}
	if err := register(t, dir, "gpu2.sock", "example.com/gpu", nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, changed, func() bool { _, a := m2.Capacity(); q := a["example.com/gpu"]; return q.Value() == 2 })
	// The free device goes to the next pod; the first pod's device stays its own.
	if ok, reason, msg := m2.Admit(context.Background(), gpuPod("4", "d", 1), false, []*v1.Pod{pod}, true); !ok {
		t.Fatalf("admission refused: %s %s", reason, msg)
	}
	if !reflect.DeepEqual(p2.allocated, [][]string{{"dev-1"}}) {
		t.Errorf("after restart Allocate got %v, want dev-1", p2.allocated)
	}
	// A pod no longer active gives its device back.
	if ok, reason, msg := m2.Admit(context.Background(), gpuPod("5", "e", 1), false, nil, true); !ok {
		t.Errorf("admission after the other pods ended refused: %s %s", reason, msg)
	}

	// PodResources reports the pods' devices and the allocatable ones.
	pr := NewPodResources(m2, fakePods{gpuPod("5", "e", 1)})
	list, _ := pr.List(context.Background(), &podresourcesapi.ListPodResourcesRequest{})
	if len(list.PodResources) != 1 || len(list.PodResources[0].Containers) != 1 || len(list.PodResources[0].Containers[0].Devices) != 1 ||
		list.PodResources[0].Containers[0].Devices[0].ResourceName != "example.com/gpu" {
		t.Errorf("List = %v", list)
	}
	alloc, _ := pr.GetAllocatableResources(context.Background(), &podresourcesapi.AllocatableResourcesRequest{})
	if len(alloc.Devices) != 2 {
		t.Errorf("GetAllocatableResources = %v", alloc)
	}
	if _, err := pr.Get(context.Background(), &podresourcesapi.GetPodResourcesRequest{PodName: "x", PodNamespace: "y"}); err == nil || err.Error() != "pod x in namespace y not found" {
		t.Errorf("Get of a missing pod: %v", err)
	}

	// The plugin going away: its devices stay in capacity, none allocatable.
	close(p2.devices)
	waitFor(t, changed, func() bool { _, a := m2.Capacity(); q := a["example.com/gpu"]; return q.Value() == 0 })
	if c, _ := m2.Capacity(); c.Name("example.com/gpu", resource.DecimalSI).Value() != 2 {
		t.Errorf("capacity after the plugin left = %v, want its 2 devices", c)
	}
}

type fakePods []*v1.Pod

func (f fakePods) ActivePods() []*v1.Pod { return f }
func (f fakePods) PodByName(ns, name string) (*v1.Pod, bool) {
	for _, p := range f {
		if p.Namespace == ns && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// waitFor waits for cond after each change notification (a plugin's stream is asynchronous).
func waitFor(t *testing.T, changed <-chan struct{}, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("condition not reached after 30 s of plugin updates")
		}
	}
}
