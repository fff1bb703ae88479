package cluster

import (
	"archive/tar"
	"context"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/slicelet/slicelet/internal/testharness/critest"
)

// writeArchive writes img as critest writes the nodes' images and returns the path and the
// image ID (its config's digest).
func writeArchive(t *testing.T, dir string, img critest.Image) (string, string) {
	t.Helper()
	path := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_").Replace(img.Name)+".tar")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	id, err := critest.WriteImage(f, img)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return path, id
}

// TestRegistryPushPull pushes the OCI archives a cluster imports into its nodes to the
// registry (on a loopback listener) and pulls each back by the path and tag a node's
// containerd asks the mirror for: the same image (config digest, layers), and the mirrors of
// every registry pushed.
// testRegistry starts the harness's registry on a loopback port, its blobs under work, closed
// when the test ends.
func testRegistry(t *testing.T, work string) *Registry {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var dialer net.Dialer
	r, err := startRegistry(ln, "http://"+ln.Addr().String(), filepath.Join(work, "registry"), io.Discard, dialer.DialContext)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return r
}

func TestRegistryPushPull(t *testing.T) {
	work := t.TempDir()
	busybox := filepath.Join(work, "busybox")
	if err := os.WriteFile(busybox, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	payload := filepath.Join(work, "agnhost")
	if err := os.WriteFile(payload, []byte(strings.Repeat("agnhost", 1000)), 0o755); err != nil {
		t.Fatal(err)
	}
	images := []critest.Image{
		{Name: "registry.k8s.io/e2e-test-images/agnhost:2.66.1", Busybox: busybox, Applets: []string{"sh"}, Entrypoint: []string{"/agnhost"},
			Files: []critest.File{{Path: "agnhost", Source: payload}}},
		{Name: "registry.k8s.io/pause:3.10.2", Busybox: busybox, Applets: []string{"sh"}},
		{Name: "docker.io/library/busybox:1.37", Busybox: busybox, Applets: []string{"sh"}},
		{Name: "ghcr.io/flannel-io/flannel:v0.28.10", Busybox: busybox, Applets: []string{"sh", "ls"}},
	}
	var archives []string
	ids := map[string]string{}
	for _, img := range images {
		path, id := writeArchive(t, work, img)
		archives = append(archives, path)
		ids[img.Name] = id
	}
	r := testRegistry(t, work)
	if err := r.Push(t.Context(), archives); err != nil {
		t.Fatal(err)
	}
	wantMirrors := map[string]string{"registry.k8s.io": r.URL, "docker.io": r.URL, "ghcr.io": r.URL}
	if !maps.Equal(r.Mirrors, wantMirrors) {
		t.Errorf("mirrors %v, want %v", r.Mirrors, wantMirrors)
	}
	// What containerd asks a mirror of registry.k8s.io for agnhost:2.66.1:
	// GET /v2/e2e-test-images/agnhost/manifests/2.66.1, then the config and layers by digest.
	for _, want := range []struct{ path, image string }{
		{"e2e-test-images/agnhost:2.66.1", "registry.k8s.io/e2e-test-images/agnhost:2.66.1"},
		{"pause:3.10.2", "registry.k8s.io/pause:3.10.2"},
		{"library/busybox:1.37", "docker.io/library/busybox:1.37"},
		{"flannel-io/flannel:v0.28.10", "ghcr.io/flannel-io/flannel:v0.28.10"},
	} {
		ref, err := name.ParseReference(strings.TrimPrefix(r.URL, "http://")+"/"+want.path, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		img, err := remote.Image(ref, remote.WithContext(t.Context()))
		if err != nil {
			t.Fatalf("pull %s: %v", ref, err)
		}
		cfg, err := img.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.String() != ids[want.image] {
			t.Errorf("%s: config %s, want %s's %s", want.path, cfg, want.image, ids[want.image])
		}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range layers {
			rc, err := l.Compressed()
			if err != nil {
				t.Fatalf("%s: layer: %v", want.path, err)
			}
			if _, err := io.Copy(io.Discard, rc); err != nil {
				t.Fatalf("%s: layer: %v", want.path, err)
			}
			rc.Close()
		}
	}
	// An image the registry does not have is not found (containerd then falls back to the
	// registry itself).
	resp, err := http.Get(r.URL + "/v2/e2e-test-images/agnhost/manifests/9.9")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown tag: status %d, want 404", resp.StatusCode)
	}
}

func TestRegistryRefusals(t *testing.T) {
	work := t.TempDir()
	busybox := filepath.Join(work, "busybox")
	if err := os.WriteFile(busybox, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := testRegistry(t, work)
	a, _ := writeArchive(t, work, critest.Image{Name: "registry.k8s.io/busybox:1", Busybox: busybox, Applets: []string{"sh"}})
	b, _ := writeArchive(t, work, critest.Image{Name: "quay.io/busybox:1", Busybox: busybox, Applets: []string{"ls"}})
	if err := r.Push(context.Background(), []string{a, b}); err == nil || !strings.Contains(err.Error(), "busybox:1 is already registry.k8s.io's") {
		t.Errorf("two registries' busybox:1: error %v, want a refusal", err)
	}

	evil := filepath.Join(work, "evil.tar")
	f, err := os.Create(evil)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	if err := tw.WriteHeader(&tar.Header{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := r.Push(context.Background(), []string{evil}); err == nil || !strings.Contains(err.Error(), `entry "../escape" outside the archive`) {
		t.Errorf("archive with ../escape: error %v, want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(work, "registry", "push", "escape")); err == nil {
		t.Error("../escape written")
	}
}
