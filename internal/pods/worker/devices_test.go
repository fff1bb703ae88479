package worker

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

type fakeDevices struct {
	opts *DeviceRunOptions
	err  error
}

func (f fakeDevices) RunOptions(context.Context, *v1.Pod, *v1.Container) (*DeviceRunOptions, error) {
	return f.opts, f.err
}

// TestDevicesInContainerConfig: the devices' env comes before the container's (which wins),
// their mounts before the volumes', their device nodes, CDI devices and annotations are in the
// CRI configuration; a device manager error holds the container in CreateContainerConfigError.
func TestDevicesInContainerConfig(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRT()
		devs := &DeviceRunOptions{
			Envs:        []v1.EnvVar{{Name: "GPU", Value: "0"}, {Name: "MODE", Value: "device"}},
			Mounts:      []DeviceMount{{ContainerPath: "/opt/gpu", HostPath: "/opt/gpu", ReadOnly: true}},
			Devices:     []DeviceNode{{ContainerPath: "/dev/gpu0", HostPath: "/dev/gpu0", Permissions: "rw"}},
			Annotations: map[string]string{"vendor.com/gpu": "0", AnnotationRestartCount: "99"},
			CDIDevices:  []string{"vendor.com/gpu=0"},
		}
		w, _ := newTestWorkerWith(t, f, "", func(o *Options) { o.Devices = fakeDevices{opts: devs} })
		pod := testPod("dv-1", v1.RestartPolicyAlways, "app")
		pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "MODE", Value: "container"}}
		mustSync(t, w, pod)
		cfg := f.onlyConfig(t)
		var env []string
		for _, e := range cfg.Envs {
			env = append(env, e.Key+"="+string(e.Value))
		}
		if len(env) < 3 || env[0] != "GPU=0" || env[1] != "MODE=device" || env[2] != "MODE=container" {
			t.Errorf("envs %v: want the devices' first, the container's after them", env)
		}
		if len(cfg.Mounts) == 0 || cfg.Mounts[0].ContainerPath != "/opt/gpu" {
			t.Errorf("mounts %v: want the device mount first", cfg.Mounts)
		}
		if len(cfg.Devices) != 1 || cfg.Devices[0].HostPath != "/dev/gpu0" || len(cfg.CDIDevices) != 1 || cfg.CDIDevices[0].Name != "vendor.com/gpu=0" {
			t.Errorf("devices %v, CDI devices %v", cfg.Devices, cfg.CDIDevices)
		}
		if cfg.Annotations["vendor.com/gpu"] != "0" || cfg.Annotations[AnnotationRestartCount] != "0" {
			t.Errorf("annotations %v: want the device's, and slicelet's own restart count", cfg.Annotations)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		err := errors.New("endpoint not found in cache for a registered resource: example.com/gpu")
		w, _ := newTestWorkerWith(t, newFakeRT(), "", func(o *Options) { o.Devices = fakeDevices{err: err} })
		st := mustSync(t, w, testPod("dv-2", v1.RestartPolicyAlways, "app"))
		if wt := st.ContainerStatuses[0].State.Waiting; wt == nil || wt.Reason != lifecycle.ReasonCreateContainerConfigError ||
			wt.Message != "container app: devices: "+err.Error() {
			t.Errorf("state %+v, want CreateContainerConfigError with the device manager's error", st.ContainerStatuses[0].State)
		}
	})
}

// onlyConfig is the CRI configuration of the one container created.
func (f *fakeRT) onlyConfig(t *testing.T) *runtimeapi.ContainerConfig {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.configs) != 1 {
		t.Fatalf("%d containers created, want 1", len(f.configs))
	}
	for _, c := range f.configs {
		return c
	}
	return nil
}
