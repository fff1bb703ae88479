package manifest

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// validateNetwork checks the pod's DNS, hostname and port fields and its containers' mount
// propagation as the API does (pkg/apis/core/validation: validateDNSPolicy,
// validatePodDNSConfig, the hostname and subdomain DNS labels, validateContainerPorts with
// checkHostPortConflicts, validatePodHostNetworkDeps, validateMountPropagation).
func validateNetwork(pod *v1.Pod) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	s := &pod.Spec
	policies := []v1.DNSPolicy{v1.DNSClusterFirstWithHostNet, v1.DNSClusterFirst, v1.DNSDefault, v1.DNSNone}
	switch s.DNSPolicy {
	case v1.DNSClusterFirstWithHostNet, v1.DNSClusterFirst, v1.DNSDefault, v1.DNSNone:
	case "":
		errs = append(errs, field.Required(spec.Child("dnsPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(spec.Child("dnsPolicy"), s.DNSPolicy, policies))
	}
	errs = append(errs, validateDNSConfig(spec.Child("dnsConfig"), s.DNSConfig, s.DNSPolicy)...)
	for _, l := range []struct {
		name, value string
	}{{"hostname", s.Hostname}, {"subdomain", s.Subdomain}} {
		if l.value != "" {
			for _, msg := range validation.IsDNS1123Label(l.value) {
				errs = append(errs, field.Invalid(spec.Child(l.name), l.value, msg))
			}
		}
	}
	hostPorts := sets.New[string]()
	for _, list := range []struct {
		name       string
		containers []v1.Container
		app        bool
	}{{"initContainers", s.InitContainers, false}, {"containers", s.Containers, true}} {
		for i := range list.containers {
			c := &list.containers[i]
			cp := spec.Child(list.name).Index(i)
			errs = append(errs, validatePorts(cp.Child("ports"), c.Ports, s.HostNetwork)...)
			if list.app {
				errs = append(errs, uniqueHostPorts(cp.Child("ports"), c.Ports, hostPorts)...)
			}
			privileged := c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
			for j, m := range c.VolumeMounts {
				if m.MountPropagation == nil {
					continue
				}
				mp := cp.Child("volumeMounts").Index(j).Child("mountPropagation")
				switch *m.MountPropagation {
				case v1.MountPropagationNone, v1.MountPropagationHostToContainer:
				case v1.MountPropagationBidirectional:
					if !privileged {
						errs = append(errs, field.Forbidden(mp, "Bidirectional mount propagation is available only to privileged containers"))
					}
				default:
					errs = append(errs, field.NotSupported(mp, *m.MountPropagation, []v1.MountPropagationMode{v1.MountPropagationBidirectional, v1.MountPropagationHostToContainer, v1.MountPropagationNone}))
				}
			}
		}
	}
	return errs
}

// validateDNSConfig is the API's validatePodDNSConfig.
func validateDNSConfig(p *field.Path, dc *v1.PodDNSConfig, policy v1.DNSPolicy) field.ErrorList {
	var errs field.ErrorList
	if policy == v1.DNSNone {
		if dc == nil {
			return append(errs, field.Required(p, fmt.Sprintf("must provide `dnsConfig` when `dnsPolicy` is %s", v1.DNSNone)))
		}
		if len(dc.Nameservers) == 0 {
			return append(errs, field.Required(p.Child("nameservers"), fmt.Sprintf("must provide at least one DNS nameserver when `dnsPolicy` is %s", v1.DNSNone)))
		}
	}
	if dc == nil {
		return nil
	}
	if len(dc.Nameservers) > lifecycle.MaxDNSNameservers {
		errs = append(errs, field.Invalid(p.Child("nameservers"), dc.Nameservers, fmt.Sprintf("must not have more than %v nameservers", lifecycle.MaxDNSNameservers)))
	}
	for i, ns := range dc.Nameservers {
		errs = append(errs, validation.IsValidIPForLegacyField(p.Child("nameservers").Index(i), ns, false, nil)...)
	}
	if len(dc.Searches) > lifecycle.MaxDNSSearchPaths {
		errs = append(errs, field.Invalid(p.Child("searches"), dc.Searches, fmt.Sprintf("must not have more than %v search paths", lifecycle.MaxDNSSearchPaths)))
	}
	if len(strings.Join(dc.Searches, " ")) > lifecycle.MaxDNSSearchListChars {
		errs = append(errs, field.Invalid(p.Child("searches"), dc.Searches, fmt.Sprintf("must not have more than %v characters (including spaces) in the search list", lifecycle.MaxDNSSearchListChars)))
	}
	for i, search := range dc.Searches {
		if search == "." {
			continue
		}
		search = strings.TrimSuffix(search, ".")
		for _, msg := range validation.IsDNS1123SubdomainWithUnderscore(search) {
			errs = append(errs, field.Invalid(p.Child("searches").Index(i), search, msg))
		}
	}
	for i, o := range dc.Options {
		if o.Name == "" {
			errs = append(errs, field.Required(p.Child("options").Index(i), "must not be empty"))
		}
	}
	return errs
}

// protocols are the port protocols the API takes.
var protocols = []v1.Protocol{v1.ProtocolSCTP, v1.ProtocolTCP, v1.ProtocolUDP}

// validatePorts is the API's validateContainerPorts with validatePodHostNetworkDeps: names
// IANA service names once each, port numbers 1–65535, a known protocol, and on the host's
// network a hostPort equal to containerPort.
func validatePorts(p *field.Path, ports []v1.ContainerPort, hostNetwork bool) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, port := range ports {
		ip := p.Index(i)
		if port.Name != "" {
			if msgs := validation.IsValidPortName(port.Name); len(msgs) > 0 {
				for _, msg := range msgs {
					errs = append(errs, field.Invalid(ip.Child("name"), port.Name, msg))
				}
			} else if names.Has(port.Name) {
				errs = append(errs, field.Duplicate(ip.Child("name"), port.Name))
			}
			names.Insert(port.Name)
		}
		if port.ContainerPort == 0 {
			errs = append(errs, field.Required(ip.Child("containerPort"), ""))
		} else {
			for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
				errs = append(errs, field.Invalid(ip.Child("containerPort"), port.ContainerPort, msg))
			}
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(ip.Child("hostPort"), port.HostPort, msg))
			}
		}
		switch {
		case port.Protocol == "":
			errs = append(errs, field.Required(ip.Child("protocol"), ""))
		case !sets.New(protocols...).Has(port.Protocol):
			errs = append(errs, field.NotSupported(ip.Child("protocol"), port.Protocol, protocols))
		}
		if hostNetwork && port.HostPort != port.ContainerPort {
			errs = append(errs, field.Invalid(ip.Child("hostPort"), port.HostPort, "must match `containerPort` when `hostNetwork` is true"))
		}
	}
	return errs
}

// uniqueHostPorts refuses a host port (protocol, host IP, port) the pod's app containers map
// twice (checkHostPortConflicts); seen holds those of the containers before.
func uniqueHostPorts(p *field.Path, ports []v1.ContainerPort, seen sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	for i, port := range ports {
		if port.HostPort == 0 {
			continue
		}
		key := fmt.Sprintf("%s/%s/%d", port.Protocol, port.HostIP, port.HostPort)
		if seen.Has(key) {
			errs = append(errs, field.Duplicate(p.Index(i).Child("hostPort"), key))
		}
		seen.Insert(key)
	}
	return errs
}
