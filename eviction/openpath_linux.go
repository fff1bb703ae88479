package eviction

import (
	"syscall"
	"unsafe"
)

// atFDCWD is AT_FDCWD, a variable so that its negative value converts to uintptr.
var atFDCWD = -0x64

// openPath opens the NUL-terminated path p read-only with openat(2), without converting it
// to a new C string as syscall.Open does.
func openPath(p []byte) (int, error) {
	for {
		fd, _, errno := syscall.Syscall6(syscall.SYS_OPENAT, uintptr(atFDCWD), uintptr(unsafe.Pointer(&p[0])), uintptr(syscall.O_RDONLY|syscall.O_CLOEXEC), 0, 0, 0)
		switch errno {
		case 0:
			return int(fd), nil
		case syscall.EINTR:
			continue
		}
		return -1, errno
	}
}
