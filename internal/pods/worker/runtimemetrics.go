package worker

import (
	"context"
	"io"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/internal/pods"
)

// RuntimeMetrics counts the runtime's operations as the kubelet's instrumented runtime
// service does (pkg/kubelet/kuberuntime/instrumented_services.go): one count and duration per
// call, by the CRI call's name in snake case, and the failed ones.
type RuntimeMetrics interface {
	RuntimeOperation(operation string, d time.Duration, failed bool)
}

// observedRuntime is a Runtime whose calls are counted into RuntimeMetrics.
type observedRuntime struct {
	Runtime
	m     RuntimeMetrics
	clock clock.PassiveClock
}

// record counts one call that started at start.
func (r observedRuntime) record(op string, start time.Time, err error) {
	r.m.RuntimeOperation(op, r.clock.Since(start), err != nil)
}

func (r observedRuntime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, handler string) (id string, err error) {
	defer func(start time.Time) { r.record("run_podsandbox", start, err) }(r.clock.Now())
	return r.Runtime.RunPodSandbox(ctx, config, handler)
}

func (r observedRuntime) StopPodSandbox(ctx context.Context, id string) (err error) {
	defer func(start time.Time) { r.record("stop_podsandbox", start, err) }(r.clock.Now())
	return r.Runtime.StopPodSandbox(ctx, id)
}

func (r observedRuntime) RemovePodSandbox(ctx context.Context, id string) (err error) {
	defer func(start time.Time) { r.record("remove_podsandbox", start, err) }(r.clock.Now())
	return r.Runtime.RemovePodSandbox(ctx, id)
}

func (r observedRuntime) ListPodSandbox(ctx context.Context, podUID string) (out []Sandbox, err error) {
	defer func(start time.Time) { r.record("list_podsandbox", start, err) }(r.clock.Now())
	return r.Runtime.ListPodSandbox(ctx, podUID)
}

func (r observedRuntime) CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (id string, err error) {
	defer func(start time.Time) { r.record("create_container", start, err) }(r.clock.Now())
	return r.Runtime.CreateContainer(ctx, sandboxID, config, sandboxConfig)
}

func (r observedRuntime) StartContainer(ctx context.Context, id string) (err error) {
	defer func(start time.Time) { r.record("start_container", start, err) }(r.clock.Now())
	return r.Runtime.StartContainer(ctx, id)
}

func (r observedRuntime) StopContainer(ctx context.Context, id string, grace time.Duration) (err error) {
	defer func(start time.Time) { r.record("stop_container", start, err) }(r.clock.Now())
	return r.Runtime.StopContainer(ctx, id, grace)
}

func (r observedRuntime) UpdateContainerResources(ctx context.Context, id string, res *runtimeapi.LinuxContainerResources) (err error) {
	defer func(start time.Time) { r.record("update_container", start, err) }(r.clock.Now())
	return r.Runtime.UpdateContainerResources(ctx, id, res)
}

func (r observedRuntime) RemoveContainer(ctx context.Context, id string) (err error) {
	defer func(start time.Time) { r.record("remove_container", start, err) }(r.clock.Now())
	return r.Runtime.RemoveContainer(ctx, id)
}

func (r observedRuntime) ListContainers(ctx context.Context, podUID string) (out []Container, err error) {
	defer func(start time.Time) { r.record("list_containers", start, err) }(r.clock.Now())
	return r.Runtime.ListContainers(ctx, podUID)
}

func (r observedRuntime) ContainerStatus(ctx context.Context, id string) (out ContainerStatus, err error) {
	defer func(start time.Time) { r.record("container_status", start, err) }(r.clock.Now())
	return r.Runtime.ContainerStatus(ctx, id)
}

func (r observedRuntime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (out ExecResult, err error) {
	defer func(start time.Time) { r.record("exec_sync", start, err) }(r.clock.Now())
	return r.Runtime.ExecSync(ctx, id, cmd, timeout)
}

func (r observedRuntime) Logs(ctx context.Context, pod *v1.Pod, container string, opts pods.LogOptions, w io.Writer) error {
	return r.Runtime.Logs(ctx, pod, container, opts, w)
}

// observedImages is an ImageService whose calls are counted into RuntimeMetrics.
type observedImages struct {
	ImageService
	r observedRuntime
}

func (i observedImages) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec) (id string, err error) {
	defer func(start time.Time) { i.r.record("image_status", start, err) }(i.r.clock.Now())
	return i.ImageService.ImageStatus(ctx, image)
}

func (i observedImages) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, sandboxConfig *runtimeapi.PodSandboxConfig) (ref string, size uint64, err error) {
	defer func(start time.Time) { i.r.record("pull_image", start, err) }(i.r.clock.Now())
	return i.ImageService.PullImage(ctx, image, sandboxConfig)
}
