package cluster

import (
	"context"
	"net/url"
	"time"

	clientmetrics "k8s.io/client-go/tools/metrics"
)

// ClientMetrics receives client-go's request metrics: rest_client_requests_total and
// rest_client_request_duration_seconds, as the kubelet's component-base adapters
// (k8s.io/component-base/metrics/prometheus/restclient) record them.
type ClientMetrics interface {
	RestRequest(code, method, host string)
	RestLatency(verb, host string, d time.Duration)
}

// RegisterClientMetrics routes the process's client-go request metrics into m. client-go keeps
// the first registration of a process: call it once, before the clients are made.
func RegisterClientMetrics(m ClientMetrics) {
	clientmetrics.Register(clientmetrics.RegisterOpts{RequestResult: clientResults{m}, RequestLatency: clientLatency{m}})
}

type clientResults struct{ m ClientMetrics }

func (c clientResults) Increment(_ context.Context, code, method, host string) {
	c.m.RestRequest(code, method, host)
}

type clientLatency struct{ m ClientMetrics }

func (c clientLatency) Observe(_ context.Context, verb string, u url.URL, d time.Duration) {
	c.m.RestLatency(verb, u.Host, d)
}
