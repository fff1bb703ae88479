package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	stdslices "slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// CSINodeClient is the node's access to its CSINode object (the Node authorizer lets a node
// create and update its own).
type CSINodeClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*storagev1.CSINode, error)
	Create(ctx context.Context, obj *storagev1.CSINode, opts metav1.CreateOptions) (*storagev1.CSINode, error)
	Update(ctx context.Context, obj *storagev1.CSINode, opts metav1.UpdateOptions) (*storagev1.CSINode, error)
}

// AnnotationCSINodeID is the Node annotation mapping each registered CSI driver to the node's
// ID in it (the kubelet's nodeinfomanager annotationKeyNodeID).
const AnnotationCSINodeID = "csi.volume.kubernetes.io/nodeid"

// CSINodeInfo keeps the node's API objects in step with its CSI drivers, as the kubelet's
// nodeinfomanager (pkg/volume/csi/nodeinfomanager): the CSINode object named as the Node and
// owned by it, listing each driver with its node ID, topology keys and volume limit; the
// Node's csi.volume.kubernetes.io/nodeid annotation; and the topology a driver reports as Node
// labels. It implements internal/pods/csi's NodeInfo.
type CSINodeInfo struct {
	nodes    NodeClient
	csiNodes CSINodeClient
	node     string
	mu       sync.Mutex // one change at a time, as the kubelet's nodeUpdateFuncs
}

// NewCSINodeInfo returns the CSINode keeper of node.
func NewCSINodeInfo(clients Clients, node string) *CSINodeInfo {
	return &CSINodeInfo{nodes: clients.Nodes, csiNodes: clients.CSINodes, node: node}
}

// Initialize creates the node's CSINode without drivers when it has none (the kubelet's
// InitializeCSINodeWithAnnotation at start), so the scheduler finds it before any driver
// registers.
func (c *CSINodeInfo) Initialize(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.csiNode(ctx)
	return err
}

// csiNode is the node's CSINode, created when it has none.
func (c *CSINodeInfo) csiNode(ctx context.Context) (*storagev1.CSINode, error) {
	if c.csiNodes == nil {
		return nil, fmt.Errorf("CSINode %s: no client", c.node)
	}
	cn, err := c.csiNodes.Get(ctx, c.node, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		return cn, err
	}
	node, err := c.nodes.Get(ctx, c.node, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("CSINode %s: its Node: %w", c.node, err)
	}
	cn, err = c.csiNodes.Create(ctx, NewCSINode(node), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return c.csiNodes.Get(ctx, c.node, metav1.GetOptions{})
	}
	return cn, err
}

// NewCSINode is the CSINode of node, without drivers, owned by the Node (so it goes with it).
func NewCSINode(node *v1.Node) *storagev1.CSINode {
	return &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{
			Name: node.Name,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
			}},
		},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{}},
	}
}

// WithDriver is spec.drivers with driver's entry added or replaced: its node ID, its topology
// keys (sorted) and, when the driver reports one, its volume limit; false when nothing changes.
func WithDriver(drivers []storagev1.CSINodeDriver, name, nodeID string, maxVolumes int64, topology map[string]string) ([]storagev1.CSINodeDriver, bool) {
	d := storagev1.CSINodeDriver{Name: name, NodeID: nodeID, TopologyKeys: stdslices.Sorted(maps.Keys(topology))}
	if maxVolumes > 0 {
		n := int32(min(maxVolumes, int64(1<<31-1)))
		d.Allocatable = &storagev1.VolumeNodeResources{Count: &n}
	}
	out := make([]storagev1.CSINodeDriver, 0, len(drivers)+1)
	changed := true
	for _, x := range drivers {
		if x.Name != name {
			out = append(out, x)
			continue
		}
		changed = !sameDriver(x, d)
	}
	return append(out, d), changed
}

func sameDriver(a, b storagev1.CSINodeDriver) bool {
	count := func(r *storagev1.VolumeNodeResources) int32 {
		if r == nil || r.Count == nil {
			return -1
		}
		return *r.Count
	}
	return a.NodeID == b.NodeID && stdslices.Equal(a.TopologyKeys, b.TopologyKeys) && count(a.Allocatable) == count(b.Allocatable)
}

// NodeIDAnnotation is the value of the Node's csi.volume.kubernetes.io/nodeid annotation with
// driver's node ID set (nodeID "" removes the driver): a JSON object, "" when no driver is
// left. An existing value that is not such an object is replaced.
func NodeIDAnnotation(existing, driver, nodeID string) (string, error) {
	ids := map[string]string{}
	if existing != "" {
		if err := json.Unmarshal([]byte(existing), &ids); err != nil {
			ids = map[string]string{}
		}
	}
	if nodeID == "" {
		delete(ids, driver)
	} else {
		ids[driver] = nodeID
	}
	if len(ids) == 0 {
		return "", nil
	}
	b, err := json.Marshal(ids)
	return string(b), err
}

// InstallDriver records a registered driver: the Node's node ID annotation and topology
// labels, then the CSINode's entry (the kubelet's InstallCSIDriver), each retried on a
// conflict.
func (c *CSINodeInfo) InstallDriver(ctx context.Context, driver, nodeID string, maxVolumes int64, topology map[string]string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.patchNode(ctx, driver, nodeID, topology); err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cn, err := c.csiNode(ctx)
		if err != nil {
			return err
		}
		drivers, changed := WithDriver(cn.Spec.Drivers, driver, nodeID, maxVolumes, topology)
		if !changed {
			return nil
		}
		cn = cn.DeepCopy()
		cn.Spec.Drivers = drivers
		_, err = c.csiNodes.Update(ctx, cn, metav1.UpdateOptions{})
		return err
	})
}

// UninstallDriver removes a deregistered driver from the CSINode and the Node's annotation
// (the kubelet's UninstallCSIDriver; its topology labels stay, as the kubelet leaves them).
func (c *CSINodeInfo) UninstallDriver(ctx context.Context, driver string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cn, err := c.csiNode(ctx)
		if err != nil {
			return err
		}
		i := stdslices.IndexFunc(cn.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == driver })
		if i < 0 {
			return nil
		}
		cn = cn.DeepCopy()
		cn.Spec.Drivers = stdslices.Delete(cn.Spec.Drivers, i, i+1)
		_, err = c.csiNodes.Update(ctx, cn, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	return c.patchNode(ctx, driver, "", nil)
}

// patchNode sets (nodeID "": removes) driver's entry in the Node's node ID annotation and adds
// its topology labels, as one merge patch guarded by the Node's resourceVersion.
func (c *CSINodeInfo) patchNode(ctx context.Context, driver, nodeID string, topology map[string]string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.nodes.Get(ctx, c.node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		value, err := NodeIDAnnotation(node.Annotations[AnnotationCSINodeID], driver, nodeID)
		if err != nil {
			return err
		}
		labels := map[string]any{}
		for k, v := range topology {
			if node.Labels[k] != v {
				labels[k] = v
			}
		}
		if value == node.Annotations[AnnotationCSINodeID] && len(labels) == 0 {
			return nil
		}
		meta := map[string]any{"resourceVersion": node.ResourceVersion}
		if value == "" {
			meta["annotations"] = map[string]any{AnnotationCSINodeID: nil}
		} else {
			meta["annotations"] = map[string]any{AnnotationCSINodeID: value}
		}
		if len(labels) > 0 {
			meta["labels"] = labels
		}
		patch, err := json.Marshal(map[string]any{"metadata": meta})
		if err != nil {
			return err
		}
		_, err = c.nodes.Patch(ctx, c.node, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
}
