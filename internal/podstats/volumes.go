package podstats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/eviction"
)

// DefaultVolumeStatsPeriod is how often the pods' volumes are measured: the kubelet's
// --volume-stats-agg-period (1 minute), the period of its volume stat calculators.
const DefaultVolumeStatsPeriod = time.Minute

// ErrVolumeStatsNotSupported is a volume whose driver has no stats to give (a CSI driver
// without GET_VOLUME_STATS): the volume is left out of the stats, and that is not logged as a
// failure, as the kubelet's volume.IsNotSupported.
var ErrVolumeStatsNotSupported = errors.New("volume stats not supported")

// Volume is one of a pod's volumes set up on the node.
type Volume struct {
	// Name is the pod's volume name.
	Name string
	// Plugin is the kubelet's volume plugin behind it (kubernetes.io/empty-dir, csi, ...;
	// a claim's: its persistent volume's), which decides how it is measured.
	Plugin string
	// Path is where it is on the node.
	Path string
	// Claim names the claim behind it (a persistentVolumeClaim or a generic ephemeral
	// volume's); "" for the others.
	Claim string
	// LocalEphemeral is the kubelet's IsLocalEphemeralVolume (an emptyDir on disk, a
	// configMap, a gitRepo): the summary lists these first.
	LocalEphemeral bool
	// Block: a raw block volume (volumeMode Block), Path its device: measured by the
	// kubelet's block volume mappers' metrics (a local volume's device size; a CSI driver's
	// NodeGetVolumeStats of the device).
	Block bool
}

// VolumeUsage is what a volume holds, in the kubelet's volume.Metrics terms: bytes and inodes,
// each capacity, available and used.
type VolumeUsage struct {
	Capacity, Available, Used      int64
	Inodes, InodesFree, InodesUsed int64
}

// VolumeStat is one volume's measurement.
type VolumeStat struct {
	Volume
	// At is when it was measured.
	At time.Time
	VolumeUsage
}

// PodVolumeStats are a pod's measured volumes: the local ephemeral ones first, then the
// others, each in the pod's order.
type PodVolumeStats struct {
	Namespace, Name string
	UID             types.UID
	Volumes         []VolumeStat
}

// volumeSource is how a volume is measured: the metrics provider of the kubelet's volume
// plugin.
type volumeSource int

const (
	// sourceNone: the plugin reports no stats (volume.MetricsNil: hostPath, a hostPath
	// persistent volume, an image volume).
	sourceNone volumeSource = iota
	// sourceDu: what the files of the volume's directory use, and the capacity of its
	// filesystem (volume.NewMetricsDu: emptyDir, configMap, secret, downwardAPI, projected).
	sourceDu
	// sourceStatFS: the filesystem the volume is (volume.NewMetricsStatFS: local).
	sourceStatFS
	// sourceCSI: the driver's NodeGetVolumeStats (pkg/volume/csi metricsCsi).
	sourceCSI
	// sourceBlock: the size of a block device, the capacity only (volume.NewMetricsBlock:
	// the local volume plugin's block mapper).
	sourceBlock
)

// volumeSourceOf is how the kubelet's volume plugin named plugin measures its volumes (its
// block volumes when block: the CSI and local plugins' block mappers measure theirs).
func volumeSourceOf(plugin string, block bool) volumeSource {
	if block {
		switch plugin {
		case "kubernetes.io/local-volume":
			return sourceBlock
		case "kubernetes.io/csi":
			return sourceCSI
		}
		return sourceNone
	}
	switch plugin {
	case "kubernetes.io/empty-dir", "kubernetes.io/configmap", "kubernetes.io/secret", "kubernetes.io/downward-api",
		"kubernetes.io/projected", "kubernetes.io/git-repo":
		return sourceDu
	case "kubernetes.io/local-volume":
		return sourceStatFS
	case "kubernetes.io/csi":
		return sourceCSI
	}
	return sourceNone
}

// CSIVolumeStats asks a CSI volume's driver what the volume published at path (a block
// volume's: the pod's link to its device) holds, and
// names the driver (kubelet_volume_metric_collection_duration_seconds's metric_source). A
// driver that cannot tell gives ErrVolumeStatsNotSupported.
type CSIVolumeStats func(ctx context.Context, path string) (VolumeUsage, string, error)

// VolumeStatsOptions configure VolumeStats. Pods and Volumes are required.
type VolumeStatsOptions struct {
	// Pods lists the active pods.
	Pods PodLister
	// Volumes lists a pod's volumes set up on the node.
	Volumes func(pod *v1.Pod) []Volume
	// CSI measures CSI volumes; nil: they have no stats.
	CSI CSIVolumeStats
	// Observe, if set, is told how long each measurement took, by metric source (du,
	// statfs, or the CSI driver's name: the kubelet's
	// kubelet_volume_metric_collection_duration_seconds).
	Observe func(source string, d time.Duration)
	// Period is the time between measurements; 0 means DefaultVolumeStatsPeriod.
	Period time.Duration
	// MaxEntries bounds the entries one volume's walk visits; 0 means
	// eviction.DefaultStorageMaxEntries. A walk at its bound gives a lower bound.
	MaxEntries int
	// Clock is the clock; nil means the real one.
	Clock clock.WithTicker
	// Logger receives measurement failures at Debug; nil discards.
	Logger *slog.Logger

	// statFS and du are the filesystem (tests replace them): nil means statfs(2) and
	// eviction.MeasureDir.
	statFS    func(path string) (VolumeUsage, error)
	du        func(ctx context.Context, path string, maxEntries int) (eviction.DiskUsage, error)
	blockSize func(path string) (int64, error)
}

// VolumeStats measures the volumes of every active pod at a period, as the kubelet's volume
// stat calculators do, and keeps the latest measurement of each pod for the stats summary and
// the kubelet_volume_stats_* families. A volume that cannot be measured is left out until it
// can be.
type VolumeStats struct {
	o     VolumeStatsOptions
	clock clock.WithTicker
	log   *slog.Logger

	mu     sync.Mutex
	latest map[types.UID]PodVolumeStats
}

// NewVolumeStats returns a VolumeStats; Run starts it.
func NewVolumeStats(o VolumeStatsOptions) (*VolumeStats, error) {
	if o.Pods == nil || o.Volumes == nil {
		return nil, errors.New("volume stats: pods and volumes are required")
	}
	if o.Period < 0 {
		return nil, fmt.Errorf("volume stats: period %v is negative", o.Period)
	}
	if o.Period == 0 {
		o.Period = DefaultVolumeStatsPeriod
	}
	if o.statFS == nil {
		o.statFS = statFS
	}
	if o.blockSize == nil {
		o.blockSize = blockSize
	}
	if o.du == nil {
		o.du = func(ctx context.Context, path string, maxEntries int) (eviction.DiskUsage, error) {
			u, _, err := eviction.MeasureDir(ctx, path, maxEntries)
			return u, err
		}
	}
	s := &VolumeStats{o: o, clock: o.Clock, log: o.Logger, latest: map[types.UID]PodVolumeStats{}}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// Run measures at once and then every period until ctx ends.
func (s *VolumeStats) Run(ctx context.Context) {
	t := s.clock.NewTicker(s.o.Period)
	defer t.Stop()
	for {
		s.Measure(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// Measure measures the volumes of every active pod now, and forgets the pods no longer
// active.
func (s *VolumeStats) Measure(ctx context.Context) {
	pods := s.o.Pods.ActivePods()
	out := make(map[types.UID]PodVolumeStats, len(pods))
	for _, ap := range pods {
		if ctx.Err() != nil {
			return
		}
		p := ap.Pod
		ps := PodVolumeStats{Namespace: p.Namespace, Name: p.Name, UID: p.UID}
		var persistent []VolumeStat
		for _, v := range s.o.Volumes(p) {
			u, ok := s.measure(ctx, p, v)
			if !ok {
				continue
			}
			st := VolumeStat{Volume: v, At: s.clock.Now(), VolumeUsage: u}
			if v.LocalEphemeral {
				ps.Volumes = append(ps.Volumes, st)
			} else {
				persistent = append(persistent, st)
			}
		}
		ps.Volumes = append(ps.Volumes, persistent...)
		out[p.UID] = ps
	}
	s.mu.Lock()
	s.latest = out
	s.mu.Unlock()
}

// measure measures one volume of pod by its plugin's way; false: it has no stats now.
func (s *VolumeStats) measure(ctx context.Context, pod *v1.Pod, v Volume) (VolumeUsage, bool) {
	start := s.clock.Now()
	var (
		u      VolumeUsage
		source string
		err    error
	)
	switch volumeSourceOf(v.Plugin, v.Block) {
	case sourceNone:
		return VolumeUsage{}, false
	case sourceDu:
		source = "du"
		var du eviction.DiskUsage
		if du, err = s.o.du(ctx, v.Path, s.o.MaxEntries); err == nil {
			if u, err = s.o.statFS(v.Path); err == nil {
				u.Used, u.InodesUsed = du.Bytes, du.Inodes
			}
		}
	case sourceStatFS:
		source = "statfs"
		u, err = s.o.statFS(v.Path)
	case sourceBlock:
		source = "block"
		u.Capacity, err = s.o.blockSize(v.Path)
	case sourceCSI:
		if s.o.CSI == nil {
			return VolumeUsage{}, false
		}
		u, source, err = s.o.CSI(ctx, v.Path)
	}
	if s.o.Observe != nil && source != "" {
		s.o.Observe(source, s.clock.Since(start))
	}
	if err != nil {
		if !errors.Is(err, ErrVolumeStatsNotSupported) {
			s.log.Debug("volume stats failed", "pod", pod.Namespace+"/"+pod.Name, "pod_uid", string(pod.UID), "volume", v.Name, "error", err)
		}
		return VolumeUsage{}, false
	}
	return u, true
}

// Pod is the latest measurement of the pod uid's volumes; false: none yet (or s is nil).
func (s *VolumeStats) Pod(uid types.UID) (PodVolumeStats, bool) {
	if s == nil {
		return PodVolumeStats{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ps, ok := s.latest[uid]
	return ps, ok
}

// Pods are the latest measurements of every pod's volumes (none when s is nil).
func (s *VolumeStats) Pods() []PodVolumeStats {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]PodVolumeStats, 0, len(s.latest))
	for _, ps := range s.latest {
		out = append(out, ps)
	}
	return out
}

// blockSize is the size of the block device at path, found by seeking to its end (the
// kubelet's metricsBlock.getBlockInfo).
func blockSize(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("unable to open device %q: %w", path, err)
	}
	defer f.Close()
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, fmt.Errorf("failed to detect size of %q: %w", path, err)
	}
	return end, nil
}
