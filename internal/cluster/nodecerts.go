package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	certificatesv1 "k8s.io/api/certificates/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/certificate/bootstrap"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/internal/buildinfo"
)

// The node's certificates as the kubelet manages them: the TLS bootstrap and the rotation of
// the client certificate (cmd/kubelet/app/server.go, buildKubeletClientConfig), the rotating
// transport (pkg/kubelet/certificate/transport.go) and the serving certificate requested from
// the cluster (pkg/kubelet/certificate/kubelet.go), on client-go's certificate manager and
// file store (k8s.io/client-go/util/certificate).

// Pair name prefixes of the certificate store in the cert directory: <prefix>-current.pem
// links to the newest <prefix>-<date>.pem, which holds the certificate and its key.
const (
	clientPairPrefix = "kubelet-client"
	serverPairPrefix = "kubelet-server"
)

// The rotating transport's timings (pkg/kubelet/certificate/transport.go, UpdateTransport, and
// cmd/kubelet/app/server.go): how often it looks for a new certificate, how often until the
// first one, and how long a missing or expired certificate is borne while the API server
// answers before the process exits, to be restarted into the bootstrap.
const (
	rotationCheckPeriod    = 10 * time.Second
	firstCertificatePeriod = time.Second
	certificateExitAfter   = 5 * time.Minute
)

// CertificateMetrics are the certificate managers' metrics: each function is called once, with
// its manager's current certificate, and returns the manager's counter of renewal failures
// (and the serving manager's histogram of the lifetimes rotated out). Nil ones record nothing.
type CertificateMetrics struct {
	Client func(current func() *tls.Certificate) certificate.Counter
	Server func(current func() *tls.Certificate) (certificate.Counter, certificate.Histogram)
}

// CredentialOptions are the node's credentials to the API server ([cluster] kubeconfig,
// bootstrap_kubeconfig, cert_dir, rotate_certificates).
type CredentialOptions struct {
	Kubeconfig, BootstrapKubeconfig, CertDir string
	NodeName                                 string
	Rotate                                   bool
	Metrics                                  CertificateMetrics
	Logger                                   *slog.Logger
	// Exit ends the process (the rotating transport's last resort, see certificateExitAfter).
	Exit func(reason string)
}

// Credentials are the client configuration every API client of the node is built from, and,
// with rotation, the client certificate manager behind its transport.
type Credentials struct {
	Config *rest.Config
	// Manager is the client certificate manager; nil without rotation.
	Manager certificate.Manager
}

// LoadCredentials loads the node's client configuration. Without rotation it is kubeconfig's,
// as it is. With rotation it is the kubelet's: kubeconfig when its certificate is valid, else
// the bootstrap kubeconfig's credentials request a client certificate (kubeconfig is then
// written to point at <cert_dir>/kubelet-client-current.pem, bootstrap.LoadClientConfig); a
// client certificate manager keeps the certificate renewed, and the transport presents its
// current certificate, closing every connection when it changes. The manager runs until ctx
// ends.
func LoadCredentials(ctx context.Context, o CredentialOptions) (*Credentials, error) {
	if !o.Rotate {
		cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", o.Kubeconfig, err)
		}
		return &Credentials{Config: cfg}, nil
	}
	logger := logr.FromSlogHandler(o.Logger.Handler())
	certConfig, clientConfig, err := bootstrap.LoadClientConfig(logger, o.Kubeconfig, o.BootstrapKubeconfig, o.CertDir)
	if err != nil {
		return nil, fmt.Errorf("client certificate: %w", err)
	}
	// The certificate requests in the node's content type but client-go's rate limits
	// (buildKubeletClientConfig: "use the correct content type for cert rotation, but don't set QPS").
	certConfig.ContentType, certConfig.AcceptContentTypes = ContentTypeProtobuf, ContentTypeProtobuf+",application/json"
	certConfig.UserAgent = userAgent()
	configureTransport(clientConfig)
	clientConfig.UserAgent = userAgent()
	store, err := certificate.NewFileStoreWithLogger(logger, clientPairPrefix, o.CertDir, o.CertDir, clientConfig.CertFile, clientConfig.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("client certificate store: %w", err)
	}
	mctx := klog.NewContext(ctx, logger.WithName("client-certificate"))
	// The gauge of the certificate's TTL reads the manager, made below.
	var made atomic.Pointer[certificate.Manager]
	var renewErrors certificate.Counter
	if o.Metrics.Client != nil {
		renewErrors = o.Metrics.Client(func() *tls.Certificate {
			if m := made.Load(); m != nil {
				return (*m).Current()
			}
			return nil
		})
	}
	m, err := certificate.NewManager(&certificate.Config{
		// With a certificate, renewal uses it; without, the bootstrap credentials
		// (buildClientCertificateManager).
		ClientsetFn: func(cur *tls.Certificate) (clientset.Interface, error) {
			if cur != nil {
				return clientset.NewForConfig(clientConfig)
			}
			return clientset.NewForConfig(certConfig)
		},
		Template:   &x509.CertificateRequest{Subject: nodeSubject(o.NodeName)},
		SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
		GetUsages:  certificate.DefaultKubeletClientGetUsages,
		// A kubeconfig with its certificate and key inline (kubeadm's control-plane nodes)
		// starts the store and is rotated out at once.
		BootstrapCertificatePEM: clientConfig.CertData,
		BootstrapKeyPEM:         clientConfig.KeyData,
		CertificateStore:        store,
		CertificateRenewFailure: renewErrors,
		Ctx:                     &mctx,
	})
	if err != nil {
		return nil, fmt.Errorf("client certificate manager: %w", err)
	}
	made.Store(&m)
	transportConfig := rest.AnonymousClientConfig(clientConfig)
	if err := rotateTransport(ctx, transportConfig, m, clock.RealClock{}, o.Exit, o.Logger); err != nil {
		return nil, fmt.Errorf("client certificate transport: %w", err)
	}
	m.Start()
	return &Credentials{Config: transportConfig, Manager: m}, nil
}

func userAgent() string { return "slicelet/" + buildinfo.Version }

// nodeSubject is the subject of the node's certificates: system:node:<name> in system:nodes,
// what the Node authorizer and the CSR approvers recognise.
func nodeSubject(node string) pkix.Name {
	return pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}
}

// rotationAction is what the rotating transport does after a look at the manager's
// certificate.
type rotationAction int

const (
	rotationNone rotationAction = iota
	// rotationCloseAll closes every connection: the next request presents the new certificate.
	rotationCloseAll
	// rotationExit ends the process: no valid certificate for certificateExitAfter while the
	// API server answers.
	rotationExit
	// rotationStuck is the same without an answering API server: logged, the process stays.
	rotationStuck
)

// rotationCheck is the rotating transport's state between looks (checkNewCertificateAndRotate
// of pkg/kubelet/certificate/transport.go).
type rotationCheck struct {
	exitAfter     time.Duration
	last          *tls.Certificate
	lastAvailable time.Time
}

// next decides on the manager's current certificate (nil: missing or expired) and whether the
// API server answered it lately. The exit is judged first, as the kubelet: an expired
// certificate reads as none here, since the manager's Current hides it.
func (r *rotationCheck) next(curr *tls.Certificate, serverHealthy bool, now time.Time) (rotationAction, string) {
	if r.exitAfter > 0 {
		switch {
		case curr == nil && now.After(r.lastAvailable.Add(r.exitAfter)):
			reason := fmt.Sprintf("no valid client certificate since %s", r.lastAvailable.UTC().Format(time.RFC3339))
			if serverHealthy {
				return rotationExit, reason + " and the API server answers"
			}
			return rotationStuck, reason + " and the API server does not answer; a restart may be needed to bootstrap again"
		case curr != nil && curr.Leaf != nil && now.After(curr.Leaf.NotAfter):
			if serverHealthy {
				return rotationExit, "the client certificate expired and the API server answers"
			}
			return rotationStuck, "the client certificate expired and the API server does not answer; a restart may be needed to bootstrap again"
		case curr != nil:
			r.lastAvailable = now
		}
	}
	if curr == nil || curr == r.last {
		return rotationNone, ""
	}
	r.last = curr
	return rotationCloseAll, ""
}

// rotateTransport gives cfg a transport that presents m's current client certificate and
// closes every connection when it changes (UpdateTransport of
// pkg/kubelet/certificate/transport.go, on client-go's connrotation dialer): it looks every
// rotationCheckPeriod, and every second until the first certificate. After
// certificateExitAfter without a valid certificate while the API server answers it calls exit.
// It looks until ctx ends.
func rotateTransport(ctx context.Context, cfg *rest.Config, m certificate.Manager, clk clock.Clock, exit func(string), log *slog.Logger) error {
	if cfg.Transport != nil || cfg.Dial != nil {
		return fmt.Errorf("there is already a transport or dialer configured")
	}
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return fmt.Errorf("TLS of the client configuration: %w", err)
	}
	if tlsConfig == nil {
		tlsConfig = &tls.Config{}
	}
	tlsConfig.Certificates = nil
	tlsConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if c := m.Current(); c != nil {
			return c, nil
		}
		return &tls.Certificate{}, nil
	}
	d := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	check := &rotationCheck{exitAfter: certificateExitAfter, lastAvailable: clk.Now(), last: m.Current()}
	var mu sync.Mutex
	var hasCert atomic.Bool
	hasCert.Store(check.last != nil)
	look := func() {
		mu.Lock()
		defer mu.Unlock()
		action, reason := check.next(m.Current(), m.ServerHealthy(), clk.Now())
		switch action {
		case rotationCloseAll:
			hasCert.Store(true)
			log.Info("client certificate rotated: closing the connections to the API server to present it")
			d.CloseAll()
		case rotationExit:
			log.Error("exiting to bootstrap the client certificate again", "reason", reason)
			if exit != nil {
				exit(reason)
			}
		case rotationStuck:
			log.Error("client certificate unusable", "reason", reason)
		}
	}
	go wait.UntilWithContext(ctx, func(context.Context) { look() }, rotationCheckPeriod)
	if !hasCert.Load() {
		go func() {
			_ = wait.PollUntilContextCancel(ctx, firstCertificatePeriod, false, func(context.Context) (bool, error) {
				look()
				return hasCert.Load(), nil
			})
		}()
	}
	cfg.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 25,
		DialContext:         d.DialContext,
	})
	// The transport carries the TLS settings now.
	cfg.CertData, cfg.KeyData, cfg.CertFile, cfg.KeyFile = nil, nil, "", ""
	cfg.CAData, cfg.CAFile, cfg.Insecure, cfg.NextProtos = nil, "", false, nil
	return nil
}

// ServingOptions are the kubelet API's serving certificate requested from the cluster
// ([cluster] server_tls_bootstrap).
type ServingOptions struct {
	// Config is the node's client configuration (Credentials.Config).
	Config   *rest.Config
	NodeName string
	// Hostname and IPs are the names the certificate is asked for: the Node's Hostname and
	// InternalIP addresses.
	Hostname string
	IPs      []string
	CertDir  string
	// CertFile and KeyFile, when set, are served until the cluster signs a certificate
	// ([cluster] tls_cert_file, tls_private_key_file).
	CertFile, KeyFile string
	Metrics           CertificateMetrics
	Logger            *slog.Logger
}

// NewServingManager returns the serving certificate manager (NewKubeletServerCertificateManager
// of pkg/kubelet/certificate/kubelet.go): it requests system:node:<name> for the node's names
// with signer kubernetes.io/kubelet-serving, keeps it in <cert_dir>/kubelet-server-current.pem
// and renews it. Start it to begin.
func NewServingManager(ctx context.Context, o ServingOptions) (certificate.Manager, error) {
	cs, err := clientset.NewForConfig(o.Config)
	if err != nil {
		return nil, fmt.Errorf("serving certificate client: %w", err)
	}
	logger := logr.FromSlogHandler(o.Logger.Handler())
	store, err := certificate.NewFileStoreWithLogger(logger, serverPairPrefix, o.CertDir, o.CertDir, o.CertFile, o.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate store: %w", err)
	}
	var made atomic.Pointer[certificate.Manager]
	var renewErrors certificate.Counter
	var rotation certificate.Histogram
	if o.Metrics.Server != nil {
		renewErrors, rotation = o.Metrics.Server(func() *tls.Certificate {
			if m := made.Load(); m != nil {
				return (*m).Current()
			}
			return nil
		})
	}
	template := servingTemplate(o.NodeName, o.Hostname, o.IPs)
	mctx := klog.NewContext(ctx, logger.WithName("serving-certificate"))
	m, err := certificate.NewManager(&certificate.Config{
		ClientsetFn:             func(*tls.Certificate) (clientset.Interface, error) { return cs, nil },
		GetTemplate:             func() *x509.CertificateRequest { return template },
		SignerName:              certificatesv1.KubeletServingSignerName,
		GetUsages:               certificate.DefaultKubeletServingGetUsages,
		CertificateStore:        store,
		CertificateRotation:     rotation,
		CertificateRenewFailure: renewErrors,
		Ctx:                     &mctx,
	})
	if err != nil {
		return nil, fmt.Errorf("serving certificate manager: %w", err)
	}
	made.Store(&m)
	return m, nil
}

// servingTemplate is the serving certificate's request (newGetTemplateFn and
// addressesToHostnamesAndIPs of pkg/kubelet/certificate/kubelet.go): the host name as a DNS
// name (or an IP when it is one) and the IPs, each once, sorted; nil without an IP, as the
// kubelet asks for none then (AllowDNSOnlyNodeCSR is off).
func servingTemplate(node, hostname string, ips []string) *x509.CertificateRequest {
	var names []string
	seen := map[string]bool{}
	var addrs []net.IP
	add := func(s string) {
		if ip := net.ParseIP(s); ip != nil && !seen[ip.String()] {
			seen[ip.String()] = true
			addrs = append(addrs, ip)
		}
	}
	if hostname != "" {
		if net.ParseIP(hostname) != nil {
			add(hostname)
		} else {
			names = append(names, hostname)
		}
	}
	for _, s := range ips {
		add(s)
	}
	if len(addrs) == 0 {
		return nil
	}
	slices.SortFunc(addrs, func(a, b net.IP) int { return strings.Compare(a.String(), b.String()) })
	return &x509.CertificateRequest{Subject: nodeSubject(node), DNSNames: names, IPAddresses: addrs}
}
