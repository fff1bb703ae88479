package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slicelet/slicelet/hack/peer/corpus"
	"github.com/slicelet/slicelet/internal/manifest"
)

// uidCases are manifests whose static-pod UID the kubelet derives from what slicelet's
// defaulting also touches or leaves alone: quantities rounded and copied to requests, lists
// written empty, JSON, a byte-order mark, a namespace left to default, a UID of its own.
var uidCases = []struct{ name, manifest string }{
	{"minimal", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, image: busybox}]}\n"},
	{"namespace written", "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: kube-system}\nspec: {containers: [{name: c, image: busybox:1.36}]}\n"},
	{"uid written", "apiVersion: v1\nkind: Pod\nmetadata: {name: a, uid: 0123abcd}\nspec: {containers: [{name: c, image: busybox}]}\n"},
	{"limits only, odd quantities", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    resources: {limits: {cpu: 0.0001, memory: 1.5Gi}}\n"},
	{"requests as written", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    resources: {requests: {cpu: \"1\", memory: 100M}, limits: {cpu: 2000m}}\n"},
	{"empty lists and maps", "apiVersion: v1\nkind: Pod\nmetadata: {name: a, labels: {}, annotations: {}}\nspec: {volumes: [], initContainers: [], containers: [{name: c, image: busybox, args: [], env: []}]}\n"},
	{"labels and annotations", "apiVersion: v1\nkind: Pod\nmetadata: {name: a, labels: {z: \"1\", a: \"2\"}, annotations: {k: v}}\nspec: {containers: [{name: c, image: busybox}]}\n"},
	{"host network ports", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {hostNetwork: true, containers: [{name: c, image: busybox, ports: [{containerPort: 80}]}]}\n"},
	{"probes and volumes", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  volumes: [{name: v}, {name: h, hostPath: {path: /tmp}}]\n  containers:\n  - name: c\n    image: busybox\n    readinessProbe: {httpGet: {port: 80}}\n    volumeMounts: [{name: v, mountPath: /v}]\n"},
	{"init container and sidecar", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  initContainers:\n  - {name: i, image: busybox}\n  - {name: s, image: busybox, restartPolicy: Always}\n  containers: [{name: c, image: busybox}]\n"},
	{"json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`},
	{"byte-order mark", "\ufeffapiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, image: busybox}]}\n"},
}

// TestStaticPodUIDAsKubelet: slicelet's UID of every manifest (uidCases, then every manifest
// of testdata/corpus the kubelet accepts) equals the UID the kubelet's own file source gives
// it on the same node, read from the same path, under the node names of two hosts (the host
// name is part of the hash).
func TestStaticPodUIDAsKubelet(t *testing.T) {
	type input struct{ name, key string }
	dir := filepath.Join(t.TempDir(), "manifests")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var inputs []input
	add := func(name string, data []byte) {
		f := fmt.Sprintf("%03d.yaml", len(inputs))
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
		// The file source keys pods by namespace/name: each case gets a name of its own.
		inputs = append(inputs, input{name, f})
	}
	for _, c := range uidCases {
		add(c.name, []byte(strings.Replace(c.manifest, "name: a", "name: a"+fmt.Sprint(len(inputs)), 1)))
	}
	if err := corpus.WalkManifests(filepath.Join("..", "..", "..", "testdata", "corpus"), func(path string) error {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		add(filepath.Base(path), data)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"oracle", "node-b.example"} {
		manifest.SetNodeName(node)
		keys := map[string]string{}
		slicelet := map[string]string{}
		for _, in := range inputs {
			data, _ := os.ReadFile(filepath.Join(dir, in.key))
			pods, err := sliceletDecode(in.key, filepath.Join(dir, in.key), data)
			if err != nil || len(pods) == 0 {
				continue // refused: no UID to compare
			}
			keys[in.key] = pods[0].Namespace + "/" + pods[0].Name
			slicelet[in.key] = string(pods[0].UID)
		}
		kubelet, err := kubeletDecodeOn(dir, node, keys)
		if err != nil {
			t.Fatal(err)
		}
		compared := 0
		for _, in := range inputs {
			want, ok := kubelet[in.key]
			if !ok || want.pod == nil {
				continue
			}
			compared++
			if got := slicelet[in.key]; got != string(want.pod.UID) {
				t.Errorf("node %s, %s (%s): slicelet's uid %s, the kubelet's %s", node, in.name, in.key, got, want.pod.UID)
			}
		}
		if compared < len(uidCases) {
			t.Errorf("node %s: only %d manifests accepted by both sides, want at least the %d cases", node, compared, len(uidCases))
		}
		t.Logf("node %s: %d static pod UIDs compared", node, compared)
	}
	manifest.SetNodeName(nodeName)
}
