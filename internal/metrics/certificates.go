package metrics

import (
	"crypto/tls"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The certificate managers' families, served only while a manager runs, as the kubelet
// registers them only with rotateCertificates (cmd/kubelet/app/server.go,
// buildKubeletClientConfig, and pkg/kubelet/certificate/kubelet.go,
// NewKubeletClientCertificateManager) or serverTLSBootstrap
// (NewKubeletServerCertificateManager).

// certificateRotationBuckets are the kubelet's buckets of
// kubelet_certificate_manager_server_rotation_seconds: a minute to four years.
var certificateRotationBuckets = []float64{60, 3600, 14400, 86400, 604800, 2592000, 7776000, 15552000, 31104000, 124416000}

const (
	clientTTLHelp = alpha + "Gauge of the TTL (time-to-live) of the Kubelet's client certificate. " +
		"The value is in seconds until certificate expiry (negative if already expired). " +
		"If client certificate is invalid or unused, the value will be +INF."
	serverTTLHelp = alpha + "Gauge of the shortest TTL (time-to-live) of " +
		"the Kubelet's serving certificate. The value is in seconds " +
		"until certificate expiry (negative if already expired). If " +
		"serving certificate is invalid or unused, the value will " +
		"be +INF."
	renewErrorsHelp = alpha + "Counter of certificate renewal errors."
	rotationHelp    = alpha + "Histogram of the number of seconds the previous certificate lived before being rotated."
)

// certificateFamilies are the client and the serving certificate managers' families; a
// manager's are collected once it is set.
type certificateFamilies struct {
	now func() time.Time

	mu            sync.Mutex
	clientCurrent func() *tls.Certificate
	serverCurrent func() *tls.Certificate

	clientTTL, serverTTL *prometheus.Desc
	clientRenewErrors    prometheus.Counter
	serverRenewErrors    prometheus.Counter
	serverRotation       prometheus.Histogram
}

func newCertificateFamilies(now func() time.Time) *certificateFamilies {
	return &certificateFamilies{
		now:       now,
		clientTTL: prometheus.NewDesc(kubeletSubsystem+"_certificate_manager_client_ttl_seconds", clientTTLHelp, nil, nil),
		serverTTL: prometheus.NewDesc(kubeletSubsystem+"_certificate_manager_server_ttl_seconds", serverTTLHelp, nil, nil),
		clientRenewErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: kubeletSubsystem, Subsystem: "certificate_manager",
			Name: "client_expiration_renew_errors", Help: renewErrorsHelp}),
		serverRenewErrors: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: kubeletSubsystem,
			Name: "server_expiration_renew_errors", Help: renewErrorsHelp}),
		serverRotation: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: kubeletSubsystem,
			Name: "certificate_manager_server_rotation_seconds", Help: rotationHelp, Buckets: certificateRotationBuckets}),
	}
}

// ttl is the kubelet's TTL gauge of a manager's current certificate: whole seconds until it
// expires, +Inf without one.
func ttl(c *tls.Certificate, now time.Time) float64 {
	if c != nil && c.Leaf != nil {
		return math.Trunc(c.Leaf.NotAfter.Sub(now).Seconds())
	}
	return math.Inf(1)
}

// Describe describes nothing: which families there are depends on the managers set (an
// unchecked collector).
func (f *certificateFamilies) Describe(chan<- *prometheus.Desc) {}

// Collect collects the families of the managers set.
func (f *certificateFamilies) Collect(ch chan<- prometheus.Metric) {
	f.mu.Lock()
	client, server := f.clientCurrent, f.serverCurrent
	f.mu.Unlock()
	if client != nil {
		ch <- prometheus.MustNewConstMetric(f.clientTTL, prometheus.GaugeValue, ttl(client(), f.now()))
		f.clientRenewErrors.Collect(ch)
	}
	if server != nil {
		ch <- prometheus.MustNewConstMetric(f.serverTTL, prometheus.GaugeValue, ttl(server(), f.now()))
		f.serverRenewErrors.Collect(ch)
		f.serverRotation.Collect(ch)
	}
}

// ClientCertificateManager serves the client certificate manager's families:
// kubelet_certificate_manager_client_ttl_seconds of current's certificate and
// kubelet_certificate_manager_client_expiration_renew_errors, the counter it returns for the
// manager's renewal failures (nil on a nil *KubeletFamilies).
func (k *KubeletFamilies) ClientCertificateManager(current func() *tls.Certificate) prometheus.Counter {
	if k == nil {
		return nil
	}
	k.certs.mu.Lock()
	defer k.certs.mu.Unlock()
	k.certs.clientCurrent = current
	return k.certs.clientRenewErrors
}

// ServerCertificateManager serves the serving certificate manager's families:
// kubelet_certificate_manager_server_ttl_seconds of current's certificate,
// kubelet_server_expiration_renew_errors and kubelet_certificate_manager_server_rotation_seconds,
// the counter and histogram it returns for the manager (nil on a nil *KubeletFamilies).
func (k *KubeletFamilies) ServerCertificateManager(current func() *tls.Certificate) (renewErrors prometheus.Counter, rotation prometheus.Histogram) {
	if k == nil {
		return nil, nil
	}
	k.certs.mu.Lock()
	defer k.certs.mu.Unlock()
	k.certs.serverCurrent = current
	return k.certs.serverRenewErrors, k.certs.serverRotation
}
