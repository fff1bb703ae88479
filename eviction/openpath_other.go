//go:build !linux

package eviction

import "syscall"

// openPath opens the NUL-terminated path p read-only.
func openPath(p []byte) (int, error) {
	for {
		fd, err := syscall.Open(string(p[:len(p)-1]), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}
