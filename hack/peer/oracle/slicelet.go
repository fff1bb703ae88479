package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/pods/admission"
	"github.com/slicelet/slicelet/internal/pods/devices"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/slices"
)

// slicelet's side validates static pods on the kubelet side's node (nodeName), as the daemon
// does on its own: a pod's name is judged suffixed with it.
func init() { manifest.SetNodeName(nodeName) }

// sliceletDecode is slicelet's manifest path (internal/manifest.Read, as the manifest directory
// reads a file): bounds, strict decode, the API's defaults, namespace, UID, the kubelet's
// validation and slicelet's own; a file without a pod (ConfigMaps and Secrets only) is refused
// here, as the kubelet's file source finds no pod in it. path is the file's path, which its
// pods' UIDs are derived from (the kubelet's file source names it so too).
func sliceletDecode(name, path string, data []byte) ([]*v1.Pod, error) {
	m, err := manifest.Read(name, path, data)
	if err != nil {
		return nil, err
	}
	if len(m.Pods) == 0 {
		return nil, fmt.Errorf("%s: no pod in the file", name)
	}
	return m.Pods, nil
}

// sliceletOptions are the slices.Options matching podConfigs.
func sliceletOptions(name string) slices.Options {
	o := slices.DefaultOptions()
	switch name {
	case "memqos-none":
		o.EnforceMemoryQoS = true
	case "memqos-tiered":
		o.EnforceMemoryQoS, o.MemoryReservationPolicy = true, slices.MemoryReservationTiered
	case "no-cfs-quota":
		o.EnforceCPULimits = false
	}
	return o
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// onlyReached drops slicelet's container runtime facts ("…].cri_…") for containers the
// kubelet's runtime manager did not create within runtimeFacts' rounds.
func onlyReached(s, k facts) {
	for key := range s {
		if strings.Contains(key, "].cri_") {
			if _, ok := k[key]; !ok {
				delete(s, key)
			}
		}
	}
}

// sliceletFacts are slicelet's decisions on an accepted pod, as facts.
func sliceletFacts(pod *v1.Pod, node nodeSetup) facts {
	f := facts{}
	f.set("qos", string(slices.QOSClass(pod)))
	for _, c := range podConfigs {
		rc := slices.PodResources(pod, sliceletOptions(c.name))
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
		f.set(prefix+"oom_score_adj", strconv.Itoa(slices.ContainerOOMScoreAdj(pod, c, node.memoryCapacity)))
		f.set(prefix+"hugepages", hugeString(lifecycle.ContainerHugePageLimits(pod, c, node.hostPageSizes)))
		// What the worker sends the runtime (CRI: 0 is unset), with the runtime manager's
		// settings of runtimeFacts: CPU limits enforced, 100ms period, no memory QoS (this
		// machine kind is cgroup v1).
		rc := lifecycle.ContainerResources(pod, c, slices.DefaultOptions())
		f.set(prefix+"cri_cpu_shares", strconv.FormatUint(deref(rc.CPUShares), 10))
		f.set(prefix+"cri_cpu_quota", strconv.FormatInt(deref(rc.CPUQuota), 10))
		f.set(prefix+"cri_cpu_period", strconv.FormatUint(deref(rc.CPUPeriod), 10))
		f.set(prefix+"cri_memory", strconv.FormatInt(deref(rc.Memory), 10))
		f.set(prefix+"cri_oom_score_adj", strconv.Itoa(slices.ContainerOOMScoreAdj(pod, c, node.memoryCapacity)))
		// The labels and annotations of its first run, which the kubelet reads to adopt it; the
		// hooks are left out as runtimeFacts leaves them out.
		hc := c.DeepCopy()
		if hc.Lifecycle != nil {
			hc.Lifecycle.PostStart, hc.Lifecycle.PreStop = nil, nil
		}
		f.set(prefix+"cri_annotations", mapString(worker.ContainerAnnotations(pod, hc, 0)))
		f.set(prefix+"cri_labels", mapString(comparableLabels(worker.ContainerLabels(pod, hc))))
	})
	d := admission.Admit(pod, admission.NodeState{Allocatable: node.allocatable(), OS: "linux"})
	if d.Admit {
		// Then the device manager's allocation, as the daemon runs it for a static pod on a
		// node without device plugins (the node here has none).
		ok, reason, _ := devices.New(devices.Options{Dir: os.TempDir()}).Admit(context.Background(), pod, true, nil, false)
		d.Admit, d.Reason = ok, reason
	}
	f.set("admit", admitString(d.Admit, d.Reason))
	if host, err := lifecycle.ParseResolvConf([]byte(oracleResolvConf)); err != nil {
		f.set("dns.error", err.Error())
	} else {
		cfg, _ := lifecycle.PodDNS(pod, lifecycle.NodeDNS{Servers: []string{oracleClusterDNS}, Domain: oracleClusterDomain, ResolvConf: "/etc/resolv.conf"}, host, nil)
		f.setDNS(cfg.Servers, cfg.Searches, cfg.Options)
	}
	return f
}
