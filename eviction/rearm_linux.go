package eviction

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// start creates the eventfd Rearm writes to while Run polls it.
func (k *rearmKick) start() (int, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return -1, fmt.Errorf("eventfd: %w", err)
	}
	k.mu.Lock()
	k.fd, k.running = fd, true
	k.mu.Unlock()
	return fd, nil
}

// stop closes the eventfd; later kicks do nothing.
func (k *rearmKick) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.running {
		unix.Close(k.fd)
		k.running = false
	}
}

// kick makes the eventfd readable, waking the poll. It never blocks: the eventfd is
// non-blocking and its counter only saturates after 2^64-2 kicks.
func (k *rearmKick) kick() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.running {
		var one [8]byte
		one[0] = 1
		_, _ = unix.Write(k.fd, one[:])
	}
}

// drain resets the eventfd's counter, so kicks made before it coalesce into one re-arm.
func drainEventfd(fd int) {
	var buf [8]byte
	_, _ = unix.Read(fd, buf[:])
}

// Rearm implements Rearmer: files not armed yet (a kubepods cgroup created since, or one
// re-created by systemd) are tried at once instead of at the next RearmInterval.
func (p *PSINotifier) Rearm() { p.kick.kick() }

// Rearm implements Rearmer: the usage thresholds are recomputed from the cgroups' current
// capacity and inactive_file and re-armed at once instead of at the next RearmInterval.
func (n *MemcgThresholdNotifier) Rearm() { n.kick.kick() }
