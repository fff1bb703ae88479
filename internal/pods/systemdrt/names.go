package systemdrt

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/podstats"

	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/units"
)

// unitPrefix starts the name of every container unit.
const unitPrefix = "slicelet"

// allUnitsPattern matches every unit this runtime may have created (and possibly others, which
// ParseUnitName rejects).
const allUnitsPattern = unitPrefix + "-*" + units.SuffixService

// namePart maps a pod UID or container name to its unit name part: '-' becomes '_' (the
// kubelet's mapping for pod slices). Both are checked to contain no '_' (ValidateUID, DNS
// labels), so the mapping is reversible and the parts never contain the '-' separator.
func namePart(s string) string { return strings.ReplaceAll(s, "-", "_") }

// checkNamePart rejects text whose mapped form would be ambiguous or not a plain name part.
func checkNamePart(what, s string) error {
	if s == "" {
		return fmt.Errorf("%s: empty", what)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' {
			continue
		}
		return fmt.Errorf("%s %q: character %q at %d: only letters, digits and '-' can be part of a unit name", what, s, c, i)
	}
	return nil
}

// UnitName returns the unit of instance n (1, 2, ...) of a pod's container:
// slicelet-<uid_>-<container_>-<n>.service. The UID must pass slices.ValidateUID and the
// container name may hold only letters, digits and '-' (a DNS label); anything else is an
// error, never a silently changed name. The name is built and checked by units.ServiceName.
func UnitName(uid, container string, n int) (string, error) {
	if err := slices.ValidateUID(uid); err != nil {
		return "", err
	}
	if err := checkNamePart("container name", container); err != nil {
		return "", err
	}
	if n < 1 {
		return "", fmt.Errorf("container %q: instance %d: instances count from 1", container, n)
	}
	return units.ServiceName(unitPrefix, namePart(uid), namePart(container), strconv.Itoa(n))
}

// podPattern matches the units of every container of the pod.
func podPattern(uid string) string {
	return unitPrefix + "-" + namePart(uid) + "-*" + units.SuffixService
}

// unitID is what a container unit name says.
type unitID struct {
	UID       string
	Container string
	N         int
}

// ParseUnitName is the inverse of UnitName; ok is false for every other name.
func ParseUnitName(name string) (uid, container string, n int, ok bool) {
	rest, found := strings.CutSuffix(name, units.SuffixService)
	if !found {
		return "", "", 0, false
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 4 || parts[0] != unitPrefix {
		return "", "", 0, false
	}
	n, err := strconv.Atoi(parts[3])
	if err != nil || n < 1 || strconv.Itoa(n) != parts[3] {
		return "", "", 0, false
	}
	if strings.Contains(parts[1], "-") || strings.Contains(parts[2], "-") {
		return "", "", 0, false
	}
	uid = strings.ReplaceAll(parts[1], "_", "-")
	container = strings.ReplaceAll(parts[2], "_", "-")
	if slices.ValidateUID(uid) != nil || checkNamePart("container name", container) != nil {
		return "", "", 0, false
	}
	return uid, container, n, true
}

func parseUnit(name string) (unitID, bool) {
	uid, c, n, ok := ParseUnitName(name)
	return unitID{UID: uid, Container: c, N: n}, ok
}

// ContainerCgroups names the pod's container units among the child cgroups of its pod slice
// (podstats.Namer): slicelet-<uid_>-<container_>-<n>.service of this pod's UID, instance n.
// Other directories are left out. It needs no runtime state.
func ContainerCgroups(_ context.Context, pod *v1.Pod, dirs []string) (map[string]podstats.ContainerCgroup, error) {
	out := map[string]podstats.ContainerCgroup{}
	for _, dir := range dirs {
		if uid, container, n, ok := ParseUnitName(dir); ok && uid == string(pod.UID) {
			out[dir] = podstats.ContainerCgroup{Name: container, Instance: n}
		}
	}
	return out, nil
}

// ContainerCgroups is the package's ContainerCgroups, so the runtime is a podstats.Namer.
func (r *Runtime) ContainerCgroups(ctx context.Context, pod *v1.Pod, dirs []string) (map[string]podstats.ContainerCgroup, error) {
	return ContainerCgroups(ctx, pod, dirs)
}
