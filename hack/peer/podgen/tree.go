package podgen

import (
	"fmt"
	"strings"
)

// This file sets a value at a registry path (podfields: "spec.containers[*].ports[*].name") in
// a manifest tree, creating what is missing on the way so that the rest of the pod stays
// valid: a list element or struct that must exist is created from its skeleton (its required
// fields), and a union (a probe's handler, a volume's source, an env var's value or valueFrom)
// keeps one member: entering a member removes the others, and a union created on the way to
// one of its other fields gets its default member.

// skeleton is a new node's required fields; n numbers it among its kind, so that names stay
// unique.
type skeleton func(n int) map[string]any

// union is a node whose members exclude each other, and the member it gets by default.
type union struct {
	members []string
	def     func() (string, any)
}

func (u union) has(name string) bool {
	for _, m := range u.members {
		if m == name {
			return true
		}
	}
	return false
}

func obj(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func list(v ...any) []any { return v }

const pause = "registry.k8s.io/pause:3.10"

var (
	probeHandlers = union{[]string{"exec", "httpGet", "tcpSocket", "grpc"}, func() (string, any) { return "exec", obj("command", list("/bin/true")) }}
	hookHandlers  = union{[]string{"exec", "httpGet", "tcpSocket", "sleep"}, func() (string, any) { return "exec", obj("command", list("/bin/true")) }}
	fieldOrRes    = union{[]string{"fieldRef", "resourceFieldRef"}, func() (string, any) { return "fieldRef", obj("fieldPath", "metadata.name") }}
	volumeSources = union{[]string{"hostPath", "emptyDir", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "secret", "nfs", "iscsi", "glusterfs",
		"persistentVolumeClaim", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "downwardAPI", "fc", "azureFile", "configMap", "vsphereVolume",
		"quobyte", "azureDisk", "photonPersistentDisk", "projected", "portworxVolume", "scaleIO", "storageos", "csi", "ephemeral", "image"},
		func() (string, any) { return "emptyDir", obj() }}
	projections = union{[]string{"secret", "downwardAPI", "configMap", "serviceAccountToken", "clusterTrustBundle", "podCertificate"},
		func() (string, any) {
			return "downwardAPI", obj("items", list(obj("path", "name", "fieldRef", obj("fieldPath", "metadata.name"))))
		}}
)

// unions by path suffix (see lookup).
var unions = map[string]union{
	"livenessProbe":        probeHandlers,
	"readinessProbe":       probeHandlers,
	"startupProbe":         probeHandlers,
	"postStart":            hookHandlers,
	"preStop":              hookHandlers,
	"env[*]":               {[]string{"value", "valueFrom"}, func() (string, any) { return "value", "v" }},
	"valueFrom":            {[]string{"fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef", "fileKeyRef"}, fieldOrRes.def},
	"envFrom[*]":           {[]string{"configMapRef", "secretRef"}, func() (string, any) { return "configMapRef", obj("name", "cm") }},
	"spec.volumes[*]":      volumeSources,
	"projected.sources[*]": projections,
	"downwardAPI.items[*]": fieldOrRes,
	"nodeSelectorTerms[*]": {[]string{"matchExpressions", "matchFields"}, func() (string, any) {
		return "matchExpressions", list(obj("key", "example.com/k", "operator", "Exists"))
	}},
	"preference": {[]string{"matchExpressions", "matchFields"}, func() (string, any) {
		return "matchExpressions", list(obj("key", "example.com/k", "operator", "Exists"))
	}},
}

// skeletons by path suffix (see lookup): the required fields of a node created on the way.
var skeletons = map[string]skeleton{
	"spec.containers[*]":          func(n int) map[string]any { return obj("name", fmt.Sprintf("c%d", n), "image", pause) },
	"spec.initContainers[*]":      func(n int) map[string]any { return obj("name", fmt.Sprintf("i%d", n), "image", pause) },
	"spec.ephemeralContainers[*]": func(n int) map[string]any { return obj("name", fmt.Sprintf("e%d", n), "image", pause) },
	"ports[*]":                    func(n int) map[string]any { return obj("containerPort", 9000+n) },
	"env[*]":                      func(n int) map[string]any { return obj("name", fmt.Sprintf("BENT_%d", n)) },
	"fieldRef":                    func(int) map[string]any { return obj("fieldPath", "metadata.name") },
	"resourceFieldRef":            func(int) map[string]any { return obj("resource", "limits.cpu") },
	"items[*].resourceFieldRef":   func(int) map[string]any { return obj("containerName", "c0", "resource", "limits.cpu") },
	"configMapKeyRef":             func(int) map[string]any { return obj("name", "cm", "key", "k") },
	"secretKeyRef":                func(int) map[string]any { return obj("name", "sec", "key", "k") },
	"fileKeyRef":                  func(int) map[string]any { return obj("volumeName", "data", "path", "vars.env", "key", "k") },
	"configMapRef":                func(int) map[string]any { return obj("name", "cm") },
	"secretRef":                   func(int) map[string]any { return obj("name", "sec") },
	"volumeMounts[*]":             func(n int) map[string]any { return obj("name", "data", "mountPath", fmt.Sprintf("/mnt/b%d", n)) },
	"volumeDevices[*]":            func(n int) map[string]any { return obj("name", "data", "devicePath", fmt.Sprintf("/dev/b%d", n)) },
	"exec":                        func(int) map[string]any { return obj("command", list("/bin/true")) },
	"httpGet":                     func(int) map[string]any { return obj("port", 8080) },
	"tcpSocket":                   func(int) map[string]any { return obj("port", 8080) },
	"grpc":                        func(int) map[string]any { return obj("port", 9090) },
	"sleep":                       func(int) map[string]any { return obj("seconds", 1) },
	"httpHeaders[*]":              func(n int) map[string]any { return obj("name", fmt.Sprintf("X-H%d", n), "value", "v") },
	"seccompProfile":              func(int) map[string]any { return obj("type", "RuntimeDefault") },
	"appArmorProfile":             func(int) map[string]any { return obj("type", "RuntimeDefault") },
	"resizePolicy[*]":             func(int) map[string]any { return obj("resourceName", "cpu", "restartPolicy", "NotRequired") },
	"resources.claims[*]":         func(n int) map[string]any { return obj("name", fmt.Sprintf("claim%d", n)) },
	"restartPolicyRules[*]": func(int) map[string]any {
		return obj("action", "Restart", "exitCodes", obj("operator", "In", "values", list(42)))
	},
	"exitCodes":                      func(int) map[string]any { return obj("operator", "In", "values", list(42)) },
	"spec.volumes[*]":                func(n int) map[string]any { return obj("name", fmt.Sprintf("bent%d", n)) },
	"spec.volumes[*].hostPath":       func(int) map[string]any { return obj("path", "/tmp") },
	"spec.volumes[*].secret":         func(int) map[string]any { return obj("secretName", "sec") },
	"spec.volumes[*].configMap":      func(int) map[string]any { return obj("name", "cm") },
	"items[*]":                       func(n int) map[string]any { return obj("key", "k", "path", fmt.Sprintf("f%d", n)) },
	"downwardAPI.items[*]":           func(n int) map[string]any { return obj("path", fmt.Sprintf("f%d", n)) },
	"projected":                      func(int) map[string]any { return obj("sources", list()) },
	"projected.sources[*].secret":    func(int) map[string]any { return obj("name", "sec") },
	"projected.sources[*].configMap": func(int) map[string]any { return obj("name", "cm") },
	"serviceAccountToken":            func(int) map[string]any { return obj("path", "token") },
	"clusterTrustBundle":             func(int) map[string]any { return obj("path", "bundle.pem", "signerName", "example.com/signer") },
	"podCertificate": func(int) map[string]any {
		return obj("signerName", "example.com/signer", "keyType", "ED25519", "credentialBundlePath", "creds.pem")
	},
	"persistentVolumeClaim": func(int) map[string]any { return obj("claimName", "claim") },
	"ephemeral": func(int) map[string]any {
		return obj("volumeClaimTemplate", obj("spec", obj("accessModes", list("ReadWriteOnce"), "resources", obj("requests", obj("storage", "1Gi")))))
	},
	"volumeClaimTemplate": func(int) map[string]any {
		return obj("spec", obj("accessModes", list("ReadWriteOnce"), "resources", obj("requests", obj("storage", "1Gi"))))
	},
	"spec.volumes[*].image": func(int) map[string]any { return obj("reference", pause) },
	"gitRepo":               func(int) map[string]any { return obj("repository", "https://example.com/r.git") },
	"nfs":                   func(int) map[string]any { return obj("server", "nfs.example.com", "path", "/export") },
	"iscsi": func(int) map[string]any {
		return obj("targetPortal", "10.0.0.1:3260", "iqn", "iqn.2001-04.com.example:storage", "lun", 0)
	},
	"glusterfs":            func(int) map[string]any { return obj("endpoints", "ep", "path", "vol") },
	"rbd":                  func(int) map[string]any { return obj("monitors", list("10.0.0.1:6789"), "image", "img") },
	"cephfs":               func(int) map[string]any { return obj("monitors", list("10.0.0.1:6789")) },
	"cinder":               func(int) map[string]any { return obj("volumeID", "v") },
	"awsElasticBlockStore": func(int) map[string]any { return obj("volumeID", "v") },
	"gcePersistentDisk":    func(int) map[string]any { return obj("pdName", "p") },
	"azureDisk":            func(int) map[string]any { return obj("diskName", "d", "diskURI", "https://example.com/d.vhd") },
	"azureFile":            func(int) map[string]any { return obj("secretName", "sec", "shareName", "share") },
	"csi":                  func(int) map[string]any { return obj("driver", "csi.example.com") },
	"fc":                   func(int) map[string]any { return obj("targetWWNs", list("500a0981891b8dc5"), "lun", 0) },
	"flexVolume":           func(int) map[string]any { return obj("driver", "example.com/flex") },
	"flocker":              func(int) map[string]any { return obj("datasetName", "d") },
	"photonPersistentDisk": func(int) map[string]any { return obj("pdID", "p") },
	"portworxVolume":       func(int) map[string]any { return obj("volumeID", "v") },
	"quobyte":              func(int) map[string]any { return obj("registry", "quobyte.example.com:7861", "volume", "v") },
	"scaleIO": func(int) map[string]any {
		return obj("gateway", "https://scaleio.example.com", "system", "s", "secretRef", obj("name", "sec"))
	},
	"storageos":     func(int) map[string]any { return obj("volumeName", "v") },
	"vsphereVolume": func(int) map[string]any { return obj("volumePath", "[ds] v.vmdk") },
	"spec.hostAliases[*]": func(n int) map[string]any {
		return obj("ip", "10.0.0.1", "hostnames", list(fmt.Sprintf("h%d.example.com", n)))
	},
	"spec.tolerations[*]": func(int) map[string]any { return obj("key", "example.com/k", "operator", "Exists") },
	"spec.topologySpreadConstraints[*]": func(int) map[string]any {
		return obj("maxSkew", 1, "topologyKey", "topology.kubernetes.io/zone", "whenUnsatisfiable", "DoNotSchedule")
	},
	"spec.readinessGates[*]":   func(n int) map[string]any { return obj("conditionType", fmt.Sprintf("example.com/ready%d", n)) },
	"spec.schedulingGates[*]":  func(n int) map[string]any { return obj("name", fmt.Sprintf("example.com/gate%d", n)) },
	"spec.imagePullSecrets[*]": func(n int) map[string]any { return obj("name", fmt.Sprintf("regcred%d", n)) },
	"spec.resourceClaims[*]":   func(n int) map[string]any { return obj("name", fmt.Sprintf("rc%d", n), "resourceClaimName", "claim") },
	"sysctls[*]":               func(int) map[string]any { return obj("name", "kernel.shm_rmid_forced", "value", "0") },
	"options[*]":               func(int) map[string]any { return obj("name", "ndots", "value", "2") },
	"nodeSelectorTerms[*]":     func(int) map[string]any { return obj() },
	"requiredDuringSchedulingIgnoredDuringExecution": func(int) map[string]any {
		return obj("nodeSelectorTerms", list(obj("matchExpressions", list(obj("key", "example.com/k", "operator", "Exists")))))
	},
	"matchExpressions[*]": func(int) map[string]any { return obj("key", "example.com/k", "operator", "Exists") },
	"matchFields[*]": func(int) map[string]any {
		return obj("key", "metadata.name", "operator", "In", "values", list("oracle"))
	},
	"nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[*]": func(int) map[string]any {
		return obj("weight", 1, "preference", obj("matchExpressions", list(obj("key", "example.com/k", "operator", "Exists"))))
	},
	"podAffinity.requiredDuringSchedulingIgnoredDuringExecution[*]":     func(int) map[string]any { return obj("topologyKey", "kubernetes.io/hostname") },
	"podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[*]": func(int) map[string]any { return obj("topologyKey", "kubernetes.io/hostname") },
	"podAffinity.preferredDuringSchedulingIgnoredDuringExecution[*]": func(int) map[string]any {
		return obj("weight", 1, "podAffinityTerm", obj("topologyKey", "kubernetes.io/hostname"))
	},
	"podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[*]": func(int) map[string]any {
		return obj("weight", 1, "podAffinityTerm", obj("topologyKey", "kubernetes.io/hostname"))
	},
	"podAffinityTerm": func(int) map[string]any { return obj("topologyKey", "kubernetes.io/hostname") },
	"spec.os":         func(int) map[string]any { return obj("name", "linux") },
	"metadata.ownerReferences[*]": func(int) map[string]any {
		return obj("apiVersion", "v1", "kind", "Node", "name", "oracle", "uid", "0c9d2f8b-0000-4000-8000-000000000001")
	},
	"managedFields[*]": func(int) map[string]any { return obj("manager", "m", "operation", "Apply", "apiVersion", "v1") },
	"spec.evictionResponders[*]": func(n int) map[string]any {
		return obj("name", fmt.Sprintf("example.com/responder%d", n), "priority", 1)
	},
	"spec.schedulingGroup": func(int) map[string]any { return obj("podGroupName", "group") },
	"status.conditions[*]": func(int) map[string]any { return obj("type", "Ready", "status", "True") },
}

// lookup finds the entry for a pattern: the pattern itself, then ever shorter suffixes of it
// (dropping leading segments), so "livenessProbe" covers every container list's probes.
func lookup[T any](table map[string]T, pattern string) (T, bool) {
	p := pattern
	for {
		if v, ok := table[p]; ok {
			return v, true
		}
		i := strings.Index(p, ".")
		if i < 0 {
			var zero T
			return zero, false
		}
		p = p[i+1:]
	}
}

// segments splits a registry path.
func segments(path string) []string { return strings.Split(path, ".") }

// setter places values in one manifest.
type setter struct {
	m Manifest
	n int // numbers new nodes
}

func (s *setter) fresh(pattern string) map[string]any {
	s.n++
	if sk, ok := lookup(skeletons, pattern); ok {
		return sk(s.n)
	}
	return map[string]any{}
}

// node returns the map at path (a registry path to a map or list element, "[*]" meaning
// element index; index -1 appends a new element), creating what is missing.
func (s *setter) node(path string, index int) map[string]any {
	cur := map[string]any(s.m)
	pat := ""
	segs := segments(path)
	for i, seg := range segs {
		name, isList := strings.CutSuffix(seg, "[*]")
		s.enter(cur, pat, name)
		child := join(pat, name)
		var next map[string]any
		if isList {
			l, _ := cur[name].([]any)
			elem := child + "[*]"
			idx := 0
			if i == len(segs)-1 {
				idx = index
			}
			if idx < 0 || idx >= len(l) {
				e := s.fresh(elem)
				l = append(l, e)
				idx = len(l) - 1
				s.completeUnion(e, elem, segs, i)
			}
			cur[name] = l
			m, ok := l[idx].(map[string]any)
			if !ok {
				m = s.fresh(elem)
				l[idx] = m
			}
			next, child = m, elem
		} else {
			m, ok := cur[name].(map[string]any)
			if !ok {
				m = s.fresh(child)
				cur[name] = m
				s.completeUnion(m, child, segs, i)
			}
			next = m
		}
		cur, pat = next, child
	}
	return cur
}

// enter keeps a union single when its member name is entered or set.
func (s *setter) enter(parent map[string]any, pattern, name string) {
	if pattern == "" {
		return
	}
	u, ok := lookup(unions, pattern)
	if !ok || !u.has(name) {
		return
	}
	for _, m := range u.members {
		if m != name {
			delete(parent, m)
		}
	}
}

// completeUnion gives a union node created on the way its default member, unless the path
// goes on into one of its members.
func (s *setter) completeUnion(m map[string]any, pattern string, segs []string, i int) {
	u, ok := lookup(unions, pattern)
	if !ok || u.def == nil {
		return
	}
	if i+1 < len(segs) {
		next, _ := strings.CutSuffix(segs[i+1], "[*]")
		if u.has(next) {
			return
		}
	}
	for _, mem := range u.members {
		if _, ok := m[mem]; ok {
			return
		}
	}
	k, v := u.def()
	m[k] = v
}

// set sets the leaf at path to v. A leaf "x[*]" (a list of scalars) gets v as its first
// element.
func (s *setter) set(path string, v any) {
	parentPath, leaf := splitLast(path)
	var parent map[string]any
	if parentPath == "" {
		parent = s.m
	} else {
		parent = s.node(parentPath, 0)
	}
	name, isList := strings.CutSuffix(leaf, "[*]")
	s.enter(parent, parentPath, name)
	if !isList {
		parent[name] = v
		return
	}
	l, _ := parent[name].([]any)
	if len(l) == 0 {
		l = []any{v}
	} else {
		l[0] = v
	}
	parent[name] = l
}

// splitLast cuts the last segment off a path.
func splitLast(path string) (string, string) {
	if i := strings.LastIndex(path, "."); i >= 0 {
		return path[:i], path[i+1:]
	}
	return "", path
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
