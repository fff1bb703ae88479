package worker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestEtcHostsMount: with a runtime of images each container gets the pod's hosts file at
// /etc/hosts: on the host's network the node's own with the pod's hostAliases (the Kubelet
// hostAliases conformance spec), none for a container that mounts its own.
func TestEtcHostsMount(t *testing.T) {
	nodeHosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(nodeHosts, []byte("127.0.0.1 localhost node\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFakeRT()
	w, _ := newTestWorkerWith(t, f, "", func(o *Options) {
		o.Images, o.EtcHosts, o.HostNetwork = presentImages{}, nodeHosts, true
	})
	pod := testPod("eh-1", v1.RestartPolicyNever, "app", "own")
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].Image = "busybox"
	}
	pod.Spec.HostAliases = []v1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo", "bar"}}}
	pod.Spec.Volumes = []v1.Volume{{Name: "h", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[1].VolumeMounts = []v1.VolumeMount{{Name: "h", MountPath: "/etc/hosts"}}
	mustSync(t, w, pod)
	for _, cfg := range f.configs {
		var hosts []string
		for _, m := range cfg.Mounts {
			if m.ContainerPath == "/etc/hosts" {
				hosts = append(hosts, m.HostPath)
			}
		}
		switch name := cfg.Metadata.Name; {
		case name == "own" && (len(hosts) != 1 || !strings.Contains(hosts[0], "volumes")):
			t.Errorf("%s: /etc/hosts from %v, want its own volume only", name, hosts)
		case name == "app" && len(hosts) != 1:
			t.Errorf("%s: /etc/hosts from %v, want the pod's hosts file", name, hosts)
		case name == "app":
			b, err := os.ReadFile(hosts[0])
			want := "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost node\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n"
			if err != nil || string(b) != want {
				t.Errorf("hosts file %q, %v; want %q", b, err, want)
			}
		}
	}
}
