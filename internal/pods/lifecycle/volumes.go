package lifecycle

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

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
// (PrepareHostPath). Other volume types are left out (validation rejects them). An error is a
// *VolumeError.
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

// VolumeError is a volume that could not be made ready: Err is the kubelet's MountVolume.SetUp
// error for it.
type VolumeError struct {
	Volume string
	Err    error
}

func (e *VolumeError) Error() string { return fmt.Sprintf("volume %q: %v", e.Volume, e.Err) }

func (e *VolumeError) Unwrap() error { return e.Err }

// PrepareVolume is PrepareVolumes of one volume: its host path, and false for a volume it
// leaves out; an error is a *VolumeError.
func PrepareVolume(v *v1.Volume, emptyDir func(v *v1.Volume) (string, error)) (string, bool, error) {
	switch {
	case v.EmptyDir != nil:
		dir, err := emptyDir(v)
		if err != nil {
			return "", false, &VolumeError{Volume: v.Name, Err: err}
		}
		return dir, true, nil
	case v.HostPath != nil:
		if err := PrepareHostPath(v.HostPath); err != nil {
			return "", false, &VolumeError{Volume: v.Name, Err: err}
		}
		return v.HostPath.Path, true, nil
	}
	return "", false, nil
}

// VolumePlugin is the name of the kubelet's volume plugin of v (its volume_plugin and
// plugin_name metric labels): kubernetes.io/empty-dir, host-path, configmap, secret,
// projected, downward-api or csi (an inline csi volume); "" for a volume of another type.
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
	case v.CSI != nil:
		return "kubernetes.io/csi"
	}
	return ""
}

// PrepareHostPath checks or creates a hostPath per its type, as the kubelet's hostPath volume
// plugin does at SetUp (pkg/volume/hostpath/host_path.go checkTypeInternal), with its errors:
// DirectoryOrCreate makes the directory and its parents (0755) when nothing is there,
// FileOrCreate an empty file (0644) but not its parent directory (a missing parent fails the
// mount); then, as for the other types, what is there must be that kind of file. No type is
// not checked.
func PrepareHostPath(hp *v1.HostPathVolumeSource) error {
	t := v1.HostPathUnset
	if hp.Type != nil {
		t = *hp.Type
	}
	path := hp.Path
	_, statErr := os.Stat(path)
	exists := statErr == nil
	switch t {
	case v1.HostPathUnset:
		return nil
	case v1.HostPathDirectoryOrCreate:
		if !exists {
			if err := os.MkdirAll(path, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			return nil
		}
		t = v1.HostPathDirectory
	case v1.HostPathFileOrCreate:
		if !exists {
			f, err := os.OpenFile(path, os.O_CREATE, 0o644)
			if f != nil {
				f.Close()
			}
			if err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			return nil
		}
		t = v1.HostPathFile
	}
	expected, ok := map[v1.HostPathType]string{
		v1.HostPathDirectory: "directory",
		v1.HostPathFile:      "file",
		v1.HostPathSocket:    "socket file",
		v1.HostPathCharDev:   "character device",
		v1.HostPathBlockDev:  "block device",
	}[t]
	if !ok {
		return fmt.Errorf("%s is an invalid volume type", t)
	}
	got, err := hostFileType(path)
	switch {
	case err != nil:
		return fmt.Errorf("hostPath type check failed, %s is not a %s, unable to determine its type: %w", path, expected, err)
	case got != string(t):
		return fmt.Errorf("hostPath type check failed: %s is not a %s, it's a %s", path, expected, got)
	}
	return nil
}

// hostFileType is the kind of file at path, named as the kubelet's hostutil names it
// (pkg/volume/util/hostutil/hostutil.go getFileType): Directory, File, Socket, CharDevice,
// BlockDevice.
func hostFileType(path string) (string, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("path %q does not exist", path)
	}
	if err != nil {
		return "", err
	}
	m := fi.Mode()
	switch {
	case m.IsDir():
		return string(v1.HostPathDirectory), nil
	case m.IsRegular():
		return string(v1.HostPathFile), nil
	case m&fs.ModeSocket != 0:
		return string(v1.HostPathSocket), nil
	case m&fs.ModeCharDevice != 0:
		return string(v1.HostPathCharDev), nil
	case m&fs.ModeDevice != 0:
		return string(v1.HostPathBlockDev), nil
	}
	return "", errors.New("only recognise file, directory, socket, block device and character device")
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
