// Package verdict says offline what a configured runtime would decide of a pod, for
// `slicectl explain pod` without a daemon: the same validation the daemon's runtime runs before
// admission (the worker's worker.ValidateSpec, then systemdrt.ValidatePod or crirt.ValidatePod).
package verdict

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/slicelet/slicelet/internal/pods/crirt"
	"github.com/slicelet/slicelet/internal/pods/systemdrt"
	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/slices"
)

// Runtime is the verdict of the runtime of type runtimeType ("systemd" or "cri", the
// configuration's runtime.type) on pod, checked against this host as the daemon checks it
// (the systemd runtime's commands and mount points must exist here), every pod on the host's
// network (runtime.network = "host").
func Runtime(runtimeType string, pod *v1.Pod) (*slices.RuntimeVerdict, error) {
	return runtimeVerdict(runtimeType, pod, true, true)
}

// RuntimeOn is Runtime on a node whose runtime.network is network: with "cni" a pod without
// spec.hostNetwork has a network namespace of its own (its net.* sysctls, say, are its own),
// as the daemon's worker runs it.
func RuntimeOn(runtimeType, network string, pod *v1.Pod) (*slices.RuntimeVerdict, error) {
	return runtimeVerdict(runtimeType, pod, true, network != "cni")
}

// Spec is Runtime without what depends on the host's files: the verdict on the pod alone.
func Spec(runtimeType string, pod *v1.Pod) (*slices.RuntimeVerdict, error) {
	return runtimeVerdict(runtimeType, pod, false, true)
}

func runtimeVerdict(runtimeType string, pod *v1.Pod, host, hostNetwork bool) (*slices.RuntimeVerdict, error) {
	errs := worker.ValidateSpec(pod, hostNetwork)
	switch runtimeType {
	case "systemd":
		errs = append(errs, systemdrt.ValidatePod(pod, host)...)
	case "cri":
		errs = append(errs, crirt.ValidatePod(pod)...)
	default:
		return nil, fmt.Errorf("runtime type %q: want systemd or cri", runtimeType)
	}
	v := FromProblems(runtimeType, problemStrings(errs))
	return &v, nil
}

// FromProblems is the verdict of runtime name given its problems (none: allowed).
func FromProblems(name string, problems []string) slices.RuntimeVerdict {
	return slices.RuntimeVerdict{Runtime: name, Allowed: len(problems) == 0, Problems: problems}
}

// problemStrings renders validation errors one per line.
func problemStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}
