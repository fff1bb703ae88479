package slices

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// UnboundedHugePageLimit is the hugetlb limit the kubelet writes on the QoS cgroups for every
// page size the host supports: 1<<62 bytes, effectively no limit (setHugePagesUnbounded).
const UnboundedHugePageLimit int64 = 1 << 62

// HugePageSizeFromResourceName returns the page size in bytes named by a "hugepages-<size>"
// resource, e.g. hugepages-2Mi or hugepages-2097152 → 2097152. It fails for other names and for
// sizes that do not parse as a positive quantity.
func HugePageSizeFromResourceName(name v1.ResourceName) (int64, error) {
	size, ok := strings.CutPrefix(string(name), v1.ResourceHugePagesPrefix)
	if !ok {
		return 0, fmt.Errorf("resource name %q: not a hugepages resource", name)
	}
	q, err := resource.ParseQuantity(size)
	if err != nil {
		return 0, fmt.Errorf("resource name %q: page size: %w", name, err)
	}
	if q.Sign() <= 0 {
		return 0, fmt.Errorf("resource name %q: page size must be positive", name)
	}
	v, ok := q.AsInt64()
	if !ok {
		return 0, fmt.Errorf("resource name %q: page size is not a whole number of bytes", name)
	}
	return v, nil
}

// HugePageLimits maps page size in bytes → the sum of the values of all "hugepages-<size>"
// entries of rl. Two spellings of one size (hugepages-2Mi, hugepages-2097152) add up; entries
// with a malformed size and names without the prefix are dropped. The result is never nil.
func HugePageLimits(rl v1.ResourceList) map[int64]int64 {
	limits := map[int64]int64{}
	for name, q := range rl {
		size, err := HugePageSizeFromResourceName(name)
		if err != nil {
			continue
		}
		limits[size] += q.Value()
	}
	return limits
}

// HugePageUnitSize formats a page size in bytes the way the hugetlb controller names its files
// ("64KB", "2MB", "1GB"): the largest binary unit that divides the size exactly. Like the
// kubelet's HugePageUnitSizeFromByteSize it fails when the remainder exceeds 1024 of that unit
// (e.g. 1049600 bytes = 1025KB), since the kernel never names a page size that way.
func HugePageUnitSize(size int64) (string, error) {
	units := []string{"B", "KB", "MB", "GB", "TB", "PB"}
	if size <= 0 {
		return "", fmt.Errorf("page size %d: must be positive", size)
	}
	v, idx := size, 0
	for v%1024 == 0 && idx < len(units)-1 {
		v /= 1024
		idx++
	}
	if v > 1024 && idx < len(units)-1 {
		return "", fmt.Errorf("page size %d: not a whole number of %s", size, units[idx+1])
	}
	return fmt.Sprintf("%d%s", v, units[idx]), nil
}

// UnboundedHugePages returns the hugetlb configuration the kubelet puts on the QoS cgroups:
// UnboundedHugePageLimit for every page size the host supports (hostPageSizes, in bytes).
func UnboundedHugePages(hostPageSizes []int64) map[int64]int64 {
	m := make(map[int64]int64, len(hostPageSizes))
	for _, size := range hostPageSizes {
		m[size] = UnboundedHugePageLimit
	}
	return m
}
