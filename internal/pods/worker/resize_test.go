package worker

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestResizeInPlace: a running container whose requests and limits change is updated in place
// (UpdateContainerResources, no restart), once; its status shows the resources and the
// allocated requests (the Pod InPlace Resize conformance specs).
func TestResizeInPlace(t *testing.T) {
	f := newFakeRT()
	w, _ := newTestWorker(t, f, "")
	pod := testPod("rs-1", "", "c1")
	pod.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m")},
	}
	st := mustSync(t, w, pod)
	if r := st.ContainerStatuses[0].Resources; r == nil || !r.Limits.Cpu().Equal(resource.MustParse("200m")) ||
		!st.ContainerStatuses[0].AllocatedResources.Cpu().Equal(resource.MustParse("100m")) {
		t.Fatalf("status resources %+v allocated %v", r, st.ContainerStatuses[0].AllocatedResources)
	}
	resized := pod.DeepCopy()
	resized.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("400m")},
	}
	st = mustSync(t, w, resized)
	mustSync(t, w, resized)
	if n := f.callsTo("UpdateContainerResources"); n != 1 {
		t.Errorf("%d updates, want 1", n)
	}
	if n := f.callsTo("CreateContainer"); n != 1 {
		t.Errorf("%d creates, want 1: a resize restarts nothing", n)
	}
	for id, cfg := range f.configs {
		if q, sh := cfg.Linux.Resources.CpuQuota, cfg.Linux.Resources.CpuShares; q != 40000 || sh != 204 {
			t.Errorf("container %s: quota %d shares %d, want 40000 and 204", id, q, sh)
		}
	}
	cs := st.ContainerStatuses[0]
	if !cs.Resources.Limits.Cpu().Equal(resource.MustParse("400m")) || !cs.AllocatedResources.Cpu().Equal(resource.MustParse("200m")) || cs.RestartCount != 0 {
		t.Errorf("status after the resize: resources %+v allocated %v restarts %d", cs.Resources, cs.AllocatedResources, cs.RestartCount)
	}
}

// TestResizeBelowTheMinimum: a resize whose cgroup values stay the same (both at or below the
// minimum quota) updates nothing; the status shows the new values (the "resize with
// equivalents" conformance spec).
func TestResizeBelowTheMinimum(t *testing.T) {
	f := newFakeRT()
	w, _ := newTestWorker(t, f, "")
	pod := testPod("rs-2", "", "c1")
	pod.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2m")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m")},
	}
	mustSync(t, w, pod)
	resized := pod.DeepCopy()
	resized.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("1m")
	resized.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = resource.MustParse("5m")
	st := mustSync(t, w, resized)
	if n := f.callsTo("UpdateContainerResources"); n != 0 {
		t.Errorf("%d updates, want none", n)
	}
	if cs := st.ContainerStatuses[0]; !cs.Resources.Limits.Cpu().Equal(resource.MustParse("5m")) {
		t.Errorf("status resources %+v", cs.Resources)
	}
}

// TestImageChangeRestarts: a running container whose image changed in the spec is stopped
// with the kubelet's Killing message and started again from the new image, whatever the
// restart policy (computePodActions on a changed container hash).
func TestImageChangeRestarts(t *testing.T) {
	f := newFakeRT()
	w, events := newTestWorkerWith(t, f, "", func(o *Options) { o.Images = presentImages{} })
	pod := testPod("ic-1", v1.RestartPolicyNever, "app")
	pod.Spec.Containers[0].Image = "busybox:1"
	mustSync(t, w, pod)
	drain(events)
	updated := pod.DeepCopy()
	updated.Spec.Containers[0].Image = "busybox:2"
	st := mustSync(t, w, updated)
	cs := st.ContainerStatuses[0]
	if cs.State.Running == nil || cs.RestartCount != 1 || cs.Image != "busybox:2" {
		t.Errorf("status %+v, want the container running again (restart 1) from busybox:2", cs)
	}
	killing := false
	for _, e := range drain(events) {
		killing = killing || e == "Normal Killing Container app definition changed, will be restarted"
	}
	if !killing {
		t.Error("no Killing event for the changed definition")
	}
	mustSync(t, w, updated)
	if n := f.callsTo("CreateContainer"); n != 2 {
		t.Errorf("%d creates, want 2", n)
	}
}
