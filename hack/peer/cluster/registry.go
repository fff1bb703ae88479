package cluster

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// RegistryPort is the port of the cluster's image registry on ControlPlaneIP.
const RegistryPort = 5000

// RegistryURL is the base URL at which the nodes' containerd reach the cluster's registry.
var RegistryURL = "http://" + net.JoinHostPort(ControlPlaneIP, strconv.Itoa(RegistryPort))

// imageNameAnnotation is the index annotation naming an OCI archive's image, as `ctr images
// import` reads it (critest.WriteImage writes it).
const imageNameAnnotation = "io.containerd.image.name"

// maxLayoutFile bounds one file of an image archive unpacked for a push.
const maxLayoutFile = 2 << 30

// Registry is the cluster's image registry: the Docker registry protocol
// (github.com/google/go-containerregistry/pkg/registry, blobs on disk) served by this program on
// a socket of the control plane's network namespace, holding every image the cluster imports
// into its nodes under its repository's path, so that a pod whose images are pulled
// (imagePullPolicy Always, or an image a node lacks) is pulled through CRI as on a real
// cluster: each node's containerd mirrors the images' registries to it (Mirrors).
type Registry struct {
	// URL is its base URL for pushes (RegistryURL in a cluster).
	URL string
	// Mirrors map the registry host of every image pushed (as image names spell it:
	// "registry.k8s.io", "docker.io") to URL: the nodes' containerd registry mirrors.
	Mirrors map[string]string

	srv   *http.Server
	done  chan error
	dir   string
	tr    http.RoundTripper
	repos map[string]string // "repository:tag" → the registry it came from
}

// startRegistry serves a registry on ln, its blobs under dir and its request log to logw;
// pushes go to base (its URL) through dial (a dialer of the listener's network namespace).
func startRegistry(ln net.Listener, base, dir string, logw io.Writer, dial func(ctx context.Context, network, address string) (net.Conn, error)) (*Registry, error) {
	blobs := filepath.Join(dir, "blobs")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		ln.Close()
		return nil, fmt.Errorf("registry: %w", err)
	}
	h := registry.New(registry.Logger(log.New(logw, "registry ", log.LstdFlags)), registry.WithBlobHandler(registry.NewDiskBlobHandler(blobs)))
	r := &Registry{URL: base, Mirrors: map[string]string{}, dir: dir, done: make(chan error, 1), repos: map[string]string{},
		srv: &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second},
		tr:  &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 4}}
	go func() { r.done <- r.srv.Serve(ln) }()
	return r, nil
}

// Push pushes every image of the OCI archives (critest.WriteImage's, each image named by its
// index annotation) to the registry under its repository's path and tag, and adds its
// registry to Mirrors. Two images of one repository path and tag from different registries
// are refused: the mirror serves one.
func (r *Registry) Push(ctx context.Context, archives []string) error {
	for i, archive := range archives {
		dir := filepath.Join(r.dir, "push", strconv.Itoa(i))
		err := unpackLayout(archive, dir)
		if err == nil {
			err = r.pushLayout(ctx, dir)
		}
		if rerr := os.RemoveAll(dir); err == nil {
			err = rerr
		}
		if err != nil {
			return fmt.Errorf("registry: %s: %w", archive, err)
		}
	}
	return nil
}

// pushLayout pushes the images of the OCI layout directory dir.
func (r *Registry) pushLayout(ctx context.Context, dir string) error {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, m := range im.Manifests {
		ref, err := name.ParseReference(m.Annotations[imageNameAnnotation])
		if err != nil {
			return fmt.Errorf("image %s: annotation %s: %w", m.Digest, imageNameAnnotation, err)
		}
		dst, host, err := r.mirrorRef(ref)
		if err != nil {
			return err
		}
		img, err := idx.Image(m.Digest)
		if err != nil {
			return fmt.Errorf("image %s: %w", ref, err)
		}
		if err := remote.Write(dst, img, remote.WithContext(ctx), remote.WithTransport(r.tr), remote.WithAuth(authn.Anonymous)); err != nil {
			return fmt.Errorf("image %s: push as %s: %w", ref, dst, err)
		}
		r.Mirrors[host] = r.URL
	}
	return nil
}

// mirrorRef is where ref goes in the registry (the same repository path and tag or digest)
// and the host of its own registry as containerd names it (Docker Hub's is docker.io).
func (r *Registry) mirrorRef(ref name.Reference) (name.Reference, string, error) {
	host := ref.Context().RegistryStr()
	if host == name.DefaultRegistry {
		host = "docker.io"
	}
	sep := ":"
	if _, ok := ref.(name.Digest); ok {
		sep = "@"
	}
	key := ref.Context().RepositoryStr() + sep + ref.Identifier()
	if prev, ok := r.repos[key]; ok && prev != host {
		return nil, "", fmt.Errorf("image %s: %s is already %s's", ref, key, prev)
	}
	r.repos[key] = host
	u, err := url.Parse(r.URL)
	if err != nil {
		return nil, "", fmt.Errorf("registry URL: %w", err)
	}
	dst, err := name.ParseReference(u.Host+"/"+key, name.Insecure)
	if err != nil {
		return nil, "", fmt.Errorf("image %s: %w", ref, err)
	}
	return dst, host, nil
}

// Close stops serving and waits for the server to end.
func (r *Registry) Close() error {
	err := r.srv.Close()
	if serr := <-r.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// unpackLayout unpacks the OCI archive at path (an image layout as a tar: directories and
// regular files only, every name inside the archive) into dir.
func unpackLayout(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if !filepath.IsLocal(hdr.Name) {
			return fmt.Errorf("layout: entry %q outside the archive", hdr.Name)
		}
		target := filepath.Join(dir, hdr.Name)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if hdr.Size > maxLayoutFile {
				return fmt.Errorf("layout: %s: %d bytes, at most %d", hdr.Name, hdr.Size, maxLayoutFile)
			}
			if err := writeLayoutFile(target, tr); err != nil {
				return err
			}
		default:
			return fmt.Errorf("layout: %s: type %q, want directories and regular files", hdr.Name, hdr.Typeflag)
		}
	}
}

// writeLayoutFile writes r to path, its directory created.
func writeLayoutFile(path string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, r)
	return errors.Join(err, out.Close())
}
