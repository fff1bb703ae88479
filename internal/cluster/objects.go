package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/internal/pods"
)

// ConfigMapClient is the node's access to the ConfigMaps of one namespace: get only, of the
// ones its pods reference (the Node authorizer allows nothing else).
type ConfigMapClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.ConfigMap, error)
}

// RuntimeClassClient is the node's access to RuntimeClasses (cluster-scoped; the Node
// authorizer lets a node read them).
type RuntimeClassClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*nodev1.RuntimeClass, error)
}

// PersistentVolumeClaimClient is the node's access to the claims of one namespace: get, and
// patch of their status, of the ones its pods use (the Node authorizer allows nothing else).
type PersistentVolumeClaimClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.PersistentVolumeClaim, error)
	// Patch of the status subresource: a node expansion's progress (NodeRestriction lets a
	// node change status.capacity, conditions and allocatedResourceStatuses).
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.PersistentVolumeClaim, error)
}

// PersistentVolumeClient is the node's access to the persistent volumes its pods' claims are
// bound to.
type PersistentVolumeClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.PersistentVolume, error)
}

// CSIDriverClient reads the CSIDriver objects of the drivers the node's pods use.
type CSIDriverClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*storagev1.CSIDriver, error)
}

// VolumeAttachmentClient reads the attachments of the node's CSI volumes.
type VolumeAttachmentClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*storagev1.VolumeAttachment, error)
}

// SecretClient is the node's access to the Secrets of one namespace, as ConfigMapClient.
type SecretClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1.Secret, error)
}

// The object cache's timing: the kubelet's TTL-based configmap and secret managers
// (pkg/kubelet/util/manager/cache_based_manager.go; the default TTL is the node's
// node.alpha.kubernetes.io/ttl annotation, 1 minute without it).
const (
	// ObjectTTL is how long a fetched ConfigMap or Secret is served before it is fetched
	// again.
	ObjectTTL = time.Minute
	// errorTTL is how long a failed fetch is remembered (NotFound, or the API server away):
	// an object created after its pod is picked up within it, and a pod's syncs do not wait
	// for an API server that hangs more than once per errorTTL.
	errorTTL = 5 * time.Second
	// objectIdle is how long an entry no pod asked for is kept: the pods that referenced
	// it are gone.
	objectIdle = 2 * ObjectTTL
	// maxObjects bounds the cache; the least recently used entry goes first.
	maxObjects = 1024
)

// cacheEntry is one fetched object (or the error of its fetch).
type cacheEntry[T any] struct {
	obj     T
	err     error
	expires time.Time // fetched again from then on
	used    time.Time
}

// objectCache is a get-with-TTL cache of one kind of object, keyed by namespace/name, bounded by
// maxObjects and objectIdle. An API error other than NotFound serves the object last fetched
// (a node that loses the API server keeps its pods' files), or is returned when there is none.
type objectCache[T any] struct {
	fetch func(ctx context.Context, namespace, name string) (T, error)
	clock clock.PassiveClock

	mu      sync.Mutex
	entries map[string]*cacheEntry[T]
}

func newObjectCache[T any](c clock.PassiveClock, fetch func(ctx context.Context, namespace, name string) (T, error)) *objectCache[T] {
	return &objectCache[T]{fetch: fetch, clock: c, entries: map[string]*cacheEntry[T]{}}
}

// get is the object namespace/name, from the cache while fresh.
func (c *objectCache[T]) get(namespace, name string) (T, error) {
	key := namespace + "/" + name
	now := c.clock.Now()
	c.mu.Lock()
	if e, ok := c.entries[key]; ok && now.Before(e.expires) {
		e.used = now
		c.mu.Unlock()
		return e.obj, e.err
	}
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	obj, err := c.fetch(ctx, namespace, name)
	cancel()

	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.entries[key]; ok && err != nil && !apierrors.IsNotFound(err) && prev.err == nil {
		prev.used, prev.expires = now, now.Add(errorTTL)
		return prev.obj, nil
	}
	e := &cacheEntry[T]{obj: obj, err: err, expires: now.Add(ObjectTTL), used: now}
	if err != nil {
		e.expires = now.Add(errorTTL)
	}
	c.entries[key] = e
	c.pruneLocked(now)
	return obj, err
}

// pruneLocked drops the entries unused for objectIdle, then the least recently used ones
// beyond maxObjects.
func (c *objectCache[T]) pruneLocked(now time.Time) {
	var oldest string
	for k, e := range c.entries {
		if now.Sub(e.used) >= objectIdle {
			delete(c.entries, k)
			continue
		}
		if oldest == "" || e.used.Before(c.entries[oldest].used) {
			oldest = k
		}
	}
	if len(c.entries) > maxObjects {
		delete(c.entries, oldest)
	}
}

// len is the number of entries.
func (c *objectCache[T]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Objects gives the pods bound to this node the ConfigMaps, Secrets, service-account tokens
// and service environment variables they reference, from the API server with the node's
// credentials (the kubelet's configmap and secret managers, token manager and service
// lister). It asks only for what a pod names: the Node authorizer refuses the rest. Its
// methods are safe for concurrent use and are what internal/pods/worker's ClusterObjects asks.
type Objects struct {
	mu   sync.Mutex
	seen map[string]bool // the pods of the last snapshot, uid@resourceVersion (register)

	configMaps     *objectCache[*v1.ConfigMap]
	secrets        *objectCache[*v1.Secret]
	runtimeClasses *objectCache[*nodev1.RuntimeClass]
	tokens         *tokenManager
	services       *serviceEnv
	claims         func(namespace string) PersistentVolumeClaimClient
	volumes        PersistentVolumeClient
	csiDrivers     *objectCache[*storagev1.CSIDriver]
	attachments    VolumeAttachmentClient
	trustBundles   ClusterTrustBundleClient
	podCerts       *podCertificates
}

// NewObjects returns the API-backed objects of clients, on clk.
func NewObjects(clients Clients, clk clock.PassiveClock) *Objects {
	o := &Objects{
		tokens:       newTokenManager(clients.ServiceAccounts, clk),
		services:     &serviceEnv{},
		claims:       clients.PersistentVolumeClaims,
		volumes:      clients.PersistentVolumes,
		attachments:  clients.VolumeAttachments,
		trustBundles: clients.ClusterTrustBundles,
		podCerts:     newPodCertificates(clients, clk),
	}
	o.csiDrivers = newObjectCache(clk, func(ctx context.Context, _, name string) (*storagev1.CSIDriver, error) {
		if clients.CSIDrivers == nil {
			return nil, apierrors.NewNotFound(storagev1.Resource("csidrivers"), name)
		}
		return clients.CSIDrivers.Get(ctx, name, metav1.GetOptions{})
	})
	o.configMaps = newObjectCache(clk, func(ctx context.Context, ns, name string) (*v1.ConfigMap, error) {
		if clients.ConfigMaps == nil {
			return nil, apierrors.NewNotFound(v1.Resource("configmap"), name)
		}
		return clients.ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	})
	o.secrets = newObjectCache(clk, func(ctx context.Context, ns, name string) (*v1.Secret, error) {
		if clients.Secrets == nil {
			return nil, apierrors.NewNotFound(v1.Resource("secret"), name)
		}
		return clients.Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	})
	o.runtimeClasses = newObjectCache(clk, func(ctx context.Context, _, name string) (*nodev1.RuntimeClass, error) {
		if clients.RuntimeClasses == nil {
			return nil, apierrors.NewNotFound(nodev1.Resource("runtimeclasses"), name)
		}
		return clients.RuntimeClasses.Get(ctx, name, metav1.GetOptions{})
	})
	return o
}

// RuntimeHandler is the CRI runtime handler of the RuntimeClass name, as the kubelet's
// runtimeclass manager's LookupRuntimeHandler (pkg/kubelet/runtimeclass): the API's NotFound
// (`runtimeclasses.node.k8s.io "name" not found`), or another error naming the class.
func (o *Objects) RuntimeHandler(name string) (string, error) {
	rc, err := o.runtimeClasses.get("", name)
	switch {
	case apierrors.IsNotFound(err):
		return "", err
	case err != nil:
		return "", fmt.Errorf("failed to lookup RuntimeClass %s: %w", name, err)
	}
	return rc.Handler, nil
}

// ConfigMap returns the ConfigMap namespace/name, or the API's error (NotFound:
// `configmaps "name" not found`).
func (o *Objects) ConfigMap(namespace, name string) (*v1.ConfigMap, error) {
	return o.configMaps.get(namespace, name)
}

// claimTimeout bounds one read of a claim or a volume.
const claimTimeout = 10 * time.Second

// PersistentVolumeClaim reads the claim namespace/name from the API server, uncached, as the
// kubelet's volume manager does: a claim is read until it is bound and its volume set up,
// which the worker then keeps.
func (o *Objects) PersistentVolumeClaim(namespace, name string) (*v1.PersistentVolumeClaim, error) {
	if o.claims == nil {
		return nil, apierrors.NewNotFound(v1.Resource("persistentvolumeclaims"), name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
	defer cancel()
	return o.claims(namespace).Get(ctx, name, metav1.GetOptions{})
}

// PatchClaimStatus applies the strategic merge patch to the status of the claim
// namespace/name (the kubelet's PatchPVCStatus of a node expansion).
func (o *Objects) PatchClaimStatus(namespace, name string, patch []byte) (*v1.PersistentVolumeClaim, error) {
	if o.claims == nil {
		return nil, apierrors.NewNotFound(v1.Resource("persistentvolumeclaims"), name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
	defer cancel()
	return o.claims(namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
}

// PersistentVolume reads the persistent volume name from the API server, uncached.
func (o *Objects) PersistentVolume(name string) (*v1.PersistentVolume, error) {
	if o.volumes == nil {
		return nil, apierrors.NewNotFound(v1.Resource("persistentvolumes"), name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
	defer cancel()
	return o.volumes.Get(ctx, name, metav1.GetOptions{})
}

// CSIDriver returns the CSIDriver object of a CSI driver (cached as ConfigMaps are: the
// kubelet's CSIDriver lister), or the API's error (NotFound when the driver has none).
func (o *Objects) CSIDriver(name string) (*storagev1.CSIDriver, error) {
	return o.csiDrivers.get("", name)
}

// VolumeAttachment reads the VolumeAttachment name from the API server, uncached: a volume
// waits on it until the external attacher has attached it.
func (o *Objects) VolumeAttachment(name string) (*storagev1.VolumeAttachment, error) {
	if o.attachments == nil {
		return nil, apierrors.NewNotFound(storagev1.Resource("volumeattachments"), name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
	defer cancel()
	return o.attachments.Get(ctx, name, metav1.GetOptions{})
}

// Secret returns the Secret namespace/name, or the API's error.
func (o *Objects) Secret(namespace, name string) (*v1.Secret, error) {
	return o.secrets.get(namespace, name)
}

// withSource is a copy of an API pod marked as the cluster source's
// (kubernetes.io/config.source: cluster): the pod worker serves its objects from the API
// server, not from the node's own stores.
func withSource(p *v1.Pod) *v1.Pod {
	cp := p.DeepCopy()
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	cp.Annotations[pods.AnnotationSource] = pods.SourceCluster
	return cp
}
