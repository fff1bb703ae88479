package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"strconv"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/gc"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/slices"
)

// Client talks to the local API. Its methods return *DaemonDownError (errors.Is ErrDaemonDown)
// when nothing listens on the socket, *SocketPermissionError when the kernel refuses the
// connection, and *StatusError for error responses (errors.Is ErrNotFound / ErrConflict,
// errors.As *InvalidError).
type Client struct {
	socket string
	http   *http.Client
	// Trace, when set, receives one line per request: method, path, status and duration (what
	// kubectl -v=6 prints).
	Trace io.Writer
}

// NewClient returns a client for the socket at path (DefaultSocket when empty). It does not
// connect until the first call.
func NewClient(socket string) *Client {
	if socket == "" {
		socket = DefaultSocket
	}
	d := net.Dialer{}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns: 2,
	}
	return &Client{socket: socket, http: &http.Client{Transport: tr}}
}

// Socket is the socket path the client uses.
func (c *Client) Socket() string { return c.socket }

// Health checks that the daemon answers (GET /healthz).
func (c *Client) Health(ctx context.Context) error {
	resp, err := c.do(ctx, http.MethodGet, "/healthz", nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// ListPods returns every pod (GET /v1/pods).
func (c *Client) ListPods(ctx context.Context) ([]v1.Pod, error) {
	var list v1.PodList
	if err := c.getJSON(ctx, http.MethodGet, "/v1/pods", nil, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// GetPod returns one pod (GET /v1/pods/{namespace}/{name}).
func (c *Client) GetPod(ctx context.Context, namespace, name string) (v1.Pod, error) {
	var pod v1.Pod
	err := c.getJSON(ctx, http.MethodGet, podPath(namespace, name), nil, &pod)
	return pod, err
}

// ApplyPod creates or replaces a pod from one manifest, YAML or JSON (POST /v1/pods).
func (c *Client) ApplyPod(ctx context.Context, manifest []byte) (ApplyResult, error) {
	var res ApplyResult
	err := c.getJSON(ctx, http.MethodPost, "/v1/pods", manifest, &res)
	return res, err
}

// PodMetrics returns the metrics of every pod that has them (GET /v1/metrics/pods).
func (c *Client) PodMetrics(ctx context.Context) ([]metricsv1beta1.PodMetrics, error) {
	var list metricsv1beta1.PodMetricsList
	err := c.getJSON(ctx, http.MethodGet, "/v1/metrics/pods", nil, &list)
	return list.Items, err
}

// NodeMetrics returns the node's metrics; none before the daemon sampled it twice.
func (c *Client) NodeMetrics(ctx context.Context) ([]metricsv1beta1.NodeMetrics, error) {
	var list metricsv1beta1.NodeMetricsList
	err := c.getJSON(ctx, http.MethodGet, "/v1/metrics/nodes", nil, &list)
	return list.Items, err
}

// ApplyPodDryRun is ApplyPod with nothing stored: every check the daemon makes (decoding,
// validation, Pod Security, the runtime's validation) and the result it would give.
func (c *Client) ApplyPodDryRun(ctx context.Context, manifest []byte) (ApplyResult, error) {
	var res ApplyResult
	err := c.getJSON(ctx, http.MethodPost, "/v1/pods?dryRun=true", manifest, &res)
	return res, err
}

// DeletePod deletes a pod (DELETE /v1/pods/{namespace}/{name}).
func (c *Client) DeletePod(ctx context.Context, namespace, name string) error {
	resp, err := c.do(ctx, http.MethodDelete, podPath(namespace, name), nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// Logs copies a container's output to w as it arrives
// (GET /v1/pods/{namespace}/{name}/log). With opts.Follow it returns when ctx ends or the
// container's output ends. An error the daemon hit after output had started is returned after
// the output.
func (c *Client) Logs(ctx context.Context, namespace, name, container string, opts pods.LogOptions, w io.Writer) error {
	q := pods.LogQuery{Options: opts}.Values()
	if container != "" {
		q.Set("container", container)
	}
	path := podPath(namespace, name) + "/log"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	resp, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("logs of %s/%s: %w", namespace, name, err)
	}
	if msg := resp.Trailer.Get(logErrorTrailer); msg != "" {
		return fmt.Errorf("logs of %s/%s: %s", namespace, name, msg)
	}
	return nil
}

// Node returns the node's status and pod counts (GET /v1/node).
func (c *Client) Node(ctx context.Context) (NodeInfo, error) {
	var n NodeInfo
	err := c.getJSON(ctx, http.MethodGet, "/v1/node", nil, &n)
	return n, err
}

// ExplainPod explains one manifest with the daemon's configuration (POST /v1/explain/pod).
func (c *Client) ExplainPod(ctx context.Context, manifest []byte) (slices.PodExplanation, error) {
	var x slices.PodExplanation
	err := c.getJSON(ctx, http.MethodPost, "/v1/explain/pod", manifest, &x)
	return x, err
}

// ExplainNode explains the daemon's node (GET /v1/explain/node).
func (c *Client) ExplainNode(ctx context.Context) (slices.NodeExplanation, error) {
	var x slices.NodeExplanation
	err := c.getJSON(ctx, http.MethodGet, "/v1/explain/node", nil, &x)
	return x, err
}

// ExplainEviction explains the eviction manager's last decision (GET /v1/explain/eviction).
func (c *Client) ExplainEviction(ctx context.Context) (eviction.Explanation, error) {
	var x eviction.Explanation
	err := c.getJSON(ctx, http.MethodGet, "/v1/explain/eviction", nil, &x)
	return x, err
}

// CollectImages runs (or with dryRun previews) an image collection (POST /v1/gc/images).
func (c *Client) CollectImages(ctx context.Context, dryRun bool) (gc.ImageResult, error) {
	var x gc.ImageResult
	err := c.getJSON(ctx, http.MethodPost, "/v1/gc/images?dryRun="+strconv.FormatBool(dryRun), nil, &x)
	return x, err
}

// CollectContainers runs (or with dryRun previews) a container collection
// (POST /v1/gc/containers).
func (c *Client) CollectContainers(ctx context.Context, dryRun bool) (gc.ContainerResult, error) {
	var x gc.ContainerResult
	err := c.getJSON(ctx, http.MethodPost, "/v1/gc/containers?dryRun="+strconv.FormatBool(dryRun), nil, &x)
	return x, err
}

func podPath(namespace, name string) string {
	return "/v1/pods/" + url.PathEscape(namespace) + "/" + url.PathEscape(name)
}

// getJSON does a request and decodes a JSON answer into out.
func (c *Client) getJSON(ctx context.Context, method, path string, body []byte, out any) error {
	resp, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	// Numbers in untyped fields (explanations' systemd properties) stay exact: a float64 would
	// turn 18446744073709551615 (infinity) into 1.8446744073709552e+19.
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("slicelet answer to %s %s: %w", method, path, err)
	}
	return nil
}

// do sends a request; any status ≥ 300 becomes a *StatusError (the body is closed then).
func (c *Client) do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://slicelet"+path, rd)
	if err != nil {
		return nil, fmt.Errorf("slicelet request: %w", err)
	}
	start := time.Now()
	resp, err := c.http.Do(req)
	if c.Trace != nil {
		status := "error"
		if err == nil {
			status = resp.Status
		}
		fmt.Fprintf(c.Trace, "%s http://unix%s%s %s in %d milliseconds\n", method, c.socket, path, status, time.Since(start).Milliseconds())
	}
	if err != nil {
		return nil, c.dialError(err)
	}
	if resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	se := &StatusError{Code: resp.StatusCode}
	var eb errorBody
	if json.Unmarshal(data, &eb) == nil && eb.Error != "" {
		se.Message, se.Problems, se.Reason = eb.Error, eb.Problems, eb.Reason
	} else {
		se.Message = string(bytes.TrimSpace(data))
	}
	return nil, se
}

// dialError classifies a transport error.
func (c *Client) dialError(err error) error {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			return fmt.Errorf("slicelet at %s: %w", c.socket, ue.Err)
		}
		return fmt.Errorf("slicelet at %s: %w", c.socket, err)
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ECONNREFUSED, syscall.ENOENT, syscall.ENOTDIR:
			return &DaemonDownError{Socket: c.socket, Err: errno}
		case syscall.EACCES, syscall.EPERM:
			return &SocketPermissionError{Socket: c.socket, Group: socketGroup(c.socket), Err: errno}
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return &DaemonDownError{Socket: c.socket, Err: err}
	}
	return fmt.Errorf("slicelet at %s: %w", c.socket, op)
}

// socketGroup names the group of the socket file, "" if it cannot be read.
func socketGroup(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return ""
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	gid := strconv.FormatUint(uint64(sys.Gid), 10)
	if g, err := user.LookupGroupId(gid); err == nil {
		return g.Name
	}
	return gid
}
