package eviction

import (
	"errors"
	"fmt"
	"slices"
)

// UpdateContainerFsThresholds is the kubelet's UpdateContainerFsThresholds, run once before
// the first decision: containerfs.* thresholds are never the user's. Any configured
// containerfs.available or containerfs.inodesFree threshold is dropped (reported in the
// joined error, which is a warning: the returned thresholds are usable) and replaced by
// copies of the nodefs thresholds (single filesystem, or images and writable layers split)
// or of the imagefs thresholds (a dedicated image filesystem holding the writable layers).
// As in the kubelet a copy is appended even when its source is absent; such an empty
// threshold (zero value) can never be met.
func UpdateContainerFsThresholds(thresholds []Threshold, imageFs, splitContainerImageFs bool) ([]Threshold, error) {
	var hardNodeFs, softNodeFs, hardNodeInodes, softNodeInodes Threshold
	var hardImageFs, softImageFs, hardImageInodes, softImageInodes Threshold
	var errs []error
	for _, t := range thresholds {
		hard := t.IsHard()
		switch t.Signal {
		case SignalNodeFsAvailable:
			pick(hard, t, &hardNodeFs, &softNodeFs)
		case SignalNodeFsInodesFree:
			pick(hard, t, &hardNodeInodes, &softNodeInodes)
		case SignalImageFsAvailable:
			pick(hard, t, &hardImageFs, &softImageFs)
		case SignalImageFsInodesFree:
			pick(hard, t, &hardImageInodes, &softImageInodes)
		case SignalContainerFsAvailable, SignalContainerFsInodesFree:
			kind := "hard"
			if !hard {
				kind = "soft"
			}
			errs = append(errs, fmt.Errorf("found %s for %s eviction. ignoring", t.Signal, kind))
		}
	}
	out := slices.DeleteFunc(slices.Clone(thresholds), func(t Threshold) bool {
		return t.Signal == SignalContainerFsAvailable || t.Signal == SignalContainerFsInodesFree
	})
	copyAs := func(sig Signal, src Threshold) Threshold {
		return Threshold{Signal: sig, Operator: src.Operator, Value: src.Value, GracePeriod: src.GracePeriod, MinReclaim: src.MinReclaim}
	}
	if imageFs == splitContainerImageFs { // single filesystem, or split: containerfs is nodefs
		out = append(out,
			copyAs(SignalContainerFsAvailable, hardNodeFs), copyAs(SignalContainerFsAvailable, softNodeFs),
			copyAs(SignalContainerFsInodesFree, hardNodeInodes), copyAs(SignalContainerFsInodesFree, softNodeInodes))
	} else if imageFs { // dedicated image filesystem with the writable layers on it
		out = append(out,
			copyAs(SignalContainerFsAvailable, hardImageFs), copyAs(SignalContainerFsAvailable, softImageFs),
			copyAs(SignalContainerFsInodesFree, hardImageInodes), copyAs(SignalContainerFsInodesFree, softImageInodes))
	}
	return out, errors.Join(errs...)
}

func pick(hard bool, t Threshold, hardDst, softDst *Threshold) {
	if hard {
		*hardDst = t
	} else {
		*softDst = t
	}
}
