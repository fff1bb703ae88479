package mixin

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	info "github.com/google/cadvisor/lib/model"
	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/health"
	"github.com/slicelet/slicelet/internal/metrics"
)

// promtool is the promtool binary: $PROMTOOL, else the one on PATH.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL"); p != "" {
		return p
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("promtool (Debian's prometheus package) is needed: %v", err)
		}
		t.Skipf("promtool (Debian's prometheus package) not found: %v", err)
	}
	return p
}

// TestPromtool: the rules are valid (promtool check rules) and each alert does what its unit
// tests say (promtool test rules).
func TestPromtool(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", "alerts.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// fakePods is a metrics.PodSource with one running and one rejected pod.
type fakePods struct{}

func (fakePods) Pods() []v1.Pod {
	return []v1.Pod{
		{Status: v1.PodStatus{Phase: v1.PodRunning, QOSClass: v1.PodQOSBurstable,
			ContainerStatuses: []v1.ContainerStatus{{Name: "a", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}}},
		{Status: v1.PodStatus{Phase: v1.PodFailed, QOSClass: v1.PodQOSBestEffort, Reason: "OutOfcpu"}},
	}
}

// fakeCadvisor is a metrics.CadvisorSource with one container that used CPU under a quota
// (cAdvisor exports the CPU usage of a container that used some, its CFS counters when it has a
// quota).
type fakeCadvisor struct{}

func (fakeCadvisor) ContainerInfo() map[string]*info.ContainerInfo {
	return map[string]*info.ContainerInfo{"/c": {ContainerReference: info.ContainerReference{Name: "/c", Aliases: []string{"c"}},
		Spec:  info.ContainerSpec{Image: "i", HasCpu: true, HasMemory: true, HasProcesses: true, Cpu: info.CpuSpec{Quota: 50000, Period: 100000}},
		Stats: []*info.ContainerStats{{Timestamp: time.Unix(1, 0), Cpu: &info.CpuStats{Usage: info.CpuUsage{Total: 1}}, Memory: &info.MemoryStats{}, Processes: &info.ProcessStats{}}}}}
}
func (fakeCadvisor) MachineInfo() (*info.MachineInfo, error) {
	return &info.MachineInfo{NumCores: 1}, nil
}
func (fakeCadvisor) VersionInfo() *info.VersionInfo { return &info.VersionInfo{} }

// exported is every metric name slicelet serves on /metrics and /metrics/cadvisor, with each
// family fed once so that it has a series.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	tr := health.New(health.Options{})
	w := &health.Warnable{Code: "runtime", Title: "runtime", Severity: health.SeverityCritical}
	cond := &health.Warnable{Code: "memory-pressure", Title: "memory pressure", Severity: health.SeverityWarning, Condition: &health.Condition{Type: "MemoryPressure"}}
	tr.Register(w, cond)
	tr.SetHealthy(w)
	tr.SetHealthy(cond)
	k := metrics.NewKubeletFamilies()
	m := metrics.New(metrics.Options{Version: "1", Pods: fakePods{}, Health: tr, Probes: metrics.NewProbeResults(), Kubelet: k, Cadvisor: fakeCadvisor{}})
	m.AdmissionRejected("OutOfcpu")
	m.Evicted("memory.available")
	m.GCRun(metrics.GCKindImages, metrics.ResultError, 1, 1)
	m.SetSignalObservation("memory.available", 1, time.Now())
	m.ObserveSystemd("start", "success", time.Millisecond)
	k.SetNode("n", 2)
	k.PodStarted(time.Second)
	k.PodWorker(metrics.PodWorkerSync, time.Second)
	k.Relisted(time.Now(), time.Millisecond)
	k.RuntimeOperation("list_containers", time.Millisecond, true)
	k.RestRequest("200", "GET", "h")
	k.RestLatency("GET", "h", time.Millisecond)
	names := map[string]bool{}
	for _, path := range []string{"/metrics", "/metrics/cadvisor", "/metrics/probes"} {
		rec := httptest.NewRecorder()
		m.Handler(nil).ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		for line := range strings.Lines(rec.Body.String()) {
			if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
				f := strings.Fields(name)
				names[f[0]] = true
				if f[1] == "histogram" {
					names[f[0]+"_bucket"], names[f[0]+"_sum"], names[f[0]+"_count"] = true, true, true
				}
			}
		}
	}
	return names
}

// metricName finds the metric names in a PromQL expression: identifiers of the families
// slicelet serves (slicelet_, kubelet_, container_, machine_, process_, go_, rest_client_,
// prober_), not label names (followed by =, !=, =~, !~) or functions.
var metricName = regexp.MustCompile(`\b((?:slicelet|kubelet|container|machine|process|go|rest_client|prober)_[a-zA-Z0-9_]+)\b\s*(=~|!~|!=|=)?`)

// TestMetricsExist: every metric the alerts and the dashboard read is one slicelet serves (a
// renamed family breaks this test, not an operator's alert), and the dashboard is valid JSON.
func TestMetricsExist(t *testing.T) {
	names := exported(t)
	var exprs []string
	b, err := os.ReadFile("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			exprs = append(exprs, line)
		}
	}
	b, err = os.ReadFile("dashboards/slicelet-node.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil || dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("dashboard: %v (uid %q, %d panels)", err, dash.UID, len(dash.Panels))
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	seen := 0
	for _, e := range exprs {
		for _, m := range metricName.FindAllStringSubmatch(e, -1) {
			if m[2] != "" {
				continue // a label
			}
			seen++
			if !names[m[1]] {
				t.Errorf("%s is read by the mixin but slicelet does not serve it (in %q)", m[1], strings.TrimSpace(e))
			}
		}
	}
	if seen < 20 {
		t.Errorf("only %d metric references found: the parser is broken", seen)
	}
}
