package lifecycle

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestParseResolvConf: the kubelet's cases (pkg/kubelet/network/dns/dns_test.go,
// TestParseResolvConf); options in the order first given.
func TestParseResolvConf(t *testing.T) {
	tests := []struct {
		data              string
		servers, searches []string
		options           []string
		wantErr           bool
	}{
		{data: ""},
		{data: " "},
		{data: "\t\n\t"},
		{data: " #comment\n"},
		{data: "#comment\nnameserver", wantErr: true},
		{data: "#comment\nnameserver\nsearch", wantErr: true},
		{data: "#comment\nnameserver 1.2.3.4\nsearch", servers: []string{"1.2.3.4"}},
		{data: "nameserver\t1.2.3.4", servers: []string{"1.2.3.4"}},
		{data: "nameserver \t 1.2.3.4", servers: []string{"1.2.3.4"}},
		{data: "nameserver 1.2.3.4\nnameserver 5.6.7.8", servers: []string{"1.2.3.4", "5.6.7.8"}},
		{data: "nameserver 1.2.3.4 #comment", servers: []string{"1.2.3.4"}},
		{data: "search ."},
		{data: "search . foo", searches: []string{"foo"}},
		{data: "search foo .  bar", searches: []string{"foo", "bar"}},
		{data: "search foo. bar", searches: []string{"foo", "bar"}},
		{data: "search foo\nsearch bar", searches: []string{"bar"}},
		{data: "nameserver 1.2.3.4\nsearch foo\nnameserver 5.6.7.8\nsearch bar", servers: []string{"1.2.3.4", "5.6.7.8"}, searches: []string{"bar"}},
		{data: "#comment\nnameserver 1.2.3.4\n#comment\nsearch foo\ncomment", servers: []string{"1.2.3.4"}, searches: []string{"foo"}},
		{data: "options ndots:5 attempts:2", options: []string{"ndots:5", "attempts:2"}},
		{data: "options ndots:1 ndots:5 attempts:2", options: []string{"ndots:5", "attempts:2"}},
		{data: "options ndots:1 edns0 attempts:2 single-request-reopen", options: []string{"ndots:1", "edns0", "attempts:2", "single-request-reopen"}},
		{data: "options ndots:1\noptions ndots:5 attempts:3", options: []string{"ndots:5", "attempts:3"}},
		{data: "options ndots:1 timeout:3 timeout:1 attempts:3\noptions ndots:5", options: []string{"ndots:5", "timeout:1", "attempts:3"}},
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.data), func(t *testing.T) {
			got, err := ParseResolvConf([]byte(tt.data))
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error %v", err, tt.wantErr)
			}
			if !equal(got.Servers, tt.servers) || !equal(got.Searches, tt.searches) || !equal(got.Options, tt.options) {
				t.Errorf("ParseResolvConf = %+v, want servers %v searches %v options %v", got, tt.servers, tt.searches, tt.options)
			}
		})
	}
	if _, err := ParseResolvConf(make([]byte, MaxResolvConfBytes+1)); err == nil {
		t.Error("a resolv.conf over the bound parsed")
	}
}

// equal compares string lists, nil and empty alike.
func equal(a, b []string) bool {
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}

// TestSearchesWithinLimits: the kubelet's TestFormDNSSearchFitsLimits cases.
func TestSearchesWithinLimits(t *testing.T) {
	var list2048 []string // 2048 = 128 + 127*15 + 15 separators
	list2048 = append(list2048, strings.Repeat("A", 128))
	for range 15 {
		list2048 = append(list2048, strings.Repeat("A", 127))
	}
	var thirtyTwo []string
	for i := range 32 {
		thirtyTwo = append(thirtyTwo, strconv.Itoa(i+1))
	}
	tests := []struct {
		name     string
		in, want []string
		cut      bool
	}{
		{name: "3 search paths", in: []string{"ns.svc.TEST", "svc.TEST", "TEST"}, want: []string{"ns.svc.TEST", "svc.TEST", "TEST"}},
		{name: "a search path of 256 characters", in: []string{"TEST", "AAA", strings.Repeat("B", 256), "BBB"}, want: []string{"TEST", "AAA", "BBB"}, cut: true},
		{name: "2048 characters", in: list2048, want: list2048},
		{name: "2050 characters", in: append(append([]string(nil), list2048...), "B"), want: list2048, cut: true},
		{name: "32 search paths", in: thirtyTwo, want: thirtyTwo},
		{name: "33 search paths", in: append(append([]string(nil), thirtyTwo...), "33"), want: thirtyTwo, cut: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cut := searchesWithinLimits(append([]string(nil), tt.in...))
			if !equal(got, tt.want) || cut != tt.cut {
				t.Errorf("searchesWithinLimits = %d domains, cut %v; want %d, cut %v", len(got), cut, len(tt.want), tt.cut)
			}
		})
	}
}

func TestMergeOptions(t *testing.T) {
	tests := []struct {
		name          string
		existing, add []string
		want          []string
	}{
		{name: "nothing added", existing: []string{"ndots:5", "debug"}, want: []string{"ndots:5", "debug"}},
		{name: "no duplicates", existing: []string{"ndots:5", "debug"}, add: []string{"single-request", "attempts:3"}, want: []string{"ndots:5", "debug", "single-request", "attempts:3"}},
		{name: "duplicates replaced in place", existing: []string{"ndots:5", "debug"}, add: []string{"ndots:3", "debug", "single-request", "attempts:3"}, want: []string{"ndots:3", "debug", "single-request", "attempts:3"}},
		{name: "a value dropped", existing: []string{"ndots:5"}, add: []string{"ndots"}, want: []string{"ndots"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mergeOptions(tt.existing, tt.add); !equal(got, tt.want) {
				t.Errorf("mergeOptions = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPodDNS: the kubelet's TestGetPodDNS and TestGetPodDNSCustom cases, the fallback without
// cluster DNS and its events, and the limits.
func TestPodDNS(t *testing.T) {
	three := "3"
	host := DNSConfig{Servers: []string{"192.0.2.53"}, Searches: []string{"host.example"}, Options: []string{"edns0"}}
	cluster := NodeDNS{Servers: []string{"10.0.0.10"}, Domain: "kubernetes.io", ResolvConf: "/etc/resolv.conf"}
	custom := &v1.PodDNSConfig{Nameservers: []string{"10.0.0.11"}, Searches: []string{"my.domain"},
		Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: &three}, {Name: "debug"}}}
	clusterSearch := []string{"testNS.svc.kubernetes.io", "svc.kubernetes.io", "kubernetes.io"}
	missing := `kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.`
	tests := []struct {
		name        string
		policy      v1.DNSPolicy
		hostNetwork bool
		dnsConfig   *v1.PodDNSConfig
		node        NodeDNS
		host        DNSConfig
		nodeIPs     []string
		want        DNSConfig
		events      []DNSEvent
	}{
		{name: "ClusterFirst", policy: v1.DNSClusterFirst, node: cluster, host: host,
			want: DNSConfig{Servers: []string{"10.0.0.10"}, Searches: append(clusterSearch, "host.example"), Options: []string{"ndots:5"}}},
		{name: "ClusterFirst on the host's network is Default", policy: v1.DNSClusterFirst, hostNetwork: true, node: cluster, host: host, want: host},
		{name: "ClusterFirstWithHostNet", policy: v1.DNSClusterFirstWithHostNet, hostNetwork: true, node: cluster, host: host,
			want: DNSConfig{Servers: []string{"10.0.0.10"}, Searches: append(clusterSearch, "host.example"), Options: []string{"ndots:5"}}},
		{name: "Default", policy: v1.DNSDefault, node: cluster, host: host, want: host},
		{name: "None without dnsConfig", policy: v1.DNSNone, node: cluster, host: host, want: DNSConfig{}},
		{name: "None with dnsConfig", policy: v1.DNSNone, node: cluster, host: host, dnsConfig: custom,
			want: DNSConfig{Servers: []string{"10.0.0.11"}, Searches: []string{"my.domain"}, Options: []string{"ndots:3", "debug"}}},
		{name: "ClusterFirst with dnsConfig", policy: v1.DNSClusterFirst, node: cluster, host: host, dnsConfig: custom,
			want: DNSConfig{Servers: []string{"10.0.0.10", "10.0.0.11"}, Searches: append(clusterSearch, "host.example", "my.domain"), Options: []string{"ndots:3", "debug"}}},
		{name: "ClusterFirstWithHostNet with dnsConfig", policy: v1.DNSClusterFirstWithHostNet, hostNetwork: true, node: cluster, host: host, dnsConfig: custom,
			want: DNSConfig{Servers: []string{"10.0.0.10", "10.0.0.11"}, Searches: append(clusterSearch, "host.example", "my.domain"), Options: []string{"ndots:3", "debug"}}},
		{name: "Default with dnsConfig", policy: v1.DNSDefault, node: cluster, host: host, dnsConfig: custom,
			want: DNSConfig{Servers: []string{"192.0.2.53", "10.0.0.11"}, Searches: []string{"host.example", "my.domain"}, Options: []string{"edns0", "ndots:3", "debug"}}},
		{name: "ClusterFirst without a cluster domain", policy: v1.DNSClusterFirst, node: NodeDNS{Servers: []string{"10.0.0.10"}, ResolvConf: "/etc/resolv.conf"}, host: host,
			want: DNSConfig{Servers: []string{"10.0.0.10"}, Searches: []string{"host.example"}, Options: []string{"ndots:5"}}},
		{name: "ClusterFirst, cluster domain in the host's search list once", policy: v1.DNSClusterFirst, node: cluster,
			host: DNSConfig{Searches: []string{"kubernetes.io", "other"}},
			want: DNSConfig{Servers: []string{"10.0.0.10"}, Searches: append(clusterSearch, "other"), Options: []string{"ndots:5"}}},
		{name: "ClusterFirst without cluster DNS falls back to Default", policy: v1.DNSClusterFirst, node: NodeDNS{ResolvConf: "/etc/resolv.conf"}, host: host, want: host,
			events: []DNSEvent{{Reason: EventMissingClusterDNS, Message: missing, Node: true}, {Reason: EventMissingClusterDNS, Message: `pod: "pod_testNS(uid-1)". ` + missing}}},
		{name: "without a host resolv.conf: the node itself", policy: v1.DNSDefault, node: NodeDNS{}, nodeIPs: []string{"192.0.2.1", "2001:db8::1"},
			want: DNSConfig{Servers: []string{"127.0.0.1", "::1"}, Searches: []string{"."}}},
		{name: "without a host resolv.conf or node IPs", policy: v1.DNSDefault, node: NodeDNS{},
			want: DNSConfig{Servers: []string{"127.0.0.1"}, Searches: []string{"."}}},
		{name: "ClusterFirst with cluster DNS and no host resolv.conf", policy: v1.DNSClusterFirst, node: NodeDNS{Servers: []string{"10.0.0.10"}, Domain: "kubernetes.io"},
			want: DNSConfig{Servers: []string{"10.0.0.10"}, Searches: clusterSearch, Options: []string{"ndots:5"}}},
		{name: "nameservers cut to 3", policy: v1.DNSDefault, node: cluster, host: DNSConfig{Servers: []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"}},
			dnsConfig: &v1.PodDNSConfig{Nameservers: []string{"192.0.2.4", "192.0.2.1"}},
			want:      DNSConfig{Servers: []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"}},
			events:    []DNSEvent{{Reason: EventDNSConfigForming, Message: "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 192.0.2.1 192.0.2.2 192.0.2.3"}}},
		{name: "searches cut to 32", policy: v1.DNSClusterFirst, node: cluster, host: DNSConfig{Searches: numbered(30)},
			want:   DNSConfig{Servers: []string{"10.0.0.10"}, Searches: append(append([]string(nil), clusterSearch...), numbered(29)...), Options: []string{"ndots:5"}},
			events: []DNSEvent{{Reason: EventDNSConfigForming, Message: "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: " + strings.Join(append(append([]string(nil), clusterSearch...), numbered(29)...), " ")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod", Namespace: "testNS", UID: "uid-1"},
				Spec: v1.PodSpec{DNSPolicy: tt.policy, HostNetwork: tt.hostNetwork, DNSConfig: tt.dnsConfig}}
			host := DNSConfig{Servers: append([]string(nil), tt.host.Servers...), Searches: append([]string(nil), tt.host.Searches...), Options: append([]string(nil), tt.host.Options...)}
			got, events := PodDNS(pod, tt.node, host, tt.nodeIPs)
			if !equal(got.Servers, tt.want.Servers) || !equal(got.Searches, tt.want.Searches) || !equal(got.Options, tt.want.Options) {
				t.Errorf("PodDNS =\n%+v\nwant\n%+v", got, tt.want)
			}
			if len(events) != len(tt.events) || (len(events) > 0 && !reflect.DeepEqual(events, tt.events)) {
				t.Errorf("events =\n%+v\nwant\n%+v", events, tt.events)
			}
			if !equal(host.Servers, tt.host.Servers) || !equal(host.Searches, tt.host.Searches) || !equal(host.Options, tt.host.Options) {
				t.Errorf("PodDNS changed the host's configuration: %+v", host)
			}
		})
	}
}

func numbered(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("d%d.example", i))
	}
	return out
}

func TestResolvConf(t *testing.T) {
	got := string(ResolvConf(DNSConfig{Servers: []string{"10.96.0.10", "10.0.0.11"}, Searches: []string{"ns.svc.cluster.local", "svc.cluster.local"}, Options: []string{"ndots:5", "edns0"}}))
	want := "search ns.svc.cluster.local svc.cluster.local\nnameserver 10.96.0.10\nnameserver 10.0.0.11\noptions ndots:5 edns0\n"
	if got != want {
		t.Errorf("ResolvConf =\n%s\nwant\n%s", got, want)
	}
	if got := ResolvConf(DNSConfig{}); len(got) != 0 {
		t.Errorf("ResolvConf of nothing = %q", got)
	}
	back, err := ParseResolvConf([]byte(want))
	if err != nil || back.Servers[1] != "10.0.0.11" || back.Searches[0] != "ns.svc.cluster.local" || back.Options[1] != "edns0" {
		t.Errorf("ResolvConf does not read back: %+v, %v", back, err)
	}
}

// TestPodDomainAndKernelHostname: the kubelet's GeneratePodHostNameAndDomain and
// GetNodenameForKernel cases (pkg/kubelet/kubelet_pods_test.go, pkg/kubelet/util/util_test.go).
func TestPodDomainAndKernelHostname(t *testing.T) {
	yes, no := true, false
	long := strings.Repeat("a", 40)
	tests := []struct {
		name, subdomain, domain string
		hostname                string
		fqdn                    *bool
		wantDomain, wantKernel  string
		wantErr                 bool
	}{
		{name: "no subdomain", hostname: "web-0", domain: "cluster.local", wantKernel: "web-0"},
		{name: "subdomain", hostname: "web-0", subdomain: "nginx", domain: "cluster.local", wantDomain: "nginx.ns.svc.cluster.local", wantKernel: "web-0"},
		{name: "subdomain, setHostnameAsFQDN false", hostname: "web-0", subdomain: "nginx", domain: "cluster.local", fqdn: &no, wantDomain: "nginx.ns.svc.cluster.local", wantKernel: "web-0"},
		{name: "setHostnameAsFQDN", hostname: "web-0", subdomain: "nginx", domain: "cluster.local", fqdn: &yes, wantDomain: "nginx.ns.svc.cluster.local", wantKernel: "web-0.nginx.ns.svc.cluster.local"},
		{name: "setHostnameAsFQDN without subdomain", hostname: "web-0", domain: "cluster.local", fqdn: &yes, wantKernel: "web-0"},
		{name: "FQDN of 64 characters", hostname: strings.Repeat("a", 33), subdomain: "nginx", domain: "cluster.local", fqdn: &yes,
			wantDomain: "nginx.ns.svc.cluster.local", wantKernel: strings.Repeat("a", 33) + ".nginx.ns.svc.cluster.local"},
		{name: "FQDN too long", hostname: long, subdomain: "nginx", domain: "cluster.local", fqdn: &yes, wantDomain: "nginx.ns.svc.cluster.local", wantErr: true},
		{name: "no cluster domain", hostname: "web-0", subdomain: "nginx", wantDomain: "nginx.ns.svc.", wantKernel: "web-0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tt.hostname, Namespace: "ns"}, Spec: v1.PodSpec{Subdomain: tt.subdomain, SetHostnameAsFQDN: tt.fqdn}}
			d := PodDomain(pod, tt.domain)
			if d != tt.wantDomain {
				t.Errorf("PodDomain = %q, want %q", d, tt.wantDomain)
			}
			k, err := KernelHostname(PodHostname(pod), d, tt.fqdn)
			if (err != nil) != tt.wantErr || k != tt.wantKernel {
				t.Errorf("KernelHostname = %q, %v; want %q, error %v", k, err, tt.wantKernel, tt.wantErr)
			}
		})
	}
}
