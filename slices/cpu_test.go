package slices

import "testing"

func TestMilliCPUToShares(t *testing.T) {
	tests := []struct {
		name string
		in   int64
		want uint64
	}{
		{"0m is 2 shares", 0, 2}, {"1m is 2 shares", 1, 2}, {"2m is 2 shares", 2, 2}, {"3m is 3 shares", 3, 3}, {"100m is 102 shares", 100, 102},
		{"500m is 512 shares", 500, 512}, {"1000m is 1024 shares", 1000, 1024}, {"255999m is 262142 shares", 255999, 262142},
		{"256000m is 262144 shares", 256000, 262144}, {"256001m is 262144 shares", 256001, 262144}, {"-1m is 2 shares", -1, 2},
		{"kubepods of 4 CPUs less 200m reserved: 3800m is 3891 shares", 3800, 3891}, {"Burstable slice of 3000m of requests: 3072 shares", 3000, 3072},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MilliCPUToShares(tt.in); got != tt.want {
				t.Errorf("MilliCPUToShares(%d) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestMilliCPUToQuota(t *testing.T) {
	tests := []struct {
		name   string
		m, per int64
		want   int64
	}{
		{"0m is a quota of 0 per 100000", 0, 100000, 0}, {"5m is a quota of 1000 per 100000", 5, 100000, 1000}, {"9m is a quota of 1000 per 100000", 9, 100000, 1000},
		{"10m is a quota of 1000 per 100000", 10, 100000, 1000}, {"200m is a quota of 20000 per 100000", 200, 100000, 20000}, {"500m is a quota of 50000 per 100000", 500, 100000, 50000},
		{"1000m is a quota of 100000 per 100000", 1000, 100000, 100000}, {"1500m is a quota of 150000 per 100000", 1500, 100000, 150000},
		{"period 5000 200m clamped", 200, 5000, 1000}, {"period 5000 100m clamped", 100, 5000, 1000},
		{"period 5000 1500m", 1500, 5000, 7500},
		{"period 0 means default", 200, 0, 20000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MilliCPUToQuota(tt.m, tt.per); got != tt.want {
				t.Errorf("MilliCPUToQuota(%d, %d) = %d, want %d", tt.m, tt.per, got, tt.want)
			}
		})
	}
}

func TestSharesToMilliCPU(t *testing.T) {
	tests := []struct {
		name string
		in   int64
		want int64
	}{
		{"0 shares are 0m", 0, 0}, {"1 shares are 0m", 1, 0}, {"2 shares are 2m", 2, 2}, {"3 shares are 3m", 3, 3}, {"102 shares are 100m", 102, 100},
		{"512 shares are 500m", 512, 500}, {"1024 shares are 1000m", 1024, 1000}, {"262144 shares are 256000m", 262144, 256000}, {"-1 shares are 0m", -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SharesToMilliCPU(tt.in); got != tt.want {
				t.Errorf("SharesToMilliCPU(%d) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestQuotaToMilliCPU(t *testing.T) {
	tests := []struct {
		name      string
		q, period int64
		want      int64
	}{
		{"quota -1 per 100000 is 0m", -1, 100000, 0}, {"quota 0 per 100000 is 0m", 0, 100000, 0}, {"quota 1000 per 100000 is 10m", 1000, 100000, 10},
		{"quota 5000 per 5000 is 1000m", 5000, 5000, 1000}, {"quota 1 per 100000 is 0m", 1, 100000, 0}, {"quota 100 per 100000 is 1m", 100, 100000, 1},
		{"period 0 does not divide by zero", 1000, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := QuotaToMilliCPU(tt.q, tt.period); got != tt.want {
				t.Errorf("QuotaToMilliCPU(%d, %d) = %d, want %d", tt.q, tt.period, got, tt.want)
			}
		})
	}
}

func TestCPUWeightToShares(t *testing.T) {
	tests := []struct {
		name string
		in   uint64
		want uint64
	}{
		{"weight 1 is 2 shares", 1, 2}, {"weight 2 is 28 shares", 2, 28}, {"weight 4 is 80 shares", 4, 80}, {"weight 39 is 998 shares", 39, 998}, {"weight 10000 is 262144 shares", 10000, 262144},
		{"0 is unset", 0, 0}, {"above max clamps", 20000, 262144},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CPUWeightToShares(tt.in); got != tt.want {
				t.Errorf("CPUWeightToShares(%d) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestCPUSharesToWeight(t *testing.T) {
	// The kubelet's linear getCPUWeight (pkg/kubelet/cm/cgroup_manager_linux.go).
	tests := []struct {
		name string
		in   uint64
		want uint64
	}{
		{"2", 2, 1}, {"51", 51, 2}, {"102", 102, 4}, {"512", 512, 20}, {"1024", 1024, 39},
		{"2048", 2048, 79}, {"kubepods of 4 CPUs less 200m reserved: 3891", 3891, 149}, {"Burstable slice of 3000m of requests: 3072", 3072, 118}, {"max", 262144, 10000},
		{"above max", 1 << 30, 10000}, {"just below max", 262143, 9999}, {"10000 shares", 10000, 382}, {"0 is unset", 0, 0}, {"1 clamps to 1", 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CPUSharesToWeight(tt.in); got != tt.want {
				t.Errorf("CPUSharesToWeight(%d) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestCPUSharesEqualAfterV2RoundTrip(t *testing.T) {
	tests := []struct {
		name             string
		desired, actuals uint64
		want             bool
	}{
		{"desired 51, cpu.weight read back as 28 shares: equal", 51, 28, true}, {"desired 51, cpu.weight read back as 27 shares: different", 51, 27, false}, {"desired 102, cpu.weight read back as 80 shares: equal", 102, 80, true},
		{"desired 102, cpu.weight read back as 102 shares: different", 102, 102, false}, {"desired 51, cpu.weight read back as 102 shares: different", 51, 102, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CPUSharesEqualAfterV2RoundTrip(tt.desired, tt.actuals); got != tt.want {
				t.Errorf("CPUSharesEqualAfterV2RoundTrip(%d, %d) = %v, want %v", tt.desired, tt.actuals, got, tt.want)
			}
		})
	}
}
