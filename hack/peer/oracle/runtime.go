package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"strconv"
	"time"

	cadvisorapi "github.com/google/cadvisor/lib/model"
	noopoteltrace "go.opentelemetry.io/otel/trace/noop"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	kubelettypes "k8s.io/kubelet/pkg/types"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	containertest "k8s.io/kubernetes/pkg/kubelet/container/testing"
	"k8s.io/kubernetes/pkg/kubelet/kuberuntime"
	"k8s.io/kubernetes/pkg/kubelet/logs"
	proberesults "k8s.io/kubernetes/pkg/kubelet/prober/results"

	"github.com/slicelet/slicelet/internal/pods/worker"
)

type noPodState struct{}

func (noPodState) IsPodTerminationRequested(types.UID) bool { return false }
func (noPodState) ShouldPodContentBeRemoved(types.UID) bool { return false }
func (noPodState) ShouldPodRuntimeBeRemoved(types.UID) bool { return false }

type noRecorder struct{}

func (noRecorder) RecordImageStartedPulling(types.UID)              {}
func (noRecorder) RecordImageFinishedPulling(types.UID)             {}
func (noRecorder) RecordInitContainerStarted(types.UID, time.Time)  {}
func (noRecorder) RecordInitContainerFinished(types.UID, time.Time) {}

// runtimeFacts drives the kubelet's runtime manager (kuberuntime.NewKubeGenericRuntimeManager,
// cpuCFSQuota on, 100ms period) through SyncPod against the CRI fake of
// k8s.io/cri-api/pkg/apis/testing, round after round (init containers exit 0 between rounds),
// and reads the container resources it asked the runtime for: "container[c].cri_*" facts for
// every container it created.
//
// Lifecycle hooks are removed from the pod first: they decide none of these facts, and the
// runtime manager would run them for real (a postStart httpGet is an HTTP request to the fake
// sandbox's address, which is no address of this machine; a sleep hook sleeps).
func runtimeFacts(pod *v1.Pod, node nodeSetup, dir string) (facts, error) {
	pod = withoutHooks(pod)
	ctx := context.Background()
	rs := critest.NewFakeRuntimeService()
	is := critest.NewFakeImageService()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	startup := proberesults.NewManager()
	m, _, err := kuberuntime.NewKubeGenericRuntimeManager(ctx, &record.FakeRecorder{},
		proberesults.NewManager(), proberesults.NewManager(), startup,
		dir, dir, &cadvisorapi.MachineInfo{MemoryCapacity: uint64(node.memoryCapacity), NumCores: 4},
		noPodState{}, 110, &containertest.FakeOS{}, &containertest.FakeRuntimeHelper{}, nil,
		flowcontrol.NewBackOff(time.Second, time.Minute), false, nil, 0, 0,
		string(kubeletconfig.NeverVerify), nil, "", "", nil,
		true, metav1.Duration{Duration: 100 * time.Millisecond}, nil,
		rs, is, cm.NewStubContainerManager(), logs.NewStubContainerLogManager(), nil,
		false, "", func() v1.ResourceList { return node.allocatable() }, nil, kubeletconfig.NoneMemoryReservationPolicy,
		noRecorder{}, noopoteltrace.NewTracerProvider(), nil, nil, noRecorder{})
	if err != nil {
		return nil, fmt.Errorf("runtime manager: %w", err)
	}
	backoff := flowcontrol.NewBackOff(time.Second, time.Minute)
	for round := 0; round < len(pod.Spec.InitContainers)+3; round++ {
		// The runtime's view of the pod (its sandboxes and containers), as the kubelet's PLEG
		// would pass it; a new pod has none.
		kp := &kubecontainer.Pod{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
		all, err := m.GetPods(ctx, true)
		if err != nil {
			return nil, fmt.Errorf("pods: %w", err)
		}
		for _, p := range all {
			if p.ID == pod.UID {
				kp = p
			}
		}
		status, err := m.GetPodStatus(ctx, kp)
		if err != nil {
			return nil, fmt.Errorf("pod status: %w", err)
		}
		m.SyncPod(ctx, pod, status, nil, backoff, false)
		rs.Lock()
		for _, c := range rs.Containers {
			if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				continue
			}
			if !isSidecarOrRegular(pod, c.Metadata.Name) {
				c.State, c.ExitCode, c.FinishedAt = runtimeapi.ContainerState_CONTAINER_EXITED, 0, time.Now().UnixNano()
				continue
			}
			// What the prober does for a container without a startup probe: started.
			startup.Set(kubecontainer.ContainerID{Type: critest.FakeRuntimeName, ID: c.Id}, proberesults.Success, pod)
		}
		rs.Unlock()
	}
	f := facts{}
	rs.Lock()
	defer rs.Unlock()
	for _, c := range rs.Containers {
		r := c.LinuxResources
		prefix := "container[" + c.Metadata.Name + "]."
		if isInit(pod, c.Metadata.Name) {
			prefix = "init[" + c.Metadata.Name + "]."
		}
		f[prefix+"cri_cpu_shares"] = strconv.FormatInt(r.GetCpuShares(), 10)
		f[prefix+"cri_cpu_quota"] = strconv.FormatInt(r.GetCpuQuota(), 10)
		f[prefix+"cri_cpu_period"] = strconv.FormatInt(r.GetCpuPeriod(), 10)
		f[prefix+"cri_memory"] = strconv.FormatInt(r.GetMemoryLimitInBytes(), 10)
		f[prefix+"cri_oom_score_adj"] = strconv.FormatInt(r.GetOomScoreAdj(), 10)
		f[prefix+"cri_annotations"] = mapString(c.Annotations)
		f[prefix+"cri_labels"] = mapString(comparableLabels(c.Labels))
	}
	return f, nil
}

// comparableLabels are a container's CRI labels less the pod's name (the kubelet names a static
// pod "<name>-<node>", slicelet keeps its name) and slicelet's own mark.
func comparableLabels(labels map[string]string) map[string]string {
	out := maps.Clone(labels)
	delete(out, kubelettypes.KubernetesPodNameLabel)
	delete(out, worker.LabelManaged)
	return out
}

func isInit(pod *v1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

func isSidecarOrRegular(pod *v1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
		}
	}
	return true
}

// withoutHooks is a copy of pod whose containers have no lifecycle hooks (the stop signal, which
// the runtime manager sends with the container's config, stays).
func withoutHooks(pod *v1.Pod) *v1.Pod {
	pod = pod.DeepCopy()
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if l := list[i].Lifecycle; l != nil {
				l.PostStart, l.PreStop = nil, nil
			}
		}
	}
	return pod
}
