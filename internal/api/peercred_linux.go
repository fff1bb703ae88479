package api

import (
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// peerOf reads the peer credentials of a unix socket connection (SO_PEERCRED).
func peerOf(c net.Conn) (Peer, error) {
	uc, ok := c.(syscall.Conn) // *net.UnixConn, or a limited connection of one
	if !ok {
		return Peer{}, fmt.Errorf("peer credentials: %T is not a unix socket connection", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Peer{}, fmt.Errorf("peer credentials: %w", err)
	}
	var (
		cred    *unix.Ucred
		credErr error
	)
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Peer{}, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return Peer{}, fmt.Errorf("peer credentials: SO_PEERCRED: %w", credErr)
	}
	return Peer{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid}, nil
}
