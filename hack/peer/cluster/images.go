package cluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

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

	KubeProxyImage = "registry.k8s.io/kube-proxy:" + KubernetesVersion
	FlannelImage   = "ghcr.io/flannel-io/flannel:" + FlannelVersion
	CoreDNSImage   = "registry.k8s.io/coredns/coredns:" + CoreDNSVersion
	// ToolsImage is busybox with every applet (sh, wget, nslookup, httpd, hostname, ...): the
	// demo's and the tests' workloads.
	ToolsImage = "slicelet.test/tools:1"
)

// The add-on binaries in Options.AddonsDir (make peer-addons-build).
const (
	KubeProxyBinary = "kube-proxy"
	FlanneldBinary  = "flanneld"
	CoreDNSBinary   = "coredns"
)

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

// IptablesFiles are the machine's iptables (Debian's package: the nft backend, as Debian's
// iptables alternative selects, and the legacy one), its extensions and every shared library
// they need (ldd), at their paths, for an image's layer: what kube-proxy's and flannel's
// images install from their distributions' packages.
func IptablesFiles(ctx context.Context) ([]critest.File, error) {
	elves := slices.Clone(iptablesBinaries)
	ext, err := filepath.Glob(filepath.Join(xtablesDir, "*.so"))
	if err != nil || len(ext) == 0 {
		return nil, fmt.Errorf("iptables extensions in %s: none (apt-get install iptables)", xtablesDir)
	}
	elves = append(elves, ext...)
	var files []critest.File
	seen := map[string]bool{}
	add := func(path string) {
		if !seen[path] {
			seen[path] = true
			files = append(files, critest.File{Path: strings.TrimPrefix(path, "/"), Source: path})
		}
	}
	for _, e := range elves {
		add(e)
		libs, err := sharedLibraries(ctx, e)
		if err != nil {
			return nil, err
		}
		for _, l := range libs {
			add(l)
		}
	}
	for name, target := range iptablesLinks {
		files = append(files, critest.File{Path: "usr/sbin/" + name, Link: target})
	}
	slices.SortFunc(files, func(a, b critest.File) int { return strings.Compare(a.Path, b.Path) })
	return files, nil
}

// sharedLibraries lists the libraries ldd resolves for the ELF file at path, the dynamic
// loader included, by the paths the file asks for (so /lib/x86_64-linux-gnu/libc.so.6, not
// its target).
func sharedLibraries(ctx context.Context, path string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ldd", path).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", path, err)
	}
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			libs = append(libs, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			libs = append(libs, f[0])
		}
	}
	return libs, nil
}

// ImageOptions are the inputs of [Images].
type ImageOptions struct {
	// AddonsDir holds kube-proxy, flanneld and coredns.
	AddonsDir string
	// Busybox is the static busybox of every image's base layer; Applets its applets.
	Busybox string
	Applets []string
}

// Images are the add-ons' images and the tools image, built from the binaries of
// o.AddonsDir on a busybox base: kube-proxy in /usr/local/bin (as its image has it, with
// iptables), flanneld in /opt/bin (with iptables), coredns as /coredns (its entrypoint).
func Images(ctx context.Context, o ImageOptions) ([]critest.Image, error) {
	for _, b := range []string{KubeProxyBinary, FlanneldBinary, CoreDNSBinary} {
		if _, err := os.Stat(filepath.Join(o.AddonsDir, b)); err != nil {
			return nil, fmt.Errorf("add-on binary: %w (make peer-addons-build)", err)
		}
	}
	ipt, err := IptablesFiles(ctx)
	if err != nil {
		return nil, err
	}
	base := func(name string, files []critest.File) critest.Image {
		return critest.Image{Name: name, Busybox: o.Busybox, Applets: o.Applets, Files: files}
	}
	kp := base(KubeProxyImage, append(slices.Clone(ipt), critest.File{Path: "usr/local/bin/kube-proxy", Source: filepath.Join(o.AddonsDir, KubeProxyBinary)}))
	kp.Entrypoint = []string{"/usr/local/bin/kube-proxy"}
	fl := base(FlannelImage, append(slices.Clone(ipt), critest.File{Path: "opt/bin/flanneld", Source: filepath.Join(o.AddonsDir, FlanneldBinary)}))
	fl.Entrypoint = []string{"/opt/bin/flanneld"}
	dns := base(CoreDNSImage, []critest.File{{Path: "coredns", Source: filepath.Join(o.AddonsDir, CoreDNSBinary)}})
	dns.Entrypoint = []string{"/coredns"}
	tools := base(ToolsImage, nil)
	tools.Cmd = []string{"sh"}
	return []critest.Image{kp, fl, dns, tools}, nil
}
