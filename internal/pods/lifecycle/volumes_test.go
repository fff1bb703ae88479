package lifecycle

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestPrepareHostPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cases := []struct {
		name    string
		path    string
		typ     v1.HostPathType
		wantErr string
		wantDir bool // the path is a directory afterwards
		wantReg bool // the path is a regular file afterwards
	}{
		{name: "unset: not checked", path: filepath.Join(dir, "missing"), typ: v1.HostPathUnset},
		{name: "DirectoryOrCreate creates with parents", path: filepath.Join(dir, "a", "b"), typ: v1.HostPathDirectoryOrCreate, wantDir: true},
		{name: "DirectoryOrCreate on a file", path: file, typ: v1.HostPathDirectoryOrCreate, wantErr: "hostPath type check failed: " + file + " is not a directory, it's a File"},
		{name: "FileOrCreate creates", path: filepath.Join(dir, "new"), typ: v1.HostPathFileOrCreate, wantReg: true},
		{name: "FileOrCreate makes no parent", path: filepath.Join(dir, "c", "f"), typ: v1.HostPathFileOrCreate, wantErr: "no such file or directory"},
		{name: "FileOrCreate keeps a file", path: file, typ: v1.HostPathFileOrCreate, wantReg: true},
		{name: "FileOrCreate on a directory", path: dir, typ: v1.HostPathFileOrCreate, wantErr: "hostPath type check failed: " + dir + " is not a file, it's a Directory"},
		{name: "Directory", path: dir, typ: v1.HostPathDirectory, wantDir: true},
		{name: "Directory that is a file", path: file, typ: v1.HostPathDirectory, wantErr: "hostPath type check failed: " + file + " is not a directory, it's a File"},
		{name: "File", path: file, typ: v1.HostPathFile, wantReg: true},
		{name: "File that is a directory", path: dir, typ: v1.HostPathFile, wantErr: "hostPath type check failed: " + dir + " is not a file, it's a Directory"},
		{name: "Socket", path: sock, typ: v1.HostPathSocket},
		{name: "Socket that is a file", path: file, typ: v1.HostPathSocket, wantErr: "hostPath type check failed: " + file + " is not a socket file, it's a File"},
		{name: "missing Socket", path: filepath.Join(dir, "docker.sock"), typ: v1.HostPathSocket,
			wantErr: "hostPath type check failed, " + filepath.Join(dir, "docker.sock") + " is not a socket file, unable to determine its type: path \"" + filepath.Join(dir, "docker.sock") + "\" does not exist"},
		{name: "CharDevice", path: "/dev/null", typ: v1.HostPathCharDev},
		{name: "BlockDevice that is a char device", path: "/dev/null", typ: v1.HostPathBlockDev, wantErr: "hostPath type check failed: /dev/null is not a block device, it's a CharDevice"},
		{name: "missing Directory", path: filepath.Join(dir, "missing"), typ: v1.HostPathDirectory, wantErr: "unable to determine its type: path"},
		{name: "unknown type", path: dir, typ: "Fifo", wantErr: "Fifo is an invalid volume type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			typ := c.typ
			err := PrepareHostPath(&v1.HostPathVolumeSource{Path: c.path, Type: &typ})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.wantDir || c.wantReg {
				fi, err := os.Stat(c.path)
				if err != nil || fi.IsDir() != c.wantDir || fi.Mode().IsRegular() != c.wantReg {
					t.Errorf("after: %v, %v", fi, err)
				}
			}
		})
	}
}

func TestPrepareVolumes(t *testing.T) {
	dir := t.TempDir()
	dirType := v1.HostPathDirectory
	pod := &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir, Type: &dirType}}},
		{Name: "other", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}},
	}}}
	var asked []string
	got, err := PrepareVolumes(pod, func(v *v1.Volume) (string, error) {
		asked = append(asked, v.Name)
		return "/state/" + v.Name, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["scratch"] != "/state/scratch" || got["host"] != dir || len(asked) != 1 {
		t.Errorf("volumes %v (emptyDir asked for %v)", got, asked)
	}

	cases := []struct {
		name    string
		vol     v1.Volume
		wantErr string
	}{
		{"emptyDir fails", v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}, `volume "scratch": disk full`},
		{"hostPath of the wrong type", v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/dev/null", Type: &dirType}}},
			`volume "host": hostPath type check failed: /dev/null is not a directory, it's a CharDevice`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{c.vol}}}
			_, err := PrepareVolumes(pod, func(*v1.Volume) (string, error) { return "", errors.New("disk full") })
			if err == nil || err.Error() != c.wantErr {
				t.Errorf("error %v, want %q", err, c.wantErr)
			}
		})
	}
}

func TestEmptyDirs(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/srv"}}},
	}}}
	got := EmptyDirs(pod, func(name string) string { return "/state/" + name })
	if len(got) != 1 || got["scratch"] != "/state/scratch" {
		t.Errorf("EmptyDirs = %v, want only scratch at /state/scratch", got)
	}
}

func TestMemoryVolumeSize(t *testing.T) {
	gi := int64(1 << 30)
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	tests := []struct {
		name               string
		sizeLimit          *resource.Quantity
		allocatable, limit int64
		want               int64
	}{
		{name: "allocatable", allocatable: 4 * gi, want: 4 * gi},
		{name: "the pod's memory limit", allocatable: 4 * gi, limit: gi, want: gi},
		{name: "a pod limit above allocatable", allocatable: 4 * gi, limit: 8 * gi, want: 4 * gi},
		{name: "sizeLimit below the pod limit", allocatable: 4 * gi, limit: gi, sizeLimit: q("64Mi"), want: 64 << 20},
		{name: "sizeLimit above the pod limit", allocatable: 4 * gi, limit: gi, sizeLimit: q("2Gi"), want: gi},
		{name: "zero sizeLimit ignored", allocatable: 4 * gi, sizeLimit: q("0"), want: 4 * gi},
		{name: "nothing known", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MemoryVolumeSize(&v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: tt.sizeLimit}, tt.allocatable, tt.limit); got != tt.want {
				t.Errorf("MemoryVolumeSize = %d, want %d", got, tt.want)
			}
		})
	}
}
