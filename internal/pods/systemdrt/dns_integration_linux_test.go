package systemdrt

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/slices"
)

// TestIntegrationResolvConfAndPropagation: in a real systemd, a ClusterFirst pod of a node with
// cluster DNS reads its own resolv.conf (the cluster server and search path, not the host's) at
// /etc/resolv.conf, and a mount the host makes under its HostToContainer volume after it started
// reaches it (systemd makes the service's namespace a slave of the host's).
func TestIntegrationResolvConfAndPropagation(t *testing.T) {
	it := newIT(t)
	hostResolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(hostResolv, []byte("nameserver 192.0.2.53\nsearch example.org\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rt, err := New(Options{Systemd: it.sd, StateDir: it.state, Logger: it.log, HostResolvConf: hostResolv})
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(worker.Options{Runtime: rt, Recorder: &record.FakeRecorder{}, StateDir: it.state, Logger: it.log,
		MemoryCapacity: it.cap.Memory, Resources: slices.DefaultOptions(), Backoff: fastBackoff, HostNetwork: true,
		DNS: &lifecycle.NodeDNS{Servers: []string{"10.96.0.10"}, Domain: "cluster.local", ResolvConf: hostResolv}})
	if err != nil {
		t.Fatal(err)
	}
	it.rt = w

	// The volume's host directory is a shared mount, as every mount of a systemd host is (the
	// sandbox's /tmp is private).
	host := t.TempDir()
	if err := unix.Mount(host, host, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(host, unix.MNT_DETACH) })
	if err := unix.Mount("", host, "", unix.MS_SHARED, ""); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(host, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	c := sh("dns", `cat /etc/resolv.conf; i=0; while [ ! -e /srv/sub/marker ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; cat /srv/sub/marker`)
	mode := v1.MountPropagationHostToContainer
	c.VolumeMounts = []v1.VolumeMount{{Name: "host", MountPath: "/srv", MountPropagation: &mode}}
	pod := itPod("dns", "dns-1", v1.RestartPolicyNever, c)
	pod.Spec.DNSPolicy = v1.DNSClusterFirst
	pod.Spec.Volumes = []v1.Volume{{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: host}}}}
	if errs := w.Validate(pod); len(errs) > 0 {
		t.Fatal(errs)
	}
	it.syncUntil(t, pod, "running", func(st v1.PodStatus) bool { return allRunning(st) || st.Phase == v1.PodSucceeded })
	if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(sub, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(sub, "marker"), []byte("mounted later\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	it.syncUntil(t, pod, "Succeeded", func(st v1.PodStatus) bool { return st.Phase == v1.PodSucceeded })
	want := "search default.svc.cluster.local svc.cluster.local cluster.local example.org\nnameserver 10.96.0.10\noptions ndots:5\nmounted later\n"
	var out bytes.Buffer
	deadline := time.Now().Add(5 * time.Second)
	for out.String() != want && time.Now().Before(deadline) {
		out.Reset()
		if err := w.Logs(t.Context(), pod, "dns", pods.LogOptions{}, &out); err != nil {
			t.Fatal(err)
		}
	}
	if out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
	if strings.Contains(out.String(), "192.0.2.53") {
		t.Error("the host's nameserver reached a ClusterFirst pod")
	}
}
