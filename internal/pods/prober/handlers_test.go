package prober

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	grpchealth "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// hostPort splits a listener's address.
func hostPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

func TestHTTPGet(t *testing.T) {
	var gotUA, gotHost, gotX string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotUA, gotHost, gotX = r.UserAgent(), r.Host, r.Header.Get("X-Probe")
		switch r.URL.Path {
		case "/ok":
			fmt.Fprint(w, "fine")
		case "/redirect":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/away":
			http.Redirect(w, r, "http://example.invalid/", http.StatusFound)
		default:
			http.Error(w, "no", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	host, port := hostPort(t, srv.Listener.Addr().String())
	c := &v1.Container{Ports: []v1.ContainerPort{{Name: "web", ContainerPort: int32(port)}}}
	tests := []struct {
		name   string
		action v1.HTTPGetAction
		want   Result
		output string
	}{
		{"2xx succeeds, by named port", v1.HTTPGetAction{Path: "/ok", Port: intstr.FromString("web")}, Success, "fine"},
		{"same-host redirect is followed", v1.HTTPGetAction{Path: "/redirect", Port: intstr.FromInt32(int32(port))}, Success, "fine"},
		{"other-host redirect is a warning", v1.HTTPGetAction{Path: "/away", Port: intstr.FromInt32(int32(port))}, Warning, "Probe terminated redirects"},
		{"5xx fails", v1.HTTPGetAction{Path: "/bad", Port: intstr.FromInt32(int32(port))}, Failure, "HTTP probe failed with statuscode: 503"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.action
			a.HTTPHeaders = []v1.HTTPHeader{{Name: "X-Probe", Value: "1"}}
			res, out, err := Run(context.Background(), &v1.ProbeHandler{HTTPGet: &a}, Target{Container: c, PodIP: host, Timeout: 5 * time.Second})
			if err != nil || res != tc.want || !strings.HasPrefix(out, tc.output) {
				t.Fatalf("Run = %v, %q, %v; want %v, %q…", res, out, err, tc.want, tc.output)
			}
			if gotUA != UserAgent || gotX != "1" || gotHost == "" {
				t.Errorf("request: User-Agent %q, X-Probe %q, Host %q", gotUA, gotX, gotHost)
			}
		})
	}
	if _, _, err := Run(context.Background(), &v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromString("nope")}}, Target{Container: c, PodIP: host, Timeout: time.Second}); err == nil || !strings.Contains(err.Error(), "port nope not found") {
		t.Errorf("unknown named port: error %v", err)
	}
}

func TestTCPSocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host, port := hostPort(t, ln.Addr().String())
	h := &v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}
	if res, out, err := Run(context.Background(), h, Target{PodIP: host, Timeout: 5 * time.Second}); res != Success || err != nil {
		t.Errorf("open port: %v %q %v", res, out, err)
	}
	ln.Close()
	if res, out, err := Run(context.Background(), h, Target{PodIP: host, Timeout: 5 * time.Second}); res != Failure || err != nil || !strings.Contains(out, "refused") {
		t.Errorf("closed port: %v %q %v", res, out, err)
	}
}

func TestGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("db", grpchealth.HealthCheckResponse_NOT_SERVING)
	grpchealth.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	host, port := hostPort(t, ln.Addr().String())
	db := "db"
	tests := []struct {
		name    string
		service *string
		want    Result
		output  string
	}{
		{"the server serves", nil, Success, "service healthy"},
		{"a service not serving fails", &db, Failure, `service unhealthy (responded with "NOT_SERVING")`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: int32(port), Service: tc.service}}
			res, out, err := Run(context.Background(), h, Target{PodIP: host, Timeout: 5 * time.Second})
			if res != tc.want || out != tc.output || err != nil {
				t.Errorf("Run = %v, %q, %v; want %v, %q", res, out, err, tc.want, tc.output)
			}
		})
	}
}

func TestExec(t *testing.T) {
	c := &v1.Container{Env: []v1.EnvVar{{Name: "FILE", Value: "/tmp/ok"}}}
	var got []string
	run := func(code int32, err error) Execer {
		return func(_ context.Context, cmd []string, _ time.Duration) ([]byte, int32, error) {
			got = cmd
			return []byte("out"), code, err
		}
	}
	h := &v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"test", "-f", "$(FILE)"}}}
	tests := []struct {
		name   string
		exec   Execer
		want   Result
		output string
	}{
		{"exit 0 succeeds", run(0, nil), Success, "out"},
		{"another exit code fails with the output", run(1, nil), Failure, "out"},
		{"a timeout fails", run(0, fmt.Errorf("exec: %w", ErrTimeout)), Failure, `command "test -f /tmp/ok" timed out`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, out, err := Run(context.Background(), h, Target{Container: c, Exec: tc.exec, Timeout: time.Second})
			if res != tc.want || out != tc.output || err != nil {
				t.Errorf("Run = %v, %q, %v; want %v, %q", res, out, err, tc.want, tc.output)
			}
			if strings.Join(got, " ") != "test -f /tmp/ok" {
				t.Errorf("command %q, want $(FILE) expanded", got)
			}
		})
	}
}
