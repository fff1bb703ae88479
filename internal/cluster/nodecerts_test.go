package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/certificate"
)

func TestRotationCheck(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	valid := &tls.Certificate{Leaf: &x509.Certificate{NotAfter: t0.Add(time.Hour)}}
	renewed := &tls.Certificate{Leaf: &x509.Certificate{NotAfter: t0.Add(2 * time.Hour)}}
	expired := &tls.Certificate{Leaf: &x509.Certificate{NotAfter: t0.Add(-time.Second)}}
	type look struct {
		cert    *tls.Certificate
		healthy bool
		at      time.Duration
		want    rotationAction
	}
	tests := []struct {
		name  string
		first *tls.Certificate
		looks []look
	}{
		{name: "the same certificate: nothing", first: valid, looks: []look{{cert: valid, healthy: true, want: rotationNone}}},
		{name: "a new certificate closes the connections once", first: valid, looks: []look{
			{cert: renewed, healthy: true, at: time.Minute, want: rotationCloseAll},
			{cert: renewed, healthy: true, at: 2 * time.Minute, want: rotationNone},
		}},
		{name: "the first certificate after the bootstrap closes the connections", looks: []look{
			{cert: nil, healthy: false, at: time.Second, want: rotationNone},
			{cert: valid, healthy: true, at: 2 * time.Second, want: rotationCloseAll},
		}},
		{name: "no certificate for 5 minutes with the API server answering: exit", looks: []look{
			{cert: nil, healthy: true, at: 5 * time.Minute, want: rotationNone},
			{cert: nil, healthy: true, at: 5*time.Minute + time.Second, want: rotationExit},
		}},
		{name: "no certificate for 5 minutes, API server silent: stay", looks: []look{
			{cert: nil, healthy: false, at: 6 * time.Minute, want: rotationStuck},
		}},
		{name: "a certificate seen resets the 5 minutes", looks: []look{
			{cert: valid, healthy: true, at: 4 * time.Minute, want: rotationCloseAll},
			{cert: nil, healthy: true, at: 8 * time.Minute, want: rotationNone},
			{cert: nil, healthy: true, at: 9*time.Minute + time.Second, want: rotationExit},
		}},
		{name: "an expired certificate with the API server answering: exit", first: expired, looks: []look{
			{cert: expired, healthy: true, at: time.Second, want: rotationExit},
		}},
		{name: "an expired certificate, API server silent: stay", first: expired, looks: []look{
			{cert: expired, healthy: false, at: time.Second, want: rotationStuck},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &rotationCheck{exitAfter: certificateExitAfter, last: tt.first, lastAvailable: t0}
			for i, l := range tt.looks {
				got, reason := r.next(l.cert, l.healthy, t0.Add(l.at))
				if got != l.want {
					t.Fatalf("look %d: action %d (%s), want %d", i, got, reason, l.want)
				}
				if (got == rotationExit || got == rotationStuck) && reason == "" {
					t.Errorf("look %d: no reason", i)
				}
			}
		})
	}
}

func TestServingTemplate(t *testing.T) {
	tests := []struct {
		name      string
		hostname  string
		ips       []string
		wantNil   bool
		wantNames []string
		wantIPs   []string
	}{
		{name: "host name and addresses, sorted, each once", hostname: "node-a", ips: []string{"10.0.0.2", "10.0.0.10", "10.0.0.2"},
			wantNames: []string{"node-a"}, wantIPs: []string{"10.0.0.10", "10.0.0.2"}},
		{name: "no IP: no request", hostname: "node-a", wantNil: true},
		{name: "a host name that is an IP is an IP", hostname: "192.168.1.5", ips: []string{"192.168.1.5"}, wantIPs: []string{"192.168.1.5"}},
		{name: "IPv6", hostname: "node-a", ips: []string{"fd00::1"}, wantNames: []string{"node-a"}, wantIPs: []string{"fd00::1"}},
		{name: "unparsable addresses are left out", hostname: "node-a", ips: []string{"bogus"}, wantNil: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := servingTemplate("node-a", tt.hostname, tt.ips)
			if tt.wantNil {
				if got != nil {
					t.Fatalf("template %+v, want none", got)
				}
				return
			}
			if got.Subject.CommonName != "system:node:node-a" || strings.Join(got.Subject.Organization, ",") != "system:nodes" {
				t.Errorf("subject %s", got.Subject)
			}
			var ips []string
			for _, ip := range got.IPAddresses {
				ips = append(ips, ip.String())
			}
			if strings.Join(got.DNSNames, ",") != strings.Join(tt.wantNames, ",") || strings.Join(ips, ",") != strings.Join(tt.wantIPs, ",") {
				t.Errorf("names %v IPs %v, want %v %v", got.DNSNames, ips, tt.wantNames, tt.wantIPs)
			}
		})
	}
}

// TestLoadCredentialsBootstrap: with rotation and no kubeconfig yet, the kubelet's bootstrap
// writes kubeconfig pointing at <cert_dir>/kubelet-client-current.pem; the client
// configuration has the rotating transport (no TLS files of its own) and no certificate yet.
func TestLoadCredentialsBootstrap(t *testing.T) {
	dir := t.TempDir()
	boot := filepath.Join(dir, "bootstrap.conf")
	if err := os.WriteFile(boot, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: abcdef.0123456789abcdef}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig, certDir := filepath.Join(dir, "kubelet.conf"), filepath.Join(dir, "pki")
	var ttlRead func() *tls.Certificate
	creds, err := LoadCredentials(t.Context(), CredentialOptions{Kubeconfig: kubeconfig, BootstrapKubeconfig: boot, CertDir: certDir,
		NodeName: "node-a", Rotate: true, Logger: slog.New(slog.DiscardHandler),
		Metrics: CertificateMetrics{Client: func(current func() *tls.Certificate) certificate.Counter {
			ttlRead = current
			return nil
		}}})
	if err != nil {
		t.Fatal(err)
	}
	defer creds.Manager.Stop()
	written, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig not written: %v", err)
	}
	current := filepath.Join(certDir, "kubelet-client-current.pem")
	for _, a := range written.AuthInfos {
		if a.ClientCertificate != current || a.ClientKey != current || a.Token != "" {
			t.Errorf("kubeconfig credentials %+v, want the certificate store's %s", a, current)
		}
	}
	if creds.Config.Transport == nil || creds.Config.CertFile != "" || creds.Config.BearerToken != "" {
		t.Errorf("client configuration: transport %v, cert file %q, token %q; want the rotating transport only", creds.Config.Transport, creds.Config.CertFile, creds.Config.BearerToken)
	}
	if creds.Manager.Current() != nil || ttlRead == nil || ttlRead() != nil {
		t.Error("a certificate before any was issued")
	}
}

// TestLoadCredentialsWithoutRotation: the kubeconfig as it is.
func TestLoadCredentialsWithoutRotation(t *testing.T) {
	creds, err := LoadCredentials(t.Context(), CredentialOptions{Kubeconfig: filepath.Join(t.TempDir(), "missing")})
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("credentials %v, error %v; want an error naming the kubeconfig", creds, err)
	}
}
