package worker

import (
	"fmt"
	"io"
	"net"
	"os"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// podDNS is the sandbox's resolver configuration (the kubelet's GetPodDNS, lifecycle.PodDNS)
// with the host's read from Options.DNS.ResolvConf now, as the kubelet reads it for every
// sandbox configuration; its events are recorded (MissingClusterDNS about the node and the pod,
// DNSConfigForming about the pod). nil without Options.DNS: the runtime's own default.
func (w *Worker) podDNS(pod *v1.Pod) (*runtimeapi.DNSConfig, error) {
	node := w.opts.DNS
	if node == nil {
		return nil, nil
	}
	var host lifecycle.DNSConfig
	if node.ResolvConf != "" {
		f, err := os.Open(node.ResolvConf)
		if err != nil {
			return nil, fmt.Errorf("resolver configuration: %w", err)
		}
		data, err := io.ReadAll(io.LimitReader(f, lifecycle.MaxResolvConfBytes+1))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("resolver configuration: %w", err)
		}
		if host, err = lifecycle.ParseResolvConf(data); err != nil {
			return nil, fmt.Errorf("resolver configuration %s: %w", node.ResolvConf, err)
		}
	}
	cfg, events := lifecycle.PodDNS(pod, *node, host, w.opts.NodeIPs)
	for _, e := range events {
		if e.Node {
			if w.opts.NodeName != "" {
				w.events.Eventf(nodeRef(w.opts.NodeName), v1.EventTypeWarning, e.Reason, "%s", e.Message)
			}
			continue
		}
		w.podEvent(pod, v1.EventTypeWarning, e.Reason, "%s", e.Message)
	}
	return &runtimeapi.DNSConfig{Servers: cfg.Servers, Searches: cfg.Searches, Options: cfg.Options}, nil
}

// nodeRef is the kubelet's reference to its Node in events: kind Node, the node's name as its
// UID, no namespace (pkg/kubelet/kubelet.go).
func nodeRef(node string) *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node)}
}

// sandboxHostname is the hostname of a sandbox with a network namespace of its own: the pod's
// hostname, its FQDN with setHostnameAsFQDN (lifecycle.KernelHostname); the kubelet's
// GeneratePodHostNameAndDomain with GetNodenameForKernel.
func (w *Worker) sandboxHostname(pod *v1.Pod) (string, error) {
	return lifecycle.KernelHostname(lifecycle.PodHostname(pod), w.podDomain(pod), pod.Spec.SetHostnameAsFQDN)
}

// podDomain is the pod's DNS domain with the node's cluster domain (lifecycle.PodDomain).
func (w *Worker) podDomain(pod *v1.Pod) string {
	domain := ""
	if w.opts.DNS != nil {
		domain = w.opts.DNS.Domain
	}
	return lifecycle.PodDomain(pod, domain)
}

// portMappings are the sandbox's port mappings: every port of the pod's containers, as the
// kubelet's generatePodSandboxConfig lists them (kubecontainer.MakePortMappings: a port name,
// or for an unnamed port its address family, protocol, host IP and port numbers, at most once
// per container). The runtime maps those with a hostPort (containerd through the CNI portmap
// plugin); the pod's network namespace must be its own for that.
func portMappings(pod *v1.Pod) []*runtimeapi.PortMapping {
	var out []*runtimeapi.PortMapping
	for _, c := range pod.Spec.Containers {
		names := map[string]bool{}
		for _, p := range c.Ports {
			family := "any"
			if p.HostIP != "" {
				family = "v4"
				if ip := net.ParseIP(p.HostIP); ip != nil && ip.To4() == nil {
					family = "v6"
				}
			}
			name := p.Name
			if name == "" {
				name = fmt.Sprintf("%s-%s-%s:%d:%d", family, p.Protocol, p.HostIP, p.ContainerPort, p.HostPort)
			}
			if names[name] {
				continue
			}
			names[name] = true
			out = append(out, &runtimeapi.PortMapping{Protocol: runtimeProtocol(p.Protocol), ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIp: p.HostIP})
		}
	}
	return out
}

// runtimeProtocol is a port's protocol in CRI terms; TCP for anything else (toRuntimeProtocol).
func runtimeProtocol(p v1.Protocol) runtimeapi.Protocol {
	switch p {
	case v1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case v1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	}
	return runtimeapi.Protocol_TCP
}

// mountPropagation is a volume mount's propagation in CRI terms (the kubelet's
// translateMountPropagation): unset and None private, HostToContainer rslave, Bidirectional
// rshared (validation admits it for privileged containers only).
func mountPropagation(m *v1.MountPropagationMode) runtimeapi.MountPropagation {
	switch {
	case m == nil:
	case *m == v1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
	case *m == v1.MountPropagationBidirectional:
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
	}
	return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
}

// onNodeNetwork is why a pod without spec.hostNetwork cannot have what it asks for on a node
// that runs every pod on its own network.
const onNodeNetwork = "pods run in the node's network and UTS namespaces here (the systemd runtime, or runtime.network = \"host\"): "

// validateOnNodeNetwork refuses what a pod without spec.hostNetwork asks of a network of its
// own when the node runs it in the node's (ValidateSpec with hostNetwork): a hostPort other
// than its containerPort and a hostIP (nothing maps ports there; the container's port is the
// node's), and a hostname, subdomain or setHostnameAsFQDN (the pod has the node's hostname and
// hosts file). Pods with spec.hostNetwork ask for the node's and get it, as on a kubelet node.
func validateOnNodeNetwork(pod *v1.Pod) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	for i, c := range pod.Spec.Containers {
		for j, p := range c.Ports {
			pp := spec.Child("containers").Index(i).Child("ports").Index(j)
			if p.HostPort != 0 && p.HostPort != p.ContainerPort {
				errs = append(errs, field.Forbidden(pp.Child("hostPort"), onNodeNetwork+"a container's port is the node's, so hostPort must equal containerPort; set runtime.network = \"cni\" with the CNI portmap plugin to map ports"))
			}
			if p.HostIP != "" {
				errs = append(errs, field.Forbidden(pp.Child("hostIP"), onNodeNetwork+"a container binds the node's addresses itself; set runtime.network = \"cni\" with the CNI portmap plugin to map ports to one host IP"))
			}
		}
	}
	why := onNodeNetwork + "the pod has the node's hostname and hosts file; set runtime.type = \"cri\" and runtime.network = \"cni\" for a hostname of its own"
	if pod.Spec.Hostname != "" {
		errs = append(errs, field.Forbidden(spec.Child("hostname"), why))
	}
	if pod.Spec.Subdomain != "" {
		errs = append(errs, field.Forbidden(spec.Child("subdomain"), why))
	}
	if f := pod.Spec.SetHostnameAsFQDN; f != nil && *f {
		errs = append(errs, field.Forbidden(spec.Child("setHostnameAsFQDN"), why))
	}
	return errs
}
