package lifecycle

import (
	"bytes"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// EtcHostsPath is where a container's hosts file is mounted.
const EtcHostsPath = "/etc/hosts"

// The headers of the hosts files the kubelet writes (pkg/kubelet/kubelet_pods.go).
const (
	managedHostsHeader                = "# Kubernetes-managed hosts file.\n"
	managedHostsHeaderWithHostNetwork = "# Kubernetes-managed hosts file (host network).\n"
)

// PodHostname is the pod's hostname: spec.hostname, else its name, at most 63 characters (the
// kubelet's GeneratePodHostNameAndDomain and truncatePodHostnameIfNeeded).
func PodHostname(pod *v1.Pod) string {
	h := pod.Name
	if pod.Spec.Hostname != "" {
		h = pod.Spec.Hostname
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

// MountsEtcHosts reports whether container c gets the pod's hosts file: the kubelet mounts it
// once the pod has an IP (always on the host's network), unless the container mounts a volume
// at /etc/hosts itself (shouldMountHostsFile and makeMounts).
func MountsEtcHosts(c *v1.Container, hostNetwork bool, ips []string) bool {
	if !hostNetwork && (len(ips) == 0 || ips[0] == "") {
		return false
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath == EtcHostsPath {
			return false
		}
	}
	return true
}

// EtcHosts is the content of a pod's hosts file, as the kubelet's ensureHostsFile: on the
// host's network the node's own file (node) under the "(host network)" header; otherwise the
// managed file: localhost entries, then each pod IP with the hostname (and its FQDN when
// domain is set); then the pod's hostAliases.
func EtcHosts(node []byte, hostNetwork bool, ips []string, hostname, domain string, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	if hostNetwork {
		b.WriteString(managedHostsHeaderWithHostNetwork)
		b.Write(node)
	} else {
		b.WriteString(managedHostsHeader)
		b.WriteString("127.0.0.1\tlocalhost\n")
		b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
		b.WriteString("fe00::0\tip6-localnet\n")
		b.WriteString("fe00::0\tip6-mcastprefix\n")
		b.WriteString("fe00::1\tip6-allnodes\n")
		b.WriteString("fe00::2\tip6-allrouters\n")
		for _, ip := range ips {
			if domain != "" {
				fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
			} else {
				fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
			}
		}
	}
	if len(aliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range aliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	return b.Bytes()
}
