package conformance

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/slicelet/slicelet/internal/testharness/critest"
)

// The names e2e.test gives the images of the sig-node Conformance specs
// (k8s.io/kubernetes/test/utils/image/manifest.go, v1.37.2), built locally: this machine
// reaches no registry, and the pods use imagePullPolicy IfNotPresent.
const (
	// AgnhostImage is agnhost (imageutils.Agnhost).
	AgnhostImage = "registry.k8s.io/e2e-test-images/agnhost:2.66.1"
	// AgnhostPrevImage is imageutils.AgnhostPrev ("Pods should run through the lifecycle of
	// Pods and PodStatus" switches a pod from it to AgnhostImage): the same binary.
	AgnhostPrevImage = "registry.k8s.io/e2e-test-images/agnhost:2.55"
	// BusyboxImage is imageutils.BusyBox.
	BusyboxImage = "registry.k8s.io/e2e-test-images/busybox:1.37.0-2"
	// PauseImage is imageutils.Pause, which specs also run as a plain container.
	PauseImage = "registry.k8s.io/pause:3.10.2"
	// NginxImage is imageutils.Nginx, which the specs only need to start and keep running (an
	// image update, a preStop hook that loops in sh): a stand-in, busybox's httpd on port 80.
	NginxImage = "registry.k8s.io/e2e-test-images/nginx:1.27.0-2"
	// NonewprivsImage is imageutils.Nonewprivs: nnp (test/images/nonewprivs), setuid root,
	// prints its effective uid.
	NonewprivsImage = "registry.k8s.io/e2e-test-images/nonewprivs:1.4"
)

// The Update Demo images (kubectl's Conformance specs scale and roll a replication controller
// from one to the other and read each pod's data.json through the API server's pods/proxy):
// test/images/kitten and test/images/nautilus, each agnhost's image with its html directory's
// files at / and `agnhost test-webserver` (which serves / on port 80) as its command.
const (
	KittenImage   = "registry.k8s.io/e2e-test-images/kitten:1.8"
	NautilusImage = "registry.k8s.io/e2e-test-images/nautilus:1.8"
)

// curlScript is the agnhost image's curl: a GET of its URL arguments printed to stdout, which
// is all the specs ask of it.
const curlScript = "#!/bin/sh\nexec wget -q -O- \"$@\"\n"

// Images are the images above: busybox's applets (all those of the static busybox) for
// busybox and nginx; agnhost (a static binary, /agnhost) on the same busybox base with the
// users its Dockerfile adds (test/images/agnhost/Dockerfile: user-defined-in-image, uid 1000,
// a member of group-defined-in-image, gid 50000), its entrypoint and default command
// ("pause"), for both agnhost tags and, started as `agnhost pause`, the pause image.
// nonewprivs's image (test/images/nonewprivs/Dockerfile) holds its nnp binary setuid root in
// /usr/local/bin.
func Images(busybox, agnhost, nnp string, applets []string) []critest.Image {
	return images(busybox, agnhost, nnp, applets, "")
}

// GlibcDNSTestingImage is imageutils.GlibcDnsTesting (test/images/glibc-dns-testing: Debian
// with dnsutils and coredns), which the DNS specs query from beside agnhost.
const GlibcDNSTestingImage = "registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1"

// The aggregated API server spec's images (test/e2e/apimachinery/aggregator.go: a Deployment
// of the sample API server beside an etcd): test/images/sample-apiserver, k8s.io/sample-apiserver
// as /sample-apiserver (its entrypoint), and etcd's image, which the spec starts as
// /usr/local/bin/etcd.
const (
	SampleAPIServerImage = "registry.k8s.io/e2e-test-images/sample-apiserver:1.29.2"
	EtcdImage            = "registry.k8s.io/etcd:3.7.0-0"
)

// ClusterTools are what the multi-node specs run in agnhost's image (alpine's curl, nc and
// bind-tools' dig) and in glibc-dns-testing's (dnsutils' dig, glibc's getent): the machine's
// curl, netcat-openbsd's nc, dig and getent, each with the libraries it needs (Files), and
// coredns (glibc-dns-testing's /coredns).
type ClusterTools struct {
	Files   []critest.File
	CoreDNS string
	// Shell is the image path of a POSIX shell among Files (Debian's dash) that becomes the
	// images' /bin/sh: Debian's static busybox runs its own applets before PATH (its ash is
	// built "standalone"), so under busybox's sh `nc` would be busybox's, without the -v, -t
	// and -u the specs pass.
	Shell string
	// SampleAPIServer is k8s.io/sample-apiserver's static binary, Etcd etcd's binary and
	// EtcdFiles the libraries and loader it needs (cluster.ELFFiles): the aggregator spec's
	// images, not built when empty.
	SampleAPIServer, Etcd string
	EtcdFiles             []critest.File
}

// nsswitch is Debian's /etc/nsswitch.conf hosts line (getent hosts reads /etc/hosts, then DNS).
const nsswitch = "hosts: files dns\n"

// ClusterImages are [Images] and, from imagesSrc (test/images of the k8s.io/kubernetes module),
// the Update Demo images kitten and nautilus, built as their Dockerfiles build them; with tools,
// every agnhost-based image holds them (its real curl instead of the wget script), coredns and
// porter's localhost.crt and localhost.key, as agnhost's Dockerfile has them, and
// glibc-dns-testing is built.
func ClusterImages(busybox, agnhost, nnp string, applets []string, imagesSrc string, tools *ClusterTools) []critest.Image {
	out := images(busybox, agnhost, nnp, applets, imagesSrc)
	if tools == nil {
		return out
	}
	extra := append(slices.Clone(tools.Files), critest.File{Path: "etc/nsswitch.conf", Data: []byte(nsswitch), Mode: 0o644})
	shellApplets := applets
	if tools.Shell != "" {
		shellApplets = slices.DeleteFunc(slices.Clone(applets), func(a string) bool { return a == "sh" })
		extra = append(extra, critest.File{Path: "bin/sh", Link: tools.Shell})
	}
	for i, img := range out {
		if len(img.Entrypoint) == 0 || img.Entrypoint[0] != "/agnhost" {
			continue
		}
		files := slices.DeleteFunc(slices.Clone(img.Files), func(f critest.File) bool { return f.Path == "usr/bin/curl" })
		// As agnhost's Dockerfile: /coredns, and porter's certificate (its TLS ports, which
		// the proxy specs reach through the API server).
		files = append(files, critest.File{Path: "coredns", Source: tools.CoreDNS})
		if imagesSrc != "" {
			porter := filepath.Join(imagesSrc, "agnhost", "porter")
			files = append(files, critest.File{Path: "localhost.crt", Source: filepath.Join(porter, "localhost.crt"), Mode: 0o644},
				critest.File{Path: "localhost.key", Source: filepath.Join(porter, "localhost.key"), Mode: 0o644})
		}
		out[i].Files = append(files, extra...)
		out[i].Applets = shellApplets
	}
	out = append(out, critest.Image{Name: GlibcDNSTestingImage, Busybox: busybox, Applets: shellApplets, Cmd: []string{"sh"},
		Files: append(slices.Clone(extra), critest.File{Path: "coredns", Source: tools.CoreDNS})})
	if tools.SampleAPIServer != "" {
		out = append(out, critest.Image{Name: SampleAPIServerImage, Busybox: busybox, Applets: applets,
			Files: []critest.File{{Path: "sample-apiserver", Source: tools.SampleAPIServer}}, Entrypoint: []string{"/sample-apiserver"}})
	}
	if tools.Etcd != "" {
		out = append(out, critest.Image{Name: EtcdImage, Busybox: busybox, Applets: applets, Cmd: []string{"/usr/local/bin/etcd"},
			Files: append(slices.Clone(tools.EtcdFiles), critest.File{Path: "usr/local/bin/etcd", Source: tools.Etcd})})
	}
	return out
}

func images(busybox, agnhost, nnp string, applets []string, imagesSrc string) []critest.Image {
	passwd := "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n" +
		"user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n"
	group := "root:x:0:\nnogroup:x:65534:\nuser-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n"
	withAgnhost := func(name string, entrypoint, cmd []string) critest.Image {
		return critest.Image{Name: name, Busybox: busybox, Applets: applets, Passwd: passwd, Group: group,
			// agnhost-2, as in agnhost's image: "Containers should be able to override the
			// image's default command" runs it.
			// curl, which agnhost's image installs and the lifecycle hook specs run
			// (`curl http://IP:8080/echo?msg=poststart`): busybox's wget stands in for it.
			Files: []critest.File{{Path: "agnhost", Source: agnhost}, {Path: "agnhost-2", Link: "agnhost"},
				{Path: "usr/bin/curl", Data: []byte(curlScript)}}, Entrypoint: entrypoint, Cmd: cmd}
	}
	out := []critest.Image{
		{Name: BusyboxImage, Busybox: busybox, Applets: applets, Cmd: []string{"sh"}},
		{Name: NginxImage, Busybox: busybox, Applets: applets, Cmd: []string{"httpd", "-f", "-p", "80", "-h", "/tmp"}},
		withAgnhost(AgnhostImage, []string{"/agnhost"}, []string{"pause"}),
		withAgnhost(AgnhostPrevImage, []string{"/agnhost"}, []string{"pause"}),
		withAgnhost(PauseImage, []string{"/agnhost", "pause"}, nil),
		{Name: NonewprivsImage, Busybox: busybox, Applets: applets, Cmd: []string{"nnp"},
			Files: []critest.File{{Path: "usr/local/bin/nnp", Source: nnp, Mode: 0o4755}}},
	}
	if imagesSrc != "" {
		for _, u := range []struct{ name, dir, jpg string }{{KittenImage, "kitten", "kitten.jpg"}, {NautilusImage, "nautilus", "nautilus.jpg"}} {
			img := withAgnhost(u.name, []string{"/agnhost"}, []string{"test-webserver"})
			html := filepath.Join(imagesSrc, u.dir, "html")
			img.Files = append(slices.Clone(img.Files), critest.File{Path: u.jpg, Source: filepath.Join(html, u.jpg)},
				critest.File{Path: "data.json", Source: filepath.Join(html, "data.json")})
			out = append(out, img)
		}
	}
	return out
}

// BusyboxApplets lists the applets the static busybox at path provides (`busybox --list`).
func BusyboxApplets(ctx context.Context, path string) ([]string, error) {
	out, err := exec.CommandContext(ctx, path, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", path, err)
	}
	var applets []string
	for _, a := range strings.Fields(string(bytes.TrimSpace(out))) {
		// Applets named with a slash would escape /bin; busybox itself is the binary.
		if a != "busybox" && !strings.Contains(a, "/") {
			applets = append(applets, a)
		}
	}
	if len(applets) == 0 {
		return nil, fmt.Errorf("%s --list: no applets", path)
	}
	return applets, nil
}
