package crirt

import (
	"context"
	"path/filepath"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/slices"
)

// containerLogPath is the log file of a container's run n (n from 1) relative to the pod's log
// directory: <container>/<restart count>.log.
func containerLogPath(container string, n int) string {
	return filepath.Join(container, strconv.Itoa(n-1)+".log")
}

// Validate reports what this runtime cannot run: what ValidatePod reports, with the runtime's
// own answer on supplementalGroupsPolicy Strict and the host's on AppArmor.
func (r *Runtime) Validate(pod *v1.Pod) field.ErrorList {
	return validatePod(pod, r.supportsStrictGroups, r.opts.AppArmor)
}

// SupportsSupplementalGroupsPolicy reports whether the runtime applies supplementalGroupsPolicy
// Strict (its status features, what the kubelet publishes as the Node's
// status.features.supplementalGroupsPolicy); false when it cannot be asked.
func (r *Runtime) SupportsSupplementalGroupsPolicy() bool { return r.supportsStrictGroups() }

// ValidatePod reports what the cri runtime cannot run, with field paths and values: containers
// without an image, ephemeral containers, volume types the worker does not provide, subPath
// mounts, unknown pull policies and stop signals, and AppArmor profiles on a host without
// AppArmor. It needs no connection, so slicectl explains a pod offline with it; offline,
// supplementalGroupsPolicy Strict is taken as supported (the runtime's answer is unknown).
func ValidatePod(pod *v1.Pod) field.ErrorList {
	return validatePod(pod, func() bool { return true }, func() bool { return lifecycle.HostAppArmorEnabled("/sys") })
}

// validatePod is ValidatePod with the runtime's support of supplementalGroupsPolicy Strict and
// the host's AppArmor given.
func validatePod(pod *v1.Pod, strictGroups, appArmor func() bool) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if pod.UID != "" {
		if err := slices.ValidateUID(string(pod.UID)); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "uid"), string(pod.UID), err.Error()))
		}
	}
	if len(pod.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(spec.Child("ephemeralContainers"), "ephemeral containers are not supported by the cri runtime"))
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(spec.Child("terminationGracePeriodSeconds"), *g, "must be non-negative"))
	}
	if psc := pod.Spec.SecurityContext; psc != nil && psc.SupplementalGroupsPolicy != nil && *psc.SupplementalGroupsPolicy == v1.SupplementalGroupsPolicyStrict {
		// The kubelet refuses such a pod when the runtime does not report the feature
		// (pkg/kubelet/lifecycle, SupplementalGroupsPolicyNotSupported); containerd 1.6 would
		// merge the image's groups anyway.
		if !strictGroups() {
			errs = append(errs, field.Forbidden(spec.Child("securityContext", "supplementalGroupsPolicy"),
				"the cri runtime does not report support for SupplementalGroupsPolicy Strict"))
		}
	}
	volumes := map[string]bool{}
	for i, v := range pod.Spec.Volumes {
		p := spec.Child("volumes").Index(i)
		switch {
		case v.EmptyDir != nil:
		case v.ConfigMap != nil, v.Secret != nil, v.Projected != nil, v.DownwardAPI != nil:
			// Written by the pod worker into a directory of its own, mounted read-only.
		case v.PersistentVolumeClaim != nil, v.Ephemeral != nil, v.CSI != nil:
			// A claim's volume or an inline CSI volume: the pod worker sets it up through the
			// API server and the CSI driver (cluster mode; the pod sources refuse them
			// elsewhere) and mounts it as a hostPath.
		case v.HostPath != nil:
			if !filepath.IsAbs(v.HostPath.Path) {
				errs = append(errs, field.Invalid(p.Child("hostPath", "path"), v.HostPath.Path, "must be an absolute path"))
			}
		default:
			errs = append(errs, field.NotSupported(p, v.Name, []string{"emptyDir", "hostPath", "configMap", "secret", "projected", "downwardAPI", "persistentVolumeClaim", "ephemeral", "csi"}))
		}
		volumes[v.Name] = true
	}
	appArmorRefused := map[string]bool{}
	check := func(p *field.Path, c *v1.Container) {
		// The kubelet's AppArmor admission: a profile other than Unconfined needs AppArmor.
		if ap, at := lifecycle.AppArmorProfileAt(pod, c, p); ap != nil && ap.Type != v1.AppArmorProfileTypeUnconfined && !appArmor() && !appArmorRefused[at.String()] {
			appArmorRefused[at.String()] = true
			errs = append(errs, field.Forbidden(at, "cannot enforce AppArmor: AppArmor is not enabled on the host"))
		}
		if c.Image == "" {
			errs = append(errs, field.Required(p.Child("image"), "the cri runtime runs images"))
		}
		switch c.ImagePullPolicy {
		case "", v1.PullAlways, v1.PullIfNotPresent, v1.PullNever:
		default:
			errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy, []string{"Always", "IfNotPresent", "Never"}))
		}
		for i, m := range c.VolumeMounts {
			mp := p.Child("volumeMounts").Index(i)
			if !volumes[m.Name] {
				errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
			}
			if !filepath.IsAbs(m.MountPath) {
				errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be an absolute path"))
			}
		}
		if c.Lifecycle != nil && c.Lifecycle.StopSignal != nil {
			if _, ok := runtimeapi.Signal_value["SIGNAL_"+string(*c.Lifecycle.StopSignal)]; !ok {
				errs = append(errs, field.Invalid(p.Child("lifecycle", "stopSignal"), string(*c.Lifecycle.StopSignal), "unknown signal"))
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		check(spec.Child("initContainers").Index(i), &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		check(spec.Child("containers").Index(i), &pod.Spec.Containers[i])
	}
	return errs
}

// supportsStrictGroups asks the runtime (its status features, at most a second) whether it
// applies supplementalGroupsPolicy Strict; false when it cannot be asked.
func (r *Runtime) supportsStrictGroups() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.StatusResponse, error) {
		return r.rs.Status(ctx, &runtimeapi.StatusRequest{})
	})
	return err == nil && resp.GetFeatures().GetSupplementalGroupsPolicy()
}
