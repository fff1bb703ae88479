package controlplane

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// NetnsDialer dials from the network namespace of process pid (e.g. a sandbox's init, whose
// 127.0.0.1 is where the control plane listens): each connection's socket is made on an OS
// thread that joined that namespace, and a socket stays in the namespace it was made in. The
// thread is never handed back to the Go scheduler (it exits with its goroutine), so no other
// goroutine runs in the foreign namespace. Root only.
func NetnsDialer(pid int) func(ctx context.Context, network, address string) (net.Conn, error) {
	path := fmt.Sprintf("/proc/%d/ns/net", pid)
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		type result struct {
			conn net.Conn
			err  error
		}
		ch := make(chan result, 1)
		go func() {
			runtime.LockOSThread() // not unlocked: the thread ends with this goroutine
			ns, err := os.Open(path)
			if err != nil {
				ch <- result{err: fmt.Errorf("network namespace %s: %w", path, err)}
				return
			}
			defer ns.Close()
			if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
				ch <- result{err: fmt.Errorf("network namespace %s: setns: %w", path, err)}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, address)
			ch <- result{conn: c, err: err}
		}()
		r := <-ch
		return r.conn, r.err
	}
}
