package worker

import (
	"regexp"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// TestKubeletEventMessages: each pod lifecycle event of the worker, by the kubelet's reason
// (pkg/kubelet/events/event.go) and its exact message (v1.37: kuberuntime_container.go,
// kuberuntime_manager.go, prober/prober.go, the volume manager's MountVolume.SetUp error). The
// image events (Pulling, Pulled, ErrImageNeverPull, Failed) are the CRI runtime's
// (internal/pods/crirt TestImagePullPolicies), Evicted the controller's.
func TestKubeletEventMessages(t *testing.T) {
	type scenario func(t *testing.T, f *fakeRT, w *Worker, pod *v1.Pod)
	start := func(t *testing.T, f *fakeRT, w *Worker, pod *v1.Pod) { mustSync(t, w, pod) }
	cases := []struct {
		name   string
		pod    func(*v1.Pod)
		run    scenario
		reason string
		want   string // the message, a regular expression
	}{
		{name: "created", run: start, reason: EventCreated, want: regexp.QuoteMeta("Container created")},
		{name: "started", run: start, reason: EventStarted, want: regexp.QuoteMeta("Container started")},
		{name: "killing on deletion", reason: EventKilling, want: regexp.QuoteMeta("Stopping container app"),
			run: func(t *testing.T, f *fakeRT, w *Worker, pod *v1.Pod) {
				mustSync(t, w, pod)
				if _, err := w.KillPod(t.Context(), pod, time.Second); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "back-off", reason: EventBackOff, want: regexp.QuoteMeta("Back-off restarting failed container app in pod web_default(ev)"),
			run: func(t *testing.T, f *fakeRT, w *Worker, pod *v1.Pod) {
				mustSync(t, w, pod)
				f.exit("ev", "app", 1, lifecycle.ReasonError)
				mustSync(t, w, pod) // the first restart is at once
				f.exit("ev", "app", 1, lifecycle.ReasonError)
				mustSync(t, w, pod)
			}},
		{name: "liveness probe failed", reason: EventUnhealthy, want: regexp.QuoteMeta("Liveness probe failed: ") + `\S+\[/bin/check\]$`,
			pod: func(p *v1.Pod) { p.Spec.Containers[0].LivenessProbe = execProbe(1, 2) },
			run: func(t *testing.T, f *fakeRT, w *Worker, pod *v1.Pod) {
				f.setExecCode(1)
				mustSync(t, w, pod)
				time.Sleep(1500 * time.Millisecond)
				synctest.Wait()
			}},
		{name: "killing on a failed liveness probe", reason: EventKilling, want: regexp.QuoteMeta("Container app failed liveness probe, will be restarted"),
			pod: func(p *v1.Pod) { p.Spec.Containers[0].LivenessProbe = execProbe(1, 2) },
			run: func(t *testing.T, f *fakeRT, w *Worker, pod *v1.Pod) {
				f.setExecCode(1)
				mustSync(t, w, pod)
				time.Sleep(1500 * time.Millisecond)
				synctest.Wait()
				mustSync(t, w, pod)
			}},
		{name: "failed mount", reason: EventFailedMount, want: regexp.QuoteMeta(`MountVolume.SetUp failed for volume "config" : configmap "app-config" not found`),
			pod: func(p *v1.Pod) {
				p.Spec.Volumes = []v1.Volume{{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: ref("app-config")}}}}
			},
			run: start},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeRT()
				w, events := newTestWorkerWith(t, f, "", func(o *Options) { o.Objects = pods.NewObjects() })
				pod := testPod("ev", v1.RestartPolicyAlways, "app")
				if tc.pod != nil {
					tc.pod(pod)
				}
				tc.run(t, f, w, pod)
				got := drain(events)
				typ := v1.EventTypeNormal
				if tc.reason == EventBackOff || tc.reason == EventUnhealthy || tc.reason == EventFailedMount {
					typ = v1.EventTypeWarning
				}
				re := regexp.MustCompile("^" + typ + " " + tc.reason + " " + tc.want + "$")
				if !slices.ContainsFunc(got, re.MatchString) {
					t.Errorf("events %q: want one matching %s", got, re)
				}
			})
		})
	}
}
