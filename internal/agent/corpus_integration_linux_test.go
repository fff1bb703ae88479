package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/pods/systemdrt"
	"github.com/slicelet/slicelet/internal/testharness/runtimetest"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// TestIntegrationCorpus runs every manifest of testdata/corpus that testdata/corpus-outcomes.txt
// says the systemd runtime runs, under the daemon with the systemd runtime, with host commands
// for images (runtimetest.HostCommands): each pod must reach Running (or Succeeded, for pods
// that do not restart their containers). The pods go in batches that fit the node's allocatable
// cpu and memory; one whose hugepages the node lacks is skipped. The limits-only pod is checked
// to be Guaranteed on the node (its slice's cpu weight from the limit, oom_score_adj -997), and
// the daemon's explain to refuse a pod the node cannot fit (OutOfcpu).
//
// The manifests are host commands by now; the same pods with their images are the CRI runtime's
// (testdata/corpus-outcomes.txt, checked by internal/pods/verdict).
func TestIntegrationCorpus(t *testing.T) {
	d := newDaemonEnv(t, "")
	unit := "slicelet-corpus-it.service"
	t.Cleanup(func() { _ = d.sd.Stop(context.Background(), unit) })
	agentService(t, d.sd, unit, d.cfgPath)
	runCorpus(t, d, "systemd", func(p *v1.Pod) {
		runtimetest.HostCommands(p)
		for _, v := range p.Spec.Volumes {
			if err := os.MkdirAll(filepath.Join(runtimetest.CorpusMountRoot, v.Name), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	})

	ctx := t.Context()
	client := api.NewClient(d.sock)
	node, err := client.Node(ctx)
	if err != nil {
		t.Fatal(err)
	}
	alloc := node.Node.Status.Allocatable
	// The daemon's explain: the node's admission on a pod too big for it.
	big := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: big}\nspec:\n  containers: [{name: a, command: [/bin/true], resources: {requests: {cpu: %d}}}]\n", alloc.Cpu().Value()+1)
	x, err := client.ExplainPod(ctx, []byte(big))
	if err != nil {
		t.Fatal(err)
	}
	if x.Admission == nil || x.Admission.Admit || x.Admission.Reason != "OutOfcpu" || x.Runtime == nil || !x.Runtime.Allowed {
		t.Errorf("explain of a pod the node cannot fit: admission %+v runtime %+v", x.Admission, x.Runtime)
	}
}

// runCorpus runs, on the daemon of d, every corpus manifest the outcome table says runtime
// runs, each pod given to transform first (images and commands the runtime can run here).
func runCorpus(t *testing.T, d *daemonEnv, runtime string, transform func(*v1.Pod)) {
	ctx := t.Context()
	client := api.NewClient(d.sock)
	testdata := testdataDir()
	outcomes, err := runtimetest.ReadOutcomes(filepath.Join(testdata, "corpus-outcomes.txt"))
	if err != nil {
		t.Fatal(err)
	}
	type entry struct {
		file string
		pods []*v1.Pod
	}
	var all []entry
	for _, o := range outcomes {
		if o.Runtime != runtime || !o.Runs() {
			continue
		}
		pods, err := manifest.ReadFile(filepath.Join(testdata, "corpus", o.File))
		if err != nil {
			t.Fatalf("%s: the outcome table says it runs: %v", o.File, err)
		}
		for _, p := range pods {
			p.UID = "" // the daemon derives it from the file it reads
			transform(p)
		}
		all = append(all, entry{o.File, pods})
	}
	if len(all) < 20 {
		t.Fatalf("only %d manifests to run", len(all))
	}
	node, err := client.Node(ctx)
	if err != nil {
		t.Fatal(err)
	}
	alloc := node.Node.Status.Allocatable
	// fits: cpu and memory up to 80% of allocatable (a loaded sandbox needs some room), anything
	// else (hugepages, ephemeral storage) up to allocatable.
	fits := func(req, used v1.ResourceList) bool {
		for name, q := range req {
			if q.IsZero() {
				continue
			}
			a, ok := alloc[name]
			if !ok {
				return false
			}
			sum := used[name].DeepCopy()
			sum.Add(q)
			switch name {
			case v1.ResourceCPU:
				if sum.MilliValue() > a.MilliValue()*8/10 {
					return false
				}
			case v1.ResourceMemory:
				if sum.Value() > a.Value()*8/10 {
					return false
				}
			default:
				if sum.Cmp(a) > 0 {
					return false
				}
			}
		}
		return true
	}
	var batches [][]entry
	var batch []entry
	used := v1.ResourceList{}
	for _, e := range all {
		req := v1.ResourceList{}
		for _, p := range e.pods {
			for n, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
				s := req[n]
				s.Add(q)
				req[n] = s
			}
		}
		if !fits(req, v1.ResourceList{}) {
			t.Logf("%s: skipped, the node cannot fit %v (allocatable %v)", e.file, req, alloc)
			continue
		}
		if !fits(req, used) {
			batches, batch, used = append(batches, batch), nil, v1.ResourceList{}
		}
		batch = append(batch, e)
		for n, q := range req {
			s := used[n]
			s.Add(q)
			used[n] = s
		}
	}
	batches = append(batches, batch)

	for bi, batch := range batches {
		for _, e := range batch {
			var docs []string
			for _, p := range e.pods {
				data, err := sigsyaml.Marshal(p)
				if err != nil {
					t.Fatal(err)
				}
				docs = append(docs, string(data))
				docs = append(docs, runtimetest.ReferencedObjects(p)...)
			}
			path := filepath.Join(d.podsDir, e.file)
			if err := os.WriteFile(path+".tmp", []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(path+".tmp", path); err != nil {
				t.Fatal(err)
			}
		}
		for _, e := range batch {
			for _, p := range e.pods {
				got := waitCorpusPod(t, client, e.file, p)
				if e.file == "limits-only.yaml" && runtime == "systemd" {
					checkGuaranteedOnNode(t, d.sd, got)
				}
			}
		}
		t.Logf("batch %d: %d manifests ran", bi, len(batch))
		for _, e := range batch {
			if err := os.Remove(filepath.Join(d.podsDir, e.file)); err != nil {
				t.Fatal(err)
			}
		}
		for _, e := range batch {
			for _, p := range e.pods {
				waitCorpus(t, e.file+": deleted", func() (bool, string) {
					_, err := client.GetPod(ctx, p.Namespace, p.Name)
					return errors.Is(err, api.ErrNotFound), fmt.Sprint(err)
				})
			}
		}
	}
}

// TestIntegrationLimitsOnlyGuaranteed: a container with limits and no requests is Guaranteed on
// the node, as on the kubelet (the API's defaults make request = limit): status, slice cpu
// shares or weight from the limit, oom_score_adj -997 (where systemd may lower it).
func TestIntegrationLimitsOnlyGuaranteed(t *testing.T) {
	d := newDaemonEnv(t, "")
	unit := "slicelet-limits-it.service"
	t.Cleanup(func() { _ = d.sd.Stop(context.Background(), unit) })
	agentService(t, d.sd, unit, d.cfgPath)
	client := api.NewClient(d.sock)
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: limits-only}\nspec:\n  terminationGracePeriodSeconds: 1\n" +
		"  containers:\n  - name: web\n    command: [/bin/sleep, infinity]\n    resources: {limits: {cpu: 500m, memory: 128Mi}}\n"
	if err := os.WriteFile(filepath.Join(d.podsDir, "limits-only.yaml"), []byte(pod), 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := manifest.Parse("limits-only.yaml", "x", []byte(pod))
	if err != nil {
		t.Fatal(err)
	}
	got := waitCorpusPod(t, client, "limits-only.yaml", want[0])
	checkGuaranteedOnNode(t, d.sd, got)
}

// waitCorpus polls cond until it holds, for at most 3 minutes (the sandbox shares a loaded
// machine; the pods of a batch start together).
func waitCorpus(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitCorpusPod waits until the pod runs (Running, or Succeeded when it does not restart its
// containers) and returns it; Failed is fatal at once.
func waitCorpusPod(t *testing.T, client *api.Client, file string, want *v1.Pod) v1.Pod {
	t.Helper()
	var got v1.Pod
	waitCorpus(t, file+": pod "+want.Namespace+"/"+want.Name+" running", func() (bool, string) {
		p, err := client.GetPod(t.Context(), want.Namespace, want.Name)
		if err != nil {
			return false, err.Error()
		}
		got = p
		switch p.Status.Phase {
		case v1.PodFailed:
			t.Fatalf("%s: pod %s failed: %s: %s\ncontainers %+v", file, p.Name, p.Status.Reason, p.Status.Message, p.Status.ContainerStatuses)
		case v1.PodRunning:
			return true, ""
		case v1.PodSucceeded:
			return want.Spec.RestartPolicy != v1.RestartPolicyAlways, "Succeeded, but its containers should run on"
		}
		state := fmt.Sprintf("phase %s %s %s", p.Status.Phase, p.Status.Reason, p.Status.Message)
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if w := cs.State.Waiting; w != nil {
				state += fmt.Sprintf("; %s waiting: %s %s", cs.Name, w.Reason, w.Message)
			}
		}
		return false, state
	})
	return got
}

// checkGuaranteedOnNode checks that a limits-only pod (cpu 500m, memory 128Mi) is Guaranteed on
// the node: status, slice cpu weight from the limit, container oom_score_adj -997.
func checkGuaranteedOnNode(t *testing.T, sd *units.Manager, pod v1.Pod) {
	t.Helper()
	ctx := t.Context()
	if pod.Status.QOSClass != v1.PodQOSGuaranteed {
		t.Errorf("limits-only: QoS %s, want Guaranteed", pod.Status.QOSClass)
	}
	slice, err := slices.PodSliceName(v1.PodQOSGuaranteed, string(pod.UID))
	if err != nil {
		t.Fatal(err)
	}
	shares := slices.MilliCPUToShares(500)
	prop, want := "CPUShares", shares
	if sd.Mode() == units.ModeUnified {
		prop, want = "CPUWeight", slices.CPUSharesToWeight(shares)
	}
	if v, err := sd.Property(ctx, slice, "org.freedesktop.systemd1.Slice", prop); err != nil || fmt.Sprint(v) != strconv.FormatUint(want, 10) {
		t.Errorf("limits-only: %s %s = %v (%v), want %d", slice, prop, v, err, want)
	}
	svc, err := systemdrt.UnitName(string(pod.UID), pod.Spec.Containers[0].Name, 1)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := sd.Property(ctx, svc, "org.freedesktop.systemd1.Service", "MainPID")
	if err != nil {
		t.Fatalf("limits-only: %s MainPID: %v", svc, err)
	}
	// Where systemd cannot lower oom_score_adj (no CAP_SYS_RESOURCE, as in an unprivileged
	// sandbox), the runtime asks for no less than systemd's own value (systemdrt/oom.go).
	want997 := -997
	status, err := os.ReadFile("/proc/1/status")
	if err != nil {
		t.Fatal(err)
	}
	if !hasCapSysResource(string(status)) {
		floor, err := readInt(t, "/proc/1/oom_score_adj")
		if err == nil && floor > want997 {
			t.Logf("limits-only: systemd cannot lower oom_score_adj below %d here", floor)
			want997 = floor
		}
	}
	if got, err := readInt(t, fmt.Sprintf("/proc/%v/oom_score_adj", pid)); err != nil || got != want997 {
		t.Errorf("limits-only: oom_score_adj %d (%v), want %d", got, err, want997)
	}
}

// hasCapSysResource reports whether a /proc/<pid>/status has CAP_SYS_RESOURCE (bit 24) in CapEff.
func hasCapSysResource(status string) bool {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			bits, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && bits&(1<<24) != 0
		}
	}
	return false
}

// readInt reads a file holding one integer.
func readInt(t *testing.T, path string) (int, error) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}

// testdataDir is the module's testdata: the copy systemdtest makes (the cgroup v2 VM sees only
// the package directory), or the checkout's.
func testdataDir() string {
	if dir := os.Getenv(systemdtest.FilesEnv); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "testdata")); err == nil {
			return filepath.Join(dir, "testdata")
		}
	}
	return "../../testdata"
}
