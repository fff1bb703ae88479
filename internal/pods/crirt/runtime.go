package crirt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// DefaultLogRoot is where the kubelet (and so this runtime) keeps container logs.
const DefaultLogRoot = "/var/log/pods"

// Options configure a Runtime.
type Options struct {
	// Endpoint is the CRI socket, e.g. "unix:///run/containerd/containerd.sock". Required.
	Endpoint string
	// SandboxImage is the image of the pods' sandboxes, the one the runtime is configured with
	// (containerd: sandbox_image); it is only reported to image GC, which must never remove it.
	SandboxImage string
	// LogRoot holds the pods' log directories; DefaultLogRoot when empty.
	LogRoot string
	// Logger gets state changes; discarded when nil.
	Logger *slog.Logger
	// Clock; the real clock when nil.
	Clock clock.WithTicker
	// RetryInitial and RetryMax bound the exponential back-off of endpoint probes while the
	// runtime is down; DefaultRetryInitial and DefaultRetryMax when zero.
	RetryInitial, RetryMax time.Duration
	// CallTimeout bounds each CRI call (StopContainer gets its grace period on top);
	// DefaultCallTimeout when zero.
	CallTimeout time.Duration
	// FollowPoll is how often Logs with Follow looks for new output; 100 ms when zero.
	FollowPoll time.Duration
	// AppArmor reports whether the host enforces AppArmor (lifecycle.HostAppArmorEnabled
	// when nil): pods asking for a profile are refused otherwise, as the kubelet does.
	AppArmor func() bool
}

// Runtime is the CRI runtime, a worker.Runtime and worker.ImageService over a CRI endpoint,
// and the image side of GC. Its methods are safe for concurrent use.
type Runtime struct {
	opts   Options
	log    *slog.Logger
	clock  clock.WithTicker
	conn   *conn
	rs     runtimeapi.RuntimeServiceClient
	is     runtimeapi.ImageServiceClient
	cancel context.CancelFunc
	done   chan struct{}

	// statfs measures a filesystem; statfsBytes when nil (tests replace it).
	statfs func(path string) (capacity, available int64, err error)

	// sandboxImage caches SandboxImage's discovery (the option, or containerd's own).
	sandboxMu    sync.Mutex
	sandboxImage string
	// imageFsPath caches ImageFsInfo's mountpoint (ImageFsMountpoint).
	imageFsPath atomic.Pointer[string]

	// listings decodes ListContainers and ListPodSandbox (listing.go); the last full
	// listings' lengths size the next ones.
	listings                      listDecoder
	lastContainers, lastSandboxes atomic.Int64
}

// New returns a Runtime for the endpoint. A malformed endpoint or option is an error. An
// endpoint that does not answer is not: New probes it once (logging the failure, naming the
// endpoint) and keeps probing with exponential back-off in the background until ctx ends or
// Close is called; meanwhile calls fail with errors wrapping pods.ErrRuntimeUnavailable.
func New(ctx context.Context, opts Options) (*Runtime, error) {
	if _, err := ParseEndpoint(opts.Endpoint); err != nil {
		return nil, fmt.Errorf("cri runtime: %w", err)
	}
	if opts.LogRoot == "" {
		opts.LogRoot = DefaultLogRoot
	}
	if !filepath.IsAbs(opts.LogRoot) {
		return nil, fmt.Errorf("cri runtime: log root %q: must be an absolute path", opts.LogRoot)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.AppArmor == nil {
		opts.AppArmor = func() bool { return lifecycle.HostAppArmorEnabled("/sys") }
	}
	if opts.RetryInitial <= 0 {
		opts.RetryInitial = DefaultRetryInitial
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = DefaultRetryMax
	}
	opts.RetryMax = max(opts.RetryMax, opts.RetryInitial)
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.FollowPoll <= 0 {
		opts.FollowPoll = 100 * time.Millisecond
	}
	cc, err := dial(opts.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("cri runtime: %w", err)
	}
	rs := runtimeapi.NewRuntimeServiceClient(cc)
	r := &Runtime{
		opts: opts, log: opts.Logger, clock: opts.Clock, rs: rs, is: runtimeapi.NewImageServiceClient(cc),
		done: make(chan struct{}),
	}
	r.conn = newConn(opts.Endpoint, opts.Logger, opts.Clock, opts.RetryInitial, opts.RetryMax, versionProbe(cc, rs, DefaultProbeTimeout))
	r.conn.cc = cc
	// One probe now, so that a daemon that starts with the runtime up is ready at once and
	// one that starts without it says so in its first lines.
	r.conn.set(r.conn.probe(ctx))
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel = cancel
	go func() {
		defer close(r.done)
		defer cc.Close()
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		r.conn.run(lctx)
	}()
	return r, nil
}

// Close stops probing and closes the connection.
func (r *Runtime) Close() error {
	r.cancel()
	<-r.done
	return nil
}

// Name is "cri".
func (r *Runtime) Name() string { return "cri" }

// Type is "containerd": status container IDs are containerd://<id>, as the kubelet writes them
// for containerd.
func (r *Runtime) Type() string { return "containerd" }

// Endpoint is the CRI endpoint.
func (r *Runtime) Endpoint() string { return r.opts.Endpoint }

// Err is nil while the runtime answers, else why it is unavailable (wrapping
// pods.ErrRuntimeUnavailable).
func (r *Runtime) Err() error { return r.conn.ready() }

// Version is the runtime's name and version as a Node's nodeInfo.containerRuntimeVersion says
// them, e.g. "containerd://1.6.20": the CRI Version call's RuntimeName://RuntimeVersion, as
// the kubelet's VersionInfo setter (pkg/kubelet/nodestatus/setters.go) reports it.
func (r *Runtime) Version(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultProbeTimeout)
	defer cancel()
	v, err := r.rs.Version(ctx, &runtimeapi.VersionRequest{Version: "v1"})
	if err != nil {
		return "", fmt.Errorf("cri runtime version: %w", err)
	}
	return v.RuntimeName + "://" + runtimeVersion(v.RuntimeVersion), nil
}

// NetworkReady is nil when the runtime reports its pod network ready (the CRI Status call's
// NetworkReady condition true), else why not in the kubelet's words: "container runtime network
// not ready: NetworkReady=false reason:NetworkPluginNotReady message:..." (pkg/kubelet/kubelet.go
// updateRuntimeUp; kubecontainer.RuntimeCondition's String), which the kubelet puts in its
// Node's Ready condition. A runtime that cannot be asked is the runtime's error, not the
// network's.
func (r *Runtime) NetworkReady(ctx context.Context) error {
	resp, err := call(ctx, r, 0, func(ctx context.Context) (*runtimeapi.StatusResponse, error) {
		return r.rs.Status(ctx, &runtimeapi.StatusRequest{})
	})
	if err != nil {
		return fmt.Errorf("cri runtime status: %w", err)
	}
	return networkCondition(resp.GetStatus())
}

// networkCondition is NetworkReady's decision on a runtime status.
func networkCondition(st *runtimeapi.RuntimeStatus) error {
	for _, c := range st.GetConditions() {
		if c.Type != runtimeapi.NetworkReady {
			continue
		}
		if c.Status {
			return nil
		}
		return fmt.Errorf("container runtime network not ready: %s=%t reason:%s message:%s", c.Type, c.Status, c.Reason, c.Message)
	}
	return errors.New("container runtime network not ready: <nil>")
}

// runtimeVersion is the runtime's version as the kubelet reports it in nodeInfo: parsed as a
// semantic version, else as a generic one (so containerd's Debian "1.6.20~ds1" is 1.6.20),
// printed back (pkg/kubelet/kuberuntime/kuberuntime_manager.go, newRuntimeVersion); as given
// when it is neither.
func runtimeVersion(s string) string {
	v, err := utilversion.ParseSemantic(s)
	if err != nil {
		v, err = utilversion.ParseGeneric(s)
	}
	if err != nil {
		return s
	}
	return v.String()
}

// WaitReady waits until the runtime answers or ctx ends.
func (r *Runtime) WaitReady(ctx context.Context) error {
	for {
		up, changed := r.conn.state()
		if up {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(r.conn.ready(), ctx.Err())
		case <-changed:
		}
	}
}

// call runs one CRI call with the call timeout when the runtime answers; a transport failure
// marks it down. Errors wrap pods.ErrRuntimeUnavailable when the runtime cannot be reached.
func call[T any](ctx context.Context, r *Runtime, extra time.Duration, f func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	if err := r.conn.ready(); err != nil {
		return zero, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.CallTimeout+extra)
	defer cancel()
	out, err := f(ctx)
	if err != nil {
		return zero, r.conn.check(err)
	}
	return out, nil
}
