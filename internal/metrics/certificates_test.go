package metrics

import (
	"crypto/tls"
	"crypto/x509"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCertificateFamilies: the certificate managers' families appear only once their manager
// is set, with the kubelet's names, types, help and buckets (pkg/kubelet/certificate/kubelet.go,
// cmd/kubelet/app/server.go).
func TestCertificateFamilies(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	leaf := &tls.Certificate{Leaf: &x509.Certificate{NotBefore: now.Add(-time.Hour), NotAfter: now.Add(90*time.Minute + 500*time.Millisecond)}}
	names := []string{"kubelet_certificate_manager_client_ttl_seconds", "kubelet_certificate_manager_client_expiration_renew_errors",
		"kubelet_certificate_manager_server_ttl_seconds", "kubelet_server_expiration_renew_errors", "kubelet_certificate_manager_server_rotation_seconds"}
	tests := []struct {
		name           string
		client, server func() *tls.Certificate
		want           string
	}{
		{name: "no manager", want: ""},
		{name: "client manager with a certificate", client: func() *tls.Certificate { return leaf }, want: `
# HELP kubelet_certificate_manager_client_expiration_renew_errors [ALPHA] Counter of certificate renewal errors.
# TYPE kubelet_certificate_manager_client_expiration_renew_errors counter
kubelet_certificate_manager_client_expiration_renew_errors 1
# HELP kubelet_certificate_manager_client_ttl_seconds [ALPHA] Gauge of the TTL (time-to-live) of the Kubelet's client certificate. The value is in seconds until certificate expiry (negative if already expired). If client certificate is invalid or unused, the value will be +INF.
# TYPE kubelet_certificate_manager_client_ttl_seconds gauge
kubelet_certificate_manager_client_ttl_seconds 5400
`},
		{name: "client manager without a certificate yet", client: func() *tls.Certificate { return nil }, want: `
# HELP kubelet_certificate_manager_client_expiration_renew_errors [ALPHA] Counter of certificate renewal errors.
# TYPE kubelet_certificate_manager_client_expiration_renew_errors counter
kubelet_certificate_manager_client_expiration_renew_errors 1
# HELP kubelet_certificate_manager_client_ttl_seconds [ALPHA] Gauge of the TTL (time-to-live) of the Kubelet's client certificate. The value is in seconds until certificate expiry (negative if already expired). If client certificate is invalid or unused, the value will be +INF.
# TYPE kubelet_certificate_manager_client_ttl_seconds gauge
kubelet_certificate_manager_client_ttl_seconds +Inf
`},
		{name: "server manager", server: func() *tls.Certificate { return leaf }, want: `
# HELP kubelet_certificate_manager_server_rotation_seconds [ALPHA] Histogram of the number of seconds the previous certificate lived before being rotated.
# TYPE kubelet_certificate_manager_server_rotation_seconds histogram
kubelet_certificate_manager_server_rotation_seconds_bucket{le="60"} 0
kubelet_certificate_manager_server_rotation_seconds_bucket{le="3600"} 1
kubelet_certificate_manager_server_rotation_seconds_bucket{le="14400"} 1
kubelet_certificate_manager_server_rotation_seconds_bucket{le="86400"} 1
kubelet_certificate_manager_server_rotation_seconds_bucket{le="604800"} 1
kubelet_certificate_manager_server_rotation_seconds_bucket{le="2.592e+06"} 1
kubelet_certificate_manager_server_rotation_seconds_bucket{le="7.776e+06"} 1
kubelet_certificate_manager_server_rotation_seconds_bucket{le="1.5552e+07"} 1
kubelet_certificate_manager_server_rotation_seconds_bucket{le="3.1104e+07"} 1
kubelet_certificate_manager_server_rotation_seconds_bucket{le="1.24416e+08"} 1
kubelet_certificate_manager_server_rotation_seconds_bucket{le="+Inf"} 1
kubelet_certificate_manager_server_rotation_seconds_sum 600
kubelet_certificate_manager_server_rotation_seconds_count 1
# HELP kubelet_certificate_manager_server_ttl_seconds [ALPHA] Gauge of the shortest TTL (time-to-live) of the Kubelet's serving certificate. The value is in seconds until certificate expiry (negative if already expired). If serving certificate is invalid or unused, the value will be +INF.
# TYPE kubelet_certificate_manager_server_ttl_seconds gauge
kubelet_certificate_manager_server_ttl_seconds 5400
# HELP kubelet_server_expiration_renew_errors [ALPHA] Counter of certificate renewal errors.
# TYPE kubelet_server_expiration_renew_errors counter
kubelet_server_expiration_renew_errors 1
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := NewKubeletFamilies()
			k.certs.now = func() time.Time { return now }
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(k.certs)
			if tt.client != nil {
				k.ClientCertificateManager(tt.client).Inc()
			}
			if tt.server != nil {
				errs, rotation := k.ServerCertificateManager(tt.server)
				errs.Inc()
				rotation.Observe(600)
			}
			if err := testutil.GatherAndCompare(reg, strings.NewReader(tt.want), names...); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestCertificateTTL(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		cert *tls.Certificate
		want float64
	}{
		{name: "none", want: math.Inf(1)},
		{name: "not parsed", cert: &tls.Certificate{}, want: math.Inf(1)},
		{name: "truncated to whole seconds", cert: &tls.Certificate{Leaf: &x509.Certificate{NotAfter: now.Add(1999 * time.Millisecond)}}, want: 1},
		{name: "expired is negative", cert: &tls.Certificate{Leaf: &x509.Certificate{NotAfter: now.Add(-1500 * time.Millisecond)}}, want: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ttl(tt.cert, now); got != tt.want {
				t.Errorf("ttl = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCertificateFamiliesNilKubelet(t *testing.T) {
	var k *KubeletFamilies
	if c := k.ClientCertificateManager(nil); c != nil {
		t.Errorf("client counter = %v, want nil", c)
	}
	if c, h := k.ServerCertificateManager(nil); c != nil || h != nil {
		t.Errorf("server families = %v, %v, want nil", c, h)
	}
}
