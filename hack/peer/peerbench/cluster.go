package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/procfs"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/hack/peer/controlplane"
	"github.com/slicelet/slicelet/hack/peer/peerrun"
)

// clusterLabel marks the cluster rounds' pods, with the batch as its value.
const clusterLabel = "peerbench.slicelet.io/batch"

// clusterPod is a BestEffort busybox pod sleeping, bound to the node (no scheduler: the
// figure is the node's), without a service-account token (the control plane runs no
// controller manager, so no kube-root-ca.crt ConfigMap to project).
func clusterPod(name, batch string) *v1.Pod {
	no := false
	grace := int64(1)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, Labels: map[string]string{clusterLabel: batch}},
		Spec: v1.PodSpec{
			NodeName:                      peerrun.NodeName,
			AutomountServiceAccountToken:  &no,
			TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{
				Name: "main", Image: peerrun.TestImage, Command: []string{"/bin/sleep", "infinity"},
			}},
		},
	}
}

// runningInAPI reports whether the API shows the pod Running with every container ready.
func runningInAPI(p *v1.Pod) bool {
	if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if !c.Ready {
			return false
		}
	}
	return true
}

// clusterRounds runs the cluster scenario -reps times per agent, alternated, on one control
// plane (etcd and kube-apiserver with the Node authorizer and NodeRestriction): each turn
// registers the node afresh under the agent's own credentials (system:node:<name>).
func (b *bench) clusterRounds(ctx context.Context) error {
	cp, admin, err := b.startControlPlane(ctx, "cluster-controlplane")
	if err != nil {
		return err
	}
	defer func() { _ = cp.Stop(context.WithoutCancel(ctx)) }()
	for rep := range b.o.reps {
		for _, k := range order(rep) {
			b.res.Load = append(b.res.Load, loadAvg())
			if err := b.clusterRound(ctx, k, rep, cp, admin); err != nil {
				b.fail(k, rep, "cluster", err)
			}
			if err := b.clusterReset(ctx, admin); err != nil {
				return fmt.Errorf("after %s round %d: %w", k, rep, err)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	b.res.Load = append(b.res.Load, loadAvg())
	return nil
}

// startControlPlane starts a control plane in the work directory's dir for the node and its
// admin client; the caller stops it.
func (b *bench) startControlPlane(ctx context.Context, dir string) (*controlplane.ControlPlane, kubernetes.Interface, error) {
	cp, err := controlplane.Start(ctx, controlplane.Config{Dir: filepath.Join(b.o.work, dir), BinDir: b.o.bin, Nodes: []string{peerrun.NodeName}})
	if err != nil {
		return nil, nil, err
	}
	rc, err := cp.RESTConfig(cp.AdminKubeconfig())
	if err == nil {
		// The benchmark's own client must not be what limits many creations at once.
		rc.QPS, rc.Burst = 1000, 1000
		var admin kubernetes.Interface
		if admin, err = kubernetes.NewForConfig(rc); err == nil {
			return cp, admin, nil
		}
	}
	return nil, nil, errors.Join(err, cp.Stop(context.WithoutCancel(ctx)))
}

// loadAvg is /proc/loadavg's 1, 5 and 15 minute averages.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// clusterReset leaves the control plane as before the first round: the cluster pods deleted at
// once (grace 0), the Node and its Lease deleted.
func (b *bench) clusterReset(ctx context.Context, admin kubernetes.Interface) error {
	ctx = context.WithoutCancel(ctx)
	zero := int64(0)
	pods := admin.CoreV1().Pods(metav1.NamespaceDefault)
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{LabelSelector: clusterLabel}); err != nil {
		return fmt.Errorf("delete the pods: %w", err)
	}
	if err := admin.CoreV1().Nodes().Delete(ctx, peerrun.NodeName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the node: %w", err)
	}
	if err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Delete(ctx, peerrun.NodeName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the lease: %w", err)
	}
	return b.waitNoPods(ctx, 3*time.Minute)
}

// clusterAgent is the agent registered with cp as peerrun.NodeName.
func (b *bench) clusterAgent(k peerrun.Kind, cp *controlplane.ControlPlane) peerrun.AgentOptions {
	o := peerrun.AgentOptions{Kind: k, Binary: b.binary(k), ManifestDir: b.manifests}
	if k == peerrun.Kubelet {
		o.ExtraArgs = []string{"--kubeconfig=" + cp.NodeKubeconfig(peerrun.NodeName)}
	} else {
		o.SliceletTOML = fmt.Sprintf("[cluster]\nenabled = true\nkubeconfig = %q\nnode_name = %q\nnode_ip = \"127.0.0.1\"\n", cp.NodeKubeconfig(peerrun.NodeName), peerrun.NodeName)
	}
	return o
}

// clusterRound is one agent's turn: start → Node Ready; one pod created → Running in the API,
// five times; 30 at once; then -pods pods, and the agent's RSS and CPU over the idle window.
func (b *bench) clusterRound(ctx context.Context, k peerrun.Kind, rep int, cp *controlplane.ControlPlane, admin kubernetes.Interface) error {
	if err := b.clearManifests(); err != nil {
		return err
	}
	ready, err := b.startNodeReady(ctx, k, cp, admin)
	a := ready.agent
	if a != nil {
		defer func() { _ = a.Stop(context.WithoutCancel(ctx)) }()
	}
	if err != nil {
		return err
	}
	b.res.add("cluster-ready", k, ms(ready.took))
	logf("%s cluster round %d: node Ready %s after the start", k, rep, ready.took.Round(time.Millisecond))
	if err := sleep(ctx, 3*time.Second); err != nil { // let its start-up work finish
		return err
	}
	for j, n := range []int{1, 1, 1, 1, 1, 30} {
		batch := fmt.Sprintf("r%d-%s-s%d", rep, k, j)
		took, lag, err := b.createRunning(ctx, admin, batch, n, 3*time.Minute, sleepers)
		if err != nil {
			return fmt.Errorf("%d pods: %w; %s journal: %s", n, err, a.Unit, a.Journal(context.WithoutCancel(ctx), 15))
		}
		key := map[int]string{1: "cluster-one", 30: "cluster-thirty"}[n]
		b.res.add(key, k, ms(took))
		if n == 1 && lag >= 0 {
			b.res.add("cluster-lag", k, ms(lag))
		}
		logf("%s cluster round %d: %d pods Running in the API %s after the create (status %s after the container started)", k, rep, n, took.Round(time.Millisecond), lag.Round(time.Millisecond))
		if err := b.deleteBatch(ctx, admin, batch); err != nil {
			return err
		}
	}
	batch := fmt.Sprintf("r%d-%s-idle", rep, k)
	took, _, err := b.createRunning(ctx, admin, batch, b.o.pods, 10*time.Minute, sleepers)
	if err != nil {
		return fmt.Errorf("%d pods: %w", b.o.pods, err)
	}
	b.res.add("cluster-many", k, ms(took))
	logf("%s cluster round %d: %d pods Running in the API %s after the first create", k, rep, b.o.pods, took.Round(time.Millisecond))
	if err := sleep(ctx, 10*time.Second); err != nil { // the pods' status settles
		return err
	}
	fp, err := idleFootprint(ctx, a.Unit, b.o.clusterIdle)
	if err != nil {
		return err
	}
	b.res.add("cluster-rss", k, fp.rss)
	b.res.add("cluster-cpu", k, fp.cpu)
	logf("%s cluster round %d: idle with %d API pods: RSS %.1f MiB (anonymous %.1f, file %.1f), CPU %.2f%% of a core", k, rep, b.o.pods, fp.rss, fp.anon, fp.file, fp.cpu)
	return nil
}

// nodeReady is an agent started and how long until the API showed its Node Ready.
type nodeReady struct {
	agent *peerrun.Agent
	took  time.Duration
}

// startNodeReady watches the (deleted) Node, starts the agent and returns when a watch event
// shows the Node's Ready condition True.
func (b *bench) startNodeReady(ctx context.Context, k peerrun.Kind, cp *controlplane.ControlPlane, admin kubernetes.Interface) (nodeReady, error) {
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	w, err := admin.CoreV1().Nodes().Watch(wctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", peerrun.NodeName).String()})
	if err != nil {
		return nodeReady{}, fmt.Errorf("watch the node: %w", err)
	}
	defer w.Stop()
	t0 := time.Now()
	a, err := b.node.StartAgent(ctx, b.clusterAgent(k, cp))
	if err != nil {
		return nodeReady{}, err
	}
	for ev := range w.ResultChan() {
		n, ok := ev.Object.(*v1.Node)
		if !ok || ev.Type == watch.Deleted {
			continue
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
				return nodeReady{agent: a, took: time.Since(t0)}, nil
			}
		}
	}
	return nodeReady{agent: a}, fmt.Errorf("node %s not Ready within 3m; %s journal: %s", peerrun.NodeName, a.Unit, a.Journal(context.WithoutCancel(ctx), 15))
}

// apiPods are the pods of a batch: how each is made and when the API shows it up.
type apiPods struct {
	pod func(name, batch string) *v1.Pod
	up  func(*v1.Pod) bool
}

// sleepers are the cluster rounds' pods: busybox sleepers, up when Running with their
// containers ready.
var sleepers = apiPods{pod: clusterPod, up: runningInAPI}

// createRunning creates n pods of batch at once (one goroutine each) and returns the time from
// the first create call until a watch event showed the last of them up, and for one pod how
// long after its container's StartedAt the API showed it (-1 when unknown).
func (b *bench) createRunning(ctx context.Context, admin kubernetes.Interface, batch string, n int, limit time.Duration, kind apiPods) (time.Duration, time.Duration, error) {
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	pods := admin.CoreV1().Pods(metav1.NamespaceDefault)
	pw, err := watchPods(wctx, pods, clusterLabel+"="+batch)
	if err != nil {
		return 0, 0, err
	}
	defer pw.stop()
	errs := make([]error, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range n {
		wg.Go(func() {
			_, errs[i] = pods.Create(wctx, kind.pod(fmt.Sprintf("%s-p%03d", batch, i), batch), metav1.CreateOptions{})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, 0, fmt.Errorf("create: %w", err)
	}
	seen, last, err := pw.until(wctx, n, kind.up, limit)
	if err != nil {
		return 0, 0, err
	}
	took := seen[last].Sub(t0)
	lag := time.Duration(-1)
	if n == 1 {
		if started, err := b.startedAt(ctx, last); err == nil {
			lag = seen[last].Sub(started)
		}
	}
	return took, lag, nil
}

// podWatch follows the pods of one label selector from a list: the API server may end a watch
// at any time, and then the pods are listed and watched again from the list.
type podWatch struct {
	pods         kubernetesPods
	selector, rv string
	w            watch.Interface
}

// watchPods lists the pods of selector and watches them from the list.
func watchPods(ctx context.Context, pods kubernetesPods, selector string) (*podWatch, error) {
	pw := &podWatch{pods: pods, selector: selector}
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("list the pods: %w", err)
	}
	pw.rv = list.ResourceVersion
	if pw.w, err = pods.Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: pw.rv}); err != nil {
		return nil, fmt.Errorf("watch the pods: %w", err)
	}
	return pw, nil
}

// kubernetesPods is the part of the typed pods client podWatch uses.
type kubernetesPods interface {
	List(context.Context, metav1.ListOptions) (*v1.PodList, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

func (pw *podWatch) stop() {
	if pw.w != nil {
		pw.w.Stop()
	}
}

// until returns when n pods of the selector have been seen as done says, with the moment each
// was first seen so and the name of the last; ctx bounds it (limit is for the message).
func (pw *podWatch) until(ctx context.Context, n int, done func(*v1.Pod) bool, limit time.Duration) (map[string]time.Time, string, error) {
	seenAt := map[string]time.Time{}
	var last string
	seen := func(p *v1.Pod) {
		if _, ok := seenAt[p.Name]; !ok && done(p) {
			seenAt[p.Name], last = time.Now(), p.Name
		}
	}
	rewatched := 0
	for len(seenAt) < n {
		for ev := range pw.w.ResultChan() {
			if ev.Type == watch.Error {
				pw.rv = "" // e.g. 410 Gone: list again
				break
			}
			if p, ok := ev.Object.(*v1.Pod); ok {
				pw.rv = p.ResourceVersion
				if ev.Type != watch.Deleted {
					seen(p)
				}
			}
			if len(seenAt) == n {
				break
			}
		}
		pw.w.Stop()
		if len(seenAt) == n {
			break
		}
		if ctx.Err() != nil {
			return nil, "", fmt.Errorf("%d of %d pods in the API as awaited after %s", len(seenAt), n, limit)
		}
		rewatched++
		if pw.rv == "" {
			list, err := pw.pods.List(ctx, metav1.ListOptions{LabelSelector: pw.selector})
			if err != nil {
				return nil, "", fmt.Errorf("list the pods: %w", err)
			}
			pw.rv = list.ResourceVersion
			for i := range list.Items {
				seen(&list.Items[i])
			}
		}
		var err error
		if pw.w, err = pw.pods.Watch(ctx, metav1.ListOptions{LabelSelector: pw.selector, ResourceVersion: pw.rv}); err != nil {
			return nil, "", fmt.Errorf("watch the pods again: %w", err)
		}
	}
	if rewatched > 0 {
		logf("the watch of %s ended %d times before the pods were as awaited (listed and watched again)", pw.selector, rewatched)
	}
	return seenAt, last, nil
}

// startedAt is containerd's StartedAt of the running container of the pod named name.
func (b *bench) startedAt(ctx context.Context, name string) (time.Time, error) {
	sbs, err := b.rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}})
	if err != nil {
		return time.Time{}, err
	}
	for _, sb := range sbs.Items {
		if sb.Metadata.GetName() != name {
			continue
		}
		cs, err := b.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: sb.Id}})
		if err != nil {
			return time.Time{}, err
		}
		for _, c := range cs.Containers {
			st, err := b.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id})
			if err == nil && st.Status.StartedAt > 0 {
				return time.Unix(0, st.Status.StartedAt), nil
			}
		}
	}
	return time.Time{}, fmt.Errorf("no running container of %s", name)
}

// deleteBatch deletes the batch's pods at once (grace 0) and waits until containerd has no
// ready pod sandbox left.
func (b *bench) deleteBatch(ctx context.Context, admin kubernetes.Interface, batch string) error {
	zero := int64(0)
	if err := admin.CoreV1().Pods(metav1.NamespaceDefault).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{LabelSelector: clusterLabel + "=" + batch}); err != nil {
		return fmt.Errorf("delete the pods: %w", err)
	}
	if err := b.waitNoPods(ctx, 3*time.Minute); err != nil {
		return err
	}
	return sleep(ctx, time.Second)
}

// footprint is an agent's idle footprint: VmRSS and its anonymous and file-backed parts (MiB)
// of the unit's main process, and its CPU time (user+system, % of a core) over the window.
type footprint struct {
	rss, anon, file, cpu float64
}

// idleFootprint reads the footprint of the unit's main process over window.
func idleFootprint(ctx context.Context, unit string, window time.Duration) (footprint, error) {
	pid, err := mainPID(ctx, unit)
	if err != nil {
		return footprint{}, err
	}
	p, err := procfs.NewProc(pid)
	if err != nil {
		return footprint{}, err
	}
	s0, err := p.Stat()
	if err != nil {
		return footprint{}, err
	}
	t1 := time.Now()
	if err := sleep(ctx, window); err != nil {
		return footprint{}, err
	}
	s1, err := p.Stat()
	if err != nil {
		return footprint{}, err
	}
	cpu := (s1.CPUTime() - s0.CPUTime()) / time.Since(t1).Seconds() * 100
	st, err := p.NewStatus()
	if err != nil {
		return footprint{}, err
	}
	const mib = 1 << 20
	return footprint{rss: float64(st.VmRSS) / mib, anon: float64(st.RssAnon) / mib, file: float64(st.RssFile) / mib, cpu: cpu}, nil
}
