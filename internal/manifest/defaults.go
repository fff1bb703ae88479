package manifest

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// SetDefaults fills in what the API's defaulting fills in when the kubelet decodes a static pod
// manifest through the API scheme (pkg/apis/core/v1/defaults.go and the declarative defaults
// of k8s.io/api/core/v1 registered in zz_generated.defaults.go): SetDefaults_Pod,
// SetDefaults_PodSpec, SetDefaults_Container, SetDefaults_Probe, SetDefaults_HTTPGetAction,
// SetDefaults_Volume and the volume sources' modes, SetDefaults_ObjectFieldSelector,
// SetDefaults_ResourceList, and the ports' protocol.
//
// Pod-level spec.resources are left as written: since Kubernetes 1.37
// (PodLevelResourcesFixDefaulting, on by default) SetDefaults_Pod no longer defaults pod-level
// requests or hugepage limits — the API server does it in PrepareForCreate
// (pkg/registry/core/pod/strategy.go), which a static pod never passes through. Container and
// init-container requests are defaulted from their limits.
func SetDefaults(pod *v1.Pod) {
	spec := &pod.Spec
	// SetDefaults_Pod: a negative termination grace period is 1 s (on a Pod, not a PodSpec).
	if g := spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		one := int64(1)
		spec.TerminationGracePeriodSeconds = &one
	}
	// SetDefaults_Pod: a resource with a limit and no request gets request = limit, for
	// containers and init containers (not ephemeral containers, which have no resources).
	for _, list := range [][]v1.Container{spec.Containers, spec.InitContainers} {
		for i := range list {
			defaultRequests(&list[i].Resources)
		}
	}
	if spec.EnableServiceLinks == nil {
		b := v1.DefaultEnableServiceLinks
		spec.EnableServiceLinks = &b
	}
	if spec.HostNetwork {
		// With host networking every container port is a host port.
		for _, list := range [][]v1.Container{spec.Containers, spec.InitContainers} {
			for i := range list {
				for j := range list[i].Ports {
					if p := &list[i].Ports[j]; p.HostPort == 0 {
						p.HostPort = p.ContainerPort
					}
				}
			}
		}
	}

	// SetDefaults_PodSpec.
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = v1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = v1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &v1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		g := int64(v1.DefaultTerminationGracePeriodSeconds)
		spec.TerminationGracePeriodSeconds = &g
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = v1.DefaultSchedulerName
	}

	// SetDefaults_ResourceList on every resource list of the pod.
	if r := spec.Resources; r != nil {
		roundUp(r.Limits)
		roundUp(r.Requests)
	}
	roundUp(spec.Overhead)

	for i := range spec.Volumes {
		defaultVolume(&spec.Volumes[i])
	}
	for i := range spec.InitContainers {
		defaultContainer(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		defaultContainer(&spec.Containers[i])
	}
	for i := range spec.EphemeralContainers {
		// SetDefaults_EphemeralContainer: the common part is a Container.
		defaultContainer((*v1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
}

// defaultRequests copies every limit without a request into requests (SetDefaults_Pod).
func defaultRequests(r *v1.ResourceRequirements) {
	if r.Limits == nil {
		return
	}
	if r.Requests == nil {
		r.Requests = v1.ResourceList{}
	}
	for name, lim := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			r.Requests[name] = lim.DeepCopy()
		}
	}
}

// roundUp rounds every quantity up to milli scale (SetDefaults_ResourceList: 0.0001 cpu is 1m).
func roundUp(rl v1.ResourceList) {
	for name, q := range rl {
		q.RoundUp(-3)
		rl[name] = q
	}
}

// defaultContainer is SetDefaults_Container with the defaults of what a container holds: ports,
// probes, lifecycle handlers, env field selectors, resources.
func defaultContainer(c *v1.Container) {
	if c.ImagePullPolicy == "" {
		// An image without a tag, or tagged "latest", is pulled Always; any other tag or a
		// digest IfNotPresent (pkg/util/parsers.ParseImageName defaults the tag to "latest").
		if imageTag(c.Image) == "latest" {
			c.ImagePullPolicy = v1.PullAlways
		} else {
			c.ImagePullPolicy = v1.PullIfNotPresent
		}
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = v1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = v1.ProtocolTCP
		}
	}
	for _, p := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p == nil {
			continue
		}
		if p.TimeoutSeconds == 0 {
			p.TimeoutSeconds = 1
		}
		if p.PeriodSeconds == 0 {
			p.PeriodSeconds = 10
		}
		if p.SuccessThreshold == 0 {
			p.SuccessThreshold = 1
		}
		if p.FailureThreshold == 0 {
			p.FailureThreshold = 3
		}
		defaultHTTPGet(p.HTTPGet)
		if p.GRPC != nil && p.GRPC.Service == nil {
			// GRPCAction.Service: +default="" (declarative).
			s := ""
			p.GRPC.Service = &s
		}
	}
	if lc := c.Lifecycle; lc != nil {
		for _, h := range []*v1.LifecycleHandler{lc.PostStart, lc.PreStop} {
			if h != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1" // SetDefaults_ObjectFieldSelector
		}
	}
	roundUp(c.Resources.Limits)
	roundUp(c.Resources.Requests)
}

// defaultHTTPGet is SetDefaults_HTTPGetAction.
func defaultHTTPGet(h *v1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = v1.URISchemeHTTP
	}
}

// defaultVolume is SetDefaults_Volume (no source at all is an emptyDir) with the sources'
// defaults: SetDefaults_SecretVolumeSource, SetDefaults_ConfigMapVolumeSource,
// SetDefaults_DownwardAPIVolumeSource, SetDefaults_ProjectedVolumeSource and
// SetDefaults_ServiceAccountTokenProjection (modes 0644, token expiry one hour),
// SetDefaults_HostPathVolumeSource (type "").
func defaultVolume(v *v1.Volume) {
	if (v.VolumeSource == v1.VolumeSource{}) {
		v.EmptyDir = &v1.EmptyDirVolumeSource{}
	}
	mode := func(m **int32, def int32) {
		if *m == nil {
			*m = &def
		}
	}
	switch {
	case v.Secret != nil:
		mode(&v.Secret.DefaultMode, v1.SecretVolumeSourceDefaultMode)
	case v.ConfigMap != nil:
		mode(&v.ConfigMap.DefaultMode, v1.ConfigMapVolumeSourceDefaultMode)
	case v.DownwardAPI != nil:
		mode(&v.DownwardAPI.DefaultMode, v1.DownwardAPIVolumeSourceDefaultMode)
		defaultFieldRefs(v.DownwardAPI.Items)
	case v.Projected != nil:
		mode(&v.Projected.DefaultMode, v1.ProjectedVolumeSourceDefaultMode)
		for i := range v.Projected.Sources {
			s := &v.Projected.Sources[i]
			if t := s.ServiceAccountToken; t != nil && t.ExpirationSeconds == nil {
				h := int64(3600)
				t.ExpirationSeconds = &h
			}
			if s.DownwardAPI != nil {
				defaultFieldRefs(s.DownwardAPI.Items)
			}
		}
	case v.HostPath != nil:
		if v.HostPath.Type == nil {
			t := v1.HostPathUnset
			v.HostPath.Type = &t
		}
	}
}

// defaultFieldRefs is SetDefaults_ObjectFieldSelector for downward API volume items.
func defaultFieldRefs(items []v1.DownwardAPIVolumeFile) {
	for i := range items {
		if f := items[i].FieldRef; f != nil && f.APIVersion == "" {
			f.APIVersion = "v1"
		}
	}
}

// imageTag is the tag pkg/util/parsers.ParseImageName finds: "" for a digest reference or no
// image, the text after the last ":" of the last path component, else "latest".
func imageTag(image string) string {
	if image == "" || strings.Contains(image, "@") {
		return ""
	}
	last := image[strings.LastIndex(image, "/")+1:]
	if i := strings.LastIndex(last, ":"); i >= 0 {
		return last[i+1:]
	}
	return "latest"
}
