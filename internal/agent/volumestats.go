package agent

import (
	"context"
	"errors"
	"log/slog"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/metrics"
	"github.com/slicelet/slicelet/internal/pods/csi"
	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/internal/podstats"
)

// newVolumeStats measures the pods' volumes set up by the worker, each by its plugin's way
// (internal/podstats VolumeStats), for the stats summary and the kubelet_volume_stats_*
// families; CSI volumes through their drivers in cluster mode.
func newVolumeStats(d *daemon, log *slog.Logger) (*podstats.VolumeStats, error) {
	w := d.prt.worker
	o := podstats.VolumeStatsOptions{Pods: d.ctrl, Observe: d.kubelet.VolumeStatDuration, Clock: d.clock, Logger: log.With("component", "volume-stats")}
	o.Volumes = podVolumesOf(w.StatsVolumes)
	if d.csi != nil {
		o.CSI = d.csi.volumeStats
	}
	return podstats.NewVolumeStats(o)
}

// volumeStats is what the driver of the CSI volume published at path says it holds.
func (p *csiPlugin) volumeStats(ctx context.Context, path string) (podstats.VolumeUsage, string, error) {
	u, driver, err := p.m.VolumeStats(ctx, path)
	if errors.Is(err, csi.ErrStatsNotSupported) {
		err = errors.Join(err, podstats.ErrVolumeStatsNotSupported)
	}
	return podstats.VolumeUsage{Capacity: u.Capacity, Available: u.Available, Used: u.Used,
		Inodes: u.Inodes, InodesFree: u.InodesFree, InodesUsed: u.InodesUsed}, driver, err
}

// claimVolumeStats are the measured volumes behind claims, for kubelet_volume_stats_*.
func claimVolumeStats(vs *podstats.VolumeStats) []metrics.ClaimVolumeStats {
	var out []metrics.ClaimVolumeStats
	for _, p := range vs.Pods() {
		for _, v := range p.Volumes {
			if v.Claim == "" {
				continue
			}
			out = append(out, metrics.ClaimVolumeStats{Namespace: p.Namespace, Claim: v.Claim,
				Capacity: float64(v.Capacity), Available: float64(v.Available), Used: float64(v.Used),
				Inodes: float64(v.Inodes), InodesFree: float64(v.InodesFree), InodesUsed: float64(v.InodesUsed)})
		}
	}
	return out
}

// podVolumesOf turns the worker's list of a pod's volumes into the volume stats' input.
func podVolumesOf(list func(*v1.Pod) []worker.StatsVolume) func(*v1.Pod) []podstats.Volume {
	return func(pod *v1.Pod) []podstats.Volume {
		vols := list(pod)
		out := make([]podstats.Volume, 0, len(vols))
		for _, v := range vols {
			out = append(out, podstats.Volume(v))
		}
		return out
	}
}
