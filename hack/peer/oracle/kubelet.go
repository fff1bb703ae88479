package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
	"k8s.io/kubernetes/pkg/capabilities"
	"k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/config"
	"k8s.io/kubernetes/pkg/kubelet/kuberuntime"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/kubernetes/pkg/kubelet/network/dns"
	kubeletqos "k8s.io/kubernetes/pkg/kubelet/qos"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
	schedulerframework "k8s.io/kubernetes/pkg/scheduler/framework"
)

// nodeName is the node the kubelet's file source runs on: static pods are renamed
// "<name>-<node>".
const nodeName = "oracle"

func init() {
	// The kubelet does this at start; without it validation refuses privileged containers.
	capabilities.Initialize(capabilities.Capabilities{AllowPrivileged: true})
}

// kubeletDecoded is the kubelet's verdict on one manifest file.
type kubeletDecoded struct {
	pod *v1.Pod
	err string
}

// errorSink is a logr sink that keeps the file source's per-file errors ("Could not process
// manifest file", path=...) and drops everything else.
type errorSink struct {
	mu   sync.Mutex
	errs map[string]string
}

func (s *errorSink) Init(logr.RuntimeInfo)          {}
func (s *errorSink) Enabled(int) bool               { return false }
func (s *errorSink) Info(int, string, ...any)       {}
func (s *errorSink) WithValues(...any) logr.LogSink { return s }
func (s *errorSink) WithName(string) logr.LogSink   { return s }
func (s *errorSink) Error(err error, msg string, kv ...any) {
	if msg != "Could not process manifest file" || err == nil {
		return
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == "path" {
			s.mu.Lock()
			s.errs[fmt.Sprint(kv[i+1])] = err.Error()
			s.mu.Unlock()
		}
	}
}

// kubeletDecode runs the kubelet's static-pod path over a batch of manifests, the files of
// dir named by keys: one file source (pkg/kubelet/config NewSourceFile) reads the directory into
// a PodConfig, and the first update is the set of pods it accepted. keys maps each file name to
// the namespace/name its pod has, so accepted pods (renamed "<name>-<node>") are matched back;
// keys must be unique within a batch (the source keys its store by namespace/name). A file
// whose pod does not come back was refused; the reason is the error the source logged.
func kubeletDecode(dir string, keys map[string]string) (map[string]kubeletDecoded, error) {
	return kubeletDecodeOn(dir, nodeName, keys)
}

// kubeletDecodeOn is kubeletDecode on the node named node.
func kubeletDecodeOn(dir, node string, keys map[string]string) (map[string]kubeletDecoded, error) {
	sink := &errorSink{errs: map[string]string{}}
	logger := logr.New(sink)
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), logger))
	defer cancel()
	pc := kubeletconfig.NewPodConfig(&record.FakeRecorder{}, nil)
	// The period only matters after the first listing, which happens at once.
	kubeletconfig.NewSourceFile(logger, dir, types.NodeName(node), time.Hour, pc.Channel(ctx, kubetypes.FileSource))
	var update kubetypes.PodUpdate
	select {
	case update = <-pc.Updates():
	case <-time.After(10 * time.Minute):
		return nil, fmt.Errorf("kubelet file source %s: no update", dir)
	}
	byKey := map[string]*v1.Pod{}
	for _, p := range update.Pods {
		byKey[p.Namespace+"/"+strings.TrimSuffix(p.Name, "-"+node)] = p
	}
	out := map[string]kubeletDecoded{}
	for name := range keys {
		if p, ok := byKey[keys[name]]; ok && keys[name] != "" {
			out[name] = kubeletDecoded{pod: p}
			continue
		}
		msg, ok := sink.errs[filepath.Join(dir, name)]
		if !ok {
			msg = "not in the file source's update"
		}
		out[name] = kubeletDecoded{err: msg}
	}
	return out, nil
}

// podConfigs are the ResourceConfigForPod settings compared: the defaults (cgroup v1, or v2
// with MemoryQoS off), MemoryQoS on a v2 host with each reservation policy, and cpuCFSQuota off.
var podConfigs = []struct {
	name             string
	enforceCPULimits bool
	enforceMemoryQoS bool
	policy           string
}{
	{"default", true, false, "None"},
	{"memqos-none", true, true, "None"},
	{"memqos-tiered", true, true, "TieredReservation"},
	{"no-cfs-quota", false, false, "None"},
}

// kubeletFacts are the kubelet's decisions on an accepted pod, as facts.
func kubeletFacts(pod *v1.Pod, node nodeSetup) facts {
	f := facts{}
	f.set("qos", string(qos.GetPodQOS(pod)))
	for _, c := range podConfigs {
		rc := cm.ResourceConfigForPod(pod, c.enforceCPULimits, uint64(cm.QuotaPeriod), c.enforceMemoryQoS, config.MemoryReservationPolicy(c.policy))
		prefix := "pod[" + c.name + "]."
		f.setU(prefix+"cpu_shares", rc.CPUShares)
		f.setI(prefix+"cpu_quota", rc.CPUQuota)
		f.setU(prefix+"cpu_period", rc.CPUPeriod)
		f.setI(prefix+"memory", rc.Memory)
		f.set(prefix+"hugepages", hugeString(rc.HugePageLimit))
		f.set(prefix+"unified", mapString(rc.Unified))
	}
	forEachContainer(pod, func(kind string, c *v1.Container) {
		prefix := kind + "[" + c.Name + "]."
		f.set(prefix+"oom_score_adj", strconv.Itoa(kubeletqos.GetContainerOOMScoreAdjust(pod, c, node.memoryCapacity)))
		limits := map[int64]int64{}
		for _, l := range kuberuntime.GetHugepageLimitsFromResources(context.Background(), pod, c.Resources, nil) {
			size, err := parseHugetlbSize(l.PageSize)
			if err != nil {
				f.set(prefix+"hugepages", "bad page size "+l.PageSize)
				return
			}
			limits[size] = int64(l.Limit)
		}
		f.set(prefix+"hugepages", hugeString(limits))
	})
	res := lifecycle.NewPredicateAdmitHandler(
		func(context.Context, bool) (*v1.Node, error) { return node.node(), nil },
		lifecycle.NewAdmissionFailureHandlerStub(),
		func(*schedulerframework.NodeInfo, *lifecycle.PodAdmitAttributes) error { return nil },
	).Admit(context.Background(), &lifecycle.PodAdmitAttributes{Pod: pod, Operation: lifecycle.AddOperation})
	f.set("admit", admitString(res.Admit, res.Reason))
	if path, err := resolvConfFile(); err != nil {
		f.set("dns.error", err.Error())
	} else if cfg, err := dns.NewConfigurer(&record.FakeRecorder{}, &v1.ObjectReference{Kind: "Node", Name: nodeName, UID: nodeName}, nil,
		[]net.IP{net.ParseIP(oracleClusterDNS)}, oracleClusterDomain, path).GetPodDNS(context.Background(), pod); err != nil {
		f.set("dns.error", err.Error())
	} else {
		f.setDNS(cfg.Servers, cfg.Searches, cfg.Options)
	}
	return f
}

// resolvConfFile is oracleResolvConf in a file, written once.
var resolvConfFile = sync.OnceValues(func() (string, error) {
	f, err := os.CreateTemp("", "oracle-resolv-*.conf")
	if err != nil {
		return "", err
	}
	defer f.Close()
	_, err = f.WriteString(oracleResolvConf)
	return f.Name(), err
})

// parseHugetlbSize parses the hugetlb controller's page size names ("2MB", "1GB", "64KB").
func parseHugetlbSize(s string) (int64, error) {
	for i, unit := range []string{"KB", "MB", "GB", "TB", "PB"} {
		if v, ok := strings.CutSuffix(s, unit); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, err
			}
			return n << (10 * (i + 1)), nil
		}
	}
	return 0, fmt.Errorf("page size %q: no unit", s)
}

func admitString(ok bool, reason string) string {
	if ok {
		return "admit"
	}
	return "reject " + reason
}

func hugeString(m map[int64]int64) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d=%d", k, m[k]))
	}
	return strings.Join(parts, ",")
}

func mapString(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}
