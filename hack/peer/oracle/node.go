package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	cadvisorapi "github.com/google/cadvisor/lib/model"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	kubeletdefaults "k8s.io/kubernetes/pkg/kubelet/apis/config/v1beta1"
	kubeleteviction "k8s.io/kubernetes/pkg/kubelet/eviction"
	evictionapi "k8s.io/kubernetes/pkg/kubelet/eviction/api"
	"k8s.io/kubernetes/pkg/kubelet/nodestatus"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/slices"
)

// configDefaults compares slicelet's defaults for the keys that map to KubeletConfiguration
// fields with the kubelet's (v1beta1 SetDefaults_KubeletConfiguration, and for evictionHard the
// kubelet's DefaultEvictionHard, which its config loader applies when the file has none).
func configDefaults() []difference {
	var k kubeletconfigv1beta1.KubeletConfiguration
	kubeletdefaults.SetDefaults_KubeletConfiguration(&k)
	s := config.Default()
	kf, sf := facts{}, facts{}
	pair := func(key, slicelet, kubelet string) { sf[key], kf[key] = slicelet, kubelet }
	pair("node.max_pods", strconv.Itoa(int(s.Node.MaxPods)), strconv.Itoa(int(k.MaxPods)))
	pair("node.enforce_node_allocatable", strings.Join(s.Node.EnforceNodeAllocatable, ","), strings.Join(k.EnforceNodeAllocatable, ","))
	pair("cgroups.per_qos", strconv.FormatBool(s.Cgroups.PerQOS), strconv.FormatBool(*k.CgroupsPerQOS))
	pair("cgroups.cpu_cfs_quota", strconv.FormatBool(s.Cgroups.CPUCFSQuota), strconv.FormatBool(*k.CPUCFSQuota))
	pair("cgroups.cpu_cfs_quota_period", s.Cgroups.CPUCFSQuotaPeriod.String(), k.CPUCFSQuotaPeriod.Duration.String())
	pair("cgroups.pod_pids_limit", strconv.FormatInt(s.Cgroups.PodPidsLimit, 10), strconv.FormatInt(*k.PodPidsLimit, 10))
	pair("cgroups.memory_reservation_policy", string(s.Cgroups.MemoryReservationPolicy), string(k.MemoryReservationPolicy))
	pair("eviction.hard", mapString(s.Eviction.Hard), mapString(kubeleteviction.DefaultEvictionHard))
	pair("eviction.soft", mapString(s.Eviction.Soft), mapString(k.EvictionSoft))
	pair("eviction.minimum_reclaim", mapString(s.Eviction.MinimumReclaim), mapString(k.EvictionMinimumReclaim))
	pair("eviction.pressure_transition_period", s.Eviction.PressureTransitionPeriod.String(), k.EvictionPressureTransitionPeriod.Duration.String())
	pair("gc.images.high_threshold_percent", strconv.Itoa(s.GC.Images.HighThresholdPercent), strconv.Itoa(int(*k.ImageGCHighThresholdPercent)))
	pair("gc.images.low_threshold_percent", strconv.Itoa(s.GC.Images.LowThresholdPercent), strconv.Itoa(int(*k.ImageGCLowThresholdPercent)))
	pair("gc.images.minimum_age", s.GC.Images.MinimumAge.String(), k.ImageMinimumGCAge.Duration.String())
	pair("gc.images.maximum_age", s.GC.Images.MaximumAge.String(), k.ImageMaximumGCAge.Duration.String())
	return compare(sf, kf)
}

// evictionCase is one generated node: eviction settings, capacity and reservations.
type evictionCase struct {
	allocatable                       []string
	hard, soft, softGrace, minReclaim map[string]string
	cpuCores                          int
	memory, ephemeral, hugePages2Mi   int64
	systemReserved, kubeReserved      v1.ResourceList
}

var (
	thresholdSignals = []string{"memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "containerfs.available", "pid.available", "allocatableMemory.available", "cpu.available"}
	thresholdValues  = []string{"100Mi", "10%", "0%", "100%", "5.5%", "-1", "0", "abc", "1Gi", "101%", "-5%", "1e3", "500Ki", "0.5%", "1000", "12.3456%"}
	graceValues      = []string{"1m", "30s", "0s", "-1s", "soon", "1m30s"}
	reclaimValues    = []string{"0", "0%", "5%", "100Mi", "-1", "much", "1.5%"}
	reservedCPU      = []string{"100m", "0", "250m", "1", "1500m"}
	reservedMemory   = []string{"100Mi", "0", "1Gi", "500M", "1.5Gi"}
)

// genEvictionCase returns node case index of the stream seeded by seed.
func genEvictionCase(seed uint64, index int) evictionCase {
	r := rand.New(rand.NewPCG(seed^0x6e6f6465, uint64(index)))
	pick := func(l []string) string { return l[r.IntN(len(l))] }
	stmts := func(p float64, values []string) map[string]string {
		m := map[string]string{}
		for _, s := range thresholdSignals {
			if r.Float64() < p {
				m[s] = pick(values)
			}
		}
		return m
	}
	c := evictionCase{
		hard:       stmts(0.35, thresholdValues),
		soft:       stmts(0.1, thresholdValues),
		minReclaim: stmts(0.05, reclaimValues),
		cpuCores:   1 + r.IntN(64),
		memory:     (1 + r.Int64N(256)) << 30 / int64(1+r.IntN(3)),
		ephemeral:  (10 + r.Int64N(1000)) << 30,
	}
	c.softGrace = map[string]string{}
	for s := range c.soft {
		if r.Float64() < 0.9 {
			c.softGrace[s] = pick(graceValues)
		}
	}
	if r.Float64() < 0.7 {
		c.allocatable = []string{"pods"}
	}
	if r.Float64() < 0.2 {
		c.hugePages2Mi = int64(r.IntN(512))
	}
	reserved := func() v1.ResourceList {
		rl := v1.ResourceList{}
		if r.Float64() < 0.6 {
			rl[v1.ResourceCPU] = resource.MustParse(pick(reservedCPU))
		}
		if r.Float64() < 0.6 {
			rl[v1.ResourceMemory] = resource.MustParse(pick(reservedMemory))
		}
		if r.Float64() < 0.2 {
			rl[v1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
		}
		return rl
	}
	c.systemReserved, c.kubeReserved = reserved(), reserved()
	return c
}

// capacity is the case's capacity in the node status' terms.
func (c evictionCase) capacity() v1.ResourceList {
	return v1.ResourceList{
		v1.ResourceCPU:              *resource.NewQuantity(int64(c.cpuCores), resource.DecimalSI),
		v1.ResourceMemory:           *resource.NewQuantity(c.memory, resource.BinarySI),
		v1.ResourceEphemeralStorage: *resource.NewQuantity(c.ephemeral, resource.BinarySI),
		"hugepages-2Mi":             *resource.NewQuantity(c.hugePages2Mi<<21, resource.BinarySI),
	}
}

// compareEvictionCase decides one node case on both sides: threshold parsing (accepted or not,
// and the thresholds), then node allocatable with the hard-eviction reservation.
func compareEvictionCase(c evictionCase) []difference {
	kt, kerr := kubeleteviction.ParseThresholdConfig(c.allocatable, c.hard, c.soft, c.softGrace, c.minReclaim)
	st, serr := eviction.ParseThresholdConfig(c.allocatable, c.hard, c.soft, c.softGrace, c.minReclaim)
	if (kerr == nil) != (serr == nil) {
		return []difference{{field: "eviction.accepted", slicelet: errString(serr), kubelet: errString(kerr)}}
	}
	if kerr != nil {
		return nil
	}
	sf, kf := facts{}, facts{}
	var ks, ss []string
	for _, t := range kt {
		ks = append(ks, thresholdString(string(t.Signal), string(t.Operator), t.Value.Quantity, t.Value.Percentage, t.GracePeriod, minReclaim(t.MinReclaim)))
	}
	for _, t := range st {
		var mrs string
		if mr := t.MinReclaim; mr != nil {
			mrs = valueString(mr.Quantity, mr.Percentage)
		}
		ss = append(ss, thresholdString(string(t.Signal), string(t.Operator), t.Value.Quantity, t.Value.Percentage, t.GracePeriod, mrs))
	}
	sort.Strings(ks)
	sort.Strings(ss)
	sf["eviction.thresholds"], kf["eviction.thresholds"] = strings.Join(ss, "; "), strings.Join(ks, "; ")

	for name, q := range kubeletAllocatable(c) {
		kf["allocatable."+string(name)] = q.String()
	}
	// slicelet's path: the configuration's slice manager settings, then node allocatable.
	cfg := config.Default()
	cfg.Eviction.Hard, cfg.Eviction.Soft, cfg.Eviction.SoftGracePeriod, cfg.Eviction.MinimumReclaim = c.hard, c.soft, c.softGrace, c.minReclaim
	cfg.Node.SystemReserved, cfg.Node.KubeReserved = c.systemReserved, c.kubeReserved
	sc := slices.Capacity{CPU: int64(c.cpuCores) * 1000, Memory: c.memory, EphemeralStorage: c.ephemeral, HugePages: map[int64]int64{2 << 20: c.hugePages2Mi << 21}}
	mcfg, err := cfg.SlicesConfig(sc, false)
	if err != nil {
		sf["allocatable"] = "error: " + err.Error()
	}
	for name, q := range slices.NodeAllocatable(sc, mcfg.Node.SystemReserved, mcfg.Node.KubeReserved, mcfg.Node.HardEviction) {
		sf["allocatable."+string(name)] = q.String()
	}
	return compare(sf, kf)
}

func minReclaim(v *evictionapi.ThresholdValue) string {
	if v == nil {
		return ""
	}
	return valueString(v.Quantity, v.Percentage)
}

func valueString(q *resource.Quantity, p float32) string {
	if q != nil {
		return q.String()
	}
	return strconv.FormatFloat(float64(p), 'g', -1, 32)
}

func thresholdString(signal, op string, q *resource.Quantity, p float32, grace time.Duration, minReclaim string) string {
	return fmt.Sprintf("%s %s %s grace=%s reclaim=%s", signal, op, valueString(q, p), grace, minReclaim)
}

func errString(err error) string {
	if err == nil {
		return "yes"
	}
	return "no (" + oneLine(err.Error()) + ")"
}

// kubeletAllocatable is the node status' allocatable as the kubelet's MachineInfo setter
// computes it (pkg/kubelet/nodestatus), with the reservation of the container manager's
// GetNodeAllocatableReservation: systemReserved + kubeReserved + the hard eviction
// reservation. That last one (cm's hardEvictionReservation) is unexported, so it is composed
// here from exported pieces: evictionHard alone parsed by ParseThresholdConfig, as
// cmd/kubelet/app/server.go does for the container manager, and each LessThan
// memory.available (→ memory) and nodefs.available (→ ephemeral-storage) threshold resolved
// with GetThresholdQuantity.
func kubeletAllocatable(c evictionCase) v1.ResourceList {
	capacity := c.capacity()
	thresholds, err := kubeleteviction.ParseThresholdConfig([]string{}, c.hard, nil, nil, nil)
	if err != nil {
		return v1.ResourceList{"error": resource.Quantity{}}
	}
	reserve := v1.ResourceList{}
	for _, t := range thresholds {
		if t.Operator != evictionapi.OpLessThan {
			continue
		}
		switch t.Signal {
		case evictionapi.SignalMemoryAvailable:
			cp := capacity[v1.ResourceMemory]
			reserve[v1.ResourceMemory] = *evictionapi.GetThresholdQuantity(t.Value, &cp)
		case evictionapi.SignalNodeFsAvailable:
			cp := capacity[v1.ResourceEphemeralStorage]
			reserve[v1.ResourceEphemeralStorage] = *evictionapi.GetThresholdQuantity(t.Value, &cp)
		}
	}
	reservation := func() v1.ResourceList {
		out := v1.ResourceList{}
		for name := range capacity {
			v := resource.NewQuantity(0, resource.DecimalSI)
			v.Add(c.systemReserved[name])
			v.Add(c.kubeReserved[name])
			v.Add(reserve[name])
			if !v.IsZero() {
				out[name] = *v
			}
		}
		return out
	}
	info := &cadvisorapi.MachineInfo{NumCores: c.cpuCores, MemoryCapacity: uint64(c.memory)}
	info.HugePages = []cadvisorapi.HugePagesInfo{{PageSize: 2048, NumPages: uint64(c.hugePages2Mi)}}
	setter := nodestatus.MachineInfo("oracle", 110, 0,
		func() (*cadvisorapi.MachineInfo, error) { return info, nil },
		func(klog.Logger, bool) v1.ResourceList {
			return v1.ResourceList{v1.ResourceEphemeralStorage: capacity[v1.ResourceEphemeralStorage]}
		},
		func(klog.Logger) (v1.ResourceList, v1.ResourceList, []string) { return nil, nil, nil },
		reservation,
		func(string, string, string) {},
		func() *bool { return nil },
		true,
	)
	node := &v1.Node{}
	if err := setter(context.Background(), node); err != nil {
		return v1.ResourceList{"error": resource.Quantity{}}
	}
	out := maps.Clone(node.Status.Allocatable)
	delete(out, v1.ResourcePods)
	return out
}
