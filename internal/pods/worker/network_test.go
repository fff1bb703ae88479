package worker

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// TestSandboxDNS: the sandbox's DnsConfig is the kubelet's GetPodDNS over the host's
// resolv.conf read from Options.DNS.ResolvConf; without cluster DNS a ClusterFirst pod falls back
// to Default with MissingClusterDNS about the node and the pod; no Options.DNS leaves it to the
// runtime; an unreadable resolv.conf fails the configuration.
func TestSandboxDNS(t *testing.T) {
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("# host\nnameserver 192.0.2.53\nsearch example.org\noptions edns0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	host := &runtimeapi.DNSConfig{Servers: []string{"192.0.2.53"}, Searches: []string{"example.org"}, Options: []string{"edns0"}}
	cases := []struct {
		name   string
		dns    *lifecycle.NodeDNS
		policy v1.DNSPolicy
		want   *runtimeapi.DNSConfig
		events []string
	}{
		{name: "no node DNS: the runtime's", policy: v1.DNSClusterFirst},
		{name: "ClusterFirst", dns: &lifecycle.NodeDNS{Servers: []string{"10.96.0.10"}, Domain: "cluster.local", ResolvConf: resolv}, policy: v1.DNSClusterFirst,
			want: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local", "example.org"}, Options: []string{"ndots:5"}}},
		{name: "Default", dns: &lifecycle.NodeDNS{Servers: []string{"10.96.0.10"}, Domain: "cluster.local", ResolvConf: resolv}, policy: v1.DNSDefault, want: host},
		{name: "ClusterFirst without cluster DNS", dns: &lifecycle.NodeDNS{ResolvConf: resolv}, policy: v1.DNSClusterFirst, want: host,
			events: []string{"Warning MissingClusterDNS kubelet does not have ClusterDNS", `Warning MissingClusterDNS pod: "web_default(u1)". kubelet does not have ClusterDNS`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, rec := newTestWorkerWith(t, newFakeRT(), "", func(o *Options) { o.DNS, o.NodeName = c.dns, "node-1" })
			pod := testPod("u1", "", "main")
			pod.Spec.DNSPolicy = c.policy
			cfg := mustSandboxConfig(t, w, pod)
			if !reflect.DeepEqual(cfg.DnsConfig, c.want) {
				t.Errorf("DnsConfig = %v, want %v", cfg.DnsConfig, c.want)
			}
			var got []string
			for len(rec.Events) > 0 {
				got = append(got, <-rec.Events)
			}
			if len(got) != len(c.events) {
				t.Fatalf("events %q, want %q", got, c.events)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], c.events[i]) {
					t.Errorf("event %q, want %q…", got[i], c.events[i])
				}
			}
		})
	}
	w, _ := newTestWorkerWith(t, newFakeRT(), "", func(o *Options) { o.DNS = &lifecycle.NodeDNS{ResolvConf: "/nonexistent/resolv.conf"} })
	if _, err := w.SandboxConfig(testPod("u1", "", "main"), "s.slice", 0); err == nil || !strings.Contains(err.Error(), "resolver configuration") {
		t.Errorf("SandboxConfig with an unreadable resolv.conf: %v", err)
	}
}

// TestSandboxHostnameAndHosts: a pod with a subdomain has its FQDN in its hosts file and, with
// setHostnameAsFQDN, as its hostname; one too long for the kernel fails the configuration.
func TestSandboxHostnameAndHosts(t *testing.T) {
	yes := true
	w, _ := newTestWorkerWith(t, newFakeRT(), "", func(o *Options) {
		o.DNS = &lifecycle.NodeDNS{Domain: "cluster.local"}
		o.Images = presentImages{}
	})
	w.opts.HostNetwork = false
	pod := testPod("u1", "", "main")
	pod.Spec.Hostname, pod.Spec.Subdomain = "web-0", "nginx"
	if got := mustSandboxConfig(t, w, pod).Hostname; got != "web-0" {
		t.Errorf("hostname %q, want web-0", got)
	}
	pod.Spec.SetHostnameAsFQDN = &yes
	if got := mustSandboxConfig(t, w, pod).Hostname; got != "web-0.nginx.default.svc.cluster.local" {
		t.Errorf("hostname %q, want the FQDN", got)
	}
	e := w.entry("u1")
	e.podIPs = []string{"10.88.0.7"}
	m, err := w.etcHostsMount(pod, &pod.Spec.Containers[0])
	if err != nil || m == nil {
		t.Fatalf("etcHostsMount = %v, %v", m, err)
	}
	data, err := os.ReadFile(m.HostPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(data), "10.88.0.7\tweb-0.nginx.default.svc.cluster.local\tweb-0\n") {
		t.Errorf("hosts file without the FQDN line:\n%s", data)
	}
	pod.Spec.Hostname = strings.Repeat("h", 40)
	if _, err := w.SandboxConfig(pod, "s.slice", 0); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Errorf("an FQDN of more than 64 characters: %v", err)
	}
}

// TestPortMappings: every port of the app containers, once per name (or unnamed port's
// family, protocol, host IP and numbers), as kubecontainer.MakePortMappings.
func TestPortMappings(t *testing.T) {
	pod := testPod("u1", "", "a", "b")
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Ports: []v1.ContainerPort{{ContainerPort: 1, HostPort: 1}}}}
	pod.Spec.Containers[0].Ports = []v1.ContainerPort{
		{Name: "http", ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP},
		{Name: "http", ContainerPort: 81, HostPort: 8081, Protocol: v1.ProtocolTCP},
		{ContainerPort: 53, HostPort: 5353, Protocol: v1.ProtocolUDP, HostIP: "127.0.0.1"},
		{ContainerPort: 53, HostPort: 5353, Protocol: v1.ProtocolUDP, HostIP: "127.0.0.1"},
		{ContainerPort: 53, HostPort: 5353, Protocol: v1.ProtocolUDP, HostIP: "::1"},
	}
	pod.Spec.Containers[1].Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 9090, Protocol: v1.ProtocolSCTP}}
	want := []*runtimeapi.PortMapping{
		{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: 8080},
		{Protocol: runtimeapi.Protocol_UDP, ContainerPort: 53, HostPort: 5353, HostIp: "127.0.0.1"},
		{Protocol: runtimeapi.Protocol_UDP, ContainerPort: 53, HostPort: 5353, HostIp: "::1"},
		{Protocol: runtimeapi.Protocol_SCTP, ContainerPort: 9090},
	}
	if got := portMappings(pod); !reflect.DeepEqual(got, want) {
		t.Errorf("portMappings =\n%v\nwant\n%v", got, want)
	}
	w, _ := newTestWorker(t, newFakeRT(), "")
	if got := mustSandboxConfig(t, w, pod).PortMappings; len(got) != len(want) {
		t.Errorf("sandbox port mappings %v", got)
	}
}

// TestMountPropagation: translateMountPropagation.
func TestMountPropagation(t *testing.T) {
	mode := func(m v1.MountPropagationMode) *v1.MountPropagationMode { return &m }
	cases := []struct {
		in   *v1.MountPropagationMode
		want runtimeapi.MountPropagation
	}{
		{nil, runtimeapi.MountPropagation_PROPAGATION_PRIVATE},
		{mode(v1.MountPropagationNone), runtimeapi.MountPropagation_PROPAGATION_PRIVATE},
		{mode(v1.MountPropagationHostToContainer), runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
		{mode(v1.MountPropagationBidirectional), runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL},
	}
	for _, c := range cases {
		if got := mountPropagation(c.in); got != c.want {
			t.Errorf("mountPropagation(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	w, _ := newTestWorker(t, newFakeRT(), "")
	pod := testPod("u1", "", "main")
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "root", MountPath: "/host", MountPropagation: mode(v1.MountPropagationHostToContainer)}}
	cfg, err := w.ContainerConfig(pod, &pod.Spec.Containers[0], 0, "", map[string]string{"root": "/"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Mounts) == 0 || cfg.Mounts[0].Propagation != runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER {
		t.Errorf("mounts %v", cfg.Mounts)
	}
}

// TestValidateOnNodeNetwork: on a node that runs pods in its own network namespace, a pod
// without spec.hostNetwork cannot have a port mapped elsewhere, a host IP, or a hostname of its
// own; with spec.hostNetwork it asks for the node's and gets it.
func TestValidateOnNodeNetwork(t *testing.T) {
	yes := true
	cases := []struct {
		name        string
		mod         func(*v1.Pod)
		hostNetwork bool
		want        []string
	}{
		{"plain pod", func(*v1.Pod) {}, true, nil},
		{"hostPort equal to containerPort", func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
		}, true, nil},
		{"hostPort mapped, hostIP", func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, HostIP: "127.0.0.1"}}
		}, true, []string{"spec.containers[0].ports[0].hostPort: Forbidden: pods run in the node's network", "spec.containers[0].ports[0].hostIP: Forbidden"}},
		{"hostname, subdomain, setHostnameAsFQDN", func(p *v1.Pod) {
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "web-0", "nginx", &yes
		}, true, []string{"spec.hostname: Forbidden", "spec.subdomain: Forbidden", "spec.setHostnameAsFQDN: Forbidden"}},
		{"spec.hostNetwork asks for the node's", func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Hostname, p.Spec.Subdomain = "web-0", "nginx"
		}, true, nil},
		{"a network of its own", func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, HostIP: "127.0.0.1"}}
			p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "web-0", "nginx", &yes
		}, false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := testPod("u1", "", "main")
			c.mod(pod)
			errs := ValidateSpec(pod, c.hostNetwork)
			if len(errs) != len(c.want) {
				t.Fatalf("errors %v, want %v", errs, c.want)
			}
			for i, w := range c.want {
				if !strings.HasPrefix(errs[i].Error(), w) {
					t.Errorf("error %q, want %q…", errs[i], w)
				}
			}
		})
	}
}
