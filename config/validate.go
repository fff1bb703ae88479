package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	psapi "k8s.io/pod-security-admission/api"

	"github.com/slicelet/slicelet/eviction"
)

// Validate checks c the way Load does and returns Problems (without file
// locations) or nil. Use it for configurations built in code.
func (c *Config) Validate() error {
	l := &loader{cfg: c, origin: map[string]source{}}
	l.validate()
	if len(l.problems) > 0 {
		return l.problems
	}
	return nil
}

// Validate checks an image GC policy with the kubelet's rules and messages
// (NewImageGCManager plus the configuration validation) and joins every problem.
func (g ImageGC) Validate() error {
	var errs []error
	for _, p := range g.problems() {
		errs = append(errs, errors.New(p.msg))
	}
	return errors.Join(errs...)
}

type fieldProblem struct {
	field string
	msg   string
}

// problems are the image GC policy's problems (gc.ImagePolicy.Problems, the kubelet's
// messages) attributed to this table's keys, plus the period's.
func (g ImageGC) problems() []fieldProblem {
	keys := map[string]string{
		"HighThresholdPercent": "high_threshold_percent",
		"LowThresholdPercent":  "low_threshold_percent",
		"MinAge":               "minimum_age",
		"MaxAge":               "maximum_age",
	}
	var out []fieldProblem
	for _, p := range g.Policy().Problems() {
		out = append(out, fieldProblem{keys[p.Field], p.Message})
	}
	if g.Period <= 0 {
		out = append(out, fieldProblem{"period", fmt.Sprintf("period %v must be positive", g.Period)})
	}
	return out
}

func key(parts ...string) toml.Key { return toml.Key(parts) }

// bad records a problem at the first of keys that a file set.
func (l *loader) bad(keys []toml.Key, format string, args ...any) {
	k, s := l.where(keys...)
	l.problems = append(l.problems, Problem{
		File: s.file, Line: s.pos.Line, Col: s.pos.Col,
		Key: k.String(), Msg: fmt.Sprintf(format, args...),
	})
}

// at is a one-key shorthand for bad.
func (l *loader) at(k toml.Key, format string, args ...any) { l.bad([]toml.Key{k}, format, args...) }

// validate checks the merged configuration, adding what it finds to l.problems.
func (l *loader) validate() {
	c := l.cfg
	l.absolutePath(key("state_dir"), c.StateDir, true)
	l.validateNode()
	l.validateCgroups()
	l.validateEviction()
	l.validateGC()
	l.validateRuntime()
	if c.Systemd.JobTimeout <= 0 {
		l.at(key("systemd", "job_timeout"), "job timeout %v must be positive", c.Systemd.JobTimeout)
	}
	l.absolutePath(key("pods", "manifest_dir"), c.Pods.ManifestDir, true)
	l.absolutePath(key("pods", "kubelet_root_dir"), c.Pods.KubeletRootDir, false)
	if c.Pods.KubeletRootDir != "" && c.Runtime.Type != RuntimeCRI {
		l.at(key("pods", "kubelet_root_dir"), "the kubelet's volume layout needs runtime.type = %q (the kubelet runs no pods of the systemd runtime)", RuntimeCRI)
	}
	switch c.Pods.StaticPodUID {
	case StaticPodUIDKubelet, StaticPodUIDMD5:
	default:
		l.at(key("pods", "static_pod_uid"), "invalid scheme %q: want %q or %q", c.Pods.StaticPodUID, StaticPodUIDKubelet, StaticPodUIDMD5)
	}
	l.validatePodSecurity("file", c.Pods.Security.File)
	l.validatePodSecurity("api", c.Pods.Security.API)
	l.absolutePath(key("api", "socket"), c.API.Socket, true)
	if c.API.Group == "" {
		l.at(key("api", "group"), "group must not be empty")
	} else if strings.ContainsAny(c.API.Group, ":/ \t\n") {
		l.at(key("api", "group"), "invalid group name %q", c.API.Group)
	}
	if a := c.Metrics.Address; strings.HasPrefix(a, "unix:") {
		if p := strings.TrimPrefix(a, "unix:"); !filepath.IsAbs(p) || len(p) > 107 {
			l.at(key("metrics", "address"), "invalid unix socket %q: want unix:/absolute/path of at most 107 bytes", a)
		}
	} else if a != "" {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			l.at(key("metrics", "address"), "invalid address %q: want host:port, unix:/path, or \"\" to turn metrics off", a)
		} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			l.at(key("metrics", "address"), "invalid port %q in %q: want 1-65535", port, a)
		} else if host != "" && net.ParseIP(host) == nil && validation.IsDNS1123Subdomain(host) != nil {
			l.at(key("metrics", "address"), "invalid host %q in %q", host, a)
		}
	}
	l.absolutePath(key("devices", "plugin_dir"), c.Devices.PluginDir, false)
	l.absolutePath(key("devices", "pod_resources_socket"), c.Devices.PodResourcesSocket, false)
	// A unix socket's path is at most 107 bytes (sun_path). The defaults under state_dir are
	// checked when slicelet starts (a state directory that long runs without device plugins).
	if d := c.Devices.PluginDir; d != "" && len(filepath.Join(d, "kubelet.sock")) > 107 {
		l.at(key("devices", "plugin_dir"), "registration socket %q is longer than 107 bytes", filepath.Join(d, "kubelet.sock"))
	}
	if p := c.Devices.PodResourcesSocket; len(p) > 107 {
		l.at(key("devices", "pod_resources_socket"), "socket %q is longer than 107 bytes", p)
	}
	l.absolutePath(key("csi", "root_dir"), c.CSI.RootDir, false)
	l.validateCluster()
	if level := strings.ToLower(c.Log.Level); level != "" && level != "warning" && !slices.Contains(LogLevels, level) {
		l.at(key("log", "level"), "invalid log level %q: want debug, info, warn or error", c.Log.Level)
	}
	if f := c.Log.Format; f != "" && !slices.Contains(LogFormats, f) {
		l.at(key("log", "format"), "invalid log format %q: want auto, text, json or journal", f)
	}
}

// absolutePath checks that p is a clean absolute path (or empty, when allowed).
func (l *loader) absolutePath(k toml.Key, p string, required bool) {
	switch {
	case p == "" && required:
		l.at(k, "path must not be empty")
	case p == "":
	case !path.IsAbs(p):
		l.at(k, "path %q must be absolute", p)
	case path.Clean(p) != p:
		l.at(k, "path %q is not clean; write %q", p, path.Clean(p))
	}
}

// reservedResources are the keys system_reserved and kube_reserved accept.
var reservedResources = []corev1.ResourceName{
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, "pid",
}

func (l *loader) validateNode() {
	n := l.cfg.Node
	if n.MaxPods < 0 {
		l.at(key("node", "max_pods"), "max pods %d must not be negative", n.MaxPods)
	}
	for _, table := range []struct {
		name string
		rl   corev1.ResourceList
	}{{"system_reserved", n.SystemReserved}, {"kube_reserved", n.KubeReserved}} {
		names := make([]string, 0, len(table.rl))
		for r := range table.rl {
			names = append(names, string(r))
		}
		slices.Sort(names)
		for _, r := range names {
			k := key("node", table.name, r)
			q := table.rl[corev1.ResourceName(r)]
			if !slices.Contains(reservedResources, corev1.ResourceName(r)) {
				l.at(k, "unsupported reserved resource %q: want cpu, memory, ephemeral-storage or pid", r)
				continue
			}
			if msg := checkAmount(corev1.ResourceName(r), q); msg != "" {
				l.at(k, "%s", msg)
			}
		}
	}
	l.absolutePath(key("node", "system_reserved_cgroup"), n.SystemReservedCgroup, false)
	l.absolutePath(key("node", "kube_reserved_cgroup"), n.KubeReservedCgroup, false)

	enk := key("node", "enforce_node_allocatable")
	valid := []string{EnforceNone, EnforcePods, EnforceSystemReserved, EnforceSystemReservedCompressible, EnforceKubeReserved, EnforceKubeReservedCompressible}
	seen := map[string]bool{}
	for _, v := range n.EnforceNodeAllocatable {
		switch {
		case !slices.Contains(valid, v):
			l.at(enk, "invalid option %q: valid options are %s", v, strings.Join(quoteAll(valid), ", "))
		case seen[v]:
			l.at(enk, "option %q is listed twice", v)
		}
		seen[v] = true
	}
	if seen[EnforceNone] && len(n.EnforceNodeAllocatable) > 1 {
		l.at(enk, "may not contain additional enforcements when %q is specified", EnforceNone)
	}
	for _, twin := range [][2]string{
		{EnforceSystemReserved, EnforceSystemReservedCompressible},
		{EnforceKubeReserved, EnforceKubeReservedCompressible},
	} {
		if seen[twin[0]] && seen[twin[1]] {
			l.at(enk, "%q and %q exclude each other: the compressible form enforces only cpu", twin[0], twin[1])
		}
	}
	if (seen[EnforceSystemReserved] || seen[EnforceSystemReservedCompressible]) && n.SystemReservedCgroup == "" {
		l.bad([]toml.Key{key("node", "system_reserved_cgroup"), enk}, "system_reserved_cgroup must be set when enforce_node_allocatable contains %q or %q", EnforceSystemReserved, EnforceSystemReservedCompressible)
	}
	if (seen[EnforceKubeReserved] || seen[EnforceKubeReservedCompressible]) && n.KubeReservedCgroup == "" {
		l.bad([]toml.Key{key("node", "kube_reserved_cgroup"), enk}, "kube_reserved_cgroup must be set when enforce_node_allocatable contains %q or %q", EnforceKubeReserved, EnforceKubeReservedCompressible)
	}
	enforcing := len(n.EnforceNodeAllocatable) > 0 && !seen[EnforceNone]
	if enforcing && !l.cfg.Cgroups.PerQOS {
		l.bad([]toml.Key{key("cgroups", "per_qos"), enk}, "enforce_node_allocatable [%s] requires [cgroups] per_qos = true (or enforce_node_allocatable = [\"none\"])", strings.Join(quoteAll(n.EnforceNodeAllocatable), ", "))
	}
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// checkAmount rejects negative and absurd amounts: every resource must be a
// whole number of its kernel unit (millicores for cpu; bytes or PIDs otherwise)
// that fits in an int64. It catches "100m" of memory (0.1 bytes).
func checkAmount(r corev1.ResourceName, q resource.Quantity) string {
	if q.Sign() < 0 {
		return fmt.Sprintf("%s %s must not be negative", r, q.String())
	}
	if r == corev1.ResourceCPU {
		// An exact millicore count survives the round trip; a fractional or
		// overflowing one does not.
		if resource.NewMilliQuantity(q.MilliValue(), resource.DecimalSI).Cmp(q) != 0 {
			return fmt.Sprintf("cpu %s is not a whole number of millicores below 2^63 millicores", q.String())
		}
		return ""
	}
	if !wholeUnits(q) {
		unit := "bytes"
		if r == "pid" {
			unit = "PIDs"
		}
		return fmt.Sprintf("%s %s is not a whole number of %s below 2^63 (did you mean Mi rather than m?)", r, q.String(), unit)
	}
	return ""
}

// wholeUnits reports whether q is a whole number that fits in an int64: the
// value survives a round trip through Value (which rounds up and saturates).
func wholeUnits(q resource.Quantity) bool {
	return resource.NewQuantity(q.Value(), resource.DecimalSI).Cmp(q) == 0
}

func (l *loader) validateCgroups() {
	c := l.cfg.Cgroups
	l.absolutePath(key("cgroups", "root"), c.Root, true)
	if p := c.CPUCFSQuotaPeriod; p < time.Millisecond || p > time.Second {
		l.at(key("cgroups", "cpu_cfs_quota_period"), "period %v must be between 1ms and 1s", p)
	}
	if c.PodPidsLimit < -1 {
		l.at(key("cgroups", "pod_pids_limit"), "pod pids limit %d must be -1 (no limit), 0 (no limit) or positive", c.PodPidsLimit)
	}
	for _, r := range slices.Sorted(maps.Keys(c.QOSReserved)) {
		k := key("cgroups", "qos_reserved", r)
		if r != string(corev1.ResourceMemory) {
			l.at(k, "unsupported qos reserved resource %q: only memory is supported", r)
			continue
		}
		if _, err := parseQOSPercent(c.QOSReserved[r]); err != nil {
			l.at(k, "%v", err)
		}
	}
	switch c.MemoryReservationPolicy {
	case MemoryReservationNone, MemoryReservationTieredReservation:
	default:
		l.at(key("cgroups", "memory_reservation_policy"), "invalid policy %q: want %q or %q", c.MemoryReservationPolicy, MemoryReservationNone, MemoryReservationTieredReservation)
	}
	if f := c.MemoryThrottlingFactor; f < 0 || f > 1 {
		l.at(key("cgroups", "memory_throttling_factor"), "factor %v must be in (0, 1], or 0 for unset", f)
	}
}

// parseQOSPercent parses a qos_reserved value: an integer percentage "NN%" in 0–100.
func parseQOSPercent(v string) (int64, error) {
	s, ok := strings.CutSuffix(v, "%")
	if !ok {
		return 0, fmt.Errorf("qos reserved %q: want a percentage such as \"50%%\"", v)
	}
	p, err := strconv.ParseInt(s, 10, 64)
	if err != nil || p < 0 || p > 100 {
		return 0, fmt.Errorf("qos reserved %q: want an integer percentage between 0%% and 100%%", v)
	}
	return p, nil
}

func (l *loader) validateEviction() {
	e := l.cfg.Eviction
	_, err := l.cfg.EvictionThresholds()
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		for _, one := range joined.Unwrap() {
			var te *eviction.ThresholdError
			if errors.As(one, &te) {
				l.at(key("eviction", string(te.Setting), te.Signal), "%v", te.Err)
			} else {
				l.at(key("eviction"), "%v", one)
			}
		}
	} else if err != nil {
		l.at(key("eviction"), "%v", err)
	}
	// The kubelet accepts fractional and enormous quantities; they are mistakes.
	for _, m := range []struct {
		name string
		m    map[string]string
	}{{"hard", e.Hard}, {"soft", e.Soft}, {"minimum_reclaim", e.MinimumReclaim}} {
		for _, sig := range slices.Sorted(maps.Keys(m.m)) {
			v := m.m[sig]
			if strings.HasSuffix(v, "%") || !eviction.ValidSignal(eviction.Signal(sig)) {
				continue
			}
			q, err := resource.ParseQuantity(v)
			if err != nil || q.Sign() < 0 {
				continue // reported above
			}
			if !QuantityInRange(v) {
				l.at(key("eviction", m.name, sig), "eviction quantity %s %s is out of range: at most 8Ei (2^63-1) in magnitude", sig, v)
				continue
			}
			if !wholeUnits(q) {
				l.at(key("eviction", m.name, sig), "eviction quantity %s %s is not a whole number below 2^63 (did you mean Mi rather than m?)", sig, v)
			}
		}
	}
	if e.PressureTransitionPeriod < 0 {
		l.at(key("eviction", "pressure_transition_period"), "period %v must not be negative", e.PressureTransitionPeriod)
	}
	if e.MaxPodGracePeriod < 0 {
		l.at(key("eviction", "max_pod_grace_period"), "grace period %v must not be negative (the kubelet's negative value is confusing and not supported)", e.MaxPodGracePeriod)
	}
	if e.MonitoringInterval <= 0 {
		l.at(key("eviction", "monitoring_interval"), "interval %v must be positive", e.MonitoringInterval)
	}
	names := make([]string, 0, len(e.PriorityClasses))
	for n := range e.PriorityClasses {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		k := key("eviction", "priority_classes", n)
		v := e.PriorityClasses[n]
		switch {
		case n == SystemNodeCritical || n == SystemClusterCritical:
			builtin, _ := Eviction{}.PriorityClassValue(n)
			l.at(k, "priority class %q is built in (value %d) and cannot be redefined", n, builtin)
		case strings.HasPrefix(n, "system-"):
			l.at(k, "priority class names starting with \"system-\" are reserved")
		case len(validation.IsDNS1123Subdomain(n)) > 0:
			l.at(k, "invalid priority class name %q: %s", n, strings.Join(validation.IsDNS1123Subdomain(n), "; "))
		case v > HighestUserDefinablePriority:
			l.at(k, "priority %d is above the highest user-definable priority %d", v, HighestUserDefinablePriority)
		}
	}
}

func (l *loader) validateGC() {
	g := l.cfg.GC
	for _, p := range g.Images.problems() {
		keys := []toml.Key{key("gc", "images", p.field)}
		switch p.field {
		case "low_threshold_percent":
			keys = append(keys, key("gc", "images", "high_threshold_percent"))
		case "maximum_age":
			keys = append(keys, key("gc", "images", "minimum_age"))
		}
		l.bad(keys, "%s", p.msg)
	}
	// gc.ContainerPolicy's only rule is the minimum age's (negative counts mean no limit).
	if err := g.Containers.Policy().Validate(); err != nil {
		l.at(key("gc", "containers", "minimum_age"), "%v", err)
	}
	if g.Containers.Period <= 0 {
		l.at(key("gc", "containers", "period"), "period %v must be positive", g.Containers.Period)
	}
}

// validatePodSecurity checks one source's Pod Security level and version with the parsers
// the API server's PodSecurity admission uses for its namespace labels.
func (l *loader) validatePodSecurity(source string, p PodSecurity) {
	if _, err := psapi.ParseLevel(p.Enforce); err != nil {
		l.at(key("pods", "security", source, "enforce"), "invalid level %q: %v", p.Enforce, err)
	}
	if _, err := psapi.ParseVersion(p.EnforceVersion); err != nil {
		l.at(key("pods", "security", source, "enforce_version"), "invalid version %q: %v", p.EnforceVersion, err)
	}
}

func (l *loader) validateRuntime() {
	r := l.cfg.Runtime
	switch r.Type {
	case RuntimeSystemd:
	case RuntimeCRI:
		k := key("runtime", "endpoint")
		if r.Endpoint == "" {
			l.bad([]toml.Key{k, key("runtime", "type")}, "endpoint must be set when type = %q, e.g. \"unix:///run/containerd/containerd.sock\"", RuntimeCRI)
			break
		}
		u, err := url.Parse(r.Endpoint)
		switch {
		case err != nil || u.Scheme != "unix":
			l.at(k, "invalid endpoint %q: want a unix:// URL such as \"unix:///run/containerd/containerd.sock\"", r.Endpoint)
		case u.Host != "" || !path.IsAbs(u.Path):
			l.at(k, "invalid endpoint %q: the socket path must be absolute (unix:///path, three slashes)", r.Endpoint)
		}
	default:
		l.at(key("runtime", "type"), "invalid runtime type %q: want %q or %q", r.Type, RuntimeSystemd, RuntimeCRI)
	}
	switch r.Network {
	case NetworkHost:
	case NetworkCNI:
		if r.Type != RuntimeCRI {
			l.bad([]toml.Key{key("runtime", "network"), key("runtime", "type")}, "network = %q needs type = %q (the systemd runtime runs every pod on the host's network)", NetworkCNI, RuntimeCRI)
		}
	default:
		l.at(key("runtime", "network"), "invalid runtime network %q: want %q or %q", r.Network, NetworkHost, NetworkCNI)
	}
}
