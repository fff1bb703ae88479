package eviction

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// armed is one target a kernel-signalled notifier armed: a file descriptor the kernel makes
// ready when the target's condition is met.
type armed interface {
	// pollFd is the descriptor and the events poll(2) waits for on it.
	pollFd() unix.PollFd
	// consume takes the signalled event, so a level-triggered descriptor does not stay ready.
	consume()
	// close disarms the target.
	close()
}

// armLoop is what the kernel-signalled notifiers (PSI triggers, cgroup v1 memory thresholds)
// share: the Rearm kick made live first, every target armed (a failure logged once per
// reason), unavailable when none is armed at the start, then a poll(2) on the armed
// descriptors, the kick and ctx's end that wakes the eviction loop on a target's event and
// arms the targets again when kicked, and every interval while there is something to re-arm.
type armLoop[T armed] struct {
	// what names the notifier in errors ("psi", "memory thresholds").
	what string
	// none is the error when no target can be armed at the start (wrapping ErrUnavailable).
	none error
	// targets is how many targets there are.
	targets int
	kick    *rearmKick
	// interval is the re-arm interval; 0 means DefaultThresholdRearm.
	interval time.Duration
	// rearmArmed: a re-arm arms the armed targets again too (their threshold moves), so the
	// interval always runs; else only unarmed targets are tried, and the interval runs only
	// while one is.
	rearmArmed bool
	// arm arms target i; cur is what is armed there (hasCur), kept when arm says keep. The
	// loop closes cur when arm returns another.
	arm func(i int, cur T, hasCur bool) (next T, keep bool, err error)
	// notArmed logs target i's failure to arm, once per reason.
	notArmed func(i int, err error)
	// lost logs target i's descriptor reporting an error (its cgroup removed): it is
	// closed and armed again later.
	lost func(i int, t T)
}

// run runs the loop until ctx ends.
func (l armLoop[T]) run(ctx context.Context, wake func()) error {
	interval := l.interval
	if interval <= 0 {
		interval = DefaultThresholdRearm
	}
	// The kick is live before the first arm, so a Rearm from now on is never lost.
	kick, err := l.kick.start()
	if err != nil {
		return fmt.Errorf("%s: %w", l.what, err)
	}
	defer l.kick.stop()
	targets := make([]T, l.targets)
	has := make([]bool, l.targets)
	failed := map[int]string{}
	defer func() {
		for i, t := range targets {
			if has[i] {
				t.close()
			}
		}
	}()
	arm := func() {
		for i := range targets {
			if has[i] && !l.rearmArmed {
				continue
			}
			t, keep, err := l.arm(i, targets[i], has[i])
			if err == nil && keep {
				continue
			}
			if err != nil {
				if failed[i] != err.Error() {
					failed[i] = err.Error()
					l.notArmed(i, err)
				}
				continue
			}
			delete(failed, i)
			if has[i] {
				targets[i].close()
			}
			targets[i], has[i] = t, true
		}
	}
	arm()
	if len(failed) == l.targets {
		return l.none
	}
	stop, err := stopFD(ctx)
	if err != nil {
		return err
	}
	defer unix.Close(stop)
	next := time.Now().Add(interval)
	for {
		fds := []unix.PollFd{{Fd: int32(stop), Events: unix.POLLIN}, {Fd: int32(kick), Events: unix.POLLIN}}
		idx := []int{-1, -1}
		for i, t := range targets {
			if has[i] {
				fds = append(fds, t.pollFd())
				idx = append(idx, i)
			}
		}
		timed := l.rearmArmed || len(failed) > 0
		timeout := -1
		if timed {
			timeout = int(max(time.Until(next), 0)/time.Millisecond) + 1
		}
		n, err := unix.Poll(fds, timeout)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("%s: poll: %w", l.what, err)
		}
		if ctx.Err() != nil {
			return nil
		}
		event := false
		kicked := fds[1].Revents&unix.POLLIN != 0
		if kicked {
			drainEventfd(kick)
		}
		for k := 2; n > 0 && k < len(fds); k++ {
			i, re := idx[k], fds[k].Revents
			switch {
			case re&(unix.POLLERR|unix.POLLNVAL) != 0:
				l.lost(i, targets[i])
				targets[i].close()
				var zero T
				targets[i], has[i] = zero, false
				failed[i] = "lost"
			case re&fds[k].Events != 0:
				targets[i].consume()
				event = true
			}
		}
		if event {
			wake()
		}
		if kicked || timed && !time.Now().Before(next) {
			next = time.Now().Add(interval)
			arm()
		}
	}
}
