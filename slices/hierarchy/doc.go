// Package hierarchy actuates the kubepods hierarchy through systemd: Manager creates
// kubepods.slice limited to node allocatable, the Burstable and BestEffort QoS slices and one
// slice per pod as transient units (over the Systemd interface it declares, implemented by
// units), reconciles the QoS slices, enforces node allocatable, destroys pod slices the way
// the kubelet destroys pod cgroups (leftover processes killed through Cgroupfs, implemented by
// CgroupFS) and finds orphans. Every value it writes comes from the pure model and resource
// math of package slices.
package hierarchy
