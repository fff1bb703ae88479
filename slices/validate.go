package slices

import (
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validation bounds for pod manifests.
const (
	// MaxContainers bounds init + regular + ephemeral containers of one pod. The API server has
	// no such bound; 256 is far above real pods (each container is a systemd unit and a cgroup)
	// and keeps one manifest from flooding PID 1 with units.
	MaxContainers = 256
	// MaxMilliCPU is the largest cpu quantity accepted: 10^6 cores. Beyond it the quota
	// arithmetic (milliCPU × period) would come close to overflowing int64 for long periods.
	MaxMilliCPU int64 = 1_000_000 * 1000
	// MaxBytes is the largest memory, ephemeral-storage or hugepages quantity accepted: 1<<62
	// bytes (4Ei), the kernel's "unbounded" hugetlb value; sums of a few such values still fit
	// int64.
	MaxBytes int64 = 1 << 62
)

var (
	maxCPUQuantity   = *resource.NewMilliQuantity(MaxMilliCPU, resource.DecimalSI)
	maxBytesQuantity = *resource.NewQuantity(MaxBytes, resource.BinarySI)
	validQOSClasses  = []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort}
)

// ValidatePod returns the problems of a decoded pod that slicelet's own math and enforcement
// rule out and the API's validation (pkg/apis/core/validation, which every pod passes first:
// internal/manifest for manifests and local API pods, the API server for cluster pods) lets
// through, each with its field path and value, e.g.
// `spec.containers[0].resources.limits.cpu: Invalid value: "2000001": must be at most 1000000 cpus`:
// metadata.uid (ValidateUID), at most MaxContainers containers, quantities (cpu ≤ 10^6 cores,
// bytes ≤ 1<<62), limits only on resources slicelet can enforce (cpu, memory,
// ephemeral-storage, hugepages-<size>, extended resources), and status.qosClass.
// Names, required containers, signs, requests ≤ limits, the resources pod-level values may name
// and the hugepages and pod-level consistency rules are the API's.
//
// Use ValidatePod(pod).ToAggregate() for a single error.
func ValidatePod(pod *v1.Pod) field.ErrorList {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	if pod.UID != "" {
		if err := ValidateUID(string(pod.UID)); err != nil {
			errs = append(errs, field.Invalid(meta.Child("uid"), string(pod.UID), err.Error()))
		}
	}

	spec := field.NewPath("spec")
	if n := len(pod.Spec.Containers) + len(pod.Spec.InitContainers) + len(pod.Spec.EphemeralContainers); n > MaxContainers {
		errs = append(errs, field.TooMany(spec.Child("containers"), n, MaxContainers))
	}
	for i := range pod.Spec.InitContainers {
		errs = append(errs, validateRequirements(spec.Child("initContainers").Index(i).Child("resources"), &pod.Spec.InitContainers[i].Resources)...)
	}
	for i := range pod.Spec.Containers {
		errs = append(errs, validateRequirements(spec.Child("containers").Index(i).Child("resources"), &pod.Spec.Containers[i].Resources)...)
	}

	if r := pod.Spec.Resources; r != nil {
		// An empty block (no requests, no limits, or empty maps) is accepted as the API accepts
		// it and counts as absent: pod-level values apply only once they name cpu, memory or
		// hugepages (resourcehelper.IsPodLevelResourcesSet).
		p := spec.Child("resources")
		// The quantity rules on the names pod-level resources support only.
		supported := v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}
		for _, kind := range []struct {
			name      string
			list, out v1.ResourceList
		}{{"requests", r.Requests, supported.Requests}, {"limits", r.Limits, supported.Limits}} {
			for _, name := range sortedNames(kind.list) {
				if name != v1.ResourceCPU && name != v1.ResourceMemory && !strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
					continue // the API's: NotSupported (validatePodResourceName)
				}
				kind.out[name] = kind.list[name]
			}
		}
		errs = append(errs, validateRequirements(p, &supported)...)
	}
	for _, name := range sortedNames(pod.Spec.Overhead) {
		errs = append(errs, validateQuantity(spec.Child("overhead").Child(string(name)), name, pod.Spec.Overhead[name])...)
	}

	if q := pod.Status.QOSClass; q != "" && q != v1.PodQOSGuaranteed && q != v1.PodQOSBurstable && q != v1.PodQOSBestEffort {
		errs = append(errs, field.NotSupported(field.NewPath("status", "qosClass"), q, validQOSClasses))
	}
	return errs
}

// validateRequirements checks requests and limits of one resources block.
func validateRequirements(p *field.Path, r *v1.ResourceRequirements) field.ErrorList {
	var errs field.ErrorList
	for _, name := range sortedNames(r.Limits) {
		lp := p.Child("limits").Child(string(name))
		if !limitSupported(name) {
			errs = append(errs, field.Invalid(lp, string(name),
				"slicelet can only enforce limits on cpu, memory, ephemeral-storage, hugepages-<size> and extended resources (a device plugin's devices)"))
			continue
		}
		errs = append(errs, validateQuantity(lp, name, r.Limits[name])...)
	}
	for _, name := range sortedNames(r.Requests) {
		errs = append(errs, validateQuantity(p.Child("requests").Child(string(name)), name, r.Requests[name])...)
	}
	return errs
}

// limitSupported reports whether slicelet can enforce a limit on the resource: an extended
// resource's limit is the number of a device plugin's devices the container gets (the device
// manager, internal/pods/devices), checked at admission.
func limitSupported(name v1.ResourceName) bool {
	switch name {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage:
		return true
	}
	if IsExtendedResourceName(name) {
		return true
	}
	if strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
		_, err := HugePageSizeFromResourceName(name)
		return err == nil
	}
	return false
}

// validateQuantity checks the magnitude of one quantity (its sign is the API's), and the page
// size of a hugepages resource name.
func validateQuantity(p *field.Path, name v1.ResourceName, q resource.Quantity) field.ErrorList {
	var errs field.ErrorList
	if strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
		if _, err := HugePageSizeFromResourceName(name); err != nil {
			errs = append(errs, field.Invalid(p, string(name), "page size must be a positive quantity, e.g. hugepages-2Mi"))
		}
	}
	switch {
	case name == v1.ResourceCPU:
		if q.Cmp(maxCPUQuantity) > 0 {
			errs = append(errs, field.Invalid(p, q.String(), "must be at most 1000000 cpus"))
		}
	case name == v1.ResourceMemory || name == v1.ResourceEphemeralStorage || strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix):
		if q.Cmp(maxBytesQuantity) > 0 {
			errs = append(errs, field.Invalid(p, q.String(), "must be at most 4Ei (1<<62 bytes)"))
		}
	}
	return errs
}

// sortedNames returns the names of rl in order, so problems are reported deterministically.
func sortedNames(rl v1.ResourceList) []v1.ResourceName {
	names := make([]v1.ResourceName, 0, len(rl))
	for n := range rl {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// IsExtendedResourceName is v1helper.IsExtendedResourceName: a domain-qualified name outside
// kubernetes.io (example.com/gpu) that is not a quota "requests." name and stays a qualified
// name as one ("requests.<name>").
func IsExtendedResourceName(name v1.ResourceName) bool {
	n := string(name)
	if !strings.Contains(n, "/") || strings.Contains(n, v1.ResourceDefaultNamespacePrefix) || strings.HasPrefix(n, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+n)) == 0
}
