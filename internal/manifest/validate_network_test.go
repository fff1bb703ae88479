package manifest

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestValidateNetwork: the API's rules for dnsPolicy, dnsConfig, hostname, subdomain, ports and
// mount propagation (pkg/apis/core/validation/validation_test.go cases), now that slicelet
// implements them.
func TestValidateNetwork(t *testing.T) {
	yes := true
	mode := func(m v1.MountPropagationMode) *v1.MountPropagationMode { return &m }
	three := func(s string) []string { return []string{s, s, s} }
	tests := []struct {
		name string
		mod  func(*v1.Pod)
		want []string
	}{
		{"defaults", func(*v1.Pod) {}, nil},
		{"statefulset pod", func(p *v1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "web-0", "nginx" }, nil},
		{"bad hostname and subdomain", func(p *v1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "Web_0", "a.b" },
			[]string{"spec.hostname: Invalid value: \"Web_0\"", "spec.subdomain: Invalid value: \"a.b\""}},
		{"unknown policy", func(p *v1.Pod) { p.Spec.DNSPolicy = "Cluster" }, []string{"spec.dnsPolicy: Unsupported value: \"Cluster\""}},
		{"None without dnsConfig", func(p *v1.Pod) { p.Spec.DNSPolicy = v1.DNSNone }, []string{"spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None"}},
		{"None without nameservers", func(p *v1.Pod) {
			p.Spec.DNSPolicy, p.Spec.DNSConfig = v1.DNSNone, &v1.PodDNSConfig{Searches: []string{"a"}}
		}, []string{"spec.dnsConfig.nameservers: Required value"}},
		{"None with a nameserver", func(p *v1.Pod) {
			p.Spec.DNSPolicy, p.Spec.DNSConfig = v1.DNSNone, &v1.PodDNSConfig{Nameservers: []string{"1.2.3.4"}, Searches: []string{"a.", ".", "_srv.example.org"}}
		}, nil},
		{"dnsConfig over the limits", func(p *v1.Pod) {
			p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: append(three("1.2.3.4"), "not-an-ip"), Searches: append(make([]string, 0), strings.Repeat("a", 30)+".b"),
				Options: []v1.PodDNSConfigOption{{Name: ""}}}
			for range 32 {
				p.Spec.DNSConfig.Searches = append(p.Spec.DNSConfig.Searches, strings.Repeat("x", 63))
			}
		}, []string{"spec.dnsConfig.nameservers: Invalid value", "spec.dnsConfig.nameservers[3]: Invalid value: \"not-an-ip\"",
			"spec.dnsConfig.searches: Invalid value", "spec.dnsConfig.searches: Invalid value", "spec.dnsConfig.options[0]: Required value"}},
		{"ports", func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{
				{Name: "http", ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP},
				{Name: "http", ContainerPort: 70000, Protocol: "HTTP"},
				{ContainerPort: 81, HostPort: 8080, Protocol: v1.ProtocolTCP},
			}
		}, []string{"spec.containers[0].ports[1].name: Duplicate value", "spec.containers[0].ports[1].containerPort: Invalid value: 70000",
			"spec.containers[0].ports[1].protocol: Unsupported value: \"HTTP\"", "spec.containers[0].ports[2].hostPort: Duplicate value: \"TCP//8080\""}},
		{"host network: hostPort must match", func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP}}
		}, []string{"spec.containers[0].ports[0].hostPort: Invalid value: 8080: must match `containerPort` when `hostNetwork` is true"}},
		{"mount propagation", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/"}}}}
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
				{Name: "root", MountPath: "/a", MountPropagation: mode(v1.MountPropagationHostToContainer)},
				{Name: "root", MountPath: "/b", MountPropagation: mode(v1.MountPropagationBidirectional)},
				{Name: "root", MountPath: "/c", MountPropagation: mode("Shared")},
			}
		}, []string{"spec.containers[0].volumeMounts[1].mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers",
			"spec.containers[0].volumeMounts[2].mountPropagation: Unsupported value: \"Shared\""}},
		{"bidirectional in a privileged container", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/"}}}}
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: &yes}
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "root", MountPath: "/a", MountPropagation: mode(v1.MountPropagationBidirectional)}}
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default"},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
			tt.mod(p)
			SetDefaults(p)
			errs := validateNetwork(p)
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors %v, want %d %v", len(errs), errs, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(errs[i].Error(), w) {
					t.Errorf("error %d = %q, want %q…", i, errs[i], w)
				}
			}
		})
	}
}
