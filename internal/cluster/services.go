package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// ServiceClient is the node's access to the Services (all namespaces: a node may list and
// watch them, the Node authorizer's node rules).
type ServiceClient interface {
	List(ctx context.Context, opts metav1.ListOptions) (*v1.ServiceList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// masterServices are the services of the default namespace every pod gets the variables of,
// enableServiceLinks or not (pkg/kubelet/kubelet_pods.go, masterServices).
var masterServices = map[string]bool{"kubernetes": true}

// errServicesNotSynced is the kubelet's error while its service informer has not listed once:
// the container waits (CreateContainerConfigError).
var errServicesNotSynced = errors.New("services have not yet been read at least once, cannot construct envvars")

// serviceEnv is the services' informer and the variables it gives a pod's containers.
type serviceEnv struct {
	mu        sync.Mutex
	store     cache.Store
	hasSynced func() bool
}

// informer is the informer on services whose store the variables are read from (to run).
func (s *serviceEnv) informer(client ServiceClient) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return client.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return client.Watch(ctx, opts)
		},
	}
	inf := newInformer(lw, &v1.Service{}, "services", stripService)
	s.mu.Lock()
	s.store, s.hasSynced = inf.GetStore(), inf.HasSynced
	s.mu.Unlock()
	return inf
}

// env is the service variables of a pod in namespace ns: errServicesNotSynced until the
// informer listed once; none when no informer runs.
func (s *serviceEnv) env(ns string, enableServiceLinks bool) (map[string]string, error) {
	s.mu.Lock()
	store, synced := s.store, s.hasSynced
	s.mu.Unlock()
	if store == nil {
		return nil, nil
	}
	if !synced() {
		return nil, errServicesNotSynced
	}
	var svcs []*v1.Service
	for _, o := range store.List() {
		if svc, ok := o.(*v1.Service); ok {
			svcs = append(svcs, svc)
		}
	}
	return ServiceEnvVars(svcs, ns, enableServiceLinks), nil
}

// ServiceEnv is the service environment variables of a pod in namespace ns (worker's
// ClusterObjects).
func (o *Objects) ServiceEnv(namespace string, enableServiceLinks bool) (map[string]string, error) {
	return o.services.env(namespace, enableServiceLinks)
}

// ServiceEnvVars are the variables the services give a pod of namespace ns: those of ns when
// enableServiceLinks, and the master service "kubernetes" of the default namespace always
// (pkg/kubelet/kubelet_pods.go getServiceEnvVarMap; the variables are
// pkg/kubelet/envvars/envvars.go FromServices). Services without a cluster IP give none.
func ServiceEnvVars(services []*v1.Service, ns string, enableServiceLinks bool) map[string]string {
	picked := map[string]*v1.Service{}
	for _, svc := range services {
		if !serviceIPSet(svc) {
			continue
		}
		switch {
		case svc.Namespace == metav1.NamespaceDefault && masterServices[svc.Name]:
			if _, ok := picked[svc.Name]; !ok {
				picked[svc.Name] = svc
			}
		case svc.Namespace == ns && enableServiceLinks:
			picked[svc.Name] = svc
		}
	}
	out := map[string]string{}
	for _, svc := range picked {
		addServiceVars(out, svc)
	}
	return out
}

// serviceIPSet reports whether the service has a cluster IP (not headless).
func serviceIPSet(svc *v1.Service) bool {
	return svc.Spec.ClusterIP != v1.ClusterIPNone && svc.Spec.ClusterIP != ""
}

// envName is a service or port name as a variable name: upper case, '-' as '_'.
func envName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }

// addServiceVars adds one service's variables: NAME_SERVICE_HOST, NAME_SERVICE_PORT (first
// port) and NAME_SERVICE_PORT_<PORT NAME>, and the Docker link variables (NAME_PORT,
// NAME_PORT_<port>_<PROTO>{,_PROTO,_PORT,_ADDR}).
func addServiceVars(out map[string]string, svc *v1.Service) {
	if len(svc.Spec.Ports) == 0 {
		return
	}
	prefix := envName(svc.Name)
	ip := svc.Spec.ClusterIP
	out[prefix+"_SERVICE_HOST"] = ip
	portVar := prefix + "_SERVICE_PORT"
	out[portVar] = strconv.Itoa(int(svc.Spec.Ports[0].Port))
	for i, sp := range svc.Spec.Ports {
		port := strconv.Itoa(int(sp.Port))
		if sp.Name != "" {
			out[portVar+"_"+envName(sp.Name)] = port
		}
		proto := string(v1.ProtocolTCP)
		if sp.Protocol != "" {
			proto = string(sp.Protocol)
		}
		url := fmt.Sprintf("%s://%s", strings.ToLower(proto), net.JoinHostPort(ip, port))
		if i == 0 {
			out[prefix+"_PORT"] = url
		}
		pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, sp.Port, strings.ToUpper(proto))
		out[pp] = url
		out[pp+"_PROTO"] = strings.ToLower(proto)
		out[pp+"_PORT"] = port
		out[pp+"_ADDR"] = ip
	}
}
