package cluster

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/pods"
)

func apiPod(name string, mutate ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Spec: v1.PodSpec{NodeName: "node-1", ServiceAccountName: "default", RestartPolicy: v1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](30), DNSPolicy: v1.DNSClusterFirst, SchedulerName: "default-scheduler",
			Containers: []v1.Container{{Name: "c", Image: "busybox", Command: []string{"sleep", "1d"}, ImagePullPolicy: v1.PullIfNotPresent,
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile}}},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func TestPlanPods(t *testing.T) {
	deleting := metav1.NewTime(t0)
	in := []*v1.Pod{
		apiPod("web"),
		apiPod("mirror", func(p *v1.Pod) { p.Annotations = map[string]string{v1.MirrorPodAnnotationKey: "h"} }),
		apiPod("done", func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded }),
		apiPod("finished", func(p *v1.Pod) { p.Status.Phase = v1.PodFailed }),
		apiPod("going", func(p *v1.Pod) { p.DeletionTimestamp = &deleting }),
		apiPod("token", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "kube-api-access", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
				Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}}}}}}}
		}),
		apiPod("bundle", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "ca", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "ca-bundle:1"}}}}
		}),
		apiPod("bad-name", func(p *v1.Pod) { p.Spec.Containers[0].Name = "Not_A_Name" }),
	}
	// "finished" ran here and the node still has it: it stays (its logs too) until deleted;
	// "done" is not the node's (a restarted slicelet): never run again.
	plan := PlanPods(in, map[types.UID]bool{"uid-finished": true}, ValidateAPIPod(manifest.Validate))
	// Sorted by name; a service account and its token volume are no refusal in cluster mode.
	if len(plan.Run) != 3 || plan.Run[0].Pod.Name != "finished" || plan.Run[1].Pod.Name != "token" || plan.Run[2].Pod.Name != "web" {
		t.Fatalf("run %+v, want finished, token and web", plan.Run)
	}
	for _, d := range plan.Run {
		if d.Source != pods.SourceCluster || d.Pod.Annotations[pods.AnnotationSource] != pods.SourceCluster {
			t.Errorf("%s: source %q, annotation %q, want the cluster source marked on the pod", d.Pod.Name, d.Source, d.Pod.Annotations[pods.AnnotationSource])
		}
	}
	if in[0].Annotations != nil {
		t.Errorf("the API pod itself was changed: %v", in[0].Annotations)
	}
	if _, ok := plan.Mirrors["default/mirror"]; !ok || len(plan.Mirrors) != 1 {
		t.Errorf("mirrors %v", plan.Mirrors)
	}
	if len(plan.Deleting) != 1 || plan.Deleting[0].Name != "going" {
		t.Errorf("deleting %v", plan.Deleting)
	}
	tests := []struct {
		uid  types.UID
		want string
	}{
		{"uid-bundle", "spec.volumes[0].image"},
		{"uid-bad-name", "spec.containers[0].name"},
	}
	for _, tc := range tests {
		if msg := plan.Refused[tc.uid]; !strings.Contains(msg, tc.want) {
			t.Errorf("refusal of %s: %q, want the field path %s", tc.uid, msg, tc.want)
		}
	}
	if len(plan.Refused) != len(tests) {
		t.Errorf("refused %v", plan.Refused)
	}
}

// TestValidateAPIPod: a pod from the API server is refused for what a cluster node cannot do,
// with the reason that holds there, never a static pods' reason; the rest of the validation
// stays.
func TestValidateAPIPod(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1.Pod)
		want   []string // substrings, in order; none: accepted
		never  string
	}{
		{name: "served in cluster mode", mutate: func(p *v1.Pod) {
			p.GenerateName = "web-"
			p.Spec.DeprecatedServiceAccount = "default"
			p.Spec.RuntimeClassName = ptr.To("gvisor")
			p.Spec.Containers[0].Stdin, p.Spec.Containers[0].StdinOnce, p.Spec.Containers[0].TTY = true, true, true
		}},
		{name: "claims are served (their volumes from the API server)", mutate: func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
				{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}}}
		}},
		{name: "a volume the node cannot mount", mutate: func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "nfs", Path: "/"}}}}
			p.Spec.Containers[0].VolumeDevices = []v1.VolumeDevice{{Name: "data", DevicePath: "/dev/x"}}
		}, want: []string{"spec.volumes[0].nfs: Forbidden: needs a volume plugin slicelet does not have"}, never: "static pods"},
		{name: "a raw block device from a claim is served", mutate: func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "disk", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "disk"}}}}
			p.Spec.Containers[0].VolumeDevices = []v1.VolumeDevice{{Name: "disk", DevicePath: "/dev/xvda"}}
		}},
		{name: "an inline CSI volume: its driver publishes it", mutate: func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "x"}}}}
		}},
		{name: "pull secrets and resource claims", mutate: func(p *v1.Pod) {
			p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "regcred"}}
			p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu"}}
		}, want: []string{"spec.imagePullSecrets: Forbidden: pulling images with credentials", "spec.resourceClaims: Forbidden: dynamic resource allocation"}, never: "static pods"},
		{name: "other problems stay", mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Name = "Not_A_Name"
			p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "nfs", Path: "/"}}}}
		}, want: []string{"spec.containers[0].name", "spec.volumes[0].nfs: Forbidden: needs a volume plugin"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := ValidateAPIPod(manifest.Validate)(apiPod("x", tc.mutate))
			got := ""
			if len(errs) > 0 {
				got = errs.ToAggregate().Error()
			}
			if len(tc.want) == 0 && got != "" {
				t.Fatalf("refused: %s", got)
			}
			rest := got
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("errors %q, want %q (in this order: %q)", got, w, tc.want)
				}
				rest = rest[i+len(w):]
			}
			if tc.never != "" && strings.Contains(got, tc.never) {
				t.Errorf("errors %q say %q, which is not true of an API pod", got, tc.never)
			}
		})
	}
}

func TestFinalDeletes(t *testing.T) {
	a, b := apiPod("a"), apiPod("b")
	tests := []struct {
		name    string
		running map[types.UID]bool
		adopted bool
		want    []string
	}{
		{name: "before adoption nothing", running: map[types.UID]bool{}, adopted: false},
		{name: "a still running", running: map[types.UID]bool{"uid-a": true}, adopted: true, want: []string{"b"}},
		{name: "both stopped", running: map[types.UID]bool{}, adopted: true, want: []string{"a", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := FinalDeletes([]*v1.Pod{a, b}, tc.running, tc.adopted)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d pods, want %v", len(got), tc.want)
			}
			for i := range got {
				if got[i].Name != tc.want[i] {
					t.Errorf("pod %d: %s, want %s", i, got[i].Name, tc.want[i])
				}
			}
		})
	}
}

func TestDeletionGrace(t *testing.T) {
	tests := []struct {
		name string
		pod  *v1.Pod
		want time.Duration
	}{
		{name: "the deletion's grace", pod: apiPod("a", func(p *v1.Pod) { p.DeletionGracePeriodSeconds = ptr.To[int64](5) }), want: 5 * time.Second},
		{name: "the spec's", pod: apiPod("a"), want: 30 * time.Second},
		{name: "the default", pod: apiPod("a", func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = nil }), want: 30 * time.Second},
		{name: "zero", pod: apiPod("a", func(p *v1.Pod) { p.DeletionGracePeriodSeconds = ptr.To[int64](0) }), want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := DeletionGrace(tc.pod); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func staticPod(name, uid string) v1.Pod {
	p := apiPod(name).DeepCopy()
	p.UID = types.UID(uid)
	p.Spec.NodeName = ""
	p.Annotations = map[string]string{pods.AnnotationSource: pods.SourceFile}
	return *p
}

func mirrorOf(name, hash string, mutate ...func(*v1.Pod)) *v1.Pod {
	return apiPod(name, append([]func(*v1.Pod){func(p *v1.Pod) { p.Annotations = map[string]string{v1.MirrorPodAnnotationKey: hash} }}, mutate...)...)
}

func TestPlanMirrors(t *testing.T) {
	gone := metav1.NewTime(t0)
	tests := []struct {
		name       string
		static     []v1.Pod
		mirrors    []*v1.Pod
		taken      []string
		wantCreate []string
		wantDelete []string
	}{
		{name: "a static pod without a mirror gets one", static: []v1.Pod{staticPod("web", "h1")}, wantCreate: []string{"web"}},
		{name: "an up-to-date mirror stays", static: []v1.Pod{staticPod("web", "h1")}, mirrors: []*v1.Pod{mirrorOf("web", "h1")}},
		{name: "a mirror of an older manifest is deleted", static: []v1.Pod{staticPod("web", "h2")}, mirrors: []*v1.Pod{mirrorOf("web", "h1")}, wantDelete: []string{"web"}},
		{name: "a mirror being deleted is waited for", static: []v1.Pod{staticPod("web", "h2")},
			mirrors: []*v1.Pod{mirrorOf("web", "h1", func(p *v1.Pod) { p.DeletionTimestamp = &gone })}},
		{name: "a mirror without its static pod is deleted", mirrors: []*v1.Pod{mirrorOf("old", "h1")}, wantDelete: []string{"old"}},
		{name: "a name an API pod holds gets no mirror", static: []v1.Pod{staticPod("web", "h1")}, taken: []string{"default/web"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mirrors := map[string]*v1.Pod{}
			for _, m := range tc.mirrors {
				mirrors[m.Namespace+"/"+m.Name] = m
			}
			taken := map[string]bool{}
			for _, k := range tc.taken {
				taken[k] = true
			}
			act := PlanMirrors(tc.static, mirrors, taken, "node-1", "node-uid")
			names := func(ps []*v1.Pod) (out []string) {
				for _, p := range ps {
					out = append(out, p.Name)
				}
				return out
			}
			if got := names(act.Create); strings.Join(got, ",") != strings.Join(tc.wantCreate, ",") {
				t.Errorf("create %v, want %v", got, tc.wantCreate)
			}
			if got := names(act.Delete); strings.Join(got, ",") != strings.Join(tc.wantDelete, ",") {
				t.Errorf("delete %v, want %v", got, tc.wantDelete)
			}
			for _, m := range act.Create {
				if m.Annotations[v1.MirrorPodAnnotationKey] != "h1" || m.Spec.NodeName != "node-1" || m.UID != "" ||
					len(m.OwnerReferences) != 1 || m.OwnerReferences[0].Kind != "Node" || m.OwnerReferences[0].UID != "node-uid" {
					t.Errorf("mirror pod %+v", m.ObjectMeta)
				}
			}
		})
	}
}
