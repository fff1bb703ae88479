// Package eviction holds the kubelet's node-pressure eviction model: signals,
// thresholds and (later) the eviction manager. This file is the threshold
// model and its parser, kept exactly as the kubelet's
// pkg/kubelet/eviction/helpers.go (ParseThresholdConfig) behaves,
// except that every problem is reported, not only the first.
package eviction

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Signal names a resource observation that can trigger eviction.
type Signal string

// The eviction signals the kubelet knows (pkg/kubelet/eviction/api/types.go).
const (
	// SignalMemoryAvailable is machine memory capacity minus the root cgroup's working set.
	SignalMemoryAvailable Signal = "memory.available"
	// SignalAllocatableMemoryAvailable is the kubepods cgroup's memory limit minus its working
	// set. Its thresholds are synthesised from memory.available when "pods" is enforced.
	SignalAllocatableMemoryAvailable Signal = "allocatableMemory.available"
	// SignalNodeFsAvailable is free space on the filesystem holding the state directory.
	SignalNodeFsAvailable Signal = "nodefs.available"
	// SignalNodeFsInodesFree is free inodes on the filesystem holding the state directory.
	SignalNodeFsInodesFree Signal = "nodefs.inodesFree"
	// SignalImageFsAvailable is free space on the runtime's image filesystem.
	SignalImageFsAvailable Signal = "imagefs.available"
	// SignalImageFsInodesFree is free inodes on the runtime's image filesystem.
	SignalImageFsInodesFree Signal = "imagefs.inodesFree"
	// SignalContainerFsAvailable is free space on the runtime's writable-layer filesystem.
	SignalContainerFsAvailable Signal = "containerfs.available"
	// SignalContainerFsInodesFree is free inodes on the runtime's writable-layer filesystem.
	SignalContainerFsInodesFree Signal = "containerfs.inodesFree"
	// SignalPIDAvailable is min(pid_max, threads-max) minus the number of tasks.
	SignalPIDAvailable Signal = "pid.available"
)

// signals lists every valid signal, in the kubelet's documentation order.
var signals = []Signal{
	SignalMemoryAvailable,
	SignalAllocatableMemoryAvailable,
	SignalNodeFsAvailable,
	SignalNodeFsInodesFree,
	SignalImageFsAvailable,
	SignalImageFsInodesFree,
	SignalContainerFsAvailable,
	SignalContainerFsInodesFree,
	SignalPIDAvailable,
}

// Signals returns every valid eviction signal.
func Signals() []Signal { return slices.Clone(signals) }

// ValidSignal reports whether s is a signal the kubelet accepts in its threshold maps.
// Like the kubelet (validSignal: present in signalToResource), this includes
// allocatableMemory.available.
func ValidSignal(s Signal) bool { return slices.Contains(signals, s) }

// ThresholdOperator compares an observation with a threshold.
type ThresholdOperator string

// OpLessThan is the only operator: a threshold is met when available < threshold.
const OpLessThan ThresholdOperator = "LessThan"

// ThresholdValue is either an absolute quantity or a fraction of capacity.
// Quantity wins when it is set.
type ThresholdValue struct {
	// Quantity is an absolute amount (bytes, inodes or PIDs).
	Quantity *resource.Quantity
	// Percentage is a fraction of capacity in (0, 1]. It is a float32 on purpose: the
	// kubelet parses with 32-bit precision, and boundary behaviour depends on it.
	Percentage float32
}

// Threshold is one eviction threshold.
type Threshold struct {
	// Signal is the observation the threshold applies to.
	Signal Signal
	// Operator is always OpLessThan.
	Operator ThresholdOperator
	// Value is the threshold itself.
	Value ThresholdValue
	// GracePeriod is how long the threshold must be met before eviction; 0 means hard.
	GracePeriod time.Duration
	// MinReclaim is the extra amount to reclaim beyond the threshold, or nil.
	MinReclaim *ThresholdValue
}

// IsHard reports whether t is a hard threshold (the kubelet's isHardEvictionThreshold:
// a zero grace period). A soft threshold with grace 0s therefore behaves as hard.
func (t Threshold) IsHard() bool { return t.GracePeriod == 0 }

// Setting names the configuration map a threshold statement came from.
type Setting string

// The four eviction settings ParseThresholdConfig reads.
const (
	SettingHard            Setting = "hard"
	SettingSoft            Setting = "soft"
	SettingSoftGracePeriod Setting = "soft_grace_period"
	SettingMinimumReclaim  Setting = "minimum_reclaim"
)

// ErrUnsupportedSignal is wrapped by every error about a signal name the kubelet does not know.
var ErrUnsupportedSignal = errors.New("unsupported eviction signal")

// ThresholdError is one problem with one statement of one eviction setting.
// ParseThresholdConfig joins them with errors.Join; callers that want to place
// each one (config validation) can unwrap the join and errors.As each element.
type ThresholdError struct {
	// Setting is the map the statement came from.
	Setting Setting
	// Signal is the statement's key, as written.
	Signal string
	// Value is the statement's value, as written.
	Value string
	// Err says what is wrong; its text names the signal and the value.
	Err error
}

// Error implements error.
func (e *ThresholdError) Error() string {
	return fmt.Sprintf("eviction %s: %v", e.Setting, e.Err)
}

// Unwrap returns the underlying error.
func (e *ThresholdError) Unwrap() error { return e.Err }

// ParseThresholdConfig turns the kubelet's four eviction maps into thresholds:
// hard, then soft (each in signal order), then, when allocatableConfig contains
// "pods", an allocatableMemory.available copy of every hard memory.available
// threshold. "0%" and "100%" disable a threshold. Every soft threshold needs a
// grace period. A minimum reclaim applies to every threshold of its signal.
//
// Unlike the kubelet, which stops at the first problem, it returns every problem
// joined (each a *ThresholdError) and no thresholds when there is any.
func ParseThresholdConfig(allocatableConfig []string, hard, soft, softGrace, minReclaim map[string]string) ([]Threshold, error) {
	var errs []error
	fail := func(setting Setting, signal, value string, err error) {
		errs = append(errs, &ThresholdError{Setting: setting, Signal: signal, Value: value, Err: err})
	}

	parseStatements := func(setting Setting, statements map[string]string) []Threshold {
		var out []Threshold
		for _, signal := range slices.Sorted(maps.Keys(statements)) {
			val := statements[signal]
			t, err := parseThresholdStatement(Signal(signal), val)
			if err != nil {
				fail(setting, signal, val, err)
				continue
			}
			if t != nil {
				out = append(out, *t)
			}
		}
		return out
	}
	hardThresholds := parseStatements(SettingHard, hard)
	softThresholds := parseStatements(SettingSoft, soft)

	gracePeriods := map[Signal]time.Duration{}
	for _, signal := range slices.Sorted(maps.Keys(softGrace)) {
		val := softGrace[signal]
		d, err := parseGracePeriod(Signal(signal), val)
		if err != nil {
			fail(SettingSoftGracePeriod, signal, val, err)
			continue
		}
		gracePeriods[Signal(signal)] = d
	}
	badGrace := func(s Signal) bool {
		_, given := softGrace[string(s)]
		return given
	}

	minReclaims := map[Signal]ThresholdValue{}
	for _, signal := range slices.Sorted(maps.Keys(minReclaim)) {
		val := minReclaim[signal]
		v, err := parseMinimumReclaim(Signal(signal), val)
		if err != nil {
			fail(SettingMinimumReclaim, signal, val, err)
			continue
		}
		minReclaims[Signal(signal)] = v
	}

	for i := range softThresholds {
		s := softThresholds[i].Signal
		period, ok := gracePeriods[s]
		if !ok {
			if !badGrace(s) { // an unparsable grace period was already reported
				fail(SettingSoft, string(s), soft[string(s)],
					fmt.Errorf("grace period must be specified for the soft eviction threshold %v", s))
			}
			continue
		}
		softThresholds[i].GracePeriod = period
	}

	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	results := make([]Threshold, 0, len(hardThresholds)+len(softThresholds))
	results = append(results, hardThresholds...)
	results = append(results, softThresholds...)
	for i := range results {
		if mr, ok := minReclaims[results[i].Signal]; ok {
			results[i].MinReclaim = &mr
		}
	}
	if slices.Contains(allocatableConfig, "pods") {
		results = addAllocatableThresholds(results)
	}
	return results, nil
}

// addAllocatableThresholds appends an allocatableMemory.available copy of every
// hard memory.available threshold: with "pods" enforced, the kubepods cgroup's
// own headroom is watched with the same value.
func addAllocatableThresholds(thresholds []Threshold) []Threshold {
	out := thresholds
	for _, t := range thresholds {
		if t.Signal == SignalMemoryAvailable && t.IsHard() {
			out = append(out, Threshold{
				Signal:     SignalAllocatableMemoryAvailable,
				Operator:   t.Operator,
				Value:      t.Value,
				MinReclaim: t.MinReclaim,
			})
		}
	}
	return out
}

// parseThresholdStatement parses one "signal = value" statement; it returns nil
// (and no error) for the disabling values "0%" and "100%".
func parseThresholdStatement(signal Signal, val string) (*Threshold, error) {
	if !ValidSignal(signal) {
		return nil, fmt.Errorf("%w %v", ErrUnsupportedSignal, signal)
	}
	if strings.HasSuffix(val, "%") {
		// The kubelet compares the literal text: "0.0%" is not a way to disable.
		if val == "0%" || val == "100%" {
			return nil, nil
		}
		p, err := parsePercentage(signal, val)
		if err != nil {
			return nil, err
		}
		if p < 0 {
			return nil, fmt.Errorf("eviction percentage threshold %v must be >= 0%%: %s", signal, val)
		}
		if p > 1 {
			return nil, fmt.Errorf("eviction percentage threshold %v must be <= 100%%: %s", signal, val)
		}
		return &Threshold{Signal: signal, Operator: OpLessThan, Value: ThresholdValue{Percentage: p}}, nil
	}
	q, err := parseQuantity(signal, val)
	if err != nil {
		return nil, err
	}
	if q.Sign() <= 0 {
		return nil, fmt.Errorf("eviction threshold %v must be positive: %s", signal, val)
	}
	return &Threshold{Signal: signal, Operator: OpLessThan, Value: ThresholdValue{Quantity: &q}}, nil
}

// parseGracePeriod parses a soft threshold's grace period (a Go duration, >= 0).
func parseGracePeriod(signal Signal, val string) (time.Duration, error) {
	if !ValidSignal(signal) {
		return 0, fmt.Errorf("%w %v", ErrUnsupportedSignal, signal)
	}
	d, err := time.ParseDuration(val)
	if err != nil {
		return 0, fmt.Errorf("eviction grace period %v: invalid duration %q: want a Go duration such as \"1m30s\"", signal, val)
	}
	if d < 0 {
		return 0, fmt.Errorf("invalid eviction grace period specified for %v: %v, must be a positive value", signal, val)
	}
	return d, nil
}

// parseMinimumReclaim parses a minimum reclaim: a percentage must be > 0 (so
// "0%" is an error here, unlike for thresholds); a quantity must be >= 0.
func parseMinimumReclaim(signal Signal, val string) (ThresholdValue, error) {
	if !ValidSignal(signal) {
		return ThresholdValue{}, fmt.Errorf("%w %v", ErrUnsupportedSignal, signal)
	}
	if strings.HasSuffix(val, "%") {
		p, err := parsePercentage(signal, val)
		if err != nil {
			return ThresholdValue{}, err
		}
		if p <= 0 {
			return ThresholdValue{}, fmt.Errorf("eviction percentage minimum reclaim %v must be positive: %s", signal, val)
		}
		if p > 1 {
			return ThresholdValue{}, fmt.Errorf("eviction percentage minimum reclaim %v must be <= 100%%: %s", signal, val)
		}
		return ThresholdValue{Percentage: p}, nil
	}
	q, err := parseQuantity(signal, val)
	if err != nil {
		return ThresholdValue{}, err
	}
	if q.Sign() < 0 {
		return ThresholdValue{}, fmt.Errorf("negative eviction minimum reclaim specified for %v: %s", signal, val)
	}
	return ThresholdValue{Quantity: &q}, nil
}

// parsePercentage parses "NN%" the kubelet's way: a 32-bit float divided by 100
// in float32 arithmetic, so "10.5%" is float32(0.105) = 0.10499999672…
func parsePercentage(signal Signal, val string) (float32, error) {
	f, err := strconv.ParseFloat(strings.TrimRight(val, "%"), 32)
	if err != nil {
		return 0, fmt.Errorf("eviction percentage %v: invalid percentage %q", signal, val)
	}
	return float32(f) / 100, nil
}

// parseQuantity parses a Kubernetes quantity, naming the signal on failure.
func parseQuantity(signal Signal, val string) (resource.Quantity, error) {
	q, err := resource.ParseQuantity(val)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("eviction quantity %v: invalid quantity %q: %w", signal, val, err)
	}
	return q, nil
}

// GetThresholdQuantity returns the absolute amount value stands for against
// capacity: a copy of Quantity, or capacity × Percentage computed as
// int64(float64(capacity) × float64(float32 percentage)) exactly like the
// kubelet. The float32 is deliberate: 10% of 1000Mi is 104857601, not
// 104857600, and an observation of exactly 104857600 available does meet it.
func GetThresholdQuantity(value ThresholdValue, capacity *resource.Quantity) *resource.Quantity {
	if value.Quantity != nil {
		q := value.Quantity.DeepCopy()
		return &q
	}
	return resource.NewQuantity(int64(float64(capacity.Value())*float64(value.Percentage)), resource.BinarySI)
}
