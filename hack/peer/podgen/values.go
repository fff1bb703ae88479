package podgen

import (
	"reflect"
	"strings"

	"github.com/slicelet/slicelet/internal/pods/podfields"
)

// Class says how a value stands to its field's rules, as the generator reads them: the oracle
// (the kubelet's own validation) is the judge, the class only documents the intent.
type Class string

// The classes.
const (
	Valid    Class = "valid"
	Boundary Class = "boundary" // at an edge: the last value in or the first out
	Invalid  Class = "invalid"
)

// value is one value of a leaf with its class.
type value struct {
	v     any
	class Class
}

func vals(class Class, vs ...any) []value {
	out := make([]value, len(vs))
	for i, v := range vs {
		out[i] = value{v, class}
	}
	return out
}

func cat(lists ...[]value) []value {
	var out []value
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// enums are the values of every enumerated string type of v1.Pod, by reflect type name (from
// k8s.io/api/core/v1); TestEveryNamedTypeHasValues fails on a named type met in a leaf that is
// neither here nor in freeForm.
var enums = map[string][]string{
	"v1.AppArmorProfileType":                     {"Unconfined", "RuntimeDefault", "Localhost"},
	"v1.AzureDataDiskCachingMode":                {"None", "ReadOnly", "ReadWrite"},
	"v1.AzureDataDiskKind":                       {"Shared", "Dedicated", "Managed"},
	"v1.ConditionStatus":                         {"True", "False", "Unknown"},
	"v1.ContainerRestartPolicy":                  {"Always", "Never", "OnFailure"},
	"v1.ContainerRestartRuleAction":              {"Restart", "RestartAllContainers"},
	"v1.ContainerRestartRuleOnExitCodesOperator": {"In", "NotIn"},
	"v1.DNSPolicy":                               {"ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"},
	"v1.GRPCProbeMode":                           {"Plaintext", "TLS"},
	"v1.HTTPProtocol":                            {"HTTP1", "HTTP2"},
	"v1.HostPathType":                            {"", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice", "BlockDevice"},
	"v1.ManagedFieldsOperationType":              {"Apply", "Update"},
	"v1.MountPropagationMode":                    {"None", "HostToContainer", "Bidirectional"},
	"v1.NodeInclusionPolicy":                     {"Ignore", "Honor"},
	"v1.NodeSelectorOperator":                    {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"},
	"v1.OSName":                                  {"linux", "windows"},
	"v1.PersistentVolumeAccessMode":              {"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"},
	"v1.PersistentVolumeMode":                    {"Block", "Filesystem"},
	"v1.PodConditionType":                        {"ContainersReady", "Initialized", "Ready", "PodScheduled", "DisruptionTarget", "PodReadyToStartContainers", "example.com/gate"},
	"v1.PodFSGroupChangePolicy":                  {"OnRootMismatch", "Always"},
	"v1.PodPhase":                                {"Pending", "Running", "Succeeded", "Failed", "Unknown"},
	"v1.PodQOSClass":                             {"Guaranteed", "Burstable", "BestEffort"},
	"v1.PodResizeStatus":                         {"InProgress", "Deferred", "Infeasible"},
	"v1.PodSELinuxChangePolicy":                  {"Recursive", "MountOption"},
	"v1.PreemptionPolicy":                        {"PreemptLowerPriority", "Never"},
	"v1.ProcMountType":                           {"Default", "Unmasked"},
	"v1.Protocol":                                {"TCP", "UDP", "SCTP"},
	"v1.PullPolicy":                              {"Always", "Never", "IfNotPresent"},
	"v1.RecursiveReadOnlyMode":                   {"Disabled", "IfPossible", "Enabled"},
	"v1.ResourceHealthStatus":                    {"Healthy", "Unhealthy", "Unknown"},
	"v1.ResourceResizeRestartPolicy":             {"NotRequired", "RestartContainer"},
	"v1.RestartPolicy":                           {"Always", "OnFailure", "Never"},
	"v1.SeccompProfileType":                      {"Unconfined", "RuntimeDefault", "Localhost"},
	"v1.Signal":                                  {"SIGTERM", "SIGKILL", "SIGINT", "SIGUSR1", "SIGRTMIN", "SIGRTMIN+15", "SIGRTMAX-14", "SIGRTMAX", "SIGWINCH"},
	"v1.StorageMedium":                           {"", "Memory", "HugePages", "HugePages-2Mi"},
	"v1.SupplementalGroupsPolicy":                {"Merge", "Strict"},
	"v1.TaintEffect":                             {"NoSchedule", "PreferNoSchedule", "NoExecute"},
	"v1.TerminationMessagePolicy":                {"File", "FallbackToLogsOnError"},
	"v1.TolerationOperator":                      {"Exists", "Equal", "Lt", "Gt"},
	"v1.URIScheme":                               {"HTTP", "HTTPS"},
	"v1.UnsatisfiableConstraintAction":           {"DoNotSchedule", "ScheduleAnyway"},
	"v1.VolumeHealthStatusType":                  {"Inaccessible", "DataLoss", "Degraded"},
}

// freeForm are the named string types that are not enumerations, with the string class their
// leaves get (see stringValues).
var freeForm = map[string]string{
	"v1.Capability":   "capability",
	"v1.ResourceName": "resourceName",
	"v1.ResourceID":   "generic",
	"types.UID":       "uid",
}

// enumValues: every value of the set, one out of it, its empty string and a value in another case.
func enumValues(set []string) []value {
	out := vals(Valid, strs(set)...)
	out = append(out, value{"Bogus", Invalid})
	if set[0] != "" {
		out = append(out, value{"", Invalid}, value{strings.ToLower(set[0]), Invalid})
	}
	return out
}

func strs(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// Strings of a length.
var (
	s15  = "abcdefghijklmno"
	s16  = s15 + "p"
	s63  = strings.Repeat("a", 63)
	s64  = strings.Repeat("a", 64)
	s253 = strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
	s254 = s253 + "d"
)

// stringKind classifies a string leaf by its name and parent, which decides its values.
func stringKind(path string) string {
	segs := segments(path)
	name := strings.TrimSuffix(segs[len(segs)-1], "[*]")
	parent := ""
	if len(segs) > 1 {
		parent = strings.TrimSuffix(segs[len(segs)-2], "[*]")
	}
	switch {
	case path == "kind" || path == "apiVersion":
		return path
	case strings.HasPrefix(path, "metadata.") && (name == "name" || name == "generateName") && parent == "metadata":
		return "subdomain"
	case path == "metadata.namespace":
		return "label"
	case parent == "ports" && name == "name":
		return "portName"
	case parent == "ports" && name == "hostIP", parent == "hostAliases" && name == "ip", parent == "nameservers", name == "nameservers",
		strings.HasPrefix(path, "status.") && (name == "ip" || name == "hostIP" || name == "podIP"):
		return "ip"
	case parent == "env" && name == "name":
		return "envName"
	case parent == "envFrom" && name == "prefix":
		return "envPrefix"
	case parent == "fileKeyRef" && name == "key":
		return "envName"
	case name == "image" || (parent == "image" && name == "reference"):
		return "image"
	case name == "fieldPath" && strings.Contains(path, "valueFrom"):
		return "envFieldPath"
	case name == "fieldPath":
		return "volumeFieldPath"
	case parent == "fieldRef" && name == "apiVersion":
		return "fieldAPIVersion"
	case parent == "resourceFieldRef" && name == "resource":
		return "resourceField"
	case parent == "resourceFieldRef" && name == "containerName":
		return "containerRef"
	case parent == "sysctls" && name == "name":
		return "sysctl"
	case name == "mountPath" || name == "devicePath" || name == "terminationMessagePath" || (parent == "hostPath" && name == "path"):
		return "absPath"
	case name == "subPath" || (parent == "items" && name == "path") || name == "credentialBundlePath" || name == "keyPath" ||
		name == "certificateChainPath" || (parent == "serviceAccountToken" || parent == "clusterTrustBundle" || parent == "fileKeyRef") && name == "path" ||
		parent == "gitRepo" && name == "directory":
		return "relPath"
	case name == "subPathExpr":
		return "pathExpr"
	case parent == "httpGet" && name == "path":
		return "httpPath"
	case name == "host" || parent == "hostnames" || name == "hostnames" || name == "searches":
		return "host"
	case parent == "httpHeaders" && name == "name":
		return "header"
	case name == "localhostProfile":
		return "localhostProfile"
	case (parent == "items" || strings.HasSuffix(parent, "KeyRef")) && name == "key":
		return "configKey"
	case name == "conditionType" || parent == "schedulingGates" || parent == "finalizers" || name == "finalizers" ||
		name == "topologyKey" || name == "matchLabelKeys" || name == "mismatchLabelKeys" ||
		(parent == "tolerations" || parent == "matchExpressions") && name == "key" || parent == "evictionResponders" && name == "name":
		return "qualifiedName"
	case name == "signerName":
		return "signerName"
	case name == "name" && (parent == "containers" || parent == "initContainers" || parent == "ephemeralContainers" || parent == "volumes" ||
		parent == "volumeMounts" || parent == "volumeDevices" || parent == "claims" || parent == "resourceClaims" || parent == "resources"),
		name == "hostname" || name == "subdomain" || name == "volumeName" || name == "containerName" || name == "targetContainerName":
		return "label"
	case name == "secretName" || name == "claimName" || name == "name" && (parent == "configMap" || parent == "configMapRef" || parent == "secretRef" ||
		parent == "secret" || parent == "imagePullSecrets" || parent == "configMapKeyRef" || parent == "secretKeyRef" || parent == "clusterTrustBundle") ||
		name == "priorityClassName" || name == "runtimeClassName" || name == "serviceAccountName" || name == "serviceAccount" ||
		name == "nodeName" || name == "schedulerName" || name == "resourceClaimName" || name == "resourceClaimTemplateName" || name == "hostnameOverride" || name == "podGroupName":
		return "subdomain"
	case name == "workingDir":
		return "workingDir"
	case name == "runAsUserName":
		return "windowsUser"
	case name == "keyType":
		return "keyType"
	case parent == "options" && name == "name":
		return "dnsOption"
	}
	return "generic"
}

// stringValues are a string leaf's values by its kind.
func stringValues(kind string) []value {
	switch kind {
	case "kind":
		return cat(vals(Valid, "Pod"), vals(Invalid, "", "pod", "Deployment", "PodTemplate"))
	case "apiVersion":
		return cat(vals(Valid, "v1"), vals(Invalid, "", "V1", "v2", "apps/v1", "core/v1"))
	case "label":
		return cat(vals(Valid, "x1", "data"), vals(Boundary, s63, s64), vals(Invalid, "", "Upper", "bad_name", "-lead", "trail-", "a.b"))
	case "subdomain":
		return cat(vals(Valid, "x1", "a.example.com"), vals(Boundary, s253, s254), vals(Invalid, "", "Upper", "bad_name", "a..b", "-lead"))
	case "portName":
		return cat(vals(Valid, "http", "metrics-1"), vals(Boundary, s15, s16), vals(Invalid, "123", "a--b", "Http", "-http", "http-", "bad_name"))
	case "ip":
		return cat(vals(Valid, "10.0.0.1", "::1", "fd00::10"), vals(Boundary, "0.0.0.0", "255.255.255.255", "::"),
			vals(Invalid, "256.0.0.1", "010.0.0.1", "fe80::1%eth0", "not-an-ip", " 10.0.0.1", "10.0.0.1/24", ""))
	case "envName":
		return cat(vals(Valid, "VAR", "var.name-1", "_V", "1VAR", "with space"), vals(Invalid, "", "A=B", "é", "tab\there"))
	case "envPrefix":
		return cat(vals(Valid, "PRE_", "pre.", "1"), vals(Invalid, "A=", "é"))
	case "image":
		return cat(vals(Valid, pause, "busybox", "registry.k8s.io/pause@sha256:"+strings.Repeat("a", 64)),
			vals(Invalid, "", " pause", "pause ", "\tpause", "pause\n"))
	case "envFieldPath":
		return cat(vals(Valid, "metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels['app']", "metadata.annotations['a']",
			"metadata.labels", "metadata.annotations", "spec.nodeName", "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"),
			vals(Invalid, "", "spec.bogus", "metadata.generateName", "metadata.labels['bad key!']", "metadata.labels[app]", "status.phase"))
	case "volumeFieldPath":
		return cat(vals(Valid, "metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels", "metadata.annotations", "metadata.labels['app']"),
			vals(Invalid, "", "status.podIP", "spec.nodeName", "spec.bogus", "metadata.annotations['bad key!']"))
	case "fieldAPIVersion":
		return cat(vals(Valid, "v1"), vals(Invalid, "v2", "apps/v1", "bogus"))
	case "resourceField":
		return cat(vals(Valid, "limits.cpu", "limits.memory", "requests.cpu", "requests.memory", "limits.ephemeral-storage", "requests.ephemeral-storage", "limits.hugepages-2Mi", "requests.hugepages-1Gi"),
			vals(Invalid, "", "cpu", "limits.bogus", "limits.example.com/widget", "requests.pods"))
	case "containerRef":
		return cat(vals(Valid, "c0"), vals(Invalid, "nope", "Upper"))
	case "sysctl":
		return cat(vals(Valid, "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net/ipv4/ip_unprivileged_port_start", "kernel.msgmax", "net.ipv4.conf.eth0.forwarding", "vm.swappiness"),
			vals(Boundary, strings.Repeat("k.", 126)+"k"), vals(Invalid, "", "bad..name", "Kernel.X", "kernel.shm rmid", ".kernel", "kernel."))
	case "absPath":
		return cat(vals(Valid, "/data", "/var/x-1", "/"), vals(Boundary, "/"+strings.Repeat("a", 4094)),
			vals(Invalid, "", "relative", "/a/../b", "/a:b", "/../x", "C:\\win"))
	case "relPath":
		return cat(vals(Valid, "file", "dir/file", "..a", "a..b"), vals(Invalid, "", "/abs", "../x", "a/../b", "a/..", "..", "x/../../y"))
	case "pathExpr":
		return cat(vals(Valid, "$(POD_NAME)", "dir/$(POD_NAME)"), vals(Invalid, "/abs/$(X)", "../$(X)", "$(UNDEFINED)"))
	case "httpPath":
		return cat(vals(Valid, "/healthz", "/a?b=c"), vals(Invalid, "relative", "/a b", ""))
	case "host":
		return cat(vals(Valid, "example.com", "10.0.0.2", "a"), vals(Boundary, s253, s254), vals(Invalid, "", "bad host!", "Upper.example", "a..b"))
	case "header":
		return cat(vals(Valid, "X-Custom", "Accept"), vals(Invalid, "", "bad header", "X:colon", "é"))
	case "localhostProfile":
		return cat(vals(Valid, "profiles/audit.json", "k8s-apparmor-example"), vals(Boundary, strings.Repeat("a", 4095)),
			vals(Invalid, "", "/abs/profile.json", "../up.json", "a/../../b"))
	case "configKey":
		return cat(vals(Valid, "key", "a.b-c_D"), vals(Boundary, strings.Repeat("k", 253), strings.Repeat("k", 254)), vals(Invalid, "", "bad/key", "..", ".", "bad key"))
	case "qualifiedName":
		return cat(vals(Valid, "example.com/key", "key", "a.b/c-d"), vals(Boundary, s63, s64, "example.com/"+s63, "example.com/"+s64),
			vals(Invalid, "", "example.com/", "bad key", "-key", "a/b/c", "/key"))
	case "signerName":
		return cat(vals(Valid, "example.com/signer"), vals(Invalid, "", "nodomain", "example.com/", "Bad/x"))
	case "workingDir":
		return cat(vals(Valid, "/work", "relative"), vals(Boundary, "/"+strings.Repeat("w", 4096)), vals(Invalid, ""))
	case "windowsUser":
		return cat(vals(Valid, "ContainerUser", "NT AUTHORITY\\NETWORK SERVICE"), vals(Boundary, strings.Repeat("u", 256), strings.Repeat("u", 257)),
			vals(Invalid, "", "bad\"user", "a\\b\\c"))
	case "keyType":
		return cat(vals(Valid, "RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"), vals(Invalid, "", "RSA1024", "bogus"))
	case "dnsOption":
		return cat(vals(Valid, "ndots", "edns0", "timeout"), vals(Invalid, ""))
	case "capability":
		return cat(vals(Valid, "NET_ADMIN", "CAP_SYS_TIME", "ALL", "SYS_ADMIN"), vals(Invalid, "", "bogus cap"))
	case "resourceName":
		return cat(vals(Valid, "cpu", "memory"), vals(Invalid, "", "storage", "example.com/widget", "hugepages-2Mi", "bogus name"))
	case "uid":
		return cat(vals(Valid, "0c9d2f8b-0000-4000-8000-000000000001", "anything"), vals(Invalid, ""))
	}
	return cat(vals(Valid, "x", "a-b.c_d"), vals(Boundary, strings.Repeat("g", 1024)), vals(Invalid, ""))
}

// intKind classifies an integer leaf.
func intKind(path string) string {
	segs := segments(path)
	name := strings.TrimSuffix(segs[len(segs)-1], "[*]")
	parent := ""
	if len(segs) > 1 {
		parent = strings.TrimSuffix(segs[len(segs)-2], "[*]")
	}
	switch {
	case name == "containerPort" || name == "hostPort" || name == "port":
		return "port"
	case name == "initialDelaySeconds" || name == "timeoutSeconds" || name == "periodSeconds" || name == "successThreshold" || name == "failureThreshold":
		return "probe"
	case name == "terminationGracePeriodSeconds" || name == "activeDeadlineSeconds" || name == "deletionGracePeriodSeconds" || name == "tolerationSeconds":
		return "seconds"
	case parent == "sleep" && name == "seconds":
		return "sleep"
	case name == "defaultMode" || name == "mode":
		return "mode"
	case name == "runAsUser" || name == "runAsGroup" || name == "fsGroup" || name == "supplementalGroups" || name == "user" || name == "defaultUser":
		return "id"
	case name == "maxSkew" || name == "minDomains":
		return "skew"
	case name == "weight":
		return "weight"
	case name == "expirationSeconds":
		return "expiration"
	case name == "maxExpirationSeconds":
		return "maxExpiration"
	case name == "lun":
		return "lun"
	case name == "priority" && parent == "spec":
		return "priority"
	case parent == "exitCodes":
		return "exitCode"
	}
	return "generic"
}

func intValues(kind string, bits int) []value {
	var out []value
	switch kind {
	case "port":
		out = cat(vals(Valid, 80, 8080), vals(Boundary, 1, 65535, 0, 65536), vals(Invalid, -1))
	case "probe":
		out = cat(vals(Valid, 1, 2, 10), vals(Boundary, 0, 2147483647), vals(Invalid, -1))
	case "seconds":
		out = cat(vals(Valid, 1, 30, 300), vals(Boundary, 0), vals(Invalid, -1))
		if bits == 64 {
			out = append(out, value{int64(1) << 53, Boundary}, value{int64(9223372036854775807), Boundary})
		}
	case "sleep":
		out = cat(vals(Valid, 1, 5), vals(Boundary, 0, 30, 31, 3600), vals(Invalid, -1))
	case "mode":
		out = cat(vals(Valid, 0o644, 0o400, 0o755), vals(Boundary, 0, 0o777, 0o1000), vals(Invalid, -1, 0o7777))
	case "id":
		out = cat(vals(Valid, 0, 1000, 65534), vals(Boundary, 2147483647, 2147483648, 4294967295), vals(Invalid, -1))
	case "skew":
		out = cat(vals(Valid, 1, 2), vals(Boundary, 0), vals(Invalid, -1))
	case "weight":
		out = cat(vals(Valid, 1, 50), vals(Boundary, 100, 0, 101), vals(Invalid, -1))
	case "expiration":
		out = cat(vals(Valid, 3600), vals(Boundary, 600, 599, 4294967296, 4294967295), vals(Invalid, -1, 0))
	case "maxExpiration":
		out = cat(vals(Valid, 86400), vals(Boundary, 3600, 3599, 91*86400, 91*86400+1), vals(Invalid, -1))
	case "lun":
		out = cat(vals(Valid, 0, 1), vals(Boundary, 255, 256), vals(Invalid, -1))
	case "priority":
		out = cat(vals(Valid, 0, 1000), vals(Boundary, 1000000000, 1000000001, 2000000000, 2000001001), vals(Invalid, -2147483648))
	case "exitCode":
		out = cat(vals(Valid, 1, 42), vals(Boundary, 0, 255, 256), vals(Invalid, -1))
	default:
		out = cat(vals(Valid, 0, 1, 3), vals(Invalid, -1))
	}
	if bits == 32 {
		// Past int32: both decoders refuse it.
		out = append(out, value{int64(2147483648) * 2, Invalid})
	}
	return out
}

var (
	quantityValues = cat(vals(Valid, "1", "100m", "1Mi", "1Gi", "1e3", "0.5"), vals(Boundary, "0", "1m", "1n"), vals(Invalid, "-1", "1.5.5", "bogus", "1Zi"))
	resourceLists  = cat(
		vals(Valid, obj("cpu", "100m"), obj("memory", "64Mi"), obj("cpu", "1", "memory", "1Gi"), obj("ephemeral-storage", "1Gi"), obj(), obj("cpu", "0")),
		vals(Boundary, obj("hugepages-2Mi", "2Mi", "memory", "64Mi"), obj("hugepages-2Mi", "3Mi", "memory", "64Mi"), obj("example.com/widget", "1"),
			obj("cpu", "1n"), obj("memory", "1")),
		vals(Invalid, obj("cpu", "-1"), obj("memory", "-64Mi"), obj("bogus", "1"), obj("pods", "1"), obj("example.com/widget", "500m"),
			obj("hugepages-2Mi", "2Mi"), obj("cpu", "1.5.5"), obj("requests.cpu", "1"), obj("kubernetes.io/bogus", "1")))
	intOrStrings = cat(vals(Valid, 8080, "http"), vals(Boundary, 1, 65535, 0, 65536, s15, s16),
		vals(Invalid, -1, "", "Bad_Name", "123", "a--b", "nope"))
	stringMaps = cat(vals(Valid, obj("app", "x"), obj("example.com/key", "v"), obj(), obj("k", "")),
		vals(Boundary, obj(s63, s63), obj(s64, "v"), obj("k", s64)),
		vals(Invalid, obj("bad key", "v"), obj("k", "bad value!"), obj("", "v"), obj("example.com/", "v"), obj("-k", "v")))
	labelSelectors = cat(
		vals(Valid, obj("matchLabels", obj("app", "x")), obj("matchExpressions", list(obj("key", "app", "operator", "In", "values", list("x")))), obj(),
			obj("matchExpressions", list(obj("key", "app", "operator", "Exists")))),
		vals(Invalid, obj("matchExpressions", list(obj("key", "app", "operator", "Bogus"))), obj("matchLabels", obj("bad key!", "x")),
			obj("matchExpressions", list(obj("key", "app", "operator", "In"))), obj("matchExpressions", list(obj("key", "app", "operator", "Exists", "values", list("x")))),
			obj("matchLabels", obj("app", "bad value!"))))
	times = cat(vals(Valid, "2024-01-01T00:00:00Z"), vals(Invalid, "yesterday"))
)

// leafValues are the values of a leaf by its type and, for strings and integers, its name.
func leafValues(l podfields.Leaf) []value {
	t := l.Type
	switch t.String() {
	case "resource.Quantity":
		return quantityValues
	case "v1.ResourceList":
		return resourceLists
	case "intstr.IntOrString":
		return intOrStrings
	case "v1.LabelSelector":
		return labelSelectors
	case "v1.Time", "v1.MicroTime":
		return times
	case "v1.FieldsV1":
		return cat(vals(Valid, obj("f:metadata", obj())), vals(Invalid, "bogus"))
	case "v1.Duration":
		return cat(vals(Valid, "1s"), vals(Invalid, "-1s", "bogus"))
	}
	if set, ok := enums[t.String()]; ok {
		return enumValues(set)
	}
	switch t.Kind() {
	case reflect.Bool:
		return vals(Valid, true, false)
	case reflect.Int32:
		return intValues(intKind(l.Path), 32)
	case reflect.Int64, reflect.Int:
		return intValues(intKind(l.Path), 64)
	case reflect.String:
		if k, ok := freeForm[t.String()]; ok {
			return stringValues(k)
		}
		return stringValues(stringKind(l.Path))
	case reflect.Map:
		return stringMaps
	}
	return nil
}
