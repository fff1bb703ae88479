package csi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// TestTokenRequests: a driver whose CSIDriver has tokenRequests gets the pod's service
// account token of each audience, with its expiry, as the kubelet gives it: a JSON object by
// audience in the volume context, or in the secrets with serviceAccountTokenInSecrets; a token
// that cannot be had keeps the volume from being published.
func TestTokenRequests(t *testing.T) {
	e := newEnv(t, service.Config{DisableAttach: true})
	exp := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	var asked []string
	e.m.opts.Tokens = func(pod *v1.Pod, audience string, seconds *int64) (authenticationv1.TokenRequestStatus, error) {
		if audience == "refused" {
			return authenticationv1.TokenRequestStatus{}, errors.New("serviceaccounts \"sa\" is forbidden")
		}
		asked = append(asked, fmt.Sprintf("%s/%s %q %v", pod.Namespace, pod.Spec.ServiceAccountName, audience, ptr.Deref(seconds, 0)))
		return authenticationv1.TokenRequestStatus{Token: "tok-" + audience, ExpirationTimestamp: metav1.NewTime(exp)}, nil
	}
	driver := func(inSecrets bool, reqs ...storagev1.TokenRequest) {
		e.api.drivers = map[string]*storagev1.CSIDriver{mockDriver: {Spec: storagev1.CSIDriverSpec{PodInfoOnMount: ptr.To(true),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral},
			TokenRequests:        reqs, ServiceAccountTokenInSecrets: ptr.To(inSecrets)}}}
	}
	ctx := context.Background()
	pod := testPod("t", nil)
	vol, _ := FromPod(pod, &v1.Volume{Name: "secrets", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: mockDriver}}}, nil, false)
	const wantTokens = `{"":{"token":"tok-","expirationTimestamp":"2026-11-29T09:00:00Z"},"vault":{"token":"tok-vault","expirationTimestamp":"2026-11-29T09:00:00Z"}}`

	driver(false, storagev1.TokenRequest{Audience: "vault", ExpirationSeconds: ptr.To[int64](600)}, storagev1.TokenRequest{})
	path, err := e.m.SetUp(ctx, pod, vol)
	if err != nil {
		t.Fatal(err)
	}
	e.driver.mu.Lock()
	req := e.driver.published[path]
	e.driver.mu.Unlock()
	if got := req.GetVolumeContext()[tokensKey]; got != wantTokens || len(req.GetSecrets()) != 0 {
		t.Errorf("volume context tokens %s, secrets %v; want %s in the volume context", got, req.GetSecrets(), wantTokens)
	}
	if want := []string{`ns/sa "vault" 600`, `ns/sa "" 0`}; !slices.Equal(asked, want) {
		t.Errorf("tokens asked %q, want %q", asked, want)
	}
	if err := e.m.TearDown(ctx, "uid-t"); err != nil {
		t.Fatal(err)
	}

	driver(true, storagev1.TokenRequest{Audience: "vault", ExpirationSeconds: ptr.To[int64](600)}, storagev1.TokenRequest{})
	if path, err = e.m.SetUp(ctx, pod, vol); err != nil {
		t.Fatal(err)
	}
	e.driver.mu.Lock()
	req = e.driver.published[path]
	e.driver.mu.Unlock()
	if got := req.GetSecrets()[tokensKey]; got != wantTokens || req.GetVolumeContext()[tokensKey] != "" {
		t.Errorf("secrets tokens %s, volume context %v; want %s in the secrets", got, req.GetVolumeContext(), wantTokens)
	}
	if err := e.m.TearDown(ctx, "uid-t"); err != nil {
		t.Fatal(err)
	}

	driver(false, storagev1.TokenRequest{Audience: "refused"})
	if _, err := e.m.SetUp(ctx, pod, vol); err == nil || !strings.Contains(err.Error(), `service account token for audience "refused": serviceaccounts "sa" is forbidden`) {
		t.Errorf("a token refused: %v", err)
	}
}
