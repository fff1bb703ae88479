package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// ensureImage makes the container's image present per its pull policy (the kubelet's
// imageManager.EnsureImageExists, with its events) and returns its reference; on failure also
// the waiting reason.
func (w *Worker) ensureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, sbCfg *runtimeapi.PodSandboxConfig) (string, string, error) {
	policy := PullPolicy(c)
	spec := &runtimeapi.ImageSpec{Image: c.Image, UserSpecifiedImage: c.Image}
	id, err := w.opts.Images.ImageStatus(ctx, spec)
	if err != nil {
		err = fmt.Errorf("image %q: status: %w", c.Image, err)
		w.containerEvent(pod, c.Name, v1.EventTypeWarning, EventFailed, "Failed to inspect image %q: %v", c.Image, err)
		return "", lifecycle.ReasonErrImagePull, err
	}
	present := id != ""
	if present && policy != v1.PullAlways {
		// The kubelet's message with KubeletEnsureSecretPulledImages (on by default since
		// v1.35): every pull of slicelet's is anonymous (imagePullSecrets are refused), so an
		// image present is one every pod may use.
		w.containerEvent(pod, c.Name, v1.EventTypeNormal, EventPulled, "Container image %q already present on machine and can be accessed by the pod", c.Image)
		return id, "", nil
	}
	if !present && policy == v1.PullNever {
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
		w.containerEvent(pod, c.Name, v1.EventTypeWarning, EventErrImageNeverPull, "%s", msg)
		return "", lifecycle.ReasonErrImageNeverPull, fmt.Errorf("container image %q is not present with pull policy of Never", c.Image)
	}
	w.log.Info("pulling image", "pod_uid", string(pod.UID), "container", c.Name, "image", c.Image, "policy", string(policy))
	w.containerEvent(pod, c.Name, v1.EventTypeNormal, EventPulling, "Pulling image %q", c.Image)
	start := w.clock.Now()
	ref, size, err := w.opts.Images.PullImage(ctx, spec, sbCfg)
	if err != nil {
		w.containerEvent(pod, c.Name, v1.EventTypeWarning, EventFailed, "Failed to pull image %q: %v", c.Image, err)
		return "", lifecycle.ReasonErrImagePull, &pullError{image: c.Image, err: err}
	}
	// Pulls are not queued (the kubelet's serialized puller waits), so the time including
	// waiting is the pull's; durations truncated to the millisecond as the kubelet's.
	took := w.clock.Since(start).Truncate(time.Millisecond)
	w.containerEvent(pod, c.Name, v1.EventTypeNormal, EventPulled, "Successfully pulled image %q in %v (%v including waiting). Image size: %v bytes.", c.Image, took, took, size)
	return ref, "", nil
}

// pullError is a failed pull of image.
type pullError struct {
	image string
	err   error
}

// Error names the image and the runtime's error.
func (e *pullError) Error() string { return fmt.Sprintf("image %q: pull: %v", e.image, e.err) }

// Unwrap is the runtime's error.
func (e *pullError) Unwrap() error { return e.err }

// holdMessage is the waiting message of a container whose image is not available (reason
// ensureImage's): after a failed pull the kubelet's back-off message, which names the pull's
// error (pkg/kubelet/images/image_manager.go, EnsureImageExists: "Back-off pulling image %q"
// and its prevPullErrMsg "ErrImagePull: <error>"), else the error.
func holdMessage(reason string, err error) string {
	if pe := (*pullError)(nil); errors.As(err, &pe) {
		return fmt.Sprintf("Back-off pulling image %q: %s: %v", pe.image, reason, pe.err)
	}
	return err.Error()
}

// PullPolicy is the container's imagePullPolicy with the API's default: Always for an image
// without a tag or tagged latest (and no digest), else IfNotPresent.
func PullPolicy(c *v1.Container) v1.PullPolicy {
	if c.ImagePullPolicy != "" {
		return c.ImagePullPolicy
	}
	img := c.Image
	if strings.Contains(img, "@") {
		return v1.PullIfNotPresent
	}
	last := img[strings.LastIndex(img, "/")+1:]
	if i := strings.LastIndex(last, ":"); i < 0 || last[i+1:] == "latest" {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}
