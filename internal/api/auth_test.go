package api

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestAuthorize(t *testing.T) {
	for _, tc := range []struct {
		name   string
		peer   Peer
		groups []uint32
		ok     bool
	}{
		{"root", Peer{UID: 0, GID: 0}, nil, true},
		{"root with another gid", Peer{UID: 0, GID: 100}, nil, true},
		{"primary group", Peer{UID: 1000, GID: 4242}, nil, true},
		{"supplementary group", Peer{UID: 1000, GID: 1000}, []uint32{27, 4242}, true},
		{"stranger", Peer{UID: 1000, GID: 1000}, []uint32{27, 100}, false},
		{"stranger without groups", Peer{UID: 65534, GID: 65534}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := authorize(tc.peer, tc.groups, 4242, "slicelet")
			if tc.ok != (err == nil) {
				t.Fatalf("authorize = %v, want ok=%v", err, tc.ok)
			}
			if err != nil {
				want := `permission denied: uid ` + strconv.FormatUint(uint64(tc.peer.UID), 10) + ` is neither root nor in group "slicelet"`
				if err.Error() != want || !errors.Is(err, errPermission) {
					t.Errorf("error = %q, want %q", err, want)
				}
			}
		})
	}
}

func TestProcGroups(t *testing.T) {
	root := t.TempDir()
	write := func(pid, status string) {
		if err := os.MkdirAll(filepath.Join(root, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, pid, "status"), []byte(status), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("10", "Name:\tsh\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nGroups:\t4 27 4242 \n")
	write("11", "Name:\tsh\nUid:\t1000\t1000\t1000\t1000\nGroups:\t\n")
	write("12", "Name:\tsh\nUid:\t1001\t1001\t1001\t1001\nGroups:\t4242\n")
	write("13", "Uid:\t1000\t1000\t1000\t1000\nGroups:\t4 x\n")
	for _, tc := range []struct {
		name string
		pid  int32
		want []uint32
		err  string
	}{
		{"groups", 10, []uint32{4, 27, 4242}, ""},
		{"no groups", 11, nil, ""},
		{"pid reused by another user", 12, nil, "process no longer runs as uid 1000"},
		{"garbage", 13, nil, `Groups: "x"`},
		{"gone", 14, nil, "no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := procGroups(root, tc.pid, 1000)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("procGroups = %v, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("procGroups = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestCountPods(t *testing.T) {
	pod := func(phase v1.PodPhase, qos v1.PodQOSClass, reason string, ran bool) v1.Pod {
		p := v1.Pod{Status: v1.PodStatus{Phase: phase, QOSClass: qos, Reason: reason}}
		if ran {
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c"}}
		}
		return p
	}
	for _, tc := range []struct {
		name string
		pods []v1.Pod
		want PodCounts
	}{
		{"none", nil, PodCounts{Max: 110, Phases: map[v1.PodPhase]int{}, QOS: map[v1.PodQOSClass]int{}}},
		{"mixed", []v1.Pod{
			pod(v1.PodRunning, v1.PodQOSGuaranteed, "", true),
			pod("", v1.PodQOSBurstable, "", false),
			pod(v1.PodSucceeded, v1.PodQOSBestEffort, "", true),
			pod(v1.PodFailed, v1.PodQOSBurstable, "OutOfmemory", false),
			pod(v1.PodFailed, v1.PodQOSBurstable, "Error", true),
		}, PodCounts{Total: 5, Active: 2, Max: 110, Rejected: 1,
			Phases: map[v1.PodPhase]int{v1.PodRunning: 1, v1.PodPending: 1, v1.PodSucceeded: 1, v1.PodFailed: 2},
			QOS:    map[v1.PodQOSClass]int{v1.PodQOSGuaranteed: 1, v1.PodQOSBurstable: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CountPods(tc.pods, 110)
			if got.Total != tc.want.Total || got.Active != tc.want.Active || got.Max != tc.want.Max || got.Rejected != tc.want.Rejected ||
				!maps.Equal(got.Phases, tc.want.Phases) || !maps.Equal(got.QOS, tc.want.QOS) {
				t.Errorf("CountPods = %+v, want %+v", got, tc.want)
			}
		})
	}
}
