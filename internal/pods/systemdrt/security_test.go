package systemdrt

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/units"
)

func TestCapabilitySet(t *testing.T) {
	bits := func(names ...string) uint64 {
		var out uint64
		for _, n := range names {
			b, ok := capabilityBit(n)
			if !ok {
				t.Fatalf("unknown capability %s", n)
			}
			out |= b
		}
		return out
	}
	def := bits(DefaultCapabilities...)
	all := uint64(1)<<len(capabilityNames) - 1
	cases := []struct {
		name    string
		sc      *runtimeapi.LinuxContainerSecurityContext
		want    uint64
		wantErr string
	}{
		{name: "default: containerd's set", sc: &runtimeapi.LinuxContainerSecurityContext{}, want: 0xa80425fb},
		{name: "privileged: all", sc: &runtimeapi.LinuxContainerSecurityContext{Privileged: true,
			Capabilities: &runtimeapi.Capability{DropCapabilities: []string{"ALL"}}}, want: all},
		{name: "add and drop", sc: &runtimeapi.LinuxContainerSecurityContext{
			Capabilities: &runtimeapi.Capability{AddCapabilities: []string{"NET_ADMIN", "sys_time"}, DropCapabilities: []string{"NET_RAW", "MKNOD"}}},
			want: (def | bits("NET_ADMIN", "SYS_TIME")) &^ bits("NET_RAW", "MKNOD")},
		{name: "drop ALL then add", sc: &runtimeapi.LinuxContainerSecurityContext{
			Capabilities: &runtimeapi.Capability{AddCapabilities: []string{"NET_BIND_SERVICE"}, DropCapabilities: []string{"ALL"}}},
			want: bits("NET_BIND_SERVICE")},
		{name: "add ALL then drop", sc: &runtimeapi.LinuxContainerSecurityContext{
			Capabilities: &runtimeapi.Capability{AddCapabilities: []string{"all"}, DropCapabilities: []string{"SYS_ADMIN"}}},
			want: all &^ bits("SYS_ADMIN")},
		{name: "unknown", sc: &runtimeapi.LinuxContainerSecurityContext{
			Capabilities: &runtimeapi.Capability{AddCapabilities: []string{"CAP_NET_ADMIN"}}}, wantErr: `unknown capability "CAP_NET_ADMIN"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := capabilitySet(c.sc)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("capabilitySet = %#x, %v; want %#x", got, err, c.want)
			}
		})
	}
}

func TestSeccompFilter(t *testing.T) {
	eperm := uint(1)
	cases := []struct {
		name    string
		prof    *specs.LinuxSeccomp
		want    []units.Property
		wantErr string
	}{
		{
			name: "allow list with errno default and a conditional clone",
			prof: &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, DefaultErrnoRet: &eperm, Syscalls: []specs.LinuxSyscall{
				{Names: []string{"read", "write"}, Action: specs.ActAllow},
				{Names: []string{"clone"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Index: 0, Value: 0x7e020000, Op: specs.OpMaskedEqual}}},
				{Names: []string{"clone3"}, Action: specs.ActErrno},
				{Names: []string{"read"}, Action: specs.ActAllow},
			}},
			want: []units.Property{
				{Name: "SystemCallFilter", Value: units.SyscallFilter{Allow: true, Names: []string{"read", "write", "clone", "clone3"}}},
				{Name: "SystemCallErrorNumber", Value: int32(1)},
				{Name: "RestrictNamespaces", Value: uint64(0)},
			},
		},
		{
			name: "clone allowed unconditionally: no namespace restriction",
			prof: &specs.LinuxSeccomp{DefaultAction: specs.ActKillProcess, Syscalls: []specs.LinuxSyscall{
				{Names: []string{"clone"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{{Index: 0, Value: 1, Op: specs.OpEqualTo}}},
				{Names: []string{"clone", "clone3"}, Action: specs.ActAllow},
			}},
			want: []units.Property{{Name: "SystemCallFilter", Value: units.SyscallFilter{Allow: true, Names: []string{"clone", "clone3"}}}},
		},
		{
			name: "deny list",
			prof: &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{
				{Names: []string{"mount", "umount2"}, Action: specs.ActErrno},
				{Names: []string{"read"}, Action: specs.ActAllow},
			}},
			want: []units.Property{{Name: "SystemCallFilter", Value: units.SyscallFilter{Names: []string{"mount", "umount2"}}}},
		},
		{
			name: "conditional deny cannot be expressed",
			prof: &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Syscalls: []specs.LinuxSyscall{
				{Names: []string{"socket"}, Action: specs.ActErrno, Args: []specs.LinuxSeccompArg{{Index: 0, Value: 40, Op: specs.OpEqualTo}}},
			}},
			wantErr: "the rule for socket has argument conditions",
		},
		{
			name:    "allows nothing",
			prof:    &specs.LinuxSeccomp{DefaultAction: specs.ActErrno},
			wantErr: "allows no system call",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := seccompFilter(c.prof)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Errorf("seccompFilter = %v, %v\n want %v", got, err, c.want)
			}
		})
	}
}

// TestRuntimeDefaultProfile: containerd's default profile becomes an allow list with EPERM; for
// a container without CAP_SYS_ADMIN namespaces are restricted (clone's flag conditions) and
// unshare, mount and keyctl are not allowed; with CAP_SYS_ADMIN mount and unshare are.
func TestRuntimeDefaultProfile(t *testing.T) {
	rd := &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	def, _ := capabilitySet(&runtimeapi.LinuxContainerSecurityContext{})
	props, err := seccompProperties(rd, def, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]any{}
	for _, p := range props {
		byName[p.Name] = p.Value
	}
	f, ok := byName["SystemCallFilter"].(units.SyscallFilter)
	if !ok || !f.Allow {
		t.Fatalf("SystemCallFilter = %v, want an allow list", byName["SystemCallFilter"])
	}
	for _, n := range []string{"read", "execve", "clone", "clone3", "futex", "socket"} {
		if !slices.Contains(f.Names, n) {
			t.Errorf("%s not allowed", n)
		}
	}
	for _, n := range []string{"unshare", "mount", "keyctl", "kexec_load", "bpf"} {
		if slices.Contains(f.Names, n) {
			t.Errorf("%s allowed without CAP_SYS_ADMIN", n)
		}
	}
	if byName["SystemCallErrorNumber"] != int32(1) || byName["RestrictNamespaces"] != uint64(0) {
		t.Errorf("properties %v, want EPERM and restricted namespaces", props)
	}

	admin := def
	b, _ := capabilityBit("SYS_ADMIN")
	admin |= b
	props, err = seccompProperties(rd, admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	f = props[0].Value.(units.SyscallFilter)
	for _, n := range []string{"unshare", "mount", "setns"} {
		if !slices.Contains(f.Names, n) {
			t.Errorf("%s not allowed with CAP_SYS_ADMIN", n)
		}
	}
	for _, p := range props {
		if p.Name == "RestrictNamespaces" {
			t.Error("namespaces restricted with CAP_SYS_ADMIN")
		}
	}
}

func TestSecurityProperties(t *testing.T) {
	known := func(ids ...int64) func(int64) bool { return func(id int64) bool { return slices.Contains(ids, id) } }
	env := secEnv{KnownUser: known(0, 65534, 1000), KnownGroup: known(0, 65534, 2000), Setpriv: "/usr/bin/setpriv",
		Read: func(p string) ([]byte, error) {
			if p == "/seccomp/deny-mount.json" {
				return []byte(`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mount"], "action": "SCMP_ACT_ERRNO"}]}`), nil
			}
			return nil, errors.New("no such file")
		}}
	hostNS := &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_NODE, Ipc: runtimeapi.NamespaceMode_NODE, Network: runtimeapi.NamespaceMode_NODE}
	cases := []struct {
		name     string
		sc       *runtimeapi.LinuxContainerSecurityContext
		want     []units.Property
		wantWrap []string
		wantErr  string
	}{
		{
			name: "known ids, no_new_privs, read-only root, host namespaces",
			sc: &runtimeapi.LinuxContainerSecurityContext{RunAsUser: &runtimeapi.Int64Value{Value: 1000}, RunAsGroup: &runtimeapi.Int64Value{Value: 2000},
				SupplementalGroups: []int64{65534}, NoNewPrivs: true, ReadonlyRootfs: true, NamespaceOptions: hostNS},
			want: []units.Property{
				{Name: "User", Value: "1000"}, {Name: "Group", Value: "2000"}, {Name: "SupplementaryGroups", Value: []string{"65534"}},
				{Name: "CapabilityBoundingSet", Value: uint64(0xa80425fb)}, {Name: "NoNewPrivileges", Value: true}, {Name: "ProtectSystem", Value: "strict"},
			},
		},
		{
			name: "runAsUser without runAsGroup: the user's own group",
			sc:   &runtimeapi.LinuxContainerSecurityContext{RunAsUser: &runtimeapi.Int64Value{Value: 0}, NamespaceOptions: hostNS},
			want: []units.Property{{Name: "User", Value: "0"}, {Name: "CapabilityBoundingSet", Value: uint64(0xa80425fb)}},
		},
		{
			name: "unknown ids: setpriv with the bounding set",
			sc: &runtimeapi.LinuxContainerSecurityContext{RunAsUser: &runtimeapi.Int64Value{Value: 4321}, SupplementalGroups: []int64{7, 8},
				Capabilities: &runtimeapi.Capability{AddCapabilities: []string{"NET_ADMIN"}, DropCapabilities: []string{"ALL"}}, NamespaceOptions: hostNS},
			wantWrap: []string{"/usr/bin/setpriv", "--reuid=4321", "--regid=0", "--groups=7,8", "--bounding-set=-all,+net_admin", "--"},
		},
		{
			name: "privileged unknown user: every capability, nothing masked, no seccomp",
			sc: &runtimeapi.LinuxContainerSecurityContext{RunAsUser: &runtimeapi.Int64Value{Value: 4321}, Privileged: true, NamespaceOptions: hostNS,
				MaskedPaths: []string{"/proc/kcore"}, Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}},
			wantWrap: []string{"/usr/bin/setpriv", "--reuid=4321", "--regid=0", "--clear-groups", "--"},
		},
		{
			name: "container namespaces, masked paths, Localhost seccomp and AppArmor",
			sc: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD},
				MaskedPaths: []string{"/proc/kcore"}, ReadonlyPaths: []string{"/proc/sys"},
				Seccomp:  &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "/seccomp/deny-mount.json"},
				Apparmor: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "web"}},
			want: []units.Property{
				{Name: "User", Value: "65534"}, {Name: "Group", Value: "65534"}, {Name: "CapabilityBoundingSet", Value: uint64(0xa80425fb)},
				{Name: "InaccessiblePaths", Value: []string{"-/proc/kcore"}}, {Name: "ReadOnlyPaths", Value: []string{"-/proc/sys"}},
				{Name: "ProtectProc", Value: "invisible"}, {Name: "PrivateIPC", Value: true},
				{Name: "SystemCallFilter", Value: units.SyscallFilter{Names: []string{"mount"}}},
				{Name: "AppArmorProfile", Value: units.Profile{Name: "web"}},
			},
		},
		{
			name:    "missing Localhost profile",
			sc:      &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: hostNS, Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "/seccomp/nope.json"}},
			wantErr: "seccomp profile /seccomp/nope.json: no such file",
		},
		{
			name:    "shared process namespace",
			sc:      &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_POD}},
			wantErr: "cannot share a process namespace",
		},
		{
			name:    "AppArmor runtime default",
			sc:      &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: hostNS, Apparmor: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}},
			wantErr: "no default AppArmor profile",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, wrap, err := securityProperties(c.sc, env)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("properties\n got  %v\n want %v", got, c.want)
			}
			if !reflect.DeepEqual(wrap, c.wantWrap) {
				t.Errorf("wrap %q, want %q", wrap, c.wantWrap)
			}
		})
	}
}
