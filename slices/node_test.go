package slices

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// na1 is a node of 4 CPUs and 16Gi with 100m/1Gi kube-reserved, 100m/500Mi system-reserved
// and a 100Mi hard eviction threshold: 3800m and 14760Mi allocatable.
func na1() (Capacity, v1.ResourceList, v1.ResourceList, v1.ResourceList) {
	capacity := Capacity{CPU: 4000, Memory: 16 * gi, Pids: 4194304, HugePages: map[int64]int64{}}
	kube := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("1Gi")}
	system := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("500Mi")}
	eviction := v1.ResourceList{v1.ResourceMemory: resource.MustParse("100Mi")}
	return capacity, system, kube, eviction
}

func TestNodeAllocatableNA1(t *testing.T) {
	capacity, system, kube, eviction := na1()
	alloc := NodeAllocatable(capacity, system, kube, eviction)
	if got := alloc.Memory().Value(); got != 14760*mi {
		t.Errorf("allocatable memory = %d, want 14760Mi", got)
	}
	if got := alloc.Cpu().MilliValue(); got != 3800 {
		t.Errorf("allocatable cpu = %dm, want 3800m", got)
	}
	if _, ok := alloc[ResourcePID]; ok {
		t.Error("allocatable reports the internal pid resource")
	}

	limits := KubepodsLimits(capacity, system, kube)
	if got := limits.Memory().Value(); got != 15581839360 {
		t.Errorf("kubepods memory = %d, want 15581839360", got)
	}
	rc := KubepodsConfig(capacity, system, kube, Enforcement{Pods: true}, false)
	if rc.CPUShares == nil || *rc.CPUShares != 3891 {
		t.Errorf("kubepods shares = %v, want 3891", rc.CPUShares)
	}
	if w := CPUSharesToWeight(*rc.CPUShares); w != 149 {
		t.Errorf("kubepods weight = %d, want 149", w)
	}
	if rc.Memory == nil || *rc.Memory != 15581839360 {
		t.Errorf("kubepods memory limit = %v", rc.Memory)
	}
	if rc.PidsLimit == nil || *rc.PidsLimit != 4194304 {
		t.Errorf("kubepods pids = %v, want capacity 4194304", rc.PidsLimit)
	}
	if rc.Unified != nil {
		t.Errorf("unified = %v, want none", rc.Unified)
	}
	if err := ValidateReservation(capacity, SumResources(system, kube, eviction)); err != nil {
		t.Errorf("ValidateReservation: %v", err)
	}
}

func TestNodeAllocatable(t *testing.T) {
	hp := Capacity{CPU: 2000, Memory: 8 * gi, Pids: 1000, EphemeralStorage: 100 * gi, HugePages: map[int64]int64{2 * mi: gi, gi: 0}}
	tests := []struct {
		name                string
		capacity            Capacity
		system, kube, evict v1.ResourceList
		want                map[v1.ResourceName]string
	}{
		{"hugepages come out of memory", hp, nil, nil, rl("—/1Gi,ephemeral-storage=10Gi"),
			map[v1.ResourceName]string{"cpu": "2", "memory": "6Gi", "ephemeral-storage": "90Gi", "hugepages-2Mi": "1Gi", "hugepages-1Gi": "0"}},
		{"clamped at zero", Capacity{CPU: 1000, Memory: gi}, rl("2/512Mi"), rl("—/1Gi"), nil,
			map[v1.ResourceName]string{"cpu": "0", "memory": "0"}},
		{"no reservations", Capacity{CPU: 1000, Memory: gi}, nil, nil, nil,
			map[v1.ResourceName]string{"cpu": "1", "memory": "1Gi"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NodeAllocatable(tt.capacity, tt.system, tt.kube, tt.evict)
			if len(got) != len(tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			for name, want := range tt.want {
				q := got[name]
				if q.Cmp(resource.MustParse(want)) != 0 {
					t.Errorf("%s = %s, want %s", name, q.String(), want)
				}
			}
		})
	}
}

func TestKubepodsLimits(t *testing.T) {
	capacity := Capacity{CPU: 2000, Memory: 8 * gi, Pids: 1000, EphemeralStorage: 100 * gi, HugePages: map[int64]int64{2 * mi: gi}}
	system := v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), ResourcePID: resource.MustParse("100")}
	kube := v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi"), v1.ResourceEphemeralStorage: resource.MustParse("10Gi")}
	got := KubepodsLimits(capacity, system, kube)
	want := map[v1.ResourceName]int64{"cpu": 1500, "memory": 7 * gi, "pid": 900, "ephemeral-storage": 90 * gi, "hugepages-2Mi": gi}
	for name, w := range want {
		q := got[name]
		v := q.Value()
		if name == v1.ResourceCPU {
			v = q.MilliValue()
		}
		if v != w {
			t.Errorf("%s = %d, want %d", name, v, w)
		}
	}
	rc := CgroupConfig(got, false)
	if *rc.CPUShares != 1536 || *rc.Memory != 7*gi || *rc.PidsLimit != 900 || !maps.Equal(rc.HugePageLimit, map[int64]int64{2 * mi: gi}) {
		t.Errorf("CgroupConfig = %s", rc)
	}
}

func TestKubepodsConfigWithoutPodsEnforcement(t *testing.T) {
	capacity, system, kube, _ := na1()
	rc := KubepodsConfig(capacity, system, kube, Enforcement{}, true)
	if *rc.CPUShares != 4096 || *rc.Memory != 16*gi || *rc.PidsLimit != 4194304 {
		t.Errorf("KubepodsConfig without pods = %s, want full capacity", rc)
	}
	if !maps.Equal(rc.Unified, map[string]string{"memory.min": "0", "memory.low": "0"}) {
		t.Errorf("clearMemoryProtection: unified = %v", rc.Unified)
	}
}

func TestCgroupConfig(t *testing.T) {
	reserved := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("2Gi"), ResourcePID: resource.MustParse("1000")}
	tests := []struct {
		name             string
		rl               v1.ResourceList
		compressibleOnly bool
		memQoS           bool
		want             *ResourceConfig
	}{
		{"nil", nil, false, false, nil},
		{"all", reserved, false, false, &ResourceConfig{CPUShares: u64(1024), Memory: i64(2 * gi), PidsLimit: i64(1000), HugePageLimit: map[int64]int64{}}},
		{"compressible only", reserved, true, true, &ResourceConfig{CPUShares: u64(1024)}},
		{"memory qos adds memory.min", reserved, false, true, &ResourceConfig{CPUShares: u64(1024), Memory: i64(2 * gi), PidsLimit: i64(1000),
			HugePageLimit: map[int64]int64{}, Unified: map[string]string{"memory.min": "2147483648"}}},
		{"memory only", v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}, false, false, &ResourceConfig{Memory: i64(gi), HugePageLimit: map[int64]int64{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ReservedCgroupConfig(tt.rl, tt.compressibleOnly, tt.memQoS)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestValidateReservation(t *testing.T) {
	capacity := Capacity{CPU: 2000, Memory: 4 * gi, Pids: 1000}
	tests := []struct {
		name    string
		res     v1.ResourceList
		wantErr string
	}{
		{"fits", rl("2/4Gi"), ""},
		{"cpu too much", rl("3/1Gi"), `node allocatable reservation: Resource "cpu" has a reservation of 3 but capacity of 2. Expected capacity >= reservation.`},
		{"two problems", v1.ResourceList{v1.ResourceMemory: resource.MustParse("5Gi"), ResourcePID: resource.MustParse("1001")},
			`node allocatable reservation: Resource "memory" has a reservation of 5Gi but capacity of 4Gi. Expected capacity >= reservation. ` +
				`Resource "pid" has a reservation of 1001 but capacity of 1k. Expected capacity >= reservation.`},
		{"unknown resource has no capacity", v1.ResourceList{"example.com/gpu": resource.MustParse("1")},
			`node allocatable reservation: Resource "example.com/gpu" has a reservation of 1 but capacity of 0. Expected capacity >= reservation.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateReservation(capacity, tt.res)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.wantErr {
				t.Errorf("got  %q\nwant %q", got, tt.wantErr)
			}
		})
	}
}

func TestParseEnforcement(t *testing.T) {
	tests := []struct {
		name    string
		keys    []string
		want    Enforcement
		wantErr []string
	}{
		{"default pods", []string{"pods"}, Enforcement{Pods: true}, nil},
		{"empty", nil, Enforcement{}, nil},
		{"none", []string{"none"}, Enforcement{}, nil},
		{"all full", []string{"pods", "system-reserved", "kube-reserved"}, Enforcement{Pods: true, SystemReserved: true, KubeReserved: true}, nil},
		{"compressible", []string{"pods", "system-reserved-compressible", "kube-reserved-compressible"},
			Enforcement{Pods: true, SystemReservedCompressible: true, KubeReservedCompressible: true}, nil},
		{"none not alone", []string{"none", "pods"}, Enforcement{}, []string{`"none": must be the only entry`}},
		{"twins", []string{"system-reserved", "system-reserved-compressible", "kube-reserved", "kube-reserved-compressible"}, Enforcement{},
			[]string{`"system-reserved-compressible": excludes "system-reserved"`, `"kube-reserved-compressible": excludes "kube-reserved"`}},
		{"unknown", []string{"pods", "Pods"}, Enforcement{}, []string{`enforce_node_allocatable "Pods": unknown`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseEnforcement(tt.keys)
			if len(tt.wantErr) == 0 {
				if err != nil || got != tt.want {
					t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %+v, want error", got)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestReadCapacity(t *testing.T) {
	tests := []struct {
		name string
		dir  string
		want Capacity
	}{
		{"node-hugepages", "testdata/node-hugepages", Capacity{
			CPU: 5000, Memory: 16 * gi, Pids: 126329,
			HugePages: map[int64]int64{2 * mi: 512 * 2 * mi, gi: gi},
		}},
		{"node-plain", "testdata/node-plain", Capacity{
			CPU: 1000, Memory: 2030000 * 1024, Pids: 15610, HugePages: map[int64]int64{},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadCapacity(filepath.Join(tt.dir, "proc"), filepath.Join(tt.dir, "sys"), "")
			fatalIf(t, err)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
	t.Run("ephemeral storage from statfs", func(t *testing.T) {
		got, err := ReadCapacity("testdata/node-plain/proc", "testdata/node-plain/sys", t.TempDir())
		fatalIf(t, err)
		if got.EphemeralStorage <= 0 {
			t.Errorf("ephemeral storage = %d, want > 0", got.EphemeralStorage)
		}
	})
}

func TestReadCapacityErrors(t *testing.T) {
	write := func(t *testing.T, root string, files map[string]string) {
		for name, content := range files {
			p := filepath.Join(root, name)
			fatalIf(t, os.MkdirAll(filepath.Dir(p), 0o755))
			fatalIf(t, os.WriteFile(p, []byte(content), 0o644))
		}
	}
	good := map[string]string{
		"proc/meminfo":                  "MemTotal: 1024 kB\n",
		"proc/sys/kernel/pid_max":       "100\n",
		"proc/sys/kernel/threads-max":   "200\n",
		"sys/devices/system/cpu/online": "0-1\n",
	}
	tests := []struct {
		name    string
		change  map[string]string
		remove  string
		wantErr string
	}{
		{"missing online", nil, "sys/devices/system/cpu/online", "online cpus"},
		{"bad online", map[string]string{"sys/devices/system/cpu/online": "0-x\n"}, "", "cpu list"},
		{"reversed range", map[string]string{"sys/devices/system/cpu/online": "3-1\n"}, "", "bad range"},
		{"no MemTotal", map[string]string{"proc/meminfo": "MemFree: 1 kB\n"}, "", "no MemTotal"},
		{"MemTotal unit", map[string]string{"proc/meminfo": "MemTotal: 1 MB\n"}, "", "MemTotal"},
		{"bad pid_max", map[string]string{"proc/sys/kernel/pid_max": "lots\n"}, "", "pid_max"},
		{"bad nr_hugepages", map[string]string{"sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages": "x\n"}, "", "nr_hugepages"},
		{"missing ephemeral dir", nil, "", "ephemeral storage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			files := maps.Clone(good)
			maps.Copy(files, tt.change)
			delete(files, tt.remove)
			write(t, root, files)
			eph := ""
			if tt.name == "missing ephemeral dir" {
				eph = filepath.Join(root, "does-not-exist")
			}
			_, err := ReadCapacity(filepath.Join(root, "proc"), filepath.Join(root, "sys"), eph)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want it to mention %q", err, tt.wantErr)
			}
		})
	}
}

func TestCountCPUList(t *testing.T) {
	for in, want := range map[string]int{"0": 1, "0-3": 4, "0-3,5,7-8": 7, "0,2,4": 3} {
		if got, err := CountCPUList(in); err != nil || got != want {
			t.Errorf("CountCPUList(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a", "1-", "-1", "0,,1"} {
		if _, err := CountCPUList(bad); err == nil {
			t.Errorf("CountCPUList(%q) succeeded", bad)
		}
	}
}

func TestCapacityResourceList(t *testing.T) {
	capacity := Capacity{CPU: 1500, Memory: gi, Pids: 10, EphemeralStorage: 5 * gi, HugePages: map[int64]int64{2 * mi: 4 * mi}}
	rlist := capacity.InternalResourceList()
	want := map[v1.ResourceName]string{"cpu": "1500m", "memory": "1Gi", "pid": "10", "ephemeral-storage": "5Gi", "hugepages-2Mi": "4Mi"}
	if len(rlist) != len(want) {
		t.Errorf("got %v", rlist)
	}
	for name, w := range want {
		q := rlist[name]
		if q.Cmp(resource.MustParse(w)) != 0 {
			t.Errorf("%s = %s, want %s", name, q.String(), w)
		}
	}
	if HugePageResourceName(gi) != "hugepages-1Gi" {
		t.Errorf("HugePageResourceName(1Gi) = %s", HugePageResourceName(gi))
	}
}
