package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slicelet/slicelet/internal/pods/systemdrt"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// The restart benchmark (docs/benchmarks.md, section "restart", written by hack/bench):
//
//   - cold start: N BestEffort manifest pods (one container, /bin/sleep infinity) are in the
//     manifest directory when slicelet starts; measured from the start of its service to READY,
//     to the last container unit active and to the API reporting every pod Running. The floor
//     is the same units through one D-Bus connection (units.Manager): per pod the pod slice with
//     the properties slicelet gives it, then the container service with the properties of
//     slicelet's systemd runtime, 8 pods at a time (the controller's sync workers), measured in
//     the same run to the last unit active.
//   - restart: with the N pods running, slicelet is stopped and started again; measured from
//     the start to READY and from READY to the API reporting every pod Running, polling the API
//     every 50 ms; every listing after READY in which a pod is not Running is counted (a status
//     regression).
//
// Knob (environment): SLICELET_BENCH_COLD_PODS (1000).
const benchColdPodsEnv = "SLICELET_BENCH_COLD_PODS"

// BenchmarkPodsColdStartAndRestart is the restart benchmark; see the comment above. Run it with
// -benchtime 1x.
func BenchmarkPodsColdStartAndRestart(b *testing.B) {
	sd := benchSystemd(b)
	n := envInt(b, benchColdPodsEnv, 1000)
	for range b.N {
		benchColdStart(b, sd, n)
	}
}

func benchColdStart(b *testing.B, sd *units.Manager, n int) {
	// The floor first: slicelet's kubepods slices must not exist yet for it, and its units are
	// gone before slicelet starts.
	floorTotal, floorPid1 := dbusFloor(b, sd, n)
	benchProgress("floor: %d pods' units active after %s", n, floorTotal.Round(time.Millisecond))

	unit := "bench-slicelet-cold.service"
	a := newBenchAgent(b, sd, unit, n+10, false)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("cold-p%04d", i)
		if err := os.WriteFile(filepath.Join(a.podsDir, names[i]+".yaml"), benchManifest(names[i]), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	pid10 := pid1CPU()
	start := time.Now()
	benchAgentService(b, sd, unit, a.cfgPath)
	ready := time.Since(start)
	active := pollActive(b, sd, containerUnits, n, func(u units.UnitStatus) bool {
		return strings.HasPrefix(u.Description, "container ")
	}, func() error { return nil })
	var lastActive time.Time
	for _, at := range active {
		if at.After(lastActive) {
			lastActive = at
		}
	}
	coldPid1 := pid1CPU() - pid10
	waitUntil(b, 5*time.Minute, "API reports every pod Running", func() (bool, string) {
		ok, total, err := a.running(b)
		if err != nil {
			return false, err.Error()
		}
		return ok == n && total == n, fmt.Sprintf("%d of %d Running", ok, n)
	})
	coldRunning := time.Since(start)
	coldActive := lastActive.Sub(start)
	benchProgress("cold start: READY after %s, %d container units active after %s, all Running after %s (%.2f× the floor)",
		ready.Round(time.Millisecond), n, coldActive.Round(time.Millisecond), coldRunning.Round(time.Millisecond), float64(coldActive)/float64(floorTotal))

	// Restart with every pod running.
	if err := sd.Stop(b.Context(), unit); err != nil {
		b.Fatal(err)
	}
	restart := time.Now()
	benchAgentService(b, sd, unit, a.cfgPath)
	readyAt := time.Now()
	polls, regressions, firstRunning := 0, 0, -1
	var allRunning time.Duration
	for {
		ok, total, err := a.running(b)
		if err != nil {
			b.Fatal(err)
		}
		polls++
		if firstRunning < 0 {
			firstRunning = ok
		}
		if ok != n || total != n {
			regressions++
		} else {
			allRunning = time.Since(readyAt)
			break
		}
		if time.Since(readyAt) > 5*time.Minute {
			b.Fatalf("restart: %d of %d Running 5 minutes after READY", ok, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// And they stay Running: a few more listings.
	for range 10 {
		ok, total, err := a.running(b)
		if err != nil {
			b.Fatal(err)
		}
		polls++
		if ok != n || total != n {
			regressions++
		}
		time.Sleep(50 * time.Millisecond)
	}
	benchProgress("restart: READY after %s, every pod Running %s after READY (first listing: %d of %d), %d of %d listings with a pod not Running",
		readyAt.Sub(restart).Round(time.Millisecond), allRunning.Round(time.Millisecond), firstRunning, n, regressions, polls)

	b.ReportMetric(float64(n), "pods")
	b.ReportMetric(binaryMetric(b), "cmd-slicelet")
	b.ReportMetric(micros(ready), "cold-ready-µs")
	b.ReportMetric(micros(coldActive), "cold-all-active-µs")
	b.ReportMetric(micros(coldRunning), "cold-all-running-µs")
	b.ReportMetric(micros(coldPid1)/float64(n), "cold-pid1-cpu-µs/pod")
	b.ReportMetric(micros(floorTotal), "floor-all-active-µs")
	b.ReportMetric(micros(floorPid1)/float64(n), "floor-pid1-cpu-µs/pod")
	b.ReportMetric(float64(coldActive)/float64(floorTotal), "cold-ratio")
	b.ReportMetric(micros(readyAt.Sub(restart)), "restart-ready-µs")
	b.ReportMetric(micros(allRunning), "restart-running-after-ready-µs")
	b.ReportMetric(float64(firstRunning), "restart-first-listing-running")
	b.ReportMetric(float64(regressions), "restart-regressed-listings")
	b.ReportMetric(float64(polls), "restart-listings")
	a.removeAll(b)
	_ = sd.Stop(context.Background(), unit)
}

// running counts the pods the API lists Running, and all it lists.
func (a *benchAgent) running(b *testing.B) (ok, total int, err error) {
	list, err := a.client.ListPods(b.Context())
	if err != nil {
		return 0, 0, err
	}
	for _, p := range list {
		if p.Status.Phase == v1.PodRunning {
			ok++
		}
	}
	return ok, len(list), nil
}

// dbusFloor starts n pods' units through one D-Bus connection, 8 pods at a time: the pod slice
// (BaseSliceProperties + SliceProperties of a BestEffort pod, as hierarchy.Manager starts it) and
// the container service (the properties slicelet's systemd runtime gives a BestEffort container
// running /bin/sleep infinity, see floorArgs). It returns the time from the first start to the
// last unit active and systemd's CPU meanwhile, and stops everything before it returns.
func dbusFloor(b *testing.B, sd *units.Manager, n int) (time.Duration, time.Duration) {
	b.Helper()
	pods := newFloorPods(n, "floor-p%04d")
	mode := sd.Mode()
	// The QoS slices the pod slices live in, as slicelet's hierarchy has them.
	for _, s := range []string{"kubepods.slice", "kubepods-besteffort.slice"} {
		if err := sd.StartSlice(b.Context(), s, slices.BaseSliceProperties(s, "-.slice", mode)); err != nil {
			b.Fatal(err)
		}
	}
	start, active, pid1 := startFloor(b, sd, pods, func(p floorPod) error {
		return floorStart(b.Context(), sd, mode, p.uid, p.name, p.unit, p.slice)
	})
	var last time.Time
	for _, at := range active {
		if at.After(last) {
			last = at
		}
	}
	total := last.Sub(start)
	stopFloorPods(b, sd, pods)
	for _, s := range []string{"kubepods-besteffort.slice", "kubepods.slice"} {
		_ = sd.Stop(context.Background(), s)
	}
	return total, pid1
}

// floorStart starts one floor pod's slice and container service.
func floorStart(ctx context.Context, sd *units.Manager, mode units.Mode, uid, name, unit, slice string) error {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid)},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Command: []string{"/bin/sleep", "infinity"}}}},
	}
	props := append(slices.BaseSliceProperties(slices.PodSliceDescription(pod), slices.QOSSliceName(v1.PodQOSBestEffort), mode),
		slices.SliceProperties(slices.PodResources(pod, slices.DefaultOptions()), mode)...)
	if err := sd.StartSlice(ctx, slice, props); err != nil {
		return fmt.Errorf("floor slice %s: %w", slice, err)
	}
	shares := uint64(2)
	cprops := []units.Property{
		{Name: "Description", Value: "container default/" + name + "/c (#1)"},
		{Name: "Slice", Value: slice},
		{Name: "Type", Value: "exec"},
		{Name: "ExecStart", Value: units.Exec{Path: "/bin/sleep", Args: []string{"/bin/sleep", "infinity"}}},
		{Name: "RemainAfterExit", Value: true},
		{Name: "Restart", Value: "no"},
		{Name: "StandardOutput", Value: "journal"},
		{Name: "StandardError", Value: "journal"},
		{Name: "SyslogIdentifier", Value: "c"},
		{Name: "LogExtraFields", Value: systemdrt.LogFields(uid, name, "default", "c")},
		{Name: "KillSignal", Value: int32(15)},
		{Name: "TimeoutStopUSec", Value: 2 * time.Second},
		{Name: "OOMScoreAdjust", Value: int32(1000)},
		{Name: "MemoryAccounting", Value: true},
		{Name: "CPUAccounting", Value: true},
		{Name: "TasksAccounting", Value: true},
	}
	cprops = append(cprops, slices.SliceProperties(slices.ResourceConfig{CPUShares: &shares}, mode)...)
	if err := sd.StartService(ctx, unit, cprops); err != nil {
		return fmt.Errorf("floor container %s: %w", unit, err)
	}
	return nil
}
