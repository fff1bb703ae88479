package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/pods/admission"
	"github.com/slicelet/slicelet/internal/pods/podfields"
	"github.com/slicelet/slicelet/internal/pods/verdict"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/slices/hierarchy"
	"github.com/slicelet/slicelet/units"
)

// explainOptions are the flags shared by the explain subcommands.
type explainOptions struct {
	configPath string
	cgroupMode string
	capacity   string
	output     string
	files      []string
	recursive  bool
	// stdin is what -f - reads.
	stdin   io.Reader
	online  bool
	offline bool
	// set holds the names of the flags given.
	set map[string]bool
}

// explainCmd is explain pod|node; o has the flags, o.set the names of those given.
func (c *cli) explainCmd(what string, pos []string, o explainOptions) error {
	o.configPath, o.output, o.stdin = c.global.configPath, c.global.output, c.stdin
	if len(pos) > 0 {
		return usageErr("explain %s: unexpected argument %q", what, pos[0])
	}
	if o.output != "" && o.output != "json" {
		return usageErr("explain %s: -o %q: only json is supported", what, o.output)
	}
	if o.online && o.offline {
		return usageErr("explain %s: --online and --offline exclude each other", what)
	}
	if o.online {
		for _, name := range []string{"capacity", "cgroup-mode"} {
			if o.set[name] {
				return usageErr("explain %s: --%s is for offline explanations; online, slicelet uses its own", what, name)
			}
		}
		if what == "node" && len(o.files) > 0 {
			return usageErr("explain node: -f is for offline explanations; online, slicelet uses its own pods")
		}
	}
	switch what {
	case "pod":
		if o.online {
			return c.explainPodOnline(o)
		}
		return explainPod(o, c.stdout)
	case "node":
		if o.online {
			return c.explainNodeOnline(o, false)
		}
		offlineOnly := o.offline || len(o.files) > 0 || o.set["config"] || o.set["capacity"] || o.set["cgroup-mode"]
		if !offlineOnly {
			return c.explainNodeOnline(o, true)
		}
		return explainNode(o, c.stdout)
	default:
		return usageErr("explain: unknown subject %q (pod or node)", what)
	}
}

// explainPodOnline sends every document of the -f files to the daemon.
func (c *cli) explainPodOnline(o explainOptions) error {
	if len(o.files) == 0 {
		return usageErr("explain pod: -f POD.yaml is required")
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	docs, err := readDocuments(c.stdin, o.files, o.recursive)
	if err != nil {
		return err
	}
	var out []slices.PodExplanation
	var podsOut []*v1.Pod
	for _, d := range docs {
		x, err := cl.ExplainPod(c.ctx, d.data)
		if err != nil {
			return fmt.Errorf("%s: %w", d.where, err)
		}
		out = append(out, x)
		pod := d.meta()
		if _, uid, ok := slices.ParsePodSliceName(x.Slice); ok {
			pod.UID = types.UID(uid) // the daemon's, which is the one that counts
		}
		podsOut = append(podsOut, pod)
	}
	if o.output == "json" {
		if len(out) == 1 {
			return writeJSON(c.stdout, out[0])
		}
		return writeJSON(c.stdout, out)
	}
	for i, x := range out {
		if i > 0 {
			fmt.Fprintln(c.stdout)
		}
		printPod(c.stdout, podsOut[i], x, modeOfProperties(x.SystemdProperties))
	}
	return nil
}

// explainNodeOnline asks the daemon; with fallback, a daemon that is down means explaining
// offline instead (with a note on stderr).
func (c *cli) explainNodeOnline(o explainOptions, fallback bool) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	x, err := cl.ExplainNode(c.ctx)
	if err != nil {
		if fallback && errors.Is(err, api.ErrDaemonDown) {
			fmt.Fprintf(c.stderr, "slicectl: slicelet is not running (nothing answers at %s); explaining offline from %s and this machine\n", cl.Socket(), o.configPath)
			return explainNode(o, c.stdout)
		}
		return err
	}
	if o.output == "json" {
		return writeJSON(c.stdout, x)
	}
	node, err := cl.Node(c.ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "Explained by slicelet at %s.\n", cl.Socket())
	printNode(c.stdout, x, modeOfProperties(x.Kubepods.SystemdProperties), node.Pods.Active)
	return nil
}

// modeOfProperties tells the cgroup mode an explanation was made for from its slice properties:
// BaseSliceProperties always sets IOAccounting on cgroup v2 and BlockIOAccounting on v1.
func modeOfProperties(props map[string]any) units.Mode {
	if _, ok := props["IOAccounting"]; ok {
		return units.ModeUnified
	}
	return units.ModeHybrid
}

// env is what every explanation needs: configuration, capacity and cgroup mode.
type env struct {
	cfg      *config.Config
	capacity slices.Capacity
	// extended are the extended resources --capacity gives (nvidia.com/gpu=8): on a node they
	// come from device plugins, all allocatable.
	extended v1.ResourceList
	mode     units.Mode
	mcfg     hierarchy.Config
}

func loadEnv(o explainOptions) (env, error) {
	var e env
	path := o.configPath
	if !o.set["config"] {
		path = "" // the default file, which may be missing (then the defaults apply)
	}
	cfg, err := config.Load(path)
	if err != nil {
		return e, err
	}
	e.cfg = cfg
	switch o.cgroupMode {
	case "v1", "hybrid":
		e.mode = units.ModeHybrid
	case "v2":
		e.mode = units.ModeUnified
	case "":
		if e.mode, err = units.DetectMode("/sys/fs/cgroup"); err != nil {
			return e, fmt.Errorf("cgroup mode of this machine (use --cgroup-mode v1|v2): %w", err)
		}
	default:
		return e, usageErr("--cgroup-mode %q: must be v1 or v2", o.cgroupMode)
	}
	if o.capacity != "" {
		if e.capacity, e.extended, err = parseCapacity(o.capacity); err != nil {
			return e, err
		}
	} else if e.capacity, err = slices.ReadCapacity("/proc", "/sys", ""); err != nil {
		return e, fmt.Errorf("capacity of this machine (use --capacity): %w", err)
	}
	e.mcfg, err = cfg.SlicesConfig(e.capacity, e.mode.V2())
	return e, err
}

// parseCapacity parses "cpu=4,memory=16Gi,pids=4194304,ephemeral-storage=100Gi,hugepages-2Mi=1Gi",
// and extended resources ("nvidia.com/gpu=8", domain-qualified names outside kubernetes.io,
// whole numbers), which it returns apart. Missing cpu or memory is an error; pids defaults to
// the kernel default 4194304.
func parseCapacity(s string) (slices.Capacity, v1.ResourceList, error) {
	c := slices.Capacity{Pids: 4194304, HugePages: map[int64]int64{}}
	var extended v1.ResourceList
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || k == "" || v == "" {
			return c, nil, usageErr("--capacity %q: %q is not name=quantity", s, item)
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return c, nil, usageErr("--capacity %s=%s: %v", k, v, err)
		}
		if q.Sign() < 0 {
			return c, nil, usageErr("--capacity %s=%s: must not be negative", k, v)
		}
		if seen[k] {
			return c, nil, usageErr("--capacity %s: given twice", k)
		}
		seen[k] = true
		switch {
		case k == "cpu":
			c.CPU = q.MilliValue()
		case k == "memory":
			c.Memory = q.Value()
		case k == "pids" || k == "pid":
			c.Pids = q.Value()
		case k == "ephemeral-storage":
			c.EphemeralStorage = q.Value()
		case strings.HasPrefix(k, v1.ResourceHugePagesPrefix):
			size, err := slices.HugePageSizeFromResourceName(v1.ResourceName(k))
			if err != nil {
				return c, nil, usageErr("--capacity %s: %v", k, err)
			}
			c.HugePages[size] = q.Value()
		case slices.IsExtendedResourceName(v1.ResourceName(k)):
			// Devices are counted whole (the API's validation of extended resources).
			if q.MilliValue()%1000 != 0 {
				return c, nil, usageErr("--capacity %s=%s: an extended resource is a whole number", k, v)
			}
			if extended == nil {
				extended = v1.ResourceList{}
			}
			extended[v1.ResourceName(k)] = q
		default:
			return c, nil, usageErr("--capacity %s: unknown resource (cpu, memory, pids, ephemeral-storage, hugepages-<size>, or an extended resource such as example.com/dongle)", k)
		}
	}
	for _, need := range []string{"cpu", "memory"} {
		if !seen[need] {
			return c, nil, usageErr("--capacity %q: %s is required", s, need)
		}
	}
	return c, extended, nil
}

// explainPod explains every pod of the -f input offline as the node the configuration makes
// it would: the pod source's validation (a static pod's, or with [cluster] enabled what the
// node checks of a pod from the API server), Pod Security, the configured runtime on the
// configured network, and admission against the capacity given, each input pod counting
// against the ones after it once it would run. Every stage is explained for each pod, whatever
// an earlier one says; a pod that fails validation makes the command fail after the
// explanation.
func explainPod(o explainOptions, stdout io.Writer) error {
	if len(o.files) == 0 {
		return usageErr("explain pod: -f POD.yaml is required")
	}
	e, err := loadEnv(o)
	if err != nil {
		return err
	}
	docs, err := readDocuments(o.stdin, o.files, o.recursive)
	if err != nil {
		return err
	}
	var pods []*v1.Pod
	var where []string
	var errs []error
	for _, d := range docs {
		got, err := explainDecode(d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for range got {
			where = append(where, d.where)
		}
		pods = append(pods, got...)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	levels, err := admission.ParsePodSecurityLevels(e.cfg.Pods.Security.BySource())
	if err != nil {
		return err
	}
	origin, as := podfields.Manifest, "static pod"
	if e.cfg.Cluster.Enabled {
		origin, as = podfields.APIServer, "API pod, cluster mode"
	}
	allocatable := admission.WithMaxPods(slices.NodeAllocatable(e.capacity, e.mcfg.Node.SystemReserved, e.mcfg.Node.KubeReserved, e.mcfg.Node.HardEviction), e.cfg.Node.MaxPods)
	for name, q := range e.extended {
		allocatable[name] = q.DeepCopy()
	}
	node := admission.NodeState{
		Allocatable:     allocatable,
		PriorityClasses: e.cfg.Eviction.PriorityClasses,
	}
	var out []slices.PodExplanation
	for i, pod := range pods {
		x, err := slices.ExplainPod(pod, e.mcfg.Pod, e.mode, e.capacity)
		if err != nil {
			return fmt.Errorf("%s: %w", where[i], err)
		}
		var problems []string
		for _, e := range validateAs(pod, origin) {
			problems = append(problems, e.Error())
		}
		x.Validation = &slices.ValidationVerdict{As: as, Valid: len(problems) == 0, Problems: problems}
		if !x.Validation.Valid {
			errs = append(errs, fmt.Errorf("%s: pod %s/%s is invalid (%s): %s", where[i], pod.Namespace, pod.Name, as, strings.Join(problems, "; ")))
		}
		x.PodSecurity = admission.PodSecurityVerdicts(pod, levels)
		if x.Runtime, err = verdict.RuntimeOn(e.cfg.Runtime.Type, e.cfg.Runtime.Network, pod); err != nil {
			return err
		}
		d := admission.Admit(pod, node)
		x.Admission = &slices.AdmissionVerdict{Admit: d.Admit, Reason: d.Reason, Message: d.Message,
			Against: fmt.Sprintf("node allocatable from this capacity, max_pods %d, and the %d input pods before it that would run", e.cfg.Node.MaxPods, len(node.Pods))}
		if d.Admit && x.Validation.Valid && x.Runtime.Allowed {
			node.Pods = append(node.Pods, pod)
		}
		out = append(out, x)
	}
	if o.output == "json" {
		if len(out) == 1 {
			err = writeJSON(stdout, out[0])
		} else {
			err = writeJSON(stdout, out)
		}
		return errors.Join(append(errs, err)...)
	}
	for i, x := range out {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		printPod(stdout, pods[i], x, e.mode)
	}
	return errors.Join(errs...)
}

// explainDecode turns one input document into its pods as the manifest path does, without
// validating them (manifest.DecodePods): explain reports validation as a stage of its own. It
// is explain's one decode call.
func explainDecode(d document) ([]*v1.Pod, error) {
	return manifest.DecodePods(d.where, d.source, d.data)
}

func explainNode(o explainOptions, stdout io.Writer) error {
	e, err := loadEnv(o)
	if err != nil {
		return err
	}
	pods, err := readPods(o.stdin, o.files, o.recursive)
	if err != nil {
		return err
	}
	x, err := slices.ExplainNode(e.capacity, e.mcfg.Node, pods, e.mode)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return writeJSON(stdout, x)
	}
	printNode(stdout, x, e.mode, len(pods))
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func orNone[T any](p *T) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

func printPod(w io.Writer, pod *v1.Pod, x slices.PodExplanation, mode units.Mode) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	r := x.Resources
	fmt.Fprintf(tw, "Pod:\t%s/%s (uid %s)\n", pod.Namespace, pod.Name, pod.UID)
	fmt.Fprintf(tw, "QoS class:\t%s\n", x.QOSClass)
	fmt.Fprintf(tw, "Slice:\t%s\n", x.Slice)
	fmt.Fprintf(tw, "Cgroup:\t%s\n", x.CgroupPath)
	fmt.Fprintf(tw, "Cgroup mode:\t%s\n", mode)
	fmt.Fprintf(tw, "CPU shares:\t%s (cgroup v2 weight %s)\n", orNone(r.CPUShares), orNone(x.CPUWeight))
	fmt.Fprintf(tw, "CPU quota:\t%s µs per %s µs period\n", orNone(r.CPUQuota), orNone(r.CPUPeriod))
	fmt.Fprintf(tw, "Memory limit:\t%s bytes\n", orNone(r.MemoryLimit))
	fmt.Fprintf(tw, "Pids limit:\t%s\n", orNone(r.PidsLimit))
	if len(r.HugepageLimits) > 0 {
		fmt.Fprintf(tw, "Hugepage limits:\t%v\n", r.HugepageLimits)
	}
	if len(r.Unified) > 0 {
		fmt.Fprintf(tw, "Unified:\t%v\n", r.Unified)
	}
	tw.Flush()
	printProps(w, x.SystemdProperties)
	fmt.Fprintln(w, "Containers:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tOOM_SCORE_ADJ")
	for _, c := range x.Containers {
		fmt.Fprintf(tw, "  %s\t%d\n", c.Name, c.OOMScoreAdj)
	}
	tw.Flush()
	if len(x.PodSecurity) > 0 {
		fmt.Fprintln(w, "Pod Security:")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  SOURCE\tLEVEL\tVERDICT")
		for _, v := range x.PodSecurity {
			verdict := "allowed"
			if !v.Allowed {
				verdict = v.Message
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", v.Source, v.Level, verdict)
		}
		tw.Flush()
	}
	if v := x.Validation; v != nil {
		fmt.Fprintf(w, "Validation (%s):\n", v.As)
		if v.Valid {
			fmt.Fprintln(w, "  valid")
		}
		for _, p := range v.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
	if v := x.Runtime; v != nil {
		fmt.Fprintf(w, "Runtime %s:\n", v.Runtime)
		if v.Allowed {
			fmt.Fprintln(w, "  can run this pod")
		}
		for _, p := range v.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
	if a := x.Admission; a != nil {
		when := "now"
		if a.Against != "" {
			when = "against " + a.Against
		}
		if a.Admit {
			fmt.Fprintf(w, "Admission:\n  admitted %s\n", when)
		} else {
			fmt.Fprintf(w, "Admission:\n  refused %s: %s: %s\n", when, a.Reason, a.Message)
		}
	}
}

func printProps(w io.Writer, props map[string]any) {
	fmt.Fprintln(w, "Systemd properties:")
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(w, "  %s=%v\n", k, props[k])
	}
}

func printNode(w io.Writer, x slices.NodeExplanation, mode units.Mode, pods int) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "Cgroup mode: %s\n\n", mode)
	fmt.Fprintln(tw, "\tCPU (m)\tMEMORY (bytes)\tEPHEMERAL (bytes)\t")
	row := func(name string, a slices.Amounts) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t\n", name, a.CPU, a.Memory, a.EphemeralStorage)
	}
	row("capacity", slices.Amounts{CPU: x.Capacity.CPU, Memory: x.Capacity.Memory, EphemeralStorage: x.Capacity.EphemeralStorage})
	row("system-reserved", x.Reserved.SystemReserved)
	row("kube-reserved", x.Reserved.KubeReserved)
	row("hard-eviction", x.Reserved.HardEviction)
	row("allocatable (scheduler)", x.Allocatable)
	var mem int64 = -1
	if x.Kubepods.Memory != nil {
		mem = *x.Kubepods.Memory
	}
	fmt.Fprintf(tw, "kubepods.slice limits\t%d\t%d\t-\t\n", x.Kubepods.CPU, mem)
	tw.Flush()
	fmt.Fprintf(w, "\nQoS slices (for %d pods):\n", pods)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  SLICE\tCPU (m)\tSHARES\tV2 WEIGHT\tMEMORY LIMIT")
	for _, s := range []slices.SliceExplanation{x.Kubepods, x.QOS.Burstable, x.QOS.BestEffort} {
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\n", s.Slice, s.CPU, orNone(s.Resources.CPUShares), orNone(s.CPUWeight), orNone(s.Memory))
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintf(w, "kubepods.slice ")
	printProps(w, x.Kubepods.SystemdProperties)
}

// validateAs is the validation the node the configuration makes applies to pod: a static
// pod's is the kubelet's file source's and slicelet's own (manifest.ValidatePod); an API pod
// in cluster mode is first the API server's (kubevalidation.ValidateCreate: a pod it refuses
// never reaches the node), then slicelet's own refusals with the reasons that hold on a
// cluster node, a problem both report once.
func validateAs(pod *v1.Pod, origin podfields.Origin) field.ErrorList {
	if origin == podfields.Manifest {
		return manifest.ValidatePod(pod)
	}
	return manifest.ValidateAPIPod(pod, origin)
}
