package metrics

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	cadvisorcontainer "github.com/google/cadvisor/lib/container"
	cadvisormetrics "github.com/google/cadvisor/lib/metrics"
	info "github.com/google/cadvisor/lib/model"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/utils/clock"
)

// CadvisorSource is what /metrics/cadvisor reads at scrape time: cAdvisor's model of the
// node's containers (keyed by cgroup path, one stats sample each, the samples slicelet's pod
// stats sampler already took) and of the machine.
type CadvisorSource interface {
	ContainerInfo() map[string]*info.ContainerInfo
	MachineInfo() (*info.MachineInfo, error)
	VersionInfo() *info.VersionInfo
}

// cadvisorMetrics are the kubelet's includedMetrics for /metrics/cadvisor
// (pkg/kubelet/server/server.go InstallAuthNotRequiredHandlers): PressureMetrics only where
// the kernel accounts pressure stall information per cgroup (the KubeletPSI feature, GA and
// locked on, and IsPsiEnabled: cpu.pressure at the root of the cgroup mount, cgroup v2 with
// PSI on).
func cadvisorMetrics(psi bool) cadvisorcontainer.MetricSet {
	set := cadvisorcontainer.MetricSet{
		cadvisorcontainer.CpuUsageMetrics:     struct{}{},
		cadvisorcontainer.MemoryUsageMetrics:  struct{}{},
		cadvisorcontainer.DiskIOMetrics:       struct{}{},
		cadvisorcontainer.DiskUsageMetrics:    struct{}{},
		cadvisorcontainer.NetworkUsageMetrics: struct{}{},
		cadvisorcontainer.AppMetrics:          struct{}{},
		cadvisorcontainer.ProcessMetrics:      struct{}{},
		cadvisorcontainer.OOMMetrics:          struct{}{},
	}
	if psi {
		set[cadvisorcontainer.PressureMetrics] = struct{}{}
	}
	return set
}

// The container labels /metrics/cadvisor sets (cAdvisor's LabelID, LabelName, LabelImage and
// the kubelet's pod, namespace and container).
const (
	labelPodName       = "io.kubernetes.pod.name"
	labelPodNamespace  = "io.kubernetes.pod.namespace"
	labelContainerName = "io.kubernetes.container.name"
)

// cadvisorLabels is the kubelet's containerPrometheusLabelsFunc: id the cgroup, name the
// first alias (the runtime's container ID), image the spec's, pod, namespace and container
// from the runtime's io.kubernetes.* labels, every label present (empty when unknown) so each
// family has one label set.
func cadvisorLabels(c *info.ContainerInfo) map[string]string {
	var name string
	if len(c.Aliases) > 0 {
		name = c.Aliases[0]
	}
	return map[string]string{
		cadvisormetrics.LabelID:    c.Name,
		cadvisormetrics.LabelName:  name,
		cadvisormetrics.LabelImage: c.Spec.Image,
		"pod":                      c.Spec.Labels[labelPodName],
		"namespace":                c.Spec.Labels[labelPodNamespace],
		"container":                c.Spec.Labels[labelContainerName],
	}
}

// cadvisorProvider adapts a CadvisorSource to cAdvisor's collectors.
type cadvisorProvider struct{ src CadvisorSource }

func (p cadvisorProvider) GetRequestedContainersInfo(string, info.RequestOptions) (map[string]*info.ContainerInfo, error) {
	return p.src.ContainerInfo(), nil
}

func (p cadvisorProvider) GetVersionInfo() (*info.VersionInfo, error) {
	v := p.src.VersionInfo()
	if v == nil {
		return nil, errors.New("no version information")
	}
	return v, nil
}

func (p cadvisorProvider) GetMachineInfo() (*info.MachineInfo, error) { return p.src.MachineInfo() }

// NewCadvisorRegistry is the registry of /metrics/cadvisor: cAdvisor's own machine and
// container collectors (github.com/google/cadvisor/lib/metrics) with the kubelet's metric set
// (with the pressure stall families when psi) and labels, reading src at each scrape.
func NewCadvisorRegistry(src CadvisorSource, psi bool) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	p, set := cadvisorProvider{src}, cadvisorMetrics(psi)
	reg.MustRegister(cadvisormetrics.NewPrometheusMachineCollector(p, set),
		cadvisormetrics.NewPrometheusCollector(p, cadvisorLabels, set, clock.RealClock{},
			info.RequestOptions{IdType: info.TypeName, Count: 1, Recursive: true}))
	return reg
}

// registryHandler serves a registry as the kubelet's metrics endpoints do: the text or
// OpenMetrics format as asked, gathering errors logged and the rest served.
func registryHandler(reg prometheus.Gatherer, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
		// A scrape is cheap; more than a few at once means a misconfigured scraper, which must
		// not pile up work in the daemon.
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
		EnableOpenMetrics:   true,
	})
}
