package systemdrt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/pods/worker"
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

// stopSignalName is the name of a CRI stop signal ("SIGINT"); "" for the runtime's default.
func stopSignalName(s runtimeapi.Signal) string {
	if s == runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT {
		return ""
	}
	return strings.TrimPrefix(s.String(), "SIGNAL_")
}

// signalOf is the signal of that name, SIGTERM for "" or an unknown name.
func signalOf(name string) syscall.Signal {
	if s, ok := signalNumber(name); ok {
		return s
	}
	return syscall.SIGTERM
}

// isExecutable is the default Options.Executable: a regular file with an execute bit.
// statPath is os.Stat's error.
func statPath(path string) error {
	_, err := os.Stat(path)
	return err
}

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

// resolveCommand returns the absolute path of a container's command: the command itself if it
// is absolute, else the first executable of that name in the PATH of the container's env
// (DefaultPath when unset), as execvp would find it.
func (r *Runtime) resolveCommand(command []string, env []*runtimeapi.KeyValue) (string, error) {
	if len(command) == 0 {
		return "", errors.New("the command must not be empty")
	}
	cmd := command[0]
	if msg := commandProblem(cmd); msg != "" {
		return "", errors.New(msg)
	}
	if strings.Contains(cmd, "/") {
		if err := r.opts.Executable(cmd); err != nil {
			return "", fmt.Errorf("not runnable on this host: %w", err)
		}
		return cmd, nil
	}
	path := DefaultPath
	for _, e := range env {
		if e.GetKey() == "PATH" {
			path = string(e.GetValue())
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		cand := filepath.Join(dir, cmd)
		if r.opts.Executable(cand) == nil {
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

// unitSpec is everything the unit of one container run is made of.
type unitSpec struct {
	// Config is the run's configuration, built by the pod worker.
	Config *runtimeapi.ContainerConfig
	// Slice is the pod slice.
	Slice string
	// Exec is the resolved absolute path of the command.
	Exec string
	// OOMScoreAdj is the value to set (already limited to what the host allows).
	OOMScoreAdj int
	Mode        units.Mode
	// Security are the run's securityProperties, Wrap their command prefix.
	Security []units.Property
	Wrap     []string
}

// description is the unit's Description=.
func description(namespace, pod, container string, n int) string {
	return fmt.Sprintf("container %s/%s/%s (#%d)", namespace, pod, container, n)
}

// unitProperties returns the properties of a container run's transient service, in a fixed
// order.
func unitProperties(s unitSpec) []units.Property {
	cfg := s.Config
	labels := cfg.GetLabels()
	name := cfg.GetMetadata().GetName()
	n := int(cfg.GetMetadata().GetAttempt()) + 1
	argv := make([]string, 0, len(cfg.GetCommand())+len(cfg.GetArgs()))
	argv = append(append(argv, cfg.GetCommand()...), cfg.GetArgs()...)
	p := []units.Property{
		{Name: "Description", Value: description(labels[worker.LabelPodNamespace], labels[worker.LabelPodName], name, n)},
		{Name: "Slice", Value: s.Slice},
		// Type=exec: the start job ends when execve succeeded, so a missing binary or a bad
		// User= fails the start instead of a unit that was "running" for a moment.
		{Name: "Type", Value: "exec"},
		{Name: "ExecStart", Value: wrapExec(s.Wrap, s.Exec, argv)},
		// Keep a successfully exited unit (active/exited) until its exit status was read;
		// without it systemd garbage-collects the unit, and its status with it, the moment it
		// ends.
		{Name: "RemainAfterExit", Value: true},
		// Restarts are the pod worker's: each is a new unit, with the kubelet's back-off.
		{Name: "Restart", Value: "no"},
	}
	p = append(p, identityProperties(cfg)...)
	p = append(p, s.Security...)
	p = append(p,
		units.Property{Name: "StandardOutput", Value: "journal"},
		units.Property{Name: "StandardError", Value: "journal"},
		units.Property{Name: "SyslogIdentifier", Value: name},
		units.Property{Name: "LogExtraFields", Value: LogFields(labels[worker.LabelPodUID], labels[worker.LabelPodName], labels[worker.LabelPodNamespace], name)},
		units.Property{Name: "KillSignal", Value: int32(signalOf(stopSignalName(cfg.GetStopSignal())))},
		units.Property{Name: "TimeoutStopUSec", Value: grace(cfg)},
		units.Property{Name: "OOMScoreAdjust", Value: int32(s.OOMScoreAdj)},
		units.Property{Name: "MemoryAccounting", Value: true},
		units.Property{Name: "CPUAccounting", Value: true},
		units.Property{Name: "TasksAccounting", Value: true},
	)
	return append(p, slices.SliceProperties(resourceConfig(cfg.GetLinux().GetResources()), s.Mode)...)
}

// identityProperties are the environment, working directory and mounts of a run (and of a
// command run in it, ExecSync); securityProperties adds the user, groups and privileges.
func identityProperties(cfg *runtimeapi.ContainerConfig) []units.Property {
	var p []units.Property
	env := make([]string, 0, len(cfg.GetEnvs()))
	for _, e := range cfg.GetEnvs() {
		env = append(env, e.GetKey()+"="+string(e.GetValue()))
	}
	if len(env) > 0 {
		p = append(p, units.Property{Name: "Environment", Value: env})
	}
	if cfg.GetWorkingDir() != "" {
		p = append(p, units.Property{Name: "WorkingDirectory", Value: cfg.GetWorkingDir()})
	}
	var rw, ro []units.BindPath
	for _, m := range cfg.GetMounts() {
		b := units.BindPath{Source: m.GetHostPath(), Destination: m.GetContainerPath(), Recursive: true}
		if m.GetReadonly() {
			ro = append(ro, b)
		} else {
			rw = append(rw, b)
		}
	}
	// A device plugin's device nodes and raw block volumes (a claim's device, by the pod's
	// link to it): the service sees the host's /dev (no DevicePolicy), so a node at the same
	// path is there already; bound, it is there at the path the plugin or volumeDevices gave
	// too.
	for _, d := range cfg.GetDevices() {
		if d.GetHostPath() != d.GetContainerPath() {
			rw = append(rw, units.BindPath{Source: d.GetHostPath(), Destination: d.GetContainerPath()})
		}
	}
	if len(rw) > 0 {
		p = append(p, units.Property{Name: "BindPaths", Value: rw})
	}
	if len(ro) > 0 {
		p = append(p, units.Property{Name: "BindReadOnlyPaths", Value: ro})
	}
	return p
}

// wrapExec is ExecStart= of exe with argv, started through the command prefix wrap if any
// (which then runs exe by its path).
func wrapExec(wrap []string, exe string, argv []string) units.Exec {
	if len(wrap) == 0 {
		return units.Exec{Path: exe, Args: argv}
	}
	args := append(append(append([]string(nil), wrap...), exe), argv[1:]...)
	return units.Exec{Path: wrap[0], Args: args}
}

// grace is the pod's termination grace period from the run's annotations, the default when it
// has none.
func grace(cfg *runtimeapi.ContainerConfig) time.Duration {
	if g, ok := worker.GracePeriod(cfg.GetAnnotations()); ok {
		return g
	}
	return lifecycle.DefaultGracePeriod
}

// resourceConfig is the cgroup configuration of CRI resources (0 is unset).
func resourceConfig(res *runtimeapi.LinuxContainerResources) slices.ResourceConfig {
	var rc slices.ResourceConfig
	if v := res.GetCpuShares(); v > 0 {
		shares := uint64(v)
		rc.CPUShares = &shares
	}
	if v := res.GetCpuQuota(); v != 0 {
		rc.CPUQuota = &v
	}
	// The kubelet sends the period even without a quota; alone it changes nothing.
	if v := res.GetCpuPeriod(); v > 0 && res.GetCpuQuota() != 0 {
		period := uint64(v)
		rc.CPUPeriod = &period
	}
	if v := res.GetMemoryLimitInBytes(); v > 0 {
		rc.Memory = &v
	}
	return rc
}

// LogFields are the journal fields on every line of a container's output, so that
// `journalctl POD_UID=<uid>` (or POD_NAME=, POD_NAMESPACE=, CONTAINER_NAME=) finds it.
func LogFields(uid, pod, namespace, container string) [][]byte {
	return [][]byte{
		[]byte("POD_UID=" + uid),
		[]byte("POD_NAME=" + pod),
		[]byte("POD_NAMESPACE=" + namespace),
		[]byte("CONTAINER_NAME=" + container),
	}
}
