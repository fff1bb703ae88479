package crirt

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/gc"
	"github.com/slicelet/slicelet/internal/testharness/critest"
	"github.com/slicelet/slicelet/internal/testharness/runtimetest"
)

// gcImage is one image TestIntegrationImageGC imports: a busybox layer shared by every test
// image plus a random layer of mib MiB, so that each image has its own size and ID.
type gcImage struct {
	name string
	mib  int
}

// fsReadings wraps the runtime's image side and records every ImageFsInfo reading and when
// the last RemoveImage returned, to check and report how the runtime's numbers evolved while
// the collector waited for fresh ones.
type fsReadings struct {
	gc.ImageRuntime
	mu          sync.Mutex
	readings    []fsReading
	lastRemoved time.Time
}

func (f *fsReadings) RemoveImage(ctx context.Context, id string) error {
	err := f.ImageRuntime.RemoveImage(ctx, id)
	f.mu.Lock()
	f.lastRemoved = time.Now()
	f.mu.Unlock()
	return err
}

type fsReading struct {
	at   time.Time
	info gc.ImageFsInfo
}

func (f *fsReadings) ImageFsInfo(ctx context.Context) (gc.ImageFsInfo, error) {
	info, err := f.ImageRuntime.ImageFsInfo(ctx)
	if err == nil {
		f.mu.Lock()
		f.readings = append(f.readings, fsReading{at: time.Now(), info: info})
		f.mu.Unlock()
	}
	return info, err
}

func (f *fsReadings) reset() []fsReading {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.readings
	f.readings = nil
	return out
}

// imageIDs maps every name (repo tag, digest) of the runtime's images to the image ID, and
// every ID to its listed size.
func imageIDs(t *testing.T, rt *full) (ids map[string]string, sizes map[string]int64) {
	t.Helper()
	imgs, err := rt.ListImages(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ids, sizes = map[string]string{}, map[string]int64{}
	for _, img := range imgs {
		for _, n := range img.Names {
			ids[n] = img.ID
		}
		sizes[img.ID] = img.SizeBytes
	}
	return ids, sizes
}

// statfsUsage is the kubelet's usage percentage of the filesystem at path, from statfs itself
// (not from the runtime), with the available bytes it is computed from.
func statfsUsage(t *testing.T, path string) (usage int, capacity, available int64) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		t.Fatal(err)
	}
	capacity, available = int64(st.Blocks)*st.Bsize, int64(st.Bavail)*st.Bsize
	return 100 - int(available*100/capacity), capacity, available
}

func succeeded(st v1.PodStatus, err error) bool { return err == nil && st.Phase == v1.PodSucceeded }

// onceContainer is a container of image that exits 0 at once.
func onceContainer(name, image string) v1.Container {
	c := container(name, "exit 0")
	c.Image = image
	return c
}

// forgetAtCleanup kills and forgets the pods when the test ends, passed or failed, before the
// environment's own cleanup stops containerd.
func forgetAtCleanup(t *testing.T, rt *full, ps ...*v1.Pod) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, p := range ps {
			if _, err := rt.KillPod(ctx, p, time.Second); err != nil {
				t.Errorf("cleanup: %v", err)
			}
			if err := rt.Forget(ctx, string(p.UID)); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// TestIntegrationImageGC: image GC against containerd on a 256 MiB tmpfs. Five candidate
// images of distinct sizes, first detected one after the other and two of them used by a
// container at known times, push the image filesystem above the high threshold. A dry run
// removes nothing; the collection removes the unused images least recently used first (never
// used first, by first detection; then D, used before B) until the kubelet's amountToFree is
// reached by their listed sizes, waits for containerd's numbers to be newer than the
// deletions and reports the space really freed, which statfs confirms. The image of a running
// pod, the image of an exited container (containerd 1.6 would delete it) and the sandbox
// image survive, and a new pod still starts.
func TestIntegrationImageGC(t *testing.T) {
	sandboxOnly(t)
	const capacity = 256 << 20
	it := newIT(t, critest.Options{ImageFsSize: capacity})
	rt := it.runtime(t)
	ctx := t.Context()
	records := filepath.Join(t.TempDir(), "gc-images.json")
	known := map[string]bool{}
	var knownMu sync.Mutex
	podState := func() gc.PodState {
		knownMu.Lock()
		defer knownMu.Unlock()
		return gc.PodState{Known: maps.Clone(known), AllSourcesReady: true}
	}
	addPod := func(uid string) {
		knownMu.Lock()
		known[uid] = true
		knownMu.Unlock()
	}
	// The detector is the daemon before a restart: it keeps the records (first detected, last
	// used) in the file the collector below starts from.
	detector, err := gc.NewCollector(gc.CollectorOptions{
		Images: rt, Containers: rt, ImagePolicy: gc.ImagePolicy{HighThresholdPercent: 100},
		SandboxImage: it.ctrd.SandboxImage, RecordsPath: records, PodState: podState, Logger: it.log,
	})
	if err != nil {
		t.Fatal(err)
	}
	detect := func() {
		t.Helper()
		if err := detector.Detect(ctx); err != nil {
			t.Fatal(err)
		}
	}
	detect()

	// Candidates, imported (and so first detected) in this order; X is used by an exited
	// container only.
	cands := []gcImage{
		{"slicelet.test/gc-a:1", 12}, {"slicelet.test/gc-b:1", 20}, {"slicelet.test/gc-c:1", 16},
		{"slicelet.test/gc-d:1", 14}, {"slicelet.test/gc-e:1", 18},
	}
	exitedImage := gcImage{"slicelet.test/gc-x:1", 10}
	t0 := time.Now()
	for _, img := range append(cands, exitedImage) {
		if err := it.ctrd.ImportImage(ctx, critest.Image{Name: img.name, Cmd: []string{"/bin/sh"}, RandomMiB: img.mib}); err != nil {
			t.Fatal(err)
		}
		detect()
	}
	t.Logf("imported %d images in %s", len(cands)+1, time.Since(t0).Round(time.Millisecond))
	ids, sizes := imageIDs(t, rt)
	id := func(name string) string {
		t.Helper()
		if ids[name] == "" {
			t.Fatalf("image %s not listed", name)
		}
		return ids[name]
	}

	// A running pod uses the busybox image, an exited container uses X.
	keeper := itPod("keeper", "it-igc-keeper", container("main", "trap 'exit 0' TERM; while true; do sleep 0.1; done"))
	addPod(string(keeper.UID))
	forgetAtCleanup(t, rt, keeper)
	keeperSlice := it.slice(t, keeper)
	syncUntil(t, rt, keeper, keeperSlice, "running", running)
	exiter := itPod("exiter", "it-igc-exiter", onceContainer("main", exitedImage.name))
	exiter.Spec.RestartPolicy = v1.RestartPolicyNever
	addPod(string(exiter.UID))
	forgetAtCleanup(t, rt, exiter)
	syncUntil(t, rt, exiter, it.slice(t, exiter), "succeeded", succeeded)

	// D is used, then B: a detection while each one's container exists records its last use;
	// the pod is then deleted, so the image is unused again.
	for _, name := range []string{"slicelet.test/gc-d:1", "slicelet.test/gc-b:1"} {
		uid := "it-igc-user-" + strings.TrimSuffix(strings.TrimPrefix(name, "slicelet.test/gc-"), ":1")
		pod := itPod("user", uid, onceContainer("main", name))
		pod.Spec.RestartPolicy = v1.RestartPolicyNever
		forgetAtCleanup(t, rt, pod)
		syncUntil(t, rt, pod, it.slice(t, pod), "succeeded", succeeded)
		detect()
		if err := rt.Forget(ctx, uid); err != nil {
			t.Fatal(err)
		}
	}
	recs := detector.Records()
	a, b, c, d, e := id(cands[0].name), id(cands[1].name), id(cands[2].name), id(cands[3].name), id(cands[4].name)
	if !(recs[a].FirstDetected.Before(recs[b].FirstDetected) && recs[b].FirstDetected.Before(recs[c].FirstDetected) &&
		recs[c].FirstDetected.Before(recs[d].FirstDetected) && recs[d].FirstDetected.Before(recs[e].FirstDetected)) {
		t.Fatalf("records: first detected not in import order: %+v", recs)
	}
	if !recs[a].LastUsed.IsZero() || !recs[c].LastUsed.IsZero() || !recs[e].LastUsed.IsZero() ||
		recs[d].LastUsed.IsZero() || !recs[d].LastUsed.Before(recs[b].LastUsed) {
		t.Fatalf("records: want A, C, E never used and D used before B: %+v", recs)
	}
	// Least recently used first: never used (by first detection), then D, then B.
	lru := []string{a, c, e, d, b}

	// Thresholds. High is fixed; low is chosen from the filesystem as it is now so that the
	// kubelet's amountToFree falls in the middle of the fourth candidate: the plan must remove
	// A, C, E and D and keep B. (The usage depends on containerd's metadata, so a fixed low
	// threshold would make the split fragile.)
	fs, err := rt.ImageFsInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const high = 60
	usage := 100 - int(fs.AvailableBytes*100/fs.CapacityBytes)
	var cum []int64
	var sum int64
	for _, img := range lru {
		sum += sizes[img]
		cum = append(cum, sum)
	}
	target := fs.AvailableBytes + cum[2] + sizes[d]/2
	low := 100 - int(math.Round(float64(target)*100/float64(fs.CapacityBytes)))
	amount := fs.CapacityBytes*int64(100-low)/100 - fs.AvailableBytes
	t.Logf("image fs before: capacity %s, available %s, usage %d%%, runtime's used %s; listed sizes LRU order %v MiB; thresholds high %d%% low %d%%, amountToFree %s",
		mib(fs.CapacityBytes), mib(fs.AvailableBytes), usage, mib(fs.UsedBytes),
		[]string{mib(sizes[a]), mib(sizes[c]), mib(sizes[e]), mib(sizes[d]), mib(sizes[b])}, high, low, mib(amount))
	if fs.CapacityBytes != capacity || usage < high || low <= 0 || low >= high || amount <= cum[2] || amount > cum[3] {
		t.Fatalf("setup: image fs %+v, usage %d%%, low %d%%, amountToFree %d not in (%d, %d]: the images do not cross the thresholds as designed",
			fs, usage, low, amount, cum[2], cum[3])
	}

	// The collector is the daemon after a restart: it starts from the records file.
	images := &fsReadings{ImageRuntime: rt}
	col, err := gc.NewCollector(gc.CollectorOptions{
		Images: images, Containers: rt, ImagePolicy: gc.ImagePolicy{HighThresholdPercent: high, LowThresholdPercent: low},
		SandboxImage: it.ctrd.SandboxImage, RecordsPath: records, PodState: podState, Logger: it.log,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := col.Records(); !got[d].LastUsed.Equal(recs[d].LastUsed) || !got[a].FirstDetected.Equal(recs[a].FirstDetected) {
		t.Fatalf("records after the restart = %+v, want %+v", got, recs)
	}
	removalIDs := func(rs []gc.ImageRemoval) []string {
		out := []string{}
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	want := lru[:4]
	name := map[string]string{a: "A", b: "B", c: "C", d: "D", e: "E", id(testImage): "busybox", id(exitedImage.name): "X", id(it.ctrd.SandboxImage): "pause"}
	names := func(list []string) string {
		var out []string
		for _, s := range list {
			out = append(out, cmp.Or(name[s], s))
		}
		return strings.Join(out, ",")
	}

	// Dry run: the plan, nothing removed.
	dry, err := col.CollectImages(ctx, true)
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if got := removalIDs(dry.Remove); !slices.Equal(got, want) || len(dry.Removed) != 0 || dry.Measured {
		t.Errorf("dry run: remove %s, removed %s, measured %v; want remove %s, nothing removed", names(got), names(dry.Removed), dry.Measured, names(want))
	}
	if _, after := imageIDs(t, rt); len(after) != len(sizes) {
		t.Errorf("dry run removed images: %d listed, want %d", len(after), len(sizes))
	}

	// The collection.
	images.reset()
	res, err := col.CollectImages(ctx, false)
	readings := images.reset()
	gotErr := err
	wantAmount := res.ImageFs.CapacityBytes*int64(100-low)/100 - res.ImageFs.AvailableBytes
	if res.AmountToFree != wantAmount || res.UsagePercent != 100-int(res.ImageFs.AvailableBytes*100/res.ImageFs.CapacityBytes) {
		t.Errorf("usage %d%%, amountToFree %d; want the kubelet's numbers from %+v: %d", res.UsagePercent, res.AmountToFree, *res.ImageFs, wantAmount)
	}
	if got := removalIDs(res.Remove); !slices.Equal(got, want) || !slices.Equal(res.Removed, want) || len(res.Failed) != 0 {
		t.Errorf("remove %s, removed %s, failed %+v; want %s in this order", names(got), names(res.Removed), res.Failed, names(want))
	}
	if res.PlannedFreedBytes != cum[3] || res.RemovedBytes != cum[3] {
		t.Errorf("planned %d, removed %d bytes; want the listed sizes %d", res.PlannedFreedBytes, res.RemovedBytes, cum[3])
	}
	wantKept := map[string]gc.KeepReason{b: gc.KeepEnoughFreed, id(testImage): gc.KeepInUse, id(exitedImage.name): gc.KeepInUse, id(it.ctrd.SandboxImage): gc.KeepPinned}
	for _, k := range res.Kept {
		if wantKept[k.ID] != k.Reason {
			t.Errorf("kept %s (%s): %s %q; want %q", name[k.ID], k.ID, k.Reason, k.Detail, wantKept[k.ID])
		}
		delete(wantKept, k.ID)
	}
	if len(wantKept) != 0 {
		t.Errorf("not reported as kept: %v", wantKept)
	}
	images.mu.Lock()
	lastRemoved := images.lastRemoved
	images.mu.Unlock()
	if !res.Measured || res.MeasureError != "" || res.ImageFsAfter == nil || !res.ImageFsAfter.Timestamp.After(lastRemoved) {
		t.Fatalf("measured %v (%s), after %+v; want numbers measured after the last deletion at %s", res.Measured, res.MeasureError, res.ImageFsAfter, lastRemoved.Format(time.RFC3339Nano))
	}
	// containerd's own usage (its snapshots), once fresh, shows the unpacked layers gone.
	if res.ImageFsAfter.UsedBytes >= res.ImageFs.UsedBytes {
		t.Errorf("runtime's used bytes %d after, %d before; want less", res.ImageFsAfter.UsedBytes, res.ImageFs.UsedBytes)
	}
	// Each candidate's listed size is its compressed content (manifest, config, the shared
	// busybox layer and its random layer); on disk containerd also holds the layer unpacked by
	// the overlayfs snapshotter, and the busybox layer stays for the images that keep it. So
	// what is freed is about twice the random layers, more than the listed sizes.
	if res.FreedBytes < res.PlannedFreedBytes {
		t.Errorf("freed %d bytes measured, less than the %d planned", res.FreedBytes, res.PlannedFreedBytes)
	}
	// Hence no shortfall: the measured gain covers amountToFree.
	if res.FreedBytes >= res.AmountToFree && gotErr != nil {
		t.Errorf("CollectImages: %v; want nil, %d freed ≥ %d to free", gotErr, res.FreedBytes, res.AmountToFree)
	}
	var short *gc.MeasuredShortfallError
	if res.FreedBytes < res.AmountToFree && !errors.As(gotErr, &short) {
		t.Errorf("CollectImages: %v; want a MeasuredShortfallError, %d freed < %d to free", gotErr, res.FreedBytes, res.AmountToFree)
	}
	// statfs itself, now: the usage is at or below the low threshold and the collector's
	// measurement is what the filesystem shows (the freshness wait did not read too early).
	usageNow, _, availNow := statfsUsage(t, it.ctrd.Root)
	if usageNow > low || res.UsagePercentAfter > low {
		t.Errorf("usage after: statfs %d%%, reported %d%%; want ≤ low threshold %d%%", usageNow, res.UsagePercentAfter, low)
	}
	if diff := availNow - res.ImageFs.AvailableBytes - res.FreedBytes; diff > 1<<20 || diff < -(1<<20) {
		t.Errorf("freed %s measured, statfs shows %s: the measurement was taken before containerd freed the space", mib(res.FreedBytes), mib(availNow-res.ImageFs.AvailableBytes))
	}
	var trace []string
	for _, r := range readings {
		trace = append(trace, fmt.Sprintf("%s: used %s available %s (measured %s)", r.at.Format("15:04:05.000"), mib(r.info.UsedBytes), mib(r.info.AvailableBytes), r.info.Timestamp.Format("15:04:05.000")))
	}
	t.Logf("image gc: duration %s, freshness wait %s, removed %s (listed %s, amountToFree %s), measured freed %s (%.2f× listed), usage %d%% → %d%% (statfs %d%%); err %v; ImageFsInfo readings:\n  %s",
		time.Duration(res.Duration).Round(time.Millisecond), time.Duration(res.MeasureWait).Round(time.Millisecond), names(res.Removed),
		mib(res.PlannedFreedBytes), mib(res.AmountToFree), mib(res.FreedBytes), float64(res.FreedBytes)/float64(res.PlannedFreedBytes),
		res.UsagePercent, res.UsagePercentAfter, usageNow, gotErr, strings.Join(trace, "\n  "))

	// What survives: B, the in-use images and the sandbox image; the records forget the rest.
	after, _ := imageIDs(t, rt)
	for _, img := range []string{cands[1].name, testImage, exitedImage.name, it.ctrd.SandboxImage} {
		if after[img] == "" {
			t.Errorf("image %s removed", img)
		}
	}
	for _, img := range []string{cands[0].name, cands[2].name, cands[3].name, cands[4].name} {
		if after[img] != "" {
			t.Errorf("image %s still listed", img)
		}
	}
	for _, img := range want {
		if _, ok := col.Records()[img]; ok {
			t.Errorf("record of removed image %s kept", name[img])
		}
	}
	// The exited container still exists and still names its image.
	ctrs, err := rt.ListContainers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ctrs, func(c gc.Container) bool {
		return c.PodUID == string(exiter.UID) && c.State == gc.StateExited && c.ImageID == id(exitedImage.name)
	}) {
		t.Errorf("exited container of X gone: %+v", ctrs)
	}
	// A new pod starts: its sandbox needs the sandbox image, which was not pulled back.
	fresh := itPod("fresh", "it-igc-fresh", container("main", "trap 'exit 0' TERM; while true; do sleep 0.1; done"))
	addPod(string(fresh.UID))
	forgetAtCleanup(t, rt, fresh)
	syncUntil(t, rt, fresh, it.slice(t, fresh), "running after image gc", running)

	// A second collection: usage is below the high threshold now, nothing is removed.
	again, err := col.CollectImages(ctx, false)
	if err != nil || len(again.Removed) != 0 || again.AmountToFree != 0 {
		t.Errorf("second collection: removed %s, amountToFree %d, %v; want nothing (usage %d%% < %d%%)", names(again.Removed), again.AmountToFree, err, again.UsagePercent, high)
	}
}

// TestIntegrationContainerGC: container GC against containerd with MaxPerPodContainer 1 and no
// minimum age. A live pod has a container that exited four times (restartPolicy Always) next
// to one that runs: the three oldest dead instances and their log files go, the newest dead one
// and the running container stay, and the pod still syncs. A deleted pod (killed, not known to
// any source, all sources ready) loses its dead containers, its stopped sandbox and its log
// directory. A dry run before removes nothing.
func TestIntegrationContainerGC(t *testing.T) {
	sandboxOnly(t)
	it := newIT(t, critest.Options{})
	rt := it.runtime(t)
	ctx := t.Context()
	live := itPod("crashy", "it-cgc-live",
		container("crash", "echo crash; exit 1"),
		container("main", "trap 'exit 0' TERM; while true; do sleep 0.1; done"))
	liveSlice := it.slice(t, live)
	forgetAtCleanup(t, rt, live)
	const restarts = 3
	// Each sync starts the crashed instance again at once (back-off is the worker's), so the
	// status a sync returns shows it running unless it exited within the sync: wait for the
	// count only; the loop below waits for the last instance to exit.
	syncUntil(t, rt, live, liveSlice, fmt.Sprintf("%d restarts of crash", restarts), func(st v1.PodStatus, err error) bool {
		if err != nil || len(st.ContainerStatuses) != 2 {
			return false
		}
		crash, main := st.ContainerStatuses[0], st.ContainerStatuses[1]
		return crash.RestartCount >= restarts && main.State.Running != nil
	})
	gone := itPod("gone", "it-cgc-gone", container("once", "echo bye; exit 0"))
	gone.Spec.RestartPolicy = v1.RestartPolicyNever
	forgetAtCleanup(t, rt, gone)
	syncUntil(t, rt, gone, it.slice(t, gone), "succeeded", succeeded)
	// The pod is deleted: the daemon killed it (its sandbox is stopped), but its containers,
	// sandbox and logs are still there for GC (the daemon stopped before forgetting it).
	if _, err := rt.KillPod(ctx, gone, time.Second); err != nil {
		t.Fatal(err)
	}
	goneLogs := filepath.Join(it.logs, "default_gone_it-cgc-gone")
	if _, err := os.Stat(filepath.Join(goneLogs, "once", "0.log")); err != nil {
		t.Fatal(err)
	}

	// No more syncs of the live pod: wait until its last crash instance has exited too.
	var before []gc.Container
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var err error
		if before, err = rt.ListContainers(ctx); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(before, func(c gc.Container) bool { return c.Name == "crash" && c.State != gc.StateExited }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("crash container still running after 10s: %+v", before)
		}
		<-tick.C
	}
	var crash []gc.Container
	var mainID, goneID string
	for _, c := range before {
		switch {
		case c.PodUID == string(live.UID) && c.Name == "crash":
			crash = append(crash, c)
		case c.PodUID == string(live.UID) && c.Name == "main":
			mainID = c.ID
		case c.PodUID == string(gone.UID):
			goneID = c.ID
		}
	}
	slices.SortFunc(crash, func(a, b gc.Container) int { return a.CreatedAt.Compare(b.CreatedAt) })
	if len(crash) < restarts+1 || mainID == "" || goneID == "" {
		t.Fatalf("containers before gc: %+v; want ≥ %d dead crash instances, main and once", before, restarts+1)
	}
	newest := crash[len(crash)-1]
	var wantRemoved []string
	for _, c := range crash[:len(crash)-1] {
		wantRemoved = append(wantRemoved, c.ID)
	}
	wantRemoved = append(wantRemoved, goneID)
	slices.Sort(wantRemoved)
	sbs, err := rt.ListSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var liveSandbox, goneSandbox string
	for _, sb := range sbs {
		switch sb.PodUID {
		case string(live.UID):
			liveSandbox = sb.ID
		case string(gone.UID):
			goneSandbox = sb.ID
		}
	}
	if len(sbs) != 2 || liveSandbox == "" || goneSandbox == "" {
		t.Fatalf("sandboxes before gc: %+v", sbs)
	}

	col, err := gc.NewCollector(gc.CollectorOptions{
		Containers: rt, Sandboxes: rt, ContainerPolicy: gc.ContainerPolicy{MaxPerPodContainer: 1, MaxContainers: -1},
		PodLogRoot: it.logs, Logger: it.log,
		PodState: func() gc.PodState {
			return gc.PodState{Known: map[string]bool{string(live.UID): true}, AllSourcesReady: true}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	planned := func(res gc.ContainerResult) []string {
		var out []string
		for _, r := range res.Remove {
			out = append(out, r.ID)
		}
		slices.Sort(out)
		return out
	}
	dry, err := col.CollectContainers(ctx, true)
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if got := planned(dry); !slices.Equal(got, wantRemoved) || len(dry.Removed) != 0 || len(dry.RemovedSandboxes) != 0 || len(dry.RemovedLogDirs) != 0 {
		t.Errorf("dry run: plan %v, removed %v %v %v; want plan %v and nothing removed", got, dry.Removed, dry.RemovedSandboxes, dry.RemovedLogDirs, wantRemoved)
	}
	if got, _ := rt.ListContainers(ctx); len(got) != len(before) {
		t.Errorf("dry run removed containers: %d left of %d", len(got), len(before))
	}

	t0 := time.Now()
	res, err := col.CollectContainers(ctx, false)
	took := time.Since(t0)
	if err != nil {
		t.Fatalf("CollectContainers: %v (%+v)", err, res)
	}
	removed := slices.Sorted(slices.Values(res.Removed))
	if !slices.Equal(planned(res), wantRemoved) || !slices.Equal(removed, wantRemoved) || len(res.Failed) != 0 {
		t.Errorf("plan %v, removed %v, failed %+v; want %v", planned(res), removed, res.Failed, wantRemoved)
	}
	for _, r := range res.Remove {
		want := gc.ReasonMaxPerPodContainer
		if r.PodUID == string(gone.UID) {
			want = gc.ReasonPodDeleted
		}
		if r.Reason != want || r.StopFirst {
			t.Errorf("removal %+v: want reason %s, no stop", r, want)
		}
	}
	if !slices.Equal(res.DeletedPods, []string{string(gone.UID)}) ||
		!slices.Equal(res.RemovedSandboxes, []string{goneSandbox}) ||
		!slices.Equal(res.RemovedLogDirs, []string{filepath.Base(goneLogs)}) {
		t.Errorf("deleted pods %v, removed sandboxes %v, log dirs %v; want %s, %s, %s",
			res.DeletedPods, res.RemovedSandboxes, res.RemovedLogDirs, gone.UID, goneSandbox, filepath.Base(goneLogs))
	}
	t.Logf("container gc: %d containers, %d sandbox, %d log dir removed in %s (reported %s)",
		len(res.Removed), len(res.RemovedSandboxes), len(res.RemovedLogDirs), took.Round(time.Millisecond), time.Duration(res.Duration).Round(time.Millisecond))

	// What the runtime and the filesystem show now.
	after, err := rt.ListContainers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, c := range after {
		left = append(left, c.ID)
	}
	slices.Sort(left)
	wantLeft := []string{newest.ID, mainID}
	slices.Sort(wantLeft)
	if !slices.Equal(left, wantLeft) {
		t.Errorf("containers after gc: %+v; want the newest crash instance %s and main %s", after, newest.ID, mainID)
	}
	if i := slices.IndexFunc(after, func(c gc.Container) bool { return c.ID == mainID }); i < 0 || after[i].State != gc.StateRunning {
		t.Errorf("main after gc: %+v; want it running", after)
	}
	if sbs, err := rt.ListSandboxes(ctx); err != nil || len(sbs) != 1 || sbs[0].ID != liveSandbox || !sbs[0].Ready {
		t.Errorf("sandboxes after gc: %+v, %v; want only the live pod's, ready", sbs, err)
	}
	if _, err := os.Stat(goneLogs); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("deleted pod's log directory %s: %v; want it removed", goneLogs, err)
	}
	// Only the kept instance's log file is left (RemoveContainer removes the others').
	logs, err := os.ReadDir(filepath.Join(it.logs, "default_crashy_it-cgc-live", "crash"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range logs {
		files = append(files, f.Name())
	}
	if want := fmt.Sprintf("%d.log", len(crash)-1); !slices.Equal(files, []string{want}) {
		t.Errorf("crash log files after gc: %v; want only %s, the newest instance's", files, want)
	}

	// The live pod still syncs: main is the same container, the restart count goes on from the
	// newest instance.
	st, err := rt.SyncPod(ctx, live, liveSlice)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.ContainerStatuses) != 2 || st.ContainerStatuses[1].ContainerID != "containerd://"+mainID || st.ContainerStatuses[0].RestartCount < int32(len(crash)-1) {
		t.Errorf("status after gc: %s; want main %s still running, crash restart count ≥ %d", runtimetest.Describe(st), mainID, len(crash)-1)
	}
}
