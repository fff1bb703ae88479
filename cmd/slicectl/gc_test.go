package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slicelet/slicelet/gc"
)

// TestGC: slicectl gc asks the daemon to collect (or preview), prints what happened, and exits 1
// when the collection reported an error, so a GC timer's run shows as failed.
func TestGC(t *testing.T) {
	f := newFakeDaemon()
	failed := "Failed to garbage collect required amount of images. Attempted to free 300 bytes, but only found 100 bytes eligible to free."
	f.ImageGC = gc.ImageResult{Kind: gc.KindImages, Duration: gc.Duration(1500 * time.Millisecond), ImageFs: &gc.ImageFsInfo{ImageFs: gc.ImageFs{CapacityBytes: 1 << 30, AvailableBytes: 100 << 20}},
		UsagePercent: 91, AmountToFree: 300 << 20,
		Remove:  []gc.ImageRemoval{{ID: "sha256:big", SizeBytes: 256 << 20, Reason: gc.ReasonSpace}, {ID: "sha256:gone", SizeBytes: 8 << 20, Reason: gc.ReasonAge}},
		Removed: []string{"sha256:big"}, Failed: []gc.Failure{{ID: "sha256:gone", Op: "remove-image", Error: "image is busy"}},
		PlannedFreedBytes: 264 << 20, RemovedBytes: 256 << 20, Measured: true, FreedBytes: 250 << 20, UsagePercentAfter: 66}
	f.ContainerGC = gc.ContainerResult{Kind: gc.KindContainers, AllSourcesReady: true, DeletedPods: []string{"uid-1"},
		Remove:  []gc.ContainerRemoval{{ID: "c1", PodUID: "uid-1", Name: "app", Reason: gc.ReasonPodDeleted}},
		Removed: []string{"c1"}, RemovedLogDirs: []string{"/var/log/pods/default_web_uid-1"}}
	sock := startDaemon(t, f)
	idle := newBareDaemon()
	idle.ImageGC = gc.ImageResult{Kind: gc.KindImages, Skipped: gc.SkipNoImageFs}
	okImages := startDaemon(t, idle)
	f.ImageGC.Error = &failed

	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		out    []string
		errOut string
	}{
		{name: "images, not enough freed", args: []string{"gc", "images", "--socket", sock}, code: exitFailure, out: []string{
			"image gc (1.5s): image filesystem 91% used (100Mi of 1Gi available), 300Mi to free",
			"  removed sha256:big (256Mi, space)",
			"  failed to remove sha256:gone: image is busy",
			"  1 images removed; the image filesystem shows 250Mi freed (66% used now; 256Mi as listed)",
		}, errOut: "slicectl: images gc: Failed to garbage collect required amount of images."},
		{name: "images dry run", args: []string{"gc", "images", "--dry-run", "--socket", sock}, code: exitFailure, out: []string{
			"image gc (dry run, nothing removed): image filesystem 91% used",
			"  would remove sha256:big (256Mi, space)",
			"  would remove sha256:gone (8Mi, age)",
			"  2 images, 264Mi as listed by the runtime",
		}},
		{name: "images skipped", args: []string{"gc", "images", "--socket", okImages}, out: []string{"skipped: no image filesystem"}},
		{name: "containers", args: []string{"gc", "containers", "--socket", sock}, out: []string{
			" 1 deleted pods",
			"  removed container c1 (pod uid-1, app: pod-deleted)",
			"  removed log directory /var/log/pods/default_web_uid-1",
		}},
		{name: "containers json", args: []string{"gc", "containers", "-o", "json", "--socket", sock}, out: []string{`"removedLogDirs": [`, `"kind": "containers"`}},
		{name: "no kind", args: []string{"gc"}, code: exitUsage, errOut: "gc: what to collect: images or containers"},
		{name: "bad kind", args: []string{"gc", "volumes"}, code: exitUsage, errOut: `gc: unknown kind "volumes" (images or containers)`},
		{name: "bad output", args: []string{"gc", "images", "-o", "yaml"}, code: exitUsage, errOut: `gc: -o "yaml": only json is supported`},
		{name: "daemon down", args: []string{"gc", "images", "--socket", t.TempDir() + "/none.sock"}, code: exitDaemonDown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
			for _, w := range tc.out {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			if !strings.Contains(errOut, tc.errOut) {
				t.Errorf("stderr lacks %q:\n%s", tc.errOut, errOut)
			}
		})
	}
	if want := []string{"images run", "images dry", "containers run", "containers run"}; !reflect.DeepEqual(f.GCCalls, want) {
		t.Errorf("daemon saw %q, want %q", f.GCCalls, want)
	}
	_, out, _ := runCLI(t, "gc", "images", "-o", "json", "--socket", sock)
	var back gc.ImageResult
	if err := json.Unmarshal([]byte(out), &back); err != nil || back.FreedBytes != 250<<20 || back.Error == nil || time.Duration(back.Duration) != 1500*time.Millisecond {
		t.Errorf("-o json does not round-trip: %+v, %v\n%s", back, err, out)
	}
}
