package slices

import (
	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/units"
)

// PodSlice is one pod's slice as the hierarchy's manager (slices/hierarchy) made it.
type PodSlice struct {
	UID       string
	Namespace string
	Name      string
	QOS       v1.PodQOSClass
	// Unit is the slice unit name, e.g. kubepods-burstable-pod<uid_>.slice.
	Unit string
	// CgroupPath is the slice's cgroup, e.g. /kubepods.slice/kubepods-burstable.slice/<Unit>.
	CgroupPath string
	// Resources is the configuration written to it.
	Resources ResourceConfig
	// Properties are the systemd properties last sent for it.
	Properties []units.Property
}

// Orphan is a pod slice that exists in systemd but belongs to no known pod.
type Orphan struct {
	Unit string
	UID  string
	QOS  v1.PodQOSClass
}

// SliceCgroupPath is the cgroup path of a kubepods slice unit, e.g.
// kubepods-burstable.slice → /kubepods.slice/kubepods-burstable.slice.
func SliceCgroupPath(unit string) string {
	p, err := ParseSystemdToCgroupName(unit).Systemd()
	if err != nil {
		return "/" + unit
	}
	return p
}

// PodSlicePatterns are the unit patterns matching every pod slice.
var PodSlicePatterns = []string{"kubepods-pod*.slice", "kubepods-burstable-pod*.slice", "kubepods-besteffort-pod*.slice"}
