package manifest

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// The cases follow pkg/apis/core/v1/defaults_test.go (TestSetDefaultPod*, TestSetDefaultContainer*,
// TestSetDefaultProbe, TestSetDefaultSecretVolumeSource, ...), with the 1.37 rule for pod-level
// resources (PodLevelResourcesFixDefaulting: not defaulted for a static pod).
func TestSetDefaults(t *testing.T) {
	rl := func(kv ...string) v1.ResourceList {
		out := v1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	pod := func(mod func(*v1.Pod)) *v1.Pod {
		p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}}
		mod(p)
		return p
	}
	tests := []struct {
		name  string
		in    *v1.Pod
		check func(t *testing.T, p *v1.Pod)
	}{
		{"pod spec defaults", pod(func(*v1.Pod) {}), func(t *testing.T, p *v1.Pod) {
			s := p.Spec
			if s.RestartPolicy != v1.RestartPolicyAlways || s.DNSPolicy != v1.DNSClusterFirst || s.SchedulerName != v1.DefaultSchedulerName ||
				s.SecurityContext == nil || *s.TerminationGracePeriodSeconds != 30 || !*s.EnableServiceLinks {
				t.Errorf("spec = %+v", s)
			}
		}},
		{"set values are kept", pod(func(p *v1.Pod) {
			p.Spec.RestartPolicy, p.Spec.DNSPolicy = v1.RestartPolicyNever, v1.DNSDefault
			p.Spec.TerminationGracePeriodSeconds, p.Spec.EnableServiceLinks = ptr.To[int64](5), ptr.To(false)
		}), func(t *testing.T, p *v1.Pod) {
			s := p.Spec
			if s.RestartPolicy != v1.RestartPolicyNever || s.DNSPolicy != v1.DNSDefault || *s.TerminationGracePeriodSeconds != 5 || *s.EnableServiceLinks {
				t.Errorf("spec = %+v", s)
			}
		}},
		{"a negative grace period is 1 s", pod(func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](-1) }), func(t *testing.T, p *v1.Pod) {
			if g := *p.Spec.TerminationGracePeriodSeconds; g != 1 {
				t.Errorf("terminationGracePeriodSeconds = %d, want 1", g)
			}
		}},
		{"container requests from limits", pod(func(p *v1.Pod) {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{Limits: rl("cpu", "500m", "memory", "128Mi"), Requests: rl("cpu", "100m")}
		}), func(t *testing.T, p *v1.Pod) {
			if got := p.Spec.Containers[0].Resources.Requests; !equality.Semantic.DeepEqual(rl("cpu", "100m", "memory", "128Mi"), got) {
				t.Errorf("requests = %v, want %v", got, rl("cpu", "100m", "memory", "128Mi"))
			}
		}},
		{"init container requests from limits", pod(func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i", Resources: v1.ResourceRequirements{Limits: rl("cpu", "1", "hugepages-2Mi", "4Mi")}}}
		}), func(t *testing.T, p *v1.Pod) {
			if got := p.Spec.InitContainers[0].Resources.Requests; !equality.Semantic.DeepEqual(rl("cpu", "1", "hugepages-2Mi", "4Mi"), got) {
				t.Errorf("requests = %v, want %v", got, rl("cpu", "1", "hugepages-2Mi", "4Mi"))
			}
		}},
		{"pod-level resources are not defaulted (1.37)", pod(func(p *v1.Pod) {
			p.Spec.Resources = &v1.ResourceRequirements{Limits: rl("cpu", "1", "memory", "1Gi")}
		}), func(t *testing.T, p *v1.Pod) {
			if p.Spec.Resources.Requests != nil || p.Spec.Containers[0].Resources.Requests != nil {
				t.Errorf("resources = %+v, container %+v", p.Spec.Resources, p.Spec.Containers[0].Resources)
			}
		}},
		{"quantities rounded up to milli", pod(func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits = rl("cpu", "0.0001")
		}), func(t *testing.T, p *v1.Pod) {
			if got := p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue(); got != 1 {
				t.Errorf("cpu request = %dm, want 1m", got)
			}
		}},
		{"container defaults", pod(func(p *v1.Pod) {
			p.Spec.Containers = []v1.Container{{Name: "a", Image: "nginx"}, {Name: "b", Image: "nginx:1.27"}, {Name: "c", Image: "nginx:latest"},
				{Name: "d", Image: "nginx@sha256:0123"}, {Name: "e"}, {Name: "f", Image: "localhost:5000/app"}, {Name: "g", ImagePullPolicy: v1.PullNever}}
		}), func(t *testing.T, p *v1.Pod) {
			want := []v1.PullPolicy{v1.PullAlways, v1.PullIfNotPresent, v1.PullAlways, v1.PullIfNotPresent, v1.PullIfNotPresent, v1.PullAlways, v1.PullNever}
			for i, c := range p.Spec.Containers {
				if c.ImagePullPolicy != want[i] || c.TerminationMessagePath != "/dev/termination-log" || c.TerminationMessagePolicy != v1.TerminationMessageReadFile {
					t.Errorf("container %s (%q): pull %s, message %s %s; want pull %s", c.Name, c.Image, c.ImagePullPolicy, c.TerminationMessagePath, c.TerminationMessagePolicy, want[i])
				}
			}
		}},
		{"ports: protocol, and host ports under host networking", pod(func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 53, HostPort: 5353, Protocol: v1.ProtocolUDP}}
		}), func(t *testing.T, p *v1.Pod) {
			want := []v1.ContainerPort{{ContainerPort: 80, HostPort: 80, Protocol: v1.ProtocolTCP}, {ContainerPort: 53, HostPort: 5353, Protocol: v1.ProtocolUDP}}
			if got := p.Spec.Containers[0].Ports; !equality.Semantic.DeepEqual(want, got) {
				t.Errorf("ports = %v, want %v", got, want)
			}
		}},
		{"no host ports without host networking", pod(func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80}}
		}), func(t *testing.T, p *v1.Pod) {
			if p.Spec.Containers[0].Ports[0].HostPort != 0 {
				t.Errorf("ports = %+v", p.Spec.Containers[0].Ports)
			}
		}},
		{"probes and handlers", pod(func(p *v1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{}}}
			p.Spec.Containers[0].ReadinessProbe = &v1.Probe{PeriodSeconds: 5, ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9}}}
			p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/stop"}}}
		}), func(t *testing.T, p *v1.Pod) {
			c := p.Spec.Containers[0]
			l, r := c.LivenessProbe, c.ReadinessProbe
			if l.TimeoutSeconds != 1 || l.PeriodSeconds != 10 || l.SuccessThreshold != 1 || l.FailureThreshold != 3 || l.HTTPGet.Path != "/" || l.HTTPGet.Scheme != v1.URISchemeHTTP {
				t.Errorf("liveness = %+v", l)
			}
			if r.PeriodSeconds != 5 || r.GRPC.Service == nil || *r.GRPC.Service != "" {
				t.Errorf("readiness = %+v", r)
			}
			if h := c.Lifecycle.PreStop.HTTPGet; h.Path != "/stop" || h.Scheme != v1.URISchemeHTTP {
				t.Errorf("preStop = %+v", h)
			}
		}},
		{"env field selector apiVersion", pod(func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "N", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
		}), func(t *testing.T, p *v1.Pod) {
			if got := p.Spec.Containers[0].Env[0].ValueFrom.FieldRef.APIVersion; got != "v1" {
				t.Errorf("apiVersion = %q", got)
			}
		}},
		{"volumes", pod(func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{
				{Name: "none"},
				{Name: "secret", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}},
				{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{DefaultMode: ptr.To[int32](0o600)}}},
				{Name: "down", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{{Path: "n", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}},
				{Name: "proj", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "t"}}}}}},
				{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/srv"}}},
			}
		}), func(t *testing.T, p *v1.Pod) {
			v := p.Spec.Volumes
			if v[0].EmptyDir == nil {
				t.Errorf("a volume without a source is an emptyDir: %+v", v[0])
			}
			if *v[1].Secret.DefaultMode != 0o644 || *v[2].ConfigMap.DefaultMode != 0o600 || *v[3].DownwardAPI.DefaultMode != 0o644 || *v[4].Projected.DefaultMode != 0o644 {
				t.Errorf("modes: %+v", v)
			}
			if v[3].DownwardAPI.Items[0].FieldRef.APIVersion != "v1" || *v[4].Projected.Sources[0].ServiceAccountToken.ExpirationSeconds != 3600 {
				t.Errorf("downward API / token: %+v", v)
			}
			if v[5].HostPath.Type == nil || *v[5].HostPath.Type != v1.HostPathUnset {
				t.Errorf("hostPath type = %v", v[5].HostPath.Type)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			SetDefaults(tt.in)
			tt.check(t, tt.in)
		})
	}
}
