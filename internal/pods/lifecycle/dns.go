package lifecycle

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// The resolver limits the API validates a pod's dnsConfig against and the kubelet cuts a pod's
// resolver configuration to (pkg/apis/core/validation: MaxDNSNameservers, MaxDNSSearchPaths,
// MaxDNSSearchListChars), and the longest search domain glibc resolvers take (a DNS subdomain,
// 253 characters).
const (
	MaxDNSNameservers     = 3
	MaxDNSSearchPaths     = 32
	MaxDNSSearchListChars = 2048
	maxSearchDomainLength = 253
)

// MaxResolvConfBytes bounds the host resolv.conf the kubelet reads (maxResolvConfLength).
const MaxResolvConfBytes = 10 << 20

// defaultDNSOptions are the options of a pod with cluster DNS (pkg/kubelet/network/dns).
var defaultDNSOptions = []string{"ndots:5"}

// The events the kubelet records while it forms a pod's resolver configuration
// (pkg/kubelet/network/dns/dns.go).
const (
	EventMissingClusterDNS = "MissingClusterDNS"
	EventDNSConfigForming  = "DNSConfigForming"
)

// NodeDNS is the node's DNS settings: the kubelet's clusterDNS, clusterDomain and resolvConf.
type NodeDNS struct {
	// Servers are the cluster DNS servers' IPs, the only nameservers of a ClusterFirst pod;
	// none means a ClusterFirst pod falls back to Default, with a MissingClusterDNS event.
	Servers []string
	// Domain is the cluster's DNS domain (cluster.local): ClusterFirst pods search
	// <namespace>.svc.<domain>, svc.<domain> and <domain> first; a pod's subdomain makes its
	// FQDN <hostname>.<subdomain>.<namespace>.svc.<domain>.
	Domain string
	// ResolvConf is the path of the host resolver configuration pods start from; "" means
	// none, and a Default pod then resolves through the node itself (127.0.0.1, ::1), as the
	// kubelet with --resolv-conf="".
	ResolvConf string
}

// DNSConfig is a pod's resolver configuration: its resolv.conf's nameserver, search and
// options lines (the CRI's DNSConfig).
type DNSConfig struct {
	Servers  []string
	Searches []string
	Options  []string
}

// DNSEvent is a Warning event the kubelet records while forming a pod's resolver
// configuration. Node events are about the node (its reference); the others about the pod.
type DNSEvent struct {
	Reason, Message string
	Node            bool
}

// ParseResolvConf reads a resolv.conf as the kubelet does (parseResolvConf): nameserver lines
// accumulate, the last search line wins (its domains without a trailing dot, "." dropped),
// options accumulate with a later option replacing an earlier one of the same name; '#'
// comments and other lines are ignored. A nameserver line without an address is an error; the
// rest is still returned. Input beyond MaxResolvConfBytes is an error.
func ParseResolvConf(data []byte) (DNSConfig, error) {
	if len(data) > MaxResolvConfBytes {
		return DNSConfig{}, fmt.Errorf("resolv.conf of %d bytes: more than %d", len(data), MaxResolvConfBytes)
	}
	cfg := DNSConfig{Servers: []string{}, Searches: []string{}, Options: []string{}}
	var errs []error
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "nameserver":
			if len(fields) < 2 {
				errs = append(errs, errors.New("nameserver list is empty"))
				continue
			}
			cfg.Servers = append(cfg.Servers, fields[1])
		case "search":
			cfg.Searches = []string{}
			for _, s := range fields[1:] {
				if s != "." {
					cfg.Searches = append(cfg.Searches, strings.TrimSuffix(s, "."))
				}
			}
		case "options":
			cfg.Options = mergeOptions(cfg.Options, fields[1:])
		}
	}
	return cfg, errors.Join(errs...)
}

// ResolvConf is the resolv.conf of a pod's resolver configuration, as containerd writes it for a
// sandbox: the search line, one nameserver line each, the options line.
func ResolvConf(c DNSConfig) []byte {
	var b bytes.Buffer
	if len(c.Searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(c.Searches, " "))
	}
	for _, s := range c.Servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	if len(c.Options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(c.Options, " "))
	}
	return b.Bytes()
}

// podDNSType is how a pod's resolver configuration starts (getPodDNSType).
type podDNSType int

const (
	podDNSCluster podDNSType = iota
	podDNSHost
	podDNSNone
)

// dnsType is the pod's DNS type: ClusterFirstWithHostNet and ClusterFirst off the host's
// network take the cluster's DNS, ClusterFirst on the host's network and Default the host's,
// None nothing; an unknown policy (the API refuses one) is ClusterFirst, as the kubelet falls
// back.
func dnsType(pod *v1.Pod) podDNSType {
	switch pod.Spec.DNSPolicy {
	case v1.DNSNone:
		return podDNSNone
	case v1.DNSClusterFirstWithHostNet:
		return podDNSCluster
	case v1.DNSClusterFirst:
		if pod.Spec.HostNetwork {
			return podDNSHost
		}
		return podDNSCluster
	case v1.DNSDefault:
		return podDNSHost
	}
	return podDNSCluster
}

// UsesClusterDNS reports whether the pod's resolver configuration would be the cluster's DNS
// (ClusterFirst off the host's network, ClusterFirstWithHostNet) given cluster DNS servers.
func UsesClusterDNS(pod *v1.Pod) bool { return dnsType(pod) == podDNSCluster }

// PodDNS is the pod's resolver configuration, as the kubelet's GetPodDNS forms it
// (pkg/kubelet/network/dns/dns.go), with host the node's resolver configuration read from
// node.ResolvConf (ParseResolvConf; empty when there is none) and nodeIPs the node's IPs:
//   - None: nothing but the pod's dnsConfig;
//   - ClusterFirst off the host's network and ClusterFirstWithHostNet, with cluster DNS
//     servers: those servers, the cluster's search domains (<namespace>.svc.<domain>,
//     svc.<domain>, <domain>) before the host's, options ndots:5;
//   - the same without cluster DNS servers: the MissingClusterDNS events (about the node and
//     the pod), then as Default;
//   - Default (and ClusterFirst on the host's network): the host's; without a host resolver
//     configuration (node.ResolvConf "") the node itself, 127.0.0.1 (::1 for an IPv6 node IP)
//     per node IP, search ".";
//
// then the pod's dnsConfig appended (nameservers and searches without repeats, options merged
// by name, the pod's winning), and the result cut to the resolver limits (3 nameservers, 32
// search domains of at most 253 characters, 2048 characters of search line), each cut
// reported by a DNSConfigForming event. The options keep the order they were first given in
// (the kubelet's come in map order).
func PodDNS(pod *v1.Pod, node NodeDNS, host DNSConfig, nodeIPs []string) (DNSConfig, []DNSEvent) {
	var events []DNSEvent
	cfg := DNSConfig{
		Servers:  append([]string(nil), host.Servers...),
		Searches: append([]string(nil), host.Searches...),
		Options:  append([]string(nil), host.Options...),
	}
	t := dnsType(pod)
	switch {
	case t == podDNSNone:
		cfg = DNSConfig{}
	case t == podDNSCluster && len(node.Servers) > 0:
		cfg.Servers = append([]string(nil), node.Servers...)
		cfg.Searches = clusterSearches(cfg.Searches, pod.Namespace, node.Domain)
		cfg.Options = append([]string(nil), defaultDNSOptions...)
	default:
		if t == podDNSCluster {
			msg := fmt.Sprintf("kubelet does not have ClusterDNS IP configured and cannot create Pod using %q policy. Falling back to %q policy.", v1.DNSClusterFirst, v1.DNSDefault)
			events = append(events,
				DNSEvent{Reason: EventMissingClusterDNS, Message: msg, Node: true},
				DNSEvent{Reason: EventMissingClusterDNS, Message: fmt.Sprintf("pod: %q. %s", fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID), msg)})
		}
		if node.ResolvConf == "" {
			for _, ip := range nodeIPs {
				if p := net.ParseIP(ip); p != nil && p.To4() == nil {
					cfg.Servers = append(cfg.Servers, "::1")
				} else {
					cfg.Servers = append(cfg.Servers, "127.0.0.1")
				}
			}
			if len(cfg.Servers) == 0 {
				cfg.Servers = append(cfg.Servers, "127.0.0.1")
			}
			cfg.Searches = []string{"."}
		}
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.Servers = omitDuplicates(append(cfg.Servers, dc.Nameservers...))
		cfg.Searches = omitDuplicates(append(cfg.Searches, dc.Searches...))
		var opts []string
		for _, o := range dc.Options {
			if o.Value != nil && *o.Value != "" {
				opts = append(opts, o.Name+":"+*o.Value)
			} else {
				opts = append(opts, o.Name)
			}
		}
		cfg.Options = mergeOptions(cfg.Options, opts)
	}
	if len(cfg.Servers) > MaxDNSNameservers {
		cfg.Servers = cfg.Servers[:MaxDNSNameservers]
		events = append(events, DNSEvent{Reason: EventDNSConfigForming,
			Message: "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: " + strings.Join(cfg.Servers, " ")})
	}
	var cut bool
	if cfg.Searches, cut = searchesWithinLimits(cfg.Searches); cut {
		events = append(events, DNSEvent{Reason: EventDNSConfigForming,
			Message: "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: " + strings.Join(cfg.Searches, " ")})
	}
	return cfg, events
}

// clusterSearches are the search domains of a ClusterFirst pod: the cluster's before the
// host's, without repeats (generateSearchesForDNSClusterFirst); the host's alone without a
// cluster domain.
func clusterSearches(host []string, namespace, domain string) []string {
	if domain == "" {
		return host
	}
	return omitDuplicates(append([]string{namespace + ".svc." + domain, "svc." + domain, domain}, host...))
}

// searchesWithinLimits cuts search domains to the limits as formDNSSearchFitsLimits does: at
// most MaxDNSSearchPaths, none longer than 253 characters, then domains off the end until the
// line fits MaxDNSSearchListChars. cut says whether anything was left out.
func searchesWithinLimits(s []string) ([]string, bool) {
	cut := false
	if len(s) > MaxDNSSearchPaths {
		s, cut = s[:MaxDNSSearchPaths], true
	}
	kept := s[:0:0]
	for _, d := range s {
		if len(d) > maxSearchDomainLength {
			cut = true
			continue
		}
		kept = append(kept, d)
	}
	s = kept
	for len(s) > 0 && len(strings.Join(s, " ")) > MaxDNSSearchListChars {
		s, cut = s[:len(s)-1], true
	}
	return s, cut
}

// omitDuplicates keeps the first of each string.
func omitDuplicates(in []string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// mergeOptions adds options ("name" or "name:value") to existing ones: an option of a name
// already there replaces it in place, a new one goes at the end (the kubelet's appendOptions
// and mergeDNSOptions, in a stable order).
func mergeOptions(existing, add []string) []string {
	out := append([]string{}, existing...)
	at := map[string]int{}
	for i, o := range out {
		name, _, _ := strings.Cut(o, ":")
		at[name] = i
	}
	for _, o := range add {
		name, _, _ := strings.Cut(o, ":")
		if i, ok := at[name]; ok {
			out[i] = o
			continue
		}
		at[name] = len(out)
		out = append(out, o)
	}
	return out
}

// PodDomain is the pod's DNS domain: <subdomain>.<namespace>.svc.<cluster domain> when it has a
// subdomain, else "" (the kubelet's GeneratePodHostNameAndDomain; with no cluster domain the
// kubelet's too, ending in "svc.").
func PodDomain(pod *v1.Pod, clusterDomain string) string {
	if pod.Spec.Subdomain == "" {
		return ""
	}
	return pod.Spec.Subdomain + "." + pod.Namespace + ".svc." + clusterDomain
}

// maxKernelHostname is the longest FQDN the kernel's nodename holds (64 bytes with the NUL).
const maxKernelHostname = 64

// KernelHostname is the hostname the pod's sandbox gets: its hostname, or with
// setHostnameAsFQDN and a domain its FQDN, which must fit the kernel's nodename (64
// characters), else an error (pkg/kubelet/util GetNodenameForKernel).
func KernelHostname(hostname, domain string, setHostnameAsFQDN *bool) (string, error) {
	if domain == "" || setHostnameAsFQDN == nil || !*setHostnameAsFQDN {
		return hostname, nil
	}
	fqdn := hostname + "." + domain
	if len(fqdn) > maxKernelHostname {
		return "", fmt.Errorf("failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (%d characters is the max, %d characters requested)", fqdn, maxKernelHostname, len(fqdn))
	}
	return fqdn, nil
}
