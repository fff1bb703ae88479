package crirt

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// BenchmarkSyncPodFake measures the runtime's own cost over an in-process fake CRI server (gRPC
// on a unix socket, no containers): "start" is a first SyncPod (sandbox, image check, create,
// start, status reads), "steady" a resync of a running pod (two lists, no status call).
func BenchmarkSyncPodFake(b *testing.B) {
	for _, mode := range []string{"start", "steady"} {
		b.Run(mode, func(b *testing.B) {
			e := newBenchEnv(b)
			pod := fakePod("steady", v1.RestartPolicyAlways, app("main"))
			if mode == "steady" {
				if _, err := e.rt.SyncPod(b.Context(), pod, testSlice); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				p := pod
				if mode == "start" {
					p = fakePod(fmt.Sprintf("u%d", i), v1.RestartPolicyAlways, app("main"))
				}
				st, err := e.rt.SyncPod(b.Context(), p, testSlice)
				if err != nil || st.ContainerStatuses[0].State.Running == nil {
					b.Fatalf("SyncPod: %v %+v", err, st.ContainerStatuses)
				}
			}
		})
	}
}

// BenchmarkRelistIdle is one relist of an idle node of 110 running pods over the fake CRI
// server: the controller's once-a-second ListContainers and ListPodSandbox of every pod, their
// decoding and the worker's comparison with what each pod's last sync saw. Its allocations
// per op (-benchmem) are the relist's share of the steady state's garbage.
func BenchmarkRelistIdle(b *testing.B) {
	e := newBenchEnv(b)
	for i := range 110 {
		pod := fakePod(fmt.Sprintf("idle-%03d", i), v1.RestartPolicyAlways, app("main"))
		pod.Name = fmt.Sprintf("web-%03d", i)
		if st, err := e.rt.SyncPod(b.Context(), pod, testSlice); err != nil || st.ContainerStatuses[0].State.Running == nil {
			b.Fatalf("SyncPod %s: %v", pod.Name, err)
		}
	}
	if _, err := e.rt.Relist(b.Context(), nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := e.rt.Relist(b.Context(), nil)
		if err != nil || len(res.Due) != 0 {
			b.Fatalf("relist: due %v, %v", res.Due, err)
		}
	}
}
