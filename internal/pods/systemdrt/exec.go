package systemdrt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/units"
)

// maxExecOutput bounds what ExecSync returns of each stream.
const maxExecOutput = 1 << 20

// ExecSync runs cmd next to a running container run, the way the run itself runs: a transient
// service in the pod slice with the run's environment, user, groups, working directory,
// privileges and mounts (slicelet-exec-<random>.service, which is not a container unit). Its
// stdout and stderr go to files that are read back; after timeout it is killed and the call
// fails (wrapping context.DeadlineExceeded). The exit code is the command's (128+n when it died of signal n).
func (r *Runtime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (worker.ExecResult, error) {
	unit, ref, err := parseContainerID(id)
	if err != nil {
		return worker.ExecResult{}, err
	}
	var (
		rn    *run
		slice string
	)
	err = r.locked(ref.UID, func(e *podEntry) error {
		if e.rec != nil {
			rn = e.rec.run(unit)
		}
		if rn == nil {
			return fmt.Errorf("container %s: %w", unit, worker.ErrNotFound)
		}
		if !rn.Started || rn.Done {
			return fmt.Errorf("container %s (%s) is not running", rn.Name, unit)
		}
		if sb := e.rec.sandbox(rn.SandboxID); sb != nil {
			slice = sb.Slice
		}
		return nil
	})
	if err != nil {
		return worker.ExecResult{}, err
	}
	cfg, err := rn.config()
	if err != nil {
		return worker.ExecResult{}, err
	}
	if cfg == nil {
		return worker.ExecResult{}, fmt.Errorf("container %s (%s): started by an older slicelet, its configuration is not recorded", rn.Name, unit)
	}
	if len(cmd) == 0 {
		return worker.ExecResult{}, errors.New("exec: empty command")
	}
	exe, err := r.resolveCommand(cmd, cfg.GetEnvs())
	if err != nil {
		return worker.ExecResult{}, fmt.Errorf("exec in container %s: %w", rn.Name, err)
	}
	dir, err := os.MkdirTemp(r.opts.StateDir, "exec-")
	if err != nil {
		return worker.ExecResult{}, fmt.Errorf("exec in container %s: %w", rn.Name, err)
	}
	defer os.RemoveAll(dir)
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	name, err := units.ServiceName(unitPrefix, "exec", hex.EncodeToString(b))
	if err != nil {
		return worker.ExecResult{}, err
	}
	stdout, stderr := filepath.Join(dir, "stdout"), filepath.Join(dir, "stderr")
	sec, wrap, err := securityProperties(cfg.GetLinux().GetSecurityContext(), r.secEnv())
	if err != nil {
		return worker.ExecResult{}, fmt.Errorf("exec in container %s: %w", rn.Name, err)
	}
	props := []units.Property{
		{Name: "Description", Value: fmt.Sprintf("exec in %s", unit)},
		{Name: "Slice", Value: slice},
		{Name: "Type", Value: "exec"},
		{Name: "ExecStart", Value: wrapExec(wrap, exe, cmd)},
		{Name: "RemainAfterExit", Value: true},
	}
	props = append(props, identityProperties(cfg)...)
	props = append(props, sec...)
	props = append(props,
		units.Property{Name: "StandardOutputFile", Value: stdout},
		units.Property{Name: "StandardErrorFile", Value: stderr},
	)
	defer func() {
		// Whatever happened, the unit goes: stopped (with what it left behind) and reset.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.KillWait)
		defer cancel()
		_ = r.sd.Kill(cctx, name, syscall.SIGKILL, units.KillAll)
		_ = r.resetUnit(cctx, name)
	}()
	if err := r.sd.StartService(ctx, name, props); err != nil {
		// A command that ends before the start job does (Type=exec) fails the job; its unit
		// stays (RemainAfterExit) with the exit status.
		list, lerr := r.sd.List(ctx, name)
		if !(errors.Is(err, units.ErrJobFailed) || errors.Is(err, units.ErrTimeout)) || lerr != nil || !loaded(list, name) {
			return worker.ExecResult{}, fmt.Errorf("exec in container %s: %w", rn.Name, err)
		}
	}
	ended, err := r.waitEnded(ctx, name, timeout)
	if err != nil {
		return worker.ExecResult{}, fmt.Errorf("exec in container %s: %w", rn.Name, err)
	}
	if !ended {
		return worker.ExecResult{}, fmt.Errorf("exec in container %s: command timed out after %s: %w", rn.Name, timeout, context.DeadlineExceeded)
	}
	info, err := r.sd.Properties(ctx, name)
	if err != nil {
		return worker.ExecResult{}, fmt.Errorf("exec in container %s: %w", rn.Name, err)
	}
	res := worker.ExecResult{}
	switch info.ExecMainCode {
	case cldExited:
		res.ExitCode = info.ExecMainStatus
	case cldKilled, cldDumped:
		res.ExitCode = 128 + info.ExecMainStatus
	default:
		return res, fmt.Errorf("exec in container %s: systemd result %q before the command ran", rn.Name, info.Result)
	}
	if res.Stdout, err = readAtMost(stdout, maxExecOutput); err != nil {
		return res, err
	}
	if res.Stderr, err = readAtMost(stderr, maxExecOutput); err != nil {
		return res, err
	}
	return res, nil
}

// readAtMost reads the first n bytes of a file; a missing file is empty.
func readAtMost(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}
