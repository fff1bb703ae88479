package gc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Image IDs of imageScenario, named so that ID order is not eviction order.
const (
	imgOld    = "sha256:c-old"   // never used, first detected 3h ago
	imgMid    = "sha256:a-mid"   // last used 1h ago
	imgNew    = "sha256:b-new"   // last used 30m ago
	imgUsed   = "sha256:d-used"  // an exited container uses it
	imgPause  = "sha256:e-pause" // the sandbox image, by name
	imgPinned = "sha256:f-pinned"
	pauseRef  = "registry.k8s.io/pause:3.9"
)

// imageScenario is a 1000 MiB image filesystem with 100 MiB available: usage 90 %, so with
// the default policy (85/80) the kubelet frees 100 MiB.
func imageScenario() *fakeRuntime {
	f := newFake()
	f.fs = ImageFsInfo{ImageFs: ImageFs{CapacityBytes: mib(1000), AvailableBytes: mib(100)}, UsedBytes: mib(900)}
	f.images = []ListedImage{
		{ID: imgMid, SizeBytes: mib(50)},
		{ID: imgNew, SizeBytes: mib(70)},
		{ID: imgOld, SizeBytes: mib(60)},
		{ID: imgUsed, SizeBytes: mib(200)},
		{ID: imgPause, Names: []string{pauseRef}, SizeBytes: mib(1)},
		{ID: imgPinned, SizeBytes: mib(30), Pinned: true},
	}
	f.containers = []Container{{ID: "c1", PodUID: "p1", Name: "app", ImageID: imgUsed, State: StateExited, CreatedAt: time.Now().Add(-time.Hour)}}
	return f
}

// writeScenarioRecords writes the records imageScenario's times come from.
func writeScenarioRecords(t *testing.T, path string) {
	t.Helper()
	now := time.Now()
	recs := map[string]Record{
		imgOld: {FirstDetected: now.Add(-3 * time.Hour)},
		imgMid: {FirstDetected: now.Add(-2 * time.Hour), LastUsed: now.Add(-time.Hour)},
		imgNew: {FirstDetected: now.Add(-2 * time.Hour), LastUsed: now.Add(-30 * time.Minute)},
	}
	if err := saveRecords(path, recs); err != nil {
		t.Fatal(err)
	}
}

func newTestCollector(t *testing.T, f *fakeRuntime, mod func(*CollectorOptions)) *Collector {
	t.Helper()
	opts := CollectorOptions{
		Images: f, Containers: f, Sandboxes: f, ImagePolicy: defaultPolicy,
		ContainerPolicy: ContainerPolicy{MaxPerPodContainer: 1, MaxContainers: -1},
		SandboxImage:    pauseRef,
		RecordsPath:     filepath.Join(t.TempDir(), "gc-images.json"),
		Started:         time.Now().Add(-24 * time.Hour),
	}
	if mod != nil {
		mod(&opts)
	}
	if opts.RecordsPath != "" {
		writeScenarioRecords(t, opts.RecordsPath)
	}
	c, err := NewCollector(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func removes(ids ...string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, "RemoveImage "+id)
	}
	return out
}

func TestCollectImages(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(*fakeRuntime)
		opts   func(*CollectorOptions)
		unused bool // DeleteUnusedImages instead of CollectImages

		wantCalls   []string // mutating runtime calls, in order
		wantRemoved []string
		wantFailed  []string
		wantFreed   int64 // measured
		wantUsage   int
		wantAmount  int64
		wantSkipped string
		wantErr     string // substring; "" = no error
		wantErrIs   error
	}{
		{
			name:        "least recently used first down to the low threshold",
			wantCalls:   removes(imgOld, imgMid),
			wantRemoved: []string{imgOld, imgMid},
			wantFreed:   mib(110), wantUsage: 90, wantAmount: mib(100),
		},
		{
			name:        "not enough eligible: the kubelet's message after removing what it can",
			setup:       func(f *fakeRuntime) { f.fs.AvailableBytes = 0 },
			wantCalls:   removes(imgOld, imgMid, imgNew),
			wantRemoved: []string{imgOld, imgMid, imgNew},
			wantFreed:   mib(180), wantUsage: 100, wantAmount: mib(200),
			wantErr: "Failed to garbage collect required amount of images. Attempted to free 209715200 bytes, but only found 188743680 bytes eligible to free.",
		},
		{
			name:        "a failed removal is skipped and the next eligible image tried",
			setup:       func(f *fakeRuntime) { f.fail["RemoveImage "+imgOld] = errors.New("image is busy") },
			wantCalls:   removes(imgOld, imgMid, imgNew),
			wantRemoved: []string{imgMid, imgNew},
			wantFailed:  []string{imgOld},
			wantFreed:   mib(120), wantUsage: 90, wantAmount: mib(100),
			wantErr: "image sha256:c-old: remove: image is busy",
		},
		{
			name:      "capacity 0",
			setup:     func(f *fakeRuntime) { f.fs.CapacityBytes, f.fs.AvailableBytes = 0, 0 },
			wantErr:   "invalid capacity 0 on image filesystem",
			wantErrIs: ErrInvalidCapacity,
		},
		{
			name:      "below the high threshold nothing goes",
			setup:     func(f *fakeRuntime) { f.fs.AvailableBytes = mib(500) },
			wantUsage: 50,
		},
		{
			name:        "space freed on disk short of the plan (shared layers)",
			setup:       func(f *fakeRuntime) { f.freeRatio = 0.5 },
			wantCalls:   removes(imgOld, imgMid),
			wantRemoved: []string{imgOld, imgMid},
			wantFreed:   mib(55), wantUsage: 90, wantAmount: mib(100),
			wantErr: "the image filesystem shows only 57671680 bytes freed (usage 85%, low threshold 80%)",
		},
		{
			name:      "negative image size from the runtime",
			setup:     func(f *fakeRuntime) { f.images = append(f.images, ListedImage{ID: "sha256:bad", SizeBytes: -5}) },
			wantErr:   `image "sha256:bad": size -5 must not be negative`,
			wantErrIs: ErrInvalidInput,
		},
		{
			name:      "negative used bytes from the runtime",
			setup:     func(f *fakeRuntime) { f.fs.UsedBytes = -1 },
			wantErr:   "image filesystem used bytes -1: must not be negative",
			wantErrIs: ErrInvalidInput,
		},
		{
			name:    "container list fails: nothing removed",
			setup:   func(f *fakeRuntime) { f.err["ListContainers"] = errors.New("runtime down") },
			wantErr: "image gc: container list: runtime down",
		},
		{
			name:  "maximum age removes what was unused too long, below the threshold too",
			setup: func(f *fakeRuntime) { f.fs.AvailableBytes = mib(500) },
			opts: func(o *CollectorOptions) {
				o.ImagePolicy.MaxAge = 50 * time.Minute
			},
			wantCalls:   removes(imgOld, imgMid),
			wantRemoved: []string{imgOld, imgMid},
			wantFreed:   mib(110), wantUsage: 39,
		},
		{
			name:        "high threshold 100 turns image gc off",
			opts:        func(o *CollectorOptions) { o.ImagePolicy.HighThresholdPercent = 100 },
			wantSkipped: SkipImageGCDisabled,
		},
		{
			name:        "no image runtime",
			opts:        func(o *CollectorOptions) { o.Images = nil },
			wantSkipped: SkipNoImageFs,
		},
		{
			name:        "eviction reclaim removes every eligible image whatever the thresholds",
			setup:       func(f *fakeRuntime) { f.fs.AvailableBytes = mib(500) },
			unused:      true,
			wantCalls:   removes(imgOld, imgMid, imgNew),
			wantRemoved: []string{imgOld, imgMid, imgNew},
			wantFreed:   mib(180),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := imageScenario()
				if tc.setup != nil {
					tc.setup(f)
				}
				c := newTestCollector(t, f, tc.opts)
				var res ImageResult
				var err error
				if tc.unused {
					res, err = c.DeleteUnusedImages(t.Context())
				} else {
					res, err = c.CollectImages(t.Context(), false)
				}
				switch {
				case tc.wantErr == "" && err != nil:
					t.Fatalf("error %v", err)
				case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				case tc.wantErrIs != nil && !errors.Is(err, tc.wantErrIs):
					t.Fatalf("error %v, want one wrapping %v", err, tc.wantErrIs)
				}
				if (res.Error == nil) != (err == nil) || err != nil && *res.Error != err.Error() {
					t.Errorf("result error %v, returned %v", res.Error, err)
				}
				if got := f.mutations(); !slices.Equal(got, tc.wantCalls) {
					t.Errorf("runtime calls %q, want %q", got, tc.wantCalls)
				}
				if !slices.Equal(res.Removed, nonNil(tc.wantRemoved)) {
					t.Errorf("removed %q, want %q", res.Removed, tc.wantRemoved)
				}
				var failed []string
				for _, fl := range res.Failed {
					failed = append(failed, fl.ID)
				}
				if !slices.Equal(failed, tc.wantFailed) {
					t.Errorf("failed %q, want %q", failed, tc.wantFailed)
				}
				for _, k := range res.Kept {
					if slices.Contains(res.Removed, k.ID) {
						t.Errorf("%s both removed and kept (%s)", k.ID, k.Reason)
					}
				}
				if res.Skipped != tc.wantSkipped {
					t.Errorf("skipped %q, want %q", res.Skipped, tc.wantSkipped)
				}
				if res.UsagePercent != tc.wantUsage || res.AmountToFree != tc.wantAmount {
					t.Errorf("usage %d%%, amount %d; want %d%%, %d", res.UsagePercent, res.AmountToFree, tc.wantUsage, tc.wantAmount)
				}
				if len(tc.wantRemoved) > 0 && (!res.Measured || res.FreedBytes != tc.wantFreed) {
					t.Errorf("measured %v, freed %d (%q); want measured, %d", res.Measured, res.FreedBytes, res.MeasureError, tc.wantFreed)
				}
				if len(tc.wantRemoved) == 0 && (res.Measured || res.FreedBytes != 0) {
					t.Errorf("measured %v, freed %d with nothing removed", res.Measured, res.FreedBytes)
				}
				// Removed images are forgotten, in memory and on disk.
				recs := c.Records()
				for _, id := range res.Removed {
					if _, ok := recs[id]; ok {
						t.Errorf("record of removed %s kept", id)
					}
				}
				if c.opts.RecordsPath != "" && tc.wantSkipped == "" && tc.wantErrIs == nil && err == nil {
					onDisk, _, lerr := loadRecords(c.opts.RecordsPath)
					if lerr != nil || len(onDisk) != len(recs) {
						t.Errorf("records on disk %d (%v), in memory %d", len(onDisk), lerr, len(recs))
					}
				}
			})
		})
	}
}

func TestCollectImagesDryRunChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := imageScenario()
		c := newTestCollector(t, f, nil)
		before, err := os.ReadFile(c.opts.RecordsPath)
		if err != nil {
			t.Fatal(err)
		}
		recs := c.Records()
		time.Sleep(time.Minute) // synctest's clock: a later detection would change last-used times
		res, err := c.CollectImages(t.Context(), true)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(res.Remove); !slices.Equal(got, []string{imgOld, imgMid}) {
			t.Errorf("planned %q", got)
		}
		if len(res.Removed) != 0 || res.Measured || !res.DryRun || res.PlannedFreedBytes != mib(110) {
			t.Errorf("dry run result %+v", res)
		}
		if m := f.mutations(); len(m) != 0 {
			t.Errorf("dry run called %q", m)
		}
		after, err := os.ReadFile(c.opts.RecordsPath)
		if err != nil || !bytes.Equal(before, after) {
			t.Errorf("records file changed by a dry run (%v)", err)
		}
		if got := c.Records(); len(got) != len(recs) {
			t.Errorf("records changed by a dry run: %d, want %d", len(got), len(recs))
		}
	})
}

// TestCollectImagesWaitsForFreshNumbers: containerd's image fs numbers lag the deletions; the
// collector must not report the stale reading as "nothing freed".
func TestCollectImagesWaitsForFreshNumbers(t *testing.T) {
	for _, tc := range []struct {
		name         string
		staleFor     time.Duration
		wantMeasured bool
		wantWait     time.Duration // minimum
		wantMsg      string
	}{
		{name: "numbers refresh after 3s", staleFor: 3 * time.Second, wantMeasured: true, wantWait: 3 * time.Second},
		{name: "numbers never refresh: timeout reported", staleFor: time.Hour, wantMsg: "image filesystem numbers not refreshed within 10s of the last deletion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := imageScenario()
				f.staleFor = tc.staleFor
				c := newTestCollector(t, f, nil)
				start := time.Now()
				res, err := c.CollectImages(t.Context(), false)
				if err != nil {
					t.Fatalf("error %v (a timeout is reported in the result, not as an error)", err)
				}
				if res.Measured != tc.wantMeasured || !strings.Contains(res.MeasureError, tc.wantMsg) {
					t.Fatalf("measured %v, measure error %q; want %v, %q", res.Measured, res.MeasureError, tc.wantMeasured, tc.wantMsg)
				}
				if tc.wantMeasured {
					if res.FreedBytes != mib(110) || time.Duration(res.MeasureWait) < tc.wantWait {
						t.Errorf("freed %d after %v, want %d after ≥%v", res.FreedBytes, time.Duration(res.MeasureWait), mib(110), tc.wantWait)
					}
					if res.ImageFsAfter == nil || !res.ImageFsAfter.Timestamp.After(start) || res.UsagePercentAfter != 79 {
						t.Errorf("after %+v, usage %d%%", res.ImageFsAfter, res.UsagePercentAfter)
					}
				} else {
					if res.FreedBytes != 0 {
						t.Errorf("freed %d reported from stale numbers", res.FreedBytes)
					}
					if d := time.Since(start); d < DefaultFreshnessTimeout || d > DefaultFreshnessTimeout+time.Second {
						t.Errorf("gave up after %v, want about %v", d, DefaultFreshnessTimeout)
					}
				}
			})
		})
	}
}

func TestCollectImagesCancelDuringWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := imageScenario()
		f.staleFor = time.Hour
		c := newTestCollector(t, f, nil)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		res, _ := c.CollectImages(ctx, false)
		if res.Measured || !strings.Contains(res.MeasureError, "context deadline exceeded") {
			t.Errorf("measured %v, %q", res.Measured, res.MeasureError)
		}
	})
}

func TestRecordsSurviveANewCollector(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := imageScenario()
		path := filepath.Join(t.TempDir(), "state", "gc-images.json")
		opts := CollectorOptions{Images: f, Containers: f, ImagePolicy: defaultPolicy, RecordsPath: path}
		c1, err := NewCollector(opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := c1.Detect(t.Context()); err != nil {
			t.Fatal(err)
		}
		first := c1.Records()
		time.Sleep(10 * time.Minute)
		c2, err := NewCollector(opts)
		if err != nil {
			t.Fatal(err)
		}
		got := c2.Records()
		if len(got) != len(f.images) {
			t.Fatalf("%d records after restart, want %d", len(got), len(f.images))
		}
		for id, r := range first {
			g := got[id]
			if !g.FirstDetected.Equal(r.FirstDetected) || !g.LastUsed.Equal(r.LastUsed) || g.SizeBytes != r.SizeBytes || g.Pinned != r.Pinned {
				t.Errorf("%s: %+v after restart, want %+v", id, g, r)
			}
		}
		if !got[imgUsed].LastUsed.Equal(first[imgUsed].FirstDetected) || !got[imgOld].LastUsed.IsZero() {
			t.Errorf("last used: in-use %v, unused %v", got[imgUsed].LastUsed, got[imgOld].LastUsed)
		}
		// A detection by the new collector keeps first-detected and moves last-used.
		if err := c2.Detect(t.Context()); err != nil {
			t.Fatal(err)
		}
		again := c2.Records()
		if !again[imgOld].FirstDetected.Equal(first[imgOld].FirstDetected) || !again[imgUsed].LastUsed.Equal(time.Now()) {
			t.Errorf("after a second detection: %+v", again)
		}
	})
}

func TestCorruptRecordsFile(t *testing.T) {
	for _, tc := range []struct {
		name, content, wantMsg string
	}{
		{"not json", "{\"version\":1,\"images\":{", "unexpected end of JSON input"},
		{"wrong version", `{"version":7,"images":{}}`, "version 7, want 1"},
		{"empty image ID", `{"version":1,"images":{"":{}}}`, "an image with an empty ID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := imageScenario()
			path := filepath.Join(t.TempDir(), "gc-images.json")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			c, err := NewCollector(CollectorOptions{Images: f, Containers: f, ImagePolicy: defaultPolicy, RecordsPath: path, Logger: slogText(&logs)})
			if err != nil {
				t.Fatalf("a corrupt records file must not stop the collector: %v", err)
			}
			rerr := c.RecordsError()
			if rerr == nil || !strings.Contains(rerr.Error(), path) || !strings.Contains(rerr.Error(), tc.wantMsg) || !strings.Contains(rerr.Error(), "moved to "+path+".corrupt") {
				t.Fatalf("records error %v, want one naming %s and %q", rerr, path, tc.wantMsg)
			}
			if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), path) {
				t.Errorf("no warning naming the file: %s", logs.String())
			}
			if kept, err := os.ReadFile(path + ".corrupt"); err != nil || string(kept) != tc.content {
				t.Errorf("corrupt file not kept aside: %q, %v", kept, err)
			}
			if len(c.Records()) != 0 {
				t.Errorf("records %v, want none", c.Records())
			}
			if err := c.Detect(t.Context()); err != nil {
				t.Fatal(err)
			}
			if recs, corrupt, err := loadRecords(path); err != nil || corrupt || len(recs) != len(f.images) {
				t.Errorf("fresh records file: %d records, %v", len(recs), err)
			}
		})
	}
}

func TestUnreadableRecordsFileIsAnError(t *testing.T) {
	f := imageScenario()
	path := t.TempDir() // a directory: reading it fails, which is not corruption
	_, err := NewCollector(CollectorOptions{Images: f, Containers: f, ImagePolicy: defaultPolicy, RecordsPath: path})
	if err == nil || !strings.Contains(err.Error(), "image gc records "+path) {
		t.Fatalf("error %v, want one naming %s", err, path)
	}
}

func TestNewCollectorRejectsBadOptions(t *testing.T) {
	f := newFake()
	for _, tc := range []struct {
		name string
		opts CollectorOptions
		want string
	}{
		{"no container runtime", CollectorOptions{Images: f}, "gc collector: no container runtime"},
		{"low above high", CollectorOptions{Containers: f, ImagePolicy: ImagePolicy{HighThresholdPercent: 50, LowThresholdPercent: 60}}, "LowThresholdPercent 60 can not be higher than HighThresholdPercent 50"},
		{"negative container min age", CollectorOptions{Containers: f, ImagePolicy: defaultPolicy, ContainerPolicy: ContainerPolicy{MinAge: -time.Second}}, "container gc policy: minimum age -1s must not be negative"},
		{"relative log root", CollectorOptions{Containers: f, ImagePolicy: defaultPolicy, PodLogRoot: "var/log/pods"}, `pod log root "var/log/pods": must be an absolute path`},
		{"relative records path", CollectorOptions{Containers: f, ImagePolicy: defaultPolicy, RecordsPath: "gc.json"}, `image gc records path "gc.json": must be an absolute path`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewCollector(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestImageResultJSON(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := imageScenario()
		c := newTestCollector(t, f, nil)
		res, err := c.CollectImages(t.Context(), true)
		if err != nil {
			t.Fatal(err)
		}
		m, data := jsonObject(t, res)
		want := []string{"kind", "dryRun", "startedAt", "duration", "skipped", "imageFs", "usagePercent", "amountToFree",
			"remove", "kept", "removed", "failed", "plannedFreedBytes", "removedBytes", "measured", "freedBytes",
			"imageFsAfter", "usagePercentAfter", "measureWait", "measureError", "error"}
		for _, k := range want {
			if _, ok := m[k]; !ok {
				t.Errorf("key %q missing in %s", k, data)
			}
		}
		if len(m) != len(want) {
			t.Errorf("%d keys, want %d: %s", len(m), len(want), data)
		}
		if m["error"] != nil || m["removed"] == nil || m["kind"] != KindImages {
			t.Errorf("error %v, removed %v, kind %v", m["error"], m["removed"], m["kind"])
		}
		fs := m["imageFs"].(map[string]any)
		for _, k := range []string{"capacityBytes", "availableBytes", "usedBytes", "timestamp"} {
			if _, ok := fs[k]; !ok {
				t.Errorf("imageFs lacks %q: %v", k, fs)
			}
		}
		rm := m["remove"].([]any)[0].(map[string]any)
		if rm["id"] != imgOld || rm["reason"] != "space" {
			t.Errorf("remove[0] = %v", rm)
		}
		var back ImageResult
		if err := json.Unmarshal(data, &back); err != nil || back.Duration != res.Duration {
			t.Errorf("round trip: %v, duration %v want %v", err, back.Duration, res.Duration)
		}
	})
}
