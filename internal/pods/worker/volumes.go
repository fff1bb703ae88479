package worker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/slices"
)

// volumePath is where a pod's emptyDir or object volume (configMap, secret, projected,
// downwardAPI) of plugin (lifecycle.VolumePlugin) lives: StateDir/pods/<uid>/volumes/<name>;
// with KubeletPodsDir, the kubelet's <pods dir>/<uid>/volumes/<plugin, "/" escaped as
// "~">/<name> (pkg/kubelet/kubelet_getters.go getPodVolumeDir, utilstrings.EscapeQualifiedName),
// so the kubelet and slicelet find each other's volumes when the node changes agent — but a
// volume already set up in slicelet's own layout stays there for the pod's life. Names are DNS
// labels (validated), so they are single path elements.
func (w *Worker) volumePath(uid, plugin, name string) string {
	own := filepath.Join(w.podDir(uid), "volumes", name)
	if w.opts.KubeletPodsDir == "" {
		return own
	}
	if _, err := os.Lstat(own); err == nil {
		return own
	}
	return filepath.Join(w.opts.KubeletPodsDir, uid, "volumes", strings.ReplaceAll(plugin, "/", "~"), name)
}

// volumeDirs are the directories a pod's volumes live in: slicelet's own and, with
// KubeletPodsDir, the kubelet's (one directory per plugin).
func (w *Worker) volumeDirs(uid string) []string {
	dirs := []string{filepath.Join(w.podDir(uid), "volumes")}
	if w.opts.KubeletPodsDir == "" {
		return dirs
	}
	plugins, _ := os.ReadDir(filepath.Join(w.opts.KubeletPodsDir, uid, "volumes"))
	for _, p := range plugins {
		if p.IsDir() {
			dirs = append(dirs, filepath.Join(w.opts.KubeletPodsDir, uid, "volumes", p.Name()))
		}
	}
	return dirs
}

// emptyDirPlugin is lifecycle.VolumePlugin of an emptyDir volume.
const emptyDirPlugin = "kubernetes.io/empty-dir"

// EmptyDirs returns the pod's emptyDir volumes by name with where they live, for
// ephemeral-storage accounting; nil for a pod whose UID is not valid (slices.ValidateUID).
func (w *Worker) EmptyDirs(pod *v1.Pod) map[string]string {
	uid := string(pod.UID)
	if slices.ValidateUID(uid) != nil {
		return nil
	}
	return lifecycle.EmptyDirs(pod, func(name string) string { return w.volumePath(uid, emptyDirPlugin, name) })
}

// prepareVolumes creates the pod's emptyDir directories and the hostPath directories and
// files of the *OrCreate types, and returns the host path of every volume. A hostPath whose
// type does not match is an error naming the volume. An emptyDir is 0777 with a runtime of
// images, as the kubelet's (pkg/volume/emptydir setupDir), and with an fsGroup owned by that
// group with setgid (SetVolumeOwnership); the systemd runtime's host commands get 0750, owned
// by the fsGroup (2770) or by the one user of the containers that mount it (ownEmptyDir).
func (w *Worker) prepareVolumes(pod *v1.Pod, e *entry) (map[string]string, error) {
	emptyDir := func(v *v1.Volume) (string, error) {
		dir := w.volumePath(string(pod.UID), emptyDirPlugin, v.Name)
		if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
			return "", err
		}
		if err := os.Mkdir(dir, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", err
		}
		if v.EmptyDir.Medium == v1.StorageMediumMemory {
			if err := w.mountMemoryVolume(pod, v.EmptyDir, dir); err != nil {
				return "", err
			}
		}
		if w.opts.Images != nil {
			return dir, openEmptyDir(pod, dir)
		}
		return dir, ownEmptyDir(pod, v.Name, dir, w.defaultUser())
	}
	vols := map[string]string{}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		start := w.clock.Now()
		path, ok, err := lifecycle.PrepareVolume(v, emptyDir)
		if !ok && err == nil {
			continue
		}
		// A volume is set up once for the pod (the kubelet's MountVolume.SetUp); later syncs
		// find it ready.
		w.volumeSetUp(e, v, start, err == nil && !w.mountedVolume(e, v.Name), err)
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		vols[v.Name] = path
	}
	return vols, nil
}

// setUpVolumes makes the pod's emptyDir and hostPath volumes ready (prepareVolumes) and
// returns every volume's host path, the object volumes (objVols) included, before anything of
// the pod is made in the runtime: the kubelet's SyncPod waits for every volume to be mounted
// (pkg/kubelet/kubelet.go, volumeManager.WaitForAttachAndMount) before containerRuntime.SyncPod
// makes the sandbox, so a pod whose hostPath is missing or of the wrong type has no sandbox.
// A volume that cannot be set up is reported as FailedMount in the kubelet's words, once per
// change of its error.
func (w *Worker) setUpVolumes(pod *v1.Pod, e *entry, objVols map[string]string) (map[string]string, error) {
	vols, err := w.prepareVolumes(pod, e)
	msg := ""
	if err != nil {
		msg = err.Error()
		if ve := (*lifecycle.VolumeError)(nil); errors.As(err, &ve) {
			msg = fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", ve.Volume, ve.Err)
		}
	}
	e.recMu.Lock()
	changed := msg != e.setUpErr
	e.setUpErr = msg
	e.recMu.Unlock()
	if changed && msg != "" {
		w.podEvent(pod, v1.EventTypeWarning, EventFailedMount, "%s", msg)
	}
	if err != nil {
		return nil, err
	}
	maps.Copy(vols, objVols)
	return vols, nil
}

// VolumeMetrics times volume operations: the kubelet's storage_operation_duration_seconds
// by volume plugin (lifecycle.VolumePlugin), operation and outcome.
type VolumeMetrics interface {
	VolumeOperation(plugin, operation string, d time.Duration, failed bool)
}

// volumeMount is the kubelet's operation name of a volume's setup (MountVolume.SetUp).
const volumeMount = "volume_mount"

// mountedVolume reports whether the pod's volume name is set up.
func (w *Worker) mountedVolume(e *entry, name string) bool {
	e.recMu.Lock()
	defer e.recMu.Unlock()
	_, ok := e.mounted[name]
	return ok
}

// volumeSetUp records a setup of the pod's volume v begun at start: a success marks it set
// up; a failure, or a success that did something (count), is timed into VolumeMetrics.
func (w *Worker) volumeSetUp(e *entry, v *v1.Volume, start time.Time, count bool, err error) {
	plugin := lifecycle.VolumePlugin(v)
	if m := w.opts.VolumeMetrics; m != nil && (count || err != nil) {
		m.VolumeOperation(plugin, volumeMount, w.clock.Since(start), err != nil)
	}
	if err != nil {
		return
	}
	e.recMu.Lock()
	if e.mounted == nil {
		e.mounted = map[string]string{}
	}
	e.mounted[v.Name] = plugin
	e.recMu.Unlock()
}

// entries is a snapshot of the pods' entries, taken under w.mu; each entry's own state is
// read under its recMu.
func (w *Worker) entries() []*entry {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*entry, 0, len(w.pods))
	for _, e := range w.pods {
		out = append(out, e)
	}
	return out
}

// MountedVolumes counts the volumes set up for the pods, by plugin (the kubelet's actual
// state of the world).
func (w *Worker) MountedVolumes() map[string]int {
	entries := w.entries()
	out := map[string]int{}
	for _, e := range entries {
		e.recMu.Lock()
		for _, plugin := range e.mounted {
			out[plugin]++
		}
		e.recMu.Unlock()
	}
	return out
}

// Mounter mounts and unmounts the tmpfs of memory-backed emptyDir volumes and the file systems
// of local volumes on block devices (the OS boundary of volume preparation).
type Mounter interface {
	// MountTmpfs mounts a tmpfs of size bytes (0: the kernel's default) on dir.
	MountTmpfs(dir string, size int64) error
	// FormatAndMount mounts the block device's file system of type fstype on dir with the
	// options, making one first when the device has none (the kubelet's
	// SafeFormatAndMount): a device with another file system is an error, never formatted.
	FormatAndMount(device, dir, fstype string, options []string) error
	// Unmount unmounts what is mounted on dir.
	Unmount(dir string) error
	// IsMountPoint reports whether something is mounted on dir.
	IsMountPoint(dir string) (bool, error)
}

// mountMemoryVolume mounts the tmpfs of a memory-backed emptyDir on dir unless it is mounted
// already (a pod synced again, or adopted after a restart), sized as the kubelet sizes it
// (lifecycle.MemoryVolumeSize: allocatable memory, the pod's memory limit, the volume's
// sizeLimit).
func (w *Worker) mountMemoryVolume(pod *v1.Pod, ed *v1.EmptyDirVolumeSource, dir string) error {
	mounted, err := w.opts.Mounter.IsMountPoint(dir)
	if err != nil || mounted {
		return err
	}
	var allocatable, limit int64
	if m, ok := w.opts.Allocatable[v1.ResourceMemory]; ok {
		allocatable = m.Value()
	}
	if rc := slices.PodResources(pod, w.opts.Resources); rc.Memory != nil {
		limit = *rc.Memory
	}
	return w.opts.Mounter.MountTmpfs(dir, lifecycle.MemoryVolumeSize(ed, allocatable, limit))
}

// releaseVolumes tears down the volumes of a pod that finished, as the kubelet's volume
// manager does once a pod terminated (pkg/kubelet/volumemanager: the pod leaves the desired
// state of the world and its volumes are unmounted; an emptyDir's TearDown removes its
// directory): memory-backed emptyDirs unmounted, then every volume directory removed.
func (w *Worker) releaseVolumes(uid string) error {
	if err := w.unmountVolumes(uid); err != nil {
		return err
	}
	if err := w.removeVolumes(uid); err != nil {
		return err
	}
	w.mu.Lock()
	e := w.pods[uid]
	w.mu.Unlock()
	var devices []string
	if e != nil {
		e.recMu.Lock()
		for _, c := range e.claims {
			if c.deviceDir != "" {
				devices = append(devices, c.deviceDir)
			}
		}
		e.mounted, e.claims = nil, nil
		e.recMu.Unlock()
	}
	return w.unmountLocalDevices(devices)
}

// StatsVolume is one of a pod's volumes set up on the node, as its stats are measured (the
// kubelet's mounted volumes, each measured by its plugin's metrics provider).
type StatsVolume struct {
	// Name is the pod's volume name.
	Name string
	// Plugin is the kubelet's volume plugin (lifecycle.VolumePlugin; a claim's: its
	// persistent volume's, lifecycle.PersistentVolumePlugin).
	Plugin string
	// Path is where the volume is on the node.
	Path string
	// Claim is the claim behind the volume (a persistentVolumeClaim's, or a generic ephemeral
	// volume's); "" for the others.
	Claim string
	// LocalEphemeral is the kubelet's IsLocalEphemeralVolume (pkg/volume/util): an emptyDir
	// on the node's disk, a configMap or a gitRepo volume.
	LocalEphemeral bool
	// Block: a raw block volume (volumeMode Block); Path is the device the containers get.
	Block bool
}

// StatsVolumes are the pod's volumes set up on the node, in the pod's order; none for a pod
// the worker does not know or whose volumes were released.
func (w *Worker) StatsVolumes(pod *v1.Pod) []StatsVolume {
	uid := string(pod.UID)
	if slices.ValidateUID(uid) != nil {
		return nil
	}
	w.mu.Lock()
	e := w.pods[uid]
	w.mu.Unlock()
	if e == nil {
		return nil
	}
	e.recMu.Lock()
	mounted, claims := maps.Clone(e.mounted), maps.Clone(e.claims)
	e.recMu.Unlock()
	var out []StatsVolume
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		sv := StatsVolume{Name: v.Name, LocalEphemeral: v.GitRepo != nil || v.ConfigMap != nil ||
			(v.EmptyDir != nil && v.EmptyDir.Medium == v1.StorageMediumDefault)}
		if c, ok := claims[v.Name]; ok {
			sv.Plugin, sv.Path, sv.Claim, sv.Block = c.plugin, c.path, c.claim, c.block
		} else if plugin, ok := mounted[v.Name]; ok {
			sv.Plugin, sv.Path = plugin, w.volumePath(uid, plugin, v.Name)
			if v.HostPath != nil {
				sv.Path = v.HostPath.Path
			}
		} else {
			continue
		}
		out = append(out, sv)
	}
	return out
}

// removeVolumes removes the pod's volume directories (unmounted first: unmountVolumes); in
// the kubelet's layout, the pod's directory there too once nothing else is left in it.
func (w *Worker) removeVolumes(uid string) error {
	if err := os.RemoveAll(filepath.Join(w.podDir(uid), "volumes")); err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	if w.opts.KubeletPodsDir == "" {
		return nil
	}
	pod := filepath.Join(w.opts.KubeletPodsDir, uid)
	if err := os.RemoveAll(filepath.Join(pod, "volumes")); err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	if err := os.Remove(pod); err != nil && !errors.Is(err, fs.ErrNotExist) {
		w.log.Debug("kubelet pod directory kept", "pod_uid", uid, "err", err)
	}
	return nil
}

// unmountVolumes unmounts whatever is mounted on the pod's volume directories before they
// are removed: its CSI volumes unpublished (and unstaged when no other pod uses them), the
// tmpfs of its memory-backed emptyDirs unmounted. A CSI volume that cannot be torn down
// keeps everything in place, to be tried again.
func (w *Worker) unmountVolumes(uid string) error {
	if w.opts.CSI != nil {
		if err := w.opts.CSI.TearDown(context.Background(), uid); err != nil {
			return fmt.Errorf("csi volumes: %w", err)
		}
	}
	for _, dir := range w.volumeDirs(uid) {
		if err := w.unmountIn(dir); err != nil {
			return err
		}
	}
	return nil
}

// unmountIn unmounts whatever is mounted on the entries of dir.
func (w *Worker) unmountIn(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		mounted, err := w.opts.Mounter.IsMountPoint(p)
		if err != nil {
			return fmt.Errorf("volume %s: %w", e.Name(), err)
		}
		if mounted {
			if err := w.opts.Mounter.Unmount(p); err != nil {
				return fmt.Errorf("volume %s: %w", e.Name(), err)
			}
		}
	}
	return nil
}

// imagelessRuntime is a runtime without images (systemdrt): a container without runAsUser runs
// as its DefaultUser instead of an image's user.
type imagelessRuntime interface {
	DefaultUser() (uid, gid int64)
}

// defaultUser is who a container without runAsUser runs as when the runtime says so, else nil
// (the image's user, root for ownership purposes).
func (w *Worker) defaultUser() *[2]int64 {
	if r, ok := w.backend.(imagelessRuntime); ok {
		uid, gid := r.DefaultUser()
		return &[2]int64{uid, gid}
	}
	return nil
}

// openEmptyDir gives an emptyDir the kubelet's mode: 0777, or with the pod's fsGroup that
// group and 0777 with setgid (pkg/volume/volume_linux.go, changeFilePermission).
func openEmptyDir(pod *v1.Pod, dir string) error {
	mode := fs.FileMode(0o777)
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		if err := os.Chown(dir, -1, int(*sc.FSGroup)); err != nil {
			return err
		}
		mode |= fs.ModeSetgid
	}
	return os.Chmod(dir, mode)
}

// ownEmptyDir gives an emptyDir to the pod's fsGroup (group rwx, setgid), or, when every
// container that mounts it runs as the same user and group, to that user. def is who a
// container without runAsUser runs as (nil: root).
func ownEmptyDir(pod *v1.Pod, name, dir string, def *[2]int64) error {
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		if err := os.Chown(dir, -1, int(*sc.FSGroup)); err != nil {
			return err
		}
		return os.Chmod(dir, 0o770|fs.ModeSetgid)
	}
	uid, gid, set, same := int64(0), int64(0), false, true
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			mounts := false
			for _, m := range c.VolumeMounts {
				mounts = mounts || m.Name == name
			}
			if !mounts {
				continue
			}
			var u, g int64
			if p := lifecycle.RunAsUser(pod, c); p != nil {
				u = *p
			} else if def != nil {
				u, g = def[0], def[1]
			}
			if p := lifecycle.RunAsGroup(pod, c); p != nil {
				g = *p
			}
			if set && (u != uid || g != gid) {
				same = false
			}
			uid, gid, set = u, g, true
		}
	}
	if set && same && (uid != 0 || gid != 0) {
		return os.Chown(dir, int(uid), int(gid))
	}
	return nil
}
