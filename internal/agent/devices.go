package agent

import (
	"context"
	"log/slog"
	"path/filepath"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/devices"
	"github.com/slicelet/slicelet/internal/pods/worker"
)

// maxSocketPath is the longest unix socket path (sun_path less its NUL).
const maxSocketPath = 107

// newDevices builds the device manager on the configured plugin directory; nil (logged) when
// the directory's registration socket cannot have its path (a state directory too deep for a
// defaulted plugin directory): the node then runs without device plugins. onChange is told
// when the devices' capacity may have changed.
func newDevices(cfg *config.Config, onChange func(), log *slog.Logger) *devices.Manager {
	dir := cfg.DevicePluginDir()
	if p := filepath.Join(dir, devices.KubeletSocket); len(p) > maxSocketPath {
		log.Error("device plugins off: the registration socket's path is longer than a unix socket's", "socket", p)
		return nil
	}
	return devices.New(devices.Options{Dir: dir, OnChange: onChange, Logger: log.With("component", "devices")})
}

// startDevices serves the registration socket and the PodResources API; what fails is logged
// and the node runs without it (pods not asking for devices are not affected). The returned
// function stops both.
func startDevices(m *devices.Manager, cfg *config.Config, ctrl *pods.Controller, log *slog.Logger) func() {
	if m == nil {
		return func() {}
	}
	if err := m.Start(); err != nil {
		log.Error("device plugins off", "error", err)
		return func() {}
	}
	stop := m.Stop
	sock := cfg.PodResourcesSocket()
	if len(sock) > maxSocketPath {
		log.Error("pod resources API off: its socket's path is longer than a unix socket's", "socket", sock)
		return stop
	}
	srv, err := devices.ServePodResources(sock, devices.NewPodResources(m, activePods{ctrl}), log.With("component", "podresources"))
	if err != nil {
		log.Error("pod resources API off", "error", err)
		return stop
	}
	return func() { srv.Stop(); stop() }
}

// activePods are the controller's pods the PodResources API reports: those not in a terminal
// phase.
type activePods struct{ ctrl *pods.Controller }

func (a activePods) ActivePods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range a.ctrl.Pods() {
		if p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed {
			out = append(out, &p)
		}
	}
	return out
}

func (a activePods) PodByName(namespace, name string) (*v1.Pod, bool) {
	p, ok := a.ctrl.Pod(namespace, name)
	return &p, ok
}

// withDevices returns rl plus the devices' resources of m (none when m is nil).
func withDevices(rl v1.ResourceList, m *devices.Manager, allocatable bool) v1.ResourceList {
	if m == nil {
		return rl
	}
	capacity, alloc := m.Capacity()
	add := capacity
	if allocatable {
		add = alloc
	}
	out := rl.DeepCopy()
	for name, q := range add {
		out[name] = q
	}
	return out
}

// deviceAllocator is the controller's Allocator over the device manager: a pod of the
// manifest directory or the local API is static (no scheduler checked its extended
// resources).
type deviceAllocator struct{ m *devices.Manager }

func (a deviceAllocator) Allocate(pod *v1.Pod, active []*v1.Pod, ready bool) (bool, string, string) {
	static := pod.Annotations[pods.AnnotationSource] != pods.SourceCluster
	return a.m.Admit(context.Background(), pod, static, active, ready)
}

// deviceRunOptions is the worker's Devices over the device manager.
type deviceRunOptions struct{ m *devices.Manager }

func (d deviceRunOptions) RunOptions(ctx context.Context, pod *v1.Pod, c *v1.Container) (*worker.DeviceRunOptions, error) {
	o, err := d.m.RunOptions(ctx, pod, c)
	if err != nil {
		return nil, err
	}
	out := &worker.DeviceRunOptions{CDIDevices: o.CDIDevices}
	for _, e := range o.Envs {
		out.Envs = append(out.Envs, v1.EnvVar{Name: e.Name, Value: e.Value})
	}
	for _, m := range o.Mounts {
		out.Mounts = append(out.Mounts, worker.DeviceMount{ContainerPath: m.ContainerPath, HostPath: m.HostPath, ReadOnly: m.ReadOnly})
	}
	for _, dv := range o.Devices {
		out.Devices = append(out.Devices, worker.DeviceNode{ContainerPath: dv.ContainerPath, HostPath: dv.HostPath, Permissions: dv.Permissions})
	}
	if len(o.Annotations) > 0 {
		out.Annotations = map[string]string{}
		for _, a := range o.Annotations {
			out.Annotations[a.Name] = a.Value
		}
	}
	return out, nil
}
