package metrics

import (
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
)

// The kubelet's own families on /metrics that the kubernetes-mixin's rules, alerts and
// dashboards read, with the names, types, labels, buckets and help of the kubelet
// (pkg/kubelet/metrics/metrics.go; the help carries the stability level as
// k8s.io/component-base/metrics writes it). slicelet's own slicelet_* families stay beside
// them.

// alpha and beta are component-base's prefixes of an ALPHA and a BETA metric's help.
const (
	alpha = "[ALPHA] "
	beta  = "[BETA] "
)

// Kubelet subsystem and label values of the kubelet's families.
const (
	kubeletSubsystem = "kubelet"

	// Operation types of kubelet_pod_worker_duration_seconds.
	PodWorkerCreate = "create"
	PodWorkerUpdate = "update"
	PodWorkerSync   = "sync"
	PodWorkerKill   = "kill"

	// Container states of kubelet_running_containers.
	containerStateRunning = "running"
	containerStateExited  = "exited"
	containerStateCreated = "created"

	restClientSubsystem = "rest_client"
)

var (
	// podStartupDurationBuckets are the kubelet's podStartupDurationBuckets.
	podStartupDurationBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}
	// storageOperationBuckets are the volume operations' buckets (pkg/volume/util/metrics.go).
	storageOperationBuckets = []float64{.1, .25, .5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600}
	// runtimeOperationBuckets are metrics.ExponentialBuckets(.005, 2.5, 14).
	runtimeOperationBuckets = prometheus.ExponentialBuckets(.005, 2.5, 14)
	// restClientLatencyBuckets are client-go's request latency buckets as component-base
	// registers them (k8s.io/component-base/metrics/prometheus/restclient).
	restClientLatencyBuckets = []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0}
)

// KubeletFamilies are the kubelet's families slicelet feeds: its pod worker's syncs, the
// relist, the runtime's operations, evictions, pods and containers started, the API client's
// requests. Its methods do nothing on a nil *KubeletFamilies.
type KubeletFamilies struct {
	nodeName           *prometheus.GaugeVec
	cgroupVersion      prometheus.Gauge
	podStart           prometheus.Histogram
	podWorker          *prometheus.HistogramVec
	cgroupManager      *prometheus.HistogramVec
	plegRelist         prometheus.Histogram
	plegInterval       prometheus.Histogram
	plegLastSeen       prometheus.Gauge
	runtimeOps         *prometheus.CounterVec
	runtimeOpsDuration *prometheus.HistogramVec
	runtimeOpsErrors   *prometheus.CounterVec
	evictions          *prometheus.CounterVec
	startedPods        prometheus.Counter
	startedPodsErrors  prometheus.Counter
	storageOps         *prometheus.HistogramVec
	restRequests       *prometheus.CounterVec
	restLatency        *prometheus.HistogramVec

	lastRelist time.Time
	// buildInfo is kubernetes_build_info (SetVersion).
	buildInfo prometheus.Collector
	// volumes counts the volumes by plugin, desired and set up (SetVolumes).
	volumes func() (desired, actual map[string]int)
	// volumeStats lists the claims' volumes measured (SetVolumeStats).
	volumeStats func() []ClaimVolumeStats
	// volumeStatDuration is kubelet_volume_metric_collection_duration_seconds.
	volumeStatDuration *prometheus.HistogramVec
	// certs are the certificate managers' families (ClientCertificateManager,
	// ServerCertificateManager).
	certs *certificateFamilies
}

// NewKubeletFamilies returns the families, not registered yet (New registers them).
func NewKubeletFamilies() *KubeletFamilies {
	k := &KubeletFamilies{
		nodeName: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: kubeletSubsystem, Name: "node_name",
			Help: alpha + "The node's name. The count is always 1."}, []string{"node"}),
		cgroupVersion: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: kubeletSubsystem, Name: "cgroup_version",
			Help: alpha + "cgroup version on the hosts."}),
		podStart: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: kubeletSubsystem, Name: "pod_start_duration_seconds",
			Help:    alpha + "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
			Buckets: podStartupDurationBuckets}),
		podWorker: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: kubeletSubsystem, Name: "pod_worker_duration_seconds",
			Help:    alpha + "Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync",
			Buckets: prometheus.DefBuckets}, []string{"operation_type"}),
		cgroupManager: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: kubeletSubsystem, Name: "cgroup_manager_duration_seconds",
			Help: alpha + "Duration in seconds for cgroup manager operations. Broken down by method.", Buckets: prometheus.DefBuckets}, []string{"operation_type"}),
		plegRelist: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: kubeletSubsystem, Name: "pleg_relist_duration_seconds",
			Help: alpha + "Duration in seconds for relisting pods in PLEG.", Buckets: prometheus.DefBuckets}),
		plegInterval: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: kubeletSubsystem, Name: "pleg_relist_interval_seconds",
			Help: alpha + "Interval in seconds between relisting in PLEG.", Buckets: prometheus.DefBuckets}),
		plegLastSeen: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: kubeletSubsystem, Name: "pleg_last_seen_seconds",
			Help: alpha + "Timestamp in seconds when PLEG was last seen active."}),
		runtimeOps: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: kubeletSubsystem, Name: "runtime_operations_total",
			Help: alpha + "Cumulative number of runtime operations by operation type."}, []string{"operation_type"}),
		runtimeOpsDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: kubeletSubsystem, Name: "runtime_operations_duration_seconds",
			Help: alpha + "Duration in seconds of runtime operations. Broken down by operation type.", Buckets: runtimeOperationBuckets}, []string{"operation_type"}),
		runtimeOpsErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: kubeletSubsystem, Name: "runtime_operations_errors_total",
			Help: alpha + "Cumulative number of runtime operation errors by operation type."}, []string{"operation_type"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: kubeletSubsystem, Name: "evictions",
			Help: alpha + "Cumulative number of pod evictions by eviction signal"}, []string{"eviction_signal"}),
		startedPods: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: kubeletSubsystem, Name: "started_pods_total",
			Help: alpha + "Cumulative number of pods started"}),
		startedPodsErrors: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: kubeletSubsystem, Name: "started_pods_errors_total",
			Help: alpha + "Cumulative number of errors when starting pods"}),
		storageOps: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "storage_operation_duration_seconds",
			Help: beta + "Storage operation duration", Buckets: storageOperationBuckets}, []string{"volume_plugin", "operation_name", "status", "migrated"}),
		restRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: restClientSubsystem, Name: "requests_total",
			Help: alpha + "Number of HTTP requests, partitioned by status code, method, and host."}, []string{"code", "method", "host"}),
		restLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: restClientSubsystem, Name: "request_duration_seconds",
			Help: alpha + "Request latency in seconds. Broken down by verb, and host.", Buckets: restClientLatencyBuckets}, []string{"verb", "host"}),
		volumeStatDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: kubeletSubsystem, Name: "volume_metric_collection_duration_seconds",
			Help: alpha + "Duration in seconds to calculate volume stats", Buckets: prometheus.DefBuckets}, []string{"metric_source"}),
		certs: newCertificateFamilies(time.Now),
	}
	return k
}

// buildInfoHelp is component-base's help of kubernetes_build_info
// (k8s.io/component-base/metrics/prometheus/version).
const buildInfoHelp = beta + "A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running."

// kubernetesBuildInfo is kubernetes_build_info of a node whose kubeletVersion is version
// ("v1.37.2+slicelet.<slicelet's version>", what the Node reports): major and minor of the
// Kubernetes release it speaks, git_version the whole, git_commit slicelet's version (dirty
// when built from a changed tree), and the Go toolchain and platform; the mixin's
// KubeVersionMismatch compares the nodes' and the control plane's git_version.
func kubernetesBuildInfo(version, commit string) prometheus.Collector {
	core, _, _ := strings.Cut(strings.TrimPrefix(version, "v"), "+")
	major, rest, _ := strings.Cut(core, ".")
	minor, _, _ := strings.Cut(rest, ".")
	tree := "clean"
	if strings.HasSuffix(commit, "-dirty") {
		tree = "dirty"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "kubernetes", Name: "build_info", Help: buildInfoHelp,
		ConstLabels: prometheus.Labels{"major": major, "minor": minor, "git_version": version, "git_commit": commit, "git_tree_state": tree,
			"build_date": "", "go_version": runtime.Version(), "compiler": runtime.Compiler, "platform": runtime.GOOS + "/" + runtime.GOARCH}})
	g.Set(1)
	return g
}

func (k *KubeletFamilies) collectors() []prometheus.Collector {
	out := []prometheus.Collector{k.nodeName, k.cgroupVersion, k.podStart, k.podWorker, k.cgroupManager, k.plegRelist, k.plegInterval, k.plegLastSeen,
		k.runtimeOps, k.runtimeOpsDuration, k.runtimeOpsErrors, k.evictions, k.startedPods, k.startedPodsErrors,
		k.storageOps, k.restRequests, k.restLatency, k.volumeStatDuration, k.certs}
	if k.buildInfo != nil {
		out = append(out, k.buildInfo)
	}
	if k.volumes != nil {
		out = append(out, volumeCollector{k.volumes})
	}
	if k.volumeStats != nil {
		out = append(out, volumeStatsCollector{k.volumeStats})
	}
	return out
}

// SetVersion gives kubernetes_build_info its labels: version is the node's kubeletVersion,
// commit slicelet's version. Call it before New registers the families.
func (k *KubeletFamilies) SetVersion(version, commit string) {
	if k == nil {
		return
	}
	k.buildInfo = kubernetesBuildInfo(version, commit)
}

// SetNode sets kubelet_node_name (the node's name, always 1) and kubelet_cgroup_version (1
// or 2).
func (k *KubeletFamilies) SetNode(name string, cgroupVersion int) {
	if k == nil {
		return
	}
	k.nodeName.Reset()
	k.nodeName.WithLabelValues(name).Set(1)
	k.cgroupVersion.Set(float64(cgroupVersion))
}

// PodStarted observes kubelet_pod_start_duration_seconds: the time from the node first seeing
// the pod to the pod running.
func (k *KubeletFamilies) PodStarted(d time.Duration) {
	if k == nil {
		return
	}
	k.podStart.Observe(d.Seconds())
	k.startedPods.Inc()
}

// PodStartFailed counts kubelet_started_pods_errors_total.
func (k *KubeletFamilies) PodStartFailed() {
	if k == nil {
		return
	}
	k.startedPodsErrors.Inc()
}

// PodWorker observes one sync of a pod (kubelet_pod_worker_duration_seconds) of operation
// type PodWorkerCreate, PodWorkerUpdate, PodWorkerSync or PodWorkerKill.
func (k *KubeletFamilies) PodWorker(operation string, d time.Duration) {
	if k == nil {
		return
	}
	k.podWorker.WithLabelValues(operation).Observe(d.Seconds())
}

// CgroupManagerOperation observes one operation on a cgroup
// (kubelet_cgroup_manager_duration_seconds): create, update or destroy (slices.Operation*).
func (k *KubeletFamilies) CgroupManagerOperation(operation string, d time.Duration) {
	if k == nil {
		return
	}
	k.cgroupManager.WithLabelValues(operation).Observe(d.Seconds())
}

// VolumeOperation observes one volume operation (storage_operation_duration_seconds) of the
// volume plugin: status success or fail-unknown, migrated false (no in-tree volume is migrated
// to CSI here).
func (k *KubeletFamilies) VolumeOperation(plugin, operation string, d time.Duration, failed bool) {
	if k == nil {
		return
	}
	status := "success"
	if failed {
		status = "fail-unknown"
	}
	k.storageOps.WithLabelValues(plugin, operation, status, "false").Observe(d.Seconds())
}

// SetVolumes gives volume_manager_total_volumes its source: the pods' volumes by plugin, those
// the node should have set up (desired_state_of_world) and those it has
// (actual_state_of_world). Call it before New registers the families.
func (k *KubeletFamilies) SetVolumes(counts func() (desired, actual map[string]int)) {
	if k == nil {
		return
	}
	k.volumes = counts
}

var volumeManagerDesc = prometheus.NewDesc("volume_manager_total_volumes", alpha+"Number of volumes in Volume Manager",
	[]string{"plugin_name", "state"}, nil)

// volumeCollector exports volume_manager_total_volumes at scrape time.
type volumeCollector struct {
	counts func() (desired, actual map[string]int)
}

// Describe implements prometheus.Collector.
func (vc volumeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- volumeManagerDesc }

// Collect implements prometheus.Collector.
func (vc volumeCollector) Collect(ch chan<- prometheus.Metric) {
	desired, actual := vc.counts()
	for state, counts := range map[string]map[string]int{"desired_state_of_world": desired, "actual_state_of_world": actual} {
		for plugin, n := range counts {
			ch <- prometheus.MustNewConstMetric(volumeManagerDesc, prometheus.GaugeValue, float64(n), plugin, state)
		}
	}
}

// VolumeStatDuration observes how long measuring one volume took
// (kubelet_volume_metric_collection_duration_seconds), by metric source: du, statfs, or a CSI
// driver's name.
func (k *KubeletFamilies) VolumeStatDuration(source string, d time.Duration) {
	if k == nil {
		return
	}
	k.volumeStatDuration.WithLabelValues(source).Observe(d.Seconds())
}

// ClaimVolumeStats is what a claim's volume holds, as last measured on the node.
type ClaimVolumeStats struct {
	Namespace, Claim               string
	Capacity, Available, Used      float64
	Inodes, InodesFree, InodesUsed float64
}

// SetVolumeStats gives the kubelet_volume_stats_* families their source: the volumes behind
// claims the pods use, as last measured. Call it before New registers the families.
func (k *KubeletFamilies) SetVolumeStats(list func() []ClaimVolumeStats) {
	if k == nil {
		return
	}
	k.volumeStats = list
}

// The kubelet's volume stats families (pkg/kubelet/metrics/collectors/volume_stats.go), by
// namespace and claim.
var (
	volumeStatsLabels        = []string{"namespace", "persistentvolumeclaim"}
	volumeStatsCapacityDesc  = prometheus.NewDesc(kubeletSubsystem+"_volume_stats_capacity_bytes", alpha+"Capacity in bytes of the volume", volumeStatsLabels, nil)
	volumeStatsAvailableDesc = prometheus.NewDesc(kubeletSubsystem+"_volume_stats_available_bytes", alpha+"Number of available bytes in the volume", volumeStatsLabels, nil)
	volumeStatsUsedDesc      = prometheus.NewDesc(kubeletSubsystem+"_volume_stats_used_bytes", alpha+"Number of used bytes in the volume", volumeStatsLabels, nil)
	volumeStatsInodesDesc    = prometheus.NewDesc(kubeletSubsystem+"_volume_stats_inodes", alpha+"Maximum number of inodes in the volume", volumeStatsLabels, nil)
	volumeStatsInodesFree    = prometheus.NewDesc(kubeletSubsystem+"_volume_stats_inodes_free", alpha+"Number of free inodes in the volume", volumeStatsLabels, nil)
	volumeStatsInodesUsed    = prometheus.NewDesc(kubeletSubsystem+"_volume_stats_inodes_used", alpha+"Number of used inodes in the volume", volumeStatsLabels, nil)
)

// volumeStatsCollector exports the kubelet_volume_stats_* families at scrape time: one
// sample per claim, the first measurement listed when several pods use it.
type volumeStatsCollector struct {
	list func() []ClaimVolumeStats
}

// Describe implements prometheus.Collector.
func (vc volumeStatsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{volumeStatsCapacityDesc, volumeStatsAvailableDesc, volumeStatsUsedDesc, volumeStatsInodesDesc, volumeStatsInodesFree, volumeStatsInodesUsed} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (vc volumeStatsCollector) Collect(ch chan<- prometheus.Metric) {
	seen := map[[2]string]bool{}
	for _, v := range vc.list() {
		key := [2]string{v.Namespace, v.Claim}
		if seen[key] {
			continue
		}
		seen[key] = true
		for _, s := range []struct {
			d *prometheus.Desc
			v float64
		}{{volumeStatsCapacityDesc, v.Capacity}, {volumeStatsAvailableDesc, v.Available}, {volumeStatsUsedDesc, v.Used},
			{volumeStatsInodesDesc, v.Inodes}, {volumeStatsInodesFree, v.InodesFree}, {volumeStatsInodesUsed, v.InodesUsed}} {
			ch <- prometheus.MustNewConstMetric(s.d, prometheus.GaugeValue, s.v, v.Namespace, v.Claim)
		}
	}
}

// Relisted observes one relist of every container (the kubelet's PLEG relist): its
// duration, the interval since the previous one and the time it ended.
func (k *KubeletFamilies) Relisted(start time.Time, d time.Duration) {
	if k == nil {
		return
	}
	k.plegRelist.Observe(d.Seconds())
	if !k.lastRelist.IsZero() {
		k.plegInterval.Observe(start.Sub(k.lastRelist).Seconds())
	}
	k.lastRelist = start
	k.plegLastSeen.Set(float64(start.Add(d).UnixNano()) / 1e9)
}

// RuntimeOperation counts one runtime operation (kubelet_runtime_operations_total, its
// duration and, when failed, kubelet_runtime_operations_errors_total). operation is the
// kubelet's operation type, the CRI call's name in snake case (run_podsandbox,
// create_container, list_containers, ...).
func (k *KubeletFamilies) RuntimeOperation(operation string, d time.Duration, failed bool) {
	if k == nil {
		return
	}
	k.runtimeOps.WithLabelValues(operation).Inc()
	k.runtimeOpsDuration.WithLabelValues(operation).Observe(d.Seconds())
	if failed {
		k.runtimeOpsErrors.WithLabelValues(operation).Inc()
	}
}

// RestRequest counts one request to the API server (rest_client_requests_total by status
// code, method and host, as client-go's metrics adapter reports it: code "<error>" when no
// response came).
func (k *KubeletFamilies) RestRequest(code, method, host string) {
	if k == nil {
		return
	}
	k.restRequests.WithLabelValues(code, method, host).Inc()
}

// RestLatency observes one request's latency (rest_client_request_duration_seconds by verb and
// host).
func (k *KubeletFamilies) RestLatency(verb, host string, d time.Duration) {
	if k == nil {
		return
	}
	k.restLatency.WithLabelValues(verb, host).Observe(d.Seconds())
}

var (
	runningPodsDesc = prometheus.NewDesc(kubeletSubsystem+"_running_pods",
		alpha+"Number of pods that have a running pod sandbox", nil, nil)
	runningContainersDesc = prometheus.NewDesc(kubeletSubsystem+"_running_containers",
		alpha+"Number of containers currently running", []string{"container_state"}, nil)
)

// runningCounts is what kubelet_running_pods and kubelet_running_containers say of pods.
type runningCounts struct {
	pods       int
	containers map[string]int // by container_state
}

// countRunning counts the pods with a sandbox up (phase Running, or Pending with
// PodReadyToStartContainers true: the kubelet counts the runtime's ready sandboxes) and the
// containers by state as the runtime reports them: running, exited (terminated), created
// (waiting after a run, its instance still there) and unknown.
func countRunning(pods []v1.Pod) runningCounts {
	c := runningCounts{containers: map[string]int{}}
	for i := range pods {
		st := &pods[i].Status
		sandbox := st.Phase == v1.PodRunning
		if st.Phase == v1.PodPending {
			for _, cond := range st.Conditions {
				if cond.Type == v1.PodReadyToStartContainers && cond.Status == v1.ConditionTrue {
					sandbox = true
				}
			}
		}
		if sandbox {
			c.pods++
		}
		if st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed {
			continue
		}
		for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses, st.EphemeralContainerStatuses} {
			for _, cs := range list {
				switch {
				case cs.State.Running != nil:
					c.containers[containerStateRunning]++
				case cs.State.Terminated != nil:
					c.containers[containerStateExited]++
				case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
					c.containers[containerStateExited]++
				case cs.State.Waiting != nil && cs.ContainerID != "":
					c.containers[containerStateCreated]++
				}
			}
		}
	}
	return c
}

// runningCollector exports kubelet_running_pods and kubelet_running_containers from the pod
// source at scrape time.
type runningCollector struct{ src PodSource }

// Describe implements prometheus.Collector.
func (rc runningCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- runningPodsDesc
	ch <- runningContainersDesc
}

// Collect implements prometheus.Collector.
func (rc runningCollector) Collect(ch chan<- prometheus.Metric) {
	c := countRunning(rc.src.Pods())
	ch <- prometheus.MustNewConstMetric(runningPodsDesc, prometheus.GaugeValue, float64(c.pods))
	for state, n := range c.containers {
		ch <- prometheus.MustNewConstMetric(runningContainersDesc, prometheus.GaugeValue, float64(n), state)
	}
}
