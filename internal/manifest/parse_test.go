package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/slices"
)

const podHead = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n"

func TestParseRefusals(t *testing.T) {
	long := strings.Repeat("x", 256<<10)
	tests := []struct {
		name string
		in   string
		want []string // each a separate problem, in order
	}{
		{"valid", podHead + "spec:\n  containers: [{name: a, command: [/bin/true]}]\n", nil},
		{"privileged is allowed, as the kubelet allows it", podHead + "spec:\n  containers: [{name: a, image: x, securityContext: {privileged: true}}]\n", nil},
		{"kind ConfigMap", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n", []string{"f.yaml: kind ConfigMap is not a Pod"}},
		{"bad quantity names its path", podHead + "spec:\n  containers: [{name: a, resources: {requests: {memory: 1GB}}}]\n",
			[]string{`f.yaml: spec.containers[0].resources.requests.memory: Invalid value: "1GB": must be a quantity`}},
		{"bad label key and value", podHead + "  labels: {\"-bad\": ok, good: \"not ok!\"}\nspec:\n  containers: [{name: a}]\n",
			[]string{`metadata.labels: Invalid value: "-bad"`, `metadata.labels: Invalid value: "not ok!"`}},
		{"annotations above 256 KiB in total", podHead + "  annotations: {a: " + long + "}\nspec:\n  containers: [{name: a}]\n",
			[]string{"metadata.annotations: Too long: may not be more than 262144 bytes"}},
		{"bad name, API wording once", "apiVersion: v1\nkind: Pod\nmetadata: {name: Web_1}\nspec:\n  containers: [{name: a}]\n",
			[]string{`metadata.name: Invalid value: "Web_1-` + *nodeName.Load() + `": a lowercase RFC 1123 subdomain`}},
		{"pod-level pids: one problem", podHead + "spec:\n  resources: {limits: {cpu: 1, pids: 100}}\n  containers: [{name: a}]\n",
			[]string{`spec.resources.limits[pids]: Invalid value: "pids": must be a standard resource type or fully qualified`}},
		// The API's validation (ValidatePodCreate), with its paths and wording.
		{"no containers", podHead + "spec:\n  containers: []\n", []string{"f.yaml: spec.containers: Required value"}},
		{"duplicate container across init and regular", podHead + "spec:\n  initContainers: [{name: a, image: x}]\n  containers: [{name: a, image: x}]\n",
			[]string{`f.yaml: spec.initContainers[0].name: Duplicate value: "a"`}},
		{"negative limit", podHead + "spec:\n  containers: [{name: a, resources: {limits: {memory: -1Gi}}}]\n",
			[]string{`f.yaml: spec.containers[0].resources.limits[memory]: Invalid value: "-1Gi": must be greater than or equal to 0`,
				`f.yaml: spec.containers[0].resources.requests[memory]: Invalid value: "-1Gi": must be greater than or equal to 0`}},
		{"request above limit", podHead + "spec:\n  containers: [{name: a, resources: {requests: {cpu: 300m}, limits: {cpu: 200m}}}]\n",
			[]string{`f.yaml: spec.containers[0].resources.requests: Invalid value: "300m": must be less than or equal to cpu limit of 200m`}},
		{"hugepages without cpu or memory", podHead + "spec:\n  containers: [{name: a, resources: {limits: {hugepages-2Mi: 4Mi}}}]\n",
			[]string{"f.yaml: spec.containers[0].resources: Forbidden: HugePages require cpu or memory"}},
		{"pull policy outside its enum", podHead + "spec:\n  containers: [{name: a, image: x, imagePullPolicy: Sometimes}]\n",
			[]string{`f.yaml: spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never"`}},
		{"scheduling gates on a static pod", podHead + "spec:\n  schedulingGates: [{name: example.com/g}]\n  containers: [{name: a, image: x}]\n",
			[]string{"f.yaml: spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"}},
		{"API rule and slicelet refusal both", podHead + "spec:\n  volumes: [{name: v, persistentVolumeClaim: {claimName: c}}]\n  containers: [{name: a, image: x, imagePullPolicy: Sometimes}]\n",
			[]string{`f.yaml: spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes"`,
				`f.yaml: spec.volumes[0].persistentVolumeClaim: Forbidden: a persistent volume claim is bound`}},
		{"an extended resource is no refusal (a device plugin's, checked at admission)", podHead + "spec:\n  containers: [{name: a, image: x, resources: {limits: {example.com/w: 1}}}]\n", nil},
		{"static pod: service account", podHead + "spec:\n  serviceAccountName: builder\n  containers: [{name: a}]\n",
			[]string{"spec.serviceAccountName: Forbidden: static pods may not reference serviceaccounts"}},
		{"static pod: persistent volume claim", podHead + "spec:\n  volumes: [{name: s, persistentVolumeClaim: {claimName: data}}]\n  containers:\n  - name: a\n",
			[]string{"spec.volumes[0].persistentVolumeClaim: Forbidden: a persistent volume claim is bound to its volume by an API server's controllers, and a stand-alone node has no API server"}},
		{"static pod: resource claims", podHead + "spec:\n  resourceClaims: [{name: gpu, resourceClaimName: g}]\n  containers: [{name: a}]\n",
			[]string{"spec.resourceClaims: Forbidden: static pods may not reference resourceclaims"}},
		{"static pod: projected source of no known kind", podHead + "spec:\n  volumes: [{name: proj0, projected: {sources: [{downwardAPI: {items: []}}, {}]}}]\n  containers: [{name: a}]\n",
			[]string{`f.yaml: spec.volumes[0].projected.sources[1]: Required value: unknown source for projected volume "proj0"`}},
		{"static pod: an unknown projection beside a configMap one", podHead + "spec:\n  volumes: [{name: p, projected: {sources: [{configMap: {name: c}}, {}]}}]\n  containers: [{name: a}]\n",
			[]string{`f.yaml: spec.volumes[0].projected.sources[1]: Required value: unknown source for projected volume "p"`}},
		// Accepted by the kubelet's file source, then never started by its pod worker.
		{"marked for deletion", podHead + "  deletionTimestamp: \"2024-01-01T00:00:00Z\"\nspec:\n  containers: [{name: a}]\n",
			[]string{"f.yaml: metadata.deletionTimestamp: Forbidden: a pod marked for deletion is never started"}},
		{"terminal phase Succeeded", podHead + "spec:\n  containers: [{name: a}]\nstatus: {phase: Succeeded}\n",
			[]string{"f.yaml: status.phase: Forbidden: a pod in a terminal phase (Succeeded, Failed) is never started"}},
		{"terminal phase Failed after an API rule", podHead + "spec:\n  containers: [{name: a, image: x, imagePullPolicy: Sometimes}]\nstatus: {phase: Failed}\n",
			[]string{`f.yaml: spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes"`, "f.yaml: status.phase: Forbidden: a pod in a terminal phase"}},
		{"a running pod's status is no refusal", podHead + "spec:\n  containers: [{name: a}]\nstatus: {phase: Running}\n", nil},
		{"multi-document: each named", podHead + "spec:\n  containers: [{name: a}]\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\n",
			[]string{"f.yaml: document 1: kind Secret is not a Pod"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods, err := Parse("f.yaml", "/etc/slicelet/pods.d/f.yaml", []byte(tt.in))
			if len(tt.want) == 0 {
				if err != nil || len(pods) != 1 {
					t.Fatalf("Parse = %v, %v", pods, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse accepted %+v", pods[0])
			}
			problems := strings.Split(err.Error(), "\n")
			if len(problems) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(problems), len(tt.want), strings.Join(problems, "\n"))
			}
			for i, w := range tt.want {
				if !strings.Contains(problems[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, problems[i], w)
				}
			}
		})
	}
	t.Run("ErrNotPod", func(t *testing.T) {
		_, err := Parse("f.yaml", "f", []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n"))
		var np *NotPodError
		if !errors.Is(err, ErrNotPod) || !errors.As(err, &np) || np.Kind != "Deployment" {
			t.Errorf("err = %v", err)
		}
	})
}

// TestLimitsOnlyIsGuaranteed: limits alone are Guaranteed once decoded, as on the kubelet
// (requests defaulted from limits): shares from the limit, oom_score_adj -997.
func TestLimitsOnlyIsGuaranteed(t *testing.T) {
	tests := []struct {
		name      string
		spec      string
		qos       v1.PodQOSClass
		shares    uint64
		oomScores []int
	}{
		{"limits only", "  containers: [{name: a, resources: {limits: {cpu: 500m, memory: 128Mi}}}]\n", v1.PodQOSGuaranteed, 512, []int{-997}},
		{"init container with limits only", "  initContainers: [{name: i, resources: {limits: {cpu: 250m, memory: 64Mi}}}]\n  containers: [{name: a, resources: {limits: {cpu: 500m, memory: 128Mi}}}]\n",
			v1.PodQOSGuaranteed, 512, []int{-997, -997}},
		{"limit on cpu only", "  containers: [{name: a, resources: {limits: {cpu: 500m}}}]\n", v1.PodQOSBurstable, 512, []int{999}},
		{"pod-level limits only stay Burstable (1.37)", "  resources: {limits: {cpu: 1, memory: 1Gi}}\n  containers: [{name: a}]\n", v1.PodQOSBurstable, 2, []int{999}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods, err := Parse("f.yaml", "f", []byte(podHead+"spec:\n"+tt.spec))
			if err != nil {
				t.Fatal(err)
			}
			pod := pods[0]
			if got := slices.QOSClass(pod); got != tt.qos {
				t.Errorf("QoS = %s, want %s", got, tt.qos)
			}
			rc := slices.PodResources(pod, slices.DefaultOptions())
			if rc.CPUShares == nil || *rc.CPUShares != tt.shares {
				t.Errorf("cpu shares = %v, want %d", rc.CPUShares, tt.shares)
			}
			var got []int
			for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
				for i := range list {
					got = append(got, slices.ContainerOOMScoreAdj(pod, &list[i], 16<<30))
				}
			}
			if len(got) != len(tt.oomScores) {
				t.Fatalf("oom scores %v, want %v", got, tt.oomScores)
			}
			for i := range got {
				if got[i] != tt.oomScores[i] {
					t.Errorf("oom scores %v, want %v", got, tt.oomScores)
				}
			}
		})
	}
}

// TestUID: a static pod's UID is derived from its defaulted content and its source: the same
// file gives the same UID (ReadFile and Parse agree), any change of content or path a new one,
// and a written metadata.uid wins.
func TestUID(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "web.yaml")
	body := podHead + "spec:\n  containers: [{name: a, command: [/bin/true]}]\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	uid := func(name, source, data string) string {
		t.Helper()
		pods, err := Parse(name, source, []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		return string(pods[0].UID)
	}
	read, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	base := uid("x", path, body)
	if string(read[0].UID) != base {
		t.Errorf("ReadFile gave %s, Parse %s", read[0].UID, base)
	}
	if err := slices.ValidateUID(base); err != nil {
		t.Error(err)
	}
	// Defaults are part of the content: writing a default out changes nothing.
	if got := uid("x", path, podHead+"spec:\n  restartPolicy: Always\n  containers: [{name: a, command: [/bin/true]}]\n"); got != base {
		t.Errorf("an explicit default changed the UID: %s vs %s", got, base)
	}
	if got := uid("x", path+"2", body); got == base {
		t.Error("another source, same UID")
	}
	if got := uid("x", path, strings.Replace(body, "/bin/true", "/bin/false", 1)); got == base {
		t.Error("other content, same UID")
	}
	if got := uid("x", path, strings.Replace(body, "name: web\n", "name: web\n  uid: 0123-abc\n", 1)); got != "0123-abc" {
		t.Errorf("written uid: got %s", got)
	}
}

// TestNameSuffixedWithNode: a static pod's name is judged as the kubelet's file source judges
// it, suffixed with "-<node>" (its mirror pod's name): a name that fits alone but not once
// suffixed is refused, with the suffixed name in the API's wording.
func TestNameSuffixedWithNode(t *testing.T) {
	old := *nodeName.Load()
	t.Cleanup(func() { SetNodeName(old) })
	SetNodeName("Node-1")
	pod := func(name string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n  containers: [{name: a, image: x}]\n"
	}
	fits := strings.Repeat("a", 253-len("-node-1"))
	if _, err := Parse("f.yaml", "f", []byte(pod(fits))); err != nil {
		t.Errorf("a name of %d characters: %v", len(fits), err)
	}
	long := fits + "b"
	_, err := Parse("f.yaml", "f", []byte(pod(long)))
	if want := `metadata.name: Invalid value: "` + long + `-node-1": must be no more than 253 characters`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a name of %d characters: %v, want %q", len(long), err, want)
	}
}
