package systemdrt

import (
	"reflect"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/record"

	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

func resList(cpu, mem string) v1.ResourceList {
	out := v1.ResourceList{}
	if cpu != "" {
		out[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		out[v1.ResourceMemory] = resource.MustParse(mem)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func TestUnitProperties(t *testing.T) {
	head := func(desc, slice string, exec units.Exec) []units.Property {
		return []units.Property{
			{Name: "Description", Value: desc},
			{Name: "Slice", Value: slice},
			{Name: "Type", Value: "exec"},
			{Name: "ExecStart", Value: exec},
			{Name: "RemainAfterExit", Value: true},
			{Name: "Restart", Value: "no"},
		}
	}
	tail := func(pod *v1.Pod, name string, sig syscall.Signal, grace time.Duration, oom int32) []units.Property {
		return []units.Property{
			{Name: "StandardOutput", Value: "journal"},
			{Name: "StandardError", Value: "journal"},
			{Name: "SyslogIdentifier", Value: name},
			{Name: "LogExtraFields", Value: [][]byte{
				[]byte("POD_UID=" + string(pod.UID)), []byte("POD_NAME=" + pod.Name),
				[]byte("POD_NAMESPACE=" + pod.Namespace), []byte("CONTAINER_NAME=" + name),
			}},
			{Name: "KillSignal", Value: int32(sig)},
			{Name: "TimeoutStopUSec", Value: grace},
			{Name: "OOMScoreAdjust", Value: oom},
			{Name: "MemoryAccounting", Value: true},
			{Name: "CPUAccounting", Value: true},
			{Name: "TasksAccounting", Value: true},
		}
	}
	// confined is the default confinement of a non-privileged container: containerd's
	// capability set, the kubelet's masked and read-only paths, hidden processes of other
	// users and a private IPC namespace.
	confined := []units.Property{
		{Name: "CapabilityBoundingSet", Value: uint64(0xa80425fb)},
		{Name: "InaccessiblePaths", Value: []string{"-/proc/asound", "-/proc/acpi", "-/proc/interrupts", "-/proc/kcore", "-/proc/keys",
			"-/proc/latency_stats", "-/proc/timer_list", "-/proc/timer_stats", "-/proc/sched_debug", "-/proc/scsi", "-/sys/firmware", "-/sys/devices/virtual/powercap"}},
		{Name: "ReadOnlyPaths", Value: []string{"-/proc/bus", "-/proc/fs", "-/proc/irq", "-/proc/sys", "-/proc/sysrq-trigger"}},
		{Name: "ProtectProc", Value: "invisible"},
		{Name: "PrivateIPC", Value: true},
	}
	nobody := []units.Property{{Name: "User", Value: "65534"}, {Name: "Group", Value: "65534"}}
	cat := func(parts ...[]units.Property) []units.Property {
		var out []units.Property
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}

	bestEffort := testPod("be-1", "", cmd("sleep", "infinity"))

	guaranteed := testPod("g-1", "", v1.Container{
		Name:    "web",
		Command: []string{"/bin/sh", "-c"},
		Args:    []string{"echo $(GREETING) $$HOME; exec sleep infinity"},
		Env:     []v1.EnvVar{{Name: "NAME", Value: "world"}, {Name: "GREETING", Value: "hello $(NAME)"}},
		Resources: v1.ResourceRequirements{
			Requests: resList("500m", "128Mi"), Limits: resList("500m", "128Mi"),
		},
		WorkingDir: "/srv",
		SecurityContext: &v1.SecurityContext{
			RunAsUser: ptr(int64(1000)), AllowPrivilegeEscalation: ptr(false), ReadOnlyRootFilesystem: ptr(true),
		},
		VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "etc", MountPath: "/etc/app", ReadOnly: true}},
		Lifecycle:    &v1.Lifecycle{StopSignal: ptr(v1.Signal("SIGINT"))},
	})
	guaranteed.Spec.TerminationGracePeriodSeconds = ptr(int64(5))
	guaranteed.Spec.Volumes = []v1.Volume{
		{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "etc", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/etc/app"}}},
	}
	guaranteed.Spec.SecurityContext = &v1.PodSecurityContext{RunAsGroup: ptr(int64(2000)), FSGroup: ptr(int64(3000)), SupplementalGroups: []int64{4000}}

	burstable := testPod("bu-1", "", v1.Container{
		Name: "api", Command: []string{"/bin/sleep", "1"},
		Resources: v1.ResourceRequirements{Limits: resList("250m", "")},
	})
	burstable.Spec.Containers = append(burstable.Spec.Containers, v1.Container{
		Name: "mem", Command: []string{"/bin/sleep", "1"}, Resources: v1.ResourceRequirements{Requests: resList("", "1Gi")},
	})

	cases := []struct {
		name      string
		pod       *v1.Pod
		n         int
		mode      units.Mode
		resources slices.Options
		want      []units.Property
	}{
		{
			name: "best effort on hybrid", pod: bestEffort, n: 1, mode: units.ModeHybrid, resources: slices.DefaultOptions(),
			want: cat(
				head("container default/web/sleep (#1)", "kubepods-besteffort-podbe_1.slice", units.Exec{Path: "/bin/sleep", Args: []string{"/bin/sleep", "infinity"}}),
				nobody, confined,
				tail(bestEffort, "sleep", syscall.SIGTERM, 30*time.Second, 1000),
				[]units.Property{{Name: "CPUShares", Value: uint64(2)}},
			),
		},
		{
			name: "guaranteed with everything on v2", pod: guaranteed, n: 3, mode: units.ModeUnified, resources: slices.DefaultOptions(),
			want: cat(
				head("container default/web/web (#3)", "kubepods-podg_1.slice", units.Exec{Path: "/bin/sh",
					Args: []string{"/bin/sh", "-c", "echo hello world $HOME; exec sleep infinity"}}),
				[]units.Property{
					{Name: "Environment", Value: []string{"NAME=world", "GREETING=hello world"}},
					{Name: "WorkingDirectory", Value: "/srv"},
					{Name: "BindPaths", Value: []units.BindPath{{Source: "<state>/pods/g-1/volumes/data", Destination: "/data", Recursive: true}}},
					{Name: "BindReadOnlyPaths", Value: []units.BindPath{{Source: "/etc/app", Destination: "/etc/app", Recursive: true}}},
					{Name: "User", Value: "1000"},
					{Name: "Group", Value: "2000"},
					{Name: "SupplementaryGroups", Value: []string{"3000", "4000"}},
					{Name: "CapabilityBoundingSet", Value: uint64(0xa80425fb)},
					{Name: "NoNewPrivileges", Value: true},
					{Name: "ProtectSystem", Value: "strict"},
				},
				confined[1:],
				tail(guaranteed, "web", syscall.SIGINT, 5*time.Second, -997),
				[]units.Property{
					{Name: "MemoryMax", Value: uint64(128 << 20)},
					{Name: "CPUWeight", Value: slices.CPUSharesToWeight(512)},
					{Name: "CPUQuotaPeriodUSec", Value: uint64(100000)},
					{Name: "CPUQuotaPerSecUSec", Value: uint64(500000)},
				},
			),
		},
		{
			name: "cpu limit only: shares from the limit", pod: burstable, n: 1, mode: units.ModeHybrid, resources: slices.DefaultOptions(),
			want: cat(
				head("container default/web/api (#1)", "kubepods-burstable-podbu_1.slice", units.Exec{Path: "/bin/sleep", Args: []string{"/bin/sleep", "1"}}),
				nobody, confined,
				tail(burstable, "api", syscall.SIGTERM, 30*time.Second, 999),
				[]units.Property{
					{Name: "CPUShares", Value: uint64(256)},
					{Name: "CPUQuotaPeriodUSec", Value: uint64(100000)},
					{Name: "CPUQuotaPerSecUSec", Value: uint64(250000)},
				},
			),
		},
		{
			name: "cpu limits not enforced", pod: burstable, n: 1, mode: units.ModeHybrid, resources: slices.Options{},
			want: cat(
				head("container default/web/api (#1)", "kubepods-burstable-podbu_1.slice", units.Exec{Path: "/bin/sleep", Args: []string{"/bin/sleep", "1"}}),
				nobody, confined,
				tail(burstable, "api", syscall.SIGTERM, 30*time.Second, 999),
				[]units.Property{{Name: "CPUShares", Value: uint64(256)}},
			),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The properties of the first container's run n, as the worker configures it and
			// the runtime starts it.
			got := startedProps(t, c.pod, c.n, c.mode, c.resources)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("properties differ:\n got  %v\n want %v", got, c.want)
				for i := range max(len(got), len(c.want)) {
					var g, w units.Property
					if i < len(got) {
						g = got[i]
					}
					if i < len(c.want) {
						w = c.want[i]
					}
					if !reflect.DeepEqual(g, w) {
						t.Errorf("  [%d] got %#v, want %#v", i, g, w)
					}
				}
			}
		})
	}
}

// startedProps runs the pod (n-1 restarts of its first container under restartPolicy Always,
// with the kubelet's back-off in fake time) through the worker over the runtime and returns
// the properties its first container's run n was started with; the state dir reads <state>.
func startedProps(t *testing.T, pod *v1.Pod, n int, mode units.Mode, resources slices.Options) []units.Property {
	t.Helper()
	var props []units.Property
	synctest.Test(t, func(t *testing.T) {
		sd := newFakeSystemd(mode)
		opts := Options{Systemd: sd, StateDir: t.TempDir(), ProcRoot: fakeProc(t, "000001ffffffffff", "0"), Executable: fakeExecutable,
			KnownUser: knownID, KnownGroup: knownID}
		rt, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		w, err := worker.New(worker.Options{Runtime: rt, Recorder: &record.FakeRecorder{}, StateDir: opts.StateDir, MemoryCapacity: 8 << 30, Resources: resources, HostNetwork: true})
		if err != nil {
			t.Fatal(err)
		}
		name := pod.Spec.Containers[0].Name
		for i := 1; ; i++ {
			if _, err := w.SyncPod(t.Context(), pod, testSlice(pod)); err != nil {
				t.Fatal(err)
			}
			if i == n {
				break
			}
			u, _ := UnitName(string(pod.UID), name, i)
			sd.exit(u, cldExited, 1, "exit-code")
			time.Sleep(10 * time.Minute) // past any back-off
		}
		want, _ := UnitName(string(pod.UID), name, n)
		for _, c := range sd.CallsTo("StartService") {
			if c.Unit == want {
				props = c.Props
			}
		}
		for i, p := range props {
			if b, ok := p.Value.([]units.BindPath); ok {
				out := make([]units.BindPath, len(b))
				for j, x := range b {
					x.Source = strings.Replace(x.Source, opts.StateDir, "<state>", 1)
					out[j] = x
				}
				props[i].Value = out
			}
		}
	})
	if props == nil {
		t.Fatalf("run %d not started", n)
	}
	return props
}

func TestOOMScoreOnUnits(t *testing.T) {
	// The burstable container of the pod above with 1Gi of 8Gi requested gets 1000-125 = 875.
	pod := testPod("bu-2", "", v1.Container{Name: "mem", Command: []string{"/bin/sleep", "1"},
		Resources: v1.ResourceRequirements{Requests: resList("", "1Gi"), Limits: resList("", "2Gi")}})
	cases := []struct {
		name, capEff, floor string
		container           v1.Container
		want                int32
	}{
		{"privileged: kubelet value", "000001ffffffffff", "0", pod.Spec.Containers[0], 875},
		{"no CAP_SYS_RESOURCE, above floor", "000001fffeffffff", "0", pod.Spec.Containers[0], 875},
		{"no CAP_SYS_RESOURCE, guaranteed raised to floor", "000001fffeffffff", "0",
			v1.Container{Name: "g", Command: []string{"/bin/sleep", "1"}, Resources: v1.ResourceRequirements{Requests: resList("1", "1Gi"), Limits: resList("1", "1Gi")}}, 0},
		{"no CAP_SYS_RESOURCE, floor 500", "000001fffeffffff", "500", pod.Spec.Containers[0], 875},
		{"no CAP_SYS_RESOURCE, floor 900", "000001fffeffffff", "900", pod.Spec.Containers[0], 900},
		{"privileged, guaranteed", "000001ffffffffff", "0",
			v1.Container{Name: "g", Command: []string{"/bin/sleep", "1"}, Resources: v1.ResourceRequirements{Requests: resList("1", "1Gi"), Limits: resList("1", "1Gi")}}, -997},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sd := newFakeSystemd(units.ModeHybrid)
			rt := newTestRT(t, Options{Systemd: sd, StateDir: t.TempDir(), ProcRoot: fakeProc(t, c.capEff, c.floor), Executable: fakeExecutable}, nil)
			p := testPod("oom-1", v1.RestartPolicyAlways, c.container)
			if _, err := rt.SyncPod(t.Context(), p, testSlice(p)); err != nil {
				t.Fatal(err)
			}
			u, ok := sd.Unit("slicelet-oom_1-" + c.container.Name + "-1.service")
			if !ok {
				t.Fatalf("unit not started: %v", sd.Names())
			}
			if got := u.Props["OOMScoreAdjust"]; got != c.want {
				t.Errorf("OOMScoreAdjust = %v, want %d", got, c.want)
			}
		})
	}
}
