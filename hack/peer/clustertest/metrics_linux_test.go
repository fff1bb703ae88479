package clustertest

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/slicelet/slicelet/hack/peer/clusterdemo"
	"github.com/slicelet/slicelet/hack/peer/markdown"
	"github.com/slicelet/slicelet/hack/peer/peermetrics"
	"github.com/slicelet/slicelet/hack/peer/peerrun"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// Where TestMetricsSideBySide leaves its result on the host: PEER_METRICS_OUT, a directory
// (the scrapes, kubelet/ and slicelet/, one file an endpoint, and report.md; the cgroup v2 VM's
// in PEER_METRICS_OUT-v2), and PEER_METRICS_DOCS, a document whose "## peer-metrics" section
// gets the report (docs/peer.md; the VM's, "## peer-metrics on cgroup v2").
const (
	metricsOutEnv  = "PEER_METRICS_OUT"
	metricsDocsEnv = "PEER_METRICS_DOCS"
	// metricsDir is the scrapes' directory under the work directory.
	metricsDir = "peer-metrics"
)

// TestMetricsSideBySide runs the same pods under the kubelet and then under slicelet (one
// control plane, containerd, node name, credentials and node configuration; clusterdemo) and
// scrapes every metrics endpoint the kubelet serves on its API, as Prometheus does (the API
// server's kubelet client certificate), once each series the comparison needs is there: then it
// compares the families (peermetrics.Compare) and fails on a difference not explained in
// metricDivergences — a difference the kubernetes-mixin's rules or dashboards would notice needs
// a reason of its own. make peer-metrics; the report is docs/peer.md's "## peer-metrics".
func TestMetricsSideBySide(t *testing.T) {
	if !systemdtest.Inside() {
		monitoring := mixinFiles(t)
		work := runInSandboxFor(t, "^TestMetricsSideBySide$", 30*time.Minute)
		compareScrapes(t, filepath.Join(work, metricsDir), monitoring, cgroupV1)
		if dir := runInVMFor(t, "^TestMetricsSideBySide$", 40*time.Minute); dir != "" {
			compareScrapes(t, filepath.Join(dir, metricsDir), monitoring, cgroupV2)
		}
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 28*time.Minute)
	defer cancel()
	// The kubelet's API listens on 127.0.0.1 (peerrun), slicelet's on the node's address.
	c := startSideBySide(t, ctx, "")
	// The scrapes go where the host reads them: the work directory the sandbox shares, or the
	// VM's working directory (its work directory is the guest's own).
	work := os.Getenv(workEnv)
	if os.Getenv(peerrun.InsideEnv) == "vm" {
		var err error
		if work, err = os.Getwd(); err != nil {
			t.Fatal(err)
		}
	}
	crt, key := c.CP.CertFiles("apiserver-kubelet-client")
	cert, err := tls.LoadX509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}}}}
	for i, k := range []peerrun.Kind{peerrun.Kubelet, peerrun.Slicelet} {
		if i > 0 {
			if err := c.StopAgent(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.StartAgent(ctx, k); err != nil {
				t.Fatal(err)
			}
		}
		base := "https://127.0.0.1:10250"
		if k == peerrun.Slicelet {
			base = "https://" + sideBySideNodeIP + ":10250"
		}
		start := time.Now()
		scrapes := metricsScenario(t, ctx, c, client, base)
		dir := filepath.Join(work, metricsDir, string(k))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for path, sc := range scrapes {
			name, data := scrapeFile(path)+".txt", sc.body
			if sc.code != http.StatusOK {
				name, data = scrapeFile(path)+".status", fmt.Appendf(nil, "%d\n", sc.code)
			}
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%s node: scraped %d endpoints after %s", k, len(scrapes), time.Since(start).Round(time.Second))
		if i == 0 {
			clearMetricsPods(t, ctx, c)
		}
	}
}

// scrapeFile is the name of the files an endpoint's scrape is kept in, less the extension:
// "metrics_cadvisor" for /metrics/cadvisor; .txt holds what an endpoint answered with 200, .status
// the status of one that did not.
func scrapeFile(path string) string {
	return strings.ReplaceAll(strings.TrimPrefix(path, "/"), "/", "_")
}

// scrape is one endpoint's answer.
type scrape struct {
	code int
	body []byte
}

// metricPods are the scenario's pods: probes of each kind (exec: the test image has no
// server), one container throttled under a CPU limit beside an init container that has
// exited, an emptyDir, limits on memory.
func metricPods() []*v1.Pod {
	limits := func(cpu, mem string) v1.ResourceRequirements {
		l := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
		return v1.ResourceRequirements{Requests: l, Limits: l}
	}
	// Exec probes that pass, with time to spare on a loaded machine (an exec takes seconds
	// there).
	ok := func(period int32) *v1.Probe {
		return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"/bin/true"}}}, PeriodSeconds: period,
			TimeoutSeconds: 20, FailureThreshold: 10}
	}
	loop := []string{"/bin/sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.5; done"}
	return []*v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "probed", Namespace: metav1.NamespaceDefault},
			Spec: v1.PodSpec{AutomountServiceAccountToken: ptr.To(false), TerminationGracePeriodSeconds: ptr.To[int64](2),
				Containers: []v1.Container{{Name: "main", Image: peerrun.TestImage, ImagePullPolicy: v1.PullNever, Command: loop,
					Resources:     limits("50m", "32Mi"),
					StartupProbe:  ok(2),
					LivenessProbe: ok(5), ReadinessProbe: ok(5)}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "busy", Namespace: metav1.NamespaceDefault},
			Spec: v1.PodSpec{AutomountServiceAccountToken: ptr.To(false), TerminationGracePeriodSeconds: ptr.To[int64](2),
				Volumes: []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
				InitContainers: []v1.Container{{Name: "init", Image: peerrun.TestImage, ImagePullPolicy: v1.PullNever,
					Command:      []string{"/bin/sh", "-c", "echo ready > /scratch/state"},
					VolumeMounts: []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}}},
				// A busy loop under 20m of CPU: throttled (CFS) at a cost of 2% of a core.
				Containers: []v1.Container{{Name: "spin", Image: peerrun.TestImage, ImagePullPolicy: v1.PullNever,
					Command:      []string{"/bin/sh", "-c", "trap 'exit 0' TERM; dd if=/dev/zero of=/scratch/file bs=64k count=16; while true; do :; done"},
					Resources:    v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m"), v1.ResourceMemory: resource.MustParse("16Mi")}, Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("20m")}},
					VolumeMounts: []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}}}}},
	}
}

// metricsScenario runs the pods on the node and scrapes every endpoint at base once what is
// compared is there: the node Ready, the pods Running and ready, each container's series on
// /metrics/cadvisor and /metrics/resource, the probes' on /metrics/probes, the pods' starts on
// /metrics.
func metricsScenario(t *testing.T, ctx context.Context, c *clusterdemo.Cluster, client *http.Client, base string) map[string]scrape {
	t.Helper()
	if _, err := c.WaitNodeReady(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range metricPods() {
		if _, err := c.Admin.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, ctx, "the pods Running and Ready", 4*time.Minute, func(ctx context.Context) (bool, error) {
		for _, want := range metricPods() {
			p, err := c.Admin.CoreV1().Pods(want.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if clusterdemo.PodCondition(p, v1.PodReady) == nil || clusterdemo.PodCondition(p, v1.PodReady).Status != v1.ConditionTrue {
				return false, nil
			}
		}
		return true, nil
	})
	get := func(ctx context.Context, path string) (int, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return 0, nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, body, err
	}
	// What must be there before the scrape is compared: the series of each container and
	// probe, and a pod's start observed.
	needs := map[string][]string{
		"/metrics":          {"kubelet_pod_start_duration_seconds_count", "kubelet_running_pods"},
		"/metrics/cadvisor": {`container_cpu_usage_seconds_total{container="main"`, `container_cpu_cfs_throttled_periods_total{container="spin"`, `container_memory_working_set_bytes{container="spin"`},
		"/metrics/probes":   {`probe_type="Liveness"`, `probe_type="Readiness"`, `probe_type="Startup"`},
		"/metrics/resource": {`container_cpu_usage_seconds_total{container="main"`, `container_memory_working_set_bytes{container="spin"`},
	}
	scrapes := map[string]scrape{}
	var missing string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		missing = ""
		// /healthz first, as a liveness check or an operator asks it: the health checks'
		// series on /metrics/slis exist once it has been asked.
		if _, _, err := get(ctx, "/healthz"); err != nil {
			missing = fmt.Sprintf("/healthz: %v", err)
			return false, nil
		}
		for _, path := range peermetrics.Endpoints {
			code, body, err := get(ctx, path)
			if err != nil {
				missing = fmt.Sprintf("%s: %v", path, err)
				return false, nil
			}
			if code != http.StatusOK && len(needs[path]) > 0 {
				missing = fmt.Sprintf("%s: %d", path, code)
			}
			for _, s := range needs[path] {
				if code == http.StatusOK && !strings.Contains(string(body), s) {
					missing = fmt.Sprintf("%s lacks %s", path, s)
				}
			}
			scrapes[path] = scrape{code, body}
		}
		return missing == "", nil
	})
	if err != nil {
		t.Fatalf("every endpoint's series there: %v; last: %s", err, missing)
	}
	return scrapes
}

// clearMetricsPods deletes the scenario's pods and waits until they are gone.
func clearMetricsPods(t *testing.T, ctx context.Context, c *clusterdemo.Cluster) {
	t.Helper()
	for _, p := range metricPods() {
		if err := c.Admin.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, ctx, "the pods deleted", 2*time.Minute, func(ctx context.Context) (bool, error) {
		l, err := c.Admin.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, err
	})
}

// monitoringDirEnv names the directory of kube-prometheus' rendered kubernetes-mixin (its
// rules, its kubelet ServiceMonitor and its dashboards, as kube-prometheus' manifests/ hold
// them); make peer-metrics sets it from KUBE_PROMETHEUS.
const monitoringDirEnv = "PEER_METRICS_MIXIN"

// mixinFiles are the monitoring's rule files and dashboards; without them the test skips, or
// fails with CI=true.
func mixinFiles(t *testing.T) [][]byte {
	t.Helper()
	monitoringDir := os.Getenv(monitoringDirEnv)
	paths, err := filepath.Glob(filepath.Join(monitoringDir, "*.yaml"))
	if monitoringDir == "" {
		err = fmt.Errorf("%s is not set", monitoringDirEnv)
	} else if err == nil && len(paths) == 0 {
		err = fmt.Errorf("no rules or dashboards in %s", monitoringDir)
	}
	var out [][]byte
	for _, p := range paths {
		b, rerr := os.ReadFile(p)
		if rerr != nil {
			err = rerr
		}
		out = append(out, b)
	}
	if err != nil {
		if systemdtest.CI() {
			t.Fatalf("the kubernetes-mixin's rules and dashboards: %v", err)
		}
		t.Skipf("SKIP (the kubernetes-mixin's rules and dashboards: %v)", err)
	}
	return out
}

// readScrapes reads what TestMetricsSideBySide kept of one agent's endpoints (scrapeFile).
func readScrapes(dir string) (map[string]peermetrics.Scrape, error) {
	out := map[string]peermetrics.Scrape{}
	for _, path := range peermetrics.Endpoints {
		base := filepath.Join(dir, scrapeFile(path))
		if b, err := os.ReadFile(base + ".status"); err == nil {
			code, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				return nil, fmt.Errorf("%s.status: %w", base, err)
			}
			out[path] = peermetrics.Scrape{Status: code}
			continue
		}
		b, err := os.ReadFile(base + ".txt")
		if err != nil {
			return nil, err
		}
		fams, err := peermetrics.Parse(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out[path] = peermetrics.Scrape{Status: http.StatusOK, Families: fams}
	}
	return out, nil
}

// metricsRun says where a side-by-side run's nodes ran, for its report.
type metricsRun struct {
	where   string // in the report's first paragraph
	heading string // its section of PEER_METRICS_DOCS
	out     string // appended to PEER_METRICS_OUT
	command string
}

var (
	cgroupV1 = metricsRun{where: "cgroup v1, the sandbox", heading: "## peer-metrics", command: "make peer-metrics"}
	cgroupV2 = metricsRun{where: "cgroup v2, the throwaway VM", heading: "## peer-metrics on cgroup v2", out: "-v2",
		command: "make peer-metrics SLICELET_VM=1"}
)

// compareScrapes compares the kubelet's and slicelet's scrapes under dir, writes the report
// (dir/report.md, PEER_METRICS_OUT and PEER_METRICS_DOCS when set) and fails on each
// difference metricDivergences does not explain.
func compareScrapes(t *testing.T, dir string, monitoring [][]byte, run metricsRun) {
	t.Helper()
	k, err := readScrapes(filepath.Join(dir, string(peerrun.Kubelet)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := readScrapes(filepath.Join(dir, string(peerrun.Slicelet)))
	if err != nil {
		t.Fatal(err)
	}
	diffs := peermetrics.Compare(k, s, peermetrics.MixinNames(monitoring...))
	explained, open := peermetrics.Explain(diffs, metricDivergences)
	r := peermetrics.Report{Date: time.Now().UTC().Format("2006-01-02"), Commit: commit(t), Command: run.command,
		Kubelet: k, Slicelet: s, Explained: explained, Open: open}
	for _, d := range metricDivergences {
		if !slices.Contains(r.Reasons, d.Reason) {
			r.Reasons = append(r.Reasons, d.Reason)
		}
	}
	report := peermetrics.Markdown(r)
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := os.Getenv(metricsOutEnv); out != "" {
		out += run.out
		if err := os.RemoveAll(out); err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(out, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
	}
	if docs := os.Getenv(metricsDocsEnv); docs != "" {
		doc, err := os.ReadFile(docs)
		if err != nil {
			t.Fatal(err)
		}
		body := "Written by `make peer-metrics` (hack/peer/clustertest `TestMetricsSideBySide`): the same pods\n" +
			"(exec startup, liveness and readiness probes; a container throttled under a CPU limit beside an\n" +
			"init container that exited and an emptyDir; memory limits) under the kubelet v1.37.2 and under\n" +
			"slicelet on one control plane and containerd (" + run.where + "), every metrics endpoint\n" +
			"of the kubelet API scraped with the API server's kubelet client certificate, the families\n" +
			"compared: names, types, label names, buckets, help. A difference not explained below fails the test.\n\n" + report
		if err := os.WriteFile(docs, []byte(markdown.ReplaceSection(string(doc), run.heading, body)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("metrics side by side (%s):\n%s", run.where, report)
	for _, d := range open {
		t.Errorf("differs: %s (noticed by the mixin: %v)", d, d.Noticed)
	}
}

// commit is the repository's commit, "+dirty" when the tree has changes.
func commit(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += "+dirty"
	}
	return c
}

// metricDivergences explain the differences between the kubelet's metrics endpoints and
// slicelet's; one marked Noticed may explain a family the kubernetes-mixin reads (the reason
// says why what it reads is the same on both nodes, or what is missing).
var metricDivergences = []peermetrics.Divergence{
	{Pattern: regexp.MustCompile(`^/metrics slicelet_[a-z0-9_]+: slicelet only$`),
		Reason: "slicelet's own families (packaging/mixin reads them)"},
	{Pattern: regexp.MustCompile(`^/metrics workqueue_[a-z0-9_]+: kubelet only$`), Noticed: true,
		Reason: "client-go's work queues inside the kubelet (its certificate and CA bundle controllers); the mixin reads workqueue_* of the controller manager, the scheduler and kube-proxy only (their jobs), and slicelet has no such queue"},
	{Pattern: regexp.MustCompile(`^/metrics apiserver_client_certificate_expiration_seconds: kubelet only$`), Noticed: true,
		Reason: "the kubelet API's client-certificate authenticator times the certificates presented to it; the mixin's KubeClientCertificateExpiration reads it of job=\"apiserver\" only. Not yet in slicelet"},
	{Pattern: regexp.MustCompile(`^/metrics/cadvisor container_fs_(reads|writes)_total: kubelet only$`), Noticed: true,
		Reason: "on the kubelet node these are the root cgroup's series (id=\"/\": the machine's disks, from /proc/diskstats) only; the mixin's panels select container!=\"\" and read none of them. A container's block I/O (container_fs_reads_bytes_total, …) comes from its blkio counters on both nodes, and the sandbox's hierarchy counts none"},
	{Pattern: regexp.MustCompile(`^/metrics/cadvisor (container_fs_[a-z_]+|container_ulimits_soft): kubelet only$`),
		Reason: "the kubelet's cAdvisor reports the machine's filesystems and disks on the root cgroup (id=\"/\": usage, limit, inodes, diskstats) and each process's open-files limit; no rule or dashboard reads them. Not yet in slicelet"},
	{Pattern: regexp.MustCompile(`^/metrics (apiserver|aggregator|authentication|authorization|cardinality_enforcement|disabled_metrics|hidden_metrics|registered_metrics|kubernetes_feature)_[a-z0-9_]+: kubelet only$`),
		Reason: "k8s.io/apiserver's and component-base's own families linked into the kubelet (its authentication and authorization libraries, the metrics registry's bookkeeping, feature gates); not the node's behaviour"},
	{Pattern: regexp.MustCompile(`^/metrics rest_client_[a-z0-9_]+: kubelet only$`),
		Reason: "client-go's families slicelet does not adapt (rate limiter, request and response sizes, transport cache, exec plugin); the mixin reads rest_client_requests_total and rest_client_request_duration_seconds, which both serve"},
	{Pattern: regexp.MustCompile(`^/metrics (dra|kubelet_(cpu_manager|memory_manager|topology_manager|memory_qos|evented_pleg|image_volume|imagemanager|image_manager|graceful_shutdown|node_startup|cri_losing_support|metrics_provider|pod_level_resources|started_user_namespaced|pod_in_progress_resizes|sleep_action|lifecycle_handler))[a-z0-9_]*: kubelet only$`),
		Reason: "managers and features slicelet does not have (CPU, memory and topology managers, DRA, evented PLEG, image volumes, the image pull records, graceful node shutdown, user namespaces) or kubelet internals; no rule or dashboard reads them"},
	{Pattern: regexp.MustCompile(`^/metrics (force_cleaned|reconstruct_volume|volume_operation_total|kubelet_volume_metric_collection|kubelet_orphan_pod_cleaned)[a-z0-9_]*: kubelet only$`),
		Reason: "the volume manager's reconstruction and cleanup after a restart, and its collection timing; no rule or dashboard reads them"},
	{Pattern: regexp.MustCompile(`^/metrics kubelet_[a-z0-9_]+: kubelet only$`),
		Reason: "**not yet**: kubelet families no rule or dashboard of the mixin reads (pod and container counts by stage, HTTP server, SLI and status-sync durations, container log usage)"},
	{Pattern: regexp.MustCompile(`^/metrics/resource container_swap_limit_bytes: kubelet only$`),
		Reason: "a container without a swap limit it can read (cgroup v1 without swap accounting, the sandbox): the kubelet's cAdvisor reports 0 there, slicelet reports none (its readings do not tell \"no limit\" from \"limit 0\"); metrics-server does not read it"},
}
