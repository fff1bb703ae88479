package installtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slicelet/slicelet/internal/testharness/sandbox"
)

// The test boots one overlay-root sandbox in TestMain, runs the install life cycle in it from
// this (host) process through `nsenter`, stops the instance and then checks that the machine is
// exactly as before. Commands inside get a clean environment: the caller's TMPDIR usually points
// into the host /tmp, which the instance replaces with its own.

var (
	// inst is the running instance; nil when the prerequisites are missing.
	inst *sandbox.Instance
	// skipReason says why inst is nil.
	skipReason string
	// debInside and manifestInside are the copies in the instance's state dir (same path inside
	// and out, so the test works wherever the repository is checked out).
	debInside, manifestInside string
)

func ci() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v == "true" || v == "1"
}

// RequestEnv=1 asks for the install test. `make package-check` sets it after `make package`;
// `make test` (go test ./...) does not: in CI it runs before any package exists, and a stale
// dist/*.deb from an earlier commit would test the wrong package.
const RequestEnv = "SLICELET_INSTALL_TEST"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	began := time.Now()
	if os.Getenv(RequestEnv) != "1" {
		skipReason = "not requested: make package-check runs it (" + RequestEnv + "=1 go test ./packaging/installtest/ after make package)"
		fmt.Fprintf(os.Stderr, "SKIP: installtest: %s\n", skipReason)
		return m.Run()
	}
	deb, err := prerequisites()
	if err != nil {
		skipReason = err.Error()
		if ci() {
			fmt.Fprintf(os.Stderr, "FAIL: installtest: CI=true and the install test cannot run: %v\n", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "SKIP: installtest: the install test cannot run here: %v\n", err)
		return m.Run()
	}
	before, err := snapshotHost()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: installtest: %v\n", err)
		return 1
	}
	marker, err := os.CreateTemp("/tmp", "slicelet-installtest-marker-*")
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: installtest: %v\n", err)
		return 1
	}
	marker.Close()
	defer os.Remove(marker.Name())

	ctx := context.Background()
	// INSTALLTEST_SANDBOX_PREFIX prefixes the instance's name (one per person sharing a machine).
	inst, err = sandbox.Start(ctx, sandbox.Options{
		Name:        os.Getenv("INSTALLTEST_SANDBOX_PREFIX") + "installtest-" + randomSuffix(),
		OverlayRoot: true,
		Log:         os.Stderr,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: installtest: %v\n", err)
		return 1
	}
	code := 0
	debInside = filepath.Join(inst.StateDir(), filepath.Base(deb))
	manifestInside = filepath.Join(inst.StateDir(), "web.yaml")
	if err := errors.Join(copyFile(deb, debInside), copyFile(filepath.Join(repoRoot(), "examples", "api", "web.yaml"), manifestInside)); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: installtest: %v\n", err)
		code = 1
	} else {
		code = m.Run()
	}
	stopBegan := time.Now()
	if err := inst.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: installtest: stopping sandbox %s: %v\n", inst.Name(), err)
		code = 1
	}
	fmt.Fprintf(os.Stderr, "installtest: sandbox %s stopped in %s\n", inst.Name(), time.Since(stopBegan).Round(time.Millisecond))

	after, err := snapshotHost()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: installtest: %v\n", err)
		return 1
	}
	diffs := before.diff(after)
	if _, err := os.Stat(marker.Name()); err != nil {
		diffs = append(diffs, fmt.Sprintf("the marker %s in the host /tmp is gone: %v", marker.Name(), err))
	}
	if _, err := os.Stat(inst.StateDir()); err == nil {
		diffs = append(diffs, "state dir "+inst.StateDir()+" left after stop")
	}
	for _, d := range diffs {
		fmt.Fprintf(os.Stderr, "FAIL: installtest: the machine changed: %s\n", d)
		code = 1
	}
	if len(diffs) == 0 {
		fmt.Fprintf(os.Stderr, "installtest: the machine is unchanged (%d files, %d mounts, dpkg database and listings checked)\n", len(before.files), len(before.mounts))
	}
	fmt.Fprintf(os.Stderr, "installtest: total %s (boot %s)\n", time.Since(began).Round(time.Millisecond), inst.BootDuration().Round(time.Millisecond))
	return code
}

// repoRoot is the repository root: go test runs in packaging/installtest.
func repoRoot() string {
	wd, err := os.Getwd()
	if err != nil {
		return "../.."
	}
	return filepath.Dir(filepath.Dir(wd))
}

// prerequisites returns the one dist/slicelet_*.deb, or why the test cannot run: not root, no
// sandbox, no package, or a dependency of the package that this machine lacks (the instance has
// no network: what the .deb depends on must be installed on the host, whose root it sees).
func prerequisites() (string, error) {
	if err := sandbox.Prerequisites(); err != nil {
		return "", err
	}
	for _, tool := range []string{"dpkg", "dpkg-deb", "dpkg-query"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("%s: %w", tool, err)
		}
	}
	debs, err := filepath.Glob(filepath.Join(repoRoot(), "dist", "slicelet_*.deb"))
	if err != nil {
		return "", fmt.Errorf("dist: %w", err)
	}
	if len(debs) != 1 {
		return "", fmt.Errorf("want exactly one dist/slicelet_*.deb (make package), have %d: %q", len(debs), debs)
	}
	out, err := exec.Command("dpkg-deb", "-f", debs[0], "Depends").Output()
	if err != nil {
		return "", fmt.Errorf("dpkg-deb -f %s Depends: %w", debs[0], err)
	}
	for _, pkg := range dependencies(string(out)) {
		st, err := exec.Command("dpkg-query", "-W", "-f", "${Status}", pkg).Output()
		if err != nil || !strings.HasSuffix(strings.TrimSpace(string(st)), " installed") {
			return "", fmt.Errorf("%s depends on %s, which is not installed on this machine (the instance has no network)", filepath.Base(debs[0]), pkg)
		}
	}
	return debs[0], nil
}

// dependencies returns the package names of a Depends field; of alternatives ("a | b") the
// first, and version constraints and architecture qualifiers are dropped.
func dependencies(field string) []string {
	var out []string
	for _, dep := range strings.Split(field, ",") {
		first, _, _ := strings.Cut(dep, "|")
		name, _, _ := strings.Cut(strings.TrimSpace(first), " ")
		name, _, _ = strings.Cut(name, "(")
		name, _, _ = strings.Cut(name, ":")
		if name = strings.TrimSpace(name); name != "" {
			out = append(out, name)
		}
	}
	return out
}

func TestDependencies(t *testing.T) {
	tests := []struct {
		name, field string
		want        []string
	}{
		{"one", "systemd\n", []string{"systemd"}},
		{"versions, alternatives, arch", "systemd (>= 247), libc6:amd64, default-dbus | dbus", []string{"systemd", "libc6", "default-dbus"}},
		{"empty", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := dependencies(tc.field); !slices.Equal(got, tc.want) {
				t.Errorf("dependencies(%q) = %q, want %q", tc.field, got, tc.want)
			}
		})
	}
}

func requireInstance(t *testing.T) {
	t.Helper()
	if inst != nil {
		return
	}
	if ci() && os.Getenv(RequestEnv) == "1" {
		t.Fatalf("CI=true and the install test cannot run: %s", skipReason)
	}
	t.Skipf("SKIP (needs root, the systemd sandbox and make package): %s", skipReason)
}

// innerEnv is the environment of every command inside.
var innerEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root", "LANG=C.UTF-8", "DEBIAN_FRONTEND=noninteractive",
	"SYSTEMD_PAGER=", "SYSTEMD_COLORS=0", "TERM=dumb",
}

// sh runs a shell script inside and returns its stdout and exit error.
func sh(ctx context.Context, script string) (string, string, error) {
	cmd := inst.Command(ctx, "/bin/sh", "-c", script)
	cmd.Env = innerEnv
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return strings.TrimSpace(stdout.String()), strings.TrimSpace(stderr.String()), err
}

// must runs a script inside and fails the test if it fails.
func must(t *testing.T, script string) string {
	t.Helper()
	out, errOut, err := sh(context.Background(), script)
	if err != nil {
		t.Fatalf("inside: %s: %v\nstdout:\n%s\nstderr:\n%s%s", script, err, out, errOut, diagnostics())
	}
	return out
}

// diagnostics is slicelet's unit state and journal tail, appended to a failure.
func diagnostics() string {
	out, _, _ := sh(context.Background(), "systemctl status --no-pager slicelet 2>&1 | head -20; journalctl --no-pager -n 30 -u slicelet 2>&1")
	return "\n--- slicelet inside ---\n" + out
}

// waitFor polls probe inside every 100 ms until it returns true or the limit passes.
func waitFor(t *testing.T, what string, limit time.Duration, probe func() (bool, string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		var ok bool
		if ok, last = probe(); ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not after %s; last: %s%s", what, limit, last, diagnostics())
		case <-tick.C:
		}
	}
}

// step times one part of the life cycle.
func step(t *testing.T, name string) func() {
	began := time.Now()
	return func() { t.Logf("step %-34s %s", name, time.Since(began).Round(time.Millisecond)) }
}

// slicelet's files: none may exist inside before the install or after the purge.
var packageFiles = []string{
	"/usr/bin/slicelet", "/usr/bin/slicectl",
	"/usr/lib/systemd/system/slicelet.service",
	"/usr/lib/systemd/system/system.slice.d/50-slicelet.conf",
	"/usr/lib/sysusers.d/slicelet.conf",
	"/etc/slicelet/config.toml",
	"/etc/systemd/system/multi-user.target.wants/slicelet.service",
	"/var/lib/systemd/deb-systemd-helper-enabled/slicelet.service",
	"/var/lib/systemd/deb-systemd-helper-enabled/multi-user.target.wants/slicelet.service",
	"/var/lib/slicelet", "/run/slicelet",
	"/usr/share/man/man8/slicelet.8.gz", "/usr/share/doc/slicelet",
	"/usr/share/bash-completion/completions/slicectl",
}

// operatorFiles are made by the operator while slicelet is installed; purge keeps them.
var operatorFiles = map[string]string{
	"/etc/slicelet/config.d/90-operator.toml": "# made by the operator: a drop-in",
	"/etc/slicelet/pods.d/operator.yaml":      "# made by the operator: a manifest, no pod yet",
}

// unitsLeft lists slicelet's and the pods' units still known to systemd inside (but the
// sandbox's own boot target), and timers of slicelet's.
var unitsLeft = `systemctl list-units --all --plain --no-legend 'slicelet*' 'kubepods*' | grep -v '^` + sandbox.BootTarget + ` '; ` +
	`systemctl list-timers --all --plain --no-legend | grep -i slicelet; true`

func TestInstallStartPodStopPurge(t *testing.T) {
	requireInstance(t)
	began := time.Now()
	defer func() { t.Logf("install life cycle: %s", time.Since(began).Round(time.Millisecond)) }()

	// The overlay shows the host's root: what the host already has is there before the install
	// (this machine has an empty /var/lib/slicelet from earlier work). Purge must remove it all.
	for _, f := range packageFiles {
		if _, _, err := sh(context.Background(), "test -e "+f+" || test -L "+f); err == nil {
			t.Logf("note: %s exists before the install (the host has it)", f)
		}
	}

	// This machine's policy-rc.d (exit 101, from a Docker-style image) forbids service actions,
	// so deb-systemd-invoke would neither start slicelet nor stop the pods on purge. It goes
	// inside only: the overlay records a whiteout; run() checks the host still has it.
	done := step(t, "remove policy-rc.d (inside)")
	must(t, "rm -f /usr/sbin/policy-rc.d; test ! -e /usr/sbin/policy-rc.d")
	done()

	done = step(t, "dpkg -i")
	out := must(t, "dpkg -i "+debInside+" 2>&1")
	t.Logf("dpkg -i:\n%s", out)
	done()

	// postinst enables and starts the unit (Type=notify: start returns once slicelet is ready).
	if got := must(t, "systemctl is-enabled slicelet || true"); got != "enabled" {
		t.Errorf("after dpkg -i: is-enabled = %q, want enabled", got)
	}
	if got := must(t, "systemctl is-active slicelet || true"); got != "active" {
		t.Fatalf("after dpkg -i: is-active = %q, want active (postinst starts it)%s", got, diagnostics())
	}
	// The daemon's memory is bounded in its own cgroup (cgroup v2 memory.max, v1
	// memory.limit_in_bytes): 512M from the packaged unit.
	unitCgroup := must(t, "systemctl show -P ControlGroup slicelet")
	if got := must(t, "cat /sys/fs/cgroup"+unitCgroup+"/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory"+unitCgroup+"/memory.limit_in_bytes"); got != "536870912" {
		t.Errorf("slicelet's cgroup %s: memory bound %q, want 536870912 (MemoryMax=512M)", unitCgroup, got)
	}
	if got := must(t, "systemctl show -P Restart slicelet"); got != "on-failure" {
		t.Errorf("Restart = %q, want on-failure", got)
	}
	if got := must(t, "systemctl show -P MemoryHigh slicelet"); got != "402653184" {
		t.Errorf("MemoryHigh = %q, want 402653184 (384M)", got)
	}
	if got := must(t, "getent group slicelet | cut -d: -f1"); got != "slicelet" {
		t.Errorf("after dpkg -i: group slicelet = %q, want it created by sysusers", got)
	}
	if got := must(t, "stat -c %a /var/lib/slicelet"); got != "700" {
		t.Errorf("/var/lib/slicelet mode = %s, want 700 (StateDirectoryMode)", got)
	}

	done = step(t, "slicectl apply, pod Running")
	must(t, "slicectl apply -f "+manifestInside)
	var pod struct {
		Metadata struct{ UID string } `json:"metadata"`
		Status   struct{ Phase string }
	}
	waitFor(t, "pod web Running", 30*time.Second, func() (bool, string) {
		out, errOut, err := sh(context.Background(), "slicectl get pod web -o json")
		if err != nil {
			return false, errOut
		}
		if err := json.Unmarshal([]byte(out), &pod); err != nil {
			return false, err.Error()
		}
		return pod.Status.Phase == "Running", "phase " + pod.Status.Phase
	})
	table := must(t, "slicectl get pods")
	t.Logf("slicectl get pods:\n%s", table)
	if !strings.Contains(table, "web") || !strings.Contains(table, "Running") {
		t.Errorf("slicectl get pods does not list web Running:\n%s", table)
	}
	done()

	done = step(t, "journalctl -u slicelet -o json")
	journal := must(t, "journalctl --no-pager -u slicelet -o json")
	fields := structuredFields(journal)
	if !fields["POD_UID="+pod.Metadata.UID] && !slices.ContainsFunc(keys(fields), func(k string) bool { return strings.HasPrefix(k, "SLICE=") }) {
		t.Errorf("journalctl -u slicelet -o json: no record with POD_UID=%s or SLICE=; fields seen: %q", pod.Metadata.UID, keys(fields))
	}
	// The container's own output is findable by pod, too (it prints a line every 2 s).
	waitFor(t, "container output under POD_UID="+pod.Metadata.UID, 10*time.Second, func() (bool, string) {
		out, _, _ := sh(context.Background(), "journalctl --no-pager -o cat POD_UID="+pod.Metadata.UID+" | grep -m1 'serving at'")
		return out != "", "no 'serving at' line yet"
	})
	done()

	done = step(t, "systemctl status (STATUS line)")
	status := must(t, "systemctl status --no-pager --lines=0 slicelet")
	if !regexpStatus(status) {
		t.Errorf("systemctl status slicelet shows no STATUS line with \"pods running\":\n%s", status)
	}
	done()

	done = step(t, "gc timers (systemctl list-timers) and slicectl gc")
	timers := must(t, "systemctl list-timers --all --plain --no-legend 'slicelet-gc-*' | awk '{for (i=1;i<=NF;i++) if ($i ~ /^slicelet-gc-/) {print $i; break}}' | sort | paste -sd' '")
	// The packaged configuration runs the built-in runtime: no images, so no image GC timer.
	if timers != "slicelet-gc-containers.timer" {
		t.Errorf("GC timers of the installed slicelet = %q, want slicelet-gc-containers.timer", timers)
	}
	if out := must(t, "slicectl gc containers --dry-run"); !strings.Contains(out, "container gc (dry run") {
		t.Errorf("slicectl gc containers --dry-run printed:\n%s", out)
	}
	done()

	done = step(t, "systemctl stop slicelet")
	must(t, "systemctl stop slicelet")
	// The GC timers are PartOf slicelet.service: they stop with it.
	if out := must(t, "systemctl list-units --plain --no-legend --state=active 'slicelet-gc-*' || true"); out != "" {
		t.Errorf("after stop: GC units still active:\n%s", out)
	}
	if got := must(t, "systemctl is-active slicelet || true"); got != "inactive" {
		t.Errorf("after stop: is-active = %q, want inactive", got)
	}
	// Pods are systemd's units, not slicelet's processes: they outlive it (packaging/README.md).
	if got := must(t, "systemctl is-active kubepods.slice || true"); got != "active" {
		t.Errorf("after stop: kubepods.slice is %q, want active (pods survive slicelet)", got)
	}
	done()

	for f, content := range operatorFiles {
		must(t, fmt.Sprintf("mkdir -p %s && echo '%s' > %s", filepath.Dir(f), content, f))
	}

	done = step(t, "dpkg --purge slicelet")
	out = must(t, "dpkg --purge slicelet 2>&1")
	t.Logf("dpkg --purge:\n%s", out)
	done()

	done = step(t, "nothing of slicelet's left")
	// Stopping kubepods.slice in postrm is a stop job; transient units are collected right
	// after, but give systemd a moment to finish the pod's stop.
	waitFor(t, "no slicelet or kubepods units", 15*time.Second, func() (bool, string) {
		out, _, _ := sh(context.Background(), unitsLeft)
		return out == "", out
	})
	if out := must(t, "ls -d /sys/fs/cgroup/*/kubepods* /sys/fs/cgroup/*/slicelet* 2>/dev/null || true"); out != "" {
		t.Errorf("cgroups left after purge:\n%s", out)
	}
	for _, f := range packageFiles {
		if _, _, err := sh(context.Background(), "test -e "+f+" || test -L "+f); err == nil {
			t.Errorf("%s left inside after purge", f)
		}
	}
	if st := must(t, "dpkg-query -W -f '${Status}' slicelet 2>/dev/null || true"); st != "" && !strings.HasSuffix(st, "not-installed") {
		t.Errorf("after purge: dpkg status %q, want not-installed or unknown", st)
	}
	for f, content := range operatorFiles {
		if got := must(t, "cat "+f+" 2>&1 || true"); got != content {
			t.Errorf("the operator's %s after purge: %q, want it kept", f, got)
		}
	}
	// Kept on purpose (Debian practice, see packaging/README.md).
	if got := must(t, "getent group slicelet | cut -d: -f1"); got != "slicelet" {
		t.Errorf("after purge: group slicelet = %q, want it kept", got)
	}
	if failed := must(t, "systemctl --failed --plain --no-legend"); failed != "" {
		t.Errorf("failed units inside after purge:\n%s", failed)
	}
	done()
}

// structuredFields returns every FIELD=value of the journal records (journalctl -o json lines)
// whose field names are slicelet's own (upper-case, not journald's trusted "_" or "__" fields).
func structuredFields(jsonLines string) map[string]bool {
	out := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(jsonLines))
	sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}
		for k, v := range rec {
			if strings.HasPrefix(k, "_") || k == "MESSAGE" || k == "PRIORITY" || strings.HasPrefix(k, "SYSLOG_") || k == "CODE_FILE" || k == "CODE_LINE" || k == "CODE_FUNC" || strings.HasPrefix(k, "INVOCATION") {
				continue
			}
			if s, ok := v.(string); ok {
				out[k+"="+s] = true
			}
		}
	}
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		name, _, _ := strings.Cut(k, "=")
		out = append(out, name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// regexpStatus reports whether systemctl status output has the sd_notify STATUS line.
func regexpStatus(status string) bool {
	for _, line := range strings.Split(status, "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "Status: \"") && strings.Contains(l, "pods running") {
			return true
		}
	}
	return false
}

// hostSnapshot is what the install inside must not change on the machine.
type hostSnapshot struct {
	// files maps a path to its checksum, link target, "dir" or "absent".
	files map[string]string
	// mounts is the whole mount table of this mount namespace.
	mounts []string
	// dpkgSlicelet is `dpkg-query -W slicelet` (output and exit status).
	dpkgSlicelet string
}

// hostFiles are checksummed; hostTrees are listed recursively (names, modes, link targets and
// checksums).
var (
	hostFiles = []string{
		"/var/lib/dpkg/status", "/etc/group", "/etc/gshadow", "/etc/passwd", "/etc/shadow",
		"/usr/sbin/policy-rc.d", "/usr/bin/slicelet", "/usr/bin/slicectl", "/etc/slicelet",
		"/usr/lib/systemd/system/slicelet.service", "/usr/lib/sysusers.d/slicelet.conf",
		"/var/lib/slicelet", "/run/slicelet", "/etc/hostname",
	}
	hostTrees = []string{
		"/etc/systemd", "/usr/lib/systemd/system", "/usr/lib/sysusers.d", "/var/lib/systemd/deb-systemd-helper-enabled",
		"/var/lib/systemd/deb-systemd-user-helper-enabled", "/var/lib/dpkg/info", "/etc/slicelet", "/usr/share/doc/slicelet",
	}
)

func snapshotHost() (*hostSnapshot, error) {
	s := &hostSnapshot{files: map[string]string{}}
	for _, f := range hostFiles {
		s.files[f] = describe(f)
	}
	for _, tree := range hostTrees {
		err := filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					s.files[p] = "absent"
					return nil
				}
				return err
			}
			s.files[p] = describe(p)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("host snapshot %s: %w", tree, err)
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("host snapshot: %w", err)
	}
	s.mounts = strings.Split(strings.TrimSpace(string(mi)), "\n")
	out, err := exec.Command("dpkg-query", "-W", "slicelet").CombinedOutput()
	s.dpkgSlicelet = fmt.Sprintf("%s (%v)", strings.TrimSpace(string(out)), err)
	return s, nil
}

// describe is a file's identity: absent, a directory's mode, a link's target or a file's mode
// and checksum.
func describe(p string) string {
	fi, err := os.Lstat(p)
	if err != nil {
		return "absent"
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t, _ := os.Readlink(p)
		return "link " + t
	case fi.IsDir():
		return "dir " + fi.Mode().String()
	}
	f, err := os.Open(p)
	if err != nil {
		return "unreadable " + err.Error()
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "unreadable " + err.Error()
	}
	return fi.Mode().String() + " " + hex.EncodeToString(h.Sum(nil))
}

// diff lists what changed from s to after.
func (s *hostSnapshot) diff(after *hostSnapshot) []string {
	var out []string
	for p, v := range s.files {
		if w, ok := after.files[p]; !ok {
			out = append(out, p+": gone")
		} else if w != v {
			out = append(out, fmt.Sprintf("%s: %s -> %s", p, v, w))
		}
	}
	for p, w := range after.files {
		if _, ok := s.files[p]; !ok {
			out = append(out, fmt.Sprintf("%s: new (%s)", p, w))
		}
	}
	if !slices.Equal(s.mounts, after.mounts) {
		out = append(out, fmt.Sprintf("mount table:\nbefore %q\nafter  %q", s.mounts, after.mounts))
	}
	if s.dpkgSlicelet != after.dpkgSlicelet {
		out = append(out, fmt.Sprintf("dpkg-query -W slicelet: %q -> %q", s.dpkgSlicelet, after.dpkgSlicelet))
	}
	slices.Sort(out)
	return out
}

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("copy into the instance: %w", err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		return fmt.Errorf("copy into the instance: %w", err)
	}
	return nil
}
