package source

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// openForWriting reports whether the file is open for writing through another open file
// description. The kernel grants a read lease (F_SETLEASE, F_RDLCK) only when no one has the
// file open for writing (fs/locks.c check_conflicting_open) and refuses it with EAGAIN
// otherwise. Any other refusal (a file system without leases, no CAP_LEASE for another owner's
// file) says nothing about writers: false. The lease, when granted, lives until f is closed.
func openForWriting(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) {
		_, lerr = unix.FcntlInt(fd, unix.F_SETLEASE, unix.F_RDLCK)
	}); err != nil {
		return false
	}
	return errors.Is(lerr, unix.EAGAIN)
}
