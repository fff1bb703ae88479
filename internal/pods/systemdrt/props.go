package systemdrt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// DefaultPath is the PATH that bare command names are looked up in when the container's env
// sets none (systemd's default PATH for services).
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// signals are the stop signals a container may ask for (lifecycle.stopSignal), by the names
// the API uses.
var signals = map[string]syscall.Signal{
	"SIGABRT": syscall.SIGABRT, "SIGALRM": syscall.SIGALRM, "SIGBUS": syscall.SIGBUS,
	"SIGCHLD": syscall.SIGCHLD, "SIGCONT": syscall.SIGCONT, "SIGFPE": syscall.SIGFPE,
	"SIGHUP": syscall.SIGHUP, "SIGILL": syscall.SIGILL, "SIGINT": syscall.SIGINT,
	"SIGIO": syscall.SIGIO, "SIGKILL": syscall.SIGKILL, "SIGPIPE": syscall.SIGPIPE,
	"SIGPROF": syscall.SIGPROF, "SIGPWR": sigPWR, "SIGQUIT": syscall.SIGQUIT,
	"SIGSEGV": syscall.SIGSEGV, "SIGSTKFLT": sigSTKFLT, "SIGSTOP": syscall.SIGSTOP,
	"SIGSYS": syscall.SIGSYS, "SIGTERM": syscall.SIGTERM, "SIGTRAP": syscall.SIGTRAP,
	"SIGTSTP": syscall.SIGTSTP, "SIGTTIN": syscall.SIGTTIN, "SIGTTOU": syscall.SIGTTOU,
	"SIGURG": syscall.SIGURG, "SIGUSR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2,
	"SIGVTALRM": syscall.SIGVTALRM, "SIGWINCH": syscall.SIGWINCH, "SIGXCPU": syscall.SIGXCPU,
	"SIGXFSZ": syscall.SIGXFSZ,
}

// SIGPWR and SIGSTKFLT are Linux-only; their numbers on x86, arm, riscv, ppc and s390, spelled
// out so that the package builds (and vets) on other systems.
const (
	sigSTKFLT syscall.Signal = 16
	sigPWR    syscall.Signal = 30
)

func signalNumber(name string) (syscall.Signal, bool) {
	s, ok := signals[name]
	return s, ok
}

func signalNames() []string {
	out := make([]string, 0, len(signals))
	for n := range signals {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// stopSignal is the container's lifecycle.stopSignal, SIGTERM by default.
func stopSignal(c *v1.Container) syscall.Signal {
	if c.Lifecycle != nil && c.Lifecycle.StopSignal != nil {
		if s, ok := signalNumber(string(*c.Lifecycle.StopSignal)); ok {
			return s
		}
	}
	return syscall.SIGTERM
}

// nonRoot is the container's runAsNonRoot, else the pod's.
func nonRoot(pod *v1.Pod, c *v1.Container) bool {
	if c.SecurityContext != nil && c.SecurityContext.RunAsNonRoot != nil {
		return *c.SecurityContext.RunAsNonRoot
	}
	return pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.RunAsNonRoot != nil && *pod.Spec.SecurityContext.RunAsNonRoot
}

// isExecutable is the default Options.Executable: a regular file with an execute bit.
func isExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", path)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s: not executable", path)
	}
	return nil
}

// resolveCommand returns the absolute path of the container's command: the command itself if it
// is absolute, else the first executable of that name in the PATH of the container's env
// (DefaultPath when unset), as execvp would find it.
func (r *Runtime) resolveCommand(c *v1.Container) (string, error) {
	if len(c.Command) == 0 {
		return "", errors.New("the command must not be empty")
	}
	cmd := c.Command[0]
	if msg := commandProblem(cmd); msg != "" {
		return "", errors.New(msg)
	}
	if strings.Contains(cmd, "/") {
		if err := r.exec(cmd); err != nil {
			return "", fmt.Errorf("not runnable on this host: %w", err)
		}
		return cmd, nil
	}
	path := DefaultPath
	for _, e := range c.Env {
		if e.Name == "PATH" && e.ValueFrom == nil {
			path = e.Value
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		cand := filepath.Join(dir, cmd)
		if r.exec(cand) == nil {
			return cand, nil
		}
	}
	return "", fmt.Errorf("no executable of that name in PATH %q on this host", path)
}

// commandProblem says what is wrong with the shape of a command's first word, or "".
func commandProblem(cmd string) string {
	switch {
	case cmd == "":
		return "the command must not be empty"
	case strings.Contains(cmd, "/") && !filepath.IsAbs(cmd):
		return "must be an absolute path or a bare name looked up in PATH; relative paths have no image working directory to start from"
	}
	return ""
}

// unitSpec is everything the unit of one container instance is made of.
type unitSpec struct {
	Pod       *v1.Pod
	Container *v1.Container
	N         int
	Slice     string
	// Exec is the resolved absolute path of the command.
	Exec string
	// Volumes maps volume names to their host paths.
	Volumes map[string]string
	// OOMScoreAdj is the value to set (already limited to what the host allows).
	OOMScoreAdj int
	Mode        units.Mode
	Resources   slices.Options
}

// description is the unit's Description=.
func description(pod *v1.Pod, container string, n int) string {
	return fmt.Sprintf("container %s/%s/%s (#%d)", pod.Namespace, pod.Name, container, n)
}

// unitProperties returns the properties of a container instance's transient service, in a
// fixed order.
func unitProperties(s unitSpec) []units.Property {
	pod, c := s.Pod, s.Container
	vars, command, args := lifecycle.ExpandContainer(c)
	env := make([]string, 0, len(vars))
	for _, e := range vars {
		env = append(env, e.Name+"="+e.Value)
	}
	argv := make([]string, 0, len(command)+len(args))
	argv = append(append(argv, command...), args...)
	p := []units.Property{
		{Name: "Description", Value: description(pod, c.Name, s.N)},
		{Name: "Slice", Value: s.Slice},
		// Type=exec: the start job ends when execve succeeded, so a missing binary or a bad
		// User= fails the start instead of a unit that was "running" for a moment.
		{Name: "Type", Value: "exec"},
		{Name: "ExecStart", Value: units.Exec{Path: s.Exec, Args: argv}},
		// Keep a successfully exited unit (active/exited) until SyncPod has read its exit
		// status; without it systemd garbage-collects the unit, and its status with it, the
		// moment it ends.
		{Name: "RemainAfterExit", Value: true},
		// Restarts are the runtime's: each is a new unit, with the kubelet's back-off.
		{Name: "Restart", Value: "no"},
	}
	if len(env) > 0 {
		p = append(p, units.Property{Name: "Environment", Value: env})
	}
	if c.WorkingDir != "" {
		p = append(p, units.Property{Name: "WorkingDirectory", Value: c.WorkingDir})
	}
	if u := lifecycle.RunAsUser(pod, c); u != nil {
		p = append(p, units.Property{Name: "User", Value: strconv.FormatInt(*u, 10)})
	}
	if g := lifecycle.RunAsGroup(pod, c); g != nil {
		p = append(p, units.Property{Name: "Group", Value: strconv.FormatInt(*g, 10)})
	}
	if sc := pod.Spec.SecurityContext; sc != nil && (len(sc.SupplementalGroups) > 0 || sc.FSGroup != nil) {
		var groups []string
		if sc.FSGroup != nil {
			groups = append(groups, strconv.FormatInt(*sc.FSGroup, 10))
		}
		for _, g := range sc.SupplementalGroups {
			groups = append(groups, strconv.FormatInt(g, 10))
		}
		p = append(p, units.Property{Name: "SupplementaryGroups", Value: groups})
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
			p = append(p, units.Property{Name: "NoNewPrivileges", Value: true})
		}
		if sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
			p = append(p, units.Property{Name: "ProtectSystem", Value: "strict"})
		}
	}
	var rw, ro []units.BindPath
	for _, m := range c.VolumeMounts {
		src, ok := s.Volumes[m.Name]
		if !ok {
			continue
		}
		b := units.BindPath{Source: src, Destination: m.MountPath, Recursive: true}
		if m.ReadOnly {
			ro = append(ro, b)
		} else {
			rw = append(rw, b)
		}
	}
	if len(rw) > 0 {
		p = append(p, units.Property{Name: "BindPaths", Value: rw})
	}
	if len(ro) > 0 {
		p = append(p, units.Property{Name: "BindReadOnlyPaths", Value: ro})
	}
	p = append(p,
		units.Property{Name: "StandardOutput", Value: "journal"},
		units.Property{Name: "StandardError", Value: "journal"},
		units.Property{Name: "SyslogIdentifier", Value: c.Name},
		units.Property{Name: "LogExtraFields", Value: LogFields(pod, c.Name)},
		units.Property{Name: "KillSignal", Value: int32(stopSignal(c))},
		units.Property{Name: "TimeoutStopUSec", Value: lifecycle.GracePeriod(pod)},
		units.Property{Name: "OOMScoreAdjust", Value: int32(s.OOMScoreAdj)},
		units.Property{Name: "MemoryAccounting", Value: true},
		units.Property{Name: "CPUAccounting", Value: true},
		units.Property{Name: "TasksAccounting", Value: true},
	)
	p = append(p, slices.SliceProperties(lifecycle.ContainerResources(c, s.Resources), s.Mode)...)
	return p
}

// LogFields are the journal fields on every line of a container's output, so that
// `journalctl POD_UID=<uid>` (or POD_NAME=, POD_NAMESPACE=, CONTAINER_NAME=) finds it.
func LogFields(pod *v1.Pod, container string) [][]byte {
	return [][]byte{
		[]byte("POD_UID=" + string(pod.UID)),
		[]byte("POD_NAME=" + pod.Name),
		[]byte("POD_NAMESPACE=" + pod.Namespace),
		[]byte("CONTAINER_NAME=" + container),
	}
}
