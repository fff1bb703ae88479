package slices

// CPU constants of the kubelet's pkg/kubelet/cm/helpers_linux.go.
const (
	// MinShares is the kernel's MIN_SHARES: the smallest cpu.shares value.
	MinShares uint64 = 2
	// MaxShares is the kernel's MAX_SHARES (2^18): the largest cpu.shares value.
	MaxShares uint64 = 262144
	// SharesPerCPU is the number of cpu.shares that one CPU is worth.
	SharesPerCPU = 1024
	// MilliCPUToCPU is the number of millicores in one CPU.
	MilliCPUToCPU = 1000
	// QuotaPeriod is the default CFS period in microseconds (100 ms).
	QuotaPeriod = 100000
	// MinQuotaPeriod is the smallest CFS quota in microseconds (1 ms).
	MinQuotaPeriod = 1000
	// MinMilliCPULimit is the smallest CPU limit that is not clamped up: 1000*MinQuotaPeriod/QuotaPeriod.
	MinMilliCPULimit = 10
	// MaxCPUWeight is the largest cgroup v2 cpu.weight.
	MaxCPUWeight uint64 = 10000
)

// MilliCPUToShares converts a CPU request in millicores to cpu.shares: milliCPU*1024/1000
// (integer), clamped to [MinShares, MaxShares]. Zero and negative requests give MinShares, which
// is what the kernel would do for "no request" (the runtime's default of 1024 would be wrong).
func MilliCPUToShares(milliCPU int64) uint64 {
	if milliCPU <= 0 {
		return MinShares
	}
	shares := milliCPU * SharesPerCPU / MilliCPUToCPU
	if shares < int64(MinShares) {
		return MinShares
	}
	if shares > int64(MaxShares) {
		return MaxShares
	}
	return uint64(shares)
}

// MilliCPUToQuota converts a CPU limit in millicores to a CFS quota in microseconds for the given
// period. A zero limit gives 0 (no quota). A period of 0 means "not configured" and uses
// QuotaPeriod; any other period is honoured, which is the kubelet's behaviour with the
// CustomCPUCFSQuotaPeriod gate on (slicelet has no gate: a configured period is the opt-in).
// The quota is clamped up to MinQuotaPeriod.
func MilliCPUToQuota(milliCPU int64, period int64) int64 {
	if milliCPU == 0 {
		return 0
	}
	if period == 0 {
		period = QuotaPeriod
	}
	quota := milliCPU * period / MilliCPUToCPU
	if quota < MinQuotaPeriod {
		quota = MinQuotaPeriod
	}
	return quota
}

// SharesToMilliCPU converts cpu.shares back to millicores, rounding up: ceil(shares*1000/1024).
// Values below MinShares give 0 (no request).
func SharesToMilliCPU(shares int64) int64 {
	if shares < int64(MinShares) {
		return 0
	}
	return (shares*MilliCPUToCPU + SharesPerCPU - 1) / SharesPerCPU
}

// QuotaToMilliCPU converts a CFS quota and period back to millicores: quota*1000/period. A quota
// of -1 (unlimited) and a non-positive period give 0.
func QuotaToMilliCPU(quota, period int64) int64 {
	if quota == -1 || period <= 0 {
		return 0
	}
	return quota * MilliCPUToCPU / period
}

// CPUSharesToWeight converts cpu.shares to a cgroup v2 cpu.weight with the kubelet's linear
// formula 1 + (shares-2)*9999/262142, which the kubelet still uses for pod, QoS and kubepods
// cgroups (container cgroups get the OCI runtime's non-linear formula, runc's
// ConvertCPUSharesToCgroupV2Value). 0 means
// "unset" and gives 0; values below MinShares give 1 (the kubelet would underflow there, but
// MilliCPUToShares never produces them); values at or above MaxShares give 10000.
func CPUSharesToWeight(shares uint64) uint64 {
	switch {
	case shares == 0:
		return 0
	case shares < MinShares:
		return 1
	case shares >= MaxShares:
		return MaxCPUWeight
	}
	return 1 + (shares-MinShares)*9999/(MaxShares-MinShares)
}

// CPUWeightToShares is the kubelet's inverse of CPUSharesToWeight: 2 + (weight-1)*262142/9999.
// 0 means "unset" and gives 0; weights above 10000 are treated as 10000.
func CPUWeightToShares(weight uint64) uint64 {
	if weight == 0 {
		return 0
	}
	if weight > MaxCPUWeight {
		weight = MaxCPUWeight
	}
	return MinShares + (weight-1)*(MaxShares-MinShares)/9999
}

// CPUSharesEqualAfterV2RoundTrip reports whether shares read back from a cgroup v2 cpu.weight
// (readback) are what the desired shares (desired) become after the lossy shares → weight →
// shares round trip. The kubelet uses it to compare actuated and desired shares on resize.
func CPUSharesEqualAfterV2RoundTrip(desired, readback uint64) bool {
	return CPUWeightToShares(CPUSharesToWeight(desired)) == readback
}
