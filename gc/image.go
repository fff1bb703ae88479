package gc

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/distribution/reference"
)

// ImageFs is the image filesystem as the runtime reports it (CRI ImageFsInfo, or statfs of the
// runtime's image store).
type ImageFs struct {
	// CapacityBytes is the filesystem's size.
	CapacityBytes int64 `json:"capacityBytes"`
	// AvailableBytes is what unprivileged writers may still use.
	AvailableBytes int64 `json:"availableBytes"`
}

// Image is one image with what image GC remembers about it (the kubelet's imageRecord).
type Image struct {
	// ID is the runtime's image ID (for containerd, the config digest "sha256:…").
	ID string
	// Names are the image's other references (repo tags, repo digests). Optional: they only
	// widen the in-use and sandbox-image matches, because a runtime may report a container's
	// image by a reference instead of the ID.
	Names []string
	// SizeBytes is the image's size as the runtime lists it.
	SizeBytes int64
	// FirstDetected is when image GC first saw the image.
	FirstDetected time.Time
	// LastUsed is the last time a container used the image; zero means never.
	LastUsed time.Time
	// Pinned is the runtime's pinned flag (CRI Image.pinned), set e.g. for the pause image.
	Pinned bool
}

// Container states, as CRI names them, in lower case.
const (
	// StateRunning is CONTAINER_RUNNING.
	StateRunning = "running"
	// StateExited is CONTAINER_EXITED.
	StateExited = "exited"
	// StateCreated is CONTAINER_CREATED.
	StateCreated = "created"
	// StateUnknown is CONTAINER_UNKNOWN: it may still run, so it is stopped before removal.
	StateUnknown = "unknown"
)

// Container is one container the runtime knows, running or dead.
type Container struct {
	// ID is the runtime's container ID.
	ID string
	// PodUID is the UID of the pod the container belongs to.
	PodUID string
	// Name is the container's name in its pod.
	Name string
	// ImageID is the image the container was created from (CRI ImageRef).
	ImageID string
	// SandboxID is the pod sandbox the container lives in (CRI runtime only; empty otherwise).
	SandboxID string
	// State is one of StateRunning, StateExited, StateCreated, StateUnknown.
	State string
	// CreatedAt is when the container was created; container GC ages from creation, not exit.
	CreatedAt time.Time
}

// ImagePolicy is the kubelet's ImageGCPolicy.
type ImagePolicy struct {
	// HighThresholdPercent is the image filesystem usage at or above which space-based GC runs;
	// 100 turns space-based GC off.
	HighThresholdPercent int
	// LowThresholdPercent is the usage space-based GC frees down to.
	LowThresholdPercent int
	// MinAge is the minimum time since an image was first detected before space-based GC may
	// remove it.
	MinAge time.Duration
	// MaxAge removes images unused for longer than this, whatever the usage; 0 disables it.
	MaxAge time.Duration
}

// PolicyProblem is one problem of a policy: the field (the Go field name, e.g.
// "LowThresholdPercent") and the message.
type PolicyProblem struct {
	Field   string
	Message string
}

// Problems reports every problem of the policy, with the kubelet's messages for the thresholds
// (NewImageGCManager) and slicelet's for the ages. config attributes them to its keys.
func (p ImagePolicy) Problems() []PolicyProblem {
	var out []PolicyProblem
	bad := func(field, format string, args ...any) {
		out = append(out, PolicyProblem{field, fmt.Sprintf(format, args...)})
	}
	highOK := p.HighThresholdPercent >= 0 && p.HighThresholdPercent <= 100
	lowOK := p.LowThresholdPercent >= 0 && p.LowThresholdPercent <= 100
	if !highOK {
		bad("HighThresholdPercent", "invalid HighThresholdPercent %d, must be in range [0-100]", p.HighThresholdPercent)
	}
	if !lowOK {
		bad("LowThresholdPercent", "invalid LowThresholdPercent %d, must be in range [0-100]", p.LowThresholdPercent)
	}
	if highOK && lowOK && p.LowThresholdPercent > p.HighThresholdPercent {
		bad("LowThresholdPercent", "LowThresholdPercent %d can not be higher than HighThresholdPercent %d", p.LowThresholdPercent, p.HighThresholdPercent)
	}
	if p.MinAge < 0 {
		bad("MinAge", "minimum age %v must not be negative", p.MinAge)
	}
	if p.MaxAge < 0 {
		bad("MaxAge", "maximum age %v must not be negative", p.MaxAge)
	}
	if p.MaxAge > 0 && p.MinAge >= 0 && p.MaxAge <= p.MinAge {
		bad("MaxAge", "maximum age %v must be greater than minimum age %v (or 0 to disable)", p.MaxAge, p.MinAge)
	}
	return out
}

// Validate joins the policy's Problems into one error (nil when there are none).
func (p ImagePolicy) Validate() error {
	var errs []error
	for _, pr := range p.Problems() {
		errs = append(errs, errors.New(pr.Message))
	}
	return errors.Join(errs...)
}

// Reason says why a plan removes something. The image reasons are the kubelet's
// image_garbage_collected_total metric labels.
type Reason string

// Why images are removed.
const (
	// ReasonAge: unused for longer than MaxAge.
	ReasonAge Reason = "age"
	// ReasonSpace: removed to bring image filesystem usage down to the low threshold (or, for
	// PlanDeleteUnusedImages, to reclaim everything unused).
	ReasonSpace Reason = "space"
)

// KeepReason says why an image stays.
type KeepReason string

// Why images stay.
const (
	// KeepInUse: a container (running or exited, not yet removed) uses the image.
	KeepInUse KeepReason = "in-use"
	// KeepPinned: the runtime pinned the image.
	KeepPinned KeepReason = "pinned"
	// KeepSandboxImage: the image is the configured pod sandbox (pause) image.
	KeepSandboxImage KeepReason = "sandbox-image"
	// KeepTooYoung: first detected less than MinAge ago.
	KeepTooYoung KeepReason = "too-young"
	// KeepRecentlyUsed: last used at or after the planning time.
	KeepRecentlyUsed KeepReason = "recently-used"
	// KeepBelowThreshold: usage is below the high threshold, so space-based GC does not run.
	KeepBelowThreshold KeepReason = "below-high-threshold"
	// KeepEnoughFreed: space-based GC had freed enough before reaching the image.
	KeepEnoughFreed KeepReason = "enough-freed"
	// KeepSpaceGCDisabled: the high threshold is 100.
	KeepSpaceGCDisabled KeepReason = "space-gc-disabled"
	// KeepFsError: the image filesystem numbers are unusable (capacity 0).
	KeepFsError KeepReason = "image-fs-error"
)

// ImageRemoval is one image a plan removes.
type ImageRemoval struct {
	// ID is the image to remove.
	ID string `json:"id"`
	// SizeBytes is what removing it frees, as listed.
	SizeBytes int64 `json:"sizeBytes"`
	// Reason is ReasonAge or ReasonSpace.
	Reason Reason `json:"reason"`
}

// Keep is one image a plan keeps, and why.
type Keep struct {
	// ID is the image.
	ID string `json:"id"`
	// Reason is why it stays.
	Reason KeepReason `json:"reason"`
	// Detail names what holds it, e.g. the container using it; may be empty.
	Detail string `json:"detail"`
}

// ImagePlan is the outcome of planning image GC.
type ImagePlan struct {
	// UsagePercent is the kubelet's usage: 100 − available*100/capacity, integer division (so it
	// rounds usage up), after the age-based removals are credited as freed.
	UsagePercent int
	// AmountToFree is capacity*(100−low)/100 − available when usage ≥ the high threshold, else 0.
	AmountToFree int64
	// Remove lists the images to remove, in deletion order: age-based first, then space-based,
	// each least recently used first.
	Remove []ImageRemoval
	// FreedBytes is the sum of the sizes in Remove.
	FreedBytes int64
	// Kept lists every other image with its reason, in input order.
	Kept []Keep
	// Err is nil, ErrInvalidCapacity, a *FreeSpaceError (not enough eligible), or an error
	// wrapping ErrInvalidInput (bad policy or garbage from the runtime; then nothing is removed).
	Err error
}

// ErrInvalidCapacity is the kubelet's error for an image filesystem of capacity 0.
var ErrInvalidCapacity = errors.New("invalid capacity 0 on image filesystem")

// ErrInvalidInput marks a plan refused because its input is garbage: an invalid policy,
// negative sizes or capacity, empty or duplicate IDs, unknown states.
var ErrInvalidInput = errors.New("invalid gc input")

// FreeSpaceError is the kubelet's FreeDiskSpaceFailed error: space-based GC could not find
// enough eligible images.
type FreeSpaceError struct {
	// AmountToFree is what was needed.
	AmountToFree int64
	// Eligible is what could be freed.
	Eligible int64
}

// Error returns the kubelet's message, word for word (hence the capital and the full stop).
func (e *FreeSpaceError) Error() string {
	return fmt.Sprintf("Failed to garbage collect required amount of images. Attempted to free %d bytes, but only found %d bytes eligible to free.", e.AmountToFree, e.Eligible)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidInput, fmt.Sprintf(format, args...))
}

// PlanImageGC plans one image GC run exactly as the kubelet's GarbageCollect
// (pkg/kubelet/images/image_gc_manager.go):
//
//  1. candidates are the images no container uses (running or exited), not pinned and not the
//     sandbox image, least recently used first, ties by first detection (then by ID);
//  2. if MaxAge > 0 and now−started > MaxAge, every candidate unused for longer than MaxAge is
//     removed (reason "age"; MinAge does not apply);
//  3. the image filesystem is read — here: fs, with the age-based removals credited as freed,
//     as a fresh reading after step 2 would show — available is clamped to capacity, capacity
//     0 is ErrInvalidCapacity;
//  4. if usage ≥ the high threshold (and the threshold is not 100), candidates used before now
//     and first detected at least MinAge ago are removed until AmountToFree is reached (reason
//     "space"); falling short is a *FreeSpaceError.
//
// started is when slicelet started (the kubelet's beganGC). The function does no I/O and does
// not modify its arguments.
func PlanImageGC(fs ImageFs, images []Image, containers []Container, sandboxImage string, policy ImagePolicy, now, started time.Time) ImagePlan {
	var p ImagePlan
	if err := policy.Validate(); err != nil {
		p.Err = fmt.Errorf("%w: image gc policy: %w", ErrInvalidInput, err)
		return p
	}
	if fs.CapacityBytes < 0 {
		p.Err = invalid("image filesystem capacity %d: must not be negative", fs.CapacityBytes)
		return p
	}
	if fs.AvailableBytes < 0 {
		p.Err = invalid("image filesystem available bytes %d: must not be negative", fs.AvailableBytes)
		return p
	}
	cands, keep, err := evictionOrder(images, containers, sandboxImage)
	if err != nil {
		p.Err = err
		return p
	}

	// Step 2: age.
	if policy.MaxAge > 0 && now.Sub(started) > policy.MaxAge {
		rest := make([]*Image, 0, len(cands))
		for _, img := range cands {
			if now.Sub(img.LastUsed) > policy.MaxAge {
				p.remove(img, ReasonAge)
				continue
			}
			rest = append(rest, img)
		}
		cands = rest
	}
	ageFreed := p.FreedBytes

	// Step 3: the filesystem.
	capacity := fs.CapacityBytes
	available := addSat(fs.AvailableBytes, ageFreed)
	if available > capacity {
		available = capacity
	}
	if capacity == 0 {
		if policy.HighThresholdPercent >= 100 && policy.MaxAge == 0 {
			// Image GC is off altogether (the kubelet does not even start it), so there is
			// nothing to report about the filesystem.
			keepAll(keep, cands, KeepSpaceGCDisabled, "")
			p.Kept = keptInOrder(images, keep)
			return p
		}
		p.Err = ErrInvalidCapacity
		keepAll(keep, cands, KeepFsError, "")
		p.Kept = keptInOrder(images, keep)
		return p
	}
	p.UsagePercent = 100 - int(mulDiv(available, 100, capacity))

	// Step 4: space.
	switch {
	case policy.HighThresholdPercent >= 100:
		// The kubelet stubs image GC out when high is 100 (and MaxAge 0); with MaxAge set it
		// would still free space once the disk is completely full. slicelet's contract is
		// simpler: 100 means no space-based removal at all.
		keepAll(keep, cands, KeepSpaceGCDisabled, "")
	case p.UsagePercent < policy.HighThresholdPercent:
		keepAll(keep, cands, KeepBelowThreshold, fmt.Sprintf("usage %d%% < high threshold %d%%", p.UsagePercent, policy.HighThresholdPercent))
	default:
		p.AmountToFree = mulDiv(capacity, int64(100-policy.LowThresholdPercent), 100) - available
		freed := p.freeSpace(cands, p.AmountToFree, policy.MinAge, now, keep)
		if freed < p.AmountToFree {
			p.Err = &FreeSpaceError{AmountToFree: p.AmountToFree, Eligible: freed}
		}
	}
	p.Kept = keptInOrder(images, keep)
	return p
}

// PlanDeleteUnusedImages plans the kubelet's DeleteUnusedImages (eviction's image reclaim):
// every candidate image — unused, unpinned, not the sandbox image — used before now and first
// detected at least MinAge ago, whatever the thresholds. UsagePercent and AmountToFree stay 0.
func PlanDeleteUnusedImages(images []Image, containers []Container, sandboxImage string, policy ImagePolicy, now time.Time) ImagePlan {
	var p ImagePlan
	if err := policy.Validate(); err != nil {
		p.Err = fmt.Errorf("%w: image gc policy: %w", ErrInvalidInput, err)
		return p
	}
	cands, keep, err := evictionOrder(images, containers, sandboxImage)
	if err != nil {
		p.Err = err
		return p
	}
	p.freeSpace(cands, math.MaxInt64, policy.MinAge, now, keep)
	p.Kept = keptInOrder(images, keep)
	return p
}

// freeSpace is the kubelet's freeSpace: walk the candidates in order, skip the recently used and
// the too young, remove the rest until bytesToFree is reached. Like the kubelet, it removes the
// first eligible image even when bytesToFree ≤ 0, and checks only after each removal.
func (p *ImagePlan) freeSpace(cands []*Image, bytesToFree int64, minAge time.Duration, now time.Time, keep map[string]Keep) int64 {
	var freed int64
	done := false
	for _, img := range cands {
		switch {
		case done:
			keep[img.ID] = Keep{ID: img.ID, Reason: KeepEnoughFreed}
		case !img.LastUsed.Before(now):
			keep[img.ID] = Keep{ID: img.ID, Reason: KeepRecentlyUsed, Detail: "last used " + img.LastUsed.UTC().Format(time.RFC3339)}
		case now.Sub(img.FirstDetected) < minAge:
			keep[img.ID] = Keep{ID: img.ID, Reason: KeepTooYoung, Detail: fmt.Sprintf("first detected %v ago, minimum age %v", now.Sub(img.FirstDetected), minAge)}
		default:
			p.remove(img, ReasonSpace)
			freed = addSat(freed, img.SizeBytes)
			done = freed >= bytesToFree
		}
	}
	return freed
}

func (p *ImagePlan) remove(img *Image, r Reason) {
	p.Remove = append(p.Remove, ImageRemoval{ID: img.ID, SizeBytes: img.SizeBytes, Reason: r})
	p.FreedBytes = addSat(p.FreedBytes, img.SizeBytes)
}

// evictionOrder checks the images and returns the candidates in the kubelet's eviction order
// (byLastUsedAndDetected, then ID so that the order is total) and the reasons of the others.
func evictionOrder(images []Image, containers []Container, sandboxImage string) ([]*Image, map[string]Keep, error) {
	users := make(map[string]string, len(containers)) // image reference → a container using it
	for i := range containers {
		c := &containers[i]
		if c.ImageID == "" {
			continue
		}
		if _, ok := users[c.ImageID]; !ok {
			users[c.ImageID] = fmt.Sprintf("container %s (%s, pod %s)", c.ID, c.Name, c.PodUID)
		}
	}
	keep := make(map[string]Keep, len(images))
	seen := make(map[string]bool, len(images))
	cands := make([]*Image, 0, len(images))
	for i := range images {
		img := &images[i]
		switch {
		case img.ID == "":
			return nil, nil, invalid("image %d: empty ID", i)
		case seen[img.ID]:
			return nil, nil, invalid("image %q: listed twice", img.ID)
		case img.SizeBytes < 0:
			return nil, nil, invalid("image %q: size %d must not be negative", img.ID, img.SizeBytes)
		}
		seen[img.ID] = true
		if by, ok := imageUser(img, users); ok {
			keep[img.ID] = Keep{ID: img.ID, Reason: KeepInUse, Detail: by}
			continue
		}
		if img.Pinned {
			keep[img.ID] = Keep{ID: img.ID, Reason: KeepPinned}
			continue
		}
		if IsImage(img.ID, img.Names, sandboxImage) {
			keep[img.ID] = Keep{ID: img.ID, Reason: KeepSandboxImage, Detail: sandboxImage}
			continue
		}
		cands = append(cands, img)
	}
	slices.SortFunc(cands, func(a, b *Image) int {
		if c := a.LastUsed.Compare(b.LastUsed); c != 0 {
			return c
		}
		if c := a.FirstDetected.Compare(b.FirstDetected); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return cands, keep, nil
}

// imageUser reports whether a container uses img, by ID or by any of its names, and which.
func imageUser(img *Image, users map[string]string) (string, bool) {
	if by, ok := users[img.ID]; ok {
		return by, true
	}
	for _, n := range img.Names {
		if by, ok := users[n]; ok {
			return by, true
		}
	}
	return "", false
}

func keepAll(keep map[string]Keep, imgs []*Image, r KeepReason, detail string) {
	for _, img := range imgs {
		keep[img.ID] = Keep{ID: img.ID, Reason: r, Detail: detail}
	}
}

func keptInOrder(images []Image, keep map[string]Keep) []Keep {
	out := make([]Keep, 0, len(keep))
	for i := range images {
		if k, ok := keep[images[i].ID]; ok {
			out = append(out, k)
		}
	}
	return out
}

// IsImage reports whether ref names the image with id and names (its repo tags and digests):
// the ID itself, or a name equal to ref once both are normalized the way container runtimes
// name images ("pause:3.9" is "docker.io/library/pause:3.9", a reference without a tag or
// digest has ":latest"). An empty ref names nothing.
func IsImage(id string, names []string, ref string) bool {
	if ref == "" {
		return false
	}
	if id == ref {
		return true
	}
	want := NormalizeImageRef(ref)
	return slices.ContainsFunc(names, func(n string) bool { return NormalizeImageRef(n) == want })
}

// NormalizeImageRef returns ref in its fully qualified form, as container runtimes name images
// (github.com/distribution/reference): "pause:3.9" is "docker.io/library/pause:3.9", and a
// reference with neither tag nor digest gets ":latest". An image ID ("sha256:…") or a string that
// is not a reference is returned as it is.
func NormalizeImageRef(ref string) string {
	if ref == "" || strings.HasPrefix(ref, "sha256:") {
		return ref
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return ref
	}
	return reference.TagNameOnly(named).String()
}

// mulDiv returns a*b/c for non-negative a, b and positive c with a*b/c < 2^63, without the
// intermediate overflow of int64 (a 10 PB filesystem times 100 does not fit).
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q)
}

// addSat adds non-negative b to a, stopping at MaxInt64 instead of wrapping.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// ImagesInUse returns the image references the containers use (any state: the kubelet counts
// exited containers that are not yet removed).
func ImagesInUse(containers []Container) map[string]bool {
	out := make(map[string]bool, len(containers))
	for _, c := range containers {
		if c.ImageID != "" {
			out[c.ImageID] = true
		}
	}
	return out
}

// Record is what image GC remembers about one image between runs, persisted by the daemon so
// first-detected and last-used survive restarts.
type Record struct {
	// FirstDetected is when the image was first listed.
	FirstDetected time.Time `json:"firstDetected"`
	// LastUsed is the last detection at which a container used the image; zero means never.
	LastUsed time.Time `json:"lastUsed"`
	// SizeBytes is the size at the last detection.
	SizeBytes int64 `json:"sizeBytes"`
	// Pinned is the runtime's pinned flag at the last detection.
	Pinned bool `json:"pinned"`
}

// ListedImage is one image as the runtime lists it.
type ListedImage struct {
	// ID is the image ID.
	ID string
	// Names are its repo tags and digests.
	Names []string
	// SizeBytes is its size.
	SizeBytes int64
	// Pinned is the runtime's pinned flag.
	Pinned bool
}

// Detect is the kubelet's detectImages without I/O: a new image gets FirstDetected = now, an
// image in use (inUse holds container image references, matched against the ID and the names)
// gets LastUsed = now, size and pinned are refreshed, and images no longer listed are forgotten.
// It returns the new records (records is not modified) and the listed images with their
// records, ready for PlanImageGC.
func Detect(records map[string]Record, listed []ListedImage, inUse map[string]bool, now time.Time) (map[string]Record, []Image) {
	next := make(map[string]Record, len(listed))
	images := make([]Image, 0, len(listed))
	for _, l := range listed {
		if _, dup := next[l.ID]; dup {
			continue // a runtime listing an image twice: the first entry wins
		}
		r, ok := records[l.ID]
		if !ok {
			r = Record{FirstDetected: now}
		}
		if inUse[l.ID] || slices.ContainsFunc(l.Names, func(n string) bool { return inUse[n] }) {
			r.LastUsed = now
		}
		r.SizeBytes = l.SizeBytes
		r.Pinned = l.Pinned
		next[l.ID] = r
		images = append(images, Image{ID: l.ID, Names: l.Names, SizeBytes: r.SizeBytes, FirstDetected: r.FirstDetected, LastUsed: r.LastUsed, Pinned: r.Pinned})
	}
	return next, images
}
