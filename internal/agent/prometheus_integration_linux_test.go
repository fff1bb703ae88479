package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// monitoringDir holds kube-prometheus' rendered kubernetes-mixin rules (its manifests'
// kubernetesControlPlane-prometheusRule.yaml, Apache-2.0), in the package directory so that the
// test reads them inside the sandbox wherever the repository lives.
const monitoringDir = "testdata/kube-prometheus"

// prometheusBinary is $PROMETHEUS, else prometheus on PATH (Debian's prometheus package).
func prometheusBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMETHEUS"); p != "" {
		return p
	}
	p, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("prometheus (Debian's prometheus package) is needed: %v", err)
		}
		t.Skipf("prometheus (Debian's prometheus package) not found: %v", err)
	}
	return p
}

// mixinRules writes the kubernetes-mixin's rule groups (spec.groups of kube-prometheus'
// PrometheusRule) for nodes, pods and containers to a Prometheus rule file and returns its
// path and the groups' names.
func mixinRules(t *testing.T, dir string) (string, []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(monitoringDir, "kubernetesControlPlane-prometheusRule.yaml"))
	if err != nil {
		t.Fatalf("the kubernetes-mixin's rules: %v", err)
	}
	var rule struct {
		Spec struct {
			Groups []map[string]any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &rule); err != nil {
		t.Fatal(err)
	}
	var groups []map[string]any
	var names []string
	for _, g := range rule.Spec.Groups {
		name, _ := g["name"].(string)
		if strings.HasPrefix(name, "k8s.rules.container_") || name == "kubelet.rules" || name == "kubernetes-system-kubelet" ||
			name == "kubernetes-resources" || name == "kubernetes-storage" {
			groups, names = append(groups, g), append(names, name)
		}
	}
	out, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "mixin-rules.yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, names
}

// promQuery runs an instant query against Prometheus' API.
func promQuery(t *testing.T, base, q string) []map[string]any {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []map[string]any `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		t.Fatalf("query %q: %v %s", q, err, r.Error)
	}
	return r.Data.Result
}

// TestIntegrationPrometheusMixin: a real Prometheus (Debian's package) scrapes a real slicelet
// node as kube-prometheus' kubelet ServiceMonitor does (the three paths, job="kubelet",
// metrics_path relabelled from __metrics_path__, the node label, honor_labels, cAdvisor's
// timestamps not honoured) with the kubernetes-mixin's node, pod and container rules loaded;
// kube_pod_info, which the container rules join on, comes from a stand-in for
// kube-state-metrics (there is no API server here). Every rule evaluates without error, and
// the container rules' records, the kubelet PLEG quantiles and CPUThrottlingHigh's expression
// return series for slicelet's pod.
func TestIntegrationPrometheusMixin(t *testing.T) {
	// Prometheus with the mixin's rules runs once, in the hybrid sandbox; the cgroup numbers the
	// rules read are TestIntegrationMonitoring's, which runs in the VM too.
	systemdtest.SandboxOnly(t, systemdtest.Require(t), "Prometheus with the kubernetes-mixin's rules runs on the hybrid layout only; TestIntegrationMonitoring checks the same families on cgroup v2")
	prom := prometheusBinary(t)
	port, promPort := freePort(t), freePort(t)
	d := monitoredAgent(t, "slicelet-prometheus-it.service", port)
	ctx := t.Context()
	client := api.NewClient(d.sock)
	if _, err := client.ApplyPod(ctx, []byte(`apiVersion: v1
kind: Pod
metadata: {name: busy, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: burn
    command: [/bin/sh, -c, "while :; do :; done"]
    resources: {limits: {cpu: 100m, memory: 64Mi}}
`)); err != nil {
		t.Fatal(err)
	}
	var pod v1.Pod
	waitFor(t, 60*time.Second, "busy running", func() bool {
		var err error
		pod, err = client.GetPod(ctx, "default", "busy")
		return err == nil && pod.Status.Phase == v1.PodRunning
	})

	// The node's name: the hostname in stand-alone mode, the value of kubelet_node_name's node
	// label and of the scrape's (the ServiceMonitor's endpoints name the node the same way).
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	node := strings.ToLower(hostname)
	// kube-state-metrics' kube_pod_info of the node's pods.
	ksm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# TYPE kube_pod_info gauge\nkube_pod_info{namespace=%q,pod=%q,uid=%q,node=%q,created_by_kind=\"\",created_by_name=\"\",host_ip=\"\",pod_ip=\"\",priority_class=\"\",host_network=\"false\"} 1\n",
			pod.Namespace, pod.Name, pod.UID, node)
	}))
	defer ksm.Close()

	dir := t.TempDir()
	rules, groups := mixinRules(t, dir)
	target := fmt.Sprintf("127.0.0.1:%d", port)
	job := func(name, path string, honorTimestamps bool) string {
		return fmt.Sprintf(`  - job_name: %s
    honor_labels: true
    honor_timestamps: %v
    scrape_interval: 2s
    metrics_path: %s
    static_configs: [{targets: ['%s'], labels: {node: %s}}]
    relabel_configs:
      - {source_labels: [__metrics_path__], target_label: metrics_path}
      - {target_label: job, replacement: kubelet}
`, name, honorTimestamps, path, target, node)
	}
	promCfg := "global: {scrape_interval: 2s, evaluation_interval: 2s}\nrule_files: ['" + rules + "']\nscrape_configs:\n" +
		job("kubelet", "/metrics", true) + job("kubelet-cadvisor", "/metrics/cadvisor", false) + job("kubelet-probes", "/metrics/probes", true) +
		fmt.Sprintf("  - job_name: kube-state-metrics\n    honor_labels: true\n    static_configs: [{targets: ['%s']}]\n", strings.TrimPrefix(ksm.URL, "http://"))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(promCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(prom, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", promPort))
	var promLog strings.Builder
	cmd.Stdout, cmd.Stderr = &promLog, &promLog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus:\n%s", promLog.String())
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", promPort)
	waitFor(t, 60*time.Second, "prometheus ready", func() bool {
		resp, err := http.Get(base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	records := []string{
		`node_namespace_pod_container:container_cpu_usage_seconds_total:sum_irate{pod="busy", container="burn"}`,
		`node_namespace_pod_container:container_cpu_usage_seconds_total:sum_rate5m{pod="busy", container="burn"}`,
		`node_namespace_pod_container:container_memory_working_set_bytes{pod="busy", container="burn"}`,
		`node_namespace_pod_container:container_memory_rss{pod="busy", container="burn"}`,
		`node_namespace_pod_container:container_memory_cache{pod="busy", container="burn"}`,
		`node_namespace_pod_container:container_memory_swap{pod="busy", container="burn"}`,
		`node_quantile:kubelet_pleg_relist_duration_seconds:histogram_quantile{node="` + node + `"}`,
		// CPUThrottlingHigh's ratio, without its 25 % threshold.
		`sum without (id, metrics_path, name, image, endpoint, job, node) (topk by (namespace, pod, container, instance) (1, increase(container_cpu_cfs_throttled_periods_total{container!="", job="kubelet", metrics_path="/metrics/cadvisor"}[5m])))
		  / on (namespace, pod, container, instance) group_left sum without (id, metrics_path, name, image, endpoint, job, node) (topk by (namespace, pod, container, instance) (1, increase(container_cpu_cfs_periods_total{job="kubelet", metrics_path="/metrics/cadvisor"}[5m])))`,
		// KubeletTooManyPods' left side and KubeNodeEviction's join.
		`max by (instance) (kubelet_running_pods{job="kubelet", metrics_path="/metrics"}) * on (instance) group_left(node) max by (instance, node) (kubelet_node_name{job="kubelet", metrics_path="/metrics"})`,
	}
	missing := records
	for deadline := time.Now().Add(3 * time.Minute); len(missing) > 0; time.Sleep(2 * time.Second) {
		var still []string
		for _, q := range missing {
			if len(promQuery(t, base, q)) == 0 {
				still = append(still, q)
			}
		}
		missing = still
		if len(missing) > 0 && time.Now().After(deadline) {
			resp, err := http.Get(base + "/api/v1/targets")
			var targets strings.Builder
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				targets.Write(b)
			}
			t.Fatalf("after 3 min, no series for:\n%s\ntargets: %s", strings.Join(missing, "\n"), targets.String())
		}
	}

	// Every rule of the loaded groups evaluated, none with an error.
	resp, err := http.Get(base + "/api/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rs struct {
		Data struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rs); err != nil {
		t.Fatal(err)
	}
	if len(rs.Data.Groups) != len(groups) {
		t.Errorf("%d rule groups loaded, want %d (%v)", len(rs.Data.Groups), len(groups), groups)
	}
	for _, g := range rs.Data.Groups {
		for _, r := range g.Rules {
			if r.Health != "ok" || r.LastError != "" {
				t.Errorf("rule %s/%s: health %q, error %q", g.Name, r.Name, r.Health, r.LastError)
			}
		}
	}
}
