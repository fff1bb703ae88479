package systemdrt

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods"
)

// probeScript reports, one key=value a line, what the container's process may do, then
// becomes `sleep infinity` (same process: its /proc status is the container's).
const probeScript = `
r() { if sh -c "$2" >/dev/null 2>&1; then echo "$1=yes"; else echo "$1=no"; fi; }
r shadow 'cat /etc/shadow'
r timers 'test -n "$(cat /proc/timer_list)"'
r procsys 'echo 1 > /proc/sys/kernel/shm_rmid_forced'
r pid1 'test -e /proc/1/status'
r rootfs 'touch /var/tmp/slicelet-sc-probe && rm -f /var/tmp/slicelet-sc-probe'
r volume 'touch /mnt/probe'
r unshare 'unshare -n true'
r mkdir 'd=/tmp/slicelet-sc-probe.$$$$; mkdir $d && rmdir $d'
# glibc's pthread_create tries clone3 first and falls back to clone only on ENOSYS.
if command -v python3 >/dev/null; then r threads 'python3 -c "import threading; t = threading.Thread(target=print); t.start(); t.join()"'; else echo threads=skip; fi
echo done=yes
exec sleep infinity`

// secCase is one security context of TestIntegrationSecurityContext and what it must give.
type secCase struct {
	name   string
	pod    func(p *v1.Pod, c *v1.Container)
	status map[string]string // /proc/<pid>/status fields, exactly
	can    map[string]string // probe results
	props  map[string]any    // Service properties
}

// TestIntegrationSecurityContext runs a container per security context under the real systemd
// and checks its unit's properties, its process's /proc/<pid>/status (Uid, Gid, Groups,
// CapBnd, CapEff, NoNewPrivs, Seccomp) and what the process can read and write.
func TestIntegrationSecurityContext(t *testing.T) {
	it := newIT(t)
	const defaultCaps = "00000000a80425fb"
	// A privileged container gets every capability systemd has (the sandbox's systemd has
	// fewer than the kernel knows).
	allCaps := procStatus(t, 1)["CapBnd"]
	root := ptr(int64(0))
	cases := []secCase{
		{
			name:   "no security context: nobody, containerd's bounding set, no capability",
			pod:    func(p *v1.Pod, c *v1.Container) {},
			status: map[string]string{"Uid": "65534\t65534\t65534\t65534", "Gid": "65534\t65534\t65534\t65534", "CapBnd": defaultCaps, "CapEff": "0000000000000000", "NoNewPrivs": "0", "Seccomp": "0"},
			can:    map[string]string{"shadow": "no", "timers": "no", "procsys": "no", "pid1": "no", "volume": "yes", "rootfs": "yes", "mkdir": "yes"},
			props:  map[string]any{"User": "65534", "CapabilityBoundingSet": uint64(0xa80425fb), "AmbientCapabilities": uint64(0), "ProtectProc": "invisible", "PrivateIPC": true},
		},
		{
			name:   "explicit root: containerd's default capabilities, masked /proc",
			pod:    func(p *v1.Pod, c *v1.Container) { c.SecurityContext = &v1.SecurityContext{RunAsUser: root} },
			status: map[string]string{"Uid": "0\t0\t0\t0", "CapBnd": defaultCaps, "CapEff": defaultCaps, "NoNewPrivs": "0"},
			can:    map[string]string{"shadow": "yes", "timers": "no", "procsys": "no", "unshare": "no"},
		},
		{
			name: "root, drop ALL, add NET_ADMIN",
			pod: func(p *v1.Pod, c *v1.Container) {
				c.SecurityContext = &v1.SecurityContext{RunAsUser: root, Capabilities: &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN"}, Drop: []v1.Capability{"ALL"}}}
			},
			status: map[string]string{"CapBnd": "0000000000001000", "CapEff": "0000000000001000"},
		},
		{
			name: "allowPrivilegeEscalation false: no_new_privs",
			pod: func(p *v1.Pod, c *v1.Container) {
				c.SecurityContext = &v1.SecurityContext{AllowPrivilegeEscalation: ptr(false)}
			},
			status: map[string]string{"NoNewPrivs": "1", "Seccomp": "0"},
			props:  map[string]any{"NoNewPrivileges": true},
		},
		{
			name: "RuntimeDefault seccomp as root: filter, no namespaces",
			pod: func(p *v1.Pod, c *v1.Container) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: root, SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}
			},
			status: map[string]string{"Seccomp": "2", "CapEff": defaultCaps},
			can:    map[string]string{"unshare": "no", "shadow": "yes", "threads": "yes"},
		},
		{
			name: "readOnlyRootFilesystem as root: volumes stay writable",
			pod: func(p *v1.Pod, c *v1.Container) {
				c.SecurityContext = &v1.SecurityContext{RunAsUser: root, ReadOnlyRootFilesystem: ptr(true)}
			},
			can:   map[string]string{"rootfs": "no", "volume": "yes"},
			props: map[string]any{"ProtectSystem": "strict"},
		},
		{
			name: "privileged root: every capability, nothing masked",
			pod: func(p *v1.Pod, c *v1.Container) {
				c.SecurityContext = &v1.SecurityContext{RunAsUser: root, Privileged: ptr(true)}
			},
			status: map[string]string{"CapBnd": allCaps, "CapEff": allCaps, "Seccomp": "0"},
			can:    map[string]string{"timers": "yes"},
		},
		{
			name: "ids unknown to the host: runAsUser, runAsGroup, fsGroup, supplementalGroups through setpriv",
			pod: func(p *v1.Pod, c *v1.Container) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr(int64(4321)), RunAsGroup: ptr(int64(5432)), FSGroup: ptr(int64(6543)), SupplementalGroups: []int64{7654}}
			},
			status: map[string]string{"Uid": "4321\t4321\t4321\t4321", "Gid": "5432\t5432\t5432\t5432", "Groups": "6543 7654", "CapEff": "0000000000000000"},
			can:    map[string]string{"shadow": "no", "volume": "yes"},
			props:  map[string]any{"User": "", "Group": "", "SupplementaryGroups": []string{}},
		},
		{
			name: "ids the host knows: User=, Group=, SupplementaryGroups=",
			pod: func(p *v1.Pod, c *v1.Container) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr(int64(65534)), RunAsGroup: ptr(int64(0)), SupplementalGroups: []int64{65534}}
			},
			status: map[string]string{"Uid": "65534\t65534\t65534\t65534", "Gid": "0\t0\t0\t0", "Groups": "65534", "CapBnd": defaultCaps},
			props:  map[string]any{"User": "65534", "Group": "0", "SupplementaryGroups": []string{"65534"}},
		},
		{
			name: "hostPID and hostIPC: the host's processes and IPC",
			pod: func(p *v1.Pod, c *v1.Container) {
				p.Spec.HostPID, p.Spec.HostIPC = true, true
			},
			can:   map[string]string{"pid1": "yes"},
			props: map[string]any{"ProtectProc": "default", "PrivateIPC": false},
		},
	}
	// A Localhost profile under the worker's seccomp root: everything but mkdir.
	if err := os.MkdirAll(filepath.Join(it.state, "seccomp"), 0o755); err != nil {
		t.Fatal(err)
	}
	profile := `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO"}]}`
	if err := os.WriteFile(filepath.Join(it.state, "seccomp", "no-mkdir.json"), []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, secCase{
		name: "Localhost seccomp profile: a deny list",
		pod: func(p *v1.Pod, c *v1.Container) {
			c.SecurityContext = &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr("no-mkdir.json")}}
		},
		status: map[string]string{"Seccomp": "2"},
		can:    map[string]string{"mkdir": "no", "rootfs": "yes"},
	})
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			uid := fmt.Sprintf("sec-%d", i)
			ctr := sh("probe", probeScript)
			ctr.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/mnt"}}
			pod := itPod(uid, uid, v1.RestartPolicyNever, ctr)
			pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
			c.pod(pod, &pod.Spec.Containers[0])
			if errs := it.rt.Validate(pod); len(errs) > 0 {
				t.Fatalf("Validate: %v", errs.ToAggregate())
			}
			it.syncUntil(t, pod, "Running", allRunning)
			got := probeResults(t, it, pod)
			for k, want := range c.can {
				if got[k] != want {
					t.Errorf("%s = %q, want %q", k, got[k], want)
				}
			}
			unit := it.activeUnits(t, uid)
			if len(unit) != 1 {
				t.Fatalf("active units %v, want one", unit)
			}
			info, err := it.sd.Properties(t.Context(), unit[0])
			if err != nil {
				t.Fatal(err)
			}
			status := procStatus(t, int(info.MainPID))
			for k, want := range c.status {
				if status[k] != want {
					t.Errorf("/proc/%d/status %s = %q, want %q", info.MainPID, k, status[k], want)
				}
			}
			for k, want := range c.props {
				v, err := it.sd.Property(t.Context(), unit[0], "Service", k)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(v) != fmt.Sprint(want) {
					t.Errorf("property %s = %v, want %v", k, v, want)
				}
			}
			if _, err := it.rt.KillPod(t.Context(), pod, time.Second); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// probeResults waits for the probe's "done" line and returns its key=value lines.
func probeResults(t *testing.T, it *itEnv, pod *v1.Pod) map[string]string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var out bytes.Buffer
		if err := it.rt.Logs(t.Context(), pod, "probe", pods.LogOptions{}, &out); err != nil {
			t.Fatal(err)
		}
		res := map[string]string{}
		for _, l := range strings.Split(out.String(), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok {
				res[k] = v
			}
		}
		if res["done"] == "yes" {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("the probe never finished; output %q", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// procStatus reads /proc/<pid>/status into its fields (values trimmed).
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}
