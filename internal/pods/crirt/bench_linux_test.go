package crirt

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/testharness/critest"
)

// The benchmarks run inside the systemd sandbox with a private containerd:
//
//	go test -run '^$' -bench . -benchtime 20x ./internal/pods/crirt
//
// BenchmarkPodStart is a one-container pod started through the runtime (SyncPod: pull policy
// check, sandbox, create, start and the status reads around them) until it reports Running;
// BenchmarkRawCRI is the same pod with only RunPodSandbox, CreateContainer and StartContainer.
// The pod slice exists before the timer starts in both, and teardown is not timed.

func benchPod(i int) *v1.Pod {
	p := itPod("bench", fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i), container("main", "trap 'exit 0' TERM; while true; do sleep 1; done"))
	p.Spec.TerminationGracePeriodSeconds = new(int64)
	return p
}

// latencies records each timed start and reports the median and the maximum, which say more
// than the mean when a single start stalls.
type latencies []time.Duration

func (l latencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	s := slices.Clone(l)
	slices.Sort(s)
	b.ReportMetric(float64(s[len(s)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(s[len(s)-1].Microseconds())/1000, "max-ms")
}

func BenchmarkPodStart(b *testing.B) {
	it := newIT(b, critest.Options{})
	rt := it.runtime(b)
	ctx := context.Background()
	var lat latencies
	defer func() { lat.report(b) }()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		pod := benchPod(i)
		slice := it.slice(b, pod)
		b.StartTimer()
		t0 := time.Now()
		st, err := rt.SyncPod(ctx, pod, slice)
		if err != nil || st.ContainerStatuses[0].State.Running == nil {
			b.Fatalf("SyncPod: %v, %+v", err, st.ContainerStatuses)
		}
		lat = append(lat, time.Since(t0))
		b.StopTimer()
		if _, err := rt.KillPod(ctx, pod, 0); err != nil {
			b.Fatal(err)
		}
		if err := rt.Forget(ctx, string(pod.UID)); err != nil {
			b.Fatal(err)
		}
		_ = it.sl.DestroyPod(ctx, string(pod.UID))
		b.StartTimer()
	}
}

func BenchmarkRawCRI(b *testing.B) {
	it := newIT(b, critest.Options{})
	w, rt := it.runtimes(b) // only for the worker's configs and the runtime's gRPC clients
	ctx := context.Background()
	var lat latencies
	defer func() { lat.report(b) }()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		pod := benchPod(i)
		slice := it.slice(b, pod)
		sbCfg, err := w.SandboxConfig(pod, slice.Unit, 0)
		if err != nil {
			b.Fatal(err)
		}
		sbCfg.LogDirectory = rt.podLogDir(pod.Namespace, pod.Name, string(pod.UID))
		cfg, err := w.ContainerConfig(pod, &pod.Spec.Containers[0], 0, testImage, nil)
		if err != nil {
			b.Fatal(err)
		}
		cfg.LogPath = containerLogPath(pod.Spec.Containers[0].Name, 1)
		if err := os.MkdirAll(sbCfg.LogDirectory, 0o755); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		sb, err := rt.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
		if err != nil {
			b.Fatal(err)
		}
		c, err := rt.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: cfg, SandboxConfig: sbCfg})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := rt.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		b.StopTimer()
		if _, err := rt.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
			b.Fatal(err)
		}
		if _, err := rt.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
			b.Fatal(err)
		}
		_ = it.sl.DestroyPod(ctx, string(pod.UID))
		b.StartTimer()
	}
}
