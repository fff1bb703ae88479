package worker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubectl/pkg/util/fieldpath"

	"github.com/slicelet/slicelet/internal/pods/csi"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// EventFailedMount is the kubelet's event of a volume that cannot be set up.
const EventFailedMount = "FailedMount"

// defaultFileMode is the mode of projected files without one (the API's
// ConfigMapVolumeSourceDefaultMode and its siblings, 0644).
const defaultFileMode fs.FileMode = 0o644

// isObjectVolume reports whether v is written by the worker from API objects and the pod
// (configMap, secret, projected, downwardAPI): such volumes are mounted read-only.
func isObjectVolume(v *v1.Volume) bool {
	return v.ConfigMap != nil || v.Secret != nil || v.Projected != nil || v.DownwardAPI != nil
}

// readOnlyVolume reports whether the pod's volume of that name is mounted read-only whatever
// the mount says (the kubelet's configmap, secret, projected and downwardAPI plugins, a
// read-only claim or inline csi volume).
func readOnlyVolume(pod *v1.Pod, name string) bool {
	for i := range pod.Spec.Volumes {
		if v := &pod.Spec.Volumes[i]; v.Name == name {
			return isObjectVolume(v) || (v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ReadOnly) ||
				(v.CSI != nil && v.CSI.ReadOnly != nil && *v.CSI.ReadOnly)
		}
	}
	return false
}

func fileMode(mode, def *int32) fs.FileMode {
	switch {
	case mode != nil:
		return fs.FileMode(*mode) & fs.ModePerm
	case def != nil:
		return fs.FileMode(*def) & fs.ModePerm
	}
	return defaultFileMode
}

// volumePayload is the content of an object volume (the kubelet's MakePayload of the
// configmap, secret, projected and downwardAPI plugins). A missing object or key is an error
// with the kubelet's wording unless the source is optional (then it adds nothing).
func (w *Worker) volumePayload(pod *v1.Pod, v *v1.Volume) (map[string]fileProjection, error) {
	out := map[string]fileProjection{}
	switch {
	case v.ConfigMap != nil:
		return out, w.configMapPayload(out, pod, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, v.ConfigMap.DefaultMode)
	case v.Secret != nil:
		return out, w.secretPayload(out, pod, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, v.Secret.DefaultMode)
	case v.DownwardAPI != nil:
		return out, w.downwardPayload(out, pod, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode)
	case v.Projected != nil:
		def := v.Projected.DefaultMode
		for i, src := range v.Projected.Sources {
			var err error
			switch {
			case src.ConfigMap != nil:
				err = w.configMapPayload(out, pod, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, def)
			case src.Secret != nil:
				err = w.secretPayload(out, pod, src.Secret.Name, src.Secret.Items, src.Secret.Optional, def)
			case src.DownwardAPI != nil:
				err = w.downwardPayload(out, pod, src.DownwardAPI.Items, def)
			case src.ServiceAccountToken != nil:
				err = w.tokenPayload(out, pod, src.ServiceAccountToken, def)
			case src.ClusterTrustBundle != nil:
				err = w.trustBundlePayload(out, pod, src.ClusterTrustBundle, def)
			case src.PodCertificate != nil:
				err = w.podCertificatePayload(out, pod, v.Name, i, src.PodCertificate, def)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// configMapPayload adds a ConfigMap's keys (data and binaryData), or its items, to out.
func (w *Worker) configMapPayload(out map[string]fileProjection, pod *v1.Pod, name string, items []v1.KeyToPath, optional *bool, def *int32) error {
	cm, err := w.configMap(pod, name)
	if err != nil {
		if apierrors.IsNotFound(err) && isTrue(optional) {
			return nil
		}
		return err
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return addKeys(out, data, items, optional, def, "configmap references non-existent config key: %s")
}

// secretPayload adds a Secret's keys, or its items, to out.
func (w *Worker) secretPayload(out map[string]fileProjection, pod *v1.Pod, name string, items []v1.KeyToPath, optional *bool, def *int32) error {
	s, err := w.secret(pod, name)
	if err != nil {
		if apierrors.IsNotFound(err) && isTrue(optional) {
			return nil
		}
		return err
	}
	return addKeys(out, s.Data, items, optional, def, "secret references non-existent secret key: %s")
}

// addKeys adds every key of data (no items) or the items to out; a missing item key is an
// error (missing, with the key) unless optional.
func addKeys(out map[string]fileProjection, data map[string][]byte, items []v1.KeyToPath, optional *bool, def *int32, missing string) error {
	if len(items) == 0 {
		for k, v := range data {
			out[k] = fileProjection{Data: v, Mode: fileMode(nil, def)}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if isTrue(optional) {
				continue
			}
			return fmt.Errorf(missing, it.Key)
		}
		out[it.Path] = fileProjection{Data: v, Mode: fileMode(it.Mode, def)}
	}
	return nil
}

// tokenPayload adds a projected service-account token to out (cluster pods only: the
// validation refuses the source for the others).
func (w *Worker) tokenPayload(out map[string]fileProjection, pod *v1.Pod, src *v1.ServiceAccountTokenProjection, def *int32) error {
	c, err := w.clusterObjects(pod, "service account tokens")
	if err != nil {
		return err
	}
	tok, err := c.ServiceAccountToken(pod, src)
	if err != nil {
		return err
	}
	out[src.Path] = fileProjection{Data: tok, Mode: tokenMode(pod, def)}
	return nil
}

// clusterObjects is cluster mode's API server for a cluster pod's projection of what, or an
// error naming what needs it.
func (w *Worker) clusterObjects(pod *v1.Pod, what string) (ClusterObjects, error) {
	if !fromCluster(pod) || w.opts.Cluster == nil {
		return nil, fmt.Errorf("%s need an API server; slicelet has none", what)
	}
	return w.opts.Cluster, nil
}

// trustBundlePayload adds a projected ClusterTrustBundle's certificates to out (the kubelet's
// projected volume plugin: its mode as a token's).
func (w *Worker) trustBundlePayload(out map[string]fileProjection, pod *v1.Pod, src *v1.ClusterTrustBundleProjection, def *int32) error {
	c, err := w.clusterObjects(pod, "cluster trust bundles")
	if err != nil {
		return err
	}
	pemData, err := c.TrustAnchors(src)
	if err != nil {
		return err
	}
	out[src.Path] = fileProjection{Data: pemData, Mode: tokenMode(pod, def)}
	return nil
}

// podCertificatePayload adds the pod certificate of the source at index of volume to out: the
// key and chain in one credential bundle file (key first), the key, the chain, at the paths
// src gives (the kubelet's projected volume plugin).
func (w *Worker) podCertificatePayload(out map[string]fileProjection, pod *v1.Pod, volume string, index int, src *v1.PodCertificateProjection, def *int32) error {
	c, err := w.clusterObjects(pod, "pod certificates")
	if err != nil {
		return err
	}
	key, chain, err := c.PodCertificate(pod, volume, index, src)
	if err != nil {
		return err
	}
	mode := tokenMode(pod, def)
	if src.CredentialBundlePath != "" {
		out[src.CredentialBundlePath] = fileProjection{Data: append(append([]byte{}, key...), chain...), Mode: mode}
	}
	if src.KeyPath != "" {
		out[src.KeyPath] = fileProjection{Data: key, Mode: mode}
	}
	if src.CertificateChainPath != "" {
		out[src.CertificateChainPath] = fileProjection{Data: chain, Mode: mode}
	}
	return nil
}

// tokenMode is the mode of a projected token, ClusterTrustBundle or pod certificate: the projection's default mode, but 0600 with an
// fsGroup, to which the volume's ownership adds group read (pkg/volume/projected/projected.go
// collectData, then SetVolumeOwnership): 0640.
func tokenMode(pod *v1.Pod, def *int32) fs.FileMode {
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		return 0o640
	}
	return fileMode(nil, def)
}

// downwardPayload adds downwardAPI items to out: pod fields (labels and annotations as
// key="value" lines, fieldpath.FormatMap) and container resources.
func (w *Worker) downwardPayload(out map[string]fileProjection, pod *v1.Pod, items []v1.DownwardAPIVolumeFile, def *int32) error {
	for _, it := range items {
		var (
			value string
			err   error
		)
		switch {
		case it.FieldRef != nil:
			value, err = fieldpath.ExtractFieldPathAsString(pod, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			c, _ := lifecycle.ContainerByName(pod, it.ResourceFieldRef.ContainerName)
			if c == nil {
				return fmt.Errorf("container %s not found", it.ResourceFieldRef.ContainerName)
			}
			value, err = w.resourceFieldValue(pod, c, it.ResourceFieldRef)
		}
		if err != nil {
			return err
		}
		out[it.Path] = fileProjection{Data: []byte(value), Mode: fileMode(it.Mode, def)}
	}
	return nil
}

// syncObjectVolumes writes the pod's object volumes (writePayload: updated in place when
// their objects change, as the kubelet's periodic remount does) and returns the host paths by
// name. A volume that cannot be written (its object is missing) is reported once per change
// of its error as FailedMount with the kubelet's wording and returned as the error; the others
// are still written.
func (w *Worker) syncObjectVolumes(pod *v1.Pod, e *entry) (map[string]string, error) {
	out := map[string]string{}
	var gid = -1
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		gid = int(*sc.FSGroup)
	}
	var errs []string
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if claim, ok := lifecycle.ClaimName(pod, v); ok && fromCluster(pod) {
			path, err := w.claimVolume(pod, v, claim, e)
			if err != nil {
				errs = append(errs, fmt.Sprintf("Unable to attach or mount volumes: unmounted volumes=[%s], unattached volumes=[%s], failed to process volumes=[%s]: %v", v.Name, v.Name, v.Name, err))
				continue
			}
			out[v.Name] = path
			continue
		}
		if v.CSI != nil && fromCluster(pod) {
			path, err := w.inlineCSIVolume(pod, v, e)
			if err != nil {
				errs = append(errs, fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", v.Name, err))
				continue
			}
			out[v.Name] = path
			continue
		}
		if !isObjectVolume(v) {
			continue
		}
		dir := w.volumePath(string(pod.UID), lifecycle.VolumePlugin(v), v.Name)
		start := w.clock.Now()
		payload, err := w.volumePayload(pod, v)
		var wrote bool
		if err == nil {
			wrote, err = writePayload(dir, payload, gid, w.clock.Now())
			if wrote {
				// Keys only: Secret values are never logged.
				w.log.Debug("volume written", "pod_uid", string(pod.UID), "volume", v.Name, "files", len(payload))
			}
		}
		// Written at every sync (the kubelet's remount); timed when its files changed.
		w.volumeSetUp(e, v, start, wrote || !w.mountedVolume(e, v.Name), err)
		if err != nil {
			errs = append(errs, fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", v.Name, err))
			continue
		}
		out[v.Name] = dir
	}
	msg := strings.Join(errs, "; ")
	e.recMu.Lock()
	changed := msg != e.mountErr
	e.mountErr = msg
	e.recMu.Unlock()
	if changed {
		for _, m := range errs {
			w.podEvent(pod, v1.EventTypeWarning, EventFailedMount, "%s", m)
		}
	}
	if len(errs) > 0 {
		return out, errors.New(msg)
	}
	return out, nil
}

// claimVolume is the node path of the volume bound to claim, the claim of cluster pod's volume
// v (the kubelet's volume manager, for hostPath, local and CSI persistent volumes): the claim
// and its volume are read from the API server until the volume is set up (its node affinity
// matched against the Node's labels, a hostPath volume's type checked or its directory
// created, a CSI volume published), then the path is kept for the pod's life.
func (w *Worker) claimVolume(pod *v1.Pod, v *v1.Volume, claim string, e *entry) (string, error) {
	e.recMu.Lock()
	c, ok := e.claims[v.Name]
	e.recMu.Unlock()
	if ok {
		c = w.republish(pod, e, v.Name, c)
		w.expandOnline(pod, e, v.Name, c)
		return c.path, nil
	}
	if w.opts.Cluster == nil {
		return "", fmt.Errorf("error processing PVC %s/%s: no API server", pod.Namespace, claim)
	}
	pvc, err := w.opts.Cluster.PersistentVolumeClaim(pod.Namespace, claim)
	pvName, err := lifecycle.BoundVolume(pod, v, claim, pvc, err)
	if err != nil {
		return "", err
	}
	pv, err := w.opts.Cluster.PersistentVolume(pvName)
	path, readOnly, err := lifecycle.ClaimedVolume(pod, v, claim, pvc, pv, err)
	if err != nil {
		return "", err
	}
	var labels map[string]string
	if w.opts.NodeLabels != nil {
		labels = w.opts.NodeLabels()
	}
	if err := lifecycle.VolumeNodeAffinity(pv, labels); err != nil {
		return "", err
	}
	block := lifecycle.VolumeMode(pv) == v1.PersistentVolumeBlock
	deviceDir := ""
	if vol, ok := csi.FromPod(pod, v, pv, readOnly); ok && block {
		if w.opts.CSI == nil {
			return "", fmt.Errorf("MapVolume.SetUpDevice failed for volume %q : driver name %s not found in the list of registered CSI drivers", pvName, vol.Driver)
		}
		if path, err = w.opts.CSI.SetUpBlock(context.Background(), pod, vol); err != nil {
			return "", fmt.Errorf("MapVolume.SetUpDevice failed for volume %q : %w", pvName, err)
		}
	} else if ok {
		path, err = w.csiSetUp(pod, vol)
		if err != nil {
			return "", fmt.Errorf("MountVolume.SetUp failed for volume %q : %w", pvName, err)
		}
	} else if block {
		if err := lifecycle.BlockDevice(pv, path); err != nil {
			return "", fmt.Errorf("MapVolume.MapPodDevice failed for volume %q : %w", pvName, err)
		}
	} else if hp := pv.Spec.HostPath; hp != nil {
		if err := lifecycle.PrepareHostPath(&v1.HostPathVolumeSource{Path: hp.Path, Type: hp.Type}); err != nil {
			return "", fmt.Errorf("MountVolume.SetUp failed for volume %q : hostPath %s: %w", pvName, hp.Path, err)
		}
	} else if st, err := os.Stat(path); err != nil {
		// A local volume's path is the administrator's: it must be there.
		return "", fmt.Errorf("MountVolume.NewMounter initialization failed for volume %q : path %q does not exist", pvName, path)
	} else if dev, ok := lifecycle.LocalDeviceMount(pv, st.Mode()&fs.ModeDevice != 0 && st.Mode()&fs.ModeCharDevice == 0, readOnly,
		lifecycle.LocalDeviceMountsDir(w.opts.PluginsDir)); ok {
		if err := w.mountLocalDevice(dev); err != nil {
			return "", fmt.Errorf("MountVolume.MountDevice failed for volume %q : %w", pvName, err)
		}
		path, deviceDir = dev.Dir, dev.Dir
	}
	c = claimed{path: path, plugin: lifecycle.PersistentVolumePlugin(pv), claim: claim, block: block, readOnly: readOnly, deviceDir: deviceDir}
	if vol, ok := csi.FromPod(pod, v, pv, readOnly); ok {
		c.csi, c.published = &vol, w.clock.Now()
	}
	if err := w.expandAtMount(pod, &c, pvc, pv); err != nil {
		return "", err
	}
	c.expand.checked = w.clock.Now()
	w.keepClaimed(e, v.Name, c)
	w.log.Info("claim's volume set up", "pod_uid", string(pod.UID), "volume", v.Name, "claim", claim, "persistent_volume", pvName, "path", path)
	return path, nil
}

// inlineCSIVolume is the node path of cluster pod's inline csi volume v, published once for
// the pod's life (the kubelet's CSI plugin in its Ephemeral mode).
func (w *Worker) inlineCSIVolume(pod *v1.Pod, v *v1.Volume, e *entry) (string, error) {
	e.recMu.Lock()
	c, ok := e.claims[v.Name]
	e.recMu.Unlock()
	if ok {
		w.republish(pod, e, v.Name, c)
		return c.path, nil
	}
	vol, _ := csi.FromPod(pod, v, nil, false)
	start := w.clock.Now()
	path, err := w.csiSetUp(pod, vol)
	w.volumeSetUp(e, v, start, true, err)
	if err != nil {
		return "", err
	}
	w.keepClaimed(e, v.Name, claimed{path: path, plugin: lifecycle.VolumePlugin(v), csi: &vol, published: w.clock.Now()})
	return path, nil
}

// republishPeriod is how often a CSI volume whose driver requires republishing is published
// again: the kubelet remounts such volumes at each pod sync, at least every --sync-frequency
// (1 minute).
const republishPeriod = time.Minute

// republish publishes the pod's CSI volume name (set up as c) again when its driver asks for
// it (CSIDriver requiresRepublish) and republishPeriod has passed: what the driver was given,
// service account tokens, is refreshed. A failure is reported (FailedMount) and the pod keeps
// running on the volume already published, as on the kubelet. It returns c as kept.
func (w *Worker) republish(pod *v1.Pod, e *entry, name string, c claimed) claimed {
	if c.csi == nil || w.opts.CSI == nil || w.clock.Since(c.published) < republishPeriod || !w.opts.CSI.RequiresRepublish(c.csi.Driver) {
		return c
	}
	var err error
	if c.block {
		_, err = w.opts.CSI.SetUpBlock(context.Background(), pod, *c.csi)
	} else {
		_, err = w.opts.CSI.SetUp(context.Background(), pod, *c.csi)
	}
	if err != nil {
		w.podEvent(pod, v1.EventTypeWarning, EventFailedMount, "MountVolume.SetUp failed for volume %q : %v", name, err)
		w.log.Warn("csi volume not published again", "pod_uid", string(pod.UID), "volume", name, "error", err)
	}
	c.published = w.clock.Now()
	w.keepClaimed(e, name, c)
	return c
}

// claimed is a claim's volume or an inline csi volume set up for a pod: its node path (a
// block volume's: the device the containers get), the kubelet's volume plugin behind it (a
// claim's: its persistent volume's), the claim, and whether it is a raw block volume.
type claimed struct {
	path, plugin, claim string
	block               bool
	// readOnly: the pod's claim is read-only (its volume is not expanded).
	readOnly bool
	// expand is what the node keeps of the volume's expansions.
	expand expansion
	// csi is the CSI volume behind it (nil for others), published last at published.
	csi       *csi.Volume
	published time.Time
	// deviceDir is where a local volume on a block device is mounted for the node's pods
	// (lifecycle.LocalDeviceMount), "" for other volumes.
	deviceDir string
}

// mountLocalDevice mounts a local volume's block device at its device mount path unless it is
// mounted there already (by another pod of the volume, or before a restart), formatting it
// first when it has no file system, as the kubelet's local plugin's MountDevice.
func (w *Worker) mountLocalDevice(dev lifecycle.LocalDevice) error {
	w.devMu.Lock()
	defer w.devMu.Unlock()
	if err := os.MkdirAll(dev.Dir, 0o750); err != nil {
		return err
	}
	mounted, err := w.opts.Mounter.IsMountPoint(dev.Dir)
	if err != nil || mounted {
		return err
	}
	if err := w.opts.Mounter.FormatAndMount(dev.Device, dev.Dir, dev.FSType, dev.Options); err != nil {
		return err
	}
	w.log.Info("local volume device mounted", "device", dev.Device, "path", dev.Dir, "fs_type", dev.FSType)
	return nil
}

// unmountLocalDevices unmounts the local volumes' devices mounted at dirs, released by a pod,
// that no other pod of the worker still uses, and removes their directories (the kubelet's
// UnmountDevice once the volume is no pod's).
func (w *Worker) unmountLocalDevices(dirs []string) error {
	if len(dirs) == 0 {
		return nil
	}
	w.devMu.Lock()
	defer w.devMu.Unlock()
	entries := w.entries()
	used := map[string]bool{}
	for _, e := range entries {
		e.recMu.Lock()
		for _, c := range e.claims {
			used[c.deviceDir] = true
		}
		e.recMu.Unlock()
	}
	var errs []error
	for _, dir := range dirs {
		if used[dir] {
			continue
		}
		if mounted, err := w.opts.Mounter.IsMountPoint(dir); err == nil && mounted {
			if err := w.opts.Mounter.Unmount(dir); err != nil {
				errs = append(errs, fmt.Errorf("local volume device %s: %w", dir, err))
				continue
			}
		}
		if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("local volume device %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// keepClaimed records that the pod's volume name is set up as c, for the pod's life.
func (w *Worker) keepClaimed(e *entry, name string, c claimed) {
	e.recMu.Lock()
	defer e.recMu.Unlock()
	if e.claims == nil {
		e.claims = map[string]claimed{}
	}
	e.claims[name] = c
}

// csiSetUp sets the CSI volume vol of pod up through the CSI plugin; without one its driver
// is as unknown as on a kubelet node where it never registered.
func (w *Worker) csiSetUp(pod *v1.Pod, vol csi.Volume) (string, error) {
	if w.opts.CSI == nil {
		return "", fmt.Errorf("driver name %s not found in the list of registered CSI drivers", vol.Driver)
	}
	return w.opts.CSI.SetUp(context.Background(), pod, vol)
}

// validateObjectVolumes checks the object volumes the worker writes: the sources it handles
// (serviceAccountToken, clusterTrustBundle and podCertificate projections need an API server
// and are refused but for cluster mode's pods), names, keys and relative item paths, modes, downwardAPI field paths.
func validateObjectVolumes(pod *v1.Pod) field.ErrorList {
	var errs field.ErrorList
	vp := field.NewPath("spec", "volumes")
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		p := vp.Index(i)
		switch {
		case v.ConfigMap != nil:
			errs = append(errs, validateKeyItems(p.Child("configMap"), v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.DefaultMode)...)
		case v.Secret != nil:
			errs = append(errs, validateKeyItems(p.Child("secret"), v.Secret.SecretName, v.Secret.Items, v.Secret.DefaultMode)...)
		case v.DownwardAPI != nil:
			errs = append(errs, validateDownwardItems(p.Child("downwardAPI"), pod, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode)...)
		case v.Projected != nil:
			pp := p.Child("projected")
			errs = append(errs, validateMode(pp.Child("defaultMode"), v.Projected.DefaultMode)...)
			paths := map[string]bool{}
			for j, src := range v.Projected.Sources {
				sp := pp.Child("sources").Index(j)
				switch {
				case src.ConfigMap != nil:
					errs = append(errs, validateKeyItems(sp.Child("configMap"), src.ConfigMap.Name, src.ConfigMap.Items, nil)...)
					errs = append(errs, projectedPaths(sp.Child("configMap"), src.ConfigMap.Items, paths)...)
				case src.Secret != nil:
					errs = append(errs, validateKeyItems(sp.Child("secret"), src.Secret.Name, src.Secret.Items, nil)...)
					errs = append(errs, projectedPaths(sp.Child("secret"), src.Secret.Items, paths)...)
				case src.DownwardAPI != nil:
					errs = append(errs, validateDownwardItems(sp.Child("downwardAPI"), pod, src.DownwardAPI.Items, nil)...)
				case src.ServiceAccountToken != nil && fromCluster(pod):
					// Cluster mode's API server gives the token, the ClusterTrustBundles
					// and the pod certificates (ClusterObjects).
					errs = append(errs, projectedPath(sp.Child("serviceAccountToken").Child("path"), src.ServiceAccountToken.Path, paths)...)
				case src.ServiceAccountToken != nil:
					errs = append(errs, field.Forbidden(sp.Child("serviceAccountToken"), "service account tokens need an API server; slicelet has none"))
				case src.ClusterTrustBundle != nil && fromCluster(pod):
					cp := sp.Child("clusterTrustBundle")
					errs = append(errs, projectedPath(cp.Child("path"), src.ClusterTrustBundle.Path, paths)...)
				case src.PodCertificate != nil && fromCluster(pod):
					cp := sp.Child("podCertificate")
					errs = append(errs, projectedPath(cp.Child("credentialBundlePath"), src.PodCertificate.CredentialBundlePath, paths)...)
					errs = append(errs, projectedPath(cp.Child("keyPath"), src.PodCertificate.KeyPath, paths)...)
					errs = append(errs, projectedPath(cp.Child("certificateChainPath"), src.PodCertificate.CertificateChainPath, paths)...)
				case src.ClusterTrustBundle != nil:
					errs = append(errs, field.Forbidden(sp.Child("clusterTrustBundle"), "cluster trust bundles need an API server; slicelet has none"))
				case src.PodCertificate != nil:
					errs = append(errs, field.Forbidden(sp.Child("podCertificate"), "pod certificates need an API server; slicelet has none"))
				default:
					errs = append(errs, field.Required(sp, "must specify one source"))
				}
			}
		}
	}
	return errs
}

// projectedPath checks a file path of a projection's source (none when empty: a pod
// certificate's optional paths) and refuses one another source writes too.
func projectedPath(p *field.Path, path string, seen map[string]bool) field.ErrorList {
	if path == "" {
		return nil
	}
	errs := validatePath(p, path)
	if seen[path] {
		errs = append(errs, field.Duplicate(p, path))
	}
	seen[path] = true
	return errs
}

// projectedPaths refuses an item path that another source of the projection writes too.
func projectedPaths(p *field.Path, items []v1.KeyToPath, seen map[string]bool) field.ErrorList {
	var errs field.ErrorList
	for i, it := range items {
		if seen[it.Path] {
			errs = append(errs, field.Duplicate(p.Child("items").Index(i).Child("path"), it.Path))
		}
		seen[it.Path] = true
	}
	return errs
}

func validateMode(p *field.Path, mode *int32) field.ErrorList {
	if mode != nil && (*mode < 0 || *mode > 0o777) {
		return field.ErrorList{field.Invalid(p, *mode, "must be a number between 0 and 0777 (octal), both inclusive")}
	}
	return nil
}

func validatePath(p *field.Path, path string) field.ErrorList {
	if err := checkPayloadPath(path); err != nil {
		return field.ErrorList{field.Invalid(p, path, strings.TrimPrefix(err.Error(), fmt.Sprintf("path %q: ", path)))}
	}
	return nil
}

func validateKeyItems(p *field.Path, name string, items []v1.KeyToPath, def *int32) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	errs = append(errs, validateMode(p.Child("defaultMode"), def)...)
	for i, it := range items {
		ip := p.Child("items").Index(i)
		if it.Key == "" {
			errs = append(errs, field.Required(ip.Child("key"), ""))
		}
		errs = append(errs, validatePath(ip.Child("path"), it.Path)...)
		errs = append(errs, validateMode(ip.Child("mode"), it.Mode)...)
	}
	return errs
}

func validateDownwardItems(p *field.Path, pod *v1.Pod, items []v1.DownwardAPIVolumeFile, def *int32) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateMode(p.Child("defaultMode"), def)...)
	for i, it := range items {
		ip := p.Child("items").Index(i)
		errs = append(errs, validatePath(ip.Child("path"), it.Path)...)
		errs = append(errs, validateMode(ip.Child("mode"), it.Mode)...)
		switch {
		case (it.FieldRef == nil) == (it.ResourceFieldRef == nil):
			errs = append(errs, field.Invalid(ip, "", "must specify exactly one of fieldRef or resourceFieldRef"))
		case it.FieldRef != nil:
			errs = append(errs, validateFieldRef(ip.Child("fieldRef"), it.FieldRef, volumeFieldPaths)...)
		default:
			rp := ip.Child("resourceFieldRef")
			errs = append(errs, validateResourceFieldRef(rp, it.ResourceFieldRef)...)
			if c, _ := lifecycle.ContainerByName(pod, it.ResourceFieldRef.ContainerName); c == nil {
				errs = append(errs, field.NotFound(rp.Child("containerName"), it.ResourceFieldRef.ContainerName))
			}
		}
	}
	return errs
}
