//go:build !linux

package api

import (
	"errors"
	"net"
)

// peerOf fails closed where SO_PEERCRED does not exist: nobody gets access.
func peerOf(net.Conn) (Peer, error) {
	return Peer{}, errors.New("peer credentials: not supported on this system")
}
