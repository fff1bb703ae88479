package main

import (
	"context"
	"errors"
	"os"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/testharness/apitest"
)

// fakeDaemon is an in-memory Backend with events and graceful deletion.
type fakeDaemon = apitest.Daemon[api.ApplyResult]

// daemonHooks are the API's result type and errors, for the fake.
var daemonHooks = apitest.Hooks[api.ApplyResult]{
	Result:    func(action string, pod v1.Pod) api.ApplyResult { return api.ApplyResult{Action: action, Pod: pod} },
	NotFound:  api.ErrNotFound,
	Conflict:  api.ErrConflict,
	Invalid:   func(problems []string) error { return &api.InvalidError{Problems: problems} },
	Forbidden: func(name, why string) error { return api.PodForbidden(name, why) },
}

// newFakeDaemon is the fixture daemon (apitest.NewDaemonFixture); newBareDaemon has no pods.
func newFakeDaemon() *fakeDaemon { return apitest.NewDaemonFixture(daemonHooks) }
func newBareDaemon() *fakeDaemon { return apitest.NewDaemon(daemonHooks) }
func ptr[T any](v T) *T          { return &v }

// startDaemon serves f on a temporary socket and returns the socket path.
func startDaemon(t *testing.T, f api.Backend) string {
	t.Helper()
	sock := apitest.SocketPath(t)
	s, err := api.NewServer(f, api.Options{Socket: sock, Group: "test", LookupGroup: func(string) (uint32, error) { return uint32(os.Getgid()), nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Serve: %v", err)
		}
	})
	return sock
}
