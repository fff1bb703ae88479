package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/testharness/apitest"
)

// fakeBackend is an in-memory Backend.
type fakeBackend = apitest.Backend[ApplyResult]

// fakeHooks are the API's result type and errors, for the fake.
var fakeHooks = apitest.Hooks[ApplyResult]{
	Result:    func(action string, pod v1.Pod) ApplyResult { return ApplyResult{Action: action, Pod: pod} },
	NotFound:  ErrNotFound,
	Conflict:  ErrConflict,
	Invalid:   func(problems []string) error { return &InvalidError{Problems: problems} },
	Forbidden: func(name, why string) error { return PodForbidden(name, why) },
	AppliedBy: func(ctx context.Context) (string, bool) {
		if peer, ok := PeerFrom(ctx); ok {
			return peer.String(), true
		}
		return "", false
	},
	AppliedByAnnotation: AnnotationAppliedBy,
}

func newFakeBackend() *fakeBackend { return apitest.NewServerFixture(fakeHooks) }

var errBoom = errors.New("backend exploded")

// testSocketPath returns a socket path in a fresh directory, short enough for sun_path.
func testSocketPath(t testing.TB) string {
	t.Helper()
	return apitest.SocketPath(t)
}

// testGroup is the configured group in tests; the fake lookup maps it to testGID.
const (
	testGroup = "slicelet-test"
	testGID   = 4242
)

// startServer serves b on a fresh socket whose group is gid (the test's own gid when 0).
func startServer(t *testing.T, b Backend, gid uint32) (*Server, *Client) {
	t.Helper()
	return startServerWith(t, b, gid, Options{})
}

// startServerLogging is startServer with the server's logger.
func startServerLogging(t *testing.T, b Backend, gid uint32, log *slog.Logger) (*Server, *Client) {
	t.Helper()
	return startServerWith(t, b, gid, Options{Logger: log})
}

// startServerWith is startServer with further options (socket, group and lookup are set here).
func startServerWith(t *testing.T, b Backend, gid uint32, opts Options) (*Server, *Client) {
	t.Helper()
	return startServerSetup(t, b, gid, opts, nil)
}

// startServerSetup is startServerWith calling setup (when not nil) before Serve.
func startServerSetup(t testing.TB, b Backend, gid uint32, opts Options, setup func(*Server)) (*Server, *Client) {
	t.Helper()
	if gid == 0 {
		gid = uint32(os.Getgid())
	}
	opts.Socket, opts.Group = testSocketPath(t), testGroup
	opts.LookupGroup = func(name string) (uint32, error) {
		if name == testGroup {
			return gid, nil
		}
		return 0, fmt.Errorf("group %q not found", name)
	}
	s, err := NewServer(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if _, err := os.Lstat(s.Socket()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket left behind after shutdown: %v", err)
		}
	})
	return s, NewClient(s.Socket())
}
