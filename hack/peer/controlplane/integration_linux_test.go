package controlplane

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

func TestMain(m *testing.M) { os.Exit(systemdtest.Main(m)) }

// BinDirEnv overrides where the integration test finds the control plane's binaries.
const BinDirEnv = "PEER_BIN_DIR"

// peerBinDir is build/peer/v1.37.2 of the repository (or $PEER_BIN_DIR). Without the binaries
// the test skips, saying how to build them, unless CI=true and PEER_REQUIRED=1: then it fails.
func peerBinDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(BinDirEnv)
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "build", "peer", "v1.37.2")
	}
	resolved, err := filepath.EvalSymlinks(dir)
	if err == nil {
		resolved, err = filepath.Abs(resolved)
	}
	if err == nil {
		_, err = os.Stat(filepath.Join(resolved, APIServer))
	}
	if err != nil {
		if systemdtest.CI() && os.Getenv("PEER_REQUIRED") == "1" {
			t.Fatalf("control plane binaries missing (%v) with CI=true and PEER_REQUIRED=1: run make peer-build", err)
		}
		t.Skipf("SKIP (control plane binaries missing: %v): run make peer-build, or set %s", err, BinDirEnv)
	}
	return resolved
}

// TestControlPlane starts etcd, the API server, the scheduler and the controller manager inside
// the sandbox, creates a pod as admin, and shows the Node authorizer and NodeRestriction at work:
// a node's credentials create its own Node object but not another node's.
func TestControlPlane(t *testing.T) {
	bin := peerBinDir(t)
	env := systemdtest.Require(t)
	systemdtest.SandboxOnly(t, env, "the control plane's binaries are host files the VM does not get")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	cp, err := Start(ctx, Config{
		Dir: t.TempDir(), BinDir: bin, Nodes: []string{"node-a"}, Scheduler: true, ControllerManager: true,
		Log: slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = cp.Stop(context.WithoutCancel(ctx))
		}
	}()

	admin, err := cp.Client(cp.AdminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "busybox"}}},
	}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("admin creates a pod: %v", err)
	}
	// No node yet: the scheduler marks the pod unschedulable (so the scheduler runs and reaches
	// the API server with its own identity).
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the scheduler did not report pod web unschedulable: %v", err)
	}
	// The controller manager runs with service-account credentials: it creates the default
	// service account of a new namespace.
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := admin.CoreV1().ServiceAccounts("team").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the controller manager did not create the default service account: %v", err)
	}

	node, err := cp.Client(cp.NodeKubeconfig("node-a"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		do        func() error
		forbidden bool
	}{
		{"a node creates its own Node", func() error {
			_, err := node.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{})
			return err
		}, false},
		{"a node cannot create another node's Node", func() error {
			_, err := node.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}, metav1.CreateOptions{})
			return err
		}, true},
		{"a node cannot read secrets no pod of it uses", func() error {
			_, err := node.CoreV1().Secrets("default").Get(ctx, "anything", metav1.GetOptions{})
			return err
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			switch {
			case tc.forbidden && !apierrors.IsForbidden(err):
				t.Fatalf("want Forbidden, got %v", err)
			case !tc.forbidden && err != nil:
				t.Fatalf("want success, got %v", err)
			}
		})
	}

	units := cp.Units()
	stopped = true
	if err := cp.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, u := range units {
		if err := (Local{}).Command(ctx, "systemctl", "is-active", "--quiet", u).Run(); err == nil {
			t.Errorf("%s still active after Stop", u)
		}
	}
}
