package cluster

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/slicelet/slicelet/hack/peer/conformance"
	"github.com/slicelet/slicelet/internal/testharness/critest"
)

// The add-ons' versions and image names: the names their upstream manifests use, with
// imagePullPolicy IfNotPresent, so that the images built here (never pulled) are the ones run.
const (
	// KubernetesVersion is kube-proxy's (k8s.io/kubernetes/cmd/kube-proxy, hack/peer's go.mod).
	KubernetesVersion = "v1.37.2"
	// FlannelVersion is github.com/flannel-io/flannel's (hack/peer/addons/go.mod).
	FlannelVersion = "v0.28.10"
	// CoreDNSVersion is github.com/coredns/coredns's (make peer-addons-build).
	CoreDNSVersion = "v1.14.7"
	// MetricsServerVersion is sigs.k8s.io/metrics-server's (make peer-addons-build).
	MetricsServerVersion = "v0.8.0"

	KubeProxyImage = "registry.k8s.io/kube-proxy:" + KubernetesVersion
	FlannelImage   = "ghcr.io/flannel-io/flannel:" + FlannelVersion
	CoreDNSImage   = "registry.k8s.io/coredns/coredns:" + CoreDNSVersion
	// MetricsServerImage is the release manifest's (manifests/components/release).
	MetricsServerImage = "registry.k8s.io/metrics-server/metrics-server:" + MetricsServerVersion
	// ToolsImage is busybox with every applet (sh, wget, nslookup, httpd, hostname, ...): the
	// demo's and the tests' workloads.
	ToolsImage = "slicelet.test/tools:1"
)

// The add-on binaries in Options.AddonsDir (make peer-addons-build).
const (
	KubeProxyBinary = "kube-proxy"
	FlanneldBinary  = "flanneld"
	CoreDNSBinary   = "coredns"
	// MetricsServerBinary is sigs.k8s.io/metrics-server/cmd/metrics-server.
	MetricsServerBinary = "metrics-server"
)

// AddonBinaries are every add-on binary [Images] needs in Options.AddonsDir.
var AddonBinaries = []string{KubeProxyBinary, FlanneldBinary, CoreDNSBinary, MetricsServerBinary}

// iptablesBinaries are the programs of Debian's iptables package that kube-proxy and flannel
// run (iptables, iptables-save, iptables-restore and their IPv6 twins, through the nft and
// legacy multi-call binaries), with the xtables extensions they load.
var iptablesBinaries = []string{"/usr/sbin/xtables-nft-multi", "/usr/sbin/xtables-legacy-multi"}

// xtablesDir holds the extensions (dlopen'ed, so ldd does not list them).
const xtablesDir = "/usr/lib/x86_64-linux-gnu/xtables"

// iptablesLinks are the command names of the multi-call binaries.
var iptablesLinks = map[string]string{
	"iptables": "xtables-nft-multi", "iptables-save": "xtables-nft-multi", "iptables-restore": "xtables-nft-multi",
	"ip6tables": "xtables-nft-multi", "ip6tables-save": "xtables-nft-multi", "ip6tables-restore": "xtables-nft-multi",
	"iptables-nft": "xtables-nft-multi", "iptables-nft-save": "xtables-nft-multi", "iptables-nft-restore": "xtables-nft-multi",
	"iptables-legacy": "xtables-legacy-multi", "iptables-legacy-save": "xtables-legacy-multi", "iptables-legacy-restore": "xtables-legacy-multi",
}

// libDirs are where the dynamic loader finds libraries on Debian (amd64; /lib is /usr/lib).
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// IptablesFiles are the machine's iptables (Debian's package: the nft backend, as Debian's
// iptables alternative selects, and the legacy one), its extensions and every shared library
// they need, at their paths, for an image's layer: what kube-proxy's and flannel's images
// install from their distributions' packages.
func IptablesFiles() ([]critest.File, error) {
	ext, err := filepath.Glob(filepath.Join(xtablesDir, "*.so"))
	if err != nil || len(ext) == 0 {
		return nil, fmt.Errorf("iptables extensions in %s: none (apt-get install iptables)", xtablesDir)
	}
	files, err := ELFFiles(append(slices.Clone(iptablesBinaries), ext...))
	if err != nil {
		return nil, err
	}
	for name, target := range iptablesLinks {
		files = append(files, critest.File{Path: "usr/sbin/" + name, Link: target})
	}
	slices.SortFunc(files, func(a, b critest.File) int { return strings.Compare(a.Path, b.Path) })
	return files, nil
}

// ELFFiles are the ELF files at paths and, transitively, the shared libraries they need
// (DT_NEEDED, found in libDirs) and their dynamic loader (PT_INTERP), each at its host path: a
// layer in which they run. Read with debug/elf, without running anything.
func ELFFiles(paths []string) ([]critest.File, error) {
	var files []critest.File
	seen := map[string]bool{}
	queue := slices.Clone(paths)
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		if seen[path] {
			continue
		}
		seen[path] = true
		files = append(files, critest.File{Path: strings.TrimPrefix(path, "/"), Source: path})
		deps, err := elfDeps(path)
		if err != nil {
			return nil, err
		}
		queue = append(queue, deps...)
	}
	return files, nil
}

// elfDeps are the loader and the libraries the ELF file at path names, resolved to paths.
func elfDeps(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("elf %s: %w", path, err)
	}
	defer f.Close()
	var deps []string
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return nil, fmt.Errorf("elf %s: interpreter: %w", path, err)
			}
			deps = append(deps, strings.TrimRight(string(b), "\x00"))
		}
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return nil, fmt.Errorf("elf %s: %w", path, err)
	}
	for _, lib := range needed {
		found := ""
		for _, d := range libDirs {
			if _, err := os.Stat(filepath.Join(d, lib)); err == nil {
				found = filepath.Join(d, lib)
				break
			}
		}
		if found == "" {
			return nil, fmt.Errorf("elf %s: library %s not found in %s", path, lib, strings.Join(libDirs, ", "))
		}
		deps = append(deps, found)
	}
	return deps, nil
}

// ImageOptions are the inputs of [Images].
type ImageOptions struct {
	// AddonsDir holds the add-on binaries (AddonBinaries).
	AddonsDir string
	// Busybox is the static busybox of every image's base layer; Applets its applets.
	Busybox string
	Applets []string
	// Extra are more images, written as they are.
	Extra []critest.Image
}

// Images are the add-ons' images and the tools image, built from the binaries of
// o.AddonsDir on a busybox base: kube-proxy in /usr/local/bin (as its image has it, with
// iptables), flanneld in /opt/bin (with iptables), coredns as /coredns and metrics-server as
// /metrics-server (their entrypoints).
func Images(ctx context.Context, o ImageOptions) ([]critest.Image, error) {
	for _, b := range AddonBinaries {
		if _, err := os.Stat(filepath.Join(o.AddonsDir, b)); err != nil {
			return nil, fmt.Errorf("add-on binary: %w (make peer-addons-build)", err)
		}
	}
	ipt, err := IptablesFiles()
	if err != nil {
		return nil, err
	}
	// flanneld links the C library (its udp backend is cgo): whatever else it needs beside
	// what iptables brought.
	flanneld, err := ELFFiles([]string{filepath.Join(o.AddonsDir, FlanneldBinary)})
	if err != nil {
		return nil, err
	}
	base := func(name string, files []critest.File) critest.Image {
		return critest.Image{Name: name, Busybox: o.Busybox, Applets: o.Applets, Files: files}
	}
	kp := base(KubeProxyImage, append(slices.Clone(ipt), critest.File{Path: "usr/local/bin/kube-proxy", Source: filepath.Join(o.AddonsDir, KubeProxyBinary)}))
	kp.Entrypoint = []string{"/usr/local/bin/kube-proxy"}
	flFiles := slices.Clone(ipt)
	for _, f := range flanneld[1:] {
		if !slices.ContainsFunc(flFiles, func(g critest.File) bool { return g.Path == f.Path }) {
			flFiles = append(flFiles, f)
		}
	}
	fl := base(FlannelImage, append(flFiles, critest.File{Path: "opt/bin/flanneld", Source: filepath.Join(o.AddonsDir, FlanneldBinary)}))
	fl.Entrypoint = []string{"/opt/bin/flanneld"}
	dns := base(CoreDNSImage, []critest.File{{Path: "coredns", Source: filepath.Join(o.AddonsDir, CoreDNSBinary)}})
	dns.Entrypoint = []string{"/coredns"}
	ms := base(MetricsServerImage, []critest.File{{Path: "metrics-server", Source: filepath.Join(o.AddonsDir, MetricsServerBinary)}})
	ms.Entrypoint = []string{"/metrics-server"}
	tools := base(ToolsImage, nil)
	tools.Cmd = []string{"sh"}
	return append([]critest.Image{kp, fl, dns, ms, tools}, o.Extra...), nil
}

// WriteImages writes [Images] as OCI archives into dir, once for every node to import, and
// returns their paths.
func WriteImages(ctx context.Context, o ImageOptions, dir string) ([]string, error) {
	images, err := Images(ctx, o)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for i, img := range images {
		path := filepath.Join(dir, fmt.Sprintf("%d.tar", i))
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		_, err = critest.WriteImage(f, img)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", img.Name, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// imageInputs are the add-on image inputs from the add-ons directory and the static busybox.
func imageInputs(ctx context.Context, addons string) (ImageOptions, error) {
	applets, err := conformance.BusyboxApplets(ctx, critest.DefaultBusybox)
	if err != nil {
		return ImageOptions{}, err
	}
	return ImageOptions{AddonsDir: addons, Busybox: critest.DefaultBusybox, Applets: applets}, nil
}
