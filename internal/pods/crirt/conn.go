package crirt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/internal/pods"
)

// Defaults of the endpoint probing.
const (
	// DefaultRetryInitial is the first wait after a failed probe of the endpoint.
	DefaultRetryInitial = 500 * time.Millisecond
	// DefaultRetryMax bounds the wait between probes, and so how long pods stay Unknown after
	// the runtime is back.
	DefaultRetryMax = 10 * time.Second
	// DefaultProbeTimeout bounds one Version call.
	DefaultProbeTimeout = 5 * time.Second
	// DefaultCallTimeout bounds every other CRI call (the kubelet's runtime-request-timeout).
	DefaultCallTimeout = 2 * time.Minute
	// maxMsgSize is the kubelet's CRI message size limit (16 MiB).
	maxMsgSize = 16 << 20
)

// ParseEndpoint checks a CRI endpoint and returns the socket path. Only unix sockets are
// supported: "unix:///run/containerd/containerd.sock" (a bare absolute path is taken as one, as
// crictl does).
func ParseEndpoint(endpoint string) (string, error) {
	p := endpoint
	switch {
	case strings.HasPrefix(endpoint, "unix://"):
		p = strings.TrimPrefix(endpoint, "unix://")
	case strings.Contains(endpoint, "://"):
		return "", fmt.Errorf("cri endpoint %q: only unix:// endpoints are supported", endpoint)
	}
	if p == "" || !filepath.IsAbs(p) {
		return "", fmt.Errorf("cri endpoint %q: want unix:///absolute/path.sock", endpoint)
	}
	if len(p) >= 108 {
		return "", fmt.Errorf("cri endpoint %q: socket path is %d bytes, unix sockets allow 107", endpoint, len(p))
	}
	return filepath.Clean(p), nil
}

// prober asks the endpoint whether it is a CRI runtime that answers.
type prober func(ctx context.Context) error

// conn is the gRPC connection to the CRI endpoint and whether the runtime answers. The probe
// loop (run) tests the endpoint with exponential back-off while it is down; a call that fails
// with Unavailable marks it down and wakes the loop.
type conn struct {
	endpoint string
	log      *slog.Logger
	initial  time.Duration
	max      time.Duration
	probe    prober
	clock    clock.Clock

	cc *grpc.ClientConn // nil in tests of the loop alone

	mu      sync.Mutex
	up      bool
	lastErr error
	changed chan struct{} // closed and replaced at every change of up
	kick    chan struct{}
}

func newConn(endpoint string, log *slog.Logger, clk clock.Clock, initial, maxWait time.Duration, probe prober) *conn {
	return &conn{
		endpoint: endpoint, log: log, clock: clk, initial: initial, max: maxWait, probe: probe,
		lastErr: errors.New("not probed yet"),
		changed: make(chan struct{}), kick: make(chan struct{}, 1),
	}
}

// dial creates the (lazy) gRPC client of a unix socket endpoint.
func dial(endpoint string) (*grpc.ClientConn, error) {
	if _, err := ParseEndpoint(endpoint); err != nil {
		return nil, err
	}
	target := endpoint
	if !strings.HasPrefix(target, "unix://") {
		target = "unix://" + target
	}
	cc, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)),
		// gRPC's own reconnect back-off goes up to 120 s; the probe loop owns the back-off, so
		// gRPC must reconnect as soon as it is asked.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: DefaultProbeTimeout,
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("cri endpoint %s: %w", endpoint, err)
	}
	return cc, nil
}

// versionProbe is the prober of a real endpoint: Version must answer with CRI v1.
func versionProbe(cc *grpc.ClientConn, rs runtimeapi.RuntimeServiceClient, timeout time.Duration) prober {
	return func(ctx context.Context) error {
		cc.ResetConnectBackoff()
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		v, err := rs.Version(ctx, &runtimeapi.VersionRequest{Version: "v1"})
		if status.Code(err) == codes.Unimplemented {
			return fmt.Errorf("not a CRI v1 runtime (Version is unimplemented): %w", err)
		}
		if err != nil {
			return err
		}
		if v.RuntimeApiVersion != "v1" {
			return fmt.Errorf("runtime %s %s speaks CRI %q, want v1", v.RuntimeName, v.RuntimeVersion, v.RuntimeApiVersion)
		}
		return nil
	}
}

// run probes the endpoint until ctx ends: with back-off (initial, doubling, at most max) while
// it fails; once it answers, again only when a call reports it unavailable. State changes are
// logged once each.
func (c *conn) run(ctx context.Context) {
	delay := c.initial
	for {
		err := c.probe(ctx)
		if ctx.Err() != nil {
			return
		}
		c.set(err)
		if err == nil {
			delay = c.initial
			select {
			case <-ctx.Done():
				return
			case <-c.kick:
			}
			continue
		}
		t := c.clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		delay = min(2*delay, c.max)
	}
}

// set records a probe's outcome.
func (c *conn) set(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	was := c.up
	prevErr := c.lastErr
	c.up, c.lastErr = err == nil, err
	if was != c.up {
		close(c.changed)
		c.changed = make(chan struct{})
	}
	switch {
	case c.up && !was:
		c.log.Info("cri runtime connected", "endpoint", c.endpoint)
	case !c.up && was:
		c.log.Warn("cri runtime unavailable, retrying with back-off", "endpoint", c.endpoint, "error", err)
	case !c.up && (prevErr == nil || prevErr.Error() != err.Error()):
		c.log.Warn("cri runtime not reachable, retrying with back-off", "endpoint", c.endpoint, "error", err)
	}
}

// markDown records a call that found the runtime unavailable and wakes the probe loop.
func (c *conn) markDown(err error) {
	c.mu.Lock()
	up := c.up
	c.mu.Unlock()
	if up {
		c.set(err)
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// state reports whether the runtime answers and returns a channel closed at the next change.
func (c *conn) state() (bool, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.up, c.changed
}

// ready returns nil when the runtime answers, else an error naming the endpoint that wraps
// pods.ErrRuntimeUnavailable and the last probe's error.
func (c *conn) ready() error {
	c.mu.Lock()
	up, err := c.up, c.lastErr
	c.mu.Unlock()
	if up {
		return nil
	}
	return fmt.Errorf("cri runtime %s: %w: %w", c.endpoint, pods.ErrRuntimeUnavailable, err)
}

// check converts a CRI call's error: a transport failure (Unavailable, or a deadline with the
// connection not ready) marks the runtime down and wraps pods.ErrRuntimeUnavailable.
func (c *conn) check(err error) error {
	if err == nil {
		return nil
	}
	if unavailable(err) {
		c.markDown(err)
		return fmt.Errorf("cri runtime %s: %w: %w", c.endpoint, pods.ErrRuntimeUnavailable, err)
	}
	return err
}

// unavailable reports whether a gRPC error means the runtime could not be reached.
func unavailable(err error) bool {
	return status.Code(err) == codes.Unavailable
}

// isNotFound reports whether a CRI error says the object does not exist.
func isNotFound(err error) bool {
	return status.Code(err) == codes.NotFound
}
