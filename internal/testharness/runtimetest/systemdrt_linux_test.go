package runtimetest_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/pods/systemdrt"
	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/internal/testharness/runtimetest"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/slices/hierarchy"
	"github.com/slicelet/slicelet/units"
)

func TestMain(m *testing.M) { os.Exit(systemdtest.Main(m)) }

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestSystemdRuntime runs the suite against the pod worker over the built-in systemd runtime
// in the sandbox (over the CRI runtime it runs in internal/pods/crirt). It is also the example
// of a harness.
func TestSystemdRuntime(t *testing.T) {
	env := systemdtest.Require(t)
	log := slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	sd, err := units.Connect(ctx, units.Options{Logger: log, CgroupRoot: env.CgroupRoot})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sd.Close() })
	capacity, err := slices.ReadCapacity("/proc", "/sys", "")
	if err != nil {
		t.Fatal(err)
	}
	sl := hierarchy.New(sd, hierarchy.NewCgroupFS(env.CgroupRoot), hierarchy.Config{
		Capacity: capacity,
		Node:     slices.NodeConfig{Enforcement: slices.Enforcement{Pods: true}},
		Pod:      slices.DefaultOptions(),
	}, log)
	if err := sl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	objects := pods.NewObjects()
	runtimetest.Run(t, runtimetest.Harness{
		Objects: objects,
		NewRuntime: func(t *testing.T) *worker.Worker {
			rt, err := systemdrt.New(systemdrt.Options{Systemd: sd, StateDir: state, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			w, err := worker.New(worker.Options{
				Runtime: rt, Recorder: &record.FakeRecorder{}, StateDir: state, Logger: log,
				MemoryCapacity: capacity.Memory, Resources: slices.DefaultOptions(), HostNetwork: true,
				Backoff: lifecycle.Backoff{Initial: 200 * time.Millisecond, Max: 400 * time.Millisecond},
				Objects: objects,
			})
			if err != nil {
				t.Fatal(err)
			}
			return w
		},
		Slice: func(t *testing.T, pod *v1.Pod) slices.PodSlice {
			ps, err := sl.EnsurePod(context.Background(), pod)
			if err != nil {
				t.Fatal(err)
			}
			return ps
		},
		DestroySlice: func(t *testing.T, uid string) {
			if err := sl.DestroyPod(context.Background(), uid); err != nil {
				t.Errorf("destroy slice: %v", err)
			}
		},
		Container: func(name, script string) v1.Container {
			return v1.Container{Name: name, Command: []string{"/bin/sh", "-c", script}}
		},
	})
}
