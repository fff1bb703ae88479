//go:build !nocluster

package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/certificate"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/cluster"
	"github.com/slicelet/slicelet/internal/health"
	"github.com/slicelet/slicelet/internal/kubeletserver"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/podstats"
	"github.com/slicelet/slicelet/internal/procfs"
)

// kubeletAPIWarnable is the kubelet API's health: unhealthy when its port could not be
// opened (another kubelet on the node, say) or its server stopped. The node keeps running
// without it (its pods, status and Lease); the Node then reports no kubelet port.
var kubeletAPIWarnable = &health.Warnable{Code: "kubelet-api", Title: "kubelet API", Severity: health.SeverityWarning}

// withKubeletAPI is cluster mode with the kubelet API beside it.
type withKubeletAPI struct {
	*cluster.Member
	srv *kubeletserver.Server
	// serving is the serving certificate manager (server_tls_bootstrap); nil without.
	serving certificate.Manager
	health  *health.Tracker
	log     *slog.Logger
}

// Run runs cluster mode and serves the kubelet API until ctx ends. The API failing leaves
// the node running; kubeletAPIWarnable says so.
func (w *withKubeletAPI) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { w.Member.Run(ctx) })
	if w.serving != nil {
		w.serving.Start()
		defer w.serving.Stop()
	}
	w.health.SetHealthy(kubeletAPIWarnable)
	if err := w.srv.Serve(ctx); err != nil {
		w.log.Error("kubelet API stopped", "error", err)
		w.health.SetUnhealthy(kubeletAPIWarnable, "stopped: "+err.Error())
	}
	wg.Wait()
}

// newKubeletServer builds the kubelet API of cluster mode ([cluster] kubelet_port and the TLS
// keys) and opens its socket: on node_ip when set, else on every address (the kubelet's
// --address 0.0.0.0). /pods and /containerLogs read the pod controller and the runtime (the
// path of `slicectl logs`), /stats/summary the pod stats sampler's samples, /healthz the
// health tracker. A serving pair or client CA that does not load refuses the start; a port
// that cannot be opened leaves the node without the kubelet API (nil, nil), unhealthy in
// kubeletAPIWarnable.
func newKubeletServer(d *daemon, node string, ips []string, log *slog.Logger) (*kubeletserver.Server, certificate.Manager, error) {
	cc := d.cfg.Cluster
	tokens, access, err := cluster.NewReviewClientsForConfig(d.conn.creds.Config)
	if err != nil {
		return nil, nil, err
	}
	// With server_tls_bootstrap the serving certificate is the cluster's, requested for the
	// Node's host name and addresses (the kubelet's serving certificate manager).
	var serving certificate.Manager
	var servingCert func() *tls.Certificate
	if cc.ServerTLSBootstrap {
		if serving, err = cluster.NewServingManager(context.Background(), cluster.ServingOptions{Config: d.conn.creds.Config, NodeName: node,
			Hostname: node, IPs: ips, CertDir: d.cfg.ClusterCertDir(), CertFile: cc.TLSCertFile, KeyFile: cc.TLSPrivateKeyFile,
			Metrics: certificateMetrics(d.kubelet), Logger: log.With("component", "certificates")}); err != nil {
			return nil, nil, err
		}
		servingCert = serving.Current
	}
	boot, err := procfs.BootTime(d.procRoot)
	if err != nil {
		log.Warn("boot time unknown; the stats summary's node start time is slicelet's", "error", err)
		boot = d.clock.Now()
	}
	back := &backend{ctrl: d.ctrl, rt: d.rt}
	// exec, attach and port-forward go to the runtime's streaming server (CRI); without one
	// (systemd) the kubelet API says so.
	var streamer pods.Streamer
	if d.prt != nil {
		streamer = d.prt.streamer
	}
	endpoints := d.metrics.KubeletHandlers(log.With("component", "kubelet-api"))
	srv, err := kubeletserver.New(kubeletserver.Options{
		NodeName: node, Address: net.JoinHostPort(cc.NodeIP, strconv.Itoa(cc.KubeletPort)),
		CertFile: cc.TLSCertFile, KeyFile: cc.TLSPrivateKeyFile, CertDir: d.cfg.ClusterCertDir(), ServingCertificate: servingCert,
		Hosts: append([]string{node}, ips...), ClientCAFile: cc.ClientCAFile, Anonymous: cc.AnonymousAuth,
		Tokens: tokens, Access: access, Pods: d.ctrl.Pods,
		Logs: func(ctx context.Context, namespace, name, container string, opts pods.LogOptions, w io.Writer) error {
			err := back.Logs(ctx, namespace, name, container, opts, w)
			if errors.Is(err, api.ErrNotFound) {
				return fmt.Errorf("%w: %w", kubeletserver.ErrNotFound, err)
			}
			return err
		},
		Summary: func() statsv1alpha1.Summary {
			n, ok := d.stats.LatestNode()
			return kubeletserver.Summary(node, boot, n, ok, d.stats.LatestPods(), d.ctrl.Pods(), func(uid types.UID) []podstats.VolumeStat {
				ps, _ := d.volumes.Pod(uid)
				return ps.Volumes
			})
		},
		Metrics: endpoints.Metrics, MetricsProbes: endpoints.Probes, MetricsCadvisor: endpoints.Cadvisor, MetricsSLIs: endpoints.SLIs,
		Healthz: endpoints.Healthz, Streamer: streamer, Clock: d.clock, Logger: log.With("component", "kubelet-api"),
	})
	if err != nil {
		return nil, nil, err
	}
	d.health.Register(kubeletAPIWarnable)
	if err := srv.Listen(); err != nil {
		log.Error("kubelet API off: its port cannot be opened", "error", err)
		d.health.SetUnhealthy(kubeletAPIWarnable, err.Error())
		return nil, nil, nil
	}
	return srv, serving, nil
}
