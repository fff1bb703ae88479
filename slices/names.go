package slices

import (
	"fmt"
	"path"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/units"
)

// Cgroup drivers, as the kubelet's cgroupDriver names them.
const (
	// DriverCgroupfs names cgroups by their cgroupfs path (/kubepods/burstable).
	DriverCgroupfs = "cgroupfs"
	// DriverSystemd names cgroups by their slice path (/kubepods.slice/kubepods-burstable.slice).
	DriverSystemd = "systemd"
)

// Names of the kubepods hierarchy (pkg/kubelet/cm/qos_container_manager_linux.go,
// pod_container_manager_linux.go).
const (
	// NodeAllocatableCgroupName is the kubelet's defaultNodeAllocatableCgroupName.
	NodeAllocatableCgroupName = "kubepods"
	// PodCgroupNamePrefix prefixes a pod UID in its cgroup name.
	PodCgroupNamePrefix = "pod"
	// KubepodsSlice is the slice of all pods, limited to node allocatable; Guaranteed pods sit
	// directly in it.
	KubepodsSlice = "kubepods.slice"
	// BurstableSlice is the QoS slice of Burstable pods.
	BurstableSlice = "kubepods-burstable.slice"
	// BestEffortSlice is the QoS slice of BestEffort pods.
	BestEffortSlice = "kubepods-besteffort.slice"
	// RootSlice is systemd's root slice, the parent of kubepods.slice.
	RootSlice = "-.slice"

	systemdSliceSuffix = ".slice"
)

// CgroupName is the kubelet's driver-independent cgroup name: its components from the root, e.g.
// ["kubepods", "burstable", "pod1234-abcd"].
type CgroupName []string

// NewCgroupName returns base extended by components. Like the kubelet it panics if a component
// contains "/" (a path separator) or "_" (reserved for the systemd escape of "-"): names are built
// from constants and validated UIDs only, so this is a programming error.
func NewCgroupName(base CgroupName, components ...string) CgroupName {
	for _, c := range components {
		if strings.Contains(c, "/") || strings.Contains(c, "_") {
			panic(fmt.Errorf("cgroup name component %q: contains \"/\" or \"_\"", c))
		}
	}
	name := make(CgroupName, 0, len(base)+len(components))
	name = append(name, base...)
	return append(name, components...)
}

// ParseCgroupfsToCgroupName splits a cgroupfs path into a CgroupName; "/" and "" give the empty
// name.
func ParseCgroupfsToCgroupName(p string) CgroupName {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	if len(parts) == 1 && parts[0] == "" {
		return CgroupName{}
	}
	return CgroupName(parts)
}

// ParseSystemdToCgroupName converts a systemd slice name or path to a CgroupName. Only the base
// name is used, because a systemd slice name carries its whole ancestry:
// "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12_34.slice" →
// ["kubepods", "burstable", "pod12-34"].
func ParseSystemdToCgroupName(name string) CgroupName {
	base := strings.TrimSuffix(path.Base(name), systemdSliceSuffix)
	parts := strings.Split(base, "-")
	out := make(CgroupName, 0, len(parts))
	for _, p := range parts {
		out = append(out, strings.ReplaceAll(p, "_", "-"))
	}
	return out
}

// ToCgroupfs returns the cgroupfs path: "/" joined components, "/" for the empty name.
func (n CgroupName) ToCgroupfs() string {
	return "/" + path.Join(n...)
}

// ToSystemd returns the systemd path of the name, e.g. ["kubepods", "burstable"] →
// "/kubepods.slice/kubepods-burstable.slice". Each component has its "-" escaped to "_", empty
// components are dropped (the 2026 kubelet), and the empty name is "/". Like the kubelet it
// panics when the name cannot be a slice; use Systemd for names built from outside input.
func (n CgroupName) ToSystemd() string {
	p, err := n.Systemd()
	if err != nil {
		panic(err)
	}
	return p
}

// Systemd is ToSystemd returning an error instead of panicking, for components that are not
// valid in a slice name (see units.SliceName).
func (n CgroupName) Systemd() (string, error) {
	parts := make([]string, 0, len(n))
	for _, p := range n {
		if p == "" {
			continue
		}
		parts = append(parts, strings.ReplaceAll(p, "-", "_"))
	}
	if len(parts) == 0 {
		return "/", nil
	}
	// units.SliceName + units.ExpandSlice are the kubelet's join-with-"-" and
	// cgroups/systemd.ExpandSlice ("a-b.slice" → "/a.slice/a-b.slice"), with systemd's own name
	// rules checked in the one place slicelet keeps them.
	slice, err := units.SliceName(parts...)
	if err != nil {
		return "", fmt.Errorf("cgroup name %q: %w", []string(n), err)
	}
	p, err := units.ExpandSlice(slice)
	if err != nil {
		return "", fmt.Errorf("cgroup name %q: %w", []string(n), err)
	}
	return p, nil
}

// SliceUnit returns the systemd unit name of the name: the base of ToSystemd, "-.slice" for the
// root.
func (n CgroupName) SliceUnit() string {
	p := n.ToSystemd()
	if p == "/" {
		return RootSlice
	}
	return path.Base(p)
}

// Name returns the literal cgroup path of n for the driver: ToSystemd for "systemd", ToCgroupfs
// otherwise.
func (n CgroupName) Name(driver string) string {
	if driver == DriverSystemd {
		return n.ToSystemd()
	}
	return n.ToCgroupfs()
}

// NodeAllocatableRoot is the kubelet's NodeAllocatableRoot: the literal path of the cgroup that
// holds all pods, <cgroupRoot>/kubepods with cgroupsPerQOS, else cgroupRoot itself.
func NodeAllocatableRoot(cgroupRoot string, cgroupsPerQOS bool, driver string) string {
	root := ParseCgroupfsToCgroupName(cgroupRoot)
	if cgroupsPerQOS {
		root = NewCgroupName(root, NodeAllocatableCgroupName)
	}
	return root.Name(driver)
}

// QOSCgroupName returns the CgroupName of the QoS container of qos: kubepods for Guaranteed,
// kubepods/burstable and kubepods/besteffort otherwise (strings.ToLower of the class).
func QOSCgroupName(qos v1.PodQOSClass) CgroupName {
	root := CgroupName{NodeAllocatableCgroupName}
	if qos == v1.PodQOSGuaranteed {
		return root
	}
	return NewCgroupName(root, strings.ToLower(string(qos)))
}

// QOSSliceName returns the slice unit of the QoS container of qos: kubepods.slice,
// kubepods-burstable.slice or kubepods-besteffort.slice.
func QOSSliceName(qos v1.PodQOSClass) string {
	return QOSCgroupName(qos).SliceUnit()
}

// PodCgroupName returns the CgroupName of a pod's cgroup: ["kubepods", "burstable",
// "pod<uid>"] (Guaranteed: ["kubepods", "pod<uid>"]). The UID is checked with ValidateUID.
func PodCgroupName(qos v1.PodQOSClass, uid string) (CgroupName, error) {
	if err := ValidateUID(uid); err != nil {
		return nil, err
	}
	switch qos {
	case v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort:
	default:
		return nil, fmt.Errorf("qos class %q: unknown", qos)
	}
	return NewCgroupName(QOSCgroupName(qos), PodCgroupNamePrefix+uid), nil
}

// PodSliceName returns the slice unit of a pod: kubepods-<qos>-pod<uid with "-" → "_">.slice,
// or kubepods-pod<uid_>.slice for Guaranteed.
func PodSliceName(qos v1.PodQOSClass, uid string) (string, error) {
	n, err := PodCgroupName(qos, uid)
	if err != nil {
		return "", err
	}
	return n.SliceUnit(), nil
}

// PodCgroupPath returns the systemd cgroup path of a pod, e.g.
// /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1c_22.slice.
func PodCgroupPath(qos v1.PodQOSClass, uid string) (string, error) {
	n, err := PodCgroupName(qos, uid)
	if err != nil {
		return "", err
	}
	return n.ToSystemd(), nil
}

// ParsePodSliceName recognises a pod slice (unit name or systemd path) for orphan detection,
// with the kubelet's IsPodCgroup semantics: the name must be a direct child of a QoS container
// (kubepods, kubepods-burstable or kubepods-besteffort) and its last component must start with
// "pod". It returns the QoS class the slice's place implies and the pod UID (with "_" turned back
// into "-"). Names with an empty or invalid UID are not pod slices.
func ParsePodSliceName(name string) (qos v1.PodQOSClass, uid string, ok bool) {
	if !strings.HasSuffix(path.Base(name), systemdSliceSuffix) {
		return "", "", false
	}
	n := ParseSystemdToCgroupName(name)
	if len(n) < 2 || n[0] != NodeAllocatableCgroupName {
		return "", "", false
	}
	last := n[len(n)-1]
	switch {
	case len(n) == 2:
		qos = v1.PodQOSGuaranteed
	case len(n) == 3 && n[1] == "burstable":
		qos = v1.PodQOSBurstable
	case len(n) == 3 && n[1] == "besteffort":
		qos = v1.PodQOSBestEffort
	default:
		return "", "", false
	}
	uid, found := strings.CutPrefix(last, PodCgroupNamePrefix)
	if !found || ValidateUID(uid) != nil {
		return "", "", false
	}
	return qos, uid, true
}
