package crirt

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/testharness/critest"
)

// TestIntegrationPodDNSHostsPorts: with containerd's CNI bridge and portmap (runtime.network =
// "cni") and the node's cluster DNS, a StatefulSet-like pod (hostname, subdomain,
// setHostnameAsFQDN, dnsPolicy ClusterFirst with a dnsConfig option) gets, as on a kubelet
// node: the cluster DNS server, the cluster's search path before the host's and ndots:5 with its
// option in /etc/resolv.conf; its FQDN in /etc/hosts and as its hostname; its hostPort mapped
// to its containerPort (reached at the node's address on the bridge); and a mount made on the
// host under a HostToContainer volume after it started.
func TestIntegrationPodDNSHostsPorts(t *testing.T) {
	sandboxOnly(t)
	critest.RequireCNI(t)
	// The volume's host directory is a shared mount before containerd starts (its mount
	// namespace then holds a slave of it): containerd refuses HostToContainer from a private
	// mount, as the sandbox's /tmp is, and mounts made under it later must reach containerd's
	// view. On a systemd host every mount is shared (the kubelet makes its root directory
	// rshared for the same reason).
	hostDir := sharedDir(t)
	it := newIT(t, critest.Options{CNIBridge: true})
	it.podNetwork = true
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 192.0.2.53\nsearch example.org\noptions attempts:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	it.dns = &lifecycle.NodeDNS{Servers: []string{"10.96.0.10"}, Domain: "cluster.local", ResolvConf: resolv}
	rt := it.runtime(t)

	if err := os.Mkdir(filepath.Join(hostDir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	hostToContainer := v1.MountPropagationHostToContainer
	server := container("server", `trap 'exit 0' TERM; while true; do { cat /etc/resolv.conf /etc/hosts; echo "hostname $(hostname)"; cat /vol/sub/marker 2>/dev/null; } | nc -l -p 8080; done`)
	server.Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 8080, HostPort: 18080, Protocol: v1.ProtocolTCP}}
	server.VolumeMounts = []v1.VolumeMount{{Name: "host", MountPath: "/vol", MountPropagation: &hostToContainer}}
	pod := itPod("web-0", "it-dns-1", server)
	yes := true
	pod.Spec.Hostname, pod.Spec.Subdomain, pod.Spec.SetHostnameAsFQDN = "web-0", "nginx", &yes
	pod.Spec.DNSPolicy = v1.DNSClusterFirst
	pod.Spec.DNSConfig = &v1.PodDNSConfig{Options: []v1.PodDNSConfigOption{{Name: "edns0"}}}
	pod.Spec.Volumes = []v1.Volume{{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostDir}}}}
	slice := it.slice(t, pod)
	st := syncUntil(t, rt, pod, slice, "running with a pod IP", func(st v1.PodStatus, err error) bool {
		return running(st, err) && st.PodIP != ""
	})

	// A mount made on the host after the container started reaches it (rslave).
	sub := filepath.Join(hostDir, "sub")
	if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(sub, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(sub, "marker"), []byte("mounted later\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	want := []string{
		"search default.svc.cluster.local svc.cluster.local cluster.local example.org\n",
		"nameserver 10.96.0.10\n",
		"options ndots:5 edns0\n",
		st.PodIP + "\tweb-0.nginx.default.svc.cluster.local\tweb-0\n",
		"hostname web-0.nginx.default.svc.cluster.local\n",
		"mounted later\n",
	}
	// Through the host port: the node's address on the bridge, port 18080, mapped by portmap to
	// the pod's 8080.
	addr := net.JoinHostPort(critest.CNIGateway, "18080")
	var got string
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := dialReadAll(addr)
		got = string(b)
		if err == nil && containsAll(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod through host port %s: read %q, %v; want it to contain %q", addr, got, err, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if strings.Contains(got, "192.0.2.53") || strings.Contains(got, "attempts") {
		t.Errorf("the host's nameserver or options reached a ClusterFirst pod:\n%s", got)
	}
	if _, err := rt.KillPod(t.Context(), pod, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := rt.Forget(t.Context(), string(pod.UID)); err != nil {
		t.Fatal(err)
	}
}

// dialReadAll reads what the server at addr sends until it closes the connection (at most
// 16 KiB).
func dialReadAll(addr string) ([]byte, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(c, 16<<10))
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// sharedDir is a new directory bind-mounted onto itself as a shared mount, unmounted at the
// end of the test.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		t.Fatal(err)
	}
	return dir
}
