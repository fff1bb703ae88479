package source

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateInput checks what slices.ValidatePod does not (yet) check and a pod source must refuse
// before anything reaches the runtime: volume names (DNS labels, unique — a name like
// "../../etc" or "/etc" would otherwise become part of a per-pod directory path), volume mounts
// naming a declared volume, and NUL bytes in env, command, args, workingDir and mount paths
// (execve and systemd unit properties cannot carry them; a NUL would silently cut the string).
// Every problem carries its field path and value.
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
