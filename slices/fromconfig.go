package slices

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/units"
)

// ManagerConfigFrom derives the Manager's configuration from slicelet's configuration, the
// node's capacity and the cgroup mode: reservations, the hard-eviction reservation (the
// memory.available and nodefs.available hard thresholds resolved against capacity, which only
// the scheduler view of allocatable subtracts), enforcement, the pod resource options and the
// QoS options. MemoryQoS is on exactly on cgroup v2, as the kubelet's MemoryQoS gate (beta,
// on by default) does; memory_reservation_policy decides what it writes.
func ManagerConfigFrom(cfg *config.Config, capacity Capacity, mode units.Mode) (ManagerConfig, error) {
	enforce, err := ParseEnforcement(cfg.Node.EnforceNodeAllocatable)
	if err != nil {
		return ManagerConfig{}, err
	}
	thresholds, err := cfg.EvictionThresholds()
	if err != nil {
		return ManagerConfig{}, fmt.Errorf("eviction thresholds: %w", err)
	}
	memQoS := mode.V2()
	policy := cfg.Cgroups.MemoryReservationPolicy
	if policy == "" {
		policy = MemoryReservationNone
	}
	qos := QOSOptions{EnforceMemoryQoS: memQoS, MemoryReservationPolicy: policy}
	if p, ok := cfg.Cgroups.QOSReservedMemoryPercent(); ok {
		qos.QOSReservedMemoryPercent = &p
	}
	period := uint64(cfg.Cgroups.CPUCFSQuotaPeriod.Microseconds())
	return ManagerConfig{
		Capacity: capacity,
		Node: NodeConfig{
			SystemReserved: cfg.Node.SystemReserved,
			KubeReserved:   cfg.Node.KubeReserved,
			HardEviction:   HardEvictionReservation(thresholds, capacity),
			Enforcement:    enforce,
			QOS:            qos,
		},
		Pod: Options{
			EnforceCPULimits:        cfg.Cgroups.CPUCFSQuota,
			CPUPeriod:               period,
			EnforceMemoryQoS:        memQoS,
			MemoryReservationPolicy: policy,
			PodPidsLimit:            cfg.Cgroups.PodPidsLimit,
		},
		SystemReservedCgroup: cfg.Node.SystemReservedCgroup,
		KubeReservedCgroup:   cfg.Node.KubeReservedCgroup,
	}, nil
}

// HardEvictionReservation is the kubelet's hardEvictionReservation: only hard LessThan
// thresholds of memory.available (→ memory) and nodefs.available (→ ephemeral-storage) count,
// resolved against capacity with GetThresholdQuantity (float32 percentages).
func HardEvictionReservation(thresholds []eviction.Threshold, capacity Capacity) v1.ResourceList {
	rl := v1.ResourceList{}
	caps := capacity.ResourceList()
	for _, t := range thresholds {
		if !t.IsHard() || t.Operator != eviction.OpLessThan {
			continue
		}
		var name v1.ResourceName
		switch t.Signal {
		case eviction.SignalMemoryAvailable:
			name = v1.ResourceMemory
		case eviction.SignalNodeFsAvailable:
			name = v1.ResourceEphemeralStorage
		default:
			continue
		}
		c, ok := caps[name]
		if !ok {
			continue
		}
		q := eviction.GetThresholdQuantity(t.Value, &c)
		if q != nil && !q.IsZero() {
			rl[name] = *q
		}
	}
	return rl
}
