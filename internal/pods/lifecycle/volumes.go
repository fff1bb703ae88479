package lifecycle

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
)

// EmptyDirs maps the pod's emptyDir volumes by name to where the runtime keeps them (path of the
// volume's name), for ephemeral-storage accounting.
func EmptyDirs(pod *v1.Pod, path func(name string) string) map[string]string {
	out := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil {
			out[v.Name] = path(v.Name)
		}
	}
	return out
}

// PrepareVolumes makes the pod's volumes ready on the host and returns the host path of each
// by name: emptyDir makes an emptyDir volume (the runtime decides where it lives and who owns
// it) and returns its path; a hostPath volume is checked or created per its type
// (PrepareHostPath). Other volume types are left out (validation rejects them). An error names
// the volume.
func PrepareVolumes(pod *v1.Pod, emptyDir func(v *v1.Volume) (string, error)) (map[string]string, error) {
	out := map[string]string{}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		path, ok, err := PrepareVolume(v, emptyDir)
		if err != nil {
			return nil, err
		}
		if ok {
			out[v.Name] = path
		}
	}
	return out, nil
}

// PrepareVolume is PrepareVolumes of one volume: its host path, and false for a volume it
// leaves out.
func PrepareVolume(v *v1.Volume, emptyDir func(v *v1.Volume) (string, error)) (string, bool, error) {
	switch {
	case v.EmptyDir != nil:
		dir, err := emptyDir(v)
		if err != nil {
			return "", false, fmt.Errorf("volume %q: %w", v.Name, err)
		}
		return dir, true, nil
	case v.HostPath != nil:
		if err := PrepareHostPath(v.HostPath); err != nil {
			return "", false, fmt.Errorf("volume %q: hostPath %s: %w", v.Name, v.HostPath.Path, err)
		}
		return v.HostPath.Path, true, nil
	}
	return "", false, nil
}

// VolumePlugin is the name of the kubelet's volume plugin of v (its volume_plugin and
// plugin_name metric labels): kubernetes.io/empty-dir, host-path, configmap, secret,
// projected or downward-api; "" for a volume of another type.
func VolumePlugin(v *v1.Volume) string {
	switch {
	case v.EmptyDir != nil:
		return "kubernetes.io/empty-dir"
	case v.HostPath != nil:
		return "kubernetes.io/host-path"
	case v.ConfigMap != nil:
		return "kubernetes.io/configmap"
	case v.Secret != nil:
		return "kubernetes.io/secret"
	case v.Projected != nil:
		return "kubernetes.io/projected"
	case v.DownwardAPI != nil:
		return "kubernetes.io/downward-api"
	}
	return ""
}

// PrepareHostPath checks or creates a hostPath per its type, as the kubelet does:
// DirectoryOrCreate makes the directory (0755), FileOrCreate an empty file (0644) and its
// parent directories; the other types must already exist as that kind of file; no type is not
// checked.
func PrepareHostPath(hp *v1.HostPathVolumeSource) error {
	t := v1.HostPathUnset
	if hp.Type != nil {
		t = *hp.Type
	}
	switch t {
	case v1.HostPathDirectoryOrCreate:
		return os.MkdirAll(hp.Path, 0o755)
	case v1.HostPathFileOrCreate:
		if err := os.MkdirAll(filepath.Dir(hp.Path), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(hp.Path, os.O_RDONLY|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	case v1.HostPathUnset:
		return nil
	}
	fi, err := os.Stat(hp.Path)
	if err != nil {
		return err
	}
	m := fi.Mode()
	ok := map[v1.HostPathType]bool{
		v1.HostPathDirectory: m.IsDir(),
		v1.HostPathFile:      m.IsRegular(),
		v1.HostPathSocket:    m&fs.ModeSocket != 0,
		v1.HostPathCharDev:   m&fs.ModeCharDevice != 0,
		v1.HostPathBlockDev:  m&fs.ModeDevice != 0 && m&fs.ModeCharDevice == 0,
	}[t]
	if !ok {
		return fmt.Errorf("is not a %s", t)
	}
	return nil
}

// MemoryVolumeSize is the size of a memory-backed emptyDir's tmpfs in bytes, as the kubelet's
// calculateEmptyDirMemorySize (pkg/volume/emptydir/empty_dir.go, SizeMemoryBackedVolumes): the
// node's allocatable memory, lowered to the pod's memory limit (podMemoryLimit, the pod
// cgroup's; 0 or negative: none) and then to the volume's sizeLimit, each only when positive
// and not larger. 0 means no size option (the kernel's default).
func MemoryVolumeSize(v *v1.EmptyDirVolumeSource, allocatable, podMemoryLimit int64) int64 {
	size := allocatable
	if podMemoryLimit > 0 && podMemoryLimit <= size {
		size = podMemoryLimit
	}
	if v.SizeLimit != nil {
		if l := v.SizeLimit.Value(); l > 0 && l <= size {
			size = l
		}
	}
	return max(size, 0)
}
