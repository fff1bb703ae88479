package systemdrt

import "github.com/slicelet/slicelet/internal/procfs"

// capSysResource is CAP_SYS_RESOURCE's bit in the capability sets of /proc/<pid>/status.
const capSysResource = 24

// oomPolicy is how far this host lets a service's oom_score_adj go. Lowering oom_score_adj
// below the value a process inherited needs CAP_SYS_RESOURCE (proc(5)); without it the write
// fails with EACCES. systemd 252 ignores that failure for OOMScoreAdjust= (it assumes a
// container), so asking anyway would silently leave the inherited value: the runtime asks only
// for what the kernel will grant, and says so once in the log.
type oomPolicy struct {
	// CanLower: systemd has CAP_SYS_RESOURCE.
	CanLower bool
	// Floor is systemd's own oom_score_adj, which its services inherit.
	Floor int
}

// Apply returns the value to set for the kubelet's adj, and whether it was raised to Floor.
func (p oomPolicy) Apply(adj int) (int, bool) {
	if p.CanLower || adj >= p.Floor {
		return adj, false
	}
	return p.Floor, true
}

// detectOOMPolicy reads systemd's (PID 1's) effective capabilities and oom_score_adj below
// procRoot. What cannot be read is assumed unrestricted: the kubelet's values are sent.
func detectOOMPolicy(procRoot string) (oomPolicy, error) {
	capEff, err := procfs.EffectiveCaps(procRoot, 1)
	if err != nil {
		return oomPolicy{CanLower: true}, err
	}
	p := oomPolicy{CanLower: capEff&(1<<capSysResource) != 0}
	if p.Floor, err = procfs.OOMScoreAdj(procRoot, 1); err != nil {
		return oomPolicy{CanLower: true}, err
	}
	return p, nil
}
