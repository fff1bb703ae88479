package critest

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"
)

// DefaultBusybox is a statically linked busybox (Debian's busybox-static).
const DefaultBusybox = "/bin/busybox"

// busyboxApplets are the commands the image links to busybox.
var busyboxApplets = []string{
	"sh", "sleep", "echo", "cat", "ls", "true", "false", "date", "seq", "printf", "kill", "ps",
	"id", "env", "mkdir", "touch", "wc", "head", "tail", "dd", "rm", "yes", "nc", "ip",
}

// Applets returns the commands the image links to busybox (in /bin): a program a manifest
// names runs in the image when it is one of them.
func Applets() []string { return append([]string(nil), busyboxApplets...) }

// Image describes an image to write as an OCI image layout.
type Image struct {
	// Name is the reference it is imported as, e.g. "slicelet.test/busybox:1". Required.
	Name string
	// Cmd is the image's default command.
	Cmd []string
	// RandomMiB adds a second layer of that many MiB of random bytes, for images of distinct
	// sizes (and IDs).
	RandomMiB int
	// Busybox is the static busybox binary of the first layer; DefaultBusybox when empty.
	Busybox string
	// Entrypoint is the image's entrypoint (Cmd then holds its default arguments).
	Entrypoint []string
	// Applets, when set, are the commands linked to busybox in /bin instead of Applets().
	Applets []string
	// Passwd and Group, when set, are the first layer's /etc/passwd and /etc/group instead of
	// root's and nobody's.
	Passwd, Group string
	// Files are host files (Source, read when the image is written) added at their Path
	// inside, in a layer of their own after the first, with their mode.
	Files []File
}

// File is a host file an image holds, or a symbolic link.
type File struct {
	// Path is the file's path inside the image, relative to its root (e.g. "agnhost").
	Path string
	// Source is the host file; ignored when Link or Data is set.
	Source string
	// Data, when set, is the file's content instead of Source's (an executable: mode 0755).
	Data []byte
	// Link, when set, makes Path a symbolic link to it.
	Link string
	// Mode, when set, is the file's mode (setuid bits included) instead of Source's.
	Mode int64
}

// blob is one content-addressed blob of the layout.
type blob struct {
	digest string
	data   []byte
}

func newBlob(data []byte) blob {
	sum := sha256.Sum256(data)
	return blob{digest: "sha256:" + hex.EncodeToString(sum[:]), data: data}
}

// WriteImage writes img as an OCI image-layout tar (oci-layout, index.json, blobs/sha256/*)
// with uncompressed layers, ready for `ctr images import`, and returns the image ID (the
// config digest, which is what CRI reports as the image's id).
func WriteImage(w io.Writer, img Image) (string, error) {
	if img.Name == "" {
		return "", fmt.Errorf("image: no name")
	}
	bb := img.Busybox
	if bb == "" {
		bb = DefaultBusybox
	}
	base, err := busyboxLayer(bb, img)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", img.Name, err)
	}
	layers := []blob{newBlob(base)}
	if len(img.Files) > 0 {
		l, err := filesLayer(img.Files)
		if err != nil {
			return "", fmt.Errorf("image %s: %w", img.Name, err)
		}
		layers = append(layers, newBlob(l))
	}
	if img.RandomMiB > 0 {
		l, err := randomLayer(img.RandomMiB)
		if err != nil {
			return "", fmt.Errorf("image %s: %w", img.Name, err)
		}
		layers = append(layers, newBlob(l))
	}
	diffIDs := make([]string, len(layers))
	type desc struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int               `json:"size"`
		Platform    map[string]string `json:"platform,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}
	var layerDescs []desc
	for i, l := range layers {
		// Uncompressed layers: the diff ID is the layer digest.
		diffIDs[i] = l.digest
		layerDescs = append(layerDescs, desc{MediaType: "application/vnd.oci.image.layer.v1.tar", Digest: l.digest, Size: len(l.data)})
	}
	cfg, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		"config": map[string]any{
			"Entrypoint": img.Entrypoint,
			"Cmd":        img.Cmd,
			"Env":        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs},
	})
	if err != nil {
		return "", err
	}
	config := newBlob(cfg)
	man, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        desc{MediaType: "application/vnd.oci.image.config.v1+json", Digest: config.digest, Size: len(config.data)},
		"layers":        layerDescs,
	})
	if err != nil {
		return "", err
	}
	manifest := newBlob(man)
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"manifests": []desc{{
			MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: manifest.digest, Size: len(manifest.data),
			Platform:    map[string]string{"architecture": runtime.GOARCH, "os": "linux"},
			Annotations: map[string]string{"io.containerd.image.name": img.Name},
		}},
	})
	if err != nil {
		return "", err
	}
	tw := tar.NewWriter(w)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
	}
	for _, b := range append([]blob{config, manifest}, layers...) {
		files = append(files, struct {
			name string
			data []byte
		}{"blobs/sha256/" + b.digest[len("sha256:"):], b.data})
	}
	if err := tw.WriteHeader(&tar.Header{Name: "blobs/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
		return "", err
	}
	if err := tw.WriteHeader(&tar.Header{Name: "blobs/sha256/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
		return "", err
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			return "", err
		}
		if _, err := tw.Write(f.data); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	return config.digest, nil
}

// busyboxLayer is a layer with /bin/busybox, its applets as symlinks (img.Applets, else
// busyboxApplets), /etc/passwd and /etc/group (img's, else root's and nobody's), and the usual
// empty directories.
func busyboxLayer(busybox string, img Image) ([]byte, error) {
	bin, err := os.ReadFile(busybox)
	if err != nil {
		return nil, fmt.Errorf("busybox layer: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mt := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Name: name + "/", Typeflag: tar.TypeDir, Mode: mode, ModTime: mt})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(data)), ModTime: mt}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []string{"bin", "etc", "proc", "sys", "dev", "root", "var"} {
		if err := dir(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := dir("tmp", 0o1777); err != nil {
		return nil, err
	}
	if err := file("bin/busybox", 0o755, bin); err != nil {
		return nil, err
	}
	applets := busyboxApplets
	if len(img.Applets) > 0 {
		applets = img.Applets
	}
	for _, a := range applets {
		if err := tw.WriteHeader(&tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777, ModTime: mt}); err != nil {
			return nil, err
		}
	}
	passwd, group := "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n", "root:x:0:\nnogroup:x:65534:\n"
	if img.Passwd != "" {
		passwd = img.Passwd
	}
	if img.Group != "" {
		group = img.Group
	}
	if err := file("etc/passwd", 0o644, []byte(passwd)); err != nil {
		return nil, err
	}
	if err := file("etc/group", 0o644, []byte(group)); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// filesLayer is a layer with the host files of files, each at its path with its mode.
func filesLayer(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		// The parent directories first (usr/, usr/bin/ for usr/bin/curl).
		for i, c := range f.Path {
			if d := f.Path[:i+1]; c == '/' && !dirs[d] {
				dirs[d] = true
				if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
					return nil, err
				}
			}
		}
		if f.Link != "" {
			if err := tw.WriteHeader(&tar.Header{Name: f.Path, Typeflag: tar.TypeSymlink, Linkname: f.Link, Mode: 0o777, ModTime: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
				return nil, err
			}
			continue
		}
		data, mode := f.Data, int64(0o755)
		if data == nil {
			var err error
			if data, err = os.ReadFile(f.Source); err != nil {
				return nil, fmt.Errorf("files layer: %w", err)
			}
			st, err := os.Stat(f.Source)
			if err != nil {
				return nil, fmt.Errorf("files layer: %w", err)
			}
			mode = int64(st.Mode().Perm())
		}
		if f.Mode != 0 {
			mode = f.Mode
		}
		hdr := &tar.Header{Name: f.Path, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(data)), ModTime: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// randomLayer is a layer with one file of n MiB of random bytes (incompressible, unique).
func randomLayer(n int) ([]byte, error) {
	data := make([]byte, n<<20)
	if _, err := rand.Read(data); err != nil {
		return nil, err
	}
	return filesLayer([]File{{Path: "random.bin", Data: data, Mode: 0o644}})
}
