package worker

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// etcHostsMount writes the pod's hosts file (StateDir/pods/<uid>/etc-hosts, 0644; the node's
// own with its hostAliases on the host's network, else the kubelet's managed file with the pod
// IPs and hostname, and its FQDN when it has a subdomain, lifecycle.EtcHosts) and returns its mount at /etc/hosts, as the kubelet's
// makeHostsMount does before each container is created; nil when the container gets none
// (lifecycle.MountsEtcHosts) and for a runtime without images (systemdrt runs host commands,
// which see the host's file).
func (w *Worker) etcHostsMount(pod *v1.Pod, c *v1.Container) (*runtimeapi.Mount, error) {
	hostNetwork := w.hostNetwork(pod)
	ips := w.podIPs(pod)
	if w.opts.Images == nil || !lifecycle.MountsEtcHosts(c, hostNetwork, ips) {
		return nil, nil
	}
	var node []byte
	if hostNetwork {
		var err error
		if node, err = os.ReadFile(w.opts.EtcHosts); err != nil {
			return nil, fmt.Errorf("hosts file: %w", err)
		}
	}
	path := filepath.Join(w.podDir(string(pod.UID)), "etc-hosts")
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("hosts file: %w", err)
	}
	content := lifecycle.EtcHosts(node, hostNetwork, ips, lifecycle.PodHostname(pod), w.podDomain(pod), pod.Spec.HostAliases)
	if err := os.WriteFile(path, content, 0o644); err != nil {
		return nil, fmt.Errorf("hosts file: %w", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		return nil, fmt.Errorf("hosts file: %w", err)
	}
	return &runtimeapi.Mount{ContainerPath: lifecycle.EtcHostsPath, HostPath: path}, nil
}
