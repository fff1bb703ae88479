package worker

import (
	"context"
	"fmt"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slicelet/slicelet/internal/pods/csi"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// The node's part of a claim's expansion (lifecycle/expansion.go has the rules): at mount,
// a claim whose volume grew is expanded before the pod starts (offline expansion, the kubelet's
// expandVolumeDuringMount), and while the pod runs its claims are read again at its syncs and
// expanded in place (online expansion: the volume manager's populator re-reads the claim at each
// SyncPod, its reconciler's ExpandInUseVolume).

// The kubelet's event reasons of a node expansion (pkg/kubelet/events).
const (
	EventVolumeResizeFailed         = "VolumeResizeFailed"
	EventFileSystemResizeFailed     = "FileSystemResizeFailed"
	EventFileSystemResizeSuccessful = "FileSystemResizeSuccessful"
)

// volumeFSResize is the kubelet's operation name of an online expansion
// (GenerateExpandInUseVolumeFunc), timed into storage_operation_duration_seconds.
const volumeFSResize = "volume_fs_resize"

// expandCheckPeriod is how often a running pod's claims are read again for an expansion at
// most: the kubelet reads them at each pod sync; a pod synced every second while it waits
// for something else does not read them that often.
const expandCheckPeriod = 10 * time.Second

// expansion is what the node remembers of a claim volume's expansions while the pod has it.
type expansion struct {
	checked time.Time
	// failed: an expansion failed with a final error (the kubelet's
	// MarkVolumeExpansionFailedWithFinalError).
	failed bool
	// inUse: the driver cannot expand the volume while it is published (FailedPrecondition):
	// no online expansion until it is set up again (MarkForInUseExpansionError).
	inUse bool
}

// expandable reports whether the kubelet's volume plugin of c grows volumes on the node
// (RequiresFSResize: CSI persistent volumes and local volumes; not hostPath, nor inline CSI).
func expandable(c *claimed) bool {
	if c.claim == "" {
		return false
	}
	return c.plugin == "kubernetes.io/local-volume" || (c.plugin == "kubernetes.io/csi" && c.csi != nil)
}

// expandAtMount expands the claim volume c of pod, just set up, when its persistent volume grew
// past the claim's status capacity: a read-only volume is not expanded
// (FileSystemResizeFailed); an error keeps the pod from starting on the volume.
func (w *Worker) expandAtMount(pod *v1.Pod, c *claimed, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) error {
	exp := lifecycle.ExpansionOf(pvc, pv)
	if !expandable(c) || !exp.Needed {
		return nil
	}
	if c.readOnly {
		msg := fmt.Sprintf("MountVolume.NodeExpandVolume failed for volume %q requested read-only file system", pv.Name)
		w.podEvent(pod, v1.EventTypeWarning, EventFileSystemResizeFailed, "%s", msg)
		w.claimEvent(pvc, v1.EventTypeWarning, EventFileSystemResizeFailed, msg)
		return nil
	}
	if _, err := w.nodeExpand(pod, c, pvc, pv.Name, exp); err != nil {
		if c.block {
			return fmt.Errorf("MapVolume.MarkVolumeAsMounted failed while expanding volume for volume %q : %w", pv.Name, err)
		}
		return fmt.Errorf("MountVolume.Setup failed while expanding volume for volume %q : %w", pv.Name, err)
	}
	return nil
}

// expandOnline reads the claim of the pod's volume name (set up as c) again, at most every
// expandCheckPeriod, and expands the volume in place when it grew; a failure is the pod's
// VolumeResizeFailed event, and is tried again at a later sync. The pod keeps running.
func (w *Worker) expandOnline(pod *v1.Pod, e *entry, name string, c claimed) {
	if !expandable(&c) || c.readOnly || c.expand.inUse || w.opts.Cluster == nil || w.clock.Since(c.expand.checked) < expandCheckPeriod {
		return
	}
	c.expand.checked = w.clock.Now()
	defer func() { w.keepClaimed(e, name, c) }()
	pvc, err := w.opts.Cluster.PersistentVolumeClaim(pod.Namespace, c.claim)
	if err != nil || pvc.Spec.VolumeName == "" {
		w.log.Debug("claim not read for an expansion", "pod_uid", string(pod.UID), "claim", c.claim, "error", err)
		return
	}
	pv, err := w.opts.Cluster.PersistentVolume(pvc.Spec.VolumeName)
	if err != nil || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
		w.log.Debug("claim's volume not read for an expansion", "pod_uid", string(pod.UID), "claim", c.claim, "error", err)
		return
	}
	exp := lifecycle.ExpansionOf(pvc, pv)
	if !exp.Needed {
		return
	}
	start := w.clock.Now()
	_, err = w.nodeExpand(pod, &c, pvc, pv.Name, exp)
	if m := w.opts.VolumeMetrics; m != nil {
		m.VolumeOperation(c.plugin, volumeFSResize, w.clock.Since(start), err != nil)
	}
	if err != nil {
		w.podEvent(pod, v1.EventTypeWarning, EventVolumeResizeFailed, "NodeExpandVolume.NodeExpandVolume failed for volume %q : %v", pv.Name, err)
		w.log.Warn("volume not expanded", "pod_uid", string(pod.UID), "volume", name, "claim", c.claim, "error", err)
	}
}

// nodeExpand grows the claim volume c of pod to what the claim says (the kubelet's
// NodeExpander.expandOnPlugin with a resizer that records its progress, else
// legacyCallNodeExpandOnPlugin): the claim marked NodeResizeInProgress, the plugin called,
// then the claim's status capacity written and its resize status cleared — or, on a failure,
// a NodeResizeError condition (and NodeResizeInfeasible when the driver says it never can).
// done: nothing more to do for this size.
func (w *Worker) nodeExpand(pod *v1.Pod, c *claimed, pvc *v1.PersistentVolumeClaim, pvName string, exp lifecycle.VolumeExpansion) (done bool, _ error) {
	newSize := exp.New
	recovery := lifecycle.ExpansionRecovery(pvc)
	check := lifecycle.ExpansionCheck{Allowed: true}
	if recovery {
		newSize = pvc.Status.AllocatedResources[v1.ResourceStorage]
		check = lifecycle.CheckExpansion(pvc, newSize, c.expand.failed)
		if !check.Allowed {
			// Waiting for the resizer (or done by it, or by another node).
			return check.AlreadyUpdated, nil
		}
		if !check.AlreadyUpdated {
			updated, err := w.patchClaim(pvc, lifecycle.ExpansionInProgress(pvc), true)
			if err != nil {
				return false, fmt.Errorf("MountVolume.NodeExpandVolume failed to mark node expansion in progress: %w", err)
			}
			pvc = updated
		}
	}
	err := w.expandPlugin(pod, c, newSize)
	if err != nil {
		f := csi.FailureOf(err)
		if f == csi.ExpandNotSupported && (!recovery || check.AlreadyUpdated) {
			return true, nil
		}
		if recovery && f != csi.ExpandTransient {
			c.expand.failed = true
			failed := lifecycle.ExpansionFailed(pvc, err, f == csi.ExpandInfeasible || check.InfeasibleOnFailure, metav1.NewTime(w.clock.Now()))
			if _, perr := w.patchClaim(pvc, failed, false); perr != nil {
				w.log.Warn("claim's expansion failure not recorded", "pod_uid", string(pod.UID), "claim", c.claim, "error", perr)
			}
		}
		if f == csi.ExpandInUse {
			c.expand.inUse = true
			return !recovery, nil
		}
		return false, err
	}
	msg := fmt.Sprintf("MountVolume.NodeExpandVolume succeeded for volume %q %s", pvName, pod.Spec.NodeName)
	w.podEvent(pod, v1.EventTypeNormal, EventFileSystemResizeSuccessful, "%s", msg)
	w.claimEvent(pvc, v1.EventTypeNormal, EventFileSystemResizeSuccessful, msg)
	w.log.Info("volume expanded", "pod_uid", string(pod.UID), "claim", c.claim, "persistent_volume", pvName, "size", newSize.String())
	statusCap := pvc.Status.Capacity[v1.ResourceStorage]
	if check.AlreadyUpdated || (!recovery && statusCap.Cmp(newSize) >= 0) {
		return true, nil
	}
	if _, err := w.patchClaim(pvc, lifecycle.ExpansionFinished(pvc, newSize), true); err != nil {
		if recovery {
			return true, fmt.Errorf("mountVolume.NodeExpandVolume update pvc status failed: %w", err)
		}
		return false, fmt.Errorf("mountVolume.NodeExpandVolume update PVC status failed : %w", err)
	}
	return true, nil
}

// expandPlugin asks the volume plugin of c to grow what is on the volume to newSize: the CSI
// driver's NodeExpandVolume; for a local volume nothing (a directory, or a device the pod maps:
// the kubelet's local plugin resizes only a filesystem it mounted from a device, which slicelet
// does not mount).
func (w *Worker) expandPlugin(pod *v1.Pod, c *claimed, newSize resource.Quantity) error {
	if c.csi != nil {
		if w.opts.CSI == nil {
			return &csi.ExpandError{Failure: csi.ExpandTransient, Err: fmt.Errorf("driver name %s not found in the list of registered CSI drivers", c.csi.Driver)}
		}
		return w.opts.CSI.NodeExpand(context.Background(), pod, *c.csi, c.block, newSize)
	}
	if c.block {
		return nil
	}
	st, err := os.Stat(c.path)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("local volume %s is not a directory: slicelet mounts no filesystem from a device, so it resizes none", c.path)
	}
	w.log.Info("expansion of directory based local volumes is a no-op", "path", c.path)
	return nil
}

// patchClaim writes the status of the claim old as updated (a strategic merge patch of the
// status subresource; withVersion: refused if the claim changed since old was read) and
// returns the claim the API server answers.
func (w *Worker) patchClaim(old, updated *v1.PersistentVolumeClaim, withVersion bool) (*v1.PersistentVolumeClaim, error) {
	patch, err := lifecycle.ClaimStatusPatch(old, updated, withVersion)
	if err != nil {
		return old, err
	}
	out, err := w.opts.Cluster.PatchClaimStatus(old.Namespace, old.Name, patch)
	if err != nil {
		return old, fmt.Errorf("patchPVCStatus failed to patch PVC %q: %w", old.Name, err)
	}
	return out, nil
}

// claimEvent records an event about the claim pvc.
func (w *Worker) claimEvent(pvc *v1.PersistentVolumeClaim, eventType, reason, msg string) {
	ref := &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID, ResourceVersion: pvc.ResourceVersion}
	w.events.Eventf(ref, eventType, reason, "%s", msg)
}
