package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	guaranteedPod = `apiVersion: v1
kind: Pod
metadata: {name: nginx-g, uid: 11111111-aaaa-bbbb-cccc-000000000001}
spec:
  containers:
  - name: nginx
    image: nginx
    resources:
      requests: {cpu: 100m, memory: 100Mi}
      limits: {cpu: 100m, memory: 100Mi}
`
	bestEffortPod = `apiVersion: v1
kind: Pod
metadata: {name: nginx-be, uid: 11111111-aaaa-bbbb-cccc-000000000002}
spec:
  containers:
  - name: nginx
    image: nginx
`
	burstablePod = `apiVersion: v1
kind: Pod
metadata: {name: nginx-b, uid: 11111111-aaaa-bbbb-cccc-000000000003}
spec:
  containers:
  - name: nginx
    image: nginx
    resources:
      requests: {cpu: 100m, memory: 100Mi}
      limits: {cpu: 200m, memory: 200Mi}
`
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestExplainPodClassicThree: the three classic pods get exactly the kubelet's slices and values.
func TestExplainPodClassicThree(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.toml", "")
	for _, tc := range []struct {
		name, manifest, mode string
		want                 map[string]any
		props                map[string]any
	}{
		{"guaranteed-v1", guaranteedPod, "v1", map[string]any{
			"qosClass": "Guaranteed", "slice": "kubepods-pod11111111_aaaa_bbbb_cccc_000000000001.slice",
			"cgroupPath": "/kubepods.slice/kubepods-pod11111111_aaaa_bbbb_cccc_000000000001.slice",
			"cpuShares":  102.0, "cpuQuota": 10000.0, "cpuPeriod": 100000.0, "memoryLimit": 104857600.0, "pidsLimit": nil, "cpuWeight": 4.0,
		}, map[string]any{"CPUShares": 102.0, "CPUQuotaPerSecUSec": 100000.0, "MemoryLimit": 104857600.0}},
		{"besteffort-v1", bestEffortPod, "v1", map[string]any{
			"qosClass": "BestEffort", "slice": "kubepods-besteffort-pod11111111_aaaa_bbbb_cccc_000000000002.slice",
			"cpuShares": 2.0, "cpuQuota": nil, "cpuPeriod": nil, "memoryLimit": nil, "cpuWeight": 1.0,
		}, map[string]any{"CPUShares": 2.0, "MemoryLimit": nil, "CPUQuotaPerSecUSec": nil}},
		{"burstable-v1", burstablePod, "v1", map[string]any{
			"qosClass": "Burstable", "slice": "kubepods-burstable-pod11111111_aaaa_bbbb_cccc_000000000003.slice",
			"cgroupPath": "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod11111111_aaaa_bbbb_cccc_000000000003.slice",
			"cpuShares":  102.0, "cpuQuota": 20000.0, "cpuPeriod": 100000.0, "memoryLimit": 209715200.0,
		}, map[string]any{"CPUShares": 102.0, "CPUQuotaPerSecUSec": 200000.0, "MemoryLimit": 209715200.0}},
		{"burstable-v2", burstablePod, "v2", map[string]any{
			"qosClass": "Burstable", "cpuShares": 102.0, "cpuWeight": 4.0,
		}, map[string]any{"CPUWeight": 4.0, "MemoryMax": 209715200.0, "CPUShares": nil, "MemoryLimit": nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := writeFile(t, dir, tc.name+".yaml", tc.manifest)
			code, out, errOut := runCLI(t, "explain", "pod", "-f", pod, "--config", cfg, "--cgroup-mode", tc.mode, "--capacity", "cpu=4,memory=16Gi", "-o", "json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out)
			}
			res := got["resources"].(map[string]any)
			for k, want := range tc.want {
				v, ok := got[k]
				if !ok {
					v, ok = res[k]
				}
				if !ok {
					t.Errorf("%s missing from output", k)
					continue
				}
				if !jsonEqual(v, want) {
					t.Errorf("%s = %v, want %v", k, v, want)
				}
			}
			props := got["systemdProperties"].(map[string]any)
			for k, want := range tc.props {
				if v := props[k]; !jsonEqual(v, want) {
					t.Errorf("systemdProperties[%s] = %v, want %v", k, v, want)
				}
			}
			if cs := got["containers"].([]any); len(cs) != 1 || cs[0].(map[string]any)["name"] != "nginx" {
				t.Errorf("containers = %v", cs)
			}
		})
	}
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// TestExplainNodeAllocatable: a node of 4 CPUs with reservations and a hard eviction threshold,
// explained through the CLI.
func TestExplainNodeAllocatable(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.toml", `
[node]
system_reserved = { cpu = "100m", memory = "500Mi" }
kube_reserved = { cpu = "100m", memory = "1Gi" }
[eviction]
hard = { "memory.available" = "100Mi" }
`)
	pods := []string{writeFile(t, dir, "b.yaml", burstablePod), writeFile(t, dir, "g.yaml", guaranteedPod)}
	code, out, errOut := runCLI(t, "explain", "node", "--config", cfg, "--capacity", "cpu=4,memory=16Gi,pids=4194304", "--cgroup-mode", "v2", "-f", pods[0], "-f", pods[1], "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Capacity    map[string]any `json:"capacity"`
		Allocatable map[string]any `json:"allocatable"`
		Kubepods    struct {
			CPU       int64          `json:"cpu"`
			Memory    int64          `json:"memory"`
			CPUWeight int64          `json:"cpuWeight"`
			Props     map[string]any `json:"systemdProperties"`
		} `json:"kubepods"`
		QOS struct {
			Burstable struct {
				CPU       int64 `json:"cpu"`
				CPUWeight int64 `json:"cpuWeight"`
			} `json:"burstable"`
			BestEffort struct {
				CPUWeight int64 `json:"cpuWeight"`
			} `json:"besteffort"`
		} `json:"qos"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got.Allocatable["memory"] != float64(14760<<20) || got.Allocatable["cpu"] != 3800.0 {
		t.Errorf("allocatable = %v, want memory %d cpu 3800", got.Allocatable, 14760<<20)
	}
	if got.Kubepods.Memory != 15581839360 || got.Kubepods.CPU != 3800 || got.Kubepods.CPUWeight != 149 {
		t.Errorf("kubepods = %+v, want memory 15581839360, cpu 3800, weight 149", got.Kubepods)
	}
	if got.QOS.Burstable.CPU != 100 || got.QOS.Burstable.CPUWeight != 4 || got.QOS.BestEffort.CPUWeight != 1 {
		t.Errorf("qos = %+v", got.QOS)
	}
}

func TestExplainBadInput(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.toml", "")
	good := writeFile(t, dir, "good.yaml", burstablePod)
	badField := writeFile(t, dir, "bad.yaml", strings.Replace(burstablePod, "memory: 200Mi", "memory: -200Mi", 1))
	unknown := writeFile(t, dir, "unknown.yaml", strings.Replace(burstablePod, "  containers:", "  bogus: 1\n  containers:", 1))
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no subject", []string{"explain"}, exitUsage, "pod or node"},
		{"no file", []string{"explain", "pod", "--config", cfg}, exitUsage, "-f POD.yaml is required"},
		{"bad mode", []string{"explain", "pod", "-f", good, "--config", cfg, "--cgroup-mode", "v3"}, exitUsage, `--cgroup-mode "v3"`},
		{"bad capacity", []string{"explain", "node", "--config", cfg, "--capacity", "cpu=four"}, exitUsage, "--capacity cpu=four"},
		{"capacity without memory", []string{"explain", "node", "--config", cfg, "--capacity", "cpu=4"}, exitUsage, "memory is required"},
		{"capacity given twice", []string{"explain", "node", "--config", cfg, "--capacity", "cpu=4,memory=1Gi,cpu=2"}, exitUsage, "--capacity cpu: given twice"},
		{"fractional device", []string{"explain", "node", "--config", cfg, "--capacity", "cpu=4,memory=1Gi,nvidia.com/gpu=500m"}, exitUsage, "an extended resource is a whole number"},
		{"unknown capacity", []string{"explain", "node", "--config", cfg, "--capacity", "cpu=4,memory=1Gi,gpu=1"}, exitUsage, "--capacity gpu: unknown resource"},
		{"bad output", []string{"explain", "node", "--config", cfg, "-o", "yaml"}, exitUsage, `-o "yaml"`},
		{"negative limit", []string{"explain", "pod", "-f", badField, "--config", cfg, "--capacity", "cpu=1,memory=1Gi"}, exitFailure, "spec.containers[0].resources.limits[memory]"},
		{"unknown field", []string{"explain", "pod", "-f", unknown, "--config", cfg, "--capacity", "cpu=1,memory=1Gi"}, exitFailure, `unknown field "spec.bogus"`},
		{"missing file", []string{"explain", "pod", "-f", filepath.Join(dir, "nope.yaml"), "--config", cfg, "--capacity", "cpu=1,memory=1Gi"}, exitFailure, "nope.yaml"},
		{"reservation above capacity", []string{"explain", "node", "--config", writeFile(t, dir, "big.toml", "[node]\nsystem_reserved = { memory = \"2Gi\" }\n"), "--capacity", "cpu=1,memory=1Gi"}, exitFailure, "Expected capacity >= reservation."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut, tc.code, tc.want)
			}
		})
	}
}

// TestExplainPodRuntimeVerdict: offline, explain says what the configured runtime would decide.
func TestExplainPodRuntimeVerdict(t *testing.T) {
	dir := t.TempDir()
	pod := writeFile(t, dir, "web.yaml", guaranteedPod)
	for _, tc := range []struct {
		name, config string
		want         []string
	}{
		{"systemd refuses the image", "", []string{"Runtime systemd:", `spec.containers[0].image: Invalid value: "nginx"`}},
		{"cri can run it", "[runtime]\ntype = \"cri\"\nendpoint = \"unix:///run/containerd/containerd.sock\"\n", []string{"Runtime cri:\n  can run this pod"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeFile(t, dir, "config.toml", tc.config)
			code, out, errOut := runCLI(t, "explain", "pod", "-f", pod, "--config", cfg, "--cgroup-mode", "v2", "--capacity", "cpu=4,memory=16Gi")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestExplainPodAsTheNode: offline, explain models the node its configuration makes: a static
// pod's validation, or with [cluster] enabled what the API server refuses at create and what
// the node checks of a pod from it; runtime.network; every stage for every pod, whatever an earlier one says; admission
// against the capacity given, each input pod counting against the next.
func TestExplainPodAsTheNode(t *testing.T) {
	dir := t.TempDir()
	const cri = "[runtime]\ntype = \"cri\"\nendpoint = \"unix:///run/containerd/containerd.sock\"\n"
	clusterCfg := writeFile(t, dir, "cluster.toml", cri+"network = \"cni\"\n[cluster]\nenabled = true\nkubeconfig = \"/etc/slicelet/kubeconfig\"\n")
	staticCfg := writeFile(t, dir, "static.toml", cri)
	apiPod := writeFile(t, dir, "api.yaml", `apiVersion: v1
kind: Pod
metadata: {name: web, uid: 11111111-aaaa-bbbb-cccc-000000000010}
spec:
  serviceAccountName: web
  nodeSelector: {kubernetes.io/os: linux}
  securityContext:
    sysctls: [{name: net.ipv4.ip_local_port_range, value: "1024 65535"}]
  containers:
  - {name: web, image: nginx, stdin: true, tty: true, resources: {requests: {cpu: "3"}}}
`)
	claim := writeFile(t, dir, "claim.yaml", `apiVersion: v1
kind: Pod
metadata: {name: db, uid: 11111111-aaaa-bbbb-cccc-000000000011}
spec:
  volumes: [{name: data, nfs: {server: nfs.example.com, path: /export}}]
  containers:
  - {name: db, image: postgres, resources: {requests: {cpu: "3"}}, volumeMounts: [{name: data, mountPath: /data}]}
`)
	gpu := writeFile(t, dir, "gpu.yaml", `apiVersion: v1
kind: Pod
metadata: {name: train, uid: 11111111-aaaa-bbbb-cccc-000000000012}
spec:
  containers:
  - {name: train, image: trainer, resources: {limits: {nvidia.com/gpu: "2"}}}
`)
	// A StatefulSet's template as a bare pod: the mount names a volume only the controller adds.
	undeclared := writeFile(t, dir, "undeclared.yaml", `apiVersion: v1
kind: Pod
metadata: {name: db-0, uid: 11111111-aaaa-bbbb-cccc-000000000013}
spec:
  containers:
  - {name: db, image: postgres, volumeMounts: [{name: data, mountPath: /data}]}
`)
	for _, tc := range []struct {
		name     string
		config   string
		capacity string
		files    []string
		code     int
		want     []string // in this order in the output
		never    string
	}{
		{name: "cluster mode: the API pod's fields are fine, its own network namespace allows the sysctl", config: clusterCfg, files: []string{apiPod},
			want: []string{"Validation (API pod, cluster mode):\n  valid", "Runtime cri:\n  can run this pod", "Admission:\n  admitted against"}},
		{name: "static pod: refused fields, and still every stage", config: staticCfg, files: []string{apiPod}, code: exitFailure,
			want: []string{"Validation (static pod):", "spec.nodeSelector: Forbidden", "spec.serviceAccountName: Forbidden: static pods may not reference serviceaccounts",
				"Runtime cri:", "spec.securityContext.sysctls", "Admission:"}},
		{name: "cluster mode: a volume the node cannot mount, and the capacity the first pod took", config: clusterCfg, files: []string{apiPod, claim}, code: exitFailure,
			want: []string{"admitted against", "spec.volumes[0].nfs: Forbidden: needs a volume plugin slicelet does not have",
				"refused against", "OutOfcpu"}, never: "static pods may not"},
		{name: "cluster mode: what the API server refuses at create is a problem of the pod", config: clusterCfg, files: []string{undeclared}, code: exitFailure,
			want: []string{"Validation (API pod, cluster mode):", `spec.containers[0].volumeMounts[0].name: Not found: "data"`, "Runtime cri:"}},
		{name: "cluster mode: extended resources of the capacity given, each pod taking its devices", config: clusterCfg, capacity: "cpu=4,memory=16Gi,nvidia.com/gpu=3", files: []string{gpu, gpu},
			code: 0, want: []string{"admitted against", "refused against", "OutOfnvidia.com/gpu"}},
		{name: "cluster mode: an extended resource the capacity does not list is not admission's to refuse (the kubelet's removeMissingExtendedResources)", config: clusterCfg, files: []string{gpu},
			want: []string{"admitted against"}, never: "OutOfnvidia.com/gpu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			capacity := cmp.Or(tc.capacity, "cpu=4,memory=16Gi")
			args := []string{"explain", "pod", "--config", tc.config, "--cgroup-mode", "v2", "--capacity", capacity}
			for _, f := range tc.files {
				args = append(args, "-f", f)
			}
			code, out, errOut := runCLI(t, args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s\n%s", code, tc.code, errOut, out)
			}
			rest := out
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("output lacks %q (after the ones before it):\n%s", w, out)
				}
				rest = rest[i+len(w):]
			}
			if tc.never != "" && strings.Contains(out+errOut, tc.never) {
				t.Errorf("output says %q:\n%s%s", tc.never, out, errOut)
			}
		})
	}
}
