package slices

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/units"
)

// PodSliceDescription is the Description= of a pod's slice: "pod <namespace>/<name> (<QoS class>)",
// the namespace defaulting to "default".
func PodSliceDescription(pod *v1.Pod) string {
	ns := pod.Namespace
	if ns == "" {
		ns = "default"
	}
	return fmt.Sprintf("pod %s/%s (%s)", ns, pod.Name, QOSClass(pod))
}

// QOSSliceDescription is the Description= of a QoS slice: "kubepods (Guaranteed QoS)" for
// kubepods.slice, "kubepods/burstable (Burstable QoS)" and "kubepods/besteffort (BestEffort QoS)".
func QOSSliceDescription(qos v1.PodQOSClass) string {
	return fmt.Sprintf("%s (%s QoS)", strings.TrimPrefix(QOSCgroupName(qos).ToCgroupfs(), "/"), qos)
}

// ExplainedResources is a ResourceConfig as `slicectl explain` prints it; unset values are null.
type ExplainedResources struct {
	CPUShares      *uint64           `json:"cpuShares"`
	CPUQuota       *int64            `json:"cpuQuota"`
	CPUPeriod      *uint64           `json:"cpuPeriod"`
	MemoryLimit    *int64            `json:"memoryLimit"`
	PidsLimit      *int64            `json:"pidsLimit"`
	HugepageLimits map[int64]int64   `json:"hugepageLimits"`
	Unified        map[string]string `json:"unified"`
}

// Explain converts a ResourceConfig to its printed form.
func (rc ResourceConfig) Explain() ExplainedResources {
	return ExplainedResources{
		CPUShares:      rc.CPUShares,
		CPUQuota:       rc.CPUQuota,
		CPUPeriod:      rc.CPUPeriod,
		MemoryLimit:    rc.Memory,
		PidsLimit:      rc.PidsLimit,
		HugepageLimits: rc.HugePageLimit,
		Unified:        rc.Unified,
	}
}

// ContainerExplanation is one container of PodExplanation.
type ContainerExplanation struct {
	Name        string `json:"name"`
	OOMScoreAdj int    `json:"oomScoreAdj"`
}

// PodExplanation is what `slicectl explain pod` prints: how slicelet would place and limit a pod.
type PodExplanation struct {
	QOSClass   v1.PodQOSClass     `json:"qosClass"`
	Slice      string             `json:"slice"`
	CgroupPath string             `json:"cgroupPath"`
	Resources  ExplainedResources `json:"resources"`
	// CPUWeight is the cgroup v2 weight of the shares (the kubelet's linear formula); null when
	// the slice gets no shares.
	CPUWeight *uint64 `json:"cpuWeight"`
	// SystemdProperties are the properties of the slice's StartTransientUnit call, name → value
	// exactly as sent (a later duplicate wins, as it does in systemd).
	SystemdProperties map[string]any `json:"systemdProperties"`
	// Containers are the init and regular containers in spec order with their oom_score_adj.
	Containers []ContainerExplanation `json:"containers"`
	// PodSecurity is the Pod Security verdict at each pod source's configured level, filled in
	// by whoever knows the levels (the daemon, or slicectl from the configuration); empty when
	// not evaluated.
	PodSecurity []PodSecurityVerdict `json:"podSecurity,omitempty"`
	// Runtime is the configured runtime's verdict on the pod (what it cannot run), filled in
	// by whoever knows the runtime; nil when not evaluated.
	Runtime *RuntimeVerdict `json:"runtime,omitempty"`
	// Admission is the admission verdict: the running daemon's against its node as it is now
	// (resources, pressure), or offline slicectl's against the capacity it is given and the pods
	// before this one in its input; nil when not evaluated.
	Admission *AdmissionVerdict `json:"admission,omitempty"`
	// Validation is what the pod's source checks before anything else, filled in by slicectl
	// offline: the manifest path's validation of a static pod, or, on a node in cluster mode,
	// what the node checks of a pod from the API server (which has validated it already).
	// Nil when not evaluated.
	Validation *ValidationVerdict `json:"validation,omitempty"`
}

// ValidationVerdict is what a pod source's validation says of a pod.
type ValidationVerdict struct {
	// As is how the pod was validated: "static pod", or "API pod, cluster mode".
	As string `json:"as"`
	// Valid is true when the pod has no problem.
	Valid bool `json:"valid"`
	// Problems are its problems, each with its field path.
	Problems []string `json:"problems,omitempty"`
}

// RuntimeVerdict is what a container runtime says of a pod.
type RuntimeVerdict struct {
	// Runtime is the runtime's name, "systemd" or "cri".
	Runtime string `json:"runtime"`
	// Allowed is true when the runtime can run the pod.
	Allowed bool `json:"allowed"`
	// Problems are the fields it cannot run, each with its path and value.
	Problems []string `json:"problems,omitempty"`
}

// AdmissionVerdict is the kubelet-style admission decision.
type AdmissionVerdict struct {
	// Admit is true when the pod would be admitted now.
	Admit bool `json:"admit"`
	// Reason is the refusal's reason (OutOfcpu, OutOfmemory, Evicted, ...); empty when admitted.
	Reason string `json:"reason,omitempty"`
	// Message explains the refusal.
	Message string `json:"message,omitempty"`
	// Against says what the pod was admitted against when it is not the running node as it is
	// now (slicectl offline: the capacity it was given and the input's pods).
	Against string `json:"against,omitempty"`
}

// PodSecurityVerdict is what one pod source's Pod Security level says of a pod.
type PodSecurityVerdict struct {
	// Source is the pod source, "file" or "api" (kubernetes.io/config.source).
	Source string `json:"source"`
	// Level is "level:version", e.g. "baseline:latest".
	Level string `json:"level"`
	// Allowed is true when the level admits the pod.
	Allowed bool `json:"allowed"`
	// Message is the API server's refusal ("violates PodSecurity ..."); empty when allowed.
	Message string `json:"message,omitempty"`
}

// ExplainPod explains a pod for a node with the given options, cgroup mode and capacity (only
// its memory is used, for OOM scores). The pod's UID must be set (see PodUID).
func ExplainPod(pod *v1.Pod, opts Options, mode units.Mode, capacity Capacity) (PodExplanation, error) {
	qos := QOSClass(pod)
	uid := string(pod.UID)
	slice, err := PodSliceName(qos, uid)
	if err != nil {
		return PodExplanation{}, fmt.Errorf("pod %q: %w", pod.Name, err)
	}
	cgroupPath, err := PodCgroupPath(qos, uid)
	if err != nil {
		return PodExplanation{}, fmt.Errorf("pod %q: %w", pod.Name, err)
	}
	rc := PodResources(pod, opts)
	props := append(BaseSliceProperties(PodSliceDescription(pod), QOSSliceName(qos), mode), SliceProperties(rc, mode)...)
	e := PodExplanation{
		QOSClass:          qos,
		Slice:             slice,
		CgroupPath:        cgroupPath,
		Resources:         rc.Explain(),
		CPUWeight:         cpuWeight(rc),
		SystemdProperties: propertyMap(props),
		Containers:        []ContainerExplanation{},
	}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			e.Containers = append(e.Containers, ContainerExplanation{
				Name:        list[i].Name,
				OOMScoreAdj: ContainerOOMScoreAdj(pod, &list[i], capacity.Memory),
			})
		}
	}
	return e, nil
}

// cpuWeight returns the linear v2 weight of rc's shares, or nil.
func cpuWeight(rc ResourceConfig) *uint64 {
	if rc.CPUShares == nil {
		return nil
	}
	w := CPUSharesToWeight(*rc.CPUShares)
	return &w
}

// propertyMap turns a property list into name → value.
func propertyMap(props []units.Property) map[string]any {
	m := make(map[string]any, len(props))
	for _, p := range props {
		m[p.Name] = p.Value
	}
	return m
}

// Amounts are resource amounts in plain numbers: cpu in millicores, memory, ephemeral storage
// and hugepages in bytes, pids as a count. Absent resources are 0; pids (the internal pid
// resource, never part of the scheduler view) is omitted when 0.
type Amounts struct {
	CPU              int64 `json:"cpu"`
	Memory           int64 `json:"memory"`
	EphemeralStorage int64 `json:"ephemeralStorage"`
	Pids             int64 `json:"pids,omitempty"`
	// HugePages maps resource name (hugepages-2Mi) → bytes; omitted when empty.
	HugePages map[v1.ResourceName]int64 `json:"hugepages,omitempty"`
}

// AmountsOf converts a resource list to Amounts.
func AmountsOf(rl v1.ResourceList) Amounts {
	a := Amounts{
		CPU:              rl.Cpu().MilliValue(),
		Memory:           rl.Memory().Value(),
		EphemeralStorage: rl.StorageEphemeral().Value(),
	}
	if q, ok := rl[ResourcePID]; ok {
		a.Pids = q.Value()
	}
	for name, q := range rl {
		if _, err := HugePageSizeFromResourceName(name); err == nil {
			if a.HugePages == nil {
				a.HugePages = map[v1.ResourceName]int64{}
			}
			a.HugePages[name] = q.Value()
		}
	}
	return a
}

// ReservedExplanation is the reservation part of NodeExplanation.
type ReservedExplanation struct {
	SystemReserved Amounts `json:"systemReserved"`
	KubeReserved   Amounts `json:"kubeReserved"`
	// HardEviction is the memory and ephemeral storage held back by hard eviction thresholds;
	// it lowers the allocatable reported to the scheduler but not the kubepods limits.
	HardEviction Amounts `json:"hardEviction"`
}

// SliceExplanation is one slice of NodeExplanation.
type SliceExplanation struct {
	Slice string `json:"slice"`
	// CPU is the CPU in millicores the slice's shares stand for: the allocatable CPU for
	// kubepods, the summed requests of the active Burstable pods for the burstable slice, 0 for
	// besteffort.
	CPU int64 `json:"cpu"`
	// Memory is the slice's memory limit in bytes; null when unlimited.
	Memory            *int64             `json:"memory"`
	Resources         ExplainedResources `json:"resources"`
	CPUWeight         *uint64            `json:"cpuWeight"`
	SystemdProperties map[string]any     `json:"systemdProperties"`
}

// QOSExplanation holds the two QoS slices below kubepods.
type QOSExplanation struct {
	Burstable  SliceExplanation `json:"burstable"`
	BestEffort SliceExplanation `json:"besteffort"`
}

// NodeExplanation is what `slicectl explain node` prints.
type NodeExplanation struct {
	Capacity    Capacity            `json:"capacity"`
	Reserved    ReservedExplanation `json:"reserved"`
	Allocatable Amounts             `json:"allocatable"`
	Kubepods    SliceExplanation    `json:"kubepods"`
	QOS         QOSExplanation      `json:"qos"`
}

// NodeConfig is the node-level configuration ExplainNode needs.
type NodeConfig struct {
	SystemReserved v1.ResourceList
	KubeReserved   v1.ResourceList
	// HardEviction is the memory/ephemeral-storage of the hard eviction thresholds
	// (memory.available, nodefs.available), already resolved against capacity.
	HardEviction v1.ResourceList
	Enforcement  Enforcement
	// QOS configures the QoS reconcile. NodeAllocatableMemory and HugePageSizes are filled in
	// from the capacity and reservations when zero.
	QOS QOSOptions
}

// NodeSlices computes the configuration of kubepods.slice and the two QoS slices as they end up
// after start-up enforcement and one QoS reconcile: KubepodsConfig overlaid with the reconcile's
// kubepods values (MergeConfig), and the reconcile's burstable and besteffort configs. It also
// returns the effective QoS options (with NodeAllocatableMemory and HugePageSizes filled in).
func NodeSlices(capacity Capacity, cfg NodeConfig, activePods []*v1.Pod, mode units.Mode) (kubepods ResourceConfig, qos QOSCgroupConfigs, opts QOSOptions) {
	opts = cfg.QOS
	limits := KubepodsLimits(capacity, cfg.SystemReserved, cfg.KubeReserved)
	if opts.NodeAllocatableMemory == 0 {
		opts.NodeAllocatableMemory = limits.Memory().Value()
	}
	if opts.HugePageSizes == nil {
		opts.HugePageSizes = capacity.PageSizes()
	}
	base := KubepodsConfig(capacity, cfg.SystemReserved, cfg.KubeReserved, cfg.Enforcement, mode.V2() && !opts.EnforceMemoryQoS)
	qos = QOSConfigs(activePods, opts)
	return MergeConfig(base, qos.Kubepods), qos, opts
}

// ExplainNode explains the node: capacity, reservations, the scheduler's allocatable, and the
// kubepods and QoS slices with their systemd properties. It fails when the reservations exceed
// the capacity (ValidateReservation).
func ExplainNode(capacity Capacity, cfg NodeConfig, activePods []*v1.Pod, mode units.Mode) (NodeExplanation, error) {
	if err := ValidateReservation(capacity, SumResources(cfg.SystemReserved, cfg.KubeReserved, cfg.HardEviction)); err != nil {
		return NodeExplanation{}, err
	}
	kubepods, qos, _ := NodeSlices(capacity, cfg, activePods, mode)
	kubepodsCPU := capacity.CPU
	if cfg.Enforcement.Pods {
		limits := KubepodsLimits(capacity, cfg.SystemReserved, cfg.KubeReserved)
		kubepodsCPU = limits.Cpu().MilliValue()
	}
	var burstableCPU int64
	for _, pod := range activePods {
		if QOSClass(pod) == v1.PodQOSBurstable {
			reqs := PodRequestsFor(pod, cfg.QOS.DRANodeAllocatableResources)
			burstableCPU += reqs.Cpu().MilliValue()
		}
	}
	return NodeExplanation{
		Capacity: capacity,
		Reserved: ReservedExplanation{
			SystemReserved: AmountsOf(cfg.SystemReserved),
			KubeReserved:   AmountsOf(cfg.KubeReserved),
			HardEviction:   AmountsOf(cfg.HardEviction),
		},
		Allocatable: AmountsOf(NodeAllocatable(capacity, cfg.SystemReserved, cfg.KubeReserved, cfg.HardEviction)),
		Kubepods:    explainSlice(v1.PodQOSGuaranteed, kubepodsCPU, kubepods, RootSlice, mode),
		QOS: QOSExplanation{
			Burstable:  explainSlice(v1.PodQOSBurstable, burstableCPU, qos.Burstable, KubepodsSlice, mode),
			BestEffort: explainSlice(v1.PodQOSBestEffort, 0, qos.BestEffort, KubepodsSlice, mode),
		},
	}, nil
}

// explainSlice builds one SliceExplanation.
func explainSlice(qos v1.PodQOSClass, milliCPU int64, rc ResourceConfig, parent string, mode units.Mode) SliceExplanation {
	props := append(BaseSliceProperties(QOSSliceDescription(qos), parent, mode), SliceProperties(rc, mode)...)
	return SliceExplanation{
		Slice:             QOSSliceName(qos),
		CPU:               milliCPU,
		Memory:            rc.Memory,
		Resources:         rc.Explain(),
		CPUWeight:         cpuWeight(rc),
		SystemdProperties: propertyMap(props),
	}
}
