package slices

import (
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	resourcehelper "k8s.io/component-helpers/resource"
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

// ValidatePod returns every problem of a decoded pod, each with its field path and value, e.g.
// `spec.containers[1].resources.limits.memory: Invalid value: "-1Gi": must be non-negative`.
// It checks what slicelet relies on: metadata.name (DNS subdomain) and namespace (DNS label),
// metadata.uid (ValidateUID), at least one and at most MaxContainers containers, container names
// (DNS labels, unique across init, regular and ephemeral containers), quantities
// (non-negative, cpu ≤ 10^6 cores, bytes ≤ 1<<62), requests ≤ limits, limits only on resources
// slicelet can enforce (cpu, memory, ephemeral-storage, hugepages-<size>), pod-level resources
// only on cpu, memory and hugepages-<size>, and status.qosClass.
//
// Use ValidatePod(pod).ToAggregate() for a single error.
func ValidatePod(pod *v1.Pod) field.ErrorList {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	if pod.Name == "" {
		errs = append(errs, field.Required(meta.Child("name"), "pod name is required"))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(pod.Name) {
			errs = append(errs, field.Invalid(meta.Child("name"), pod.Name, msg))
		}
	}
	if pod.Namespace != "" {
		for _, msg := range validation.IsDNS1123Label(pod.Namespace) {
			errs = append(errs, field.Invalid(meta.Child("namespace"), pod.Namespace, msg))
		}
	}
	if pod.UID != "" {
		if err := ValidateUID(string(pod.UID)); err != nil {
			errs = append(errs, field.Invalid(meta.Child("uid"), string(pod.UID), err.Error()))
		}
	}

	spec := field.NewPath("spec")
	if len(pod.Spec.Containers) == 0 {
		errs = append(errs, field.Required(spec.Child("containers"), "a pod needs at least one container"))
	}
	if n := len(pod.Spec.Containers) + len(pod.Spec.InitContainers) + len(pod.Spec.EphemeralContainers); n > MaxContainers {
		errs = append(errs, field.TooMany(spec.Child("containers"), n, MaxContainers))
	}
	names := sets.New[string]()
	checkName := func(p *field.Path, name string) {
		switch {
		case name == "":
			errs = append(errs, field.Required(p, "container name is required"))
		case names.Has(name):
			errs = append(errs, field.Duplicate(p, name))
		default:
			for _, msg := range validation.IsDNS1123Label(name) {
				errs = append(errs, field.Invalid(p, name, msg))
			}
		}
		names.Insert(name)
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		p := spec.Child("initContainers").Index(i)
		checkName(p.Child("name"), c.Name)
		errs = append(errs, validateContainer(p, c)...)
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		p := spec.Child("containers").Index(i)
		checkName(p.Child("name"), c.Name)
		errs = append(errs, validateContainer(p, c)...)
	}
	for i := range pod.Spec.EphemeralContainers {
		p := spec.Child("ephemeralContainers").Index(i)
		checkName(p.Child("name"), pod.Spec.EphemeralContainers[i].Name)
	}

	if r := pod.Spec.Resources; r != nil {
		p := spec.Child("resources")
		if len(r.Requests) == 0 && len(r.Limits) == 0 {
			// An empty pod-level block would silently make the pod BestEffort (only pod-level
			// values are classified once spec.resources is present).
			errs = append(errs, field.Required(p, "set requests or limits, or omit spec.resources to use the containers' resources"))
		}
		// One problem per unsupported name (the pod-level rule, e.g. for pids), then the
		// quantity rules on the supported ones only.
		supported := v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}
		for _, kind := range []struct {
			name      string
			list, out v1.ResourceList
		}{{"requests", r.Requests, supported.Requests}, {"limits", r.Limits, supported.Limits}} {
			for _, name := range sortedNames(kind.list) {
				if name != v1.ResourceCPU && name != v1.ResourceMemory && !strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
					errs = append(errs, field.NotSupported(p.Child(kind.name).Child(string(name)), string(name),
						[]string{string(v1.ResourceCPU), string(v1.ResourceMemory), v1.ResourceHugePagesPrefix + "<size>"}))
					continue
				}
				kind.out[name] = kind.list[name]
			}
		}
		errs = append(errs, validateRequirements(p, &supported)...)
		errs = append(errs, validateHugePagesWith(p, r)...)
		errs = append(errs, validatePodResourceConsistency(pod, p)...)
	}
	for _, name := range sortedNames(pod.Spec.Overhead) {
		errs = append(errs, validateQuantity(spec.Child("overhead").Child(string(name)), name, pod.Spec.Overhead[name])...)
	}

	if q := pod.Status.QOSClass; q != "" && q != v1.PodQOSGuaranteed && q != v1.PodQOSBurstable && q != v1.PodQOSBestEffort {
		errs = append(errs, field.NotSupported(field.NewPath("status", "qosClass"), q, validQOSClasses))
	}
	return errs
}

// validateContainer checks one regular or init container. Whether it needs an image is the
// runtime's business: the built-in systemd runtime runs host commands and refuses images, the
// CRI runtime requires them.
func validateContainer(p *field.Path, c *v1.Container) field.ErrorList {
	return append(validateRequirements(p.Child("resources"), &c.Resources), validateHugePagesWith(p.Child("resources"), &c.Resources)...)
}

// validateHugePagesWith is the API's rule for a resources block, a container's or the pod's
// (ValidateResourceRequirements and validatePodResourceRequirements,
// pkg/apis/core/validation/validation.go): hugepages come with cpu or memory.
func validateHugePagesWith(p *field.Path, r *v1.ResourceRequirements) field.ErrorList {
	hugepages, cpuOrMemory := false, false
	for _, list := range []v1.ResourceList{r.Requests, r.Limits} {
		for name := range list {
			switch {
			case strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix):
				hugepages = true
			case name == v1.ResourceCPU || name == v1.ResourceMemory:
				cpuOrMemory = true
			}
		}
	}
	if hugepages && !cpuOrMemory {
		return field.ErrorList{field.Forbidden(p, "HugePages require cpu or memory")}
	}
	return nil
}

// validatePodResourceConsistency is the API's rule for pod-level resources
// (validatePodResourceConsistency, pkg/apis/core/validation/validation.go): a pod-level request
// is at least the containers' aggregate request of that resource, a pod-level hugepages limit at
// least their aggregate limit, and no container's limit above the pod-level limit.
func validatePodResourceConsistency(pod *v1.Pod, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	r := pod.Spec.Resources
	reqs := resourcehelper.AggregateContainerRequests(pod, resourcehelper.PodResourcesOptions{})
	for _, name := range sortedNames(reqs) {
		podReq, ok := r.Requests[name]
		if agg := reqs[name]; ok && agg.Cmp(podReq) > 0 {
			errs = append(errs, field.Invalid(p.Child("requests").Key(string(name)), podReq.String(), "must be greater than or equal to aggregate container requests of "+agg.String()))
		}
	}
	lims := resourcehelper.AggregateContainerLimits(pod, resourcehelper.PodResourcesOptions{})
	for _, name := range sortedNames(lims) {
		podLim, ok := r.Limits[name]
		if agg := lims[name]; ok && strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) && agg.Cmp(podLim) > 0 {
			errs = append(errs, field.Invalid(p.Child("limits").Key(string(name)), podLim.String(), "must be greater than or equal to aggregate container limits of "+agg.String()))
		}
	}
	for i, c := range pod.Spec.Containers {
		for _, name := range sortedNames(c.Resources.Limits) {
			podLim, ok := r.Limits[name]
			if lim := c.Resources.Limits[name]; ok && lim.Cmp(podLim) > 0 {
				errs = append(errs, field.Invalid(p.Child("containers").Index(i).Key(string(name)).Child("limits"), lim.String(), "must be less than or equal to pod limits of "+podLim.String()))
			}
		}
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
				"slicelet can only enforce limits on cpu, memory, ephemeral-storage and hugepages-<size>; extended and device resources need a device plugin, which slicelet does not have"))
			continue
		}
		errs = append(errs, validateQuantity(lp, name, r.Limits[name])...)
	}
	for _, name := range sortedNames(r.Requests) {
		rp := p.Child("requests").Child(string(name))
		req := r.Requests[name]
		qerrs := validateQuantity(rp, name, req)
		errs = append(errs, qerrs...)
		if len(qerrs) > 0 {
			continue
		}
		if lim, ok := r.Limits[name]; ok && limitSupported(name) && req.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(rp, req.String(), "must be less than or equal to "+string(name)+" limit of "+lim.String()))
		}
	}
	return errs
}

// limitSupported reports whether slicelet can enforce a limit on the resource.
func limitSupported(name v1.ResourceName) bool {
	switch name {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage:
		return true
	}
	if strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
		_, err := HugePageSizeFromResourceName(name)
		return err == nil
	}
	return false
}

// validateQuantity checks sign and magnitude of one quantity, and the page size of a hugepages
// resource name.
func validateQuantity(p *field.Path, name v1.ResourceName, q resource.Quantity) field.ErrorList {
	var errs field.ErrorList
	if strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
		if _, err := HugePageSizeFromResourceName(name); err != nil {
			errs = append(errs, field.Invalid(p, string(name), "page size must be a positive quantity, e.g. hugepages-2Mi"))
		}
	}
	if q.Sign() < 0 {
		return append(errs, field.Invalid(p, q.String(), "must be non-negative"))
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
