package main

import (
	"encoding/json"
	"strings"
	"testing"
)

const evictionConfigTOML = `
[eviction]
hard = { "memory.available" = "500Mi", "pid.available" = "100" }
soft = { "memory.available" = "1Gi" }
soft_grace_period = { "memory.available" = "30s" }
pressure_transition_period = "1m"
max_pod_grace_period = "10s"
priority_classes = { "batch" = -5 }
`

// evictionEpisode: soft pressure at 10s (condition at once, eviction waits for the 30s
// grace), evicted at 45s with max_pod_grace_period, hard pressure at 50s (1s), relief at
// 1m30s (condition held: last seen at 50s, transition 1m), condition gone at 2m.
const evictionEpisode = `
samples:
- at: 0s
  signals:
    memory.available: {available: 2Gi, capacity: 8Gi}
    allocatableMemory.available: {available: 6Gi, capacity: 7Gi}
  pods: &pods
  - manifest:
      metadata: {name: hog}
      spec: {containers: [{name: app, image: x}]}
    usage: {memory: 3Gi, processes: 10, ephemeralStorage: 1Gi}
  - manifest:
      metadata: {name: web, namespace: shop}
      spec:
        containers:
        - name: app
          image: x
          resources: {requests: {memory: 1Gi}, limits: {memory: 1Gi}}
    usage: {memory: 900Mi, processes: 5}
  - manifest:
      metadata: {name: dns}
      spec: {priorityClassName: system-node-critical, containers: [{name: app, image: x}]}
  - manifest:
      metadata: {name: report}
      spec: {priorityClassName: batch, containers: [{name: app, image: x, resources: {requests: {memory: 4Gi}}}]}
    usage: {memory: 100Mi}
- at: 10s
  signals:
    memory.available: {available: 800Mi, capacity: 8Gi}
    allocatableMemory.available: {available: 6Gi, capacity: 7Gi}
  pods: *pods
- at: 45s
  signals:
    memory.available: {available: 800Mi, capacity: 8Gi}
    allocatableMemory.available: {available: 6Gi, capacity: 7Gi}
  pods: *pods
- at: 50s
  signals:
    memory.available: {available: 400Mi, capacity: 8Gi}
    allocatableMemory.available: {available: 6Gi, capacity: 7Gi}
  pods: *pods
- at: 1m30s
  signals:
    memory.available: {available: 3Gi, capacity: 8Gi}
    allocatableMemory.available: {available: 6Gi, capacity: 7Gi}
  pods: *pods
- at: 2m
  signals:
    memory.available: {available: 3Gi, capacity: 8Gi}
    allocatableMemory.available: {available: 6Gi, capacity: 7Gi}
  pods: *pods
`

type replayJSON struct {
	Results []struct {
		At            string `json:"at"`
		ThresholdsMet []struct {
			Signal     string `json:"signal"`
			Hard       bool   `json:"hard"`
			Threshold  string `json:"threshold"`
			Actionable bool   `json:"actionable"`
		} `json:"thresholdsMet"`
		NodeConditions []string `json:"nodeConditions"`
		Reclaim        string   `json:"reclaim"`
		Ranking        []struct {
			Pod      string `json:"pod"`
			Priority int32  `json:"priority"`
			Critical bool   `json:"critical"`
			Reason   string `json:"reason"`
		} `json:"ranking"`
		Evict *struct {
			Pod         string            `json:"pod"`
			GracePeriod string            `json:"gracePeriod"`
			Annotations map[string]string `json:"annotations"`
		} `json:"evict"`
		Message string `json:"message"`
	} `json:"results"`
}

// TestExplainEvictionReplay replays an episode and checks every sample's outcome.
func TestExplainEvictionReplay(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.toml", evictionConfigTOML)
	obs := writeFile(t, dir, "episode.yaml", evictionEpisode)
	code, out, errOut := runCLI(t, "explain", "eviction", "--observations", obs, "--config", cfg, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got replayJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	want := []struct {
		at       string
		met      int
		pressure bool
		reclaim  string
		evict    string
		grace    string
		message  string
	}{
		{"0s", 0, false, "", "", "", ""},
		{"10s", 1, true, "", "", "", ""},
		{"45s", 1, true, "memory", "default/hog", "10s", "The node was low on resource: memory. Threshold quantity: 1Gi, available: 800Mi. "},
		{"50s", 2, true, "memory", "default/hog", "1s", "The node was low on resource: memory. Threshold quantity: 500Mi, available: 400Mi. "},
		{"1m30s", 0, true, "", "", "", ""},
		{"2m0s", 0, false, "", "", "", ""},
	}
	if len(got.Results) != len(want) {
		t.Fatalf("%d results, want %d:\n%s", len(got.Results), len(want), out)
	}
	for i, w := range want {
		r := got.Results[i]
		if r.At != w.at || len(r.ThresholdsMet) != w.met || (len(r.NodeConditions) > 0) != w.pressure || r.Reclaim != w.reclaim || r.Message != w.message {
			t.Errorf("sample %d = at %s, %d met, conditions %v, reclaim %q, message %q; want %+v", i, r.At, len(r.ThresholdsMet), r.NodeConditions, r.Reclaim, r.Message, w)
		}
		switch {
		case w.evict == "" && r.Evict != nil:
			t.Errorf("sample %d: evicted %s, want nobody", i, r.Evict.Pod)
		case w.evict != "" && (r.Evict == nil || r.Evict.Pod != w.evict || r.Evict.GracePeriod != w.grace):
			t.Errorf("sample %d: evict %+v, want %s with grace %s", i, r.Evict, w.evict, w.grace)
		}
	}
	r := got.Results[2]
	if r.ThresholdsMet[0].Hard || !r.ThresholdsMet[0].Actionable || r.ThresholdsMet[0].Threshold != "1Gi" {
		t.Errorf("sample 2 threshold %+v", r.ThresholdsMet[0])
	}
	if got.Results[1].ThresholdsMet[0].Actionable {
		t.Error("sample 1: soft threshold actionable before its grace period")
	}
	wantRank := []struct {
		pod      string
		critical bool
		reason   string
	}{
		{"default/dns", true, "no stats; priority 2000001000; critical: never evicted"},
		{"default/hog", false, "working set 3Gi exceeds memory request 0; priority 0; usage above request by 3Gi"},
		{"default/report", false, "working set 100Mi within memory request 4Gi; priority -5; usage below request by 3996Mi"},
		{"shop/web", false, "working set 900Mi within memory request 1Gi; priority 0; usage below request by 124Mi"},
	}
	if len(r.Ranking) != len(wantRank) {
		t.Fatalf("ranking %+v", r.Ranking)
	}
	for i, w := range wantRank {
		if c := r.Ranking[i]; c.Pod != w.pod || c.Critical != w.critical || c.Reason != w.reason {
			t.Errorf("rank %d = %+v, want %+v", i, c, w)
		}
	}
	if ann := got.Results[2].Evict.Annotations; ann["starved_resource"] != "memory" {
		t.Errorf("annotations %v", ann)
	}
}

// TestExplainEvictionTable checks the readable output names the decision and its reasons.
func TestExplainEvictionTable(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.toml", evictionConfigTOML)
	obs := writeFile(t, dir, "episode.yaml", evictionEpisode)
	code, out, errOut := runCLI(t, "explain", "eviction", "--observations", obs, "--config", cfg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"Sample 1 at 10s",
		"memory.available < 1Gi (soft, grace 30s, waiting): available 800Mi of 8Gi, since 10s",
		"Node conditions:  MemoryPressure",
		"Reclaim:          memory (memory.available)",
		"RANK  POD",
		"default/hog     0           working set 3Gi exceeds memory request 0",
		"Evict: default/hog (grace 10s)",
		`Message: "The node was low on resource: memory. Threshold quantity: 1Gi, available: 800Mi. "`,
		"Sample 5 at 2m0s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestExplainEvictionBadInput: every bad input is a clear error naming the sample and the
// field, exit code 1 (2 for usage errors), never a crash.
func TestExplainEvictionBadInput(t *testing.T) {
	pod := `{manifest: {metadata: {name: p}, spec: {containers: [{name: c, image: x}]}}, usage: {memory: 1Gi}}`
	sig := `signals: {memory.available: {available: 1Gi, capacity: 8Gi}}`
	tests := []struct {
		name string
		file string
		args []string
		code int
		want string
	}{
		{"not YAML", "samples: [", nil, 1, "not JSON or YAML"},
		{"no samples", "samples: []", nil, 1, "samples: at least one sample is required"},
		{"unknown top-level field", "samples: [{at: 0s}]\nextra: 1", nil, 1, `unknown field "extra"`},
		{"unknown sample field", "samples: [{at: 0s, signal: {}}]", nil, 1, `sample 0: unknown field "signal"`},
		{"missing at", "samples: [{" + sig + "}]", nil, 1, "sample 0: at: required"},
		{"bad duration", "samples: [{at: soon}]", nil, 1, `sample 0: at: "soon" is not a duration`},
		{"negative duration", "samples: [{at: -5s}]", nil, 1, `sample 0: at: "-5s" must not be negative`},
		{"out of order", "samples: [{at: 10s}, {at: 5s}]", nil, 1, "sample 1: at: 5s is before the previous sample's 10s"},
		{"unknown signal", "samples: [{at: 0s, signals: {mem.available: {available: 1Gi, capacity: 2Gi}}}]", nil, 1,
			`sample 0: signals.mem.available: unknown signal "mem.available"`},
		{"missing available", "samples: [{at: 0s}, {at: 1s, signals: {memory.available: {capacity: 2Gi}}}]", nil, 1,
			"sample 1: signals.memory.available.available: required"},
		{"missing capacity", "samples: [{at: 0s, signals: {nodefs.available: {available: 2Gi}}}]", nil, 1,
			"sample 0: signals.nodefs.available.capacity: required"},
		{"negative available", "samples: [{at: 0s, signals: {memory.available: {available: -1Gi, capacity: 2Gi}}}]", nil, 1,
			"sample 0: signals.memory.available.available: -1Gi must not be negative"},
		{"available above capacity", "samples: [{at: 0s, signals: {memory.available: {available: 3Gi, capacity: 2Gi}}}]", nil, 1,
			"sample 0: signals.memory.available.available: 3Gi exceeds capacity 2Gi"},
		{"bad quantity", "samples: [{at: 0s, signals: {memory.available: {available: lots, capacity: 2Gi}}}]", nil, 1,
			"sample 0: quantities must match the regular expression"},
		{"pod without manifest", "samples: [{at: 0s, pods: [{usage: {memory: 1Gi}}]}]", nil, 1, "sample 0: pods[0].manifest: required"},
		{"pod without name", "samples: [{at: 0s, pods: [{manifest: {spec: {containers: []}}}]}]", nil, 1,
			"sample 0: pods[0].manifest.metadata.name: required"},
		{"unknown manifest field", "samples: [{at: 0s, pods: [{manifest: {metadata: {name: p}, spec: {containerz: []}}}]}]", nil, 1,
			`sample 0: pods[0].manifest: unknown field "spec.containerz"`},
		{"unknown usage field", "samples: [{at: 0s, pods: [{manifest: {metadata: {name: p}}, usage: {cpu: 1}}]}]", nil, 1,
			`sample 0: pods[0].usage: unknown field "cpu"`},
		{"negative usage", "samples: [{at: 0s, pods: [{manifest: {metadata: {name: p}}, usage: {memory: -1Mi}}]}]", nil, 1,
			"sample 0: pods[0].usage.memory: -1Mi must not be negative"},
		{"negative processes", "samples: [{at: 0s, pods: [{manifest: {metadata: {name: p}}, usage: {processes: -3}}]}]", nil, 1,
			"sample 0: pods[0].usage.processes: -3 must not be negative"},
		{"duplicate pod", "samples: [{at: 0s, pods: [" + pod + ", " + pod + "]}]", nil, 1,
			"sample 0: pods[1].manifest.metadata.name: pod default/p is also pods[0]"},
		{"--offline without --observations", "", []string{"explain", "eviction", "--offline"}, 2, "--offline needs --observations FILE"},
		{"bad -o", "samples: [{at: 0s}]", []string{"-o", "yaml"}, 2, `-o "yaml": only json is supported`},
		{"missing file", "", []string{"explain", "eviction", "--observations", "/nonexistent/obs.yaml"}, 1, "observations file: open /nonexistent/obs.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := writeFile(t, dir, "config.toml", evictionConfigTOML)
			args := tt.args
			if tt.file != "" {
				obs := writeFile(t, dir, "obs.yaml", tt.file)
				args = append([]string{"explain", "eviction", "--observations", obs, "--config", cfg}, tt.args...)
			}
			code, out, errOut := runCLI(t, args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stdout %q)", code, tt.code, out)
			}
			if !strings.Contains(errOut, tt.want) {
				t.Errorf("stderr %q lacks %q", errOut, tt.want)
			}
		})
	}
}

// TestExplainEvictionBadConfig: thresholds the configuration cannot parse are reported.
func TestExplainEvictionBadConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.toml", "[eviction]\nsoft = { \"memory.available\" = \"1Gi\" }\n")
	obs := writeFile(t, dir, "obs.yaml", "samples: [{at: 0s}]")
	code, _, errOut := runCLI(t, "explain", "eviction", "--observations", obs, "--config", cfg)
	if code != 1 || !strings.Contains(errOut, "grace period must be specified") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// TestExplainEvictionDisk: with the default thresholds, a pod above its ephemeral-storage
// limit is evicted first (local-storage limits win); then nodefs pressure names node-level
// reclaim (container GC, then image GC) before the disk ranking's choice.
func TestExplainEvictionDisk(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.toml", "")
	obs := writeFile(t, dir, "episode.yaml", `
samples:
- at: 0s
  signals: {nodefs.available: {available: 5Gi, capacity: 100Gi}}
  pods:
  - manifest:
      metadata: {name: logger}
      spec: {containers: [{name: app, image: x, resources: {limits: {ephemeral-storage: 1Gi}}}]}
    usage: {ephemeralStorage: 2Gi}
  - manifest:
      metadata: {name: cache}
      spec: {containers: [{name: app, image: x}]}
    usage: {ephemeralStorage: 30Gi}
- at: 10s
  signals: {nodefs.available: {available: 5Gi, capacity: 100Gi}}
  pods:
  - manifest:
      metadata: {name: cache}
      spec: {containers: [{name: app, image: x}]}
    usage: {ephemeralStorage: 30Gi}
`)
	code, out, errOut := runCLI(t, "explain", "eviction", "--observations", obs, "--config", cfg, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Results []struct {
			NodeConditions []string `json:"nodeConditions"`
			Reclaim        string   `json:"reclaim"`
			Signal         string   `json:"signal"`
			NodeReclaim    []string `json:"nodeReclaim"`
			Evict          *struct {
				Pod string `json:"pod"`
			} `json:"evict"`
			LocalStorage []struct {
				Pod    string `json:"pod"`
				Signal string `json:"signal"`
			} `json:"localStorageEvictions"`
			Message string `json:"message"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	r0, r1 := got.Results[0], got.Results[1]
	if len(r0.LocalStorage) != 1 || r0.LocalStorage[0].Pod != "default/logger" || r0.LocalStorage[0].Signal != "ephemeralpodfs.limit" || r0.Evict != nil ||
		r0.Message != "Pod ephemeral local storage usage exceeds the total limit of containers 1Gi. " {
		t.Errorf("sample 0: %+v", r0)
	}
	if len(r0.NodeConditions) != 1 || r0.NodeConditions[0] != "DiskPressure" {
		t.Errorf("sample 0 conditions %v", r0.NodeConditions)
	}
	if r1.Reclaim != "ephemeral-storage" || r1.Signal != "nodefs.available" || strings.Join(r1.NodeReclaim, ",") != "DeleteAllUnusedContainers,DeleteUnusedImages" ||
		r1.Evict == nil || r1.Evict.Pod != "default/cache" ||
		r1.Message != "The node was low on resource: ephemeral-storage. Threshold quantity: 10737418400, available: 5Gi. " { // float32(0.1) × 100Gi, as the kubelet prints it
		t.Errorf("sample 1: %+v", r1)
	}
}
