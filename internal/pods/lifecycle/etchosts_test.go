package lifecycle

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEtcHosts(t *testing.T) {
	aliases := []v1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo", "bar"}}}
	local := "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"
	tests := []struct {
		name        string
		hostNetwork bool
		ips         []string
		domain      string
		aliases     []v1.HostAlias
		want        string
	}{
		{name: "managed", ips: []string{"10.88.0.5"}, want: "# Kubernetes-managed hosts file.\n" + local + "10.88.0.5\tweb\n"},
		{name: "managed, dual stack, aliases", ips: []string{"10.88.0.5", "fd00::5"}, aliases: aliases,
			want: "# Kubernetes-managed hosts file.\n" + local + "10.88.0.5\tweb\nfd00::5\tweb\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n"},
		{name: "managed with a domain", ips: []string{"10.88.0.5"}, domain: "sub.ns.svc.cluster.local",
			want: "# Kubernetes-managed hosts file.\n" + local + "10.88.0.5\tweb.sub.ns.svc.cluster.local\tweb\n"},
		{name: "host network", hostNetwork: true, ips: []string{"192.0.2.1"}, aliases: aliases,
			want: "# Kubernetes-managed hosts file (host network).\n127.0.0.1 node\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(EtcHosts([]byte("127.0.0.1 node\n"), tt.hostNetwork, tt.ips, "web", tt.domain, tt.aliases))
			if got != tt.want {
				t.Errorf("EtcHosts =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestMountsEtcHosts(t *testing.T) {
	own := &v1.Container{VolumeMounts: []v1.VolumeMount{{Name: "h", MountPath: "/etc/hosts"}}}
	tests := []struct {
		name        string
		c           *v1.Container
		hostNetwork bool
		ips         []string
		want        bool
	}{
		{name: "pod IP known", c: &v1.Container{}, ips: []string{"10.88.0.5"}, want: true},
		{name: "pod IP not known yet", c: &v1.Container{}, ips: []string{""}},
		{name: "no pod IP", c: &v1.Container{}},
		{name: "host network", c: &v1.Container{}, hostNetwork: true, want: true},
		{name: "the container mounts its own", c: own, hostNetwork: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MountsEtcHosts(tt.c, tt.hostNetwork, tt.ips); got != tt.want {
				t.Errorf("MountsEtcHosts = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPodHostname(t *testing.T) {
	long := strings.Repeat("a", 62) + "-b"
	tests := []struct {
		name string
		pod  v1.Pod
		want string
	}{
		{name: "the name", pod: v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, want: "web"},
		{name: "spec.hostname", pod: v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1.PodSpec{Hostname: "h"}}, want: "h"},
		{name: "cut at 63, no trailing dash", pod: v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: long}}, want: strings.Repeat("a", 62)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PodHostname(&tt.pod); got != tt.want {
				t.Errorf("PodHostname = %q, want %q", got, tt.want)
			}
		})
	}
}
