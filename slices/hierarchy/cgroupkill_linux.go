package hierarchy

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"time"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
)

// Kill implements Cgroupfs without ever signalling a process by its PID, which the kernel may
// have given to an unrelated process since the cgroup was listed:
//
//   - on cgroup v2, writing "1" to cgroup.kill (Linux ≥ 5.14) SIGKILLs the whole subtree at
//     once, processes forked meanwhile included (Documentation/admin-guide/cgroup-v2.rst);
//   - on cgroup v1 (and hybrid, where a process can sit in a v1 hierarchy only), and on older
//     v2 kernels, each listed process gets a pidfd (pidfd_open(2), Linux ≥ 5.3), and only the
//     pidfds whose PID is still listed after they were opened are signalled with
//     pidfd_send_signal(2): a pidfd refers to one process for good, and a process that was
//     still listed after its pidfd was opened is the one the pidfd refers to.
//
// The wait polls the pidfds, which become readable when their process exits.
func (c *CgroupFS) Kill(cgroupPath string, wait time.Duration) (KillResult, error) {
	var res KillResult
	// The pidfds first: they count and wait for what cgroup.kill kills, too.
	procs, err := c.openListed(cgroupPath)
	defer procs.close()
	if err != nil {
		return res, err
	}
	res.Signalled = len(procs)
	viaCgroupKill := false
	if c.Unified && !c.noCgroupKill {
		err := cgroups.WriteFile(c.controllerDir(cgroupPath, ""), "cgroup.kill", "1")
		switch {
		case err == nil:
			viaCgroupKill = true
		case errors.Is(err, fs.ErrNotExist):
			// A kernel before 5.14, or the cgroup is gone: the pidfds do it.
		default:
			return res, fmt.Errorf("cgroup %s cgroup.kill: %w", cgroupPath, err)
		}
	}
	if !viaCgroupKill {
		var errs []error
		for _, p := range procs {
			if err := unix.PidfdSendSignal(p.fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("kill pid %d: %w", p.pid, err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return res, fmt.Errorf("cgroup %s: %w", cgroupPath, err)
		}
	}
	waitExited(procs, wait)
	// What is left: processes listed now whose pidfd is not readable (running). A process
	// that exited and waits to be reaped stays listed on cgroup v1; it is no leftover.
	after, err := c.openListed(cgroupPath)
	defer after.close()
	if err != nil {
		return res, err
	}
	waitExited(after, 0)
	for _, p := range after {
		if !p.exited {
			res.Left = append(res.Left, p.pid)
		}
	}
	return res, nil
}

// pidfd is one process of a cgroup, held by a pidfd.
type pidfd struct {
	pid    int
	fd     int
	exited bool
}

type pidfds []*pidfd

func (ps pidfds) close() {
	for _, p := range ps {
		unix.Close(p.fd)
	}
}

// openListed opens a pidfd for every process listed in the cgroup and keeps those still listed
// afterwards (see Kill). Processes that are already gone are skipped.
func (c *CgroupFS) openListed(cgroupPath string) (pidfds, error) {
	before, err := c.Pids(cgroupPath)
	if err != nil {
		return nil, err
	}
	var opened pidfds
	for _, pid := range before {
		fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
		switch {
		case err == nil:
			opened = append(opened, &pidfd{pid: pid, fd: fd})
		case errors.Is(err, unix.ESRCH):
		case errors.Is(err, unix.ENOSYS):
			opened.close()
			return nil, fmt.Errorf("cgroup %s: pidfd_open: %w (Linux 5.3 or later is required to kill leftover processes safely)", cgroupPath, err)
		default:
			opened.close()
			return nil, fmt.Errorf("cgroup %s: pidfd_open %d: %w", cgroupPath, pid, err)
		}
	}
	after, err := c.Pids(cgroupPath)
	if err != nil {
		opened.close()
		return nil, err
	}
	kept := opened[:0]
	for _, p := range opened {
		if slices.Contains(after, p.pid) {
			kept = append(kept, p)
			continue
		}
		unix.Close(p.fd)
	}
	return kept, nil
}

// waitExited polls the pidfds until every process exited or wait passed, marking the ones that
// did. A wait of 0 only looks.
func waitExited(ps pidfds, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for {
		var fds []unix.PollFd
		var idx []int
		for i, p := range ps {
			if !p.exited {
				fds = append(fds, unix.PollFd{Fd: int32(p.fd), Events: unix.POLLIN})
				idx = append(idx, i)
			}
		}
		if len(fds) == 0 {
			return
		}
		timeout := max(int(time.Until(deadline)/time.Millisecond), 0)
		n, err := unix.Poll(fds, timeout)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		for k, f := range fds {
			if f.Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) != 0 {
				ps[idx[k]].exited = true
			}
		}
		if n == 0 && err == nil {
			return // timed out
		}
	}
}
