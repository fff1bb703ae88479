package sandbox

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// cgroupRoot is where cgroup hierarchies are mounted, on the host and inside the sandbox.
const cgroupRoot = "/sys/fs/cgroup"

// mountEntry is one line of /proc/<pid>/mountinfo.
type mountEntry struct {
	ID         int
	ParentID   int
	Root       string
	MountPoint string
	// MountOptions are the per-mount options (ro, nosuid, ...).
	MountOptions []string
	FSType       string
	Source       string
	// SuperOptions are the superblock options (for cgroup v1: the controllers).
	SuperOptions []string
}

// parseMountinfo parses the format documented in proc(5), with moby's parser (the one runc and
// containerd use: octal escapes undone, optional fields skipped).
func parseMountinfo(r io.Reader) ([]mountEntry, error) {
	infos, err := mountinfo.GetMountsFromReader(r, nil)
	if err != nil {
		return nil, fmt.Errorf("mountinfo: %w", err)
	}
	out := make([]mountEntry, 0, len(infos))
	for _, m := range infos {
		out = append(out, mountEntry{
			ID:           m.ID,
			ParentID:     m.Parent,
			Root:         m.Root,
			MountPoint:   m.Mountpoint,
			MountOptions: strings.Split(m.Options, ","),
			FSType:       m.FSType,
			Source:       m.Source,
			SuperOptions: strings.Split(m.VFSOptions, ","),
		})
	}
	return out, nil
}

// procCgroup is one line of /proc/<pid>/cgroup.
type procCgroup struct {
	// Controllers are the comma-separated controllers of a v1 hierarchy ("cpu", "name=systemd");
	// empty for the cgroup v2 line.
	Controllers []string
	// Path is the cgroup path relative to the hierarchy root as seen by the reader.
	Path string
}

// parseProcCgroup parses /proc/<pid>/cgroup ("hierarchy-id:controllers:path").
func parseProcCgroup(r io.Reader) ([]procCgroup, error) {
	var out []procCgroup
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("cgroup line %d: want id:controllers:path, got %q", n, line)
		}
		var ctrl []string
		if parts[1] != "" {
			ctrl = strings.Split(parts[1], ",")
		}
		out = append(out, procCgroup{Controllers: ctrl, Path: parts[2]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cgroup file: %w", err)
	}
	return out, nil
}

// hierarchy is one cgroup mount under /sys/fs/cgroup and the instance's directory in it.
type hierarchy struct {
	// Rel is the mount point relative to /sys/fs/cgroup ("cpu", "systemd", "unified"); empty
	// when cgroup2 is mounted at /sys/fs/cgroup itself.
	Rel string `json:"rel"`
	// FSType is "cgroup" or "cgroup2".
	FSType string `json:"fstype"`
	// Options are the mount options to mount the same hierarchy again ("cpu", "name=systemd").
	Options string `json:"options"`
	// Controllers are the v1 controllers of the hierarchy; empty for cgroup2.
	Controllers []string `json:"controllers,omitempty"`
	// Parent is the host directory of the caller's own cgroup in this hierarchy.
	Parent string `json:"parent"`
	// Dir is the instance's cgroup directory on the host: Parent/<name>.
	Dir string `json:"dir"`
}

// superOptionsNotToRepeat are superblock options that are either implied or refused when the
// same hierarchy is mounted again from inside a cgroup namespace.
var superOptionsNotToRepeat = map[string]bool{
	"rw": true, "ro": true, "nsdelegate": true, "memory_recursiveprot": true,
}

// planHierarchies matches every cgroup mount under /sys/fs/cgroup with the caller's cgroup in that
// hierarchy and returns where the instance named name gets its own directory. Every hierarchy
// must be found: a cgroup namespace created elsewhere would leak the instance's cgroups to the
// host's roots.
func planHierarchies(mounts []mountEntry, own []procCgroup, name string) ([]hierarchy, error) {
	var out []hierarchy
	seen := map[string]bool{}
	for _, m := range mounts {
		if m.FSType != "cgroup" && m.FSType != "cgroup2" {
			continue
		}
		if m.MountPoint != cgroupRoot && !strings.HasPrefix(m.MountPoint, cgroupRoot+"/") {
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(m.MountPoint, cgroupRoot), "/")
		if seen[rel] {
			continue
		}
		seen[rel] = true
		h := hierarchy{Rel: rel, FSType: m.FSType}
		var opts []string
		for _, o := range m.SuperOptions {
			if superOptionsNotToRepeat[o] || strings.HasPrefix(o, "release_agent=") {
				continue
			}
			opts = append(opts, o)
		}
		h.Options = strings.Join(opts, ",")
		var ownPath string
		found := false
		for _, c := range own {
			if m.FSType == "cgroup2" && len(c.Controllers) == 0 {
				ownPath, found = c.Path, true
				break
			}
			if m.FSType == "cgroup" && len(c.Controllers) > 0 && allIn(c.Controllers, m.SuperOptions) {
				ownPath, found = c.Path, true
				h.Controllers = c.Controllers
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("cgroup hierarchy %s: the caller is in no cgroup of it", m.MountPoint)
		}
		// The mount may show a subtree only (its root is not "/"); the caller's path must lie in it.
		root := m.Root
		if root != "/" {
			if ownPath != root && !strings.HasPrefix(ownPath, root+"/") {
				return nil, fmt.Errorf("cgroup hierarchy %s: own cgroup %s is outside the mounted subtree %s", m.MountPoint, ownPath, root)
			}
			ownPath = strings.TrimPrefix(ownPath, root)
		}
		if strings.Contains(ownPath, "/..") {
			return nil, fmt.Errorf("cgroup hierarchy %s: own cgroup %s is outside this cgroup namespace", m.MountPoint, ownPath)
		}
		h.Parent = path.Join(m.MountPoint, ownPath)
		h.Dir = path.Join(h.Parent, name)
		out = append(out, h)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cgroup mounts: none under %s", cgroupRoot)
	}
	return out, nil
}

func allIn(want, have []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// joinedControllers are the v1 controllers systemd 252 mounts together in one hierarchy
// (src/core/mount-setup.c, join_controllers) at /sys/fs/cgroup/<a>,<b>.
var joinedControllers = [][2]string{{"cpu", "cpuacct"}, {"net_cls", "net_prio"}}

// enabledControllers parses /proc/cgroups and returns the enabled controllers in file order.
func enabledControllers(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			return nil, fmt.Errorf("proc cgroups: short line %q", line)
		}
		if f[3] == "1" {
			out = append(out, f[0])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("proc cgroups: %w", err)
	}
	return out, nil
}

// decoyDirs returns the directories under /sys/fs/cgroup where systemd would mount an enabled
// controller that has no mount point of its own. systemd mounts every such controller at boot,
// and a mount made from the sandbox could create a new global v1 hierarchy and take the
// controller away from cgroup2 for the whole machine. A directory bind-mounted onto itself there
// looks like a mount point, so systemd leaves the controller alone.
func decoyDirs(enabled []string, hs []hierarchy) []string {
	mounted := map[string]bool{}
	covered := map[string]bool{}
	for _, h := range hs {
		mounted[h.Rel] = true
		for _, c := range h.Controllers {
			covered[c] = true
		}
	}
	isEnabled := map[string]bool{}
	for _, c := range enabled {
		isEnabled[c] = true
	}
	var out []string
	done := map[string]bool{}
	for _, c := range enabled {
		if done[c] {
			continue
		}
		dir := c
		for _, j := range joinedControllers {
			if (c == j[0] || c == j[1]) && isEnabled[j[0]] && isEnabled[j[1]] {
				dir = j[0] + "," + j[1]
				done[j[0]], done[j[1]] = true, true
			}
		}
		done[c] = true
		if !mounted[dir] {
			out = append(out, dir)
		}
		// Controllers of a joined pair that the host mounts apart still get their own names checked.
		for _, part := range strings.Split(dir, ",") {
			if part != dir && !mounted[part] && !covered[part] {
				out = append(out, part)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
