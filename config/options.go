package config

import (
	"fmt"

	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/gc"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/slices/hierarchy"
)

// This file turns the configuration into the components' own options: the components never
// read Config, the wiring (internal/agent, and slicectl's offline explanations) calls these.

// Policy is the image GC planner's policy of [gc.images].
func (c ImageGC) Policy() gc.ImagePolicy {
	return gc.ImagePolicy{
		HighThresholdPercent: c.HighThresholdPercent,
		LowThresholdPercent:  c.LowThresholdPercent,
		MinAge:               c.MinimumAge,
		MaxAge:               c.MaximumAge,
	}
}

// Policy is the container GC planner's policy of [gc.containers].
func (c ContainerGC) Policy() gc.ContainerPolicy {
	return gc.ContainerPolicy{MinAge: c.MinimumAge, MaxPerPodContainer: c.MaxPerPodContainer, MaxContainers: c.MaxContainers}
}

// EvictionConfig is the eviction decision's configuration of [eviction] (and the
// allocatableMemory.available copies of enforce_node_allocatable = ["pods"]). After a
// successful Load it cannot fail.
func (c *Config) EvictionConfig() (eviction.Config, error) {
	thresholds, err := c.EvictionThresholds()
	if err != nil {
		return eviction.Config{}, fmt.Errorf("eviction thresholds: %w", err)
	}
	return eviction.Config{
		Thresholds:                    thresholds,
		PressureTransitionPeriod:      c.Eviction.PressureTransitionPeriod,
		MaxPodGracePeriod:             c.Eviction.MaxPodGracePeriod,
		PriorityClasses:               c.Eviction.PriorityClasses,
		LocalStorageCapacityIsolation: true, // the kubelet's default
	}, nil
}

// SlicesConfig is the slice manager's configuration for a node of this capacity: reservations,
// the hard-eviction reservation (the memory.available and nodefs.available hard thresholds
// resolved against capacity, which only the scheduler's view of allocatable subtracts),
// enforcement, the pod resource options and the QoS options. Memory QoS is on exactly on
// cgroup v2 (cgroupV2), as the kubelet's MemoryQoS gate (beta, on by default) does;
// memory_reservation_policy decides what it writes.
func (c *Config) SlicesConfig(capacity slices.Capacity, cgroupV2 bool) (hierarchy.Config, error) {
	enforce, err := slices.ParseEnforcement(c.Node.EnforceNodeAllocatable)
	if err != nil {
		return hierarchy.Config{}, err
	}
	// The kubelet reserves for eviction.hard only (cmd/kubelet/app/server.go parses evictionHard
	// alone for the container manager), so a soft threshold with a 0s grace period, which
	// behaves as hard, reserves nothing.
	thresholds, err := eviction.ParseThresholdConfig(nil, c.Eviction.Hard, nil, nil, nil)
	if err != nil {
		return hierarchy.Config{}, fmt.Errorf("eviction thresholds: %w", err)
	}
	policy := c.Cgroups.MemoryReservationPolicy
	if policy == "" {
		policy = MemoryReservationNone
	}
	qos := slices.QOSOptions{EnforceMemoryQoS: cgroupV2, MemoryReservationPolicy: policy}
	if p, ok := c.Cgroups.QOSReservedMemoryPercent(); ok {
		qos.QOSReservedMemoryPercent = &p
	}
	return hierarchy.Config{
		Capacity: capacity,
		Node: slices.NodeConfig{
			SystemReserved: c.Node.SystemReserved,
			KubeReserved:   c.Node.KubeReserved,
			HardEviction:   eviction.HardEvictionReservation(thresholds, capacity.ResourceList()),
			Enforcement:    enforce,
			QOS:            qos,
		},
		Pod: slices.Options{
			EnforceCPULimits:        c.Cgroups.CPUCFSQuota,
			CPUPeriod:               uint64(c.Cgroups.CPUCFSQuotaPeriod.Microseconds()),
			EnforceMemoryQoS:        cgroupV2,
			MemoryReservationPolicy: policy,
			PodPidsLimit:            c.Cgroups.PodPidsLimit,
		},
		SystemReservedCgroup: c.Node.SystemReservedCgroup,
		KubeReservedCgroup:   c.Node.KubeReservedCgroup,
	}, nil
}
