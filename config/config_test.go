package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	stdslices "slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/slices"
)

// sameConfig compares configurations semantically (quantities by value),
// ignoring which files they came from.
func sameConfig(t *testing.T, got, want *Config) {
	t.Helper()
	g, w := *got, *want
	g.files, w.files = nil, nil
	if !equality.Semantic.DeepEqual(g, w) {
		var gb, wb bytes.Buffer
		_ = Encode(&gb, &g)
		_ = Encode(&wb, &w)
		t.Errorf("configurations differ:\n--- got\n%s\n--- want\n%s", gb.String(), wb.String())
	}
}

func TestDefault(t *testing.T) {
	d := Default()
	if err := d.Validate(); err != nil {
		t.Fatalf("Default() does not validate:\n%v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"eviction hard", d.Eviction.Hard, map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "imagefs.available": "15%", "imagefs.inodesFree": "5%"}},
		{"pressure transition", d.Eviction.PressureTransitionPeriod, 5 * time.Minute},
		{"max pod grace", d.Eviction.MaxPodGracePeriod, time.Duration(0)},
		{"monitoring interval", d.Eviction.MonitoringInterval, 10 * time.Second},
		{"image gc", d.GC.Images, ImageGC{HighThresholdPercent: 85, LowThresholdPercent: 80, MinimumAge: 2 * time.Minute, MaximumAge: 0, Period: 5 * time.Minute}},
		{"container gc", d.GC.Containers, ContainerGC{MinimumAge: 0, MaxPerPodContainer: 1, MaxContainers: -1, Period: time.Minute}},
		{"per qos", d.Cgroups.PerQOS, true},
		{"cfs quota", d.Cgroups.CPUCFSQuota, true},
		{"cfs period", d.Cgroups.CPUCFSQuotaPeriod, 100 * time.Millisecond},
		{"pod pids limit", d.Cgroups.PodPidsLimit, int64(-1)},
		{"memory reservation policy", d.Cgroups.MemoryReservationPolicy, "None"},
		{"enforce node allocatable", d.Node.EnforceNodeAllocatable, []string{"pods"}},
		{"max pods", d.Node.MaxPods, int32(110)},
		{"runtime", d.Runtime.Type, "systemd"},
		{"manifest dir", d.Pods.ManifestDir, "/etc/slicelet/pods.d"},
		{"state dir", d.StateDir, "/var/lib/slicelet"},
		{"api socket", d.API, API{Socket: "/run/slicelet/slicelet.sock", Group: "slicelet"}},
		{"metrics", d.Metrics.Address, "127.0.0.1:10255"},
		{"log", d.Log, Log{Level: "info", Format: "auto"}},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	th, err := d.EvictionThresholds()
	if err != nil {
		t.Fatal(err)
	}
	if len(th) != 6 { // five defaults plus the allocatableMemory.available copy
		t.Errorf("default thresholds = %d, want 6", len(th))
	}
}

// TestBadInput checks one problem per class, each with its exact location.
func TestBadInput(t *testing.T) {
	tests := []struct {
		name string
		toml string
		want []string // Problem.String() prefixes ("file:line:col: key: message")
	}{
		{
			name: "malformed TOML",
			toml: "[node]\nmax_pods = = 3\n",
			want: []string{"f.toml:2:12: expected value but found '=' instead"},
		},
		{
			// The error is at the newline ending line 2, not on line 3 where the parser was.
			name: "unterminated table header",
			toml: "state_dir = \"/x\"\n[node\nmax_pods = 10\n",
			want: []string{"f.toml:2:6: expected '.' or ']' to end table name"},
		},
		{
			name: "missing value at the end of a line",
			toml: "state_dir = \"/x\"\nmax = \n",
			want: []string{"f.toml:2:7: expected value but found '\\n' instead"},
		},
		{
			// The column is the key's, inside the line.
			name: "duplicate key",
			toml: "[node]\nmax_pods = 10\n  max_pods = 20\n",
			want: []string{"f.toml:3:3: Key 'node.max_pods' has already been defined."},
		},
		{
			name: "column in bytes",
			toml: "state_dir = \"/é\" = 1\n",
			want: []string{"f.toml:1:18: expected a top-level item to end"},
		},
		{
			name: "quantity out of range",
			toml: "[node]\nsystem_reserved = { memory = \"99999999999999999999Ei\", cpu = \"10E18\" }\n",
			want: []string{
				`f.toml:2:21: node.system_reserved.memory: quantity "99999999999999999999Ei" is out of range`,
				`f.toml:2:56: node.system_reserved.cpu: quantity "10E18" is out of range`,
			},
		},
		{
			// resource.ParseQuantity never returns for it.
			name: "quantity exponent that stalls the parser",
			toml: "[node]\nsystem_reserved = { memory = \"12E45678901234\" }\n[eviction]\nhard = { \"memory.available\" = \"1e-1000000\" }\n",
			want: []string{
				`f.toml:2:21: node.system_reserved.memory: invalid quantity: number "12E45678901234": exponent beyond ±100`,
				`f.toml:4:10: eviction.hard."memory.available": invalid value: number "1e-1000000": exponent beyond ±100`,
			},
		},
		{
			name: "eviction quantity out of range",
			toml: "[eviction]\nhard = { \"memory.available\" = \"9Ei\" }\n",
			want: []string{`f.toml:2:10: eviction.hard."memory.available": eviction quantity memory.available 9Ei is out of range`},
		},
		{
			name: "unterminated string",
			toml: "state_dir = \"/var/lib\n",
			want: []string{"f.toml:1:"},
		},
		{
			name: "unknown top-level key with suggestion",
			toml: "stat_dir = \"/x\"\n",
			want: []string{`f.toml:1:1: stat_dir: unknown key; did you mean "state_dir"?`},
		},
		{
			name: "unknown key in a table",
			toml: "[eviction]\n  pressure_transiton_period = \"5m\"\n",
			want: []string{`f.toml:2:3: eviction.pressure_transiton_period: unknown key; did you mean "pressure_transition_period"?`},
		},
		{
			name: "unknown table",
			toml: "[evictoin]\nhard = {}\n",
			want: []string{`f.toml:1:2: evictoin: unknown key; did you mean "eviction"?`},
		},
		{
			name: "unknown dotted key without suggestion",
			toml: "gc.images.colour = \"blue\"\n",
			want: []string{`f.toml:1:1: gc.images.colour: unknown key`},
		},
		{
			name: "wrong type integer as string",
			toml: "[node]\nmax_pods = \"110\"\n",
			want: []string{"f.toml:2:1: node.max_pods: wrong type: got string, want integer"},
		},
		{
			name: "wrong type duration as integer",
			toml: "[eviction]\nmonitoring_interval = 10\n",
			want: []string{`f.toml:2:1: eviction.monitoring_interval: wrong type: got integer, want a duration string such as "1m30s"`},
		},
		{
			name: "bad duration",
			toml: "[gc.images]\nperiod = \"5 minutes\"\n",
			want: []string{`f.toml:2:1: gc.images.period: invalid duration "5 minutes"`},
		},
		{
			name: "wrong type bool",
			toml: "[cgroups]\nper_qos = \"yes\"\n",
			want: []string{"f.toml:2:1: cgroups.per_qos: wrong type: got string, want boolean"},
		},
		{
			name: "wrong array element",
			toml: "[node]\nenforce_node_allocatable = [\"pods\", 3]\n",
			want: []string{"f.toml:2:1: node.enforce_node_allocatable: wrong type: element 1 is integer, want string"},
		},
		{
			name: "table where a value belongs",
			toml: "[log]\nlevel = { name = \"info\" }\n",
			want: []string{"f.toml:2:1: log.level: wrong type: got table, want string"},
		},
		{
			name: "value where a table belongs",
			toml: "node = 3\n",
			want: []string{"f.toml:1:1: node: wrong type: got integer, want a table"},
		},
		{
			name: "int32 overflow",
			toml: "[node]\nmax_pods = 9999999999\n",
			want: []string{"f.toml:2:1: node.max_pods: integer 9999999999 out of range for a 32-bit value"},
		},
		{
			name: "invalid quantity",
			toml: "[node]\nkube_reserved = { memory = \"lots\" }\n",
			want: []string{`f.toml:2:19: node.kube_reserved.memory: invalid quantity "lots"`},
		},
		{
			name: "negative reservation",
			toml: "[node.system_reserved]\ncpu = \"-100m\"\n",
			want: []string{"f.toml:2:1: node.system_reserved.cpu: cpu -100m must not be negative"},
		},
		{
			name: "fractional memory reservation",
			toml: "[node]\nsystem_reserved = { memory = \"500m\" }\n",
			want: []string{"f.toml:2:21: node.system_reserved.memory: memory 500m is not a whole number of bytes"},
		},
		{
			name: "absurd memory reservation",
			toml: "[node]\nsystem_reserved = { memory = \"1e30\" }\n",
			want: []string{"f.toml:2:21: node.system_reserved.memory: quantity \"1e30\" is out of range"},
		},
		{
			name: "sub-millicore cpu",
			toml: "[node]\nsystem_reserved = { cpu = \"0.0001\" }\n",
			want: []string{"f.toml:2:21: node.system_reserved.cpu: cpu 100u is not a whole number of millicores"},
		},
		{
			name: "unsupported reserved resource",
			toml: "[node]\nkube_reserved = { gpu = \"1\" }\n",
			want: []string{`f.toml:2:19: node.kube_reserved.gpu: unsupported reserved resource "gpu"`},
		},
		{
			name: "unknown eviction signal",
			toml: "[eviction]\nhard = { \"mem.available\" = \"150Mi\" }\n",
			want: []string{`f.toml:2:10: eviction.hard."mem.available": unsupported eviction signal mem.available`},
		},
		{
			name: "soft threshold without grace period",
			toml: "[eviction.soft]\n\"memory.available\" = \"1Gi\"\n",
			want: []string{`f.toml:2:1: eviction.soft."memory.available": grace period must be specified for the soft eviction threshold memory.available`},
		},
		{
			name: "negative threshold and bad percentage",
			toml: "[eviction]\nhard = { \"memory.available\" = \"-150Mi\", \"nodefs.available\" = \"150%\" }\n",
			want: []string{
				`f.toml:2:10: eviction.hard."memory.available": eviction threshold memory.available must be positive: -150Mi`,
				`f.toml:2:41: eviction.hard."nodefs.available": eviction percentage threshold nodefs.available must be <= 100%: 150%`,
			},
		},
		{
			name: "negative grace and zero-percent reclaim",
			toml: "[eviction]\nsoft = { \"memory.available\" = \"1Gi\" }\nsoft_grace_period = { \"memory.available\" = \"-1m\" }\nminimum_reclaim = { \"memory.available\" = \"0%\" }\n",
			want: []string{
				`f.toml:3:23: eviction.soft_grace_period."memory.available": invalid eviction grace period specified for memory.available: -1m`,
				`f.toml:4:21: eviction.minimum_reclaim."memory.available": eviction percentage minimum reclaim memory.available must be positive: 0%`,
			},
		},
		{
			name: "fractional eviction quantity",
			toml: "[eviction]\nhard = { \"memory.available\" = \"100m\" }\n",
			want: []string{`f.toml:2:10: eviction.hard."memory.available": eviction quantity memory.available 100m is not a whole number`},
		},
		{
			name: "negative eviction durations",
			toml: "[eviction]\npressure_transition_period = \"-1s\"\nmax_pod_grace_period = \"-30s\"\nmonitoring_interval = \"0s\"\n",
			want: []string{
				"f.toml:2:1: eviction.pressure_transition_period: period -1s must not be negative",
				"f.toml:3:1: eviction.max_pod_grace_period: grace period -30s must not be negative",
				"f.toml:4:1: eviction.monitoring_interval: interval 0s must be positive",
			},
		},
		{
			name: "built-in priority class redefined",
			toml: "[eviction.priority_classes]\nsystem-node-critical = 5\nhigh = 2000000000\nsystem-mine = 1\n",
			want: []string{
				`f.toml:2:1: eviction.priority_classes.system-node-critical: priority class "system-node-critical" is built in (value 2000001000) and cannot be redefined`,
				"f.toml:3:1: eviction.priority_classes.high: priority 2000000000 is above the highest user-definable priority 1000000000",
				`f.toml:4:1: eviction.priority_classes.system-mine: priority class names starting with "system-" are reserved`,
			},
		},
		{
			name: "GC high out of range",
			toml: "[gc.images]\nhigh_threshold_percent = 101\n",
			want: []string{"f.toml:2:1: gc.images.high_threshold_percent: invalid HighThresholdPercent 101, must be in range [0-100]"},
		},
		{
			name: "GC low above high",
			toml: "[gc.images]\nhigh_threshold_percent = 80\nlow_threshold_percent = 90\n",
			want: []string{"f.toml:3:1: gc.images.low_threshold_percent: LowThresholdPercent 90 can not be higher than HighThresholdPercent 80"},
		},
		{
			name: "GC low above default high is placed on low",
			toml: "[gc.images]\nlow_threshold_percent = 90\n",
			want: []string{"f.toml:2:1: gc.images.low_threshold_percent: LowThresholdPercent 90 can not be higher than HighThresholdPercent 85"},
		},
		{
			name: "GC ages",
			toml: "[gc.images]\nminimum_age = \"-1m\"\n[gc.containers]\nminimum_age = \"-1s\"\n",
			want: []string{
				"f.toml:2:1: gc.images.minimum_age: minimum age -1m0s must not be negative",
				"f.toml:4:1: gc.containers.minimum_age: minimum age -1s must not be negative",
			},
		},
		{
			name: "GC max age not above min age",
			toml: "[gc.images]\nminimum_age = \"10m\"\nmaximum_age = \"5m\"\n",
			want: []string{"f.toml:3:1: gc.images.maximum_age: maximum age 5m0s must be greater than minimum age 10m0s"},
		},
		{
			name: "enforce none with others",
			toml: "[node]\nenforce_node_allocatable = [\"none\", \"pods\"]\n",
			want: []string{`f.toml:2:1: node.enforce_node_allocatable: may not contain additional enforcements when "none" is specified`},
		},
		{
			name: "enforce compressible twin",
			toml: "[node]\nsystem_reserved_cgroup = \"/system.slice\"\nenforce_node_allocatable = [\"pods\", \"system-reserved\", \"system-reserved-compressible\"]\n",
			want: []string{`f.toml:3:1: node.enforce_node_allocatable: "system-reserved" and "system-reserved-compressible" exclude each other`},
		},
		{
			name: "enforce kube-reserved without cgroup",
			toml: "[node]\nenforce_node_allocatable = [\"pods\", \"kube-reserved-compressible\"]\n",
			want: []string{`f.toml:2:1: node.enforce_node_allocatable: kube_reserved_cgroup must be set when enforce_node_allocatable contains "kube-reserved"`},
		},
		{
			name: "enforce invalid option",
			toml: "[node]\nenforce_node_allocatable = [\"pod\"]\n",
			want: []string{`f.toml:2:1: node.enforce_node_allocatable: invalid option "pod"`},
		},
		{
			name: "enforcement without per-QoS cgroups",
			toml: "[cgroups]\nper_qos = false\n",
			want: []string{`f.toml:2:1: cgroups.per_qos: enforce_node_allocatable ["pods"] requires [cgroups] per_qos = true`},
		},
		{
			name: "relative paths",
			toml: "state_dir = \"var/lib/slicelet\"\n[node]\nsystem_reserved_cgroup = \"system.slice\"\n[pods]\nmanifest_dir = \"/etc/slicelet/../pods\"\n",
			want: []string{
				`f.toml:1:1: state_dir: path "var/lib/slicelet" must be absolute`,
				`f.toml:3:1: node.system_reserved_cgroup: path "system.slice" must be absolute`,
				`f.toml:5:1: pods.manifest_dir: path "/etc/slicelet/../pods" is not clean; write "/etc/pods"`,
			},
		},
		{
			name: "kubelet root dir: relative, and without the CRI runtime",
			toml: "[pods]\nkubelet_root_dir = \"var/lib/kubelet\"\n",
			want: []string{
				`f.toml:2:1: pods.kubelet_root_dir: path "var/lib/kubelet" must be absolute`,
				`f.toml:2:1: pods.kubelet_root_dir: the kubelet's volume layout needs runtime.type = "cri" (the kubelet runs no pods of the systemd runtime)`,
			},
		},
		{
			name: "cfs period out of range",
			toml: "[cgroups]\ncpu_cfs_quota_period = \"2s\"\n",
			want: []string{"f.toml:2:1: cgroups.cpu_cfs_quota_period: period 2s must be between 1ms and 1s"},
		},
		{
			name: "cfs period below 1ms",
			toml: "[cgroups]\ncpu_cfs_quota_period = \"500us\"\n",
			want: []string{"f.toml:2:1: cgroups.cpu_cfs_quota_period: period 500µs must be between 1ms and 1s"},
		},
		{
			name: "qos reserved",
			toml: "[cgroups]\nqos_reserved = { memory = \"150%\", cpu = \"10%\" }\n",
			want: []string{
				`f.toml:2:18: cgroups.qos_reserved.memory: qos reserved "150%": want an integer percentage between 0% and 100%`,
				`f.toml:2:35: cgroups.qos_reserved.cpu: unsupported qos reserved resource "cpu"`,
			},
		},
		{
			name: "memory policy, pids limit and throttling",
			toml: "[cgroups]\nmemory_reservation_policy = \"Tiered\"\npod_pids_limit = -2\nmemory_throttling_factor = 1.5\n",
			want: []string{
				`f.toml:2:1: cgroups.memory_reservation_policy: invalid policy "Tiered": want "None" or "TieredReservation"`,
				"f.toml:3:1: cgroups.pod_pids_limit: pod pids limit -2 must be -1",
				"f.toml:4:1: cgroups.memory_throttling_factor: factor 1.5 must be in (0, 1]",
			},
		},
		{
			name: "pod security level",
			toml: "[pods.security.api]\nenforce = \"strict\"\n",
			want: []string{`f.toml:2:1: pods.security.api.enforce: invalid level "strict": must be one of privileged, baseline, restricted`},
		},
		{
			name: "pod security version, dotted key",
			toml: "[pods]\nsecurity.file.enforce_version = \"1.30\"\n",
			want: []string{`f.toml:2:1: pods.security.file.enforce_version: invalid version "1.30": must be "latest" or "v1.x"`},
		},
		{
			name: "pod security unknown source",
			toml: "[pods.security.manifests]\nenforce = \"baseline\"\n",
			want: []string{`f.toml:1:2: pods.security.manifests: unknown key`},
		},
		{
			name: "runtime type",
			toml: "[runtime]\ntype = \"docker\"\n",
			want: []string{`f.toml:2:1: runtime.type: invalid runtime type "docker": want "systemd" or "cri"`},
		},
		{
			name: "cri without endpoint",
			toml: "[runtime]\ntype = \"cri\"\n",
			want: []string{`f.toml:2:1: runtime.type: endpoint must be set when type = "cri"`},
		},
		{
			name: "cri with a tcp endpoint",
			toml: "[runtime]\ntype = \"cri\"\nendpoint = \"tcp://127.0.0.1:1234\"\n",
			want: []string{`f.toml:3:1: runtime.endpoint: invalid endpoint "tcp://127.0.0.1:1234": want a unix:// URL`},
		},
		{
			name: "cri with a relative socket",
			toml: "[runtime]\ntype = \"cri\"\nendpoint = \"unix://run/containerd.sock\"\n",
			want: []string{`f.toml:3:1: runtime.endpoint: invalid endpoint "unix://run/containerd.sock": the socket path must be absolute`},
		},
		{
			name: "runtime network unknown",
			toml: "[runtime]\nnetwork = \"flannel\"\n",
			want: []string{`f.toml:2:1: runtime.network: invalid runtime network "flannel": want "host" or "cni"`},
		},
		{
			name: "cni network with the systemd runtime",
			toml: "[runtime]\nnetwork = \"cni\"\n",
			want: []string{`f.toml:2:1: runtime.network: network = "cni" needs type = "cri"`},
		},
		{
			name: "log level and format",
			toml: "[log]\nlevel = \"verbose\"\nformat = \"xml\"\n",
			want: []string{
				`f.toml:2:1: log.level: invalid log level "verbose": want debug, info, warn or error`,
				`f.toml:3:1: log.format: invalid log format "xml": want auto, text, json or journal`,
			},
		},
		{
			name: "metrics address and api",
			toml: "[metrics]\naddress = \"localhost\"\n[api]\ngroup = \"\"\nsocket = \"slicelet.sock\"\n",
			want: []string{
				`f.toml:2:1: metrics.address: invalid address "localhost": want host:port`,
				"f.toml:4:1: api.group: group must not be empty",
				`f.toml:5:1: api.socket: path "slicelet.sock" must be absolute`,
			},
		},
		{
			name: "cluster",
			toml: "[cluster]\nenabled = true\nkubeconfig = \"\"\nnode_name = \"Node_1\"\nlabels = { \"a/b/c\" = \"x\", ok = \"-bad\" }\ntaints = [\"k=v\", \"k=v:NoSchedule\", \"k=w:NoSchedule\", \"k:Sometimes\"]\n",
			want: []string{
				"f.toml:3:1: cluster.kubeconfig: path must not be empty",
				`f.toml:4:1: cluster.node_name: invalid node name "Node_1"`,
				`f.toml:5:12: cluster.labels."a/b/c": invalid label key "a/b/c"`,
				`f.toml:5:27: cluster.labels.ok: invalid label value "-bad"`,
				`f.toml:6:1: cluster.taints: invalid taint "k=v": want key=value:Effect or key:Effect`,
				`f.toml:6:1: cluster.taints: taint "k=w:NoSchedule": key "k" with effect NoSchedule is listed twice`,
				`f.toml:6:1: cluster.taints: invalid taint "k:Sometimes": effect "Sometimes"`,
			},
		},
		{
			name: "cluster kubelet API",
			toml: "[cluster]\nnode_ip = \"localhost\"\nkubelet_port = 70000\ntls_cert_file = \"/etc/kubelet.crt\"\nclient_ca_file = \"ca.crt\"\n",
			want: []string{
				`f.toml:2:1: cluster.node_ip: invalid IP address "localhost"`,
				`f.toml:3:1: cluster.kubelet_port: port 70000 is not between 0 and 65535`,
				`f.toml:5:1: cluster.client_ca_file: path "ca.crt" must be absolute`,
				`cluster.tls_private_key_file: path must not be empty`,
			},
		},
		{
			name: "cluster certificates paths",
			toml: "[cluster]\nbootstrap_kubeconfig = \"bootstrap.conf\"\ncert_dir = \"/var/lib/slicelet/pki/\"\nrotate_certificates = true\n",
			want: []string{
				`f.toml:2:1: cluster.bootstrap_kubeconfig: path "bootstrap.conf" must be absolute`,
				`f.toml:3:1: cluster.cert_dir: path "/var/lib/slicelet/pki/" is not clean; write "/var/lib/slicelet/pki"`,
			},
		},
		{
			name: "cluster bootstrap without rotation",
			toml: "[cluster]\nbootstrap_kubeconfig = \"/etc/slicelet/bootstrap-kubeconfig\"\n",
			want: []string{`f.toml:2:1: cluster.bootstrap_kubeconfig: needs cluster.rotate_certificates = true`},
		},
		{
			name: "cluster bootstrap kubeconfig is the kubeconfig",
			toml: "[cluster]\nkubeconfig = \"/etc/slicelet/kubeconfig\"\nbootstrap_kubeconfig = \"/etc/slicelet/kubeconfig\"\nrotate_certificates = true\n",
			want: []string{`f.toml:3:1: cluster.bootstrap_kubeconfig: "/etc/slicelet/kubeconfig" is also cluster.kubeconfig`},
		},
		{
			name: "cluster server TLS bootstrap without the kubelet API",
			toml: "[cluster]\nkubelet_port = 0\nserver_tls_bootstrap = true\n",
			want: []string{`f.toml:3:1: cluster.server_tls_bootstrap: needs the kubelet API: cluster.kubelet_port is 0`},
		},
		{
			name: "cluster DNS",
			toml: "[cluster]\ndns_servers = [\"10.96.0.10\", \"kube-dns\", \"10.96.0.10\"]\ndomain = \"Cluster.Local\"\nresolv_conf = \"resolv.conf\"\n",
			want: []string{
				`f.toml:2:1: cluster.dns_servers: invalid IP address "kube-dns"`,
				`f.toml:2:1: cluster.dns_servers: "10.96.0.10" is listed twice`,
				`f.toml:3:1: cluster.domain: invalid cluster domain "Cluster.Local"`,
				`f.toml:4:1: cluster.resolv_conf: path "resolv.conf" must be absolute`,
			},
		},
		{
			name: "systemd job timeout",
			toml: "[systemd]\njob_timeout = \"0s\"\n",
			want: []string{"f.toml:2:1: systemd.job_timeout: job timeout 0s must be positive"},
		},
		{
			name: "every problem at once, in file order",
			toml: "stat_dir = 1\n[node]\nmax_pods = -1\n[eviction]\nhard = { \"bogus\" = \"1\" }\n[log]\nformat = \"xml\"\n",
			want: []string{
				"f.toml:1:1: stat_dir: unknown key",
				"f.toml:3:1: node.max_pods: max pods -1 must not be negative",
				"f.toml:5:10: eviction.hard.bogus: unsupported eviction signal bogus",
				"f.toml:7:1: log.format: invalid log format",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("f.toml", []byte(tc.toml))
			if err == nil {
				t.Fatalf("no problem reported; config %+v", cfg)
			}
			if cfg != nil {
				t.Error("a configuration was returned alongside problems")
			}
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("error %T is not Problems: %v", err, err)
			}
			if len(ps) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(ps), len(tc.want), ps)
			}
			for i, p := range ps {
				if !strings.HasPrefix(p.String(), tc.want[i]) {
					t.Errorf("problem %d:\n got %q\nwant prefix %q", i, p.String(), tc.want[i])
				}
			}
			if strings.Count(err.Error(), "\n") != len(ps)-1 {
				t.Errorf("Problems.Error() is not one problem per line:\n%s", err)
			}
		})
	}
}

// TestImageGCPolicy: the kubelet's image GC policy validation (pkg/kubelet/images/image_gc_manager.go,
// NewImageGCManager): thresholds within 0–100, low not above high.
func TestImageGCPolicy(t *testing.T) {
	tests := []struct {
		name      string
		high, low int
		wantErr   string
	}{
		{name: "high above 100 is refused", high: 101, low: 80, wantErr: "invalid HighThresholdPercent 101, must be in range [0-100]"},
		{name: "low below 0 is refused", high: 85, low: -1, wantErr: "invalid LowThresholdPercent -1, must be in range [0-100]"},
		{name: "low above high is refused", high: 80, low: 90, wantErr: "LowThresholdPercent 90 can not be higher than HighThresholdPercent 80"},
		{name: "low 80 high 85 is valid", high: 85, low: 80},
		{name: "high 100 disables disk-based GC", high: 100, low: 80},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := Default().GC.Images
			g.HighThresholdPercent, g.LowThresholdPercent = tc.high, tc.low
			err := g.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadDropIns(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "config.toml")
	writeFile(t, main, `
[eviction]
pressure_transition_period = "1m"
max_pod_grace_period = "30s"
hard = { "memory.available" = "200Mi", "nodefs.available" = "5%" }
[log]
level = "debug"
`)
	writeFile(t, filepath.Join(dir, "config.d", "20-late.toml"), "[log]\nlevel = \"error\"\n")
	writeFile(t, filepath.Join(dir, "config.d", "10-early.toml"), `
[eviction]
pressure_transition_period = "2m"
hard = { "memory.available" = "300Mi" }
[log]
level = "warn"
`)
	writeFile(t, filepath.Join(dir, "config.d", ".10-early.toml.swp.toml"), "garbage = = =")
	writeFile(t, filepath.Join(dir, "config.d", "30-notes.txt"), "not toml")

	cfg, err := Load(main)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{main, filepath.Join(dir, "config.d", "10-early.toml"), filepath.Join(dir, "config.d", "20-late.toml")}
	if !stdslices.Equal(cfg.Files(), want) {
		t.Errorf("Files() = %q, want %q", cfg.Files(), want)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"later drop-in wins", cfg.Log.Level, "error"},
		{"drop-in overrides main", cfg.Eviction.PressureTransitionPeriod, 2 * time.Minute},
		{"a key no drop-in sets keeps the main file's value", cfg.Eviction.MaxPodGracePeriod, 30 * time.Second},
		{"a map is replaced whole", cfg.Eviction.Hard, map[string]string{"memory.available": "300Mi"}},
		{"defaults stay for what nobody sets", cfg.GC.Images.HighThresholdPercent, 85},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestLoadDropInChangesOnlyItsKey(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "config.toml")
	writeFile(t, main, "")
	writeFile(t, filepath.Join(dir, "config.d", "50-pressure.toml"), "[eviction]\npressure_transition_period = \"90s\"\n")
	cfg, err := Load(main)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Eviction.PressureTransitionPeriod = 90 * time.Second
	sameConfig(t, cfg, want)
}

func TestLoadProblemsAcrossFiles(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "config.toml")
	writeFile(t, main, "[gc.images]\nhigh_threshold_percent = 70\n")
	dropIn := filepath.Join(dir, "config.d", "10-a.toml")
	writeFile(t, dropIn, "\n[gc.images]\nlow_threshold_percent = 75\nbogus = 1\n")
	broken := filepath.Join(dir, "config.d", "20-b.toml")
	writeFile(t, broken, "[log\n")
	_, err := Load(main)
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error = %v, want Problems", err)
	}
	want := []string{
		dropIn + ":3:1: gc.images.low_threshold_percent: LowThresholdPercent 75 can not be higher than HighThresholdPercent 70",
		dropIn + ":4:1: gc.images.bogus: unknown key",
		broken + ":", // the position is the TOML library's
	}
	if len(ps) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(ps), len(want), ps)
	}
	for i := range want {
		if !strings.HasPrefix(ps[i].String(), want[i]) {
			t.Errorf("problem %d:\n got %q\nwant prefix %q", i, ps[i], want[i])
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "config.toml")

	_, err := Load(missing)
	if err == nil || !strings.Contains(err.Error(), missing+": configuration file not found") {
		t.Errorf("explicit missing file: error = %v", err)
	}

	cfg, err := load(missing, false)
	if err != nil {
		t.Fatalf("missing default file: %v", err)
	}
	sameConfig(t, cfg, Default())

	writeFile(t, filepath.Join(dir, "config.d", "10.toml"), "[log]\nformat = \"json\"\n")
	cfg, err = load(missing, false)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Log.Format != "json" {
		t.Errorf("drop-ins without a main file: format = %q, want json", cfg.Log.Format)
	}
}

func TestMergeDefaultsAndTransitionZero(t *testing.T) {
	cfg, err := Parse("f.toml", []byte(`
[eviction]
merge_defaults = true
hard = { "memory.available" = "1Gi", "nodefs.available" = "0%" }
pressure_transition_period = "0s"
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"memory.available": "1Gi", "nodefs.available": "0%", "nodefs.inodesFree": "5%", "imagefs.available": "15%", "imagefs.inodesFree": "5%"}
	if !reflect.DeepEqual(cfg.Eviction.Hard, want) {
		t.Errorf("merged hard = %v, want %v", cfg.Eviction.Hard, want)
	}
	if cfg.Eviction.PressureTransitionPeriod != 5*time.Minute {
		t.Errorf("pressure transition 0s became %v, want 5m (the kubelet's conversion)", cfg.Eviction.PressureTransitionPeriod)
	}
	th, err := cfg.EvictionThresholds()
	if err != nil {
		t.Fatal(err)
	}
	var signals []string
	for _, x := range th {
		signals = append(signals, string(x.Signal))
	}
	stdslices.Sort(signals)
	// nodefs.available "0%" is disabled; allocatableMemory.available is the "pods" copy.
	wantSignals := []string{"allocatableMemory.available", "imagefs.available", "imagefs.inodesFree", "memory.available", "nodefs.inodesFree"}
	if !stdslices.Equal(signals, wantSignals) {
		t.Errorf("signals = %v, want %v", signals, wantSignals)
	}

	cfg, err = Parse("f.toml", []byte("[eviction]\nhard = { \"memory.available\" = \"1Gi\" }\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Eviction.Hard) != 1 {
		t.Errorf("without merge_defaults the user's hard map replaces the defaults; got %v", cfg.Eviction.Hard)
	}
}

func TestAccessors(t *testing.T) {
	cfg, err := Parse("f.toml", []byte(`
[node]
system_reserved = { cpu = "100m", memory = "500Mi", pid = 1000 }
[cgroups]
qos_reserved = { memory = "50%" }
[eviction.priority_classes]
high = 1000
`))
	if err != nil {
		t.Fatal(err)
	}
	if q := cfg.Node.SystemReserved[corev1.ResourceMemory]; q.Value() != 500<<20 {
		t.Errorf("system reserved memory = %s", q.String())
	}
	if q := cfg.Node.SystemReserved[corev1.ResourceCPU]; q.MilliValue() != 100 {
		t.Errorf("system reserved cpu = %s", q.String())
	}
	if q := cfg.Node.SystemReserved["pid"]; q.Value() != 1000 {
		t.Errorf("system reserved pid = %s", q.String())
	}
	if p, ok := cfg.Cgroups.QOSReservedMemoryPercent(); !ok || p != 50 {
		t.Errorf("QOSReservedMemoryPercent = %d, %v", p, ok)
	}
	for name, want := range map[string]int32{"high": 1000, "system-node-critical": 2000001000, "system-cluster-critical": 2000000000} {
		if v, ok := cfg.Eviction.PriorityClassValue(name); !ok || v != want {
			t.Errorf("PriorityClassValue(%q) = %d, %v; want %d", name, v, ok, want)
		}
	}
	if _, ok := cfg.Eviction.PriorityClassValue("nope"); ok {
		t.Error(`PriorityClassValue("nope") found`)
	}
	if !cfg.Node.Enforces(EnforcePods) || cfg.Node.Enforces(EnforceKubeReserved) {
		t.Error("Enforces disagrees with the default [\"pods\"]")
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	custom, err := Parse("f.toml", []byte(`
state_dir = "/srv/slicelet"
[node]
max_pods = 50
system_reserved = { cpu = "100m", memory = "500Mi", ephemeral-storage = "1Gi", pid = 1000 }
kube_reserved = { cpu = "1.5", memory = "1Gi" }
system_reserved_cgroup = "/system.slice"
kube_reserved_cgroup = "/slicelet.slice"
enforce_node_allocatable = ["pods", "system-reserved-compressible", "kube-reserved"]
[cgroups]
root = "/custom"
cpu_cfs_quota_period = "50ms"
pod_pids_limit = 4096
qos_reserved = { memory = "50%" }
memory_reservation_policy = "TieredReservation"
memory_throttling_factor = 0.9
[eviction]
hard = { "memory.available" = "500Mi", "pid.available" = "10%" }
soft = { "memory.available" = "1.5Gi", "nodefs.available" = "20.5%" }
soft_grace_period = { "memory.available" = "1m30s", "nodefs.available" = "2m" }
minimum_reclaim = { "memory.available" = "0", "nodefs.available" = "5%" }
max_pod_grace_period = "30s"
priority_classes = { high = 1000000000, low = -5 }
[gc.images]
maximum_age = "168h"
[runtime]
type = "cri"
endpoint = "unix:///run/containerd/containerd.sock"
sandbox_image = "registry.k8s.io/pause:3.10"
[metrics]
address = ""
[cluster]
enabled = true
kubeconfig = "/etc/slicelet/node.kubeconfig"
node_name = "node-1"
labels = { "example.com/rack" = "r1", zone = "a" }
taints = ["dedicated=slicelet:NoSchedule", "example.com/gpu:NoExecute"]
[log]
format = "journal"
`))
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]*Config{"defaults": Default(), "custom": custom} {
		t.Run(name, func(t *testing.T) {
			var first bytes.Buffer
			if err := Encode(&first, cfg); err != nil {
				t.Fatal(err)
			}
			back, err := Parse("printed.toml", first.Bytes())
			if err != nil {
				t.Fatalf("printed configuration does not load:\n%v\n%s", err, first.String())
			}
			sameConfig(t, back, cfg)
			var second bytes.Buffer
			if err := Encode(&second, back); err != nil {
				t.Fatal(err)
			}
			if first.String() != second.String() {
				t.Errorf("print is not stable:\n%s\n---\n%s", first.String(), second.String())
			}
		})
	}
}

// TestPackagingExample: the shipped example passes validation, is all
// defaults as shipped, and its commented-out settings are exactly Default().
func TestPackagingExample(t *testing.T) {
	path := filepath.Join("..", "packaging", "config.toml")
	cfg, err := Load(path)
	if err != nil {
		t.Fatalf("packaging/config.toml:\n%v", err)
	}
	sameConfig(t, cfg, Default())

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	setting := regexp.MustCompile(`(?m)^#([A-Za-z_"][^ ]* = .*)$`)
	uncommented := setting.ReplaceAll(data, []byte("$1"))
	n := len(setting.FindAll(data, -1))
	cfg, err = Parse("uncommented.toml", uncommented)
	if err != nil {
		t.Fatalf("uncommented example:\n%v\n%s", err, uncommented)
	}
	sameConfig(t, cfg, Default())
	if keys := leafKeys(reflect.TypeFor[Config](), nil); n != len(keys) {
		t.Errorf("example documents %d settings, the configuration has %d keys", n, len(keys))
	}
}

// leafKeys lists every key of the configuration (tables excluded).
func leafKeys(t reflect.Type, path toml.Key) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name := tomlName(f)
		if !f.IsExported() || name == "" {
			continue
		}
		k := append(stdslices.Clone(path), name)
		if f.Type.Kind() == reflect.Struct && f.Type != quantityType {
			out = append(out, leafKeys(f.Type, k)...)
			continue
		}
		out = append(out, k.String())
	}
	return out
}

func TestDocsCoverEveryKey(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "config.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range leafKeys(reflect.TypeFor[Config](), nil) {
		if !bytes.Contains(doc, []byte("`"+k+"`")) {
			t.Errorf("docs/config.md does not document `%s`", k)
		}
	}
}

func TestLocateKeys(t *testing.T) {
	src := `# comment with key = value
top = "a # not a comment"   # trailing
[table]   # header comment
plain = 1
"quoted.key" = 'lit'
dotted.inner = true
multi = """
fake = 1
[fake]
"""
lit = '''x'''
inline = { a = 1, "b.c" = { d = 2 },
  e = [1, { f = 3 }],   # TOML 1.1 multi-line inline table
}
arr = [
  "x", # comment
  "y",
]
[other."sub table"]
k = 2024-01-01 10:00:00
[[aot]]
x = 1
`
	if _, err := toml.Decode(src, new(map[string]any)); err != nil {
		t.Fatalf("test document is not valid TOML: %v", err)
	}
	got := locateKeys([]byte(src))
	want := map[string]position{
		"top":                  {2, 1},
		"table":                {3, 2},
		"table.plain":          {4, 1},
		`table."quoted.key"`:   {5, 1},
		"table.dotted":         {6, 1},
		"table.dotted.inner":   {6, 1},
		"table.multi":          {7, 1},
		"table.lit":            {11, 1},
		"table.inline":         {12, 1},
		"table.inline.a":       {12, 12},
		`table.inline."b.c"`:   {12, 19},
		`table.inline."b.c".d`: {12, 29},
		"table.inline.e":       {13, 3},
		"table.arr":            {15, 1},
		"other":                {19, 2},
		`other."sub table"`:    {19, 2},
		`other."sub table".k`:  {20, 1},
		"aot":                  {21, 3},
		"aot.x":                {22, 1},
	}
	for k, p := range want {
		if got[k] != p {
			t.Errorf("%s at %v, want %v", k, got[k], p)
		}
	}
	for _, fake := range []string{"fake", "table.fake", "table.inline.e.f", "table.inline.f"} {
		if _, ok := got[fake]; ok {
			t.Errorf("%s recorded, but it is not a key", fake)
		}
	}
}

func TestProblemString(t *testing.T) {
	tests := []struct {
		name string
		p    Problem
		want string
	}{
		{"full", Problem{File: "a.toml", Line: 3, Col: 7, Key: "log.level", Msg: "bad"}, "a.toml:3:7: log.level: bad"},
		{"no column", Problem{File: "a.toml", Line: 3, Key: "k", Msg: "bad"}, "a.toml:3: k: bad"},
		{"file only", Problem{File: "a.toml", Msg: "configuration file not found"}, "a.toml: configuration file not found"},
		{"from a default", Problem{Key: "node.enforce_node_allocatable", Msg: "bad"}, "node.enforce_node_allocatable: bad"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.String(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestValidateProgrammatic(t *testing.T) {
	c := Default()
	c.Node.SystemReserved = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("-1Gi")}
	c.Eviction.Soft = map[string]string{string(eviction.SignalPIDAvailable): "10%"}
	err := c.Validate()
	var ps Problems
	if !errors.As(err, &ps) || len(ps) != 2 {
		t.Fatalf("Validate() = %v, want 2 problems", err)
	}
	if ps[0].File != "" || ps[0].Key != "node.system_reserved.memory" {
		t.Errorf("problem 0 = %+v", ps[0])
	}
}

func TestMetricsAddress(t *testing.T) {
	for _, tc := range []struct {
		name, addr string
		ok         bool
	}{
		{"loopback", "127.0.0.1:10255", true},
		{"off", "", true},
		{"unix socket", "unix:/run/slicelet/metrics.sock", true},
		{"relative unix socket", "unix:metrics.sock", false},
		{"no port", "127.0.0.1", false},
		{"bad port", "127.0.0.1:99999", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("m.toml", []byte("[metrics]\naddress = \""+tc.addr+"\"\n"))
			if (err == nil) != tc.ok {
				t.Errorf("address %q: err = %v, want ok=%v", tc.addr, err, tc.ok)
			}
		})
	}
}

func TestSlicesConfigHardEvictionReservation(t *testing.T) {
	capacity := slices.Capacity{CPU: 4000, Memory: 16 << 30, EphemeralStorage: 100 << 30}
	tests := []struct {
		name     string
		toml     string
		wantMem  string
		wantDisk string
	}{
		// 10% and 5% of 100Gi through the kubelet's float32 percentage: not exactly 10Gi and 5Gi.
		{"defaults", "", "100Mi", "10737418400"},
		{"hard only", "[eviction]\nhard = { \"memory.available\" = \"1Gi\" }\n", "1Gi", ""},
		{"a soft threshold with a 0s grace reserves nothing", "[eviction]\nhard = { \"nodefs.available\" = \"5%\" }\nsoft = { \"memory.available\" = \"2Gi\" }\nsoft_grace_period = { \"memory.available\" = \"0s\" }\n", "", "5368709200"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("f.toml", []byte(tt.toml))
			if err != nil {
				t.Fatal(err)
			}
			mcfg, err := cfg.SlicesConfig(capacity, false)
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range map[corev1.ResourceName]string{corev1.ResourceMemory: tt.wantMem, corev1.ResourceEphemeralStorage: tt.wantDisk} {
				got, ok := mcfg.Node.HardEviction[name]
				switch {
				case want == "" && ok:
					t.Errorf("%s reserved %s, want nothing", name, got.String())
				case want != "" && (!ok || got.Cmp(resource.MustParse(want)) != 0):
					t.Errorf("%s reserved %v, want %s", name, mcfg.Node.HardEviction, want)
				}
			}
		})
	}
}

func TestParseTaint(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    corev1.Taint
		wantErr string
	}{
		{name: "key value effect", in: "dedicated=slicelet:NoSchedule", want: corev1.Taint{Key: "dedicated", Value: "slicelet", Effect: corev1.TaintEffectNoSchedule}},
		{name: "key effect", in: "example.com/gpu:NoExecute", want: corev1.Taint{Key: "example.com/gpu", Effect: corev1.TaintEffectNoExecute}},
		{name: "empty value", in: "k=:PreferNoSchedule", want: corev1.Taint{Key: "k", Effect: corev1.TaintEffectPreferNoSchedule}},
		{name: "no effect", in: "k=v", wantErr: "want key=value:Effect"},
		{name: "empty effect", in: "k=v:", wantErr: "want key=value:Effect"},
		{name: "bad key", in: "-k:NoSchedule", wantErr: `key "-k"`},
		{name: "bad value", in: "k=a b:NoSchedule", wantErr: `value "a b"`},
		{name: "bad effect", in: "k:Never", wantErr: `effect "Never"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTaint(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
