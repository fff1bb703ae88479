package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// clientModeEnv makes the test binary act as a one-shot API client (see TestMain): the
// permission tests re-run it under other credentials.
const clientModeEnv = "SLICELET_API_TEST_CLIENT_SOCKET"

func TestMain(m *testing.M) {
	if sock := os.Getenv(clientModeEnv); sock != "" {
		os.Exit(clientMode(sock, os.Stdout))
	}
	os.Exit(m.Run())
}

// clientMode lists pods once and prints "ok" or the error (with its HTTP status, if any).
func clientMode(sock string, out io.Writer) int {
	_, err := NewClient(sock).ListPods(context.Background())
	var se *StatusError
	switch {
	case err == nil:
		fmt.Fprint(out, "ok")
	case errors.As(err, &se):
		fmt.Fprintf(out, "status=%d %s", se.Code, se.Message)
	default:
		fmt.Fprintf(out, "error: %v", err)
	}
	return 0
}

// requireRoot skips without root, or fails under CI=true where a missing prerequisite must not
// pass silently.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("this test must run as root (it starts clients under other uids)")
	}
	t.Skip("needs root: starts clients under other uids")
}

// TestPeerCredentials connects for real as other users: the test binary re-runs itself as uid
// 65534 with various groups.
func TestPeerCredentials(t *testing.T) {
	requireRoot(t)
	// A directory every user can traverse, holding the socket and a copy of the test binary
	// (the go build cache is private to root).
	dir, err := os.MkdirTemp("", "slapi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "api.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}

	f := newFakeBackend()
	f.Add(filePod("a", "/x/a.yaml"))
	s, err := NewServer(f, Options{
		Socket:      filepath.Join(dir, "s.sock"),
		Group:       testGroup,
		LookupGroup: func(string) (uint32, error) { return testGID, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	for _, tc := range []struct {
		name string
		cred *syscall.Credential // nil: this process (root)
		// mode, when set, is given to the socket first: 0666 lets the kernel connect anyone,
		// so the server's own check is what refuses.
		mode os.FileMode
		want string
	}{
		{"root", nil, 0, "ok"},
		{"stranger stopped by the socket mode", &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}, 0,
			"error: cannot connect to slicelet at " + s.Socket() + ": permission denied\n  run as root or as a member of group"},
		{"stranger on a world-writable socket", &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}, 0o666,
			`status=403 permission denied: uid 65534 is neither root nor in group "slicelet-test"`},
		{"supplementary group", &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{100, testGID}}, 0, "ok"},
		{"primary group", &syscall.Credential{Uid: 65534, Gid: testGID, Groups: []uint32{}}, 0, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.mode != 0 {
				if err := os.Chmod(s.Socket(), tc.mode); err != nil {
					t.Fatal(err)
				}
				defer os.Chmod(s.Socket(), 0o660)
			}
			var out strings.Builder
			if tc.cred == nil {
				clientMode(s.Socket(), &out)
			} else {
				cmd := exec.Command(bin)
				cmd.Env = append(os.Environ(), clientModeEnv+"="+s.Socket())
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: tc.cred}
				cmd.Stdout = &out
				var stderr strings.Builder
				cmd.Stderr = &stderr
				if err := cmd.Run(); err != nil {
					t.Fatalf("client as uid %d: %v\n%s", tc.cred.Uid, err, stderr.String())
				}
			}
			if !strings.HasPrefix(out.String(), tc.want) {
				t.Errorf("client said\n%s\nwant\n%s", out.String(), tc.want)
			}
		})
	}
}
