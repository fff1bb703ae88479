// Package unixsock holds what slicelet's unix-socket servers (the API, metrics) share.
package unixsock

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"time"
)

// RemoveStale removes the socket at path if nobody serves on it, so a server can listen there
// after an unclean exit. A missing path is fine; a path that is not a socket, or a socket
// another process still answers on, is an error and is left alone. what names the socket in
// errors ("api socket", "metrics socket").
func RemoveStale(what, path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if st.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s %s: exists and is not a socket (%s); refusing to remove it", what, path, st.Mode().Type())
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("%s %s: another process is serving on it (is another slicelet running?)", what, path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: stale socket: %w", what, err)
	}
	return nil
}
