package manifest

import (
	"cmp"
	"os"
	stdslices "slices"
	"strings"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/slicelet/slicelet/internal/kubevalidation"
	"github.com/slicelet/slicelet/internal/pods/podfields"
	"github.com/slicelet/slicelet/slices"
)

// ValidatePod is the whole verdict on a decoded and defaulted pod of a manifest file or of the
// local API: first every problem the kubelet's static-pod source finds (ValidateAsKubelet: the
// API's ValidatePodCreate, with the API's field paths and wording), then slicelet's own refusals
// (Validate: the fields it does not implement, what it cannot enforce), a problem both report
// once.
func ValidatePod(pod *v1.Pod) field.ErrorList {
	return withOwn(ValidateAsKubelet(pod), Validate(pod))
}

// ValidateAPIPod is the verdict explain gives a pod that would come from the API server to a
// cluster node: first what the API server refuses when the pod is created
// (kubevalidation.ValidateCreate, in a stable order), since such a pod never reaches the node,
// then slicelet's own refusals with the reasons that hold for a pod of origin o
// (podfields.ForOrigin), a problem both report once.
func ValidateAPIPod(pod *v1.Pod, o podfields.Origin) field.ErrorList {
	errs := kubevalidation.ValidateCreate(pod)
	sortByText(errs)
	return withOwn(errs, podfields.ForOrigin(Validate(pod), pod, o))
}

// sortByText orders errs by their text, stably: the API iterates maps (labels, annotations,
// resource lists), so its order is not.
func sortByText(errs field.ErrorList) {
	stdslices.SortStableFunc(errs, func(a, b *field.Error) int { return cmp.Compare(a.Error(), b.Error()) })
}

// withOwn appends to the API's problems slicelet's own, less those the API already reported.
func withOwn(api, own field.ErrorList) field.ErrorList {
	seen := make(map[string]bool, len(api))
	for _, e := range api {
		seen[e.Error()] = true
	}
	for _, e := range own {
		if !seen[e.Error()] {
			api = append(api, e)
		}
	}
	return api
}

// nodeName is the node static pods are validated on (SetNodeName).
var nodeName atomic.Pointer[string]

func init() {
	n := defaultNodeName()
	nodeName.Store(&n)
}

// SetNodeName sets the name of the node pods are validated on, once at start, before any
// manifest is read: the kubelet's file source validates a static pod under the name
// "<name>-<node>" (its mirror pod's), so a name too long once suffixed is refused. The default
// is the kubelet's default node name: the host name, trimmed and lower-cased
// (component-helpers' node/util GetHostname), or "localhost" when the host has none.
func SetNodeName(name string) {
	if name = strings.ToLower(strings.TrimSpace(name)); name == "" {
		name = defaultNodeName()
	}
	nodeName.Store(&name)
}

func defaultNodeName() string {
	h, err := os.Hostname()
	if h = strings.ToLower(strings.TrimSpace(h)); err != nil || h == "" {
		return "localhost"
	}
	return h
}

// ValidateAsKubelet returns the problems the kubelet's static-pod file source finds in a
// defaulted pod (kubevalidation.ValidateStaticPod, on the node SetNodeName names), in a stable order (the API iterates maps:
// labels, annotations, resource lists), less one: a container without an image is a host
// command to the built-in systemd runtime, so its "image: Required value" is left to the
// runtime (the CRI runtime refuses it when it validates the pod).
func ValidateAsKubelet(pod *v1.Pod) field.ErrorList {
	var errs field.ErrorList
	for _, e := range kubevalidation.ValidateStaticPod(pod, *nodeName.Load()) {
		if e.Type == field.ErrorTypeRequired && strings.HasSuffix(e.Field, ".image") && imageless(pod, e.Field) {
			continue
		}
		errs = append(errs, e)
	}
	sortByText(errs)
	return errs
}

// imageless reports whether the container at path ("spec.containers[0].image") has no image.
func imageless(pod *v1.Pod, path string) bool {
	for i := range pod.Spec.InitContainers {
		if field.NewPath("spec", "initContainers").Index(i).Child("image").String() == path {
			return pod.Spec.InitContainers[i].Image == ""
		}
	}
	for i := range pod.Spec.Containers {
		if field.NewPath("spec", "containers").Index(i).Child("image").String() == path {
			return pod.Spec.Containers[i].Image == ""
		}
	}
	return false
}

// Validate returns slicelet's own problems with a defaulted pod, each with its field path and
// value — what the API's validation (ValidateAsKubelet) does not say:
//   - the fields slicelet refuses (podfields.Refusals), among them every reference to an API
//     object, which static pods may not make (pkg/kubelet/config/common.go: service accounts,
//     secrets, configmaps, persistent volume claims, resource claims);
//   - what slicelet relies on (slices.ValidatePod: at most slices.MaxContainers containers,
//     quantities it can compute with, limits only on resources it can enforce, the UID);
//   - what no runtime may receive: NUL bytes.
//
// Cluster mode applies it alone to pods the API server has validated. What a runtime cannot
// run is the runtime's to say (its Validate).
func Validate(pod *v1.Pod) field.ErrorList {
	errs := podfields.Refusals(pod)
	for _, e := range slices.ValidatePod(pod) {
		if e.Field == "metadata.name" || e.Field == "metadata.namespace" {
			continue // the API's (ValidateObjectMeta)
		}
		errs = append(errs, e)
	}
	return append(errs, validateInput(pod)...)
}

// validateInput checks what no runtime may receive: container names (DNS labels) and NUL bytes
// in env values, command, args, workingDir and mount paths (execve and systemd unit properties cannot
// carry them; a NUL would silently cut the string).
func validateInput(pod *v1.Pod) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	for i := range pod.Spec.InitContainers {
		errs = append(errs, validateContainerInput(spec.Child("initContainers").Index(i), &pod.Spec.InitContainers[i])...)
	}
	for i := range pod.Spec.Containers {
		errs = append(errs, validateContainerInput(spec.Child("containers").Index(i), &pod.Spec.Containers[i])...)
	}
	return errs
}

func validateContainerInput(p *field.Path, c *v1.Container) field.ErrorList {
	var errs field.ErrorList
	// A container's name becomes part of unit and directory names: cluster mode, which trusts
	// the API server for the rest, checks it too (the API's wording, so the manifest path
	// reports it once).
	if c.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	for _, msg := range validation.IsDNS1123Label(c.Name) {
		if c.Name != "" {
			errs = append(errs, field.Invalid(p.Child("name"), c.Name, msg))
		}
	}
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
		noNUL(ep.Child("name"), e.Name)
		noNUL(ep.Child("value"), e.Value)
	}
	for i, m := range c.VolumeMounts {
		mp := p.Child("volumeMounts").Index(i)
		noNUL(mp.Child("mountPath"), m.MountPath)
		noNUL(mp.Child("subPath"), m.SubPath)
	}
	return errs
}
