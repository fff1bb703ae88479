package slices

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/slicelet/slicelet/units"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/explain")

// golden compares v, as indented JSON, with testdata/explain/<name>.json.
func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	fatalIf(t, err)
	got = append(got, '\n')
	path := filepath.Join("testdata", "explain", name+".json")
	if *update {
		fatalIf(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	fatalIf(t, err)
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden file (run go test ./slices/ -run %s -update):\n%s", path, t.Name(), got)
	}
}

func explainCapacity() Capacity {
	return Capacity{CPU: 4000, Memory: 16 * gi, Pids: 4194304, EphemeralStorage: 100 * gi, HugePages: map[int64]int64{2 * mi: gi, gi: 0}}
}

func TestExplainPodGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/explain/*.yaml")
	fatalIf(t, err)
	if len(files) == 0 {
		t.Fatal("no pod manifests under testdata/explain")
	}
	modes := []struct {
		name string
		mode units.Mode
		opts func() Options
	}{
		{"hybrid", units.ModeHybrid, DefaultOptions},
		{"v2", units.ModeUnified, func() Options {
			o := DefaultOptions()
			o.EnforceMemoryQoS = true
			o.MemoryReservationPolicy = MemoryReservationTiered
			o.PodPidsLimit = 4096
			return o
		}},
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		fatalIf(t, err)
		pod := decodeTestPod(t, data)
		if errs := ValidatePod(pod); len(errs) > 0 {
			t.Fatalf("%s: %v", file, errs.ToAggregate())
		}
		uid, err := PodUID(pod, file)
		fatalIf(t, err)
		pod.UID = typesUID(uid)
		for _, m := range modes {
			name := strings.TrimSuffix(filepath.Base(file), ".yaml") + "." + m.name
			t.Run(name, func(t *testing.T) {
				e, err := ExplainPod(pod, m.opts(), m.mode, explainCapacity())
				fatalIf(t, err)
				golden(t, "pod-"+name, e)
			})
		}
	}
}

func TestExplainPodErrors(t *testing.T) {
	p := podOf(c("a", "—", "—"))
	p.UID = ""
	if _, err := ExplainPod(p, DefaultOptions(), units.ModeUnified, explainCapacity()); err == nil || !strings.Contains(err.Error(), "pod uid") {
		t.Errorf("ExplainPod without uid: %v", err)
	}
}

func TestExplainPodJSONShape(t *testing.T) {
	// A Burstable pod with requests only: only shares are set, the rest must be null, and every
	// documented key must be present.
	e, err := ExplainPod(podOf(c("a", "100m/100Mi", "—")), DefaultOptions(), units.ModeUnified, explainCapacity())
	fatalIf(t, err)
	data, err := json.Marshal(e)
	fatalIf(t, err)
	var m map[string]any
	fatalIf(t, json.Unmarshal(data, &m))
	for _, k := range []string{"qosClass", "slice", "cgroupPath", "resources", "cpuWeight", "systemdProperties", "containers"} {
		if _, ok := m[k]; !ok {
			t.Errorf("key %q missing in %s", k, data)
		}
	}
	res := m["resources"].(map[string]any)
	for _, k := range []string{"cpuQuota", "cpuPeriod", "memoryLimit", "pidsLimit", "unified"} {
		if v, ok := res[k]; !ok || v != nil {
			t.Errorf("resources.%s = %v, %v; want null", k, v, ok)
		}
	}
	if res["cpuShares"] != float64(102) || m["cpuWeight"] != float64(4) {
		t.Errorf("cpuShares/cpuWeight = %v/%v", res["cpuShares"], m["cpuWeight"])
	}
}

func TestExplainNodeGolden(t *testing.T) {
	capacity, system, kube, eviction := na1()
	capacity.HugePages = map[int64]int64{2 * mi: 0}
	g, b1, b2 := jPods()
	pods := []*v1.Pod{g, b1, b2, podOf(c("be", "—", "—"))}
	fifty := int64(50)
	tests := []struct {
		name string
		mode units.Mode
		cfg  NodeConfig
	}{
		{"na1.hybrid", units.ModeHybrid, NodeConfig{SystemReserved: system, KubeReserved: kube, HardEviction: eviction, Enforcement: Enforcement{Pods: true}}},
		{"na1.v2", units.ModeUnified, NodeConfig{SystemReserved: system, KubeReserved: kube, HardEviction: eviction, Enforcement: Enforcement{Pods: true},
			QOS: QOSOptions{EnforceMemoryQoS: true, MemoryReservationPolicy: MemoryReservationTiered, QOSReservedMemoryPercent: &fifty}}},
		{"na1.v2-no-enforcement", units.ModeUnified, NodeConfig{SystemReserved: system, KubeReserved: kube, HardEviction: eviction}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := ExplainNode(capacity, tt.cfg, pods, tt.mode)
			fatalIf(t, err)
			golden(t, "node-"+tt.name, e)
		})
	}
	t.Run("allocatable is capacity less reservations and the hard eviction threshold", func(t *testing.T) {
		e, err := ExplainNode(capacity, tests[1].cfg, pods, units.ModeUnified)
		fatalIf(t, err)
		if e.Allocatable.Memory != 14760*mi || e.Allocatable.CPU != 3800 {
			t.Errorf("allocatable = %+v", e.Allocatable)
		}
		if e.Kubepods.CPU != 3800 || *e.Kubepods.Memory != 15581839360 || *e.Kubepods.CPUWeight != 149 {
			t.Errorf("kubepods = cpu %d memory %d weight %d", e.Kubepods.CPU, *e.Kubepods.Memory, *e.Kubepods.CPUWeight)
		}
		if e.QOS.Burstable.CPU != 3000 || *e.QOS.Burstable.CPUWeight != 118 {
			t.Errorf("burstable = cpu %d weight %d", e.QOS.Burstable.CPU, *e.QOS.Burstable.CPUWeight)
		}
		if got := e.Kubepods.SystemdProperties["MemoryMin"]; got != uint64(536870912) {
			t.Errorf("kubepods MemoryMin = %v", got)
		}
	})
	t.Run("reservation above capacity", func(t *testing.T) {
		cfg := NodeConfig{SystemReserved: v1.ResourceList{v1.ResourceMemory: resource.MustParse("20Gi")}}
		if _, err := ExplainNode(capacity, cfg, nil, units.ModeUnified); err == nil || !strings.Contains(err.Error(), "Expected capacity >= reservation") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestDescriptions(t *testing.T) {
	tests := []struct{ name, got, want string }{
		{"kubepods", QOSSliceDescription(v1.PodQOSGuaranteed), "kubepods (Guaranteed QoS)"},
		{"burstable", QOSSliceDescription(v1.PodQOSBurstable), "kubepods/burstable (Burstable QoS)"},
		{"besteffort", QOSSliceDescription(v1.PodQOSBestEffort), "kubepods/besteffort (BestEffort QoS)"},
		{"pod", PodSliceDescription(podOf(c("a", "1/1Gi", "—"))), "pod default/p (Burstable)"},
		{"pod without namespace", PodSliceDescription(&v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{c("a", "—", "—")}}}), "pod default/ (BestEffort)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}
