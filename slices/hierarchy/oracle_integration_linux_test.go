package hierarchy

import (
	"fmt"
	"maps"
	"reflect"
	stdslices "slices"
	"strings"
	"testing"

	"github.com/opencontainers/cgroups"
	// The devices controller must be registered even with SkipDevices (the driver refuses to
	// start a unit otherwise).
	_ "github.com/opencontainers/cgroups/devices"
	cgmanager "github.com/opencontainers/cgroups/manager"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slicelet/slicelet/slices"
)

// The oracle: the kubelet creates a pod cgroup with the cgroup driver of
// github.com/opencontainers/cgroups (pkg/kubelet/cm/cgroup_manager_linux.go, Create:
// manager.New, Apply(-1), Set of the same resources). TestIntegrationCgroupDriverOracle builds,
// next to each pod slice slicelet creates, a sibling slice through that driver with the
// resources the kubelet would hand it for the same ResourceConfig, and asserts that systemd's
// unit properties and the cgroupfs values of the two are equal. A difference is a slicelet bug,
// or one of these reasoned divergences:
//
//   - Description: slicelet names its slices ("slicelet pod default/web"), the driver writes
//     "libcontainer container <name>". Slicelet's description is how it recognises its units.

// oracleResources is the kubelet's toResources (pkg/kubelet/cm/cgroup_manager_linux.go) of rc:
// SkipDevices and SkipFreezeOnSet, cpu.weight by the kubelet's own conversion on cgroup v2,
// every hugetlb page size of the host limited (0 unless requested), Unified on v2 only.
func oracleResources(rc slices.ResourceConfig, v2, hugetlb bool) *cgroups.Resources {
	r := &cgroups.Resources{SkipDevices: true, SkipFreezeOnSet: true}
	if rc.Memory != nil {
		r.Memory = *rc.Memory
	}
	if rc.CPUShares != nil {
		if v2 {
			// The kubelet's getCPUWeight, written out here so the oracle does not share
			// slicelet's CPUSharesToWeight.
			s := *rc.CPUShares
			r.CpuWeight = 10000
			if s < 262144 {
				r.CpuWeight = 1 + ((s-2)*9999)/262142
			}
		} else {
			r.CpuShares = *rc.CPUShares
		}
	}
	if rc.CPUQuota != nil {
		r.CpuQuota = *rc.CPUQuota
	}
	if rc.CPUPeriod != nil {
		r.CpuPeriod = *rc.CPUPeriod
	}
	if rc.PidsLimit != nil {
		limit := *rc.PidsLimit
		r.PidsLimit = &limit
	}
	if hugetlb {
		requested := map[string]bool{}
		for size, limit := range rc.HugePageLimit {
			name, err := slices.HugePageUnitSize(size)
			if err != nil {
				continue
			}
			r.HugetlbLimit = append(r.HugetlbLimit, &cgroups.HugepageLimit{Pagesize: name, Limit: uint64(limit)})
			requested[name] = true
		}
		for _, name := range cgroups.HugePageSizes() {
			if !requested[name] {
				r.HugetlbLimit = append(r.HugetlbLimit, &cgroups.HugepageLimit{Pagesize: name, Limit: 0})
			}
		}
	}
	if v2 && rc.Unified != nil {
		r.Unified = maps.Clone(rc.Unified)
	}
	return r
}

// oracleSlice creates the sibling of a pod slice through the driver, as the kubelet's Create
// does, and returns its cgroup path.
func oracleSlice(t *testing.T, ps slices.PodSlice, v2, hugetlb bool) string {
	t.Helper()
	parent := slices.ParseSystemdToCgroupName(ps.Unit)
	qos := parent[:len(parent)-1].ToSystemd() // the pod slice's QoS slice
	unit := strings.TrimSuffix(path2Unit(qos), ".slice") + "-oracle" + strings.ReplaceAll(ps.UID, "-", "_") + ".slice"
	res := oracleResources(ps.Resources, v2, hugetlb)
	m, err := cgmanager.New(&cgroups.Cgroup{Name: unit, Parent: path2Unit(qos), Systemd: true, Resources: res})
	if err != nil {
		t.Fatalf("oracle manager for %s: %v", unit, err)
	}
	t.Cleanup(func() { _ = m.Destroy() })
	if err := m.Apply(-1); err != nil {
		t.Fatalf("oracle Apply %s: %v", unit, err)
	}
	if err := m.Set(res); err != nil {
		t.Fatalf("oracle Set %s: %v", unit, err)
	}
	return slices.SliceCgroupPath(unit)
}

// path2Unit is the slice unit of a systemd cgroup path ("/" is the root slice).
func path2Unit(p string) string {
	if p == "/" {
		return slices.RootSlice
	}
	return p[strings.LastIndex(p, "/")+1:]
}

// oracleProperties are the unit properties compared, by D-Bus interface.
func oracleProperties(v2 bool) map[string][]string {
	slice := []string{"MemoryAccounting", "CPUAccounting", "TasksAccounting", "CPUQuotaPerSecUSec", "CPUQuotaPeriodUSec", "TasksMax"}
	if v2 {
		slice = append(slice, "IOAccounting", "CPUWeight", "MemoryMax", "MemoryMin", "MemoryLow", "MemoryHigh")
	} else {
		slice = append(slice, "BlockIOAccounting", "CPUShares", "MemoryLimit")
	}
	return map[string][]string{"Slice": slice, "Unit": {"Wants", "DefaultDependencies"}}
}

// oracleFiles are the cgroupfs files compared, by controller.
func oracleFiles(v2 bool, pageSizes []string) map[string][]string {
	files := map[string][]string{
		"cpu":    {"cpu.shares", "cpu.cfs_quota_us", "cpu.cfs_period_us"},
		"memory": {"memory.limit_in_bytes"},
		"pids":   {"pids.max"},
	}
	suffix := ".limit_in_bytes"
	if v2 {
		files = map[string][]string{
			"cpu":    {"cpu.weight", "cpu.max"},
			"memory": {"memory.max", "memory.min", "memory.low", "memory.high"},
			"pids":   {"pids.max"},
		}
		suffix = ".max"
	}
	for _, size := range pageSizes {
		files["hugetlb"] = append(files["hugetlb"], "hugetlb."+size+suffix, "hugetlb."+size+".rsvd"+suffix)
	}
	return files
}

func TestIntegrationCgroupDriverOracle(t *testing.T) {
	it := newIT(t)
	ctx := t.Context()
	v2 := it.mode.V2()
	hugetlb := it.cg.HasController("hugetlb")
	var pageSizes []string
	if hugetlb {
		pageSizes = cgroups.HugePageSizes()
	}
	rl := func(kv ...string) v1.ResourceList {
		out := v1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	pod := func(uid string, req, lim v1.ResourceList) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "oracle-" + uid, Namespace: "default", UID: types.UID("0rac1e00-0000-0000-0000-" + uid)},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}}},
		}
	}
	type podCase struct {
		name string
		pod  *v1.Pod
	}
	groups := []struct {
		name string
		opts func(*slices.Options)
		v2   bool // only on cgroup v2
		pods []podCase
	}{
		{name: "defaults", opts: func(*slices.Options) {}, pods: []podCase{
			{"Guaranteed", pod("000000000001", rl("cpu", "250m", "memory", "128Mi"), rl("cpu", "250m", "memory", "128Mi"))},
			{"Burstable with limits (a CPU quota systemd rounds)", pod("000000000002", rl("cpu", "100m", "memory", "64Mi"), rl("cpu", "333m", "memory", "200Mi"))},
			{"Burstable without limits", pod("000000000003", rl("cpu", "100m", "memory", "64Mi"), nil)},
			{"Burstable with a memory limit only", pod("000000000004", rl("memory", "32Mi"), rl("memory", "96Mi"))},
			{"BestEffort", pod("000000000005", nil, nil)},
			{"Guaranteed with hugepages", pod("000000000006", rl("cpu", "200m", "memory", "64Mi", "hugepages-2Mi", "4Mi"), rl("cpu", "200m", "memory", "64Mi", "hugepages-2Mi", "4Mi"))},
		}},
		{name: "pids limit and no CFS quota", opts: func(o *slices.Options) { o.PodPidsLimit = 123; o.EnforceCPULimits = false }, pods: []podCase{
			{"Burstable", pod("000000000011", rl("cpu", "100m"), rl("cpu", "500m", "memory", "64Mi"))},
			{"BestEffort", pod("000000000012", nil, nil)},
		}},
		{name: "memory QoS tiers", v2: true, opts: func(o *slices.Options) {
			o.EnforceMemoryQoS, o.MemoryReservationPolicy = true, slices.MemoryReservationTiered
		}, pods: []podCase{
			{"Guaranteed (memory.min)", pod("000000000021", rl("cpu", "100m", "memory", "80Mi"), rl("cpu", "100m", "memory", "80Mi"))},
			{"Burstable with a memory request (memory.low)", pod("000000000022", rl("memory", "48Mi"), rl("memory", "100Mi"))},
			{"BestEffort", pod("000000000023", nil, nil)},
		}},
	}
	props := oracleProperties(v2)
	files := oracleFiles(v2, pageSizes)
	compared := 0
	for _, g := range groups {
		if g.v2 && !v2 {
			continue
		}
		t.Run(g.name, func(t *testing.T) {
			opts := slices.DefaultOptions()
			g.opts(&opts)
			node := itNodeConfig()
			node.QOS = slices.QOSOptions{EnforceMemoryQoS: opts.EnforceMemoryQoS, MemoryReservationPolicy: opts.MemoryReservationPolicy}
			m := New(it.sd, it.cg, Config{Capacity: it.cap, Node: node, Pod: opts}, nil)
			if err := m.Start(ctx); err != nil {
				t.Fatal(err)
			}
			for _, pc := range g.pods {
				t.Run(pc.name, func(t *testing.T) {
					ps, err := m.EnsurePod(ctx, pc.pod)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = m.DestroyPod(ctx, ps.UID) })
					oracle := oracleSlice(t, ps, v2, hugetlb)
					for _, iface := range []string{"Unit", "Slice"} {
						for _, name := range props[iface] {
							ours, errOurs := it.sd.Property(ctx, ps.Unit, iface, name)
							theirs, errTheirs := it.sd.Property(ctx, path2Unit(oracle), iface, name)
							if errOurs != nil || errTheirs != nil {
								t.Errorf("%s: slicelet %v, driver %v", name, errOurs, errTheirs)
								continue
							}
							if name == "Wants" {
								// Each wants its own parent, the same QoS slice.
								ours, theirs = fmt.Sprint(ours), fmt.Sprint(theirs)
							}
							if !reflect.DeepEqual(ours, theirs) {
								t.Errorf("property %s: slicelet %v, driver %v", name, ours, theirs)
							}
							compared++
						}
					}
					for _, controller := range stdslices.Sorted(maps.Keys(files)) {
						for _, file := range files[controller] {
							ours, errOurs := it.cg.Read(ps.CgroupPath, controller, file)
							theirs, errTheirs := it.cg.Read(oracle, controller, file)
							if (errOurs == nil) != (errTheirs == nil) || ours != theirs {
								t.Errorf("%s: slicelet %q (%v), driver %q (%v)", file, ours, errOurs, theirs, errTheirs)
							}
							compared++
						}
					}
				})
			}
		})
	}
	t.Logf("%s: %d properties and files compared with the cgroup driver", it.mode, compared)
}
