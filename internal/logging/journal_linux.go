package logging

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// journalSender owns the datagram socket to journald.
type journalSender struct {
	path string
	once sync.Once
	fd   int
	err  error
}

// send writes one record. A record too large for a datagram is written to a
// sealed memfd whose descriptor is sent instead, as the native protocol
// requires (journald only accepts sealed memfds this way).
func (s *journalSender) send(msg []byte) error {
	s.once.Do(func() {
		s.fd, s.err = unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	})
	if s.err != nil {
		return fmt.Errorf("journal socket: %w", s.err)
	}
	addr := &unix.SockaddrUnix{Name: s.path}
	err := unix.Sendmsg(s.fd, msg, nil, addr, 0)
	if errors.Is(err, unix.EMSGSIZE) || errors.Is(err, unix.ENOBUFS) {
		err = s.sendMemfd(msg, addr)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ECONNREFUSED), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.EACCES):
		return fmt.Errorf("%w: %s: %w", errJournalUnavailable, s.path, err)
	}
	return fmt.Errorf("journal send to %s: %w", s.path, err)
}

func (s *journalSender) sendMemfd(msg []byte, addr *unix.SockaddrUnix) error {
	fd, err := unix.MemfdCreate("journal-message", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return fmt.Errorf("journal memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "journal-message")
	defer f.Close()
	if _, err := f.Write(msg); err != nil {
		return fmt.Errorf("journal memfd write: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL); err != nil {
		return fmt.Errorf("journal memfd seal: %w", err)
	}
	return unix.Sendmsg(s.fd, nil, unix.UnixRights(fd), addr, 0)
}
