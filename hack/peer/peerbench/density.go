package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/slicelet/slicelet/hack/peer/controlplane"
	"github.com/slicelet/slicelet/hack/peer/peerrun"
)

// podStartupSLO is the Kubernetes scalability SLO for pod startup, in ms: the 99th percentile
// of the startup latency of stateless, schedulable pods (image pull and init containers
// excluded), from the pod's creation to all its containers reported as started and observed
// through a watch, is at most 5 s (kubernetes/community sig-scalability/slos/pod_startup_latency.md).
const podStartupSLO = 5000

// densityMetrics are the rows of the density table for pods background pods; the ratio
// targets only when the kubelet is measured too.
func densityMetrics(pods int, withKubelet bool) []metric {
	ms := []metric{
		{key: "density-start", title: fmt.Sprintf("agent start → %d API pods started in the API (the last)", pods), unit: "ms"},
		{key: "density-one", title: fmt.Sprintf("one more pod created on the node with %d → started in the API, p50 of all samples", pods), unit: "ms", quantile: 0.5},
		{key: "density-one", title: fmt.Sprintf("one more pod created on the node with %d → started in the API, p99 of all samples", pods), unit: "ms", quantile: 0.99,
			limit: podStartupSLO, targetText: "≤ 5000 ms (SLO)"},
		{key: "density-rss", title: fmt.Sprintf("RSS with %d API pods, idle", pods), unit: "MiB"},
		{key: "density-cpu", title: fmt.Sprintf("idle CPU with %d API pods", pods), unit: "% of a core"},
	}
	if withKubelet {
		ms[3].target, ms[3].targetText = 1.0/3, "≤ 1/3"
		ms[4].target, ms[4].targetText = 0.25, "≤ 1/4"
	}
	return ms
}

// pausePod is the density test's pod (test/e2e_node/density_test.go): one container of the
// pause image with its own entrypoint, BestEffort, bound to the node, without a
// service-account token. Here the pause image is the node's sandbox image.
func (b *bench) pausePod(name, batch string) *v1.Pod {
	p := clusterPod(name, batch)
	p.Spec.Containers[0].Image, p.Spec.Containers[0].Command = b.node.Containerd.SandboxImage, nil
	return p
}

// startedInAPI is the pod startup SLI's end: every container reported as started (running,
// or terminated after it ran), whatever its readiness.
func startedInAPI(p *v1.Pod) bool {
	if len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil && c.State.Terminated == nil && c.LastTerminationState.Terminated == nil {
			return false
		}
	}
	return true
}

// densityAgents are the agents of the density rounds in round rep's order.
func (b *bench) densityAgents(rep int) []peerrun.Kind {
	return slices.DeleteFunc(order(rep), func(k peerrun.Kind) bool { return !slices.Contains(b.o.densityAgents, k) })
}

// densityRounds runs the density scenario -reps times per agent, alternated, on one control
// plane, as clusterRounds does.
func (b *bench) densityRounds(ctx context.Context) error {
	cp, admin, err := b.startControlPlane(ctx, "density-controlplane")
	if err != nil {
		return err
	}
	defer func() { _ = cp.Stop(context.WithoutCancel(ctx)) }()
	for rep := range b.o.reps {
		for _, k := range b.densityAgents(rep) {
			b.res.DensityLoad = append(b.res.DensityLoad, loadAvg())
			if err := b.densityRound(ctx, k, rep, cp, admin); err != nil {
				b.fail(k, rep, "density", err)
			}
			if err := b.clusterReset(ctx, admin); err != nil {
				return fmt.Errorf("after %s round %d: %w", k, rep, err)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	b.res.DensityLoad = append(b.res.DensityLoad, loadAvg())
	return nil
}

// densityRound is one agent's turn: -density-pods pause pods created through the API and
// bound to the node before the agent starts; agent start → the last of them started in a
// watch event; its RSS and CPU over -cluster-idle with them; then -density-samples pods
// created one at a time on the loaded node, each timed from its create call to its watch
// event (the pod startup SLI, measured from a little before its creation timestamp, which the
// API keeps to the second).
func (b *bench) densityRound(ctx context.Context, k peerrun.Kind, rep int, cp *controlplane.ControlPlane, admin kubernetes.Interface) error {
	if err := b.clearManifests(); err != nil {
		return err
	}
	n := b.o.densityPods
	batch := fmt.Sprintf("r%d-%s-dense", rep, k)
	if err := b.createPods(ctx, admin, batch, n); err != nil {
		return err
	}
	limit := 30 * time.Minute
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	pw, err := watchPods(wctx, admin.CoreV1().Pods(metav1.NamespaceDefault), clusterLabel+"="+batch)
	if err != nil {
		return err
	}
	defer pw.stop()
	o := b.clusterAgent(k, cp)
	o.Config = peerrun.DefaultNodeConfig()
	o.Config.MaxPods = n + b.o.densitySamples
	t0 := time.Now()
	a, err := b.node.StartAgent(ctx, o)
	if err != nil {
		return err
	}
	defer func() { _ = a.Stop(context.WithoutCancel(ctx)) }()
	seen, last, err := pw.until(wctx, n, startedInAPI, limit)
	if err != nil {
		return fmt.Errorf("start with %d pods: %w; %s journal: %s", n, err, a.Unit, a.Journal(context.WithoutCancel(ctx), 15))
	}
	took := seen[last].Sub(t0)
	b.res.add("density-start", k, ms(took))
	logf("%s density round %d: %d API pods started in the API %s after the agent's start", k, rep, n, took.Round(time.Millisecond))
	if err := sleep(ctx, 10*time.Second); err != nil { // the pods' status settles
		return err
	}
	fp, err := idleFootprint(ctx, a.Unit, b.o.clusterIdle)
	if err != nil {
		return err
	}
	rss, cpu := fp.rss, fp.cpu
	b.res.add("density-rss", k, rss)
	b.res.add("density-cpu", k, cpu)
	logf("%s density round %d: idle with %d API pods: RSS %.1f MiB, CPU %.2f%% of a core", k, rep, n, rss, cpu)
	pods := apiPods{pod: b.pausePod, up: startedInAPI}
	for i := range b.o.densitySamples {
		took, _, err := b.createRunning(ctx, admin, fmt.Sprintf("r%d-%s-seq%02d", rep, k, i), 1, 3*time.Minute, pods)
		if err != nil {
			return fmt.Errorf("pod %d on the loaded node: %w; %s journal: %s", i, err, a.Unit, a.Journal(context.WithoutCancel(ctx), 15))
		}
		b.res.add("density-one", k, ms(took))
		logf("%s density round %d: pod %d on the node with %d started in the API %s after the create", k, rep, i, n+i, took.Round(time.Millisecond))
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	return nil
}

// createPods creates n pause pods of batch through the API, a few at a time (not timed: the
// agent is not running yet).
func (b *bench) createPods(ctx context.Context, admin kubernetes.Interface, batch string, n int) error {
	pods := admin.CoreV1().Pods(metav1.NamespaceDefault)
	sem := make(chan struct{}, 32)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_, errs[i] = pods.Create(ctx, b.pausePod(fmt.Sprintf("%s-p%04d", batch, i), batch), metav1.CreateOptions{})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("create %d pods: %w", n, err)
	}
	return nil
}

// densityHeading is the docs/cluster.md section of a density run: one per pod count, so that
// the 250-pod and the 1000-pod runs keep their own tables.
func densityHeading(o options) string {
	return fmt.Sprintf("## Benchmarks at %d pods", o.densityPods)
}

// renderDensity is the body of the density section.
func renderDensity(o options, r results, mach string, began time.Time, took time.Duration) string {
	var b strings.Builder
	withKubelet := slices.Contains(o.densityAgents, peerrun.Kubelet)
	fmt.Fprintf(&b, "`build/peerbench -only density -reps %d -density-pods %d -density-samples %d -density-agents %s -cluster-idle %s -out ''` (`make peer-bench ONLY=density`, or `ONLY=density1000` for 1000 pods with slicelet alone), run %s, took %s. ",
		o.reps, o.densityPods, o.densitySamples, joinKinds(o.densityAgents), o.clusterIdle, began.UTC().Format("2006-01-02 15:04 UTC"), took.Round(time.Second))
	b.WriteString("The cluster rounds' setting (one control plane from build/peer, no scheduler: pods created with `spec.nodeName`; one containerd 1.6 with the CRI runtime, a shim process per pod; a cgroup v1 (hybrid) systemd sandbox; the agents in turns as the same Node, deleted between turns)")
	fmt.Fprintf(&b, " with `maxPods` / `node.max_pods` %d. ", o.densityPods+o.densitySamples)
	fmt.Fprintf(&b, "The pods are the node density test's (test/e2e_node/density_test.go): one container of the pause image (here the node's sandbox image) with its own entrypoint, BestEffort, no volumes, no service-account token. Each round creates %d of them bound to the node before the agent starts and times the agent's start to the watch event that shows the last one started; ", o.densityPods)
	fmt.Fprintf(&b, "then the agent's RSS (VmRSS of its main process) and CPU (user+system) over %s; then %d more pods created one at a time on the loaded node (as the density test's sequential case), each timed from its create call to the watch event that shows all its containers started: the pod startup SLI (from a little before the creation timestamp, which the API keeps to the second), whose SLO is a 99th percentile of at most 5 s (kubernetes/community sig-scalability/slos/pod_startup_latency.md; no image pull here, the image is local). ", o.clusterIdle, o.densitySamples)
	b.WriteString("The p50 and p99 rows are nearest-rank percentiles of all samples of all rounds (with 20 samples the p99 is the largest); the other figures are medians with the range and the number of samples; the ratio is slicelet's figure over the kubelet's. ")
	b.WriteString("Latencies depend on the machine's load (recorded below); RSS and CPU seconds much less.\n\n")
	fmt.Fprintf(&b, "Machine: %s. Load average (1, 5, 15 min) at each turn's start and at the end: %s (2 cores shared with other work).\n\n", mach, strings.Join(r.DensityLoad, "; "))
	b.WriteString(table(rows(r, densityMetrics(o.densityPods, withKubelet))))
	failedRounds(&b, r.Errors, "density")
	return b.String()
}
