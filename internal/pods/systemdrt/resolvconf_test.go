package systemdrt

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/units"
)

// TestSandboxResolvConf: a sandbox whose DnsConfig is not the host's gets a resolv.conf of its
// own, bind-mounted read-only at /etc/resolv.conf in its containers (not over a volume a
// container mounts there itself, as containerd) and removed with the sandbox; one that says what the host's
// file says gets none, and its containers read the host's.
func TestSandboxResolvConf(t *testing.T) {
	host := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(host, []byte("nameserver 192.0.2.53\nsearch example.org\noptions edns0 ndots:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		dns    *runtimeapi.DNSConfig
		mounts []*runtimeapi.Mount
		want   string // the file's content; "" for none mounted
	}{
		{name: "no DnsConfig"},
		{name: "the host's", dns: &runtimeapi.DNSConfig{Servers: []string{"192.0.2.53"}, Searches: []string{"example.org"}, Options: []string{"ndots:1", "edns0"}}},
		{name: "cluster DNS", dns: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"default.svc.cluster.local", "svc.cluster.local"}, Options: []string{"ndots:5"}},
			want: "search default.svc.cluster.local svc.cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"},
		{name: "the container mounts its own", dns: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}},
			mounts: []*runtimeapi.Mount{{ContainerPath: "/etc/resolv.conf", HostPath: "/srv/resolv.conf"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rt, sd := newTestRuntime(t, units.ModeHybrid)
			rt.rt.opts.HostResolvConf = host
			ctx := t.Context()
			sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Uid: "dns-1", Name: "web", Namespace: "default"},
				Linux: &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "kubepods-poddns_1.slice"}, DnsConfig: c.dns}
			sb, err := rt.rt.RunPodSandbox(ctx, sbCfg, "")
			if err != nil {
				t.Fatal(err)
			}
			cfg := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "a"}, Command: []string{"/bin/sleep", "1"}, Mounts: c.mounts,
				Labels: map[string]string{worker.LabelPodUID: "dns-1", worker.LabelPodName: "web", worker.LabelPodNamespace: "default"}}
			id, err := rt.rt.CreateContainer(ctx, sb, cfg, sbCfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Mounts) != len(c.mounts) {
				t.Errorf("CreateContainer changed the caller's configuration: %v", cfg.Mounts)
			}
			if err := rt.rt.StartContainer(ctx, id); err != nil {
				t.Fatal(err)
			}
			u, _ := sd.Unit(id)
			ro, _ := u.Props["BindReadOnlyPaths"].([]units.BindPath)
			file := filepath.Join(rt.opts.StateDir, "pods", "dns-1", "resolv-0.conf")
			if c.want == "" {
				if ro != nil {
					t.Errorf("BindReadOnlyPaths = %v, want none", ro)
				}
				if _, err := os.Stat(file); err == nil && c.mounts == nil {
					t.Errorf("%s written", file)
				}
				return
			}
			if want := []units.BindPath{{Source: file, Destination: "/etc/resolv.conf", Recursive: true}}; !reflect.DeepEqual(ro, want) {
				t.Errorf("BindReadOnlyPaths = %v, want %v", ro, want)
			}
			data, err := os.ReadFile(file)
			if err != nil || string(data) != c.want {
				t.Errorf("resolv.conf = %q, %v; want %q", data, err, c.want)
			}
			if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o644 {
				t.Errorf("resolv.conf mode: %v, %v", st, err)
			}
			if err := rt.rt.StopContainer(ctx, id, 0); err != nil {
				t.Fatal(err)
			}
			if err := rt.rt.RemovePodSandbox(ctx, sb); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(file); !os.IsNotExist(err) {
				t.Errorf("resolv.conf left after the sandbox was removed: %v", err)
			}
		})
	}
}

// TestCreateContainerRefusesBidirectional: no Bidirectional propagation reaches systemd.
func TestCreateContainerRefusesBidirectional(t *testing.T) {
	rt, _ := newTestRuntime(t, units.ModeHybrid)
	ctx := t.Context()
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Uid: "bi-1", Name: "web", Namespace: "default"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "kubepods-podbi_1.slice"}}
	sb, err := rt.rt.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "a"}, Command: []string{"/bin/sleep", "1"},
		Mounts: []*runtimeapi.Mount{{ContainerPath: "/x", HostPath: "/x", Propagation: runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL}}}
	if _, err := rt.rt.CreateContainer(ctx, sb, cfg, sbCfg); err == nil {
		t.Error("CreateContainer took Bidirectional propagation")
	}
}
