package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"

	dto "github.com/prometheus/client_model/go"

	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/units"
)

// freePort is a TCP port on 127.0.0.1 nobody listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// scrape reads one metrics path in the text format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape %s: %s\n%s", url, resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	return mfs
}

// series finds the series of family name whose labels include want; nil if none.
func series(mfs map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	mf := mfs[name]
	if mf == nil {
		return nil
	}
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	return 0
}

// TestIntegrationMonitoring: slicelet as a service with its metrics endpoint on loopback serves
// what the kubelet serves, from the cgroups of a real pod: on /metrics/cadvisor the pod's
// containers with cAdvisor's families and the kubelet's labels (container, pod, namespace,
// image, name, id = the container's cgroup), CPU throttling of a container burning CPU under
// a 100m limit, its memory limit as spec, and a working set that agrees with the cgroup's
// files; on /metrics the kubelet's kubelet_node_name, kubelet_running_pods and
// kubelet_running_containers, kubelet_pod_start_duration_seconds and the relist histogram;
// machine_cpu_cores and machine_memory_bytes. Both cgroup versions (SLICELET_VM=1 for v2).
func TestIntegrationMonitoring(t *testing.T) {
	port := freePort(t)
	d := monitoredAgent(t, "slicelet-monitoring-it.service", port)
	sd, ctx := d.sd, t.Context()
	client := api.NewClient(d.sock)
	manifest := `apiVersion: v1
kind: Pod
metadata: {name: busy, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: burn
    command: [/bin/sh, -c, "while :; do :; done"]
    resources: {limits: {cpu: 100m, memory: 64Mi}}
  - name: idle
    command: [/bin/sleep, infinity]
`
	if _, err := client.ApplyPod(ctx, []byte(manifest)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "busy running", func() bool {
		p, err := client.GetPod(ctx, "default", "busy")
		return err == nil && p.Status.Phase == v1.PodRunning
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	var cad map[string]*dto.MetricFamily
	burn := map[string]string{"pod": "busy", "namespace": "default", "container": "burn"}
	waitFor(t, 60*time.Second, "busy's burn throttled on /metrics/cadvisor", func() bool {
		cad = scrape(t, base+"/metrics/cadvisor")
		m := series(cad, "container_cpu_cfs_throttled_periods_total", burn)
		return m != nil && value(m) > 0
	})
	for _, name := range []string{"container_cpu_usage_seconds_total", "container_cpu_cfs_periods_total", "container_memory_working_set_bytes",
		"container_memory_rss", "container_memory_cache", "container_memory_usage_bytes", "container_memory_swap", "container_spec_memory_limit_bytes",
		"container_oom_events_total", "container_start_time_seconds", "container_last_seen"} {
		m := series(cad, name, burn)
		if m == nil {
			t.Errorf("/metrics/cadvisor: no %s of busy/burn", name)
			continue
		}
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if !strings.HasPrefix(labels["id"], "/kubepods.slice/") || labels["name"] == "" || labels["image"] == "" {
			t.Errorf("%s of busy/burn: labels %v, want id the container's cgroup, a name and an image", name, labels)
		}
	}
	if m := series(cad, "container_spec_memory_limit_bytes", burn); m == nil || value(m) != 64<<20 {
		t.Errorf("container_spec_memory_limit_bytes of burn: %v, want %d", m, 64<<20)
	}
	if m := series(cad, "container_memory_working_set_bytes", map[string]string{"pod": "busy", "container": "idle"}); m == nil {
		t.Error("/metrics/cadvisor: no working set of busy/idle")
	}
	// The pod's own cgroup, as the kubelet's cAdvisor reports it: pod and namespace, no
	// container or image.
	if m := series(cad, "container_memory_working_set_bytes", map[string]string{"pod": "busy", "container": "", "image": ""}); m == nil {
		t.Error("/metrics/cadvisor: no series of busy's pod cgroup")
	}
	for _, name := range []string{"machine_cpu_cores", "machine_memory_bytes"} {
		if mf := cad[name]; mf == nil || value(mf.GetMetric()[0]) <= 0 {
			t.Errorf("/metrics/cadvisor: %s missing or zero", name)
		}
	}

	// The working set agrees with the cgroup: usage − inactive_file of burn's cgroup, read
	// now, within what the container's shell loop can change between a sample and now.
	ws := series(cad, "container_memory_working_set_bytes", burn)
	var id string
	for _, l := range ws.GetLabel() {
		if l.GetName() == "id" {
			id = l.GetValue()
		}
	}
	usage, inactive := readWorkingSetFiles(t, d.env.CgroupRoot, sd.Mode(), id)
	if got, want := value(ws), float64(usage-inactive); got <= 0 || got > want*1.5+(1<<20) || got < want*0.5-(1<<20) {
		t.Errorf("working set of burn on /metrics/cadvisor %v, from the cgroup now %v", got, want)
	}

	met := scrape(t, base+"/metrics")
	if series(met, "kubelet_node_name", nil) == nil {
		t.Error("/metrics: no kubelet_node_name")
	}
	if m := series(met, "kubelet_running_pods", nil); m == nil || value(m) < 1 {
		t.Errorf("/metrics: kubelet_running_pods %v, want at least 1", m)
	}
	if m := series(met, "kubelet_running_containers", map[string]string{"container_state": "running"}); m == nil || value(m) < 2 {
		t.Errorf("/metrics: kubelet_running_containers{container_state=running} %v, want at least 2", m)
	}
	for _, name := range []string{"kubelet_pod_start_duration_seconds", "kubelet_pleg_relist_duration_seconds", "kubelet_pod_worker_duration_seconds"} {
		if mf := met[name]; mf == nil || mf.GetMetric()[0].GetHistogram().GetSampleCount() == 0 {
			t.Errorf("/metrics: %s has no observation", name)
		}
	}
	if series(met, "kubelet_runtime_operations_total", nil) == nil {
		t.Error("/metrics: no kubelet_runtime_operations_total")
	}
	if mf := scrape(t, base+"/metrics/probes"); len(mf) > 1 {
		t.Errorf("/metrics/probes serves more than prober_probe_total: %d families", len(mf))
	}
}

// readWorkingSetFiles reads a cgroup's usage and inactive_file from its files.
func readWorkingSetFiles(t *testing.T, root string, mode units.Mode, cgroup string) (usage, inactive int64) {
	t.Helper()
	dir, usageFile, key := filepath.Join(root, cgroup), "memory.current", "inactive_file"
	if mode != units.ModeUnified {
		dir, usageFile, key = filepath.Join(root, "memory", cgroup), "memory.usage_in_bytes", "total_inactive_file"
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	usage, _ = strconv.ParseInt(strings.TrimSpace(read(usageFile)), 10, 64)
	for line := range strings.Lines(read("memory.stat")) {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			inactive, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return usage, inactive
}

// monitoredAgent starts slicelet as unit with its metrics endpoint on 127.0.0.1:port and the
// pods sampled every second; the unit and the kubepods slices are stopped when the test ends.
func monitoredAgent(t *testing.T, unit string, port int) *daemonEnv {
	t.Helper()
	d := newDaemonEnv(t, "[eviction]\nmonitoring_interval = \"1s\"\n")
	cfg, err := os.ReadFile(d.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), "[metrics]\naddress = \"\"", fmt.Sprintf("[metrics]\naddress = \"127.0.0.1:%d\"", port), 1))
	if err := os.WriteFile(d.cfgPath, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = d.sd.Stop(context.Background(), unit)
		for _, s := range []string{"kubepods-burstable.slice", "kubepods-besteffort.slice", "kubepods.slice"} {
			_ = d.sd.Stop(context.Background(), s)
		}
	})
	agentService(t, d.sd, unit, d.cfgPath)
	return d
}
