package podgen

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"

	"github.com/slicelet/slicelet/internal/pods/podfields"
)

// The structural generator: a valid base pod with one or two values bent. Its catalogue of
// bends is driven by the podfields registry: for every leaf of v1.Pod (podfields.LeafFields)
// the valid, boundary and invalid values of its type and name (values.go), set at the leaf's
// path with whatever must exist on the way (tree.go); and, on top, the structural bends one
// leaf cannot express: duplicates in lists keyed by a name, a path or a port, unions with two
// members or none (probe and hook handlers, volume sources, env sources), fields that depend
// on others (host ports under host networking, Windows- and Linux-only fields with os.name,
// probes and hooks on init containers, seccomp and AppArmor with their annotations...).
//
// Pod i of seed s bends catalogue entry (i + offset(s)) mod len(catalogue) first, so that every
// entry is bent once in every len(catalogue) consecutive pods, and half of the pods a second,
// random entry.

// Bend is one entry of the catalogue: a value of a leaf, or a structural change.
type Bend struct {
	// Leaf is the registry path of the field the bend is about (podfields.Leaves).
	Leaf string
	// Class is how the value stands to the field's rules, as the generator reads them.
	Class Class
	// What is the value set or the change made.
	What string

	apply func(s *setter)
}

func (b Bend) String() string { return fmt.Sprintf("%s %s %s", b.Leaf, b.Class, b.What) }

// Catalogue returns every bend, leaves' values first (in leaf order), then the structural ones.
var Catalogue = sync.OnceValue(func() []Bend {
	var out []Bend
	for _, l := range podfields.LeafFields() {
		vs := leafValues(l)
		if strings.HasPrefix(l.Path, "spec.ephemeralContainers[*].") && len(vs) > 1 {
			// Any ephemeral container is refused on create: one value is enough.
			vs = vs[:1]
		}
		sidecar := sidecarOnly(l.Path)
		for _, v := range vs {
			path, val := l.Path, v.v
			out = append(out, Bend{Leaf: path, Class: v.class, What: show(val), apply: func(s *setter) {
				if sidecar {
					s.container("initContainers", 0)["restartPolicy"] = "Always"
				}
				s.set(path, clone(val))
			}})
		}
	}
	return append(out, structural()...)
})

// sidecarOnly reports whether a leaf is a field only sidecars among init containers may have:
// its values are bent on a sidecar (the structural bends put them on a plain init container).
func sidecarOnly(path string) bool {
	rest, ok := strings.CutPrefix(path, ictr)
	if !ok {
		return false
	}
	first, _, _ := strings.Cut(rest, ".")
	switch strings.TrimSuffix(first, "[*]") {
	case "livenessProbe", "readinessProbe", "startupProbe", "lifecycle", "resizePolicy":
		return true
	}
	return false
}

// show prints a value short.
func show(v any) string {
	s := fmt.Sprintf("%v", v)
	if len(s) > 40 {
		s = fmt.Sprintf("%s...(%d chars)", s[:24], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// StructuralPod returns structural pod number index of the stream seeded by seed, named
// "s<seed>-<index>", and the bends it carries. The same (seed, index) always gives the same pod.
func StructuralPod(seed uint64, index int) (Manifest, []Bend) {
	r := rand.New(rand.NewPCG(seed^0x5354525543545552, uint64(index)))
	name := fmt.Sprintf("s%d-%d", seed, index)
	m := basePod(r, name)
	cat := Catalogue()
	offset := int(seed % uint64(len(cat)))
	bends := []Bend{cat[(index+offset)%len(cat)]}
	if r.IntN(2) == 0 {
		bends = append(bends, cat[r.IntN(len(cat))])
	}
	s := &setter{m: m}
	for _, b := range bends {
		b.apply(s)
	}
	return m, bends
}

// basePod is a valid pod both slicelet and the kubelet run, with some of the features bends
// need around them (ports, volumes and mounts, env, probes, init containers and sidecars,
// security contexts), drawn by r.
func basePod(r *rand.Rand, name string) Manifest {
	chance := func(p float64) bool { return r.Float64() < p }
	c0 := obj("name", "c0", "image", pause)
	containers := list(c0)
	if chance(0.4) {
		containers = append(containers, obj("name", "c1", "image", pause))
	}
	if chance(0.5) {
		res := obj("cpu", "100m", "memory", "64Mi")
		c0["resources"] = obj("requests", res, "limits", clone(res))
	}
	if chance(0.4) {
		c0["ports"] = list(obj("name", "http", "containerPort", 8080))
	}
	spec := obj("containers", containers, "volumes", list(obj("name", "data", "emptyDir", obj())))
	if chance(0.5) {
		c0["volumeMounts"] = list(obj("name", "data", "mountPath", "/data"))
	}
	if chance(0.3) {
		c0["env"] = list(obj("name", "A", "value", "1"), obj("name", "POD_NAME", "valueFrom", obj("fieldRef", obj("fieldPath", "metadata.name"))))
	}
	if chance(0.3) {
		c0["livenessProbe"] = obj("exec", obj("command", list("/bin/true")), "periodSeconds", 10)
	}
	if chance(0.2) {
		c0["readinessProbe"] = obj("httpGet", obj("path", "/healthz", "port", 8080))
	}
	if chance(0.1) {
		c0["lifecycle"] = obj("preStop", obj("sleep", obj("seconds", 5)))
	}
	if chance(0.15) {
		c0["securityContext"] = obj("allowPrivilegeEscalation", false, "capabilities", obj("drop", list("ALL")), "readOnlyRootFilesystem", true)
	}
	if chance(0.25) {
		init := obj("name", "i0", "image", pause)
		if chance(0.4) {
			init["restartPolicy"] = "Always"
		}
		spec["initContainers"] = list(init)
	}
	if chance(0.15) {
		spec["securityContext"] = obj("runAsUser", 1000, "runAsNonRoot", true, "fsGroup", 2000)
	}
	if chance(0.15) {
		spec["os"] = obj("name", "linux")
	}
	if chance(0.1) {
		spec["hostNetwork"] = true
	}
	if chance(0.1) {
		spec["restartPolicy"] = []string{"OnFailure", "Never"}[r.IntN(2)]
	}
	if chance(0.1) {
		spec["terminationGracePeriodSeconds"] = 10
	}
	md := obj("name", name, "labels", obj("app", "s"))
	if chance(0.1) {
		md["namespace"] = "kube-system"
	}
	return Manifest{"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}
}

// Helpers of the structural bends.

func (s *setter) spec() map[string]any { return s.node("spec", 0) }

// container returns container i of list ("containers", "initContainers"), created if missing.
func (s *setter) container(listName string, i int) map[string]any {
	l, _ := s.spec()[listName].([]any)
	for len(l) <= i {
		c := s.fresh("spec." + listName + "[*]")
		c["name"] = fmt.Sprintf("%c%d", listName[0], len(l))
		l = append(l, c)
	}
	s.spec()[listName] = l
	return l[i].(map[string]any)
}

// appendTo appends elements to the list at key of m.
func appendTo(m map[string]any, key string, elems ...any) {
	l, _ := m[key].([]any)
	m[key] = append(l, elems...)
}

// sc returns the map at key of m, created if missing.
func sub(m map[string]any, key string) map[string]any {
	c, ok := m[key].(map[string]any)
	if !ok {
		c = map[string]any{}
		m[key] = c
	}
	return c
}

func bend(leaf string, class Class, what string, apply func(s *setter)) Bend {
	return Bend{Leaf: leaf, Class: class, What: what, apply: apply}
}

const (
	ctr  = "spec.containers[*]."
	ictr = "spec.initContainers[*]."
)

// linuxOnly are the fields validation refuses in a pod whose os.name is windows, with a value.
var linuxOnly = []struct {
	pod   bool
	path  string
	value any
}{
	{true, "securityContext.runAsUser", 1000},
	{true, "securityContext.runAsGroup", 1000},
	{true, "securityContext.runAsNonRoot", true},
	{true, "securityContext.fsGroup", 2000},
	{true, "securityContext.supplementalGroups", list(3000)},
	{true, "securityContext.supplementalGroupsPolicy", "Merge"},
	{true, "securityContext.fsGroupChangePolicy", "Always"},
	{true, "securityContext.sysctls", list(obj("name", "kernel.shm_rmid_forced", "value", "0"))},
	{true, "securityContext.seLinuxOptions", obj("level", "s0:c1,c2")},
	{true, "securityContext.seccompProfile", obj("type", "RuntimeDefault")},
	{true, "securityContext.appArmorProfile", obj("type", "RuntimeDefault")},
	{true, "hostUsers", false},
	{true, "hostPID", true},
	{true, "shareProcessNamespace", true},
	{false, "securityContext.privileged", true},
	{false, "securityContext.allowPrivilegeEscalation", false},
	{false, "securityContext.capabilities", obj("add", list("NET_ADMIN"))},
	{false, "securityContext.readOnlyRootFilesystem", true},
	{false, "securityContext.procMount", "Default"},
	{false, "securityContext.runAsUser", 1000},
	{false, "securityContext.seccompProfile", obj("type", "RuntimeDefault")},
	{false, "securityContext.seLinuxOptions", obj("type", "spc_t")},
	{false, "resources", obj("limits", obj("memory", "64Mi"), "requests", obj("memory", "64Mi"))},
}

// setPath sets a dotted path below m (maps only).
func setPath(m map[string]any, path string, v any) {
	segs := strings.Split(path, ".")
	for _, sg := range segs[:len(segs)-1] {
		m = sub(m, sg)
	}
	m[segs[len(segs)-1]] = v
}

// structural are the bends one leaf's value cannot express.
func structural() []Bend {
	var out []Bend
	add := func(b ...Bend) { out = append(out, b...) }

	// Duplicates in lists keyed by a name, a path or a port.
	add(
		bend(ctr+"name", Invalid, "two containers named c0", func(s *setter) { appendTo(s.spec(), "containers", obj("name", "c0", "image", pause)) }),
		bend(ictr+"name", Invalid, "an init container named as a container", func(s *setter) { s.container("initContainers", 0)["name"] = "c0" }),
		bend(ictr+"name", Invalid, "two init containers named i9", func(s *setter) {
			appendTo(s.spec(), "initContainers", obj("name", "i9", "image", pause), obj("name", "i9", "image", pause))
		}),
		bend(ctr+"ports[*].name", Invalid, "two ports named http", func(s *setter) {
			appendTo(s.container("containers", 0), "ports", obj("name", "http", "containerPort", 8081), obj("name", "http", "containerPort", 8082))
		}),
		bend(ctr+"ports[*].name", Invalid, "the same port name in two containers", func(s *setter) {
			appendTo(s.container("containers", 0), "ports", obj("name", "web", "containerPort", 8081))
			appendTo(s.container("containers", 1), "ports", obj("name", "web", "containerPort", 8082))
		}),
		bend(ctr+"ports[*].containerPort", Valid, "one containerPort twice, TCP and UDP", func(s *setter) {
			appendTo(s.container("containers", 0), "ports", obj("containerPort", 5353, "protocol", "TCP"), obj("containerPort", 5353, "protocol", "UDP"))
		}),
		bend(ctr+"ports[*].containerPort", Boundary, "one containerPort twice, TCP both", func(s *setter) {
			appendTo(s.container("containers", 0), "ports", obj("containerPort", 5353), obj("containerPort", 5353))
		}),
		bend(ctr+"ports[*].hostPort", Invalid, "one hostPort in two containers (host network)", func(s *setter) {
			s.spec()["hostNetwork"] = true
			appendTo(s.container("containers", 0), "ports", obj("containerPort", 7001, "hostPort", 7001))
			appendTo(s.container("containers", 1), "ports", obj("containerPort", 7001, "hostPort", 7001))
		}),
		bend("spec.volumes[*].name", Invalid, "two volumes named data", func(s *setter) { appendTo(s.spec(), "volumes", obj("name", "data", "emptyDir", obj())) }),
		bend(ctr+"volumeMounts[*].mountPath", Invalid, "two mounts at /same", func(s *setter) {
			appendTo(s.container("containers", 0), "volumeMounts", obj("name", "data", "mountPath", "/same"), obj("name", "data", "mountPath", "/same"))
		}),
		bend(ctr+"volumeMounts[*].mountPath", Boundary, "two mounts at /same and /same/", func(s *setter) {
			appendTo(s.container("containers", 0), "volumeMounts", obj("name", "data", "mountPath", "/same"), obj("name", "data", "mountPath", "/same/"))
		}),
		bend(ctr+"volumeMounts[*].name", Valid, "one volume mounted twice", func(s *setter) {
			appendTo(s.container("containers", 0), "volumeMounts", obj("name", "data", "mountPath", "/one"), obj("name", "data", "mountPath", "/two"))
		}),
		bend(ctr+"volumeMounts[*].name", Invalid, "a mount of no volume", func(s *setter) {
			appendTo(s.container("containers", 0), "volumeMounts", obj("name", "missing", "mountPath", "/missing"))
		}),
		bend(ctr+"volumeDevices[*].devicePath", Invalid, "a device at a mount's path", func(s *setter) {
			c := s.container("containers", 0)
			appendTo(c, "volumeMounts", obj("name", "data", "mountPath", "/dev/x"))
			appendTo(c, "volumeDevices", obj("name", "data", "devicePath", "/dev/x"))
		}),
		bend(ctr+"env[*].name", Valid, "two env vars named A", func(s *setter) {
			appendTo(s.container("containers", 0), "env", obj("name", "DUP", "value", "1"), obj("name", "DUP", "value", "2"))
		}),
		bend("spec.securityContext.sysctls[*].name", Invalid, "one sysctl twice", func(s *setter) {
			setPath(s.spec(), "securityContext.sysctls", list(obj("name", "kernel.shm_rmid_forced", "value", "0"), obj("name", "kernel.shm_rmid_forced", "value", "1")))
		}),
		bend("spec.securityContext.sysctls[*].name", Boundary, "a net.* sysctl with host network", func(s *setter) {
			s.spec()["hostNetwork"] = true
			setPath(s.spec(), "securityContext.sysctls", list(obj("name", "net.ipv4.ip_local_port_range", "value", "1024 65535")))
		}),
		bend("spec.securityContext.sysctls[*].name", Boundary, "a kernel.shm sysctl with host IPC", func(s *setter) {
			s.spec()["hostIPC"] = true
			setPath(s.spec(), "securityContext.sysctls", list(obj("name", "kernel.shm_rmid_forced", "value", "1")))
		}),
		bend("spec.topologySpreadConstraints[*].topologyKey", Invalid, "two constraints on one key and action", func(s *setter) {
			c := obj("maxSkew", 1, "topologyKey", "zone", "whenUnsatisfiable", "DoNotSchedule")
			appendTo(s.spec(), "topologySpreadConstraints", c, clone(c))
		}),
		bend("spec.topologySpreadConstraints[*].minDomains", Invalid, "minDomains with ScheduleAnyway", func(s *setter) {
			appendTo(s.spec(), "topologySpreadConstraints", obj("maxSkew", 1, "topologyKey", "zone", "whenUnsatisfiable", "ScheduleAnyway", "minDomains", 2))
		}),
		bend(ctr+"resizePolicy[*].resourceName", Invalid, "cpu twice in resizePolicy", func(s *setter) {
			appendTo(s.container("containers", 0), "resizePolicy", obj("resourceName", "cpu", "restartPolicy", "NotRequired"), obj("resourceName", "cpu", "restartPolicy", "RestartContainer"))
		}),
		bend(ictr+"resizePolicy[*].resourceName", Boundary, "resizePolicy on an init container", func(s *setter) {
			appendTo(s.container("initContainers", 0), "resizePolicy", obj("resourceName", "cpu", "restartPolicy", "NotRequired"))
		}),
		bend("spec.schedulingGates[*].name", Invalid, "one scheduling gate twice", func(s *setter) {
			appendTo(s.spec(), "schedulingGates", obj("name", "example.com/g"), obj("name", "example.com/g"))
		}),
		bend("spec.readinessGates[*].conditionType", Boundary, "one readiness gate twice", func(s *setter) {
			appendTo(s.spec(), "readinessGates", obj("conditionType", "example.com/r"), obj("conditionType", "example.com/r"))
		}),
		bend("spec.resourceClaims[*].name", Invalid, "one resource claim name twice", func(s *setter) {
			appendTo(s.spec(), "resourceClaims", obj("name", "rc", "resourceClaimName", "a"), obj("name", "rc", "resourceClaimName", "b"))
		}),
		bend("spec.hostAliases[*].ip", Valid, "one IP in two host aliases", func(s *setter) {
			appendTo(s.spec(), "hostAliases", obj("ip", "10.0.0.9", "hostnames", list("a.example")), obj("ip", "10.0.0.9", "hostnames", list("b.example")))
		}),
		bend("spec.volumes[*].downwardAPI.items[*].path", Invalid, "two downwardAPI items at one path", func(s *setter) {
			it := obj("path", "same", "fieldRef", obj("fieldPath", "metadata.name"))
			appendTo(s.spec(), "volumes", obj("name", "dapi", "downwardAPI", obj("items", list(it, clone(it)))))
		}),
		bend("spec.volumes[*].configMap.items[*].path", Invalid, "two configMap items at one path", func(s *setter) {
			appendTo(s.spec(), "volumes", obj("name", "cmv", "configMap", obj("name", "cm", "items", list(obj("key", "a", "path", "same"), obj("key", "b", "path", "same")))))
		}),
		bend("spec.volumes[*].projected.sources[*].downwardAPI.items[*].path", Invalid, "two projected items at one path", func(s *setter) {
			it := obj("path", "same", "fieldRef", obj("fieldPath", "metadata.name"))
			appendTo(s.spec(), "volumes", obj("name", "proj", "projected", obj("sources", list(obj("downwardAPI", obj("items", list(it))), obj("downwardAPI", obj("items", list(clone(it))))))))
		}),
		bend("spec.containers", Invalid, "no containers", func(s *setter) { s.spec()["containers"] = list() }),
		bend("spec.imagePullSecrets[*].name", Boundary, "one pull secret twice", func(s *setter) {
			appendTo(s.spec(), "imagePullSecrets", obj("name", "r"), obj("name", "r"))
		}),
	)

	// Unions with two members or none.
	for _, p := range []string{"livenessProbe", "readinessProbe", "startupProbe"} {
		add(
			bend(ctr+p, Invalid, "two handlers (exec and httpGet)", func(s *setter) {
				s.container("containers", 0)[p] = obj("exec", obj("command", list("/bin/true")), "httpGet", obj("port", 8080))
			}),
			bend(ctr+p, Invalid, "two handlers (tcpSocket and grpc)", func(s *setter) {
				s.container("containers", 0)[p] = obj("tcpSocket", obj("port", 8080), "grpc", obj("port", 9090))
			}),
			bend(ctr+p, Invalid, "no handler", func(s *setter) { s.container("containers", 0)[p] = obj("periodSeconds", 5) }),
			bend(ictr+p, Invalid, "on a plain init container", func(s *setter) {
				c := s.container("initContainers", 0)
				delete(c, "restartPolicy")
				c[p] = obj("exec", obj("command", list("/bin/true")))
			}),
			bend(ictr+p, Valid, "on a sidecar", func(s *setter) {
				c := s.container("initContainers", 0)
				c["restartPolicy"] = "Always"
				c[p] = obj("exec", obj("command", list("/bin/true")))
			}),
		)
	}
	for _, h := range []string{"postStart", "preStop"} {
		add(
			bend(ctr+"lifecycle."+h, Invalid, "two handlers (exec and sleep)", func(s *setter) {
				setPath(s.container("containers", 0), "lifecycle."+h, obj("exec", obj("command", list("/bin/true")), "sleep", obj("seconds", 1)))
			}),
			bend(ctr+"lifecycle."+h, Invalid, "no handler", func(s *setter) { setPath(s.container("containers", 0), "lifecycle."+h, obj()) }),
			bend(ctr+"lifecycle."+h, Boundary, "tcpSocket handler", func(s *setter) {
				setPath(s.container("containers", 0), "lifecycle."+h, obj("tcpSocket", obj("port", 8080)))
			}),
			bend(ictr+"lifecycle."+h, Invalid, "on a plain init container", func(s *setter) {
				c := s.container("initContainers", 0)
				delete(c, "restartPolicy")
				setPath(c, "lifecycle."+h, obj("exec", obj("command", list("/bin/true"))))
			}),
			bend(ictr+"lifecycle."+h, Valid, "on a sidecar", func(s *setter) {
				c := s.container("initContainers", 0)
				c["restartPolicy"] = "Always"
				setPath(c, "lifecycle."+h, obj("exec", obj("command", list("/bin/true"))))
			}),
		)
	}
	add(
		bend(ctr+"lifecycle", Invalid, "lifecycle without a hook", func(s *setter) { s.container("containers", 0)["lifecycle"] = obj() }),
		bend(ctr+"lifecycle.preStop.sleep.seconds", Invalid, "sleep longer than the grace period", func(s *setter) {
			s.spec()["terminationGracePeriodSeconds"] = 10
			setPath(s.container("containers", 0), "lifecycle.preStop", obj("sleep", obj("seconds", 20)))
		}),
		bend("spec.volumes[*]", Invalid, "two sources (emptyDir and hostPath)", func(s *setter) {
			appendTo(s.spec(), "volumes", obj("name", "two", "emptyDir", obj(), "hostPath", obj("path", "/tmp")))
		}),
		bend("spec.volumes[*]", Invalid, "no source", func(s *setter) { appendTo(s.spec(), "volumes", obj("name", "none")) }),
		bend("spec.volumes[*].projected.sources[*]", Invalid, "a projection with two sources", func(s *setter) {
			appendTo(s.spec(), "volumes", obj("name", "proj2", "projected", obj("sources", list(obj(
				"downwardAPI", obj("items", list(obj("path", "a", "fieldRef", obj("fieldPath", "metadata.name")))),
				"configMap", obj("name", "cm"))))))
		}),
		bend("spec.volumes[*].projected.sources[*]", Invalid, "a projection with no source", func(s *setter) {
			appendTo(s.spec(), "volumes", obj("name", "proj0", "projected", obj("sources", list(obj()))))
		}),
		bend("spec.volumes[*].downwardAPI.items[*]", Invalid, "an item with fieldRef and resourceFieldRef", func(s *setter) {
			appendTo(s.spec(), "volumes", obj("name", "dapi2", "downwardAPI", obj("items", list(obj("path", "a",
				"fieldRef", obj("fieldPath", "metadata.name"), "resourceFieldRef", obj("containerName", "c0", "resource", "limits.cpu"))))))
		}),
		bend("spec.volumes[*].downwardAPI.items[*]", Invalid, "an item with no source", func(s *setter) {
			appendTo(s.spec(), "volumes", obj("name", "dapi0", "downwardAPI", obj("items", list(obj("path", "a")))))
		}),
		bend("spec.volumes[*].downwardAPI.items[*].resourceFieldRef.containerName", Invalid, "resourceFieldRef without containerName in a volume", func(s *setter) {
			appendTo(s.spec(), "volumes", obj("name", "dapir", "downwardAPI", obj("items", list(obj("path", "a", "resourceFieldRef", obj("resource", "limits.cpu"))))))
		}),
		bend(ctr+"env[*]", Invalid, "value and valueFrom", func(s *setter) {
			appendTo(s.container("containers", 0), "env", obj("name", "BOTH", "value", "v", "valueFrom", obj("fieldRef", obj("fieldPath", "metadata.name"))))
		}),
		bend(ctr+"env[*].valueFrom", Invalid, "two sources (fieldRef and resourceFieldRef)", func(s *setter) {
			appendTo(s.container("containers", 0), "env", obj("name", "TWO", "valueFrom", obj("fieldRef", obj("fieldPath", "metadata.name"), "resourceFieldRef", obj("resource", "limits.cpu"))))
		}),
		bend(ctr+"env[*].valueFrom", Invalid, "no source", func(s *setter) {
			appendTo(s.container("containers", 0), "env", obj("name", "NONE", "valueFrom", obj()))
		}),
		bend(ctr+"env[*].valueFrom.resourceFieldRef.containerName", Invalid, "another container's resource", func(s *setter) {
			s.container("containers", 1)
			appendTo(s.container("containers", 0), "env", obj("name", "OTHER", "valueFrom", obj("resourceFieldRef", obj("containerName", "c1", "resource", "limits.cpu"))))
		}),
		bend(ctr+"env[*].valueFrom.fileKeyRef.volumeName", Invalid, "a fileKeyRef to a volume that is not an emptyDir", func(s *setter) {
			appendTo(s.spec(), "volumes", obj("name", "hp", "hostPath", obj("path", "/tmp")))
			appendTo(s.container("containers", 0), "env", obj("name", "F", "valueFrom", obj("fileKeyRef", obj("volumeName", "hp", "path", "v.env", "key", "K"))))
		}),
		bend(ctr+"env[*].valueFrom.fileKeyRef.volumeName", Invalid, "a fileKeyRef to no volume", func(s *setter) {
			appendTo(s.container("containers", 0), "env", obj("name", "F", "valueFrom", obj("fileKeyRef", obj("volumeName", "missing", "path", "v.env", "key", "K"))))
		}),
		bend(ctr+"envFrom[*]", Invalid, "configMapRef and secretRef", func(s *setter) {
			appendTo(s.container("containers", 0), "envFrom", obj("configMapRef", obj("name", "cm"), "secretRef", obj("name", "sec")))
		}),
		bend(ctr+"envFrom[*]", Invalid, "no source", func(s *setter) { appendTo(s.container("containers", 0), "envFrom", obj("prefix", "P_")) }),
		bend(ctr+"volumeMounts[*].subPathExpr", Invalid, "subPath and subPathExpr", func(s *setter) {
			appendTo(s.container("containers", 0), "volumeMounts", obj("name", "data", "mountPath", "/sp", "subPath", "a", "subPathExpr", "$(POD)"))
		}),
	)

	// Fields that depend on others.
	add(
		bend(ctr+"ports[*].hostPort", Invalid, "hostPort != containerPort with host network", func(s *setter) {
			s.spec()["hostNetwork"] = true
			appendTo(s.container("containers", 0), "ports", obj("containerPort", 7002, "hostPort", 7003))
		}),
		bend(ctr+"ports[*].hostPort", Valid, "hostPort = containerPort with host network", func(s *setter) {
			s.spec()["hostNetwork"] = true
			appendTo(s.container("containers", 0), "ports", obj("containerPort", 7004, "hostPort", 7004))
		}),
		bend(ctr+"ports[*].hostPort", Valid, "hostPort without host network", func(s *setter) {
			delete(s.spec(), "hostNetwork")
			appendTo(s.container("containers", 0), "ports", obj("containerPort", 7005, "hostPort", 17005))
		}),
		bend("spec.shareProcessNamespace", Invalid, "with hostPID", func(s *setter) { s.spec()["shareProcessNamespace"], s.spec()["hostPID"] = true, true }),
		bend(ctr+"securityContext.allowPrivilegeEscalation", Invalid, "false with privileged", func(s *setter) {
			setPath(s.container("containers", 0), "securityContext", obj("privileged", true, "allowPrivilegeEscalation", false))
		}),
		bend(ctr+"securityContext.allowPrivilegeEscalation", Invalid, "false with CAP_SYS_ADMIN", func(s *setter) {
			setPath(s.container("containers", 0), "securityContext", obj("capabilities", obj("add", list("SYS_ADMIN")), "allowPrivilegeEscalation", false))
		}),
		bend(ctr+"securityContext.seccompProfile", Valid, "Localhost with a profile", func(s *setter) {
			setPath(s.container("containers", 0), "securityContext.seccompProfile", obj("type", "Localhost", "localhostProfile", "profiles/a.json"))
		}),
		bend("spec.securityContext.appArmorProfile", Valid, "Localhost with a profile", func(s *setter) {
			setPath(s.spec(), "securityContext.appArmorProfile", obj("type", "Localhost", "localhostProfile", "k8s-profile"))
		}),
		bend("metadata.annotations", Invalid, "a seccomp pod annotation unlike the field", func(s *setter) {
			setPath(s.spec(), "securityContext.seccompProfile", obj("type", "RuntimeDefault"))
			setPath(sub(s.m, "metadata"), "annotations", obj("seccomp.security.alpha.kubernetes.io/pod", "unconfined"))
		}),
		bend("metadata.annotations", Valid, "a seccomp pod annotation like the field", func(s *setter) {
			setPath(s.spec(), "securityContext.seccompProfile", obj("type", "RuntimeDefault"))
			setPath(sub(s.m, "metadata"), "annotations", obj("seccomp.security.alpha.kubernetes.io/pod", "runtime/default"))
		}),
		bend("metadata.annotations", Boundary, "a seccomp container annotation alone", func(s *setter) {
			setPath(sub(s.m, "metadata"), "annotations", obj("container.seccomp.security.alpha.kubernetes.io/c0", "localhost/p.json"))
		}),
		bend("metadata.annotations", Invalid, "an AppArmor container annotation unlike the field", func(s *setter) {
			setPath(s.container("containers", 0), "securityContext.appArmorProfile", obj("type", "RuntimeDefault"))
			setPath(sub(s.m, "metadata"), "annotations", obj("container.apparmor.security.beta.kubernetes.io/c0", "unconfined"))
		}),
		bend("metadata.annotations", Boundary, "an AppArmor annotation for no container", func(s *setter) {
			setPath(sub(s.m, "metadata"), "annotations", obj("container.apparmor.security.beta.kubernetes.io/nope", "runtime/default"))
		}),
		bend("metadata.annotations", Invalid, "annotations over 256 KiB", func(s *setter) {
			setPath(sub(s.m, "metadata"), "annotations", obj("big", strings.Repeat("x", 256*1024)))
		}),
		bend("spec.hostUsers", Invalid, "false with host network", func(s *setter) { s.spec()["hostUsers"], s.spec()["hostNetwork"] = false, true }),
		bend("spec.hostUsers", Invalid, "false with hostPID", func(s *setter) { s.spec()["hostUsers"], s.spec()["hostPID"] = false, true }),
		bend("spec.dnsPolicy", Invalid, "None without dnsConfig", func(s *setter) { s.spec()["dnsPolicy"] = "None"; delete(s.spec(), "dnsConfig") }),
		bend("spec.dnsPolicy", Valid, "None with nameservers", func(s *setter) {
			s.spec()["dnsPolicy"] = "None"
			s.spec()["dnsConfig"] = obj("nameservers", list("10.0.0.10"))
		}),
		bend("spec.dnsConfig.nameservers[*]", Invalid, "four nameservers", func(s *setter) {
			s.spec()["dnsConfig"] = obj("nameservers", list("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"))
		}),
		bend("spec.dnsConfig.searches[*]", Invalid, "33 search domains", func(s *setter) {
			var l []any
			for i := 0; i < 33; i++ {
				l = append(l, fmt.Sprintf("d%d.example", i))
			}
			s.spec()["dnsConfig"] = obj("searches", l)
		}),
		bend("spec.dnsConfig.searches[*]", Invalid, "search domains over 2048 characters", func(s *setter) {
			var l []any
			for i := 0; i < 9; i++ {
				l = append(l, fmt.Sprintf("%s.d%d", s253[:240], i))
			}
			s.spec()["dnsConfig"] = obj("searches", l)
		}),
		bend("spec.tolerations[*].value", Invalid, "Exists with a value", func(s *setter) {
			appendTo(s.spec(), "tolerations", obj("key", "k", "operator", "Exists", "value", "v"))
		}),
		bend("spec.tolerations[*].tolerationSeconds", Invalid, "tolerationSeconds with NoSchedule", func(s *setter) {
			appendTo(s.spec(), "tolerations", obj("key", "k", "operator", "Exists", "effect", "NoSchedule", "tolerationSeconds", 60))
		}),
		bend("spec.tolerations[*].key", Invalid, "Equal without a key", func(s *setter) {
			appendTo(s.spec(), "tolerations", obj("operator", "Equal", "value", "v"))
		}),
		bend("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[*].matchFields[*].key", Invalid, "a matchFields key other than metadata.name", func(s *setter) {
			setPath(s.spec(), "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution", obj("nodeSelectorTerms", list(obj("matchFields", list(obj("key", "metadata.labels", "operator", "In", "values", list("x")))))))
		}),
		bend("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[*].matchExpressions[*].values[*]", Invalid, "Gt with two values", func(s *setter) {
			setPath(s.spec(), "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution", obj("nodeSelectorTerms", list(obj("matchExpressions", list(obj("key", "k", "operator", "Gt", "values", list("1", "2")))))))
		}),
		bend("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[*].matchExpressions[*].values[*]", Invalid, "In without values", func(s *setter) {
			setPath(s.spec(), "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution", obj("nodeSelectorTerms", list(obj("matchExpressions", list(obj("key", "k", "operator", "In"))))))
		}),
		bend("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[*]", Invalid, "no terms", func(s *setter) {
			setPath(s.spec(), "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution", obj("nodeSelectorTerms", list()))
		}),
		bend(ctr+"volumeMounts[*].mountPropagation", Invalid, "Bidirectional unprivileged", func(s *setter) {
			appendTo(s.container("containers", 0), "volumeMounts", obj("name", "data", "mountPath", "/prop", "mountPropagation", "Bidirectional"))
		}),
		bend(ctr+"volumeMounts[*].mountPropagation", Valid, "Bidirectional privileged", func(s *setter) {
			c := s.container("containers", 0)
			setPath(c, "securityContext.privileged", true)
			appendTo(c, "volumeMounts", obj("name", "data", "mountPath", "/prop", "mountPropagation", "Bidirectional"))
		}),
		bend(ctr+"volumeMounts[*].recursiveReadOnly", Invalid, "Enabled on a writable mount", func(s *setter) {
			appendTo(s.container("containers", 0), "volumeMounts", obj("name", "data", "mountPath", "/rro", "recursiveReadOnly", "Enabled"))
		}),
		bend(ctr+"volumeMounts[*].recursiveReadOnly", Valid, "Enabled read-only without propagation", func(s *setter) {
			appendTo(s.container("containers", 0), "volumeMounts", obj("name", "data", "mountPath", "/rro", "readOnly", true, "recursiveReadOnly", "Enabled", "mountPropagation", "None"))
		}),
		bend(ctr+"volumeMounts[*].recursiveReadOnly", Invalid, "IfPossible with HostToContainer", func(s *setter) {
			appendTo(s.container("containers", 0), "volumeMounts", obj("name", "data", "mountPath", "/rro", "readOnly", true, "recursiveReadOnly", "IfPossible", "mountPropagation", "HostToContainer"))
		}),
		bend("spec.volumes[*].emptyDir.medium", Invalid, "HugePages without hugepages requests", func(s *setter) {
			appendTo(s.spec(), "volumes", obj("name", "hp", "emptyDir", obj("medium", "HugePages")))
		}),
		bend("spec.volumes[*].emptyDir.medium", Valid, "HugePages-2Mi with hugepages requests", func(s *setter) {
			c := s.container("containers", 0)
			c["resources"] = obj("requests", obj("hugepages-2Mi", "2Mi", "memory", "64Mi"), "limits", obj("hugepages-2Mi", "2Mi", "memory", "64Mi"))
			appendTo(s.spec(), "volumes", obj("name", "hp", "emptyDir", obj("medium", "HugePages-2Mi")))
		}),
		bend(ctr+"resources.limits", Invalid, "a limit under its request", func(s *setter) {
			s.container("containers", 0)["resources"] = obj("requests", obj("cpu", "500m"), "limits", obj("cpu", "250m"))
		}),
		bend(ctr+"lifecycle.stopSignal", Invalid, "stopSignal without os.name", func(s *setter) {
			delete(s.spec(), "os")
			setPath(s.container("containers", 0), "lifecycle.stopSignal", "SIGUSR1")
		}),
		bend(ctr+"lifecycle.stopSignal", Valid, "stopSignal with os.name linux", func(s *setter) {
			s.spec()["os"] = obj("name", "linux")
			setPath(s.container("containers", 0), "lifecycle.stopSignal", "SIGUSR1")
		}),
		bend(ctr+"lifecycle.stopSignal", Invalid, "SIGUSR1 on windows", func(s *setter) {
			s.spec()["os"] = obj("name", "windows")
			delete(s.spec(), "securityContext")
			setPath(s.container("containers", 0), "lifecycle.stopSignal", "SIGUSR1")
		}),
		bend(ctr+"restartPolicyRules[*]", Boundary, "restart rules with restartPolicy Never", func(s *setter) {
			c := s.container("containers", 0)
			c["restartPolicy"] = "Never"
			c["restartPolicyRules"] = list(obj("action", "Restart", "exitCodes", obj("operator", "In", "values", list(42))))
		}),
		bend(ctr+"restartPolicyRules[*].exitCodes.values[*]", Invalid, "one exit code twice", func(s *setter) {
			c := s.container("containers", 0)
			c["restartPolicy"] = "Never"
			c["restartPolicyRules"] = list(obj("action", "Restart", "exitCodes", obj("operator", "In", "values", list(42, 42))))
		}),
		bend("spec.hostname", Boundary, "hostname and subdomain", func(s *setter) { s.spec()["hostname"], s.spec()["subdomain"] = "h", "sub" }),
		bend("spec.priorityClassName", Boundary, "system-node-critical outside kube-system", func(s *setter) {
			sub(s.m, "metadata")["namespace"] = "default"
			s.spec()["priorityClassName"] = "system-node-critical"
		}),
		bend("spec.activeDeadlineSeconds", Valid, "with restartPolicy Never", func(s *setter) {
			s.spec()["activeDeadlineSeconds"], s.spec()["restartPolicy"] = 60, "Never"
		}),
		bend("spec.securityContext.supplementalGroupsPolicy", Boundary, "Strict with groups", func(s *setter) {
			setPath(s.spec(), "securityContext", obj("supplementalGroupsPolicy", "Strict", "supplementalGroups", list(5000)))
		}),
		bend("spec.containers[*].securityContext.windowsOptions.hostProcess", Invalid, "hostProcess on linux", func(s *setter) {
			s.spec()["os"] = obj("name", "linux")
			setPath(s.container("containers", 0), "securityContext.windowsOptions", obj("hostProcess", true))
		}),
		bend("spec.securityContext.windowsOptions.hostProcess", Boundary, "hostProcess on windows with host network", func(s *setter) {
			s.spec()["os"] = obj("name", "windows")
			s.spec()["hostNetwork"] = true
			s.spec()["securityContext"] = obj("windowsOptions", obj("hostProcess", true))
		}),
		bend("spec.os.name", Valid, "windows with windowsOptions", func(s *setter) {
			s.spec()["os"] = obj("name", "windows")
			delete(s.spec(), "securityContext")
			setPath(s.container("containers", 0), "securityContext", obj("windowsOptions", obj("runAsUserName", "ContainerUser")))
		}),
	)
	for _, f := range linuxOnly {
		where := "spec."
		if !f.pod {
			where = ctr
		}
		add(bend(where+f.path, Invalid, "on windows", func(s *setter) {
			s.spec()["os"] = obj("name", "windows")
			delete(s.spec(), "securityContext")
			for _, c := range s.spec()["containers"].([]any) {
				delete(c.(map[string]any), "securityContext")
			}
			target := s.spec()
			if !f.pod {
				target = s.container("containers", 0)
			}
			setPath(target, f.path, clone(f.value))
		}))
	}
	add(bend("spec.os.name", Invalid, "linux with windowsOptions", func(s *setter) {
		s.spec()["os"] = obj("name", "linux")
		setPath(s.spec(), "securityContext.windowsOptions", obj("runAsUserName", "ContainerUser"))
	}))
	sort.SliceStable(out, func(i, j int) bool { return out[i].Leaf < out[j].Leaf })
	return out
}
