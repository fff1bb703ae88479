package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/pods/source"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// chaosEnv makes TestChaos run (make chaos); it is long, so make test skips it.
const chaosEnv = "SLICELET_CHAOS"

// TestChaos: SLICELET_CHAOS_KILLS (100) SIGKILLs of slicelet at random points while 100 pods
// churn (API applies and deletes, manifest files written and removed), with an API record
// truncated while slicelet is down every tenth round (its pod must keep running, held, until a
// delete resolves it). At about one round in ten a pod that writes past its ephemeral-storage
// limit is applied and evicted (pkg/kubelet/eviction's localStorageEviction) somewhere among the
// kills; after every restart and at the end each evicted pod must still be Failed/Evicted
// through the API with no running container unit (its eviction record is durable).
// Afterwards it counts, and reports, leaked units (of no wanted pod),
// duplicated units (two slices or running containers of one pod), lost API pods (applied,
// acknowledged, never deleted, and gone) and wrongly destroyed pods (wanted, or held, and not
// running); all must be 0. Applies and deletes that a kill interrupted are in doubt: either
// outcome is right, as long as units and API agree.
func TestChaos(t *testing.T) {
	if os.Getenv(chaosEnv) != "1" {
		t.Skipf("set %s=1 (make chaos) to run", chaosEnv)
	}
	kills := 100
	if n, err := strconv.Atoi(os.Getenv("SLICELET_CHAOS_KILLS")); err == nil && n > 0 {
		kills = n
	}
	// The storage loop measures every second, so a writer is evicted within a few rounds. Only
	// the memory threshold is kept (a replacing hard map): the default nodefs.* thresholds would
	// evict pods for DiskPressure in the rounds that fill the 16 MiB state tmpfs on purpose.
	d := newDaemonEnv(t, "[node]\nmax_pods = 250\n[eviction]\nmonitoring_interval = \"1s\"\n[eviction.hard]\n\"memory.available\" = \"100Mi\"")
	ctx := t.Context()
	// The state directory is a small tmpfs, so that it can be filled (a full disk).
	stateDir := filepath.Join(d.dir, "state")
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", stateDir, "tmpfs", 0, "size=16m,mode=0700"); err != nil {
		t.Fatalf("tmpfs state directory: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(stateDir, syscall.MNT_DETACH) })
	unit := "slicelet-chaos.service"
	t.Cleanup(func() { _ = d.sd.Stop(context.Background(), unit) })
	agentService(t, d.sd, unit, d.cfgPath)
	client := api.NewClient(d.sock)
	rng := rand.New(rand.NewPCG(16, 10))
	apiRng := rand.New(rand.NewPCG(16, 11)) // the churn goroutine's
	began := time.Now()

	manifest := func(name string) []byte {
		return []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n  terminationGracePeriodSeconds: 1\n" +
			"  containers:\n  - name: c\n    command: [/bin/sleep, infinity]\n")
	}
	apiPods := map[string]bool{} // acknowledged and not deleted
	doubt := map[string]bool{}   // an apply or delete a kill interrupted
	files := map[string]bool{}   // manifest files present
	held, corrupted, heldKept := 0, 0, 0
	fullRounds, fullRefused := 0, 0
	nextAPI, nextFile := 0, 0
	apiOps, fileOps := 0, 0
	writers := map[string]int{}       // writer pods applied and not evicted yet: the round applied
	evicted := map[string]string{}    // writer pods seen Failed/Evicted with no running unit: UID
	evictedKills := map[string]int{}  // kills each evicted pod went through after its eviction
	runningAgain := map[string]bool{} // evicted pods seen running, or not Failed/Evicted, later
	evictionsWaited := 0              // writers waited for (not evicted within writerRounds)
	var waitedFor time.Duration       // the time those waits took (no kills meanwhile)
	minEvictions := min(5, kills)     // writers are added in the last rounds to reach it
	// checkEvictions moves writers that were evicted (Failed/Evicted through the API, no
	// running container unit) to evicted, polling (bounded) for those applied writerRounds
	// ago or more, and counts an evicted pod that runs again or is no longer Failed/Evicted.
	checkEvictions := func(round int) {
		for name, applied := range writers {
			start := time.Now()
			deadline := start.Add(time.Minute)
			for tries := 0; ; tries++ {
				p, err := client.GetPod(ctx, "default", name)
				if err == nil && p.Status.Phase == v1.PodFailed && p.Status.Reason == "Evicted" && runningUnits(t, d.sd, string(p.UID)) == 0 {
					evicted[name] = string(p.UID)
					delete(writers, name)
					break
				}
				if round-applied < writerRounds {
					break // not due yet
				}
				if tries == 0 {
					evictionsWaited++
				}
				if time.Now().After(deadline) {
					t.Errorf("round %d: writer %s applied at round %d not evicted: %s/%s %v", round, name, applied, p.Status.Phase, p.Status.Reason, err)
					delete(writers, name)
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if round-applied >= writerRounds {
				waitedFor += time.Since(start)
			}
		}
		for name, uid := range evicted {
			p, err := client.GetPod(ctx, "default", name)
			if err != nil || p.Status.Phase != v1.PodFailed || p.Status.Reason != "Evicted" || runningUnits(t, d.sd, uid) != 0 {
				runningAgain[name] = true
				t.Errorf("round %d: evicted pod %s: %s/%s %v, running units %d", round, name, p.Status.Phase, p.Status.Reason, err, runningUnits(t, d.sd, uid))
			}
		}
	}

	for round := range kills {
		// Churn: keep about 60 API pods and 40 file pods in play.
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 3 {
				opCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
				name := ""
				if len(apiPods) < 60 || apiRng.IntN(2) == 0 {
					name = fmt.Sprintf("api-%03d", nextAPI)
					nextAPI++
					doubt[name] = true
					if _, err := client.ApplyPod(opCtx, manifest(name)); err == nil {
						delete(doubt, name)
						apiPods[name] = true
					}
				} else {
					for n := range apiPods {
						name = n
						break
					}
					doubt[name] = true
					delete(apiPods, name)
					err := client.DeletePod(opCtx, "default", name)
					var se *api.StatusError
					if err == nil || (errors.As(err, &se) && se.Code == 404) {
						delete(doubt, name)
					}
				}
				cancel()
				apiOps++
			}
		}()
		for range 2 {
			if len(files) < 40 || rng.IntN(2) == 0 {
				name := fmt.Sprintf("file-%03d", nextFile)
				nextFile++
				p := filepath.Join(d.podsDir, name+".yaml")
				if err := os.WriteFile(p+".tmp", manifest(name), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(p+".tmp", p); err != nil {
					t.Fatal(err)
				}
				files[p] = true
			} else {
				for p := range files {
					if err := os.Remove(p); err != nil {
						t.Fatal(err)
					}
					delete(files, p)
					break
				}
			}
			fileOps++
		}
		if rng.IntN(10) == 0 || kills-round <= minEvictions-len(writers)-len(evicted) {
			// A pod over its ephemeral-storage limit, applied before the kill: its eviction
			// happens at some point of the following rounds, before or after a kill, or is
			// interrupted by one.
			name := fmt.Sprintf("evict-%03d", round)
			opCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if _, err := client.ApplyPod(opCtx, writerManifest(name)); err != nil {
				t.Errorf("round %d: apply of writer %s: %v", round, name, err)
			} else {
				writers[name] = round
			}
			cancel()
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		if err := d.sd.Kill(ctx, unit, syscall.SIGKILL, units.KillMain); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		<-done
		waitInactive(t, d.sd, unit)
		var victim, victimUID string
		if round%10 == 9 && len(apiPods) > 0 {
			// Damage: truncate one acknowledged pod's record while slicelet is down. Only a pod
			// whose container runs: one applied just before the kill may not have started, and
			// a held pod is kept, not started.
			for n := range apiPods {
				record := filepath.Join(d.dir, "state", source.APIStoreDir, "default_"+n+".json")
				var stored v1.Pod
				data, err := os.ReadFile(record)
				if err != nil || json.Unmarshal(data, &stored) != nil || runningUnits(t, d.sd, string(stored.UID)) != 1 {
					continue
				}
				if err := os.WriteFile(record, data[:len(data)/2], 0o600); err != nil {
					t.Fatal(err)
				}
				victim, victimUID = n, string(stored.UID)
				corrupted++
				break
			}
		}
		var filler string
		if round%25 == 12 {
			// A full disk: applies fail with 507 and change nothing, a kill and a restart on the
			// full disk lose nothing; then the space comes back.
			filler = filepath.Join(stateDir, "filler")
			fillDisk(t, filler)
		}
		agentService(t, d.sd, unit, d.cfgPath)
		if filler != "" {
			name := fmt.Sprintf("api-full-%03d", round)
			_, err := client.ApplyPod(ctx, manifest(name))
			var se *api.StatusError
			switch {
			case errors.As(err, &se) && se.Code == 507:
				fullRefused++
			case err == nil:
				apiPods[name] = true // small enough to fit what was left
			default:
				t.Errorf("round %d: apply on a full disk: %v, want 507", round, err)
			}
			fullRounds++
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
		}
		if victim != "" {
			// Held: listed Unknown, its units still running, until a delete resolves it.
			p, err := client.GetPod(ctx, "default", victim)
			if err == nil && p.Status.Phase == v1.PodUnknown {
				held++
			}
			if runningUnits(t, d.sd, victimUID) == 1 {
				heldKept++
			}
			if err := client.DeletePod(ctx, "default", victim); err != nil {
				t.Errorf("round %d: delete of held pod %s: %v", round, victim, err)
			}
			delete(apiPods, victim)
		}
		for name := range evicted {
			evictedKills[name]++
		}
		checkEvictions(round)
	}
	for name, applied := range writers {
		writers[name] = applied - writerRounds // the end: wait for every writer
	}
	checkEvictions(kills)
	killsAfter := 0
	for _, n := range evictedKills {
		killsAfter += n
	}

	// The final state: what the API lists (API pods) and the manifest files (file pods).
	var list []v1.Pod
	deadline := time.Now().Add(2 * time.Minute)
	var lost, wrongly, leaked, duplicated int
	var report string
	for {
		var err error
		if list, err = client.ListPods(ctx); err != nil {
			t.Fatal(err)
		}
		listed := map[string]v1.Pod{}
		for _, p := range list {
			listed[p.Name] = p
		}
		want := map[string]string{}
		lost, wrongly = 0, 0
		for name := range apiPods {
			p, ok := listed[name]
			if !ok {
				lost++
				continue
			}
			want[string(p.UID)] = name
		}
		for name := range evicted {
			if _, ok := listed[name]; !ok {
				lost++ // evicted pods stay listed, Failed, until deleted
			}
		}
		for name := range doubt {
			if p, ok := listed[name]; ok {
				want[string(p.UID)] = name
			}
		}
		for f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".yaml")
			if p, ok := listed[name]; ok {
				want[string(p.UID)] = name
			} else {
				lost++ // a file pod the daemon does not know
			}
		}
		slicesBy, running := unitCounts(t, d.sd)
		leaked, duplicated = 0, 0
		for uid, n := range slicesBy {
			if _, ok := want[uid]; !ok {
				leaked += n
			} else if n > 1 {
				duplicated += n - 1
			}
		}
		for uid, n := range running {
			if _, ok := want[uid]; !ok {
				leaked += n
			} else if n > 1 {
				duplicated += n - 1
			}
		}
		for uid := range want {
			if running[uid] == 0 {
				wrongly++
			}
		}
		report = fmt.Sprintf("%d kills in %v; %d API operations (%d in doubt at the end), %d file operations, %d pods at the end (%d API, %d files); %d records truncated, %d held and listed, %d held pods kept running; %d restarts on a full state disk, %d applies refused 507; %d evictions (%d writers waited for %v, %d restarts of evicted pods), evicted pods running again %d; leaked units %d, duplicated units %d, lost API pods %d, wrongly destroyed pods %d",
			kills, time.Since(began).Round(time.Second), apiOps, len(doubt), fileOps, len(want), len(apiPods), len(files), corrupted, held, heldKept, fullRounds, fullRefused, len(evicted), evictionsWaited, waitedFor.Round(100*time.Millisecond), killsAfter, len(runningAgain), leaked, duplicated, lost, wrongly)
		if leaked+duplicated+lost+wrongly == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Log("chaos: " + report)
	if leaked+duplicated+lost+wrongly+len(runningAgain) != 0 || heldKept != corrupted || len(evicted) < minEvictions {
		t.Errorf("chaos: %s", report)
	}
}

// writerManifest is a pod that writes 512 KiB into an emptyDir, over its container's 100 KiB
// ephemeral-storage limit, and then sleeps: the eviction manager evicts it (the pod's
// ephemeral storage above its limit). The write is retried while the state disk is full.
func writerManifest(name string) []byte {
	return []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n  terminationGracePeriodSeconds: 1\n" +
		"  volumes: [{name: scratch, emptyDir: {}}]\n  containers:\n  - name: c\n" +
		"    command: [/bin/sh, -c, 'while ! head -c 524288 /dev/zero > /mnt/f; do sleep 0.2; done; exec sleep infinity']\n" +
		"    volumeMounts: [{name: scratch, mountPath: /mnt}]\n" +
		"    resources: {limits: {ephemeral-storage: 100Ki}}\n")
}

// writerRounds is how many rounds of kills a writer pod has to be evicted before the test
// waits for it with no kill.
const writerRounds = 15

// fillDisk writes path until its filesystem is full.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}

// runningUnits counts the running container units of a pod UID.
func runningUnits(t *testing.T, sd *units.Manager, uid string) int {
	t.Helper()
	if uid == "" {
		return 0
	}
	_, running := unitCounts(t, sd)
	return running[uid]
}

// unitCounts are the active pod slices and running container units, by pod UID.
func unitCounts(t *testing.T, sd *units.Manager) (slicesBy, running map[string]int) {
	t.Helper()
	slicesBy, running = map[string]int{}, map[string]int{}
	sl, err := sd.List(t.Context(), slices.PodSlicePatterns...)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range sl {
		if u.ActiveState != "active" {
			continue
		}
		if _, uid, ok := slices.ParsePodSliceName(u.Name); ok {
			slicesBy[uid]++
		}
	}
	ctrs, err := sd.List(t.Context(), "slicelet-*.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range ctrs {
		if u.ActiveState == "active" && strings.HasPrefix(u.Description, "container ") {
			rest := strings.TrimPrefix(u.Name, "slicelet-")
			running[strings.ReplaceAll(rest[:strings.Index(rest, "-")], "_", "-")]++
		}
	}
	return slicesBy, running
}
