//go:build !nocluster

package agent

import (
	"crypto/tls"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/internal/cluster"
	"github.com/slicelet/slicelet/internal/health"
	"github.com/slicelet/slicelet/internal/metrics"
)

// TestNewKubeletServer: the kubelet API opens its port and keeps its self-signed pair in the
// cert directory (none with server_tls_bootstrap: a serving certificate manager instead); a port held by another process leaves the node without it, said by the
// kubelet-api health component; a serving pair that does not load refuses the start.
func TestNewKubeletServer(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	heldPort := held.Addr().(*net.TCPAddr).Port

	tests := []struct {
		name        string
		port        int
		certFile    string
		bootstrap   bool
		wantServer  bool
		wantErr     string
		wantWarning string
	}{
		{name: "a free port (0: any; newCluster leaves the kubelet API off for 0)", port: 0, wantServer: true},
		{name: "a port in use: no kubelet API, the node runs on", port: heldPort, wantWarning: "address already in use"},
		{name: "a serving pair that does not load refuses the start", port: 0, certFile: filepath.Join(dir, "missing.crt"), wantErr: "missing.crt"},
		{name: "server TLS bootstrap: a serving certificate manager, no self-signed pair", port: 0, bootstrap: true, wantServer: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.StateDir = t.TempDir()
			cfg.Cluster.Enabled, cfg.Cluster.Kubeconfig, cfg.Cluster.NodeIP, cfg.Cluster.KubeletPort = true, kubeconfig, "127.0.0.1", tc.port
			if tc.certFile != "" {
				cfg.Cluster.TLSCertFile, cfg.Cluster.TLSPrivateKeyFile = tc.certFile, tc.certFile
			}
			cfg.Cluster.ServerTLSBootstrap = tc.bootstrap
			creds, err := cluster.LoadCredentials(t.Context(), cluster.CredentialOptions{Kubeconfig: kubeconfig})
			if err != nil {
				t.Fatal(err)
			}
			d := &daemon{cfg: cfg, health: health.New(health.Options{}), clock: clock.RealClock{}, procRoot: "/proc", conn: &clusterConn{creds: creds}}
			srv, serving, err := newKubeletServer(d, "node-1", []string{"127.0.0.1"}, slog.New(slog.DiscardHandler))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (srv != nil) != tc.wantServer {
				t.Fatalf("server %v, want one: %v", srv, tc.wantServer)
			}
			ws, _ := d.health.State().Get(kubeletAPIWarnable)
			if tc.wantWarning != "" && (ws.Status != health.StatusUnhealthy || !strings.Contains(ws.Message, tc.wantWarning)) {
				t.Errorf("kubelet-api %s %q, want unhealthy with %q", ws.Status, ws.Message, tc.wantWarning)
			}
			if (serving != nil) != tc.bootstrap {
				t.Errorf("serving certificate manager %v, want one: %v", serving, tc.bootstrap)
			}
			if srv != nil {
				defer srv.Close()
				_, err := os.Stat(filepath.Join(cfg.ClusterCertDir(), "kubelet.crt"))
				if tc.bootstrap && err == nil {
					t.Error("a self-signed pair was made with server_tls_bootstrap")
				} else if !tc.bootstrap && err != nil {
					t.Errorf("self-signed pair: %v", err)
				}
			}
		})
	}
}

// TestCertificateMetrics: the certificate managers' metrics go to the kubelet families when
// there are some, and to nothing (nil interfaces, which the manager skips) when not.
func TestCertificateMetrics(t *testing.T) {
	for _, tc := range []struct {
		name string
		k    *metrics.KubeletFamilies
		want bool
	}{
		{name: "kubelet families", k: metrics.NewKubeletFamilies(), want: true},
		{name: "none", k: nil, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := certificateMetrics(tc.k)
			c := m.Client(func() *tls.Certificate { return nil })
			sc, sh := m.Server(func() *tls.Certificate { return nil })
			if (c != nil) != tc.want || (sc != nil) != tc.want || (sh != nil) != tc.want {
				t.Errorf("client counter %v, server counter %v, histogram %v; want them set: %v", c, sc, sh, tc.want)
			}
		})
	}
}
