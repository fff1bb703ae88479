package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"

	"github.com/slicelet/slicelet/hack/peer/peerrun"
)

// difference is one value on which the agents disagree.
type difference struct {
	version, origin, pod, level, field string
	slicelet, kubelet                  string
	// deliberate is why slicelet differs on purpose (docs/peer.md); empty for a real difference.
	deliberate string
	// unsettled says why what the agents left could not be compared: a pod (or, for the
	// node's levels, a pod of the batch) had not settled under an agent when its wait limit
	// passed. Not a difference: the run does not say whether there is one.
	unsettled string
}

func (d difference) line() string {
	s := fmt.Sprintf("%s %s %s %s %s: slicelet=%s kubelet=%s", d.version, d.origin, d.pod, d.level, d.field, d.slicelet, d.kubelet)
	if d.unsettled != "" {
		return "not settled: " + s + " (" + d.unsettled + ")"
	}
	if d.deliberate != "" {
		return "deliberate: " + s + " (" + d.deliberate + ")"
	}
	return s
}

const absent = "(absent)"

// compareValues lists the files whose values differ between s and k.
func compareValues(base difference, s, k peerrun.Values) []difference {
	var out []difference
	keys := slices.Sorted(maps.Keys(s))
	for f := range k {
		if _, ok := s[f]; !ok {
			keys = append(keys, f)
		}
	}
	slices.Sort(keys)
	for _, f := range keys {
		sv, sok := s[f]
		kv, kok := k[f]
		if !sok {
			sv = absent
		}
		if !kok {
			kv = absent
		}
		if sv != kv {
			d := base
			d.field, d.slicelet, d.kubelet = f, sv, kv
			out = append(out, d)
		}
	}
	return out
}

// comparePod lists the differences of one pod both agents made a sandbox for: whether the
// sandbox is still ready (a finished pod's is stopped) and the pod slice still there (a
// finished pod's is removed); the QoS class and values of the pod slice both have; the
// containers of the sandboxes both have ready.
func comparePod(base difference, s, k peerrun.Pod) []difference {
	var out []difference
	pb := base
	pb.level = "pod"
	if s.Ready != k.Ready {
		d := pb
		d.field, d.slicelet, d.kubelet = "sandbox ready", yesNo(s.Ready), yesNo(k.Ready)
		out = append(out, d)
	}
	if sc, kc := s.Cgroup != "", k.Cgroup != ""; sc != kc {
		d := pb
		d.field, d.slicelet, d.kubelet = "pod slice", yesNo(sc), yesNo(kc)
		return append(out, d)
	}
	if s.QOS != k.QOS {
		d := pb
		d.field, d.slicelet, d.kubelet = "qos", s.QOS, k.QOS
		out = append(out, d)
	}
	out = append(out, compareValues(pb, s.Values, k.Values)...)
	if !s.Ready || !k.Ready {
		return out
	}
	names := slices.Sorted(maps.Keys(s.Containers))
	for n := range k.Containers {
		if _, ok := s.Containers[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range slices.Compact(names) {
		sc, sok := s.Containers[n]
		kc, kok := k.Containers[n]
		cb := base
		cb.level = "container " + n
		switch {
		case sok != kok:
			d := cb
			d.field, d.slicelet, d.kubelet = "created", yesNo(sok), yesNo(kok)
			out = append(out, d)
		case sc.Values != nil && kc.Values != nil:
			out = append(out, compareValues(cb, sc.Values, kc.Values)...)
			if sc.OOMScoreAdj != kc.OOMScoreAdj {
				d := cb
				d.field, d.slicelet, d.kubelet = "oom_score_adj", sc.OOMScoreAdj, kc.OOMScoreAdj
				out = append(out, d)
			}
		}
	}
	return out
}

// admitted is whether the agent admitted a pod, with its reason when it refused it.
func admitted(ok bool, st peerrun.PodStatus) string {
	switch {
	case ok:
		return "yes"
	case st.Phase == "":
		return "no"
	}
	return fmt.Sprintf("no (%s %s: %s)", st.Phase, st.Reason, oneLine(st.Message))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// compareRun lists every difference of one cgroup version's batches; entries give the
// manifests' origins and pods (for the deliberate divergences).
func compareRun(version string, entries []entry, results []batchResult) []difference {
	byKey := map[string]entry{}
	for _, e := range entries {
		byKey[e.Key.String()] = e
	}
	var out []difference
	for i, r := range results {
		s, k := r.Snapshot[peerrun.Slicelet], r.Snapshot[peerrun.Kubelet]
		batch := fmt.Sprintf("batch-%d", cmp.Or(r.Batch, i+1))
		// unsettledOf says which agent had not settled key ("" when both had).
		unsettledOf := func(key string) string {
			var out []string
			for _, kind := range []peerrun.Kind{peerrun.Slicelet, peerrun.Kubelet} {
				if why, ok := r.Unsettled[kind][key]; ok {
					out = append(out, fmt.Sprintf("%s: %s", kind, why))
				}
			}
			return strings.Join(out, "; ")
		}
		// The node's levels sum the pods': with a pod not settled they are not comparable.
		nodeUnsettled := ""
		for _, kind := range []peerrun.Kind{peerrun.Slicelet, peerrun.Kubelet} {
			if n := len(r.Unsettled[kind]); n > 0 {
				nodeUnsettled = strings.TrimPrefix(nodeUnsettled+fmt.Sprintf("; %d pods or levels not settled under %s", n, kind), "; ")
			}
		}
		for _, kind := range []peerrun.Kind{peerrun.Slicelet, peerrun.Kubelet} {
			if msg := r.Errors[kind]; msg != "" {
				out = append(out, difference{version: version, origin: batch, pod: "-", level: "run", field: string(kind), slicelet: "error", kubelet: fmt.Sprintf("%q", oneLine(msg))})
			}
		}
		// The reference failed to apply values: what it left there is not its rules.
		for _, msg := range r.KubeletCgroupErrors {
			out = append(out, difference{version: version, origin: batch, pod: "-", level: "run", field: "kubelet cgroup manager", slicelet: "-", kubelet: fmt.Sprintf("%q", oneLine(msg))})
		}
		levels := slices.Sorted(maps.Keys(s.Node))
		if r.Misfits {
			levels = nil
		}
		for l := range k.Node {
			if _, ok := s.Node[l]; !ok && !r.Misfits {
				levels = append(levels, l)
			}
		}
		slices.Sort(levels)
		for _, l := range slices.Compact(levels) {
			sv, sok := s.Node[l]
			kv, kok := k.Node[l]
			base := difference{version: version, origin: batch, pod: "-", level: l, unsettled: nodeUnsettled}
			if sok != kok {
				d := base
				d.field, d.slicelet, d.kubelet = "created", yesNo(sok), yesNo(kok)
				out = append(out, d)
				continue
			}
			out = append(out, compareValues(base, sv, kv)...)
		}
		for _, key := range r.Keys {
			e := byKey[key.String()]
			base := difference{version: version, origin: e.Origin, pod: key.String()}
			sp, sok := s.Pods[key.String()]
			kp, kok := k.Pods[key.String()]
			sst, sknown := s.Statuses[key.String()]
			kst, kknown := k.Statuses[key.String()]
			// Admitted: the agent lists the pod and did not fail it (a pod refused while its
			// manifest is decoded is not listed); a pod with a sandbox was admitted whatever
			// the last status poll saw.
			sadm := sok || sknown && sst.Phase != v1.PodFailed
			kadm := kok || kknown && kst.Phase != v1.PodFailed
			var diffs []difference
			switch {
			case sadm != kadm:
				d := base
				d.level, d.field = "pod", "admitted"
				d.slicelet, d.kubelet = admitted(sadm, sst), admitted(kadm, kst)
				diffs = append(diffs, d)
			case sok != kok:
				d := base
				d.level, d.field, d.slicelet, d.kubelet = "pod", "sandbox", yesNo(sok), yesNo(kok)
				diffs = append(diffs, d)
			case sok:
				diffs = comparePod(base, sp, kp)
			}
			if why := unsettledOf(key.String()); why != "" {
				// One line for the pod, whether or not its readings differ.
				d := base
				d.level, d.field, d.slicelet, d.kubelet, d.unsettled = "pod", "settled", yesNo(r.Unsettled[peerrun.Slicelet][key.String()] == ""), yesNo(r.Unsettled[peerrun.Kubelet][key.String()] == ""), why
				out = append(out, d)
				continue
			}
			if len(diffs) > 0 && sok && kok && e.Pod != nil {
				if why := caughtApart(e.Pod.Spec.RestartPolicy, sst, kst); why != "" {
					d := base
					d.level, d.field, d.slicelet, d.kubelet, d.unsettled = "pod", "phase", string(sst.Phase), string(kst.Phase), why
					out = append(out, d)
					continue
				}
			}
			for _, d := range diffs {
				d.deliberate = deliberate(d, e)
				out = append(out, d)
			}
		}
	}
	return out
}

// caughtApart says why two settled statuses of a pod that runs to completion (restartPolicy
// Never or OnFailure) are one run read at two points, not two behaviours: under one agent its
// containers still ran when the batch was read, under the other it had finished (a `sleep 30`
// outlives a fast batch and not a slow one). "" otherwise: a pod finished under one agent
// whose containers no longer run under the other is compared (its sandbox must be stopped).
func caughtApart(policy v1.RestartPolicy, s, k peerrun.PodStatus) string {
	if policy != v1.RestartPolicyNever && policy != v1.RestartPolicyOnFailure {
		return ""
	}
	still := func(st peerrun.PodStatus) bool { return st.Phase == v1.PodRunning && len(st.Running) > 0 }
	switch {
	case still(s) && k.Terminal():
		return fmt.Sprintf("runs to completion: %s under the kubelet, its containers %v still running under slicelet when read", k.Phase, s.Running)
	case still(k) && s.Terminal():
		return fmt.Sprintf("runs to completion: %s under slicelet, its containers %v still running under the kubelet when read", s.Phase, k.Running)
	}
	return ""
}

func oneLine(s string) string {
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	b := []byte(s)
	for i, c := range b {
		if c == '\n' {
			b[i] = ' '
		}
	}
	return string(b)
}

// deliberate is why d is a difference slicelet makes on purpose, or "".
func deliberate(d difference, e entry) string {
	for _, dd := range deliberateDivergences {
		if dd.match(d, e) {
			return dd.why
		}
	}
	return ""
}

// deliberateDivergences are the differences slicelet makes on purpose (docs/peer.md), the
// same as the code-level oracle's (hack/peer/oracle), each with the rule that recognises it.
var deliberateDivergences = []struct {
	why   string
	match func(d difference, e entry) bool
}{
	{
		"a static pod asking for an extended resource no device plugin of the node provides is refused at admission (UnexpectedAdmissionError, \"cannot allocate unregistered device\"), not run without the device (the kubelet admits a pod short of an extended resource its node never had)",
		func(d difference, e entry) bool {
			return d.field == "admitted" && refused(d.slicelet) && d.kubelet == "yes" && e.Pod != nil && hasExtended(e.Pod)
		},
	},
	{
		"ConfigMaps and Secrets are served to pods from slicelet's own sources (the manifest directory and the API): the kubelet refuses static pods that reference them",
		func(d difference, e entry) bool {
			return d.field == "admitted" && d.slicelet == "yes" && refused(d.kubelet) && e.Pod != nil && referencesObjects(e.Pod)
		},
	},
	{
		"a field slicelet does not implement yet is refused with its path (docs/pod-fields.md), never accepted and ignored: the kubelet implements it",
		func(d difference, e entry) bool {
			return d.field == "admitted" && refused(d.slicelet) && d.kubelet == "yes" && e.NotYet != ""
		},
	},
	{
		"a volume type slicelet has no plugin for (cinder, iscsi, nfs, ...; docs/pod-fields.md) is refused with its path at admission: the kubelet admits the pod and keeps it Pending, its pod cgroup counted in the QoS levels, until a mount its node cannot do (no CSI driver, no storage) succeeds",
		func(d difference, e entry) bool {
			return d.field == "admitted" && refused(d.slicelet) && d.kubelet == "yes" && e.NoPlugin != ""
		},
	},
	{
		"a pod the kubelet accepts and then mishandles is refused with its path: one its pod worker never starts (metadata.deletionTimestamp, status.phase Succeeded or Failed; pkg/kubelet/pod_workers.go UpdatePod), or one whose status.qosClass is outside its three values (the kubelet takes it as the class and runs the pod outside every QoS cgroup)",
		func(d difference, e entry) bool {
			return d.field == "admitted" && refused(d.slicelet) && e.Refused != ""
		},
	},
}

// refused reports whether an admitted value (admitted) says no, with or without the
// agent's reason.
func refused(admittedValue string) bool {
	return admittedValue == "no" || strings.HasPrefix(admittedValue, "no (")
}

// hasExtended reports whether a container of pod names an extended resource.
func hasExtended(pod *v1.Pod) bool {
	for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, rl := range []v1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
			for name := range rl {
				if v1helper.IsExtendedResourceName(name) {
					return true
				}
			}
		}
	}
	return false
}

// referencesObjects reports whether pod reads a ConfigMap or Secret (volumes, env, envFrom).
func referencesObjects(pod *v1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil || v.Secret != nil || v.Projected != nil {
			return true
		}
	}
	for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if len(c.EnvFrom) > 0 {
			return true
		}
		for _, env := range c.Env {
			if env.ValueFrom != nil && (env.ValueFrom.ConfigMapKeyRef != nil || env.ValueFrom.SecretKeyRef != nil) {
				return true
			}
		}
	}
	return false
}

// kubeletCgroupErrors returns the error lines of the kubelet's cgroup manager in its journal
// (klog's "E" lines from pkg/kubelet/cm/cgroup_manager_linux.go: a failed Create, Update or
// Set of a pod or QoS cgroup, which the kubelet logs and does not retry until the pod's next
// sync, if ever).
func kubeletCgroupErrors(journal string) []string {
	var out []string
	for _, line := range strings.Split(journal, "\n") {
		if strings.HasPrefix(line, "E") && strings.Contains(line, " cgroup_manager_linux.go:") {
			out = append(out, line)
		}
	}
	return out
}
