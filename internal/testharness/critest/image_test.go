package critest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// readLayout reads an image-layout tar into name → content.
func readLayout(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = b
	}
}

func blobOf(t *testing.T, files map[string][]byte, digest string) []byte {
	t.Helper()
	b, ok := files["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")]
	if !ok {
		t.Fatalf("blob %s missing", digest)
	}
	sum := sha256.Sum256(b)
	if "sha256:"+hex.EncodeToString(sum[:]) != digest {
		t.Fatalf("blob %s has another digest", digest)
	}
	return b
}

// TestWriteImage: the layout holds a named index entry, a manifest, a config whose diff IDs
// are the uncompressed layers' digests and whose digest is the returned ID, and a busybox
// layer; RandomMiB adds a layer of that size and changes the ID.
func TestWriteImage(t *testing.T) {
	if _, err := os.Stat(DefaultBusybox); err != nil {
		if systemdtest.CI() {
			t.Fatalf("no static busybox (apt-get install busybox-static) and CI=true: %v", err)
		}
		t.Skipf("SKIP: no static busybox (apt-get install busybox-static): %v", err)
	}
	cases := []struct {
		name   string
		img    Image
		layers int
	}{
		{"busybox only", Image{Name: "slicelet.test/pause:1", Cmd: []string{"/bin/sleep", "infinity"}}, 1},
		{"with a random layer", Image{Name: "slicelet.test/big:1", Cmd: []string{"/bin/sh"}, RandomMiB: 2}, 2},
		{"with files, an entrypoint, applets and users", Image{Name: "slicelet.test/tool:1", Entrypoint: []string{"/tool"}, Cmd: []string{"pause"},
			Applets: []string{"sh", "grep"}, Passwd: "root:x:0:0:root:/root:/bin/sh\nuser-defined-in-image:x:1000:1000::/:/bin/sh\n",
			Files: []File{{Path: "tool", Source: DefaultBusybox}, {Path: "tool-2", Link: "tool"}, {Path: "usr/bin/script", Data: []byte("#!/bin/sh\n"), Mode: 0o4755}}}, 2},
	}
	ids := map[string]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			id, err := WriteImage(&buf, c.img)
			if err != nil {
				t.Fatal(err)
			}
			ids[id] = true
			files := readLayout(t, buf.Bytes())
			if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
				t.Errorf("oci-layout = %s", files["oci-layout"])
			}
			var index struct {
				Manifests []struct {
					Digest      string
					Annotations map[string]string
					Platform    map[string]string
				}
			}
			if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
				t.Fatalf("index.json: %s, %v", files["index.json"], err)
			}
			m := index.Manifests[0]
			if m.Annotations["io.containerd.image.name"] != c.img.Name || m.Platform["os"] != "linux" {
				t.Errorf("index entry %+v", m)
			}
			var man struct {
				Config struct{ Digest string }
				Layers []struct {
					Digest    string
					MediaType string
					Size      int
				}
			}
			if err := json.Unmarshal(blobOf(t, files, m.Digest), &man); err != nil {
				t.Fatal(err)
			}
			if man.Config.Digest != id || len(man.Layers) != c.layers {
				t.Fatalf("manifest config %s (id %s), %d layers", man.Config.Digest, id, len(man.Layers))
			}
			var cfg struct {
				Config struct{ Entrypoint, Cmd []string }
				RootFS struct {
					DiffIDs []string `json:"diff_ids"`
				} `json:"rootfs"`
			}
			if err := json.Unmarshal(blobOf(t, files, id), &cfg); err != nil {
				t.Fatal(err)
			}
			if strings.Join(cfg.Config.Cmd, " ") != strings.Join(c.img.Cmd, " ") || strings.Join(cfg.Config.Entrypoint, " ") != strings.Join(c.img.Entrypoint, " ") {
				t.Errorf("Entrypoint, Cmd = %v, %v", cfg.Config.Entrypoint, cfg.Config.Cmd)
			}
			for i, l := range man.Layers {
				blobOf(t, files, l.Digest)
				if cfg.RootFS.DiffIDs[i] != l.Digest || l.MediaType != "application/vnd.oci.image.layer.v1.tar" {
					t.Errorf("layer %d: %+v, diff id %s", i, l, cfg.RootFS.DiffIDs[i])
				}
			}
			layer := readLayout(t, blobOf(t, files, man.Layers[0].Digest))
			if len(layer["bin/busybox"]) == 0 || !bytes.Contains(layer["etc/passwd"], []byte("root:x:0:0")) {
				t.Errorf("busybox layer lacks /bin/busybox or /etc/passwd")
			}
			if c.img.Passwd != "" && string(layer["etc/passwd"]) != c.img.Passwd {
				t.Errorf("/etc/passwd = %q, want %q", layer["etc/passwd"], c.img.Passwd)
			}
			if _, ok := layer["bin/grep"]; ok != (len(c.img.Applets) > 0) {
				t.Errorf("bin/grep linked: %v with applets %v", ok, c.img.Applets)
			}
			if len(c.img.Files) > 0 {
				fl := readLayout(t, blobOf(t, files, man.Layers[1].Digest))
				if _, ok := fl["tool-2"]; !ok || string(fl["usr/bin/script"]) != "#!/bin/sh\n" || fl["usr/bin/"] == nil || len(fl["tool"]) != len(layer["bin/busybox"]) {
					t.Errorf("files layer: tool has %d bytes, want busybox's %d", len(fl["tool"]), len(layer["bin/busybox"]))
				}
			}
			if c.img.RandomMiB > 0 {
				rl := readLayout(t, blobOf(t, files, man.Layers[1].Digest))
				if len(rl["random.bin"]) != c.img.RandomMiB<<20 {
					t.Errorf("random layer: %d bytes", len(rl["random.bin"]))
				}
			}
		})
	}
	if len(ids) != len(cases) {
		t.Errorf("image IDs not distinct: %v", ids)
	}
	if _, err := WriteImage(io.Discard, Image{}); err == nil {
		t.Error("WriteImage without a name: no error")
	}
}
