package cluster

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/slicelet/slicelet/internal/pods"
)

func TestPodReferences(t *testing.T) {
	ref := func(n string) v1.LocalObjectReference { return v1.LocalObjectReference{Name: n} }
	tests := []struct {
		name   string
		mutate func(*v1.Pod)
		want   References
	}{
		{"nothing", func(*v1.Pod) {}, References{}},
		{"volumes", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{
				{Name: "a", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: ref("cm-vol")}}},
				{Name: "b", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s-vol"}}},
				{Name: "c", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
					{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}},
					{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: ref("kube-root-ca.crt")}},
					{Secret: &v1.SecretProjection{LocalObjectReference: ref("s-proj")}},
				}}}},
				{Name: "d", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			}
		}, References{ConfigMaps: []string{"cm-vol", "kube-root-ca.crt"}, Secrets: []string{"s-vol", "s-proj"}}},
		{"env of every container", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "init", EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: ref("s-init")}}}}}
			p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: ref("cm-from")}}}
			p.Spec.Containers[0].Env = []v1.EnvVar{
				{Name: "A", Value: "literal"},
				{Name: "B", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: ref("cm-key"), Key: "k"}}},
				{Name: "C", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: ref("s-key"), Key: "k"}}},
				{Name: "D", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			}
		}, References{ConfigMaps: []string{"cm-from", "cm-key"}, Secrets: []string{"s-init", "s-key"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := PodReferences(apiPod("p", tc.mutate))
			if !slices.Equal(got.ConfigMaps, tc.want.ConfigMaps) || !slices.Equal(got.Secrets, tc.want.Secrets) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestRegisterRefetches: a new pod (or a new version of one) has its objects fetched afresh,
// within their TTL; a pod seen before does not.
func TestRegisterRefetches(t *testing.T) {
	cs := fake.NewClientset(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "conf"}})
	o := NewObjects(objectClients(cs), clocktesting.NewFakeClock(t0))
	pod := apiPod("web", func(p *v1.Pod) {
		p.Spec.Volumes = []v1.Volume{{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "conf"}}}}}
	})
	run := []pods.Desired{{Pod: pod}}
	steps := []struct {
		name     string
		register []pods.Desired
		want     int // gets so far
	}{
		{"first use", nil, 1},
		{"within the TTL", nil, 1},
		{"the pod registered", run, 2},
		{"the same pod again", run, 2},
		{"a new version of the pod", []pods.Desired{{Pod: apiPod("web", func(p *v1.Pod) { p.ResourceVersion = "2"; p.Spec.Volumes = pod.Spec.Volumes })}}, 3},
	}
	for _, st := range steps {
		if st.register != nil {
			o.register(st.register)
		}
		if _, err := o.ConfigMap("default", "conf"); err != nil {
			t.Fatal(err)
		}
		if n := gets(cs, "configmaps"); n != st.want {
			t.Errorf("%s: %d gets, want %d", st.name, n, st.want)
		}
	}
}
