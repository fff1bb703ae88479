package eviction

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/slicelet/slicelet/units"
)

// recordHandler sends every log record's message and attributes to a channel, so a test can
// wait for a notifier's state changes without sleeping.
type recordHandler struct {
	ch    chan string
	attrs []slog.Attr
}

func newRecordLogger() (*slog.Logger, chan string) {
	ch := make(chan string, 100)
	return slog.New(&recordHandler{ch: ch}), ch
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	add := func(a slog.Attr) bool {
		b.WriteString(" " + a.Key + "=" + a.Value.String())
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	h.ch <- b.String()
	return nil
}

func (h *recordHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &recordHandler{ch: h.ch, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h *recordHandler) WithGroup(string) slog.Handler { return h }

// waitRecord waits for a record containing every part. The bound only turns a missing
// record into a failure instead of a hang; nothing waits for it to pass.
func waitRecord(t *testing.T, ch chan string, parts ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("no log record with %q", parts)
		case r := <-ch:
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(r, p)
			}
			if ok {
				return
			}
		}
	}
}

// runNotifier runs n until the test ends and checks that it stopped cleanly.
func runNotifier(t *testing.T, n Notifier) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx, func() {}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: Run = %v", n.Name(), err)
		}
	})
}

func TestPSINotifierRearmArmsNewFilesAtOnce(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "memory.pressure")
	kubepods := filepath.Join(dir, "kubepods.slice", "memory.pressure")
	writeFile(t, root, 0)
	log, records := newRecordLogger()
	// The periodic re-arm is an hour away: only Rearm can arm the new file in this test.
	p := &PSINotifier{Files: []string{root, kubepods}, Stall: DefaultPSIStall, Window: DefaultPSIWindow,
		RearmInterval: time.Hour, Log: log}
	runNotifier(t, p)
	waitRecord(t, records, "psi trigger not armed", "file="+kubepods)

	// The kubepods cgroup appears (a regular file takes the trigger as the kernel's would).
	writeFile(t, kubepods, 0)
	p.Rearm()
	waitRecord(t, records, "psi trigger armed", "file="+kubepods)
	b, err := os.ReadFile(kubepods)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != "some 150000 2000000\x00" {
		t.Errorf("trigger written %q", got)
	}
}

func TestMemcgThresholdNotifierRearmRecomputesAtOnce(t *testing.T) {
	root := t.TempDir()
	kp := filepath.Join(root, "memory", "kubepods.slice")
	write := func(name, v string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(kp, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mkdir(t, kp)
	write("memory.limit_in_bytes", "1000000\n")
	write("memory.usage_in_bytes", "400000\n")
	write("memory.stat", "total_inactive_file 100000\n")
	write("cgroup.event_control", "")
	th := Threshold{Signal: SignalAllocatableMemoryAvailable, Operator: OpLessThan,
		Value: ThresholdValue{Quantity: resource.NewQuantity(200000, resource.BinarySI)}}
	log, records := newRecordLogger()
	n := &MemcgThresholdNotifier{Sources: Sources{CgroupRoot: root, ProcRoot: root, Mode: units.ModeHybrid},
		Targets: []ThresholdTarget{{Threshold: th, CgroupPath: "/kubepods.slice"}}, RearmInterval: time.Hour, Log: log}
	runNotifier(t, n)
	// capacity 1000000 − threshold 200000 + inactive_file 100000.
	waitRecord(t, records, "memory threshold armed", "usage_bytes=900000")

	// Pods came and went: more inactive file cache, so the usage threshold moves up.
	write("memory.stat", "total_inactive_file 150000\n")
	n.Rearm()
	waitRecord(t, records, "memory threshold re-armed", "usage_bytes=950000")
	b, err := os.ReadFile(filepath.Join(kp, "cgroup.event_control"))
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(string(b)); len(f) != 3 || f[2] != "950000" {
		t.Errorf("cgroup.event_control %q, want <eventfd> <usage fd> 950000", b)
	}
}
