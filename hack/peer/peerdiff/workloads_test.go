package main

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/hack/peer/peerrun"
)

// TestPodsOfWorkloads: a workload stands for the pod its controller makes from its template,
// with what the controller adds; other kinds stand for none.
func TestPodsOfWorkloads(t *testing.T) {
	const tmpl = `
    template:
      metadata:
        labels: {app: web}
        annotations: {a: b}
      spec:
        containers:
        - name: c
          image: nginx
          resources: {limits: {cpu: 250m}}`
	cases := []struct {
		name, doc string
		want      int
		check     func(t *testing.T, pod *v1.Pod)
	}{
		{name: "Pod", doc: "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: x}]}", want: 1,
			check: func(t *testing.T, pod *v1.Pod) {
				if pod.Name != "p" {
					t.Errorf("name %q", pod.Name)
				}
			}},
		{name: "Deployment", doc: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop, labels: {x: y}}\nspec:" + tmpl, want: 1,
			check: func(t *testing.T, pod *v1.Pod) {
				if pod.Name != "web" || pod.Namespace != "shop" || pod.Labels["app"] != "web" || pod.Labels["x"] != "" || pod.Annotations["a"] != "b" {
					t.Errorf("metadata %+v", pod.ObjectMeta)
				}
				if q := pod.Spec.Containers[0].Resources.Limits[v1.ResourceCPU]; q.String() != "250m" {
					t.Errorf("limits %v", pod.Spec.Containers[0].Resources.Limits)
				}
			}},
		{name: "StatefulSet", doc: `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db-headless
  volumeClaimTemplates:
  - metadata: {name: data}
  template:
    spec:
      containers: [{name: c, image: x, volumeMounts: [{name: data, mountPath: /d}]}]`, want: 1,
			check: func(t *testing.T, pod *v1.Pod) {
				if pod.Name != "db-0" || pod.Spec.Hostname != "db-0" || pod.Spec.Subdomain != "db-headless" {
					t.Errorf("name %q hostname %q subdomain %q", pod.Name, pod.Spec.Hostname, pod.Spec.Subdomain)
				}
				if len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].PersistentVolumeClaim == nil || pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "data-db-0" {
					t.Errorf("volumes %+v", pod.Spec.Volumes)
				}
			}},
		{name: "DaemonSet", doc: "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent}\nspec:" + tmpl + "\n        hostNetwork: true\n        tolerations: [{operator: Exists}]", want: 1,
			check: func(t *testing.T, pod *v1.Pod) {
				a := pod.Spec.Affinity
				if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
					t.Fatalf("affinity %+v", a)
				}
				f := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0]
				if f.Key != "metadata.name" || len(f.Values) != 1 || f.Values[0] != peerrun.NodeName {
					t.Errorf("node affinity %+v", f)
				}
				// The template's own toleration, then the controller's seven (hostNetwork).
				if len(pod.Spec.Tolerations) != 8 {
					t.Errorf("tolerations %+v", pod.Spec.Tolerations)
				}
			}},
		{name: "CronJob", doc: "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: nightly}\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec: {restartPolicy: OnFailure, containers: [{name: c, image: x}]}", want: 1,
			check: func(t *testing.T, pod *v1.Pod) {
				if pod.Name != "nightly" || pod.Spec.RestartPolicy != v1.RestartPolicyOnFailure {
					t.Errorf("name %q restartPolicy %q", pod.Name, pod.Spec.RestartPolicy)
				}
			}},
		{name: "Service", doc: "apiVersion: v1\nkind: Service\nmetadata: {name: s}", want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := splitDocuments([]byte(tc.doc))
			if err != nil || len(docs) != 1 {
				t.Fatalf("%d documents, %v", len(docs), err)
			}
			pods, err := podsOf(docs[0])
			if err != nil || len(pods) != tc.want {
				t.Fatalf("%d pods, %v; want %d", len(pods), err, tc.want)
			}
			if tc.want == 0 {
				return
			}
			var pod v1.Pod
			if err := yaml.Unmarshal(mustYAML(pods[0]), &pod); err != nil {
				t.Fatal(err)
			}
			if pod.Kind != "Pod" {
				t.Errorf("kind %q", pod.Kind)
			}
			tc.check(t, &pod)
		})
	}
}

// TestLoadCorpusSkipsNonManifests: a file that is no Kubernetes manifest (an index: a JSON
// list) is left out, not an error.
func TestLoadCorpusSkipsNonManifests(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{
		"INDEX.json": `[{"file": "a.yaml"}]`,
		"a.yaml":     "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec: {template: {spec: {containers: [{name: c, image: x}]}}}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: a}",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := loadCorpus(dir)
	if err != nil || len(entries) != 1 || entries[0].Key.Name != "a" {
		t.Fatalf("entries %+v, %v; want the Deployment's pod", entries, err)
	}
}
