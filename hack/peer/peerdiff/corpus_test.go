package main

import (
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/hack/peer/peerrun"
)

var applets = []string{"sh", "sleep", "echo", "true"}

func TestRewrite(t *testing.T) {
	sleep := []any{"/bin/sleep", "infinity"}
	for _, tc := range []struct {
		name      string
		container string // YAML of the container
		init      bool
		want      map[string]any // fields expected after the rewrite (besides image, pull policy)
		gone      []string       // fields expected absent
	}{
		{name: "program the image lacks sleeps", container: "{name: a, image: nginx:1, command: [nginx, -g, daemon off;]}", want: map[string]any{"command": sleep}},
		{name: "no command sleeps", container: "{name: a, image: redis:7}", want: map[string]any{"command": sleep}},
		{name: "args alone of a missing entrypoint are dropped", container: "{name: a, image: redis:7, args: [--port, '6380']}", want: map[string]any{"command": sleep}, gone: []string{"args"}},
		{name: "busybox applet kept", container: "{name: a, image: busybox, command: [sh, -c, 'echo hi; sleep 3600']}", want: map[string]any{"command": []any{"sh", "-c", "echo hi; sleep 3600"}}},
		{name: "applet by /bin path kept with its args", container: "{name: a, image: busybox, command: [/bin/sleep], args: ['100']}", want: map[string]any{"command": []any{"/bin/sleep"}, "args": []any{"100"}}},
		{name: "applet args without command kept", container: "{name: a, image: busybox, args: [echo, hi]}", want: map[string]any{"args": []any{"echo", "hi"}}, gone: []string{"command"}},
		{name: "applet under another path replaced", container: "{name: a, image: busybox, command: [/usr/local/bin/sleep, '1']}", want: map[string]any{"command": sleep}},
		{name: "init container runs true", init: true, container: "{name: i, image: busybox, command: [sh, -c, 'until nslookup db; do sleep 2; done']}", want: map[string]any{"command": []any{"/bin/true"}}},
		{name: "sidecar keeps running", init: true, container: "{name: s, image: envoy, restartPolicy: Always}", want: map[string]any{"command": sleep}},
		{name: "probes and hooks succeed", container: "{name: a, image: web, livenessProbe: {httpGet: {port: 80}, periodSeconds: 3}, lifecycle: {preStop: {sleep: {seconds: 5}}}}",
			want: map[string]any{
				"livenessProbe": map[string]any{"exec": map[string]any{"command": []any{"/bin/true"}}, "periodSeconds": float64(3)},
				"lifecycle":     map[string]any{"preStop": map[string]any{"exec": map[string]any{"command": []any{"/bin/true"}}}},
			}},
		{name: "resources untouched", container: "{name: a, image: x, resources: {limits: {cpu: 1001m, memory: '1e3'}}}",
			want: map[string]any{"resources": map[string]any{"limits": map[string]any{"cpu": "1001m", "memory": "1e3"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list := "containers"
			if tc.init {
				list = "initContainers"
			}
			var doc map[string]any
			if err := yaml.Unmarshal([]byte("kind: Pod\nspec: {"+list+": ["+tc.container+"]}"), &doc); err != nil {
				t.Fatal(err)
			}
			rewrite(doc, applets)
			c := doc["spec"].(map[string]any)[list].([]any)[0].(map[string]any)
			if c["image"] != peerrun.TestImage || c["imagePullPolicy"] != "IfNotPresent" {
				t.Errorf("image %v, pull policy %v", c["image"], c["imagePullPolicy"])
			}
			for k, v := range tc.want {
				if !reflect.DeepEqual(c[k], v) {
					t.Errorf("%s = %#v, want %#v", k, c[k], v)
				}
			}
			for _, k := range tc.gone {
				if _, ok := c[k]; ok {
					t.Errorf("%s still there: %#v", k, c[k])
				}
			}
		})
	}
}

// corpusEntry is a prepared entry of the given requests.
func corpusEntry(name string, cpu, mem int64) entry {
	return entry{Key: peerrun.PodKey{Namespace: "default", Name: name}, CPUMilli: cpu, MemoryBytes: mem}
}

// names lists the batches' pod names, a misfit batch's first name marked with "!".
func names(bs []batch) [][]string {
	var out [][]string
	for _, b := range bs {
		var n []string
		for _, e := range b.pods {
			n = append(n, e.Key.Name)
		}
		if b.misfits {
			n[0] = "!" + n[0]
		}
		out = append(out, n)
	}
	return out
}

func TestBatches(t *testing.T) {
	a := allocatable{CPUMilli: 1000, MemoryBytes: 1000, Pods: 110}
	for _, tc := range []struct {
		name    string
		entries []entry
		maxPods int
		want    [][]string
	}{
		{name: "all fit", maxPods: 30, entries: []entry{corpusEntry("a", 300, 100), corpusEntry("b", 300, 100), corpusEntry("c", 0, 0)}, want: [][]string{{"a", "b", "c"}}},
		{name: "cpu splits, first fit fills earlier batches", maxPods: 30,
			entries: []entry{corpusEntry("a", 600, 0), corpusEntry("b", 600, 0), corpusEntry("c", 400, 0), corpusEntry("d", 400, 0)},
			want:    [][]string{{"a", "c"}, {"b", "d"}}},
		{name: "memory splits", maxPods: 30, entries: []entry{corpusEntry("a", 0, 700), corpusEntry("b", 0, 700)}, want: [][]string{{"a"}, {"b"}}},
		{name: "pod cap", maxPods: 2, entries: []entry{corpusEntry("a", 0, 0), corpusEntry("b", 0, 0), corpusEntry("c", 0, 0)}, want: [][]string{{"a", "b"}, {"c"}}},
		{name: "misfits run in batches of their own", maxPods: 30,
			entries: []entry{corpusEntry("a", 900, 0), corpusEntry("huge", 5000, 0), corpusEntry("b", 900, 0), corpusEntry("c", 100, 0), corpusEntry("big-mem", 0, 2000)},
			want:    [][]string{{"a", "c"}, {"b"}, {"!huge", "big-mem"}}},
		{name: "hugepages or extended resources make a misfit", maxPods: 30,
			entries: []entry{corpusEntry("a", 100, 0), {Key: peerrun.PodKey{Name: "widget"}, Scalar: true}},
			want:    [][]string{{"a"}, {"!widget"}}},
		{name: "a pod one agent refuses by design is a misfit", maxPods: 30,
			entries: []entry{{Key: peerrun.PodKey{Name: "cm"}, ByDesign: true}, corpusEntry("a", 100, 0)},
			want:    [][]string{{"a"}, {"!cm"}}},
		{name: "misfit batches have the pod cap too", maxPods: 2,
			entries: []entry{corpusEntry("h1", 5000, 0), corpusEntry("h2", 5000, 0), corpusEntry("h3", 5000, 0)},
			want:    [][]string{{"!h1", "h2"}, {"!h3"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := names(batches(tc.entries, a, tc.maxPods)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("batches = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPrepare(t *testing.T) {
	in := []entry{
		{Origin: "a.yaml", Key: peerrun.PodKey{Namespace: "default", Name: "web"}, YAML: []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  initContainers: [{name: i, image: x, resources: {requests: {cpu: '2', memory: 1Gi}}}]\n  containers:\n  - {name: a, image: nginx, resources: {requests: {cpu: 250m, memory: 64Mi}}}\n  - {name: b, image: redis, resources: {requests: {cpu: 250m}}}\n")},
		{Origin: "b.yaml", Key: peerrun.PodKey{Namespace: "default", Name: "web"}, YAML: []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  resources: {requests: {cpu: '3'}}\n  containers: [{name: a, image: nginx}]\n")},
	}
	out, err := prepare(in, applets)
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Key.Name != "web" || out[1].Key.Name != "web-2" {
		t.Errorf("names %s, %s: want web, web-2", out[0].Key.Name, out[1].Key.Name)
	}
	if !strings.Contains(string(out[1].YAML), "name: web-2") {
		t.Errorf("renamed manifest keeps its old name:\n%s", out[1].YAML)
	}
	// The init container's requests exceed the containers' sum: they count.
	if out[0].CPUMilli != 2000 || out[0].MemoryBytes != 1<<30 || !reflect.DeepEqual(out[0].Containers, []string{"a", "b"}) {
		t.Errorf("web: %d m, %d bytes, containers %v", out[0].CPUMilli, out[0].MemoryBytes, out[0].Containers)
	}
	// Pod-level requests count.
	if out[1].CPUMilli != 3000 {
		t.Errorf("web-2: %d m, want the pod-level 3000", out[1].CPUMilli)
	}
	// Limits alone are requests too (the API's defaults), and hugepages make a misfit.
	more, err := prepare([]entry{{Origin: "c.yaml", Key: peerrun.PodKey{Namespace: "default", Name: "lim"}, YAML: []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: lim}\nspec:\n  containers: [{name: a, image: x, resources: {limits: {cpu: 500m, memory: 64Mi, hugepages-2Mi: 2Mi}}}]\n")}}, applets)
	if err != nil {
		t.Fatal(err)
	}
	if more[0].CPUMilli != 500 || more[0].MemoryBytes != 64<<20 || !more[0].Scalar || more[0].ByDesign {
		t.Errorf("lim: %d m, %d bytes, scalar %v, by design %v: want 500 m, 64 Mi, true, false", more[0].CPUMilli, more[0].MemoryBytes, more[0].Scalar, more[0].ByDesign)
	}
	// A ConfigMap reference, a field slicelet does not implement yet and a volume it has no
	// plugin for: refused by one agent by design.
	design, err := prepare([]entry{
		{Origin: "d.yaml", Key: peerrun.PodKey{Namespace: "default", Name: "cm"}, YAML: []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: cm}\nspec:\n  containers: [{name: a, image: x, envFrom: [{configMapRef: {name: c}}]}]\n")},
		{Origin: "e.yaml", Key: peerrun.PodKey{Namespace: "default", Name: "dl"}, YAML: []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: dl}\nspec:\n  hostUsers: false\n  containers: [{name: a, image: x}]\n")},
		{Origin: "f.yaml", Key: peerrun.PodKey{Namespace: "default", Name: "iscsi"}, YAML: []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: iscsi}\nspec:\n  containers: [{name: a, image: x}]\n  volumes: [{name: v, iscsi: {targetPortal: 10.0.0.1, iqn: iqn.2001-04.com.example:t, lun: 0}}]\n")},
	}, applets)
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct{ notYet, noPlugin string }{{"", ""}, {"spec.hostUsers", ""}, {"", "spec.volumes[0].iscsi"}} {
		e := design[i]
		if !e.ByDesign || (tc.notYet == "") != (e.NotYet == "") || !strings.Contains(e.NotYet, tc.notYet) ||
			(tc.noPlugin == "") != (e.NoPlugin == "") || !strings.Contains(e.NoPlugin, tc.noPlugin) {
			t.Errorf("%s: by design %v, not yet %q, no plugin %q; want true, %q, %q", e.Key.Name, e.ByDesign, e.NotYet, e.NoPlugin, tc.notYet, tc.noPlugin)
		}
	}
	// What the kubelet accepts and mishandles, refused by slicelet: by design too.
	mis, err := prepare([]entry{
		{Origin: "g.yaml", Key: peerrun.PodKey{Namespace: "default", Name: "gone"}, YAML: []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: gone, deletionTimestamp: \"2024-01-01T00:00:00Z\"}\nspec:\n  containers: [{name: a, image: x}]\n")},
		{Origin: "h.yaml", Key: peerrun.PodKey{Namespace: "default", Name: "done"}, YAML: []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: done}\nspec:\n  containers: [{name: a, image: x}]\nstatus: {phase: Succeeded}\n")},
		{Origin: "i.yaml", Key: peerrun.PodKey{Namespace: "default", Name: "qos"}, YAML: []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: qos}\nspec:\n  containers: [{name: a, image: x}]\nstatus: {qosClass: Bogus}\n")},
		{Origin: "j.yaml", Key: peerrun.PodKey{Namespace: "default", Name: "running"}, YAML: []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: running}\nspec:\n  containers: [{name: a, image: x}]\nstatus: {phase: Running}\n")},
	}, applets)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"metadata.deletionTimestamp", "status.phase", "status.qosClass", ""} {
		if e := mis[i]; e.ByDesign != (want != "") || (want == "") != (e.Refused == "") || !strings.Contains(e.Refused, want) {
			t.Errorf("%s: by design %v, refused %q; want %v, %q", e.Key.Name, e.ByDesign, e.Refused, want != "", want)
		}
	}
}

// TestGeneratedPrepare prepares the default run's generated pods: each decodes as a Pod, runs
// the test image only, and keeps its name.
func TestGeneratedPrepare(t *testing.T) {
	out, err := prepare(generated(1, 40), testApplets())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range out {
		if e.Pod == nil {
			t.Errorf("%s: does not decode as a Pod", e.Origin)
			continue
		}
		if !strings.HasPrefix(e.Key.Name, "g1-") {
			t.Errorf("%s: renamed to %s", e.Origin, e.Key.Name)
		}
		for _, c := range append(e.Pod.Spec.InitContainers, e.Pod.Spec.Containers...) {
			if c.Image != peerrun.TestImage {
				t.Errorf("%s: container %s runs %s", e.Origin, c.Name, c.Image)
			}
		}
	}
}

func TestLoadCorpus(t *testing.T) {
	out, err := loadCorpus("../../../testdata/corpus")
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 40 {
		t.Fatalf("%d pods in testdata/corpus, want at least 40", len(out))
	}
	multi := 0
	for _, e := range out {
		if strings.Contains(e.Origin, "multi-document.yaml#") {
			multi++
		}
	}
	if multi != 2 {
		t.Errorf("multi-document.yaml gave %d pods, want 2", multi)
	}
}

func TestSkipRuntimeClass(t *testing.T) {
	in := []entry{{Origin: "rc.yaml", Key: peerrun.PodKey{Namespace: "default", Name: "rc"}, YAML: []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: rc}\nspec:\n  runtimeClassName: gvisor\n  containers: [{name: a, image: x}]\n")}}
	out, err := prepare(in, applets)
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Skip == "" {
		t.Fatal("a pod with runtimeClassName is run: the standalone kubelet panics on it")
	}
	if bs := batches(out, allocatable{CPUMilli: 1000, MemoryBytes: 1 << 30, Pods: 110}, 30); len(bs) != 0 {
		t.Errorf("batches %v, want none", names(bs))
	}
}
