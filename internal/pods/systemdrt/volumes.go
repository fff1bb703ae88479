package systemdrt

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
// are DNS labels (Validate), so they are single path elements.
func (r *Runtime) emptyDirPath(uid, name string) string {
	return filepath.Join(r.podDir(uid), "volumes", name)
}

// prepareVolumes creates the pod's emptyDir directories (0750; with an fsGroup owned by that
// group, 2770, as the kubelet's SetVolumeOwnership does) and the hostPath directories and
// files of the *OrCreate types, and returns the host path of every volume. A hostPath whose
// type does not match is an error naming the volume.
func (r *Runtime) prepareVolumes(pod *v1.Pod) (map[string]string, error) {
	return lifecycle.PrepareVolumes(pod, func(v *v1.Volume) (string, error) {
		dir := r.emptyDirPath(string(pod.UID), v.Name)
		if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
			return "", err
		}
		if err := os.Mkdir(dir, 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", err
		}
		return dir, r.ownEmptyDir(pod, v.Name, dir)
	})
}

// ownEmptyDir gives an emptyDir to the pod's fsGroup (group rwx, setgid), or, when every
// container that mounts it runs as the same user and group, to that user.
func (r *Runtime) ownEmptyDir(pod *v1.Pod, name, dir string) error {
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

// checkMountSources makes sure every volume the container mounts has a host path.
func checkMountSources(c *v1.Container, vols map[string]string) error {
	for _, m := range c.VolumeMounts {
		if _, ok := vols[m.Name]; !ok {
			return fmt.Errorf("volume mount %q: no such volume", m.Name)
		}
	}
	return nil
}

// StorageDirs returns where the pod keeps local storage, for ephemeral-storage accounting: its
// emptyDir volumes by name. Containers have no writable layer (they run on the host's
// filesystem) and log to the journal, so there is nothing per container. A pod whose UID is not
// valid (slices.ValidateUID) has none.
func (r *Runtime) StorageDirs(pod *v1.Pod) (volumes map[string]string, containers map[string][]string, other []string) {
	uid := string(pod.UID)
	if slices.ValidateUID(uid) != nil {
		return nil, nil, nil
	}
	volumes = lifecycle.EmptyDirs(pod, func(name string) string { return r.emptyDirPath(uid, name) })
	return volumes, nil, nil
}
