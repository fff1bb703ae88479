package systemdrt

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/units"
)

// DefaultUID and DefaultGID are who a container without runAsUser runs as. A container runtime
// runs such a container as its image's user, but the systemd runtime has no image and runs
// host commands on the host's filesystem: root there is the host's root, so the safe default
// is the conventional unprivileged "nobody" (65534). A container without runAsUser but with
// runAsGroup keeps that group.
const (
	DefaultUID int64 = 65534
	DefaultGID int64 = 65534
)

// DefaultUser is who a container without runAsUser runs as (DefaultUID, DefaultGID): the pod
// worker gives such containers' emptyDir volumes to that user.
func (r *Runtime) DefaultUser() (uid, gid int64) { return DefaultUID, DefaultGID }

// capabilityNames are the Linux capabilities by number (include/uapi/linux/capability.h), as
// the API names them (without the CAP_ prefix).
var capabilityNames = []string{
	"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
	"SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
	"IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
	"SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD",
	"LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
	"WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
}

// DefaultCapabilities is the capability set containerd gives a non-privileged container
// (containerd's oci.defaultUnixCaps), the bounding set of every non-privileged container here.
var DefaultCapabilities = []string{
	"CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID",
	"SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE",
}

// capabilityBit is the bit of a capability name ("NET_ADMIN"); ok is false for an unknown one.
func capabilityBit(name string) (uint64, bool) {
	i := slices.Index(capabilityNames, strings.ToUpper(name))
	if i < 0 {
		return 0, false
	}
	return 1 << uint(i), true
}

// capabilitySet is the container's capability mask as containerd computes it (its CRI
// plugin's capability options): every capability when privileged, else the default set; then
// add ALL, drop ALL, the other adds, the other drops, in that order. Unknown names are an error.
func capabilitySet(sc *runtimeapi.LinuxContainerSecurityContext) (uint64, error) {
	all := uint64(1)<<uint(len(capabilityNames)) - 1
	if sc.GetPrivileged() {
		return all, nil
	}
	var set uint64
	for _, c := range DefaultCapabilities {
		b, _ := capabilityBit(c)
		set |= b
	}
	add, drop := sc.GetCapabilities().GetAddCapabilities(), sc.GetCapabilities().GetDropCapabilities()
	isAll := func(c string) bool { return strings.EqualFold(c, "ALL") }
	if slices.ContainsFunc(add, isAll) {
		set = all
	}
	if slices.ContainsFunc(drop, isAll) {
		set = 0
	}
	for _, list := range []struct {
		names []string
		add   bool
	}{{add, true}, {drop, false}} {
		for _, c := range list.names {
			if isAll(c) {
				continue
			}
			b, ok := capabilityBit(c)
			if !ok {
				return 0, fmt.Errorf("unknown capability %q", c)
			}
			if list.add {
				set |= b
			} else {
				set &^= b
			}
		}
	}
	return set, nil
}

// capabilityList names the capabilities of a mask, CAP_-prefixed as systemd shows them.
func capabilityList(set uint64) []string {
	var out []string
	for i, n := range capabilityNames {
		if set&(1<<uint(i)) != 0 {
			out = append(out, "CAP_"+n)
		}
	}
	return out
}

// maxProfileSize bounds a Localhost seccomp profile read from disk.
const maxProfileSize = 1 << 20

// readProfile reads a Localhost seccomp profile, at most maxProfileSize bytes.
func readProfile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxProfileSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxProfileSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxProfileSize)
	}
	return b, nil
}

// securityProperties are the unit directives of a container's CRI security context:
//
//   - User=/Group= (numeric) from runAsUser and runAsGroup, DefaultUID/DefaultGID when
//     runAsUser is unset; SupplementaryGroups= from fsGroup and supplementalGroups. When an id
//     is not in the host's user database, the returned command prefix (setprivArgs) sets them
//     instead.
//   - CapabilityBoundingSet= from capabilitySet; no AmbientCapabilities=, so a non-root user
//     keeps no effective capability, as under containerd (no ambient set).
//   - NoNewPrivileges= from no_new_privs (allowPrivilegeEscalation false).
//   - ProtectSystem=strict for a read-only root filesystem (volumes, bind-mounted, stay as
//     their mounts say).
//   - InaccessiblePaths=/ReadOnlyPaths= for the masked and read-only /proc and /sys paths
//     (missing ones ignored), unless privileged.
//   - ProtectProc=invisible without hostPID (systemd 252 has no private PID namespace: other
//     users' processes are hidden instead); PrivateIPC= without hostIPC (each container its
//     own IPC namespace).
//   - SystemCallFilter= for the RuntimeDefault (containerd's default profile) and Localhost
//     seccomp profiles, unless privileged (containerd applies none to privileged containers).
//   - AppArmorProfile= for a Localhost AppArmor profile.
//
// What cannot be mapped is an error (Validate refuses it first). The second result is a command
// prefix for ExecStart= (nil when none is needed).
func securityProperties(sc *runtimeapi.LinuxContainerSecurityContext, env secEnv) ([]units.Property, []string, error) {
	var p []units.Property
	uid, gid := DefaultUID, DefaultGID
	hasGID := true
	if u := sc.GetRunAsUser(); u != nil {
		uid, hasGID = u.GetValue(), false
	}
	if g := sc.GetRunAsGroup(); g != nil {
		gid, hasGID = g.GetValue(), true
	}
	groups := make([]string, 0, len(sc.GetSupplementalGroups()))
	// systemd takes User=/Group= only for ids the user database knows, and never 65535 (the
	// 16-bit -1, uid_is_valid in src/basic/user-util.h): setpriv sets the others.
	known := env.KnownUser(uid) && uid != 65535 && (!hasGID || (env.KnownGroup(gid) && gid != 65535))
	for _, g := range sc.GetSupplementalGroups() {
		groups = append(groups, strconv.FormatInt(g, 10))
		known = known && env.KnownGroup(g) && g != 65535
	}
	caps, err := capabilitySet(sc)
	if err != nil {
		return nil, nil, err
	}
	var wrap []string
	if known {
		p = append(p, units.Property{Name: "User", Value: strconv.FormatInt(uid, 10)})
		if hasGID {
			p = append(p, units.Property{Name: "Group", Value: strconv.FormatInt(gid, 10)})
		}
		if len(groups) > 0 {
			p = append(p, units.Property{Name: "SupplementaryGroups", Value: groups})
		}
		p = append(p, units.Property{Name: "CapabilityBoundingSet", Value: caps})
	} else {
		if !hasGID {
			gid = 0
		}
		wrap = setprivArgs(env.Setpriv, uid, gid, groups, caps)
	}
	if sc.GetNoNewPrivs() {
		p = append(p, units.Property{Name: "NoNewPrivileges", Value: true})
	}
	if sc.GetReadonlyRootfs() {
		p = append(p, units.Property{Name: "ProtectSystem", Value: "strict"})
	}
	privileged := sc.GetPrivileged()
	if !privileged {
		if m := ignoreMissing(sc.GetMaskedPaths()); len(m) > 0 {
			p = append(p, units.Property{Name: "InaccessiblePaths", Value: m})
		}
		if ro := ignoreMissing(sc.GetReadonlyPaths()); len(ro) > 0 {
			p = append(p, units.Property{Name: "ReadOnlyPaths", Value: ro})
		}
	}
	// The network namespace is always the host's: the systemd runtime has no pod network
	// (slicelet's worker runs every pod with host networking, worker.Options.HostNetwork).
	ns := sc.GetNamespaceOptions()
	if ns == nil {
		// A container's defaults (the CRI's zero value would be POD for every namespace).
		ns = &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER}
	}
	switch ns.GetPid() {
	case runtimeapi.NamespaceMode_NODE:
	case runtimeapi.NamespaceMode_CONTAINER:
		p = append(p, units.Property{Name: "ProtectProc", Value: "invisible"})
	default:
		return nil, nil, errors.New("the systemd runtime cannot share a process namespace between the containers of a pod")
	}
	if ns.GetIpc() != runtimeapi.NamespaceMode_NODE {
		p = append(p, units.Property{Name: "PrivateIPC", Value: true})
	}
	if !privileged {
		sp, err := seccompProperties(sc.GetSeccomp(), caps, env.Read)
		if err != nil {
			return nil, nil, err
		}
		p = append(p, sp...)
	}
	switch ap := sc.GetApparmor(); ap.GetProfileType() {
	case runtimeapi.SecurityProfile_Localhost:
		p = append(p, units.Property{Name: "AppArmorProfile", Value: units.Profile{Name: ap.GetLocalhostRef()}})
	case runtimeapi.SecurityProfile_RuntimeDefault:
		if ap != nil {
			return nil, nil, errors.New("the systemd runtime has no default AppArmor profile")
		}
	}
	return p, wrap, nil
}

// secEnv is what securityProperties needs from the host.
type secEnv struct {
	// Read reads a Localhost seccomp profile.
	Read func(path string) ([]byte, error)
	// KnownUser and KnownGroup report whether the host's user database has the id.
	KnownUser, KnownGroup func(id int64) bool
	// Setpriv is util-linux's setpriv.
	Setpriv string
}

// setprivArgs is the command a run is started through when its ids are not all in the host's
// user database: systemd 252 refuses an unknown numeric User=, Group= or SupplementaryGroups=
// ("Failed to determine user credentials"), so the command starts as root and setpriv sets the
// ids, the groups and the bounding set (systemd's CapabilityBoundingSet= would take setpriv's
// own CAP_SETUID away before it could use it) before it executes the command. A container
// without runAsGroup then runs with group 0, as containerd runs a user its image does not know.
func setprivArgs(setpriv string, uid, gid int64, groups []string, caps uint64) []string {
	args := []string{setpriv, "--reuid=" + strconv.FormatInt(uid, 10), "--regid=" + strconv.FormatInt(gid, 10)}
	if len(groups) > 0 {
		args = append(args, "--groups="+strings.Join(groups, ","))
	} else {
		args = append(args, "--clear-groups")
	}
	all := uint64(1)<<uint(len(capabilityNames)) - 1
	if caps != all {
		set := "-all"
		for _, c := range capabilityList(caps) {
			set += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
		}
		args = append(args, "--bounding-set="+set)
	}
	return append(args, "--")
}

// knownUser and knownGroup look an id up in the host's user database, as systemd does.
func knownUser(id int64) bool {
	_, err := user.LookupId(strconv.FormatInt(id, 10))
	return err == nil
}

func knownGroup(id int64) bool {
	_, err := user.LookupGroupId(strconv.FormatInt(id, 10))
	return err == nil
}

// ignoreMissing prefixes paths with "-": systemd then ignores the ones the host lacks.
func ignoreMissing(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		out = append(out, "-"+p)
	}
	return out
}

// seccompProperties are the directives of a seccomp profile: none for Unconfined; for
// RuntimeDefault containerd's default profile (github.com/moby/profiles/seccomp) and for
// Localhost the profile file, each resolved for the container's capabilities and this
// architecture, then translated by seccompFilter.
func seccompProperties(sp *runtimeapi.SecurityProfile, caps uint64, read func(string) ([]byte, error)) ([]units.Property, error) {
	spec := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{Bounding: capabilityList(caps)}}}
	var prof *specs.LinuxSeccomp
	var err error
	if sp == nil {
		// No profile asked for: unconfined (the worker always says which).
		return nil, nil
	}
	switch sp.GetProfileType() {
	case runtimeapi.SecurityProfile_RuntimeDefault:
		prof, err = seccomp.GetDefaultProfile(spec)
	case runtimeapi.SecurityProfile_Localhost:
		var body []byte
		body, err = read(sp.GetLocalhostRef())
		if err == nil {
			prof, err = seccomp.LoadProfile(string(body), spec)
		}
		if err != nil {
			err = fmt.Errorf("seccomp profile %s: %w", sp.GetLocalhostRef(), err)
		}
	default:
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return seccompFilter(prof)
}

// seccompFilter translates a resolved OCI seccomp profile into SystemCallFilter=, which filters
// by system call name only:
//
//   - A profile that denies by default (errno, kill, trap) becomes an allow list of the calls
//     it allows, with or without argument conditions (the conditions cannot be expressed:
//     the call is allowed). Denied calls fail with the profile's errno (EPERM by default),
//     SystemCallErrorNumber=; a killing profile leaves systemd's SIGSYS.
//   - When clone is allowed only under argument conditions (containerd's profile without
//     CAP_SYS_ADMIN: no namespace flags), RestrictNamespaces=yes takes their place; systemd then
//     also answers clone3 with ENOSYS, as containerd's profile does, so clone3 is allowed here.
//   - A profile that allows by default becomes a deny list of the calls it denies without
//     conditions; a conditional deny cannot be expressed and is an error.
func seccompFilter(prof *specs.LinuxSeccomp) ([]units.Property, error) {
	if prof == nil {
		return nil, nil
	}
	allowDefault := prof.DefaultAction == specs.ActAllow || prof.DefaultAction == specs.ActLog
	var names []string
	seen := map[string]bool{}
	// cond and uncond: the calls allowed under argument conditions, and unconditionally.
	cond, uncond := map[string]bool{}, map[string]bool{}
	for _, s := range prof.Syscalls {
		allows := s.Action == specs.ActAllow || s.Action == specs.ActLog
		if allowDefault == allows {
			continue
		}
		for _, n := range s.Names {
			if len(s.Args) > 0 && allowDefault {
				return nil, fmt.Errorf("seccomp profile: the rule for %s has argument conditions, which systemd cannot express", n)
			}
			if len(s.Args) > 0 {
				cond[n] = true
			} else {
				uncond[n] = true
			}
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	var p []units.Property
	if allowDefault {
		if len(names) == 0 {
			return nil, nil
		}
		return append(p, units.Property{Name: "SystemCallFilter", Value: units.SyscallFilter{Names: names}}), nil
	}
	restrictNS := cond["clone"] && !uncond["clone"]
	if restrictNS && !seen["clone3"] {
		names = append(names, "clone3")
	}
	if len(names) == 0 {
		return nil, errors.New("seccomp profile: allows no system call")
	}
	p = append(p, units.Property{Name: "SystemCallFilter", Value: units.SyscallFilter{Allow: true, Names: names}})
	if prof.DefaultAction == specs.ActErrno {
		errno := int32(1) // EPERM, libseccomp's default for SCMP_ACT_ERRNO.
		if prof.DefaultErrnoRet != nil {
			errno = int32(*prof.DefaultErrnoRet)
		}
		p = append(p, units.Property{Name: "SystemCallErrorNumber", Value: errno})
	}
	if restrictNS {
		// The namespace types still allowed: none.
		p = append(p, units.Property{Name: "RestrictNamespaces", Value: uint64(0)})
	}
	return p, nil
}
