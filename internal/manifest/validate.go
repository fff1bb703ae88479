package manifest

import (
	stdslices "slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/slicelet/slicelet/internal/pods/podfields"
	"github.com/slicelet/slicelet/slices"
)

// Validate returns every problem of a defaulted pod, each with its field path and value:
//   - metadata as the API validates it (apimachinery ValidateObjectMeta: name a DNS subdomain,
//     namespace a DNS label, label keys and values, annotation keys and at most 256 KiB of
//     annotations in total, owner references, finalizers);
//   - the fields slicelet refuses (podfields.Refusals), among them every reference to an API
//     object, which static pods may not make (pkg/kubelet/config/common.go: service accounts,
//     secrets, configmaps, persistent volume claims, resource claims);
//   - what slicelet relies on (slices.ValidatePod: containers, names, quantities, requests ≤
//     limits, the UID);
//   - the pod's DNS policy and configuration, hostname, subdomain, ports and mount propagation
//     as the API validates them (validateNetwork);
//   - what no runtime may receive: volume names, mounts naming a declared volume, NUL bytes.
//
// What a runtime cannot run is the runtime's to say (its Validate).
func Validate(pod *v1.Pod) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&pod.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	// Labels and annotations are maps: their problems come in map order. Sorted, the same
	// manifest always gets the same message.
	stdslices.SortStableFunc(errs, func(a, b *field.Error) int { return strings.Compare(a.Error(), b.Error()) })
	errs = append(errs, podfields.Refusals(pod)...)
	for _, e := range slices.ValidatePod(pod) {
		if e.Field == "metadata.name" || e.Field == "metadata.namespace" {
			continue // ValidateObjectMeta's, with the API's wording
		}
		errs = append(errs, e)
	}
	errs = append(errs, validateNetwork(pod)...)
	return append(errs, validateInput(pod)...)
}

// validateInput checks what a pod source must refuse before anything reaches a runtime: volume
// names (DNS labels, unique — a name like "../../etc" would otherwise become part of a per-pod
// directory path), volume mounts naming a declared volume, and NUL bytes in env, command, args,
// workingDir and mount paths (execve and systemd unit properties cannot carry them; a NUL would
// silently cut the string).
func validateInput(pod *v1.Pod) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	volumes := sets.New[string]()
	for i, vol := range pod.Spec.Volumes {
		p := spec.Child("volumes").Index(i).Child("name")
		switch {
		case vol.Name == "":
			errs = append(errs, field.Required(p, "volume name is required"))
		case volumes.Has(vol.Name):
			errs = append(errs, field.Duplicate(p, vol.Name))
		default:
			for _, msg := range validation.IsDNS1123Label(vol.Name) {
				errs = append(errs, field.Invalid(p, vol.Name, msg))
			}
		}
		volumes.Insert(vol.Name)
	}
	for i := range pod.Spec.InitContainers {
		errs = append(errs, validateContainerInput(spec.Child("initContainers").Index(i), &pod.Spec.InitContainers[i], volumes)...)
	}
	for i := range pod.Spec.Containers {
		errs = append(errs, validateContainerInput(spec.Child("containers").Index(i), &pod.Spec.Containers[i], volumes)...)
	}
	return errs
}

func validateContainerInput(p *field.Path, c *v1.Container, volumes sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	noNUL := func(p *field.Path, s string) {
		if strings.IndexByte(s, 0) >= 0 {
			errs = append(errs, field.Invalid(p, s, "must not contain NUL bytes"))
		}
	}
	for i, s := range c.Command {
		noNUL(p.Child("command").Index(i), s)
	}
	for i, s := range c.Args {
		noNUL(p.Child("args").Index(i), s)
	}
	noNUL(p.Child("workingDir"), c.WorkingDir)
	for i, e := range c.Env {
		ep := p.Child("env").Index(i)
		if e.Name == "" {
			errs = append(errs, field.Required(ep.Child("name"), "environment variable name is required"))
		}
		noNUL(ep.Child("name"), e.Name)
		noNUL(ep.Child("value"), e.Value)
	}
	for i, m := range c.VolumeMounts {
		mp := p.Child("volumeMounts").Index(i)
		if !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		noNUL(mp.Child("mountPath"), m.MountPath)
		noNUL(mp.Child("subPath"), m.SubPath)
	}
	return errs
}
