package worker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/slices"
)

// emptyDirPath is where an emptyDir volume lives: StateDir/pods/<uid>/volumes/<name>. Names
// are DNS labels (validated), so they are single path elements.
func (w *Worker) emptyDirPath(uid, name string) string {
	return filepath.Join(w.podDir(uid), "volumes", name)
}

// EmptyDirs returns the pod's emptyDir volumes by name with where they live, for
// ephemeral-storage accounting; nil for a pod whose UID is not valid (slices.ValidateUID).
func (w *Worker) EmptyDirs(pod *v1.Pod) map[string]string {
	uid := string(pod.UID)
	if slices.ValidateUID(uid) != nil {
		return nil
	}
	return lifecycle.EmptyDirs(pod, func(name string) string { return w.emptyDirPath(uid, name) })
}

// prepareVolumes creates the pod's emptyDir directories (0750; with an fsGroup owned by that
// group, 2770, as the kubelet's SetVolumeOwnership does) and the hostPath directories and
// files of the *OrCreate types, and returns the host path of every volume. A hostPath whose
// type does not match is an error naming the volume.
func (w *Worker) prepareVolumes(pod *v1.Pod) (map[string]string, error) {
	vols, err := lifecycle.PrepareVolumes(pod, func(v *v1.Volume) (string, error) {
		dir := w.emptyDirPath(string(pod.UID), v.Name)
		if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
			return "", err
		}
		if err := os.Mkdir(dir, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", err
		}
		return dir, ownEmptyDir(pod, v.Name, dir, w.defaultUser())
	})
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return vols, nil
}

// imagelessRuntime is a runtime without images (systemdrt): a container without runAsUser runs
// as its DefaultUser instead of an image's user.
type imagelessRuntime interface {
	DefaultUser() (uid, gid int64)
}

// defaultUser is who a container without runAsUser runs as when the runtime says so, else nil
// (the image's user, root for ownership purposes).
func (w *Worker) defaultUser() *[2]int64 {
	if r, ok := w.rt.(imagelessRuntime); ok {
		uid, gid := r.DefaultUser()
		return &[2]int64{uid, gid}
	}
	return nil
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
