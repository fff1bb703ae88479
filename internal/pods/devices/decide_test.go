package devices

import (
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

func devs(health ...string) map[string]*pluginapi.Device {
	out := map[string]*pluginapi.Device{}
	for i, h := range health {
		id := "dev-" + string(rune('a'+i))
		out[id] = &pluginapi.Device{ID: id, Health: h}
	}
	return out
}

func TestCapacity(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name               string
		resources          map[string]*Resource
		wantCap, wantAlloc map[string]int64
		wantDeleted        []string
	}{
		{"healthy and unhealthy devices: capacity counts both, allocatable the healthy",
			map[string]*Resource{"example.com/gpu": {Devices: devs(pluginapi.Healthy, pluginapi.Unhealthy, pluginapi.Healthy)}},
			map[string]int64{"example.com/gpu": 3}, map[string]int64{"example.com/gpu": 2}, nil},
		{"a plugin gone within the grace period: its devices count as unhealthy",
			map[string]*Resource{"example.com/gpu": {Devices: devs(pluginapi.Healthy, pluginapi.Healthy), Stopped: now.Add(-time.Minute)}},
			map[string]int64{"example.com/gpu": 2}, map[string]int64{"example.com/gpu": 0}, nil},
		{"known from the checkpoint only: zero until the plugin registers again",
			map[string]*Resource{"example.com/gpu": {Devices: map[string]*pluginapi.Device{}, Stopped: now}},
			map[string]int64{"example.com/gpu": 0}, map[string]int64{"example.com/gpu": 0}, nil},
		{"a plugin gone longer than the grace period: dropped, reported once at zero",
			map[string]*Resource{"example.com/gpu": {Devices: devs(pluginapi.Healthy), Stopped: now.Add(-StopGracePeriod - time.Second)},
				"example.com/nic": {Devices: devs(pluginapi.Healthy)}},
			map[string]int64{"example.com/nic": 1, "example.com/gpu": 0}, map[string]int64{"example.com/nic": 1, "example.com/gpu": 0}, []string{"example.com/gpu"}},
		{"no plugin", map[string]*Resource{}, map[string]int64{}, map[string]int64{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			capacity, alloc, deleted := Capacity(tt.resources, now)
			count := func(rl v1.ResourceList) map[string]int64 {
				out := map[string]int64{}
				for n, q := range rl {
					out[string(n)] = q.Value()
				}
				return out
			}
			if got := count(capacity); !reflect.DeepEqual(got, tt.wantCap) {
				t.Errorf("capacity = %v, want %v", got, tt.wantCap)
			}
			if got := count(alloc); !reflect.DeepEqual(got, tt.wantAlloc) {
				t.Errorf("allocatable = %v, want %v", got, tt.wantAlloc)
			}
			if !reflect.DeepEqual(deleted, tt.wantDeleted) {
				t.Errorf("deleted = %v, want %v", deleted, tt.wantDeleted)
			}
		})
	}
}

func TestPlanAndChoose(t *testing.T) {
	three := &Resource{Devices: devs(pluginapi.Healthy, pluginapi.Healthy, pluginapi.Healthy)}
	tests := []struct {
		name      string
		r         *Resource
		need      Need
		inUse     map[string]bool
		preferred []string
		want      []string
		wantErr   string
	}{
		{"free devices in order", three, Need{Required: 2}, nil, nil, []string{"dev-a", "dev-b"}, ""},
		{"devices in use are skipped", three, Need{Required: 2}, map[string]bool{"dev-a": true}, nil, []string{"dev-b", "dev-c"}, ""},
		{"the plugin's preference first", three, Need{Required: 1}, nil, []string{"dev-c"}, []string{"dev-c"}, ""},
		{"a preference naming a device in use or unknown is passed over", three, Need{Required: 2}, map[string]bool{"dev-c": true},
			[]string{"dev-c", "dev-x", "dev-b"}, []string{"dev-a", "dev-b"}, ""},
		{"an init container's devices are reused first", three, Need{Required: 2, Reusable: []string{"dev-c"}},
			map[string]bool{"dev-c": true}, nil, []string{"dev-a", "dev-c"}, ""},
		{"too few free devices: the kubelet's words", three, Need{Required: 3}, map[string]bool{"dev-b": true}, nil, nil,
			"requested number of devices unavailable for example.com/gpu. Requested: 3, Available: 2"},
		{"no plugin registered the resource", nil, Need{Required: 1}, nil, nil, nil, "cannot allocate unregistered device example.com/gpu"},
		{"only unhealthy devices", &Resource{Devices: devs(pluginapi.Unhealthy)}, Need{Required: 1}, nil, nil, nil,
			"no healthy devices present; cannot allocate unhealthy devices example.com/gpu"},
		{"the plugin went away", &Resource{Devices: devs(pluginapi.Healthy), Stopped: time.Now()}, Need{Required: 1}, nil, nil, nil,
			"no healthy devices present; cannot allocate unhealthy devices example.com/gpu"},
		{"the container has its devices: nothing to do, even before its plugin is back", nil,
			Need{Required: 1, Have: []string{"dev-a"}}, nil, nil, nil, ""},
		{"a container whose request changed", three, Need{Required: 2, Have: []string{"dev-a"}}, nil, nil, nil,
			`container changed request for resource "example.com/gpu" from 1 to 2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := Plan("example.com/gpu", tt.r, tt.need, tt.inUse)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Plan error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			if plan.Needed == 0 && len(plan.Chosen) == 0 {
				if tt.want != nil {
					t.Fatalf("Plan: nothing to allocate, want %v", tt.want)
				}
				return
			}
			if got := Choose(plan, tt.preferred); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Choose = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMergeRunOptions(t *testing.T) {
	allocs := []Allocation{
		{Resource: "example.com/nic", Response: &pluginapi.ContainerAllocateResponse{
			Envs:        map[string]string{"SHARED": "nic", "NIC": "1"},
			Mounts:      []*pluginapi.Mount{{ContainerPath: "/dev/shared", HostPath: "/nic"}},
			Annotations: map[string]string{"a": "nic"},
			CdiDevices:  []*pluginapi.CDIDevice{{Name: "vendor.com/nic=0"}, {Name: "vendor.com/gpu=0"}},
		}},
		{Resource: "example.com/gpu", Response: &pluginapi.ContainerAllocateResponse{
			Envs:        map[string]string{"SHARED": "gpu", "GPU": "0"},
			Mounts:      []*pluginapi.Mount{{ContainerPath: "/dev/shared", HostPath: "/gpu"}, {ContainerPath: "/opt/gpu", HostPath: "/opt/gpu", ReadOnly: true}},
			Devices:     []*pluginapi.DeviceSpec{{ContainerPath: "/dev/gpu0", HostPath: "/dev/gpu0", Permissions: "rw"}},
			Annotations: map[string]string{"a": "gpu"},
			CdiDevices:  []*pluginapi.CDIDevice{{Name: "vendor.com/gpu=0"}},
		}},
	}
	got := MergeRunOptions(allocs)
	want := &RunOptions{
		Envs:        []EnvVar{{"GPU", "0"}, {"SHARED", "gpu"}, {"NIC", "1"}},
		Mounts:      []*pluginapi.Mount{allocs[0].Response.Mounts[0], allocs[0].Response.Mounts[1]},
		Devices:     []*pluginapi.DeviceSpec{allocs[0].Response.Devices[0]},
		Annotations: []EnvVar{{"a", "gpu"}},
		CDIDevices:  []string{"vendor.com/gpu=0", "vendor.com/nic=0"},
	}
	// MergeRunOptions sorted allocs by resource: gpu first.
	if allocs[0].Resource != "example.com/gpu" {
		t.Fatalf("allocations not sorted by resource: %v", allocs[0].Resource)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MergeRunOptions =\n%+v\nwant\n%+v", got, want)
	}
}

func TestRequests(t *testing.T) {
	c := &v1.Container{Resources: v1.ResourceRequirements{Limits: v1.ResourceList{
		"example.com/gpu": resource.MustParse("2"), "example.com/other": resource.MustParse("1"), v1.ResourceCPU: resource.MustParse("1")}}}
	got := Requests(c, func(n string) bool { return n == "example.com/gpu" })
	if want := map[string]int{"example.com/gpu": 2}; !reflect.DeepEqual(got, want) {
		t.Errorf("Requests = %v, want %v", got, want)
	}
}

func TestAdmissionAllocatable(t *testing.T) {
	base := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), "example.com/gpu": resource.MustParse("0")}
	tests := []struct {
		name       string
		hasDevices bool
		allocated  map[string]int
		want       int64
	}{
		{"a new pod sees allocatable as it is", false, map[string]int{"example.com/gpu": 2}, 0},
		{"a pod holding devices: allocatable at least what is held", true, map[string]int{"example.com/gpu": 2}, 2},
		{"allocatable above what is held stays", true, map[string]int{"example.com/gpu": 0}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AdmissionAllocatable(base, tt.hasDevices, tt.allocated)
			q := got["example.com/gpu"]
			if q.Value() != tt.want {
				t.Errorf("example.com/gpu = %d, want %d", q.Value(), tt.want)
			}
			if c := got[v1.ResourceCPU]; c.String() != "2" {
				t.Errorf("cpu changed: %s", c.String())
			}
		})
	}
	if q := base["example.com/gpu"]; q.Value() != 0 || !strings.Contains(q.String(), "0") {
		t.Errorf("base modified: %v", base)
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	path := t.TempDir() + "/" + CheckpointFile
	allocs := []Allocation{{PodUID: "uid-1", Container: "c", Resource: "example.com/gpu", DeviceIDs: map[int64][]string{-1: {"dev-a"}, 0: {"dev-b"}},
		Response: &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"GPU": "a"}, Mounts: []*pluginapi.Mount{{ContainerPath: "/x", HostPath: "/y"}}}}}
	if err := WriteCheckpoint(path, allocs, map[string][]string{"example.com/gpu": {"dev-a", "dev-b"}}); err != nil {
		t.Fatal(err)
	}
	got, registered, err := ReadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].PodUID != "uid-1" || got[0].Container != "c" || !reflect.DeepEqual(got[0].IDs(), []string{"dev-a", "dev-b"}) ||
		got[0].Response.GetEnvs()["GPU"] != "a" || got[0].Response.GetMounts()[0].GetHostPath() != "/y" {
		t.Errorf("read back %+v", got)
	}
	if !reflect.DeepEqual(registered, []string{"example.com/gpu"}) {
		t.Errorf("registered = %v", registered)
	}
	// A checkpoint changed behind the checksum's back is refused, naming the file.
	corruptCheckpoint(t, path)
	if _, _, err := ReadCheckpoint(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("corrupt checkpoint: error = %v, want one naming %s", err, path)
	}
	if a, r, err := ReadCheckpoint(path + ".missing"); err != nil || a != nil || r != nil {
		t.Errorf("missing checkpoint: %v %v %v, want nothing", a, r, err)
	}
}
