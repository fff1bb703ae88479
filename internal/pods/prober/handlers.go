package prober

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpchealth "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// Result is what one probe found (pkg/probe: Success, Warning, Failure; Unknown before any
// probe ran). A Warning counts as a success and is reported.
type Result int

// Results.
const (
	Unknown Result = iota
	Success
	Warning
	Failure
)

// String is the result as the kubelet's prober_probe_total labels it.
func (r Result) String() string {
	switch r {
	case Success, Warning:
		return "successful"
	case Failure:
		return "failed"
	}
	return "unknown"
}

// UserAgent is what HTTP and gRPC probes and hooks send, the kubelet's
// "kube-probe/<major>.<minor>" for the Kubernetes release of k8s.io/api slicelet is built with.
const UserAgent = "kube-probe/1.37"

// maxBody bounds what an HTTP probe reads of a response (the kubelet's maxRespBodyLength).
const maxBody = 10 << 10

// maxRedirects is how many same-host redirects an HTTP probe follows (net/http's default).
const maxRedirects = 10

// ErrTimeout is wrapped by an Execer's error when the command ran out of time: the probe
// fails (the kubelet's ExecProbeTimeout) instead of erroring.
var ErrTimeout = errors.New("timed out")

// Execer runs cmd in the container's context (its cgroup, user, environment, namespaces) and
// waits at most timeout: the CRI's ExecSync. out is stdout followed by stderr.
type Execer func(ctx context.Context, cmd []string, timeout time.Duration) (out []byte, exitCode int32, err error)

// Target is what a handler runs against.
type Target struct {
	// Container is the container the handler belongs to (named ports, $(VAR) expansion).
	Container *v1.Container
	// PodIP is the host of network handlers that give none.
	PodIP string
	// Exec runs exec handlers.
	Exec Execer
	// Timeout bounds the handler.
	Timeout time.Duration
}

// Run runs one probe handler, as the kubelet's prober.runProbe does. An error means the
// probe could not be run at all (the kubelet throws such a result away); a handler that ran
// and failed is a Failure with its output.
func Run(ctx context.Context, h *v1.ProbeHandler, t Target) (Result, string, error) {
	switch {
	case h.Exec != nil:
		return runExec(ctx, h.Exec.Command, t)
	case h.HTTPGet != nil:
		return runHTTP(ctx, h.HTTPGet, t)
	case h.TCPSocket != nil:
		port, err := ResolvePort(h.TCPSocket.Port, t.Container)
		if err != nil {
			return Unknown, "", err
		}
		return runTCP(ctx, net.JoinHostPort(cmpOr(h.TCPSocket.Host, t.PodIP), strconv.Itoa(port)), t.Timeout)
	case h.GRPC != nil:
		service := ""
		if h.GRPC.Service != nil {
			service = *h.GRPC.Service
		}
		return runGRPC(ctx, net.JoinHostPort(t.PodIP, strconv.Itoa(int(h.GRPC.Port))), service, t.Timeout)
	}
	return Unknown, "", errors.New("probe has no handler")
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ResolvePort is a handler's port: a number, or the name of one of the container's ports
// (the kubelet's findPortByName); it must be in 1..65535.
func ResolvePort(p intstr.IntOrString, c *v1.Container) (int, error) {
	n := 0
	if p.Type == intstr.String {
		found := false
		if c != nil {
			for _, cp := range c.Ports {
				if cp.Name == p.StrVal {
					n, found = int(cp.ContainerPort), true
					break
				}
			}
		}
		if !found {
			// A numeric string is a number (intstr's IntValue).
			var err error
			if n, err = strconv.Atoi(p.StrVal); err != nil {
				return 0, fmt.Errorf("port %s not found", p.StrVal)
			}
		}
	} else {
		n = p.IntValue()
	}
	if n <= 0 || n > 65535 {
		return 0, fmt.Errorf("invalid port number: %d", n)
	}
	return n, nil
}

// ExpandCommand is the kubelet's ExpandContainerCommandOnlyStatic: $(VAR) in cmd expanded
// with the container's literal env values.
func ExpandCommand(cmd []string, c *v1.Container) []string {
	vars := map[string]string{}
	if c != nil {
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				vars[e.Name] = lifecycle.Expand(e.Value, vars)
			}
		}
	}
	out := make([]string, len(cmd))
	for i, s := range cmd {
		out[i] = lifecycle.Expand(s, vars)
	}
	return out
}

// runExec is pkg/probe/exec: exit code 0 succeeds; another code or a timeout fails.
func runExec(ctx context.Context, command []string, t Target) (Result, string, error) {
	if t.Exec == nil {
		return Unknown, "", errors.New("exec: no way to run commands in the container")
	}
	cmd := ExpandCommand(command, t.Container)
	out, code, err := t.Exec(ctx, cmd, t.Timeout)
	switch {
	case errors.Is(err, ErrTimeout):
		return Failure, fmt.Sprintf("command %q timed out", strings.Join(cmd, " ")), nil
	case err != nil:
		return Unknown, "", err
	case code != 0:
		return Failure, string(out), nil
	}
	return Success, string(out), nil
}

// RequestURL is an httpGet action's URL (the kubelet's formatURL), host defaulting to podIP.
func RequestURL(a *v1.HTTPGetAction, c *v1.Container, podIP string) (*url.URL, error) {
	port, err := ResolvePort(a.Port, c)
	if err != nil {
		return nil, err
	}
	scheme := strings.ToLower(string(a.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(cmpOr(a.Host, podIP), strconv.Itoa(port))}
	path, query, _ := strings.Cut(a.Path, "?")
	if path != "" && !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u.Path, u.RawQuery = path, query
	return u, nil
}

// NewRequest is the GET of an httpGet action: its headers, the probe's User-Agent and
// Accept unless given, Host from a Host header.
func NewRequest(ctx context.Context, a *v1.HTTPGetAction, c *v1.Container, podIP string) (*http.Request, error) {
	u, err := RequestURL(a, c, podIP)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	for _, h := range a.HTTPHeaders {
		if http.CanonicalHeaderKey(h.Name) == "Host" {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", UserAgent)
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "*/*")
	}
	return req, nil
}

// HTTPClient is the probes' client (pkg/probe/http): no keep-alives, no certificate
// verification, no proxy, same-host redirects only.
func HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // probes never verify (the kubelet's)
			DisableKeepAlives: true,
			Proxy:             nil,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Hostname() != via[0].URL.Hostname() {
				return http.ErrUseLastResponse
			}
			if len(via) >= maxRedirects {
				return errors.New("stopped after 10 redirects")
			}
			return nil
		},
	}
}

// runHTTP is pkg/probe/http: a status in [200, 400) succeeds (a redirect to another host is a
// warning), another fails; a connection error fails with its text.
func runHTTP(ctx context.Context, a *v1.HTTPGetAction, t Target) (Result, string, error) {
	req, err := NewRequest(ctx, a, t.Container, t.PodIP)
	if err != nil {
		return Unknown, "", err
	}
	client := HTTPClient(t.Timeout)
	defer client.CloseIdleConnections()
	res, err := client.Do(req)
	if err != nil {
		return Failure, err.Error(), nil
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxBody))
	if err != nil {
		return Failure, err.Error(), nil
	}
	body := string(b)
	if res.StatusCode >= http.StatusOK && res.StatusCode < http.StatusBadRequest {
		if res.StatusCode >= http.StatusMultipleChoices {
			return Warning, fmt.Sprintf("Probe terminated redirects, Response body: %v", body), nil
		}
		return Success, body, nil
	}
	return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", res.StatusCode), nil
}

// runTCP is pkg/probe/tcp: a connection that opens succeeds.
func runTCP(ctx context.Context, addr string, timeout time.Duration) (Result, string, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return Failure, err.Error(), nil
	}
	_ = conn.Close()
	return Success, "", nil
}

// runGRPC is pkg/probe/grpc: the gRPC health protocol's Check (grpc.health.v1.Health) must
// answer SERVING within timeout.
func runGRPC(ctx context.Context, addr, service string, timeout time.Duration) (Result, string, error) {
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUserAgent(UserAgent))
	if err != nil {
		return Failure, fmt.Sprintf("error: failed to connect service at %q: %+v", addr, err), nil
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := grpchealth.NewHealthClient(conn).Check(ctx, &grpchealth.HealthCheckRequest{Service: service})
	if err != nil {
		switch status.Code(err) {
		case codes.Unimplemented:
			return Failure, fmt.Sprintf("error: this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", status.Convert(err).Message()), nil
		case codes.DeadlineExceeded:
			return Failure, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout), nil
		case codes.Unavailable:
			return Failure, fmt.Sprintf("error: failed to connect service at %q: %+v", addr, err), nil
		}
		return Failure, fmt.Sprintf("error: health rpc probe failed: %+v", err), nil
	}
	if resp.GetStatus() != grpchealth.HealthCheckResponse_SERVING {
		return Failure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String()), nil
	}
	return Success, "service healthy", nil
}
