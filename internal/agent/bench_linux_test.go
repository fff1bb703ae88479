package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	stdslices "slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/pods/systemdrt"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// The pods benchmark (docs/benchmarks.md, section "pods", written by hack/bench):
//
//   - BenchmarkPodsManifestToRunning/latency: N BestEffort pods (one container running
//     /bin/sleep infinity) dropped at once into slicelet's manifest directory, against the same
//     workload through `systemd-run --slice=<pod slice> --unit=<name>` with 8 concurrent
//     invocations (the controller's sync workers), alternating round by round in the same run.
//   - BenchmarkPodsManifestToRunning/rss-pods=<n>: slicelet's VmRSS with n idle pods, a fresh
//     slicelet per count.
//
// Knobs (environment): SLICELET_BENCH_PODS (100), SLICELET_BENCH_ROUNDS (3 per path),
// SLICELET_BENCH_RSS_PODS ("110,1000"), SLICELET_BENCH_IDLE (60s),
// SLICELET_BENCH_BINARY (a built cmd/slicelet to measure instead of this test binary in agent
// mode; relative to the module root), SLICELET_BENCH_SERVICE_ENV (space-separated K=V added to
// slicelet's service environment, e.g. "GOGC=50"), SLICELET_BENCH_PROFILE_DIR (where to copy a
// heap profile of slicelet, test binary only, at the largest count, after idling; it must be
// writable inside the sandbox, so pass the same directory to go test -outputdir, which
// internal/testharness/systemdtest binds read-write; none when unset). Example:
//
//	CI=true SLICELET_BENCH_RSS_PODS=1000 SLICELET_BENCH_PROFILE_DIR=$PWD/build/bench/prof \
//	  go test ./internal/agent -run '^$' -bench 'BenchmarkPodsManifestToRunning/rss' \
//	  -benchtime 1x -outputdir $PWD/build/bench/prof
const (
	benchPodsEnv       = "SLICELET_BENCH_PODS"
	benchRoundsEnv     = "SLICELET_BENCH_ROUNDS"
	benchRSSPodsEnv    = "SLICELET_BENCH_RSS_PODS"
	benchIdleEnv       = "SLICELET_BENCH_IDLE"
	benchProfileDirEnv = "SLICELET_BENCH_PROFILE_DIR"
	benchBinaryEnv     = "SLICELET_BENCH_BINARY"
	benchServiceEnv    = "SLICELET_BENCH_SERVICE_ENV"
	// benchHeapMarker, next to the agent's configuration file, makes an agent-mode process write
	// a heap profile (benchHeapProfile, same directory) on SIGUSR1.
	benchHeapMarker  = "bench-heap-on-sigusr1"
	benchHeapProfile = "heap.pprof"
	// benchMemoryReport is written with the heap profile: runtime/metrics' memory classes and
	// the goroutines (text).
	benchMemoryReport = "memory.txt"
	// benchFloorWorkers is how many systemd-run invocations the floor runs at once: the pod
	// controller's syncWorkers.
	benchFloorWorkers = 8
	// benchPoll is the interval of the unit poller that timestamps "active".
	benchPoll = 5 * time.Millisecond
)

// init arms the heap profile of an agent-mode process started by the RSS benchmark (and only
// that one: it needs the marker file next to its configuration).
func init() {
	cfg := os.Getenv(agentModeEnv)
	if cfg == "" {
		return
	}
	dir := filepath.Dir(cfg)
	if _, err := os.Stat(filepath.Join(dir, benchHeapMarker)); err != nil {
		return
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	go func() {
		for range ch {
			tmp := filepath.Join(dir, benchHeapProfile+".tmp")
			f, err := os.Create(tmp)
			if err != nil {
				continue
			}
			err = pprof.Lookup("heap").WriteTo(f, 0)
			if cerr := f.Close(); err == nil && cerr == nil {
				// Next to it, before it appears: the goroutines and the runtime's own
				// account of its memory (heap, stacks, retained and released pages).
				writeBenchMemoryReport(filepath.Join(dir, benchMemoryReport))
				_ = os.Rename(tmp, filepath.Join(dir, benchHeapProfile))
			}
		}
	}()
}

// writeBenchMemoryReport writes runtime/metrics' memory classes, the GC's goal and the
// goroutines' profile to path (best effort: a benchmark's diagnostic).
func writeBenchMemoryReport(path string) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	var samples []metrics.Sample
	for _, d := range metrics.All() {
		if strings.HasPrefix(d.Name, "/memory/classes/") || strings.HasPrefix(d.Name, "/gc/heap/goal") || strings.HasPrefix(d.Name, "/gc/gomemlimit") || strings.HasPrefix(d.Name, "/sched/goroutines") {
			samples = append(samples, metrics.Sample{Name: d.Name})
		}
	}
	metrics.Read(samples)
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			fmt.Fprintf(f, "%-50s %10.2f MiB  (%d)\n", s.Name, float64(s.Value.Uint64())/(1<<20), s.Value.Uint64())
		}
	}
	_ = pprof.Lookup("goroutine").WriteTo(f, 1)
}

// benchProgress prints a progress line at once (b.Logf is shown only at the end).
func benchProgress(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", a...)
}

func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// benchAgent is one slicelet service under test with its own directories.
type benchAgent struct {
	sd      *units.Manager
	unit    string
	dir     string
	podsDir string
	cfgPath string
	client  *api.Client
}

// startBenchAgent runs slicelet (this binary in agent mode) as a Type=notify service with an
// empty manifest directory and max_pods = maxPods.
func startBenchAgent(b *testing.B, sd *units.Manager, unit string, maxPods int, heapProfile bool) *benchAgent {
	b.Helper()
	a := newBenchAgent(b, sd, unit, maxPods, heapProfile)
	benchAgentService(b, sd, unit, a.cfgPath)
	return a
}

// newBenchAgent writes the configuration of a slicelet service and its empty manifest
// directory; the service is started by benchAgentService.
func newBenchAgent(b *testing.B, sd *units.Manager, unit string, maxPods int, heapProfile bool) *benchAgent {
	b.Helper()
	dir := b.TempDir()
	a := &benchAgent{sd: sd, unit: unit, dir: dir, podsDir: filepath.Join(dir, "pods.d")}
	if err := os.MkdirAll(a.podsDir, 0o755); err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(dir, "api.sock")
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, `state_dir = %q
[node]
max_pods = %d
[pods]
manifest_dir = %q
[api]
socket = %q
group = "root"
[metrics]
address = ""
`, filepath.Join(dir, "state"), maxPods, a.podsDir, sock), 0o644); err != nil {
		b.Fatal(err)
	}
	if heapProfile {
		if err := os.WriteFile(filepath.Join(dir, benchHeapMarker), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() { _ = sd.Stop(context.Background(), unit) })
	a.cfgPath = cfgPath
	a.client = api.NewClient(sock)
	return a
}

// benchBinary is the slicelet binary of SLICELET_BENCH_BINARY as an absolute path, "" when
// unset. A relative path is taken from the module root (the directory of go.mod above the
// working directory, the package's).
func benchBinary(b *testing.B) string {
	b.Helper()
	p := os.Getenv(benchBinaryEnv)
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		b.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, p)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			b.Fatalf("%s=%q: no go.mod above the working directory to resolve it against", benchBinaryEnv, p)
		}
		dir = parent
	}
}

// benchAgentService is agentService for a benchmark (agentService takes a *testing.T); with
// SLICELET_BENCH_BINARY set it runs that binary (`slicelet --config F run`, its own logging
// defaults) instead of this test binary in agent mode.
func benchAgentService(b *testing.B, sd *units.Manager, unit, configPath string) {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	start := units.Exec{Path: exe, Args: []string{exe}}
	if bin := benchBinary(b); bin != "" {
		start = units.Exec{Path: bin, Args: []string{bin, "--config", configPath, "run"}}
	}
	err = sd.StartService(b.Context(), unit, []units.Property{
		{Name: "Description", Value: "slicelet under benchmark"},
		{Name: "Type", Value: "notify"},
		{Name: "ExecStart", Value: []units.Exec{start}},
		{Name: "Environment", Value: append([]string{agentModeEnv + "=" + configPath, systemdtest.InsideEnv + "=sandbox"}, strings.Fields(os.Getenv(benchServiceEnv))...)},
		{Name: "WatchdogUSec", Value: uint64(30 * time.Second / time.Microsecond)},
	})
	if err != nil {
		out, _ := run("journalctl", "--no-pager", "-u", unit, "-n", "50")
		b.Fatalf("start %s: %v\n%s", unit, err, out)
	}
}

// benchManifest is a BestEffort pod with one container running sleep.
func benchManifest(name string) []byte {
	return fmt.Appendf(nil, "apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n  - name: c\n    command: [/bin/sleep, infinity]\n", name)
}

// drop writes the manifests of names as temp files, then renames them into the manifest
// directory one after the other, returning each pod's rename time.
func (a *benchAgent) drop(b *testing.B, names []string) map[string]time.Time {
	b.Helper()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(a.podsDir, n+".yaml.tmp"), benchManifest(n), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	at := make(map[string]time.Time, len(names))
	for _, n := range names {
		p := filepath.Join(a.podsDir, n+".yaml")
		if err := os.Rename(p+".tmp", p); err != nil {
			b.Fatal(err)
		}
		at[n] = time.Now()
	}
	return at
}

// podNames maps the UIDs slicelet derives for the manifests of names to the pod names.
func (a *benchAgent) podNames(b *testing.B, names []string) map[string]string {
	b.Helper()
	out := make(map[string]string, len(names))
	for _, n := range names {
		pods, err := manifest.ReadFile(filepath.Join(a.podsDir, n+".yaml"))
		if err != nil || len(pods) != 1 {
			b.Fatalf("manifest %s: %v", n, err)
		}
		out[string(pods[0].UID)] = n
	}
	return out
}

// removeAll removes every manifest and waits until no container unit or pod slice is active and
// the API lists no pod.
func (a *benchAgent) removeAll(b *testing.B) {
	b.Helper()
	entries, err := os.ReadDir(a.podsDir)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(a.podsDir, e.Name())); err != nil {
			b.Fatal(err)
		}
	}
	waitUntil(b, 3*time.Minute, "pods deleted", func() (bool, string) {
		ctrs := countActive(b, a.sd, containerUnits)
		podSlices := countActive(b, a.sd, slices.PodSlicePatterns...)
		list, err := a.client.ListPods(b.Context())
		if err != nil {
			return false, err.Error()
		}
		return ctrs == 0 && podSlices == 0 && len(list) == 0, fmt.Sprintf("%d container units, %d pod slices active, %d pods listed", ctrs, podSlices, len(list))
	})
}

// containerUnits matches the container units of slicelet's systemd runtime (the benchmark's
// slicelet services are named bench-slicelet-*, so they never match).
const containerUnits = "slicelet-*.service"

// countActive counts the units matching patterns that are neither inactive nor failed.
func countActive(b *testing.B, sd *units.Manager, patterns ...string) int {
	b.Helper()
	list, err := sd.List(b.Context(), patterns...)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, u := range list {
		if u.ActiveState != "inactive" && u.ActiveState != "failed" {
			n++
		}
	}
	return n
}

// waitUntil polls cond every 50 ms until it holds, failing the benchmark after timeout.
func waitUntil(b *testing.B, timeout time.Duration, what string, cond func() (bool, string)) {
	b.Helper()
	waitEvery(b, 50*time.Millisecond, timeout, what, cond)
}

// waitEvery polls cond every interval until it holds, failing the benchmark after timeout.
func waitEvery(b *testing.B, interval, timeout time.Duration, what string, cond func() (bool, string)) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: not after %s: %s", what, timeout, state)
		}
		time.Sleep(interval)
	}
}

// pollActive lists the units matching pattern every benchPoll and returns when each unit
// first showed ActiveState=active, once want of them (accepted by keep) did.
// abort, when it returns an error, ends the wait with that error. It gives up after 5 minutes,
// or 600 ms per unit wanted when that is longer (1000 pods on a loaded machine).
func pollActive(b *testing.B, sd *units.Manager, pattern string, want int, keep func(units.UnitStatus) bool, abort func() error) map[string]time.Time {
	b.Helper()
	seen := make(map[string]time.Time, want)
	limit := max(5*time.Minute, time.Duration(want)*600*time.Millisecond)
	deadline := time.Now().Add(limit)
	for len(seen) < want {
		if err := abort(); err != nil {
			b.Fatal(err)
		}
		list, err := sd.List(b.Context(), pattern)
		if err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		for _, u := range list {
			if _, ok := seen[u.Name]; !ok && u.ActiveState == "active" && keep(u) {
				seen[u.Name] = now
			}
		}
		if now.After(deadline) {
			b.Fatalf("%s: %d of %d active after %s", pattern, len(seen), want, limit)
		}
		time.Sleep(benchPoll)
	}
	return seen
}

// pollRunning lists the pods through the API every 50 ms until stop is closed and returns when
// each pod was first reported Running.
func pollRunning(ctx context.Context, c *api.Client, stop <-chan struct{}) map[string]time.Time {
	seen := map[string]time.Time{}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		list, err := c.ListPods(ctx)
		now := time.Now()
		if err == nil {
			for _, p := range list {
				if _, ok := seen[p.Name]; !ok && p.Status.Phase == v1.PodRunning {
					seen[p.Name] = now
				}
			}
		}
		select {
		case <-stop:
			return seen
		case <-t.C:
		}
	}
}

// cpuTime is a process's user+system CPU time (all threads) from /proc/<pid>/stat.
func cpuTime(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ = 100
}

// pid1CPU is PID 1's CPU time from its schedstat (nanoseconds on the CPU), finer than stat.
func pid1CPU() time.Duration {
	data, err := os.ReadFile("/proc/1/schedstat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(f[0], 10, 64)
	return time.Duration(n)
}

func mainPID(b *testing.B, sd *units.Manager, unit string) int {
	b.Helper()
	info, err := sd.Properties(b.Context(), unit)
	if err != nil || info.MainPID == 0 {
		b.Fatalf("%s: main PID: %+v %v", unit, info, err)
	}
	return int(info.MainPID)
}

// procStatus returns the kB fields of /proc/<pid>/status (VmRSS, VmHWM, RssAnon, ...).
func procStatus(b *testing.B, pid int) map[string]float64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]float64{}
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(line, ":")
		f := strings.Fields(v)
		if ok && len(f) == 2 && f[1] == "kB" {
			n, _ := strconv.ParseFloat(f[0], 64)
			out[k] = n
		}
	}
	return out
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := stdslices.Clone(d)
	stdslices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// benchUID is a random pod UID for the floor, in the form the API server generates.
func benchUID() string {
	var r [16]byte
	_, _ = rand.Read(r[:])
	h := hex.EncodeToString(r[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// floorArgs is the systemd-run invocation of one floor pod: the container unit with the
// properties slicelet's systemd runtime gives a BestEffort container with no env, volumes or
// security context (systemdrt's unitProperties + ContainerResources on cgroup v1: CPUShares=2,
// no memory limit; OOMScoreAdjust=1000, the kubelet's BestEffort score), in the pod slice,
// which systemd creates implicitly.
func floorArgs(uid, name, unit, slice string) []string {
	args := []string{
		"--quiet",
		"--slice=" + slice, "--unit=" + unit,
		"-p", "Description=container default/" + name + "/c (#1)",
		"-p", "Type=exec",
		"-p", "RemainAfterExit=yes",
		"-p", "Restart=no",
		"-p", "StandardOutput=journal",
		"-p", "StandardError=journal",
		"-p", "SyslogIdentifier=c",
	}
	for _, f := range []string{"POD_UID=" + uid, "POD_NAME=" + name, "POD_NAMESPACE=default", "CONTAINER_NAME=c"} {
		args = append(args, "-p", "LogExtraFields="+f)
	}
	args = append(args,
		"-p", "KillSignal=15",
		"-p", "TimeoutStopSec=2",
		"-p", "OOMScoreAdjust=1000",
		"-p", "MemoryAccounting=yes",
		"-p", "CPUAccounting=yes",
		"-p", "TasksAccounting=yes",
		"-p", "CPUShares=2",
		"/bin/sleep", "infinity",
	)
	return args
}

// roundResult is one round of one path.
type roundResult struct {
	perPod  []time.Duration // drop → container unit active
	running []time.Duration // drop → API reports Running (slicelet only)
	total   time.Duration   // first drop → last unit active
	pid1    time.Duration   // systemd's CPU during the round
	client  time.Duration   // slicelet's CPU during the round (slicelet only)
}

func (a *benchAgent) round(b *testing.B, r, n int) roundResult {
	b.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("bench-r%d-p%03d", r, i)
	}
	pid := mainPID(b, a.sd, a.unit)
	cpu0, pid10 := cpuTime(pid), pid1CPU()
	stop := make(chan struct{})
	var running map[string]time.Time
	var wg sync.WaitGroup
	wg.Go(func() { running = pollRunning(b.Context(), a.client, stop) })

	dropped := a.drop(b, names)
	active := pollActive(b, a.sd, containerUnits, n, func(u units.UnitStatus) bool {
		return strings.HasPrefix(u.Description, "container ")
	}, func() error { return nil })
	cpu1, pid11 := cpuTime(pid), pid1CPU()
	// The API's view lags by the controller's status update; wait for it outside the timing.
	waitUntil(b, 2*time.Minute, "API reports every pod Running", func() (bool, string) {
		list, err := a.client.ListPods(b.Context())
		if err != nil {
			return false, err.Error()
		}
		ok := 0
		for _, p := range list {
			if p.Status.Phase == v1.PodRunning {
				ok++
			}
		}
		return ok == n, fmt.Sprintf("%d of %d Running", ok, n)
	})
	time.Sleep(100 * time.Millisecond) // one more API poll, so the last pod's Running is seen
	close(stop)
	wg.Wait()

	byUID := a.podNames(b, names)
	res := roundResult{pid1: pid11 - pid10, client: cpu1 - cpu0}
	first, last := dropped[names[0]], time.Time{}
	for u, at := range active {
		uid, _, _, ok := systemdrt.ParseUnitName(u)
		name, known := byUID[uid]
		if !ok || !known {
			b.Fatalf("active container unit %s belongs to no pod of round %d", u, r)
		}
		res.perPod = append(res.perPod, at.Sub(dropped[name]))
		if at.After(last) {
			last = at
		}
	}
	for name, at := range running {
		if d, ok := dropped[name]; ok {
			res.running = append(res.running, at.Sub(d))
		}
	}
	res.total = last.Sub(first)
	a.removeAll(b)
	return res
}

// floorRound runs n pods through systemd-run, benchFloorWorkers at a time, all submitted at
// once, and stops them afterwards.
func floorRound(b *testing.B, sd *units.Manager, r, n int) roundResult {
	b.Helper()
	pods := newFloorPods(n, fmt.Sprintf("floor-r%d-p%%03d", r))
	start, active, pid1 := startFloor(b, sd, pods, func(p floorPod) error {
		if out, err := exec.Command("systemd-run", floorArgs(p.uid, p.name, p.unit, p.slice)...).CombinedOutput(); err != nil {
			return fmt.Errorf("systemd-run %s: %w: %s", p.unit, err, out)
		}
		return nil
	})
	res := roundResult{pid1: pid1}
	var last time.Time
	for _, at := range active {
		res.perPod = append(res.perPod, at.Sub(start))
		if at.After(last) {
			last = at
		}
	}
	res.total = last.Sub(start)
	stopFloorPods(b, sd, pods)
	return res
}

// startFloor starts the floor pods with startOne, benchFloorWorkers at a time, and waits for
// all their container services to be active. It returns when it began, when each service was
// seen active, and systemd's CPU meanwhile.
func startFloor(b *testing.B, sd *units.Manager, pods []floorPod, startOne func(floorPod) error) (time.Time, map[string]time.Time, time.Duration) {
	b.Helper()
	pid10 := pid1CPU()
	queue := make(chan floorPod, len(pods))
	start := time.Now()
	for _, p := range pods {
		queue <- p
	}
	close(queue)
	var mu sync.Mutex
	var runErr error
	var wg sync.WaitGroup
	for range benchFloorWorkers {
		wg.Go(func() {
			for p := range queue {
				if err := startOne(p); err != nil {
					mu.Lock()
					runErr = err
					mu.Unlock()
				}
			}
		})
	}
	active := pollActive(b, sd, "benchfloor-*.service", len(pods), func(units.UnitStatus) bool { return true }, func() error {
		mu.Lock()
		defer mu.Unlock()
		return runErr
	})
	wg.Wait()
	if runErr != nil {
		b.Fatal(runErr)
	}
	return start, active, pid1CPU() - pid10
}

// benchSystemd connects to the sandbox's systemd for a benchmark; the kubepods slices slicelet
// left are stopped at the end.
func benchSystemd(b *testing.B) *units.Manager {
	b.Helper()
	env := systemdtest.Require(b)
	sd, err := units.Connect(b.Context(), units.Options{CgroupRoot: env.CgroupRoot})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for _, s := range []string{"kubepods-burstable.slice", "kubepods-besteffort.slice", "kubepods.slice"} {
			_ = sd.Stop(context.Background(), s)
		}
		sd.Close()
	})
	return sd
}

// floorPod is one pod of a floor: its UID, name, container unit and pod slice.
type floorPod struct{ uid, name, unit, slice string }

// newFloorPods names n floor pods with random UIDs; name formats the pod name of index i.
func newFloorPods(n int, name string) []floorPod {
	pods := make([]floorPod, n)
	for i := range pods {
		uid := benchUID()
		u := strings.ReplaceAll(uid, "-", "_")
		pods[i] = floorPod{uid: uid, name: fmt.Sprintf(name, i), unit: "benchfloor-" + u + "-c-1.service", slice: "kubepods-besteffort-pod" + u + ".slice"}
	}
	return pods
}

// stopFloorPods stops the floor pods' units and slices, benchFloorWorkers at a time, and waits
// until no floor unit is active.
func stopFloorPods(b *testing.B, sd *units.Manager, pods []floorPod) {
	b.Helper()
	stopq := make(chan floorPod, len(pods))
	for _, p := range pods {
		stopq <- p
	}
	close(stopq)
	var sw sync.WaitGroup
	for range benchFloorWorkers {
		sw.Go(func() {
			for p := range stopq {
				if err := sd.Stop(context.Background(), p.unit); err != nil {
					b.Errorf("stop %s: %v", p.unit, err)
				}
				_ = sd.Stop(context.Background(), p.slice)
			}
		})
	}
	sw.Wait()
	waitUntil(b, 2*time.Minute, "floor units gone", func() (bool, string) {
		c := countActive(b, sd, "benchfloor-*.service")
		return c == 0, fmt.Sprintf("%d floor units active", c)
	})
}

// BenchmarkPodsManifestToRunning is the pods benchmark; see the comment at the top of the file.
// Run it with -benchtime 1x: each sub-benchmark does its own rounds.
func BenchmarkPodsManifestToRunning(b *testing.B) {
	sd := benchSystemd(b)
	var err error
	n := envInt(b, benchPodsEnv, 100)
	rounds := envInt(b, benchRoundsEnv, 3)

	b.Run("latency", func(b *testing.B) {
		for range b.N {
			benchLatency(b, sd, n, rounds)
		}
	})
	counts := os.Getenv(benchRSSPodsEnv)
	if counts == "" {
		counts = "110,1000"
	}
	idle := 60 * time.Second
	if v := os.Getenv(benchIdleEnv); v != "" {
		if idle, err = time.ParseDuration(v); err != nil {
			b.Fatalf("%s=%q: %v", benchIdleEnv, v, err)
		}
	}
	largest := 0
	var ns []int
	for _, c := range strings.Split(counts, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || k <= 0 {
			b.Fatalf("%s=%q: want comma-separated positive counts", benchRSSPodsEnv, counts)
		}
		ns, largest = append(ns, k), max(largest, k)
	}
	for _, k := range ns {
		b.Run(fmt.Sprintf("rss-pods=%d", k), func(b *testing.B) {
			for range b.N {
				benchRSS(b, sd, k, idle, k == largest)
			}
		})
	}
}

func benchLatency(b *testing.B, sd *units.Manager, n, rounds int) {
	a := startBenchAgent(b, sd, "bench-slicelet-latency.service", n+10, false)
	var sliceletR, floorR []roundResult
	for r := range rounds {
		// Rotate which path goes first, so drift in the machine's load hits both.
		if r%2 == 0 {
			sliceletR = append(sliceletR, a.round(b, r, n))
			floorR = append(floorR, floorRound(b, sd, r, n))
		} else {
			floorR = append(floorR, floorRound(b, sd, r, n))
			sliceletR = append(sliceletR, a.round(b, r, n))
		}
		benchProgress("round %d: slicelet all running after %s, floor after %s", r, sliceletR[r].total.Round(time.Millisecond), floorR[r].total.Round(time.Millisecond))
	}
	_ = sd.Stop(context.Background(), a.unit)

	agg := func(rs []roundResult) (per, running []time.Duration, total, pid1, client time.Duration) {
		for _, r := range rs {
			per = append(per, r.perPod...)
			running = append(running, r.running...)
			total += r.total
			pid1 += r.pid1
			client += r.client
		}
		return per, running, total / time.Duration(len(rs)), pid1, client
	}
	sp, sRun, sTotal, sPid1, sCPU := agg(sliceletR)
	fp, _, fTotal, fPid1, _ := agg(floorR)
	pods := float64(n * rounds)
	b.ReportMetric(float64(n), "pods")
	b.ReportMetric(binaryMetric(b), "cmd-slicelet")
	b.ReportMetric(float64(rounds), "rounds")
	b.ReportMetric(micros(percentile(sp, 0.5)), "slicelet-p50-µs")
	b.ReportMetric(micros(percentile(sp, 0.99)), "slicelet-p99-µs")
	b.ReportMetric(micros(sTotal), "slicelet-all-µs")
	b.ReportMetric(micros(percentile(sRun, 0.5)), "slicelet-api-running-p50-µs")
	b.ReportMetric(micros(percentile(sRun, 0.99)), "slicelet-api-running-p99-µs")
	b.ReportMetric(micros(sPid1)/pods, "slicelet-pid1-cpu-µs/pod")
	b.ReportMetric(micros(sCPU)/pods, "slicelet-cpu-µs/pod")
	b.ReportMetric(micros(percentile(fp, 0.5)), "floor-p50-µs")
	b.ReportMetric(micros(percentile(fp, 0.99)), "floor-p99-µs")
	b.ReportMetric(micros(fTotal), "floor-all-µs")
	b.ReportMetric(micros(fPid1)/pods, "floor-pid1-cpu-µs/pod")
	if fTotal > 0 && percentile(fp, 0.5) > 0 && percentile(fp, 0.99) > 0 {
		b.ReportMetric(float64(sTotal)/float64(fTotal), "all-ratio")
		b.ReportMetric(float64(percentile(sp, 0.5))/float64(percentile(fp, 0.5)), "p50-ratio")
		b.ReportMetric(float64(percentile(sp, 0.99))/float64(percentile(fp, 0.99)), "p99-ratio")
	}
}

func benchRSS(b *testing.B, sd *units.Manager, n int, idle time.Duration, profile bool) {
	unit := fmt.Sprintf("bench-slicelet-rss%d.service", n)
	a := startBenchAgent(b, sd, unit, n+10, profile)
	pid := mainPID(b, sd, unit)
	before := procStatus(b, pid)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("rss-p%04d", i)
	}
	start := time.Now()
	a.drop(b, names)
	// Poll slowly: listing 1000 pods through the API is work for slicelet, measured here.
	waitEvery(b, time.Second, 15*time.Minute, "every pod Running", func() (bool, string) {
		ctrs := countActive(b, sd, containerUnits)
		if ctrs < n {
			return false, fmt.Sprintf("%d of %d containers active", ctrs, n)
		}
		list, err := a.client.ListPods(b.Context())
		if err != nil {
			return false, err.Error()
		}
		ok := 0
		for _, p := range list {
			if p.Status.Phase == v1.PodRunning {
				ok++
			}
		}
		return ok == n, fmt.Sprintf("%d of %d Running", ok, n)
	})
	converge := time.Since(start)
	benchProgress("%d pods Running after %s; idling %s", n, converge.Round(time.Millisecond), idle)
	atConverge := procStatus(b, pid)
	if profile {
		// The profile at convergence is the base of the one after idling: `go tool pprof
		// -sample_index=alloc_space -base slicelet-heap-converged.pprof slicelet-heap.pprof`
		// shows what slicelet allocates while it idles.
		benchHeapDump(b, a, pid, "slicelet-heap-converged.pprof")
	}
	cpu0 := cpuTime(pid)
	time.Sleep(idle) // idle: steady resyncs (every 10 s per pod), manifest rescans (20 s)
	idleCPU := cpuTime(pid) - cpu0
	afterIdle := procStatus(b, pid)
	if profile {
		benchHeapDump(b, a, pid, "slicelet-heap.pprof")
	}
	b.ReportMetric(float64(n), "pods")
	b.ReportMetric(binaryMetric(b), "cmd-slicelet")
	b.ReportMetric(converge.Seconds(), "converge-s")
	b.ReportMetric(before["VmRSS"]/1024, "start-rss-MiB")
	b.ReportMetric(atConverge["VmRSS"]/1024, "converged-rss-MiB")
	b.ReportMetric(afterIdle["VmRSS"]/1024, "idle-rss-MiB")
	b.ReportMetric(afterIdle["RssAnon"]/1024, "idle-anon-MiB")
	b.ReportMetric(afterIdle["RssFile"]/1024, "idle-file-MiB")
	b.ReportMetric(afterIdle["VmHWM"]/1024, "hwm-MiB")
	b.ReportMetric(idle.Seconds(), "idle-s")
	b.ReportMetric(float64(idleCPU)/float64(idle)*100, "idle-cpu-%")
	benchProgress("%d pods: converged in %s; VmRSS %.1f MiB at start, %.1f MiB converged, %.1f MiB after %s idle (anon %.1f, file %.1f), VmHWM %.1f MiB",
		n, converge.Round(time.Millisecond), before["VmRSS"]/1024, atConverge["VmRSS"]/1024, afterIdle["VmRSS"]/1024, idle, afterIdle["RssAnon"]/1024, afterIdle["RssFile"]/1024, afterIdle["VmHWM"]/1024)
	a.removeAll(b)
	_ = sd.Stop(context.Background(), unit)
}

// binaryMetric is 1 when the measured slicelet is a built cmd/slicelet, 0 for the test binary.
func binaryMetric(b *testing.B) float64 {
	if benchBinary(b) != "" {
		return 1
	}
	return 0
}

// benchHeapDump asks slicelet for a heap profile (SIGUSR1, see init) and copies it to
// SLICELET_BENCH_PROFILE_DIR as name.
func benchHeapDump(b *testing.B, a *benchAgent, pid int, name string) {
	b.Helper()
	out := os.Getenv(benchProfileDirEnv)
	if out == "" || benchBinary(b) != "" {
		return
	}
	path := filepath.Join(a.dir, benchHeapProfile)
	_ = os.Remove(path) // an earlier one
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		b.Fatal(err)
	}
	waitUntil(b, 10*time.Second, "heap profile", func() (bool, string) {
		_, err := os.Stat(path)
		return err == nil, fmt.Sprint(err)
	})
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	dst := filepath.Join(out, name)
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		b.Fatal(err)
	}
	if report, err := os.ReadFile(filepath.Join(a.dir, benchMemoryReport)); err == nil {
		_ = os.WriteFile(filepath.Join(out, "slicelet-memory.txt"), report, 0o644)
	}
	b.Logf("heap profile of slicelet: %s", dst)
}
