package gc

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

// defaultPolicy is the kubelet's default image GC policy (pkg/kubelet/apis/config/v1beta1
// defaults: high 85 %, low 80 %, minimum age 2 minutes, no maximum age), which
// pkg/kubelet/images/image_gc_manager_test.go plans with too.
var defaultPolicy = ImagePolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute}

// img builds an image first detected and last used the given durations before t0 (lastUsed < 0:
// never used).
func img(id string, size int64, detectedAgo, usedAgo time.Duration) Image {
	i := Image{ID: id, SizeBytes: size, FirstDetected: t0.Add(-detectedAgo)}
	if usedAgo >= 0 {
		i.LastUsed = t0.Add(-usedAgo)
	}
	return i
}

const never = -1

func ids(rs []ImageRemoval) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func keptReasons(ks []Keep) map[string]KeepReason {
	out := map[string]KeepReason{}
	for _, k := range ks {
		out[k.ID] = k.Reason
	}
	return out
}

// TestPlanImageGC covers the kubelet's image GC rules (pkg/kubelet/images/image_gc_manager.go):
// usage above the high threshold frees down to the low one, oldest last use first; images in use
// or pinned are never deleted; an image unused for less than the minimum age is kept.
func TestPlanImageGC(t *testing.T) {
	hour := time.Hour
	started := t0.Add(-24 * hour)
	for _, tc := range []struct {
		name         string
		fs           ImageFs
		images       []Image
		containers   []Container
		sandbox      string
		policy       *ImagePolicy
		now, started time.Time // zero: t0, started

		wantUsage   int
		wantAmount  int64
		wantRemove  []string
		wantReasons []Reason // of wantRemove, when given
		wantFreed   int64
		wantKept    map[string]KeepReason // when given, exactly
		wantErr     string                // "" = nil
		wantErrIs   error
	}{
		{
			name:       "unused image detected 1 min ago, usage above high: kept for MinAge",
			fs:         ImageFs{CapacityBytes: 1000, AvailableBytes: 100},
			images:     []Image{img("a", 500, time.Minute, never)},
			wantUsage:  90,
			wantAmount: 100,
			wantKept:   map[string]KeepReason{"a": KeepTooYoung},
			wantErr:    "Failed to garbage collect required amount of images. Attempted to free 100 bytes, but only found 0 bytes eligible to free.",
		},
		{
			name:       "same image 2 min later: deleted",
			fs:         ImageFs{CapacityBytes: 1000, AvailableBytes: 100},
			images:     []Image{img("a", 500, time.Minute, never)},
			now:        t0.Add(2 * time.Minute),
			wantUsage:  90,
			wantAmount: 100,
			wantRemove: []string{"a"}, wantReasons: []Reason{ReasonSpace},
			wantFreed: 500,
		},
		{
			name:   "image used by a running container is never deleted",
			fs:     ImageFs{CapacityBytes: 1000, AvailableBytes: 0},
			images: []Image{img("used", 400, hour, hour), img("free", 300, hour, 2*hour)},
			containers: []Container{
				{ID: "c1", PodUID: "p1", Name: "web", ImageID: "used", State: StateRunning, CreatedAt: t0.Add(-hour)},
			},
			wantUsage:  100,
			wantAmount: 200,
			wantRemove: []string{"free"},
			wantFreed:  300,
			wantKept:   map[string]KeepReason{"used": KeepInUse},
		},
		{
			name:   "image used by an exited container is never deleted",
			fs:     ImageFs{CapacityBytes: 1000, AvailableBytes: 0},
			images: []Image{img("used", 400, hour, hour), img("free", 100, hour, 2*hour)},
			containers: []Container{
				{ID: "c1", PodUID: "p1", Name: "web", ImageID: "used", State: StateExited, CreatedAt: t0.Add(-hour)},
			},
			wantUsage:  100,
			wantAmount: 200,
			wantRemove: []string{"free"},
			wantFreed:  100,
			wantKept:   map[string]KeepReason{"used": KeepInUse},
			wantErr:    "Failed to garbage collect required amount of images. Attempted to free 200 bytes, but only found 100 bytes eligible to free.",
		},
		{
			name:   "container referring to the image by a repo digest",
			fs:     ImageFs{CapacityBytes: 1000, AvailableBytes: 0},
			images: []Image{{ID: "sha256:aa", Names: []string{"docker.io/library/busybox@sha256:bb"}, SizeBytes: 400, FirstDetected: t0.Add(-hour)}},
			containers: []Container{
				{ID: "c1", PodUID: "p1", Name: "web", ImageID: "docker.io/library/busybox@sha256:bb", State: StateCreated, CreatedAt: t0.Add(-hour)},
			},
			wantUsage:  100,
			wantAmount: 200,
			wantKept:   map[string]KeepReason{"sha256:aa": KeepInUse},
			wantErr:    "Failed to garbage collect required amount of images. Attempted to free 200 bytes, but only found 0 bytes eligible to free.",
		},
		{
			name:       "pinned image is never deleted",
			fs:         ImageFs{CapacityBytes: 1000, AvailableBytes: 0},
			images:     []Image{{ID: "pause", SizeBytes: 1000, FirstDetected: t0.Add(-hour), Pinned: true}},
			wantUsage:  100,
			wantAmount: 200,
			wantKept:   map[string]KeepReason{"pause": KeepPinned},
			wantErr:    "Failed to garbage collect required amount of images. Attempted to free 200 bytes, but only found 0 bytes eligible to free.",
		},
		{
			name:       "sandbox image is never deleted, matched by a name",
			fs:         ImageFs{CapacityBytes: 1000, AvailableBytes: 0},
			images:     []Image{{ID: "sha256:p", Names: []string{"registry.k8s.io/pause:3.10"}, SizeBytes: 1000, FirstDetected: t0.Add(-hour)}, img("x", 250, hour, never)},
			sandbox:    "registry.k8s.io/pause:3.10",
			wantUsage:  100,
			wantAmount: 200,
			wantRemove: []string{"x"},
			wantFreed:  250,
			wantKept:   map[string]KeepReason{"sha256:p": KeepSandboxImage},
		},
		{
			name: "least recently used first, stops once enough is freed",
			fs:   ImageFs{CapacityBytes: 1000, AvailableBytes: 100},
			images: []Image{
				img("newest", 100, 3*hour, time.Minute),
				img("oldest", 50, 3*hour, 2*hour),
				img("middle", 60, 3*hour, hour),
			},
			wantUsage:  90,
			wantAmount: 100,
			wantRemove: []string{"oldest", "middle"},
			wantFreed:  110,
			wantKept:   map[string]KeepReason{"newest": KeepEnoughFreed},
		},
		{
			name: "never-used images go first",
			fs:   ImageFs{CapacityBytes: 1000, AvailableBytes: 150},
			images: []Image{
				img("used-long-ago", 100, 3*hour, 2*hour),
				img("never-used", 100, time.Hour, never),
			},
			wantUsage:  85,
			wantAmount: 50,
			wantRemove: []string{"never-used"},
			wantFreed:  100,
		},
		{
			name: "ties on last used are broken by detection time",
			fs:   ImageFs{CapacityBytes: 1000, AvailableBytes: 150},
			images: []Image{
				img("detected-later", 100, hour, hour),
				img("detected-first", 100, 2*hour, hour),
			},
			wantUsage:  85,
			wantAmount: 50,
			wantRemove: []string{"detected-first"},
			wantFreed:  100,
			wantKept:   map[string]KeepReason{"detected-later": KeepEnoughFreed},
		},
		{
			name: "full ties are broken by ID",
			fs:   ImageFs{CapacityBytes: 1000, AvailableBytes: 150},
			images: []Image{
				img("b", 100, hour, hour),
				img("a", 100, hour, hour),
			},
			wantUsage:  85,
			wantAmount: 50,
			wantRemove: []string{"a"},
			wantFreed:  100,
		},
		{
			name:       "usage rounds up: 84.9% is 85%, exactly the high threshold",
			fs:         ImageFs{CapacityBytes: 1000, AvailableBytes: 151},
			images:     []Image{img("a", 49, hour, never), img("b", 10, 2*hour, hour)},
			wantUsage:  85,
			wantAmount: 49,
			wantRemove: []string{"a"},
			wantFreed:  49,
		},
		{
			name:       "below the high threshold nothing is removed",
			fs:         ImageFs{CapacityBytes: 1000, AvailableBytes: 160},
			images:     []Image{img("a", 500, hour, never)},
			wantUsage:  84,
			wantKept:   map[string]KeepReason{"a": KeepBelowThreshold},
			wantAmount: 0,
		},
		{
			name:      "available above capacity is clamped",
			fs:        ImageFs{CapacityBytes: 1000, AvailableBytes: 5000},
			images:    []Image{img("a", 500, hour, never)},
			wantUsage: 0,
			wantKept:  map[string]KeepReason{"a": KeepBelowThreshold},
		},
		{
			name:      "capacity 0 is the kubelet's error",
			fs:        ImageFs{CapacityBytes: 0, AvailableBytes: 0},
			images:    []Image{img("a", 500, hour, never)},
			wantKept:  map[string]KeepReason{"a": KeepFsError},
			wantErr:   "invalid capacity 0 on image filesystem",
			wantErrIs: ErrInvalidCapacity,
		},
		{
			name:     "capacity 0 with image GC off (high 100, no max age): no error",
			fs:       ImageFs{},
			images:   []Image{img("a", 500, hour, never)},
			policy:   &ImagePolicy{HighThresholdPercent: 100, LowThresholdPercent: 80, MinAge: 2 * time.Minute},
			wantKept: map[string]KeepReason{"a": KeepSpaceGCDisabled},
		},
		{
			name:      "high threshold 100 turns space-based GC off, even at 100% usage",
			fs:        ImageFs{CapacityBytes: 1000, AvailableBytes: 0},
			images:    []Image{img("a", 500, hour, never)},
			policy:    &ImagePolicy{HighThresholdPercent: 100, LowThresholdPercent: 80, MinAge: 2 * time.Minute},
			wantUsage: 100,
			wantKept:  map[string]KeepReason{"a": KeepSpaceGCDisabled},
		},
		{
			name:       "amountToFree 0 still removes the first eligible image, as the kubelet",
			fs:         ImageFs{CapacityBytes: 100, AvailableBytes: 20},
			images:     []Image{img("a", 5, hour, never), img("b", 5, hour, hour)},
			policy:     &ImagePolicy{HighThresholdPercent: 80, LowThresholdPercent: 80, MinAge: 2 * time.Minute},
			wantUsage:  80,
			wantAmount: 0,
			wantRemove: []string{"a"},
			wantFreed:  5,
			wantKept:   map[string]KeepReason{"b": KeepEnoughFreed},
		},
		{
			name:       "an image last used at the planning time is skipped",
			fs:         ImageFs{CapacityBytes: 1000, AvailableBytes: 0},
			images:     []Image{img("now", 500, hour, 0), img("old", 100, hour, hour)},
			wantUsage:  100,
			wantAmount: 200,
			wantRemove: []string{"old"},
			wantFreed:  100,
			wantKept:   map[string]KeepReason{"now": KeepRecentlyUsed},
			wantErr:    "Failed to garbage collect required amount of images. Attempted to free 200 bytes, but only found 100 bytes eligible to free.",
		},
		{
			name: "max age removes images unused for longer, MinAge not checked, never-used included",
			fs:   ImageFs{CapacityBytes: 1000, AvailableBytes: 900},
			images: []Image{
				img("stale", 10, 3*hour, 90*time.Minute),
				img("fresh", 10, 3*hour, 30*time.Minute),
				img("never", 10, time.Minute, never),
			},
			policy:     &ImagePolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute, MaxAge: hour},
			wantUsage:  8, // 900 + 20 freed by age = 920 available
			wantRemove: []string{"never", "stale"}, wantReasons: []Reason{ReasonAge, ReasonAge},
			wantFreed: 20,
			wantKept:  map[string]KeepReason{"fresh": KeepBelowThreshold},
		},
		{
			name:      "max age: nothing in the first MaxAge after start",
			fs:        ImageFs{CapacityBytes: 1000, AvailableBytes: 900},
			images:    []Image{img("stale", 10, 3*hour, 90*time.Minute)},
			policy:    &ImagePolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute, MaxAge: hour},
			started:   t0.Add(-hour), // uptime == MaxAge: not yet
			wantUsage: 10,
			wantKept:  map[string]KeepReason{"stale": KeepBelowThreshold},
		},
		{
			name: "max age removals are credited before the space pass",
			fs:   ImageFs{CapacityBytes: 1000, AvailableBytes: 100},
			images: []Image{
				img("stale", 150, 3*hour, 2*hour),
				img("fresh", 500, 3*hour, time.Minute),
			},
			policy:     &ImagePolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute, MaxAge: hour},
			wantUsage:  75,
			wantRemove: []string{"stale"}, wantReasons: []Reason{ReasonAge},
			wantFreed: 150,
			wantKept:  map[string]KeepReason{"fresh": KeepBelowThreshold},
		},
		{
			name: "age then space, in that order",
			fs:   ImageFs{CapacityBytes: 1000, AvailableBytes: 0},
			images: []Image{
				img("stale", 100, 3*hour, 2*hour),
				img("fresh", 500, 3*hour, time.Minute),
			},
			policy:     &ImagePolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute, MaxAge: hour},
			wantUsage:  90,
			wantAmount: 100,
			wantRemove: []string{"stale", "fresh"}, wantReasons: []Reason{ReasonAge, ReasonSpace},
			wantFreed: 600,
		},
		{
			name:       "a 4 EiB filesystem does not overflow",
			fs:         ImageFs{CapacityBytes: 1 << 62, AvailableBytes: 1 << 58},
			images:     []Image{img("huge", 1<<61, hour, never)},
			wantUsage:  94, // 100 − int(6.25)
			wantAmount: (1<<62)/5 - 1<<58,
			wantRemove: []string{"huge"},
			wantFreed:  1 << 61,
		},
		{
			name:      "negative image size is garbage, not a panic",
			fs:        ImageFs{CapacityBytes: 1000, AvailableBytes: 0},
			images:    []Image{img("bad", -5, hour, never)},
			wantErr:   `invalid gc input: image "bad": size -5 must not be negative`,
			wantErrIs: ErrInvalidInput,
		},
		{
			name:      "negative capacity",
			fs:        ImageFs{CapacityBytes: -1, AvailableBytes: 0},
			wantErr:   "invalid gc input: image filesystem capacity -1: must not be negative",
			wantErrIs: ErrInvalidInput,
		},
		{
			name:      "negative available",
			fs:        ImageFs{CapacityBytes: 10, AvailableBytes: -1},
			wantErr:   "invalid gc input: image filesystem available bytes -1: must not be negative",
			wantErrIs: ErrInvalidInput,
		},
		{
			name:      "duplicate image ID",
			fs:        ImageFs{CapacityBytes: 10},
			images:    []Image{img("a", 1, hour, never), img("a", 1, hour, never)},
			wantErr:   `invalid gc input: image "a": listed twice`,
			wantErrIs: ErrInvalidInput,
		},
		{
			name:      "empty image ID",
			fs:        ImageFs{CapacityBytes: 10},
			images:    []Image{img("", 1, hour, never)},
			wantErr:   "invalid gc input: image 0: empty ID",
			wantErrIs: ErrInvalidInput,
		},
		{
			name:      "invalid policy refuses to plan",
			fs:        ImageFs{CapacityBytes: 10},
			images:    []Image{img("a", 1, hour, never)},
			policy:    &ImagePolicy{HighThresholdPercent: 80, LowThresholdPercent: 90},
			wantErr:   "invalid gc input: image gc policy: LowThresholdPercent 90 can not be higher than HighThresholdPercent 80",
			wantErrIs: ErrInvalidInput,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policy := defaultPolicy
			if tc.policy != nil {
				policy = *tc.policy
			}
			now, st := t0, started
			if !tc.now.IsZero() {
				now = tc.now
			}
			if !tc.started.IsZero() {
				st = tc.started
			}
			in := slices.Clone(tc.images)
			p := PlanImageGC(tc.fs, tc.images, tc.containers, tc.sandbox, policy, now, st)
			if !slices.EqualFunc(in, tc.images, func(a, b Image) bool { return a.ID == b.ID && a.SizeBytes == b.SizeBytes }) {
				t.Errorf("PlanImageGC modified its input")
			}
			checkErr(t, p.Err, tc.wantErr, tc.wantErrIs)
			if p.UsagePercent != tc.wantUsage {
				t.Errorf("UsagePercent = %d, want %d", p.UsagePercent, tc.wantUsage)
			}
			if p.AmountToFree != tc.wantAmount {
				t.Errorf("AmountToFree = %d, want %d", p.AmountToFree, tc.wantAmount)
			}
			if got := ids(p.Remove); !slices.Equal(got, tc.wantRemove) && len(got)+len(tc.wantRemove) > 0 {
				t.Errorf("Remove = %v, want %v", got, tc.wantRemove)
			}
			for i, r := range tc.wantReasons {
				if i < len(p.Remove) && p.Remove[i].Reason != r {
					t.Errorf("Remove[%d].Reason = %s, want %s", i, p.Remove[i].Reason, r)
				}
			}
			if p.FreedBytes != tc.wantFreed {
				t.Errorf("FreedBytes = %d, want %d", p.FreedBytes, tc.wantFreed)
			}
			if tc.wantKept != nil && !maps.Equal(keptReasons(p.Kept), tc.wantKept) {
				t.Errorf("Kept = %v, want %v", keptReasons(p.Kept), tc.wantKept)
			}
			if p.Err == nil || !errors.Is(p.Err, ErrInvalidInput) {
				// Every image is either removed or kept, exactly once.
				if n := len(p.Remove) + len(p.Kept); n != len(tc.images) {
					t.Errorf("removed %d + kept %d != %d images", len(p.Remove), len(p.Kept), len(tc.images))
				}
			}
		})
	}
}

func checkErr(t *testing.T, err error, want string, is error) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("Err = %v, want nil", err)
	case want != "" && (err == nil || err.Error() != want):
		t.Errorf("Err = %v, want %q", err, want)
	}
	if is != nil && !errors.Is(err, is) {
		t.Errorf("Err = %v, want errors.Is %v", err, is)
	}
}

func TestFreeSpaceErrorIsTyped(t *testing.T) {
	p := PlanImageGC(ImageFs{CapacityBytes: 1000}, nil, nil, "", defaultPolicy, t0, t0)
	var fe *FreeSpaceError
	if !errors.As(p.Err, &fe) || fe.AmountToFree != 200 || fe.Eligible != 0 {
		t.Fatalf("Err = %#v, want *FreeSpaceError{200, 0}", p.Err)
	}
}

func TestPlanDeleteUnusedImages(t *testing.T) {
	hour := time.Hour
	for _, tc := range []struct {
		name       string
		images     []Image
		containers []Container
		want       []string
		wantKept   map[string]KeepReason
	}{
		{
			name: "disk 10% used, 1 in use, 2 unused and old: both unused deleted",
			images: []Image{
				img("in-use", 100, 3*hour, hour),
				img("old1", 100, 3*hour, 2*hour),
				img("old2", 200, 3*hour, never),
			},
			containers: []Container{{ID: "c", PodUID: "p", Name: "n", ImageID: "in-use", State: StateRunning}},
			want:       []string{"old2", "old1"},
			wantKept:   map[string]KeepReason{"in-use": KeepInUse},
		},
		{
			name: "image of an exited container survives DeleteUnusedImages",
			images: []Image{
				img("used", 100, 3*hour, hour),
			},
			containers: []Container{{ID: "c", PodUID: "p", Name: "n", ImageID: "used", State: StateExited}},
			wantKept:   map[string]KeepReason{"used": KeepInUse},
		},
		{
			name: "MinAge, pinned and recently used still apply",
			images: []Image{
				img("young", 100, time.Minute, never),
				{ID: "pinned", SizeBytes: 5, FirstDetected: t0.Add(-hour), Pinned: true},
				img("just-used", 100, hour, 0),
				img("old", 100, hour, never),
			},
			want:     []string{"old"},
			wantKept: map[string]KeepReason{"young": KeepTooYoung, "pinned": KeepPinned, "just-used": KeepRecentlyUsed},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := PlanDeleteUnusedImages(tc.images, tc.containers, "", defaultPolicy, t0)
			if p.Err != nil {
				t.Fatal(p.Err)
			}
			if got := ids(p.Remove); !slices.Equal(got, tc.want) && len(got)+len(tc.want) > 0 {
				t.Errorf("Remove = %v, want %v", got, tc.want)
			}
			if !maps.Equal(keptReasons(p.Kept), tc.wantKept) && len(p.Kept)+len(tc.wantKept) > 0 {
				t.Errorf("Kept = %v, want %v", keptReasons(p.Kept), tc.wantKept)
			}
		})
	}
}

func TestImagePolicyValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy ImagePolicy
		want   string
	}{
		{"high above 100 is refused", ImagePolicy{HighThresholdPercent: 101, LowThresholdPercent: 80}, "invalid HighThresholdPercent 101, must be in range [0-100]"},
		{"low below 0 is refused", ImagePolicy{HighThresholdPercent: 85, LowThresholdPercent: -1}, "invalid LowThresholdPercent -1, must be in range [0-100]"},
		{"low above high is refused", ImagePolicy{HighThresholdPercent: 80, LowThresholdPercent: 90}, "LowThresholdPercent 90 can not be higher than HighThresholdPercent 80"},
		{"low 80 high 85 is valid", ImagePolicy{HighThresholdPercent: 85, LowThresholdPercent: 80}, ""},
		{"defaults", defaultPolicy, ""},
		{"negative min age", ImagePolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: -time.Second}, "minimum age -1s must not be negative"},
		{"negative max age", ImagePolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MaxAge: -time.Second}, "maximum age -1s must not be negative"},
		{"max age not above min age", ImagePolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: time.Hour, MaxAge: time.Minute}, "maximum age 1m0s must be greater than minimum age 1h0m0s (or 0 to disable)"},
		{"every problem at once", ImagePolicy{HighThresholdPercent: -1, LowThresholdPercent: 101, MinAge: -1}, "invalid HighThresholdPercent -1, must be in range [0-100]\ninvalid LowThresholdPercent 101, must be in range [0-100]\nminimum age -1ns must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.policy.Validate()
			if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestDetect(t *testing.T) {
	records := map[string]Record{
		"kept":   {FirstDetected: t0.Add(-time.Hour), LastUsed: t0.Add(-30 * time.Minute), SizeBytes: 1},
		"gone":   {FirstDetected: t0.Add(-time.Hour)},
		"in-use": {FirstDetected: t0.Add(-2 * time.Hour)},
	}
	before := maps.Clone(records)
	listed := []ListedImage{
		{ID: "kept", SizeBytes: 10},
		{ID: "in-use", Names: []string{"nginx:1"}, SizeBytes: 20, Pinned: true},
		{ID: "new", SizeBytes: 30},
		{ID: "new", SizeBytes: 99}, // listed twice: the first entry wins
	}
	next, images := Detect(records, listed, map[string]bool{"nginx:1": true}, t0)
	want := map[string]Record{
		"kept":   {FirstDetected: t0.Add(-time.Hour), LastUsed: t0.Add(-30 * time.Minute), SizeBytes: 10},
		"in-use": {FirstDetected: t0.Add(-2 * time.Hour), LastUsed: t0, SizeBytes: 20, Pinned: true},
		"new":    {FirstDetected: t0, SizeBytes: 30},
	}
	if !maps.Equal(next, want) {
		t.Errorf("records = %v\nwant %v", next, want)
	}
	if !maps.Equal(records, before) {
		t.Errorf("Detect modified its input records")
	}
	if len(images) != 3 || images[0].ID != "kept" || images[1].LastUsed != t0 || images[2].FirstDetected != t0 || images[2].SizeBytes != 30 || images[1].Names[0] != "nginx:1" {
		t.Errorf("images = %+v", images)
	}
}

// TestDetectThenPlanMinAge: an unused image is kept until MinAge after it was first detected,
// through the records the daemon keeps: detected at t0−1m, kept at t0 (MinAge 2m), deleted
// once the clock has moved 2 minutes on.
func TestDetectThenPlanMinAge(t *testing.T) {
	fs := ImageFs{CapacityBytes: 1000, AvailableBytes: 100}
	listed := []ListedImage{{ID: "a", SizeBytes: 500}}
	recs, _ := Detect(nil, listed, nil, t0.Add(-time.Minute))
	recs, images := Detect(recs, listed, nil, t0)
	if p := PlanImageGC(fs, images, nil, "", defaultPolicy, t0, t0.Add(-time.Hour)); len(p.Remove) != 0 {
		t.Fatalf("at t0: Remove = %v, want none", p.Remove)
	}
	later := t0.Add(2 * time.Minute)
	_, images = Detect(recs, listed, nil, later)
	p := PlanImageGC(fs, images, nil, "", defaultPolicy, later, t0.Add(-time.Hour))
	if got := ids(p.Remove); !slices.Equal(got, []string{"a"}) || p.Err != nil {
		t.Fatalf("at t0+2m: Remove = %v, Err = %v; want [a], nil", got, p.Err)
	}
}

func TestMulDiv(t *testing.T) {
	for _, tc := range []struct{ a, b, c, want int64 }{
		{151, 100, 1000, 15},
		{math.MaxInt64, 100, math.MaxInt64, 100},
		{math.MaxInt64, 20, 100, math.MaxInt64 / 5},
		{0, 100, 1, 0},
		{1, 100, 3, 33},
	} {
		if got := mulDiv(tc.a, tc.b, tc.c); got != tc.want {
			t.Errorf("mulDiv(%d, %d, %d) = %d, want %d", tc.a, tc.b, tc.c, got, tc.want)
		}
	}
}

func BenchmarkPlanImageGC10000(b *testing.B) {
	images := make([]Image, 10000)
	var total int64
	for i := range images {
		images[i] = Image{
			ID:            fmt.Sprintf("sha256:%064d", i),
			SizeBytes:     int64(1+i%97) << 20,
			FirstDetected: t0.Add(-time.Duration(i%500) * time.Hour),
			LastUsed:      t0.Add(-time.Duration((i*7919)%10000) * time.Minute),
			Pinned:        i%1000 == 0,
		}
		total += images[i].SizeBytes
	}
	containers := make([]Container, 1000)
	for i := range containers {
		containers[i] = Container{ID: fmt.Sprint("c", i), PodUID: fmt.Sprint("p", i/3), Name: "app", ImageID: images[i*10+1].ID, State: StateExited, CreatedAt: t0.Add(-time.Hour)}
	}
	// Usage 95%: the space pass walks most of the list.
	fs := ImageFs{CapacityBytes: total, AvailableBytes: total / 20}
	b.ReportAllocs()
	for b.Loop() {
		p := PlanImageGC(fs, images, containers, "", defaultPolicy, t0, t0.Add(-time.Hour))
		if len(p.Remove) == 0 {
			b.Fatal("nothing removed")
		}
	}
}

func TestNormalizeImageRef(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"short name with tag", "pause:3.9", "docker.io/library/pause:3.9"},
		{"short name without tag", "busybox", "docker.io/library/busybox:latest"},
		{"docker hub user", "someone/app:1", "docker.io/someone/app:1"},
		{"registry host", "registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"},
		{"registry with port, no tag", "localhost:5000/app", "localhost:5000/app:latest"},
		{"registry with port and tag", "reg:5000/team/app:2", "reg:5000/team/app:2"},
		{"localhost", "localhost/app:1", "localhost/app:1"},
		{"digest", "busybox@sha256:" + strings.Repeat("ab", 32), "docker.io/library/busybox@sha256:" + strings.Repeat("ab", 32)},
		{"image id", "sha256:abc", "sha256:abc"},
		{"test domain", "slicelet.test/pause:1", "slicelet.test/pause:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NormalizeImageRef(tc.in); got != tc.want {
				t.Errorf("NormalizeImageRef(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestIsImage(t *testing.T) {
	names := []string{"docker.io/library/pause:3.9", "docker.io/library/pause@sha256:feed"}
	for _, tc := range []struct {
		name, ref string
		want      bool
	}{
		{"by id", "sha256:1111", true},
		{"short tag", "pause:3.9", true},
		{"full tag", "docker.io/library/pause:3.9", true},
		{"other tag", "pause:3.10", false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsImage("sha256:1111", names, tc.ref); got != tc.want {
				t.Errorf("IsImage(%q) = %v, want %v", tc.ref, got, tc.want)
			}
		})
	}
}
