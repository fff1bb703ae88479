package main

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/hack/peer/peerrun"
)

// fakePaths is a filesystem of existing paths, with the directories that can be written.
type fakePaths struct{ existing, canWrite map[string]bool }

func (f fakePaths) exists(p string) bool   { return f.existing[p] }
func (f fakePaths) writable(d string) bool { return f.canWrite[d] }

// TestHostPathMountable: a pod whose hostPath the kubelet cannot set up waits in
// ContainerCreating for good, so a batch must not wait for it; on the v2 VM /usr is the
// host's, read-only (kubeadm's controller-manager pod mounts a DirectoryOrCreate below it).
func TestHostPathMountable(t *testing.T) {
	fs := fakePaths{
		existing: map[string]bool{"/": true, "/usr": true, "/var": true, "/var/run": true, "/var/run/docker.sock": true, "/etc": true},
		canWrite: map[string]bool{"/": true, "/var": true, "/var/run": true, "/etc": true},
	}
	typ := func(t v1.HostPathType) *v1.HostPathType { return &t }
	for _, tc := range []struct {
		name string
		hp   v1.HostPathVolumeSource
		want bool
	}{
		{"no type", v1.HostPathVolumeSource{Path: "/nowhere"}, true},
		{"unset type", v1.HostPathVolumeSource{Path: "/nowhere", Type: typ(v1.HostPathUnset)}, true},
		{"existing socket", v1.HostPathVolumeSource{Path: "/var/run/docker.sock", Type: typ(v1.HostPathSocket)}, true},
		{"missing directory", v1.HostPathVolumeSource{Path: "/srv/data", Type: typ(v1.HostPathDirectory)}, false},
		{"missing socket", v1.HostPathVolumeSource{Path: "/run/containerd/x.sock", Type: typ(v1.HostPathSocket)}, false},
		{"DirectoryOrCreate on a writable root", v1.HostPathVolumeSource{Path: "/etc/kubernetes/pki", Type: typ(v1.HostPathDirectoryOrCreate)}, true},
		{"DirectoryOrCreate below a read-only /usr", v1.HostPathVolumeSource{Path: "/usr/libexec/kubernetes/kubelet-plugins/volume/exec", Type: typ(v1.HostPathDirectoryOrCreate)}, false},
		{"DirectoryOrCreate that exists on a read-only mount", v1.HostPathVolumeSource{Path: "/usr", Type: typ(v1.HostPathDirectoryOrCreate)}, true},
		{"FileOrCreate with its parent", v1.HostPathVolumeSource{Path: "/etc/controller-manager.conf", Type: typ(v1.HostPathFileOrCreate)}, true},
		{"FileOrCreate without its parent", v1.HostPathVolumeSource{Path: "/etc/kubernetes/controller-manager.conf", Type: typ(v1.HostPathFileOrCreate)}, false},
		{"FileOrCreate in a read-only parent", v1.HostPathVolumeSource{Path: "/usr/x.conf", Type: typ(v1.HostPathFileOrCreate)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := hostPathMountable(&tc.hp, fs); got != tc.want {
				t.Errorf("hostPathMountable(%s %v) = %v, want %v", tc.hp.Path, tc.hp.Type, got, tc.want)
			}
		})
	}
}

// TestRunsToCompletion: a batch waits for a pod that ends by itself to end, so that both
// agents are read with it finished; a pod whose program the test image lacks sleeps forever.
func TestRunsToCompletion(t *testing.T) {
	applets := []string{"sh", "sleep", "true"}
	for _, tc := range []struct {
		name, yaml string
		want       bool
	}{
		{"a job's command, Never", "spec: {restartPolicy: Never, containers: [{name: a, command: [sh, -c, 'sleep 30']}]}", true},
		{"a job's command, OnFailure", "spec: {restartPolicy: OnFailure, containers: [{name: a, args: [/bin/sh, -c, 'exit 0']}]}", true},
		{"Always", "spec: {containers: [{name: a, command: [sh, -c, 'sleep 30']}]}", false},
		{"a program the image lacks", "spec: {restartPolicy: Never, containers: [{name: a, command: [nginx]}]}", false},
		{"one of two lacks its program", "spec: {restartPolicy: Never, containers: [{name: a, command: [sh]}, {name: b, command: [redis-server]}]}", false},
		// testdata/corpus/downward-api-env.yaml and downward-api-resources.yaml: restartPolicy
		// Never, a shell loop printing the environment every 10 s for ever.
		{"an endless loop in args", "spec: {restartPolicy: Never, containers: [{name: a, command: [sh, -c], args: [\"while true; do echo -en '\\n'; printenv A B; sleep 10; done;\"]}]}", false},
		{"an endless loop in command", "spec: {restartPolicy: Never, containers: [{name: a, command: [/bin/sh, -c, 'while :; do date; sleep 5; done']}]}", false},
		{"until false", "spec: {restartPolicy: OnFailure, containers: [{name: a, command: [sh, -c, 'until false; do sleep 1; done']}]}", false},
		{"a loop that breaks", "spec: {restartPolicy: Never, containers: [{name: a, command: [sh, -c, 'while true; do test -f /x && break; sleep 1; done']}]}", true},
		{"a loop that exits", "spec: {restartPolicy: Never, containers: [{name: a, command: [sh, -c, 'while true; do sleep 1; exit 0; done']}]}", true},
		{"a bounded loop", "spec: {restartPolicy: Never, containers: [{name: a, command: [sh, -c, 'for i in 1 2 3; do echo $i; done']}]}", true},
		{"a loop with a real test", "spec: {restartPolicy: Never, containers: [{name: a, command: [sh, -c, 'while [ ! -f /done ]; do sleep 1; done']}]}", true},
		{"one of two loops", "spec: {restartPolicy: Never, containers: [{name: a, command: [sh, -c, 'exit 0']}, {name: b, command: [sh, -c, 'while true; do sleep 1; done']}]}", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var doc map[string]any
			if err := yaml.Unmarshal([]byte(tc.yaml), &doc); err != nil {
				t.Fatal(err)
			}
			rewrite(doc, applets)
			out, err := yaml.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			if got := runsToCompletion(entry{YAML: out}); got != tc.want {
				t.Errorf("runsToCompletion(%s) = %v, want %v", out, got, tc.want)
			}
		})
	}
}

// TestFinishedAny: the kubelet's QoS levels are read a minute late only when a pod of the
// batch ran and ended; a refused pod was never counted there.
func TestFinishedAny(t *testing.T) {
	k := peerrun.PodKey{Name: "p"}
	for _, tc := range []struct {
		name string
		st   peerrun.PodStatus
		want bool
	}{
		{"running", peerrun.PodStatus{Phase: v1.PodRunning}, false},
		{"succeeded", peerrun.PodStatus{Phase: v1.PodSucceeded}, true},
		{"its containers failed", peerrun.PodStatus{Phase: v1.PodFailed}, true},
		{"refused at admission", peerrun.PodStatus{Phase: v1.PodFailed, Reason: "OutOfcpu"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := finishedAny(map[peerrun.PodKey]peerrun.PodStatus{k: tc.st}); got != tc.want {
				t.Errorf("finishedAny = %v, want %v", got, tc.want)
			}
		})
	}
}
