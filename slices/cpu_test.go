package slices

import "testing"

func TestMilliCPUToSharesA1(t *testing.T) {
	tests := []struct {
		name string
		in   int64
		want uint64
	}{
		{"A1/0", 0, 2}, {"A1/1", 1, 2}, {"A1/2", 2, 2}, {"A1/3", 3, 3}, {"A1/100", 100, 102},
		{"A1/500", 500, 512}, {"A1/1000", 1000, 1024}, {"A1/255999", 255999, 262142},
		{"A1/256000", 256000, 262144}, {"A1/256001", 256001, 262144}, {"A1/-1", -1, 2},
		{"NA-1 kubepods 3800m", 3800, 3891}, {"J1 3000m", 3000, 3072},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MilliCPUToShares(tt.in); got != tt.want {
				t.Errorf("MilliCPUToShares(%d) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestMilliCPUToQuotaA2(t *testing.T) {
	tests := []struct {
		name   string
		m, per int64
		want   int64
	}{
		{"A2/0", 0, 100000, 0}, {"A2/5", 5, 100000, 1000}, {"A2/9", 9, 100000, 1000},
		{"A2/10", 10, 100000, 1000}, {"A2/200", 200, 100000, 20000}, {"A2/500", 500, 100000, 50000},
		{"A2/1000", 1000, 100000, 100000}, {"A2/1500", 1500, 100000, 150000},
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

func TestSharesToMilliCPUA4(t *testing.T) {
	tests := []struct {
		name string
		in   int64
		want int64
	}{
		{"A4/0", 0, 0}, {"A4/1", 1, 0}, {"A4/2", 2, 2}, {"A4/3", 3, 3}, {"A4/102", 102, 100},
		{"A4/512", 512, 500}, {"A4/1024", 1024, 1000}, {"A4/262144", 262144, 256000}, {"A4/-1", -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SharesToMilliCPU(tt.in); got != tt.want {
				t.Errorf("SharesToMilliCPU(%d) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestQuotaToMilliCPUA5(t *testing.T) {
	tests := []struct {
		name      string
		q, period int64
		want      int64
	}{
		{"A5/-1", -1, 100000, 0}, {"A5/0", 0, 100000, 0}, {"A5/1000", 1000, 100000, 10},
		{"A5/5000-5000", 5000, 5000, 1000}, {"A5/1", 1, 100000, 0}, {"A5/100", 100, 100000, 1},
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

func TestCPUWeightToSharesA7(t *testing.T) {
	tests := []struct {
		name string
		in   uint64
		want uint64
	}{
		{"A7/1", 1, 2}, {"A7/2", 2, 28}, {"A7/4", 4, 80}, {"A7/39", 39, 998}, {"A7/10000", 10000, 262144},
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
	// Examples of spec §1.9 (kubelet linear getCPUWeight).
	tests := []struct {
		name string
		in   uint64
		want uint64
	}{
		{"2", 2, 1}, {"51", 51, 2}, {"102", 102, 4}, {"512", 512, 20}, {"1024", 1024, 39},
		{"2048", 2048, 79}, {"NA-1 3891", 3891, 149}, {"J1 3072", 3072, 118}, {"max", 262144, 10000},
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

func TestCPUSharesEqualAfterV2RoundTripA8(t *testing.T) {
	tests := []struct {
		name             string
		desired, actuals uint64
		want             bool
	}{
		{"A8/51-28", 51, 28, true}, {"A8/51-27", 51, 27, false}, {"A8/102-80", 102, 80, true},
		{"A8/102-102", 102, 102, false}, {"A8/51-102", 51, 102, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CPUSharesEqualAfterV2RoundTrip(tt.desired, tt.actuals); got != tt.want {
				t.Errorf("CPUSharesEqualAfterV2RoundTrip(%d, %d) = %v, want %v", tt.desired, tt.actuals, got, tt.want)
			}
		})
	}
}
