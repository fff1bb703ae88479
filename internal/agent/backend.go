package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/gc"
	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/health"
	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/admission"
	"github.com/slicelet/slicelet/internal/pods/devices"
	"github.com/slicelet/slicelet/internal/pods/events"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/pods/source"
	"github.com/slicelet/slicelet/internal/pods/verdict"
	"github.com/slicelet/slicelet/internal/podstats"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/slices/hierarchy"
	"github.com/slicelet/slicelet/units"
)

// backend serves the local API from the daemon's parts.
type backend struct {
	ctrl     *pods.Controller
	store    *source.APIStore
	objStore *source.ObjectStore
	objects  *pods.Objects
	rt       pods.Runtime
	mcfg     hierarchy.Config
	mode     units.Mode
	maxPods  int32
	hostname string
	gc       *gcService
	evm      *eviction.Manager
	// health is where the node's conditions come from.
	health *health.Tracker
	// podSecurity is the Pod Security level enforced on each pod source's pods.
	podSecurity map[string]admission.PodSecurity
	// stats samples the pods' and the node's usage for the metrics.
	stats *podstats.Sampler
	// events are the pods' events (api.EventLister).
	events *events.Store
	// changes is notified by the controller when pods change (api.PodNotifier).
	changes *api.Broadcast
	// devices are the device plugins' resources in the node's capacity; nil: none.
	devices *devices.Manager
}

var _ api.PodNotifier = (*backend)(nil)

// PodsChanged wakes the API's pod watches at the controller's next change.
func (b *backend) PodsChanged() <-chan struct{} { return b.changes.Wait() }

var _ api.EventLister = (*backend)(nil)

// Events lists the pods' events changed after since (GET /v1/events).
func (b *backend) Events(since uint64) ([]v1.Event, uint64) { return b.events.List(since) }

// PodMetrics is what `slicectl top pods` shows.
func (b *backend) PodMetrics(context.Context) ([]metricsv1beta1.PodMetrics, error) {
	return b.stats.PodMetrics(), nil
}

// NodeMetrics is what `slicectl top node` shows.
func (b *backend) NodeMetrics(context.Context) ([]metricsv1beta1.NodeMetrics, error) {
	if m, ok := b.stats.NodeMetrics(b.hostname); ok {
		return []metricsv1beta1.NodeMetrics{m}, nil
	}
	return nil, nil
}

var _ api.Backend = (*backend)(nil)

// ListPods lists the controller's pods without copying them (read-only, api.Backend).
func (b *backend) ListPods(context.Context) ([]v1.Pod, error) { return b.ctrl.ViewPods(), nil }

func (b *backend) GetPod(_ context.Context, namespace, name string) (v1.Pod, error) {
	p, ok := b.ctrl.Pod(namespace, name)
	if !ok {
		return v1.Pod{}, fmt.Errorf("pod %s/%s: %w", namespace, name, api.ErrNotFound)
	}
	return p, nil
}

// ApplyPod stores an API pod; the store's next snapshot hands it to the controller. A pod the
// API's Pod Security level refuses is refused here, as the API server refuses it, and never
// stored. The pod records who applied it (api.AnnotationAppliedBy).
func (b *backend) ApplyPod(ctx context.Context, body []byte, dryRun bool) (api.ApplyResult, error) {
	parsed, err := manifest.Parse("manifest", "api", body)
	if err != nil {
		return api.ApplyResult{}, &api.InvalidError{Problems: splitErrors(err)}
	}
	if len(parsed) != 1 {
		return api.ApplyResult{}, &api.InvalidError{Problems: []string{fmt.Sprintf("manifest: holds %d pods; apply one pod per request", len(parsed))}}
	}
	if p, ok := b.ctrl.Pod(parsed[0].Namespace, parsed[0].Name); ok && p.Annotations[pods.AnnotationSource] == pods.SourceFile {
		return api.ApplyResult{}, fmt.Errorf("pod %s/%s is defined by the manifest file %s; edit that file instead: %w",
			p.Namespace, p.Name, p.Annotations[pods.AnnotationOrigin], api.ErrConflict)
	}
	if d := admission.CheckPodSecurity(parsed[0], b.podSecurity[pods.SourceAPI]); !d.Admit {
		return api.ApplyResult{}, api.PodForbidden(parsed[0].Name, d.Message)
	}
	if errs := b.rt.Validate(parsed[0]); len(errs) > 0 {
		return api.ApplyResult{}, &api.InvalidError{Problems: splitErrors(errs.ToAggregate())}
	}
	opts := source.ApplyOptions{DryRun: dryRun}
	if peer, ok := api.PeerFrom(ctx); ok {
		opts.Annotations = map[string]string{api.AnnotationAppliedBy: peer.String()}
	}
	pod, action, err := b.store.ApplyAction(body, opts)
	switch {
	case errors.Is(err, source.ErrInvalid), errors.Is(err, source.ErrTooManyPods):
		return api.ApplyResult{}, &api.InvalidError{Problems: splitErrors(err)}
	case err != nil:
		// Storing failed (ENOSPC, EIO...): the server's error, with the file and errno.
		return api.ApplyResult{}, err
	}
	out := *pod.DeepCopy()
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[pods.AnnotationSource] = pods.SourceAPI
	out.Status.Phase = v1.PodPending
	out.Status.QOSClass = slices.QOSClass(pod)
	if dryRun {
		// The kubelet's admission against the node as it is now: a pod it would reject is
		// reported with the phase, reason and message it would get.
		if ok, reason, msg := b.ctrl.WouldAdmit(&out, pods.SourceAPI); !ok {
			out.Status.Phase, out.Status.Reason, out.Status.Message = v1.PodFailed, reason, msg
		}
	}
	return api.ApplyResult{Action: action, Pod: out}, nil
}

func splitErrors(err error) []string {
	type multi interface{ Unwrap() []error }
	var m multi
	if errors.As(err, &m) {
		var out []string
		for _, e := range m.Unwrap() {
			out = append(out, splitErrors(e)...)
		}
		return out
	}
	return []string{err.Error()}
}

func (b *backend) DeletePod(_ context.Context, namespace, name string) error {
	if p, ok := b.ctrl.Pod(namespace, name); ok && p.Annotations[pods.AnnotationSource] == pods.SourceFile {
		return fmt.Errorf("pod %s/%s comes from the manifest file %s; remove that file to delete it: %w",
			namespace, name, p.Annotations[pods.AnnotationOrigin], api.ErrConflict)
	}
	if err := b.store.Delete(namespace, name); err != nil {
		if errors.Is(err, source.ErrNotFound) {
			return fmt.Errorf("pod %s/%s: %w", namespace, name, api.ErrNotFound)
		}
		return err
	}
	return nil
}

var _ api.GracefulDeleter = (*backend)(nil)

// DeletePodGrace deletes an API pod whose containers get grace to stop (kubectl delete
// --grace-period): the controller is told before the store drops the pod.
func (b *backend) DeletePodGrace(ctx context.Context, namespace, name string, grace time.Duration) error {
	if p, ok := b.ctrl.Pod(namespace, name); ok && p.Annotations[pods.AnnotationSource] != pods.SourceFile {
		b.ctrl.SetDeletionGrace(namespace, name, grace)
	}
	return b.DeletePod(ctx, namespace, name)
}

func (b *backend) Logs(ctx context.Context, namespace, name, container string, opts pods.LogOptions, w io.Writer) error {
	p, ok := b.ctrl.Pod(namespace, name)
	if !ok {
		return fmt.Errorf("pod %s/%s: %w", namespace, name, api.ErrNotFound)
	}
	if container == "" {
		if len(p.Spec.Containers) != 1 {
			names := make([]string, 0, len(p.Spec.Containers))
			for _, c := range p.Spec.Containers {
				names = append(names, c.Name)
			}
			return fmt.Errorf("pod %s/%s has %d containers %v: choose one with -c: %w", namespace, name, len(names), names, api.ErrNotFound)
		}
		container = p.Spec.Containers[0].Name
	}
	// Init, regular and ephemeral containers all have logs (kubectl logs -c debugger).
	if c, _ := lifecycle.ContainerByName(&p, container); c == nil {
		return fmt.Errorf("pod %s/%s: container %q: %w", namespace, name, container, api.ErrNotFound)
	}
	return b.rt.Logs(ctx, &p, container, opts, w)
}

// Node is the node as a scheduler would see it: capacity (with max pods), allocatable and the
// conditions slicelet tracks.
func (b *backend) Node(context.Context) (v1.Node, error) {
	c := b.mcfg.Capacity
	capacity := c.ResourceList()
	capacity[v1.ResourcePods] = *resource.NewQuantity(int64(b.maxPods), resource.DecimalSI)
	alloc := slices.NodeAllocatable(c, b.mcfg.Node.SystemReserved, b.mcfg.Node.KubeReserved, b.mcfg.Node.HardEviction)
	alloc[v1.ResourcePods] = *resource.NewQuantity(int64(b.maxPods), resource.DecimalSI)
	conditions := nodeConditions(b.health.State())
	return v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: b.hostname, Labels: map[string]string{"kubernetes.io/os": "linux"}},
		Status: v1.NodeStatus{
			Capacity:    withDevices(capacity, b.devices, false),
			Allocatable: withDevices(alloc, b.devices, true),
			Conditions:  conditions,
			NodeInfo:    v1.NodeSystemInfo{OperatingSystem: "linux", ContainerRuntimeVersion: b.rt.Name()},
		},
	}, nil
}

func (b *backend) ExplainPod(_ context.Context, body []byte) (slices.PodExplanation, error) {
	parsed, err := manifest.Parse("manifest", "api", body)
	if err != nil {
		return slices.PodExplanation{}, &api.InvalidError{Problems: splitErrors(err)}
	}
	if len(parsed) != 1 {
		return slices.PodExplanation{}, &api.InvalidError{Problems: []string{fmt.Sprintf("manifest: holds %d pods; explain one pod per request", len(parsed))}}
	}
	x, err := slices.ExplainPod(parsed[0], b.mcfg.Pod, b.mode, b.mcfg.Capacity)
	if err != nil {
		return x, err
	}
	x.PodSecurity = admission.PodSecurityVerdicts(parsed[0], b.podSecurity)
	var problems []string
	for _, e := range b.rt.Validate(parsed[0]) {
		problems = append(problems, e.Error())
	}
	rv := verdict.FromProblems(b.rt.Name(), problems)
	x.Runtime = &rv
	// As an API pod would be admitted: explain's manifest arrives as an API pod does.
	ok, reason, msg := b.ctrl.WouldAdmit(parsed[0], pods.SourceAPI)
	x.Admission = &slices.AdmissionVerdict{Admit: ok, Reason: reason, Message: msg}
	return x, nil
}

func (b *backend) ExplainNode(context.Context) (slices.NodeExplanation, error) {
	var active []*v1.Pod
	for _, p := range b.ctrl.Pods() {
		if p.Status.Phase == v1.PodPending || p.Status.Phase == v1.PodRunning {
			active = append(active, &p)
		}
	}
	return slices.ExplainNode(b.mcfg.Capacity, b.mcfg.Node, active, b.mode)
}

// ExplainEviction explains the eviction manager's last decision; before the manager's first
// cycle the explanation is empty with At "".
func (b *backend) ExplainEviction(context.Context) (eviction.Explanation, error) {
	d, at := b.evm.LastDecisionAt()
	stamp := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	return eviction.Explain(d, stamp(at), stamp), nil
}

// CollectImages runs an image collection for the API. A collection that ran is a result (its
// problems are in Error), not an API error.
func (b *backend) CollectImages(ctx context.Context, dryRun bool) (gc.ImageResult, error) {
	res, err := b.gc.Images(ctx, dryRun)
	if err != nil && res.Error == nil {
		return res, err
	}
	return res, nil
}

// CollectContainers runs a container collection for the API (see CollectImages).
func (b *backend) CollectContainers(ctx context.Context, dryRun bool) (gc.ContainerResult, error) {
	res, err := b.gc.Containers(ctx, dryRun)
	if err != nil && res.Error == nil {
		return res, err
	}
	return res, nil
}
