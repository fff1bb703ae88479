package conformance

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/slicelet/slicelet/internal/testharness/critest"
)

func TestShardFocus(t *testing.T) {
	for _, tc := range []struct {
		name, list, focus string
		sigs              []string
		err               string
	}{
		{name: "one SIG", list: "sig-network", focus: `\[(sig-network)\].*\[Conformance\]`, sigs: []string{"sig-network"}},
		{name: "short names and a repeat", list: "cli, sig-scheduling,cli", focus: `\[(sig-cli|sig-scheduling)\].*\[Conformance\]`,
			sigs: []string{"sig-cli", "sig-scheduling"}},
		{name: "unknown SIG", list: "sig-netwrk", err: `SIG "sig-netwrk" is none of`},
		{name: "empty", list: " , ", err: "no SIG"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			focus, sigs, err := ShardFocus(tc.list)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || focus != tc.focus || !reflect.DeepEqual(sigs, tc.sigs) {
				t.Fatalf("= %q %v %v, want %q %v", focus, sigs, err, tc.focus, tc.sigs)
			}
		})
	}
}

func TestNarrowFocus(t *testing.T) {
	focus, _, _ := ShardFocus("sig-apps,sig-auth")
	for _, tc := range []struct{ name, only, want, match, miss, err string }{
		{name: "one spec", only: `Job should allow`, want: `\[(sig-apps|sig-auth)\].*(?:Job should allow).*\[Conformance\]`,
			match: "[sig-apps] Job should allow to use a pod failure policy [Conformance]", miss: "[sig-apps] Job should delete a job [Conformance]"},
		{name: "alternatives stay inside", only: `ClusterTrustBundle|evicted statefulset`,
			want:  `\[(sig-apps|sig-auth)\].*(?:ClusterTrustBundle|evicted statefulset).*\[Conformance\]`,
			match: "[sig-apps] StatefulSet Should recreate evicted statefulset [Conformance]", miss: "[sig-node] ClusterTrustBundle x [Conformance]"},
		{name: "bad expression", only: `(`, err: "missing closing )"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NarrowFocus(focus, tc.only)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("= %q %v, want %q", got, err, tc.want)
			}
			re := regexp.MustCompile(got)
			if !re.MatchString(tc.match) || re.MatchString(tc.miss) {
				t.Errorf("%q: matches %q: %v, %q: %v", got, tc.match, re.MatchString(tc.match), tc.miss, re.MatchString(tc.miss))
			}
		})
	}
}

func TestClusterKind(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []string
		want  string
	}{
		{"kubelet", []string{"kubelet", "kubelet"}, "kubelet"},
		{"slicelet", []string{"slicelet", "slicelet", "slicelet"}, "slicelet"},
		{"mixed", []string{"slicelet", "kubelet"}, "mixed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClusterKind(tc.nodes); got != tc.want {
				t.Fatalf("ClusterKind(%v) = %q, want %q", tc.nodes, got, tc.want)
			}
		})
	}
}

const (
	specArch  = "[sig-architecture] Conformance Tests should have at least two untainted nodes [Conformance]"
	specCLI1  = "[sig-cli] Kubectl client Kubectl version should check is all data is printed [Conformance]"
	specCLI2  = "[sig-cli] Kubectl client Update Demo should scale a replication controller [Conformance]"
	specSched = "[sig-scheduling] LimitRange should create a LimitRange with defaults [Conformance]"
)

func TestShardSection(t *testing.T) {
	day := time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC)
	kubelet := ShardRun{Nodes: []string{"kubelet", "kubelet"}, SIGs: []string{"sig-architecture", "sig-cli"}, Started: day, Duration: "20m0s",
		Procs: 2, Commit: "abc123", Specs: Results{
			specArch: {Status: "passed"}, specCLI1: {Status: "passed"}, specCLI2: {Status: "passed"}}}
	// An older slicelet run of sig-cli that the newer one replaces.
	old := ShardRun{Nodes: []string{"slicelet", "slicelet"}, SIGs: []string{"sig-cli"}, Started: day.Add(-time.Hour), Duration: "1m0s",
		Procs: 2, Commit: "old", Specs: Results{specCLI1: {Status: "failed", Message: "old failure"}}}
	slicelet := ShardRun{Nodes: []string{"slicelet", "slicelet"}, SIGs: []string{"sig-architecture", "sig-cli"}, Started: day.Add(time.Hour),
		NodeVersions: map[string]string{"slicelet-1": "v1.37.2+slicelet.abc123", "slicelet-2": "v1.37.2+slicelet.abc123"},
		Duration:     "25m0s", Procs: 2, Commit: "abc123", Specs: Results{
			specArch: {Status: "passed"}, specCLI1: {Status: "passed"},
			specCLI2: {Status: "failed", Message: "Timed out after 300s. data.json"}}}
	mixed := ShardRun{Nodes: []string{"kubelet", "slicelet"}, SIGs: []string{"sig-scheduling"}, Started: day, Duration: "9m0s", Procs: 1,
		Commit: "abc123", Error: "exit status 1", Specs: Results{specSched: {Status: "failed", Message: "quota"},
			SuitePrefix + "[SynchronizedAfterSuite] ": {Status: "failed", Message: "cleanup"}}}
	notes := []Note{{Pattern: `Update Demo`, Why: "the data.json cause"}}
	// A later re-run of one spec: listed apart, never the shard's result.
	rerun := ShardRun{Nodes: []string{"slicelet", "slicelet"}, SIGs: []string{"sig-architecture", "sig-cli"}, Started: day.Add(2 * time.Hour),
		Duration: "3m0s", Procs: 2, Commit: "def456", Only: "Update Demo", Specs: Results{specCLI2: {Status: "passed"}}}
	if rerun.FileName() == slicelet.FileName() {
		t.Fatalf("the re-run would replace the shard's run: %s", rerun.FileName())
	}
	got := ShardSection([]ShardRun{kubelet, old, slicelet, mixed, rerun}, notes, "intro\n")
	for _, tc := range []struct{ name, want string }{
		{"intro first", "intro\n\n| SIG | specs |"},
		{"architecture on both", "| sig-architecture | 1 | 1 / 1 / 0 / 0 | 1 / 1 / 0 / 0 | not run | 0 |"},
		{"cli: the newest slicelet run counts", "| sig-cli | 17 | 2 / 2 / 0 / 0 | 2 / 1 / 1 / 0 | not run | 1 |"},
		{"scheduling on the mixed cluster only", "| sig-scheduling | 11 | not run | not run | 1 / 0 / 1 / 0 | — |"},
		{"a SIG never run", "| sig-network | 47 | not run | not run | not run | — |"},
		{"the kubelet run", "| sig-architecture, sig-cli | kubelet | kubelet,kubelet | 2026-11-29 05:00 | abc123 | 20m0s | 2 | 3 | — |"},
		{"the nodes' versions", "| sig-architecture, sig-cli | slicelet | slicelet,slicelet (`v1.37.2+slicelet.abc123`) | 2026-11-29 06:00 |"},
		{"the mixed run with its error", "| sig-scheduling | mixed | kubelet,slicelet | 2026-11-29 05:00 | abc123 | 9m0s | 1 | 1 | exit status 1 |"},
		{"one difference", "differs between the kubelet cluster and the slicelet cluster (1):"},
		{"the difference with its note", "| " + specCLI2 + " | passed | failed | the data.json cause |"},
		{"failures: the slicelet one with its note", "| " + specCLI2 + " | slicelet | failed | the data.json cause |"},
		{"failures: the mixed one with its message", "| " + specSched + " | mixed | failed | quota |"},
		{"failures: the suite-level node", "| suite: [SynchronizedAfterSuite]  (sig-scheduling) | mixed | failed | cleanup |"},
		{"failure count", "Specs that failed, per cluster (3):"},
		{"the re-run apart", "| " + specCLI2 + " | slicelet | passed | 2026-11-29 07:00 | def456 | 3m0s, 1 ran, 1 passed, 0 failed |"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(got, tc.want) {
				t.Fatalf("section lacks %q:\n%s", tc.want, got)
			}
		})
	}
	for _, gone := range []string{"old failure", "| old |"} {
		if strings.Contains(got, gone) {
			t.Errorf("section shows the replaced run (%q):\n%s", gone, got)
		}
	}
}

// TestShardParts: the newest run of each part of a shard counts as the whole shard once every
// part has run, each part listed as a run; a shard with a part missing, or whose parts ran the
// same spec, stays apart as re-runs.
func TestShardParts(t *testing.T) {
	day := time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC)
	part := func(p, only string, started time.Time, specs Results) ShardRun {
		return ShardRun{Nodes: []string{"slicelet", "slicelet"}, SIGs: []string{"sig-cli"}, Started: started, Duration: "10m0s", Procs: 2,
			Commit: "c" + p[:1], Only: only, Part: p, Specs: specs}
	}
	p1 := part("1/2", "version", day, Results{specCLI1: {Status: "passed"}})
	p2 := part("2/2", "Update Demo", day.Add(time.Hour), Results{specCLI2: {Status: "failed", Message: "data.json"}})
	if p1.FileName() != "slicelet_sig-cli_part1of2.json" || p1.FileName() == p2.FileName() {
		t.Fatalf("part file names %s, %s", p1.FileName(), p2.FileName())
	}
	for _, tc := range []struct {
		name  string
		runs  []ShardRun
		wants []string
		not   []string
	}{
		{"both parts: the whole shard", []ShardRun{p1, p2},
			[]string{"| sig-cli | 17 | not run | 2 / 1 / 1 / 0 |",
				"| sig-cli, part 1/2 (SPECS=version) | slicelet |", "| sig-cli, part 2/2 (SPECS=Update Demo) | slicelet |",
				"| " + specCLI2 + " | slicelet | failed | data.json |"},
			[]string{"Re-runs of chosen specs"}},
		{"a part missing: re-runs only", []ShardRun{p2},
			[]string{"| sig-cli | 17 | not run | not run |", "Re-runs of chosen specs (`SPECS=`; they do not count in the tables above) (1):"},
			[]string{"part 2/2 (SPECS"}},
		{"parts overlapping: re-runs only", []ShardRun{p1, part("2/2", "version|Update", day, Results{specCLI1: {Status: "passed"}, specCLI2: {Status: "passed"}})},
			[]string{"| sig-cli | 17 | not run | not run |"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ShardSection(tc.runs, nil, "")
			for _, w := range tc.wants {
				if !strings.Contains(got, w) {
					t.Errorf("section lacks %q:\n%s", w, got)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("section has %q:\n%s", n, got)
				}
			}
		})
	}
	if _, _, err := ParsePart("3/2"); err == nil {
		t.Error("part 3/2 accepted")
	}
	if _, _, err := ParsePart("1/1"); err == nil {
		t.Error("part 1/1 accepted")
	}
}

func TestWriteReadRuns(t *testing.T) {
	dir := t.TempDir()
	run := ShardRun{Nodes: []string{"slicelet", "slicelet"}, SIGs: []string{"sig-cli"}, Focus: `\[(sig-cli)\].*\[Conformance\]`,
		Started: time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC), Duration: "1m0s", Procs: 2, Commit: "abc",
		NodeVersions: map[string]string{"slicelet-1": "v1.37.2+slicelet.abc"}, Specs: Results{specCLI1: {Status: "failed", Message: "m"}}}
	path, err := WriteRun(dir, run)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(path, "/slicelet_sig-cli.json") {
		t.Errorf("path %s, want .../slicelet_sig-cli.json", path)
	}
	runs, err := ReadRuns(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || !reflect.DeepEqual(runs[0], run) {
		t.Fatalf("read %+v, want %+v", runs, run)
	}
}

// TestShardNotesCompile: every note's pattern is a valid expression that names a spec.
func TestShardNotesCompile(t *testing.T) {
	for _, n := range ShardNotes {
		if _, err := regexp.Compile(n.Pattern); err != nil || n.Why == "" {
			t.Errorf("note %q: %v (why %q)", n.Pattern, err, n.Why)
		}
	}
}

// TestClusterImages: the multi-node images: kitten and nautilus on agnhost's base serving their
// data.json, every agnhost-based image with the tools (the real curl instead of the wget
// script), and glibc-dns-testing with them and coredns.
func TestClusterImages(t *testing.T) {
	tools := &ClusterTools{Files: []critest.File{{Path: "usr/bin/curl", Source: "/usr/bin/curl"}, {Path: "usr/bin/dig", Source: "/usr/bin/dig"},
		{Path: "usr/bin/dash", Source: "/usr/bin/dash"}}, CoreDNS: "/addons/coredns", Shell: "/usr/bin/dash",
		SampleAPIServer: "/bin/sample-apiserver", Etcd: "/peer/etcd", EtcdFiles: []critest.File{{Path: "lib/libc.so.6", Source: "/lib/libc.so.6"}}}
	imgs := ClusterImages("/bin/busybox", "/peer/agnhost", "/peer/nnp", []string{"sh", "nc", "wget"}, "/k8s/test/images", tools)
	byName := map[string]critest.Image{}
	for _, img := range imgs {
		byName[img.Name] = img
	}
	has := func(img critest.Image, path string) (critest.File, int) {
		n, found := 0, critest.File{}
		for _, f := range img.Files {
			if f.Path == path {
				n++
				found = f
			}
		}
		return found, n
	}
	for _, name := range []string{AgnhostImage, AgnhostPrevImage, PauseImage, KittenImage, NautilusImage} {
		img, ok := byName[name]
		if !ok {
			t.Fatalf("no image %s", name)
		}
		if f, n := has(img, "usr/bin/curl"); n != 1 || f.Source != "/usr/bin/curl" {
			t.Errorf("%s: usr/bin/curl %d times (%+v), want the machine's once", name, n, f)
		}
		if _, n := has(img, "usr/bin/dig"); n != 1 {
			t.Errorf("%s: no dig", name)
		}
		// /bin/sh is the shell of the tools, not busybox's (whose ash would run its own nc).
		if f, n := has(img, "bin/sh"); n != 1 || f.Link != "/usr/bin/dash" || !reflect.DeepEqual(img.Applets, []string{"nc", "wget"}) {
			t.Errorf("%s: bin/sh %+v (%d), applets %v; want a link to /usr/bin/dash and busybox without sh", name, f, n, img.Applets)
		}
	}
	if f, n := has(byName[AgnhostImage], "localhost.crt"); n != 1 || f.Source != "/k8s/test/images/agnhost/porter/localhost.crt" {
		t.Errorf("agnhost's localhost.crt: %+v", f)
	}
	if f, n := has(byName[AgnhostImage], "coredns"); n != 1 || f.Source != "/addons/coredns" {
		t.Errorf("agnhost's coredns: %+v", f)
	}
	if f, n := has(byName[KittenImage], "data.json"); n != 1 || f.Source != "/k8s/test/images/kitten/html/data.json" {
		t.Errorf("kitten's data.json: %+v", f)
	}
	if got := byName[NautilusImage].Cmd; !reflect.DeepEqual(got, []string{"test-webserver"}) {
		t.Errorf("nautilus's command %v, want test-webserver", got)
	}
	g, ok := byName[GlibcDNSTestingImage]
	if !ok {
		t.Fatal("no glibc-dns-testing image")
	}
	if f, n := has(g, "coredns"); n != 1 || f.Source != "/addons/coredns" {
		t.Errorf("glibc-dns-testing's coredns: %+v", f)
	}
	if sa := byName[SampleAPIServerImage]; !reflect.DeepEqual(sa.Entrypoint, []string{"/sample-apiserver"}) {
		t.Errorf("sample-apiserver's entrypoint %v, want /sample-apiserver", sa.Entrypoint)
	} else if f, n := has(sa, "sample-apiserver"); n != 1 || f.Source != "/bin/sample-apiserver" {
		t.Errorf("sample-apiserver's binary: %+v", f)
	}
	if f, n := has(byName[EtcdImage], "usr/local/bin/etcd"); n != 1 || f.Source != "/peer/etcd" {
		t.Errorf("etcd's /usr/local/bin/etcd: %+v", f)
	}
	if _, n := has(byName[EtcdImage], "lib/libc.so.6"); n != 1 {
		t.Error("etcd's image without its libraries")
	}
	if _, n := has(byName[BusyboxImage], "usr/bin/dig"); n != 0 || !reflect.DeepEqual(byName[BusyboxImage].Applets, []string{"sh", "nc", "wget"}) {
		t.Error("the busybox image got the tools")
	}
	// Without tools: the one-node images, the wget script as curl.
	for _, img := range ClusterImages("/bin/busybox", "/peer/agnhost", "/peer/nnp", nil, "", nil) {
		if img.Name == AgnhostImage {
			if f, _ := has(img, "usr/bin/curl"); string(f.Data) != curlScript {
				t.Errorf("agnhost's curl without tools: %+v", f)
			}
		}
		if img.Name == KittenImage || img.Name == GlibcDNSTestingImage || img.Name == SampleAPIServerImage || img.Name == EtcdImage {
			t.Errorf("%s without its sources", img.Name)
		}
	}
}
