package csi

import (
	"context"
	"errors"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/mock/service"
	"k8s.io/utils/ptr"
)

func TestUsageOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		resp    *csipb.NodeGetVolumeStatsResponse
		want    Usage
		wantErr string
	}{
		{name: "no usage", resp: &csipb.NodeGetVolumeStatsResponse{}, wantErr: "usage is nil"},
		{name: "bytes and inodes", resp: &csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{
			{Unit: csipb.VolumeUsage_BYTES, Total: 100, Available: 60, Used: 40},
			{Unit: csipb.VolumeUsage_INODES, Total: 10, Available: 7, Used: 3},
		}}, want: Usage{Capacity: 100, Available: 60, Used: 40, Inodes: 10, InodesFree: 7, InodesUsed: 3}},
		{name: "bytes only: inodes 0", resp: &csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{
			{Unit: csipb.VolumeUsage_BYTES, Total: 100},
		}}, want: Usage{Capacity: 100}},
		{name: "unknown unit and nil entry ignored", resp: &csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{
			nil, {Unit: csipb.VolumeUsage_UNKNOWN, Total: 5}, {Unit: csipb.VolumeUsage_INODES, Total: 9, Available: 9},
		}}, want: Usage{Inodes: 9, InodesFree: 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := usageOf(tc.resp)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("usageOf = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestVolumeStats: a published volume's stats come from the driver's NodeGetVolumeStats at
// its publish path (the mock reports the volume's capacity, 100 GiB); a path that holds no
// published volume is an error; a driver without GET_VOLUME_STATS says it does not support
// them.
func TestVolumeStats(t *testing.T) {
	e := newEnv(t, service.Config{DisableAttach: true})
	e.api.drivers = map[string]*storagev1.CSIDriver{mockDriver: {Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}}}
	ctx := context.Background()
	vol, _ := FromPod(testPod("a", nil), &v1.Volume{Name: "data"}, csiPV("pv-data", "1"), false)
	path, err := e.m.SetUp(ctx, testPod("a", nil), vol)
	if err != nil {
		t.Fatal(err)
	}
	got, driver, err := e.m.VolumeStats(ctx, path)
	if err != nil || driver != mockDriver {
		t.Fatalf("stats: driver %q, %v", driver, err)
	}
	if want := (Usage{Capacity: 100 << 30}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	if err := e.m.TearDown(ctx, "uid-a"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.m.VolumeStats(ctx, path); err == nil {
		t.Error("stats of a torn-down volume: no error")
	}

	// A driver whose node service does not offer GET_VOLUME_STATS.
	path, err = e.m.SetUp(ctx, testPod("b", nil), vol)
	if err != nil {
		t.Fatal(err)
	}
	e.driver.noStats.Store(true)
	if _, _, err := e.m.VolumeStats(ctx, path); !errors.Is(err, ErrStatsNotSupported) {
		t.Errorf("stats without the capability: %v, want ErrStatsNotSupported", err)
	}
}
