package agent

import (
	"errors"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/slicelet/slicelet/internal/pods/worker"
)

// lateObjects is the worker's worker.ClusterObjects, set once cluster mode is built (after
// the worker): until then, and without cluster mode, nothing is there.
type lateObjects struct {
	mu sync.Mutex
	o  worker.ClusterObjects
}

var _ worker.ClusterObjects = (*lateObjects)(nil)

// errNoCluster is what a cluster pod's token gets before cluster mode runs.
var errNoCluster = errors.New("cluster mode is not running")

func (l *lateObjects) set(o worker.ClusterObjects) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.o = o
}

func (l *lateObjects) get() worker.ClusterObjects {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.o
}

// ConfigMap is cluster mode's ConfigMap namespace/name.
func (l *lateObjects) ConfigMap(namespace, name string) (*v1.ConfigMap, error) {
	if o := l.get(); o != nil {
		return o.ConfigMap(namespace, name)
	}
	return nil, apierrors.NewNotFound(v1.Resource("configmap"), name)
}

// Secret is cluster mode's Secret namespace/name.
func (l *lateObjects) Secret(namespace, name string) (*v1.Secret, error) {
	if o := l.get(); o != nil {
		return o.Secret(namespace, name)
	}
	return nil, apierrors.NewNotFound(v1.Resource("secret"), name)
}

// ServiceAccountToken is cluster mode's token for pod.
func (l *lateObjects) ServiceAccountToken(pod *v1.Pod, src *v1.ServiceAccountTokenProjection) ([]byte, error) {
	if o := l.get(); o != nil {
		return o.ServiceAccountToken(pod, src)
	}
	return nil, errNoCluster
}

// ServiceEnv is cluster mode's service variables for a pod of namespace.
func (l *lateObjects) ServiceEnv(namespace string, enableServiceLinks bool) (map[string]string, error) {
	if o := l.get(); o != nil {
		return o.ServiceEnv(namespace, enableServiceLinks)
	}
	return nil, nil
}

// RuntimeHandler is cluster mode's runtime handler of the RuntimeClass name.
func (l *lateObjects) PersistentVolumeClaim(namespace, name string) (*v1.PersistentVolumeClaim, error) {
	if o := l.get(); o != nil {
		return o.PersistentVolumeClaim(namespace, name)
	}
	return nil, errNoCluster
}

func (l *lateObjects) PersistentVolume(name string) (*v1.PersistentVolume, error) {
	if o := l.get(); o != nil {
		return o.PersistentVolume(name)
	}
	return nil, errNoCluster
}

func (l *lateObjects) RuntimeHandler(name string) (string, error) {
	if o := l.get(); o != nil {
		return o.RuntimeHandler(name)
	}
	return "", errNoCluster
}
