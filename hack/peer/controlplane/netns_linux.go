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
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		return inNetns(pid, func() (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, address)
		})
	}
}

// NetnsListen listens on address in the network namespace of process pid, as [NetnsDialer]
// dials: the listening socket is made there and stays there, while the program serving it
// runs here (a server for the nodes of a cluster whose control plane lives in that namespace).
// Root only.
func NetnsListen(pid int, network, address string) (net.Listener, error) {
	return inNetns(pid, func() (net.Listener, error) { return net.Listen(network, address) })
}

// inNetns runs fn on an OS thread that joined the network namespace of process pid and that
// ends with it, and returns what fn returned.
func inNetns[T any](pid int, fn func() (T, error)) (T, error) {
	path := fmt.Sprintf("/proc/%d/ns/net", pid)
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread ends with this goroutine
		var r result
		ns, err := os.Open(path)
		if err != nil {
			r.err = fmt.Errorf("network namespace %s: %w", path, err)
			ch <- r
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			r.err = fmt.Errorf("network namespace %s: setns: %w", path, err)
			ch <- r
			return
		}
		r.v, r.err = fn()
		ch <- r
	}()
	r := <-ch
	return r.v, r.err
}
