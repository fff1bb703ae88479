package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/eviction"
)

// explainEviction is `slicectl explain eviction [--socket S] [-o json]` (live: the daemon's last
// decision) and `slicectl explain eviction --observations FILE [--config F] [-o json]`
// (offline: it replays a recorded episode through the eviction manager's decision with the
// thresholds of the configuration, and shows each sample's outcome).
func (c *cli) explainEviction(pos []string, obsPath string, offline bool) error {
	output, configPath := c.global.output, ""
	if c.global.configSet {
		configPath = c.global.configPath
	}
	if len(pos) > 0 {
		return usageErr("explain eviction: unexpected argument %q", pos[0])
	}
	if output != "" && output != "json" {
		return usageErr("explain eviction: -o %q: only json is supported", output)
	}
	if obsPath == "" {
		if offline {
			return usageErr("explain eviction: --offline needs --observations FILE (a recorded episode to replay)")
		}
		return c.explainEvictionLive(output)
	}
	if c.global.socket != "" {
		return usageErr("explain eviction: --socket is for the live explanation; --observations replays offline")
	}
	cfg, err := config.Load(configPath)
	if err != nil {
		return err
	}
	ecfg, err := cfg.EvictionConfig()
	if err != nil {
		return err
	}
	// As the kubelet does at its first synchronize: containerfs.* thresholds follow nodefs
	// (slicelet has one filesystem for state, images and writable layers).
	var warn error
	if ecfg.Thresholds, warn = eviction.UpdateContainerFsThresholds(ecfg.Thresholds, false, false); warn != nil {
		fmt.Fprintf(c.stderr, "slicectl: note: %v\n", warn)
	}
	data, err := os.ReadFile(obsPath)
	if err != nil {
		return fmt.Errorf("observations file: %w", err)
	}
	samples, err := parseEvictionSamples(data)
	if err != nil {
		return fmt.Errorf("observations file %s: %w", obsPath, err)
	}
	results := replayEviction(ecfg, samples)
	if output == "json" {
		return writeJSON(c.stdout, evictionReplay{Results: results})
	}
	printEvictionReplay(c.stdout, results)
	return nil
}

// explainEvictionLive shows the daemon's last eviction decision.
func (c *cli) explainEvictionLive(output string) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	x, err := cl.ExplainEviction(c.ctx)
	if err != nil {
		return err
	}
	if output == "json" {
		return writeJSON(c.stdout, x)
	}
	fmt.Fprintf(c.stdout, "Explained by slicelet at %s.\n", cl.Socket())
	if x.At == "" {
		fmt.Fprintln(c.stdout, "The eviction manager has not completed a cycle yet.")
		return nil
	}
	printEvictionResult(c.stdout, "Last cycle at "+x.At, x)
	return nil
}

// The observations file. Every level is decoded strictly: an unknown field is an error.
type evictionFile struct {
	Samples []json.RawMessage `json:"samples"`
}

type evictionSampleIn struct {
	At      *string                     `json:"at"`
	Signals map[string]evictionSignalIn `json:"signals"`
	Pods    []json.RawMessage           `json:"pods"`
}

type evictionSignalIn struct {
	Available *resource.Quantity `json:"available"`
	Capacity  *resource.Quantity `json:"capacity"`
}

type evictionPodIn struct {
	Manifest json.RawMessage `json:"manifest"`
	Usage    json.RawMessage `json:"usage"`
}

type evictionUsageIn struct {
	Memory           *resource.Quantity `json:"memory"`
	Processes        *int64             `json:"processes"`
	EphemeralStorage *resource.Quantity `json:"ephemeralStorage"`
}

// evictionSample is one validated sample.
type evictionSample struct {
	at   time.Duration
	obs  eviction.Observations
	pods []eviction.PodStats
}

// parseEvictionSamples decodes and validates an observations file (JSON or YAML). Every
// problem names the sample index and the field.
func parseEvictionSamples(data []byte) ([]evictionSample, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("not JSON or YAML: %w", err)
	}
	var file evictionFile
	if err := decodeStrict(js, &file, ""); err != nil {
		return nil, err
	}
	if len(file.Samples) == 0 {
		return nil, errors.New("samples: at least one sample is required")
	}
	var out []evictionSample
	var prev time.Duration
	for i, raw := range file.Samples {
		s, err := parseEvictionSample(raw)
		if err != nil {
			return nil, fmt.Errorf("sample %d: %w", i, err)
		}
		if i > 0 && s.at < prev {
			return nil, fmt.Errorf("sample %d: at: %v is before the previous sample's %v (samples must be in time order)", i, s.at, prev)
		}
		prev = s.at
		out = append(out, s)
	}
	return out, nil
}

func parseEvictionSample(raw json.RawMessage) (evictionSample, error) {
	var in evictionSampleIn
	if err := decodeStrict(raw, &in, ""); err != nil {
		return evictionSample{}, err
	}
	var s evictionSample
	if in.At == nil {
		return s, errors.New("at: required (a duration from the start, e.g. \"10s\")")
	}
	d, err := time.ParseDuration(*in.At)
	if err != nil {
		return s, fmt.Errorf("at: %q is not a duration (e.g. \"10s\", \"1m30s\")", *in.At)
	}
	if d < 0 {
		return s, fmt.Errorf("at: %q must not be negative", *in.At)
	}
	s.at = d
	s.obs = eviction.Observations{}
	for _, name := range slices.Sorted(maps.Keys(in.Signals)) {
		sig := in.Signals[name]
		field := "signals." + name
		if !eviction.ValidSignal(eviction.Signal(name)) {
			return s, fmt.Errorf("%s: unknown signal %q (known: %s)", field, name, signalList())
		}
		if sig.Available == nil {
			return s, fmt.Errorf("%s.available: required", field)
		}
		if sig.Capacity == nil {
			return s, fmt.Errorf("%s.capacity: required", field)
		}
		if sig.Available.Sign() < 0 {
			return s, fmt.Errorf("%s.available: %s must not be negative", field, sig.Available.String())
		}
		if sig.Capacity.Sign() < 0 {
			return s, fmt.Errorf("%s.capacity: %s must not be negative", field, sig.Capacity.String())
		}
		if sig.Available.Cmp(*sig.Capacity) > 0 {
			return s, fmt.Errorf("%s.available: %s exceeds capacity %s", field, sig.Available.String(), sig.Capacity.String())
		}
		s.obs[eviction.Signal(name)] = eviction.Observation{Available: *sig.Available, Capacity: *sig.Capacity}
	}
	seen := map[string]int{}
	for j, rawPod := range in.Pods {
		field := fmt.Sprintf("pods[%d]", j)
		var p evictionPodIn
		if err := decodeStrict(rawPod, &p, field); err != nil {
			return s, err
		}
		if len(p.Manifest) == 0 || string(p.Manifest) == "null" {
			return s, fmt.Errorf("%s.manifest: required (a Pod object)", field)
		}
		var pod v1.Pod
		if err := decodeStrict(p.Manifest, &pod, field+".manifest"); err != nil {
			return s, err
		}
		if pod.Name == "" {
			return s, fmt.Errorf("%s.manifest.metadata.name: required", field)
		}
		if pod.Namespace == "" {
			pod.Namespace = "default"
		}
		key := pod.Namespace + "/" + pod.Name
		if k, dup := seen[key]; dup {
			return s, fmt.Errorf("%s.manifest.metadata.name: pod %s is also pods[%d]", field, key, k)
		}
		seen[key] = j
		ps := eviction.PodStats{Pod: &pod}
		if len(p.Usage) > 0 && string(p.Usage) != "null" {
			var in evictionUsageIn
			if err := decodeStrict(p.Usage, &in, field+".usage"); err != nil {
				return s, err
			}
			u, err := usageOf(&in, field+".usage")
			if err != nil {
				return s, err
			}
			ps.Usage = u
		}
		s.pods = append(s.pods, ps)
	}
	return s, nil
}

// usageOf validates a pod's usage; a missing field counts as zero, a negative one is an error.
func usageOf(in *evictionUsageIn, field string) (*eviction.PodUsage, error) {
	u := &eviction.PodUsage{}
	for _, f := range []struct {
		name string
		q    *resource.Quantity
		dst  *resource.Quantity
	}{{"memory", in.Memory, &u.Memory}, {"ephemeralStorage", in.EphemeralStorage, &u.EphemeralStorage}} {
		if f.q == nil {
			continue
		}
		if f.q.Sign() < 0 {
			return nil, fmt.Errorf("%s.%s: %s must not be negative", field, f.name, f.q.String())
		}
		*f.dst = *f.q
	}
	if in.Processes != nil {
		if *in.Processes < 0 {
			return nil, fmt.Errorf("%s.processes: %d must not be negative", field, *in.Processes)
		}
		u.Processes = *in.Processes
	}
	return u, nil
}

func signalList() string {
	var s []string
	for _, sig := range eviction.Signals() {
		s = append(s, string(sig))
	}
	return strings.Join(s, ", ")
}

// The replay's output.
type evictionReplay struct {
	Results []evictionResult `json:"results"`
}

// evictionResult is one sample's (or the daemon's last cycle's) outcome.
type evictionResult = eviction.Explanation

// replayEpoch is the start of a replay; sample times are this plus their "at".
var replayEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// replayEviction runs the samples through eviction.Decide in order, the state of each step
// carried to the next, so grace and transition periods play out across samples. Node-level
// reclaim cannot run offline: the result lists it and shows the eviction that follows if it
// frees nothing.
func replayEviction(cfg eviction.Config, samples []evictionSample) []evictionResult {
	var state eviction.State
	out := make([]evictionResult, 0, len(samples))
	for _, s := range samples {
		now := replayEpoch.Add(s.at)
		for sig, o := range s.obs {
			o.Time = now
			s.obs[sig] = o
		}
		// One filesystem: the writable layers are on nodefs (eviction.Sources.Observe does
		// the same for live observations).
		for from, to := range map[eviction.Signal]eviction.Signal{
			eviction.SignalNodeFsAvailable:  eviction.SignalContainerFsAvailable,
			eviction.SignalNodeFsInodesFree: eviction.SignalContainerFsInodesFree,
		} {
			if o, ok := s.obs[from]; ok {
				if _, given := s.obs[to]; !given {
					s.obs[to] = o
				}
			}
		}
		var d eviction.Decision
		d, state = eviction.Decide(state, cfg, s.obs, s.pods, now)
		r := eviction.Explain(d, s.at.String(), func(t time.Time) string { return t.Sub(replayEpoch).String() })
		out = append(out, r)
	}
	return out
}

// printEvictionReplay prints the results as readable blocks, one per sample.
func printEvictionReplay(w io.Writer, results []evictionResult) {
	for i, r := range results {
		if i > 0 {
			fmt.Fprintln(w)
		}
		printEvictionResult(w, fmt.Sprintf("Sample %d at %s", i, r.At), r)
	}
}

// printEvictionResult prints one decision as a block under header.
func printEvictionResult(w io.Writer, header string, r evictionResult) {
	fmt.Fprintln(w, header)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(r.ThresholdsMet) == 0 {
		fmt.Fprintln(tw, "  Thresholds met:\tnone")
	}
	for j, t := range r.ThresholdsMet {
		label := ""
		if j == 0 {
			label = "Thresholds met:"
		}
		kind := "hard"
		if !t.Hard {
			kind = "soft, grace " + t.GracePeriod
			if !t.Actionable {
				kind += ", waiting"
			}
		}
		if t.MinReclaim != "" {
			kind += ", min reclaim " + t.MinReclaim
		}
		fmt.Fprintf(tw, "  %s\t%s < %s (%s): available %s of %s, since %s\n", label, t.Signal, t.Threshold, kind, t.Available, t.Capacity, t.FirstObservedAt)
	}
	if len(r.Unobserved) > 0 {
		fmt.Fprintf(tw, "  Not observed:\t%v\n", r.Unobserved)
	}
	conds := "none"
	if len(r.NodeConditions) > 0 {
		var s []string
		for _, c := range r.NodeConditions {
			s = append(s, string(c))
		}
		conds = strings.Join(s, ", ")
	}
	fmt.Fprintf(tw, "  Node conditions:\t%s\n", conds)
	reclaim := "nothing"
	if r.Reclaim != "" {
		reclaim = string(r.Reclaim) + " (" + string(r.Signal) + ")"
	}
	fmt.Fprintf(tw, "  Reclaim:\t%s\n", reclaim)
	if len(r.NodeReclaim) > 0 {
		var s []string
		for _, st := range r.NodeReclaim {
			s = append(s, string(st))
		}
		fmt.Fprintf(tw, "  Node-level reclaim first:\t%s\n", strings.Join(s, ", then "))
	}
	tw.Flush()
	for _, e := range r.LocalStorageEvictions {
		fmt.Fprintf(w, "  Local-storage eviction: %s (%s): %s\n", e.Pod, e.Signal, e.Message)
	}
	if len(r.Ranking) > 0 {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  RANK\tPOD\tPRIORITY\tREASON")
		for j, c := range r.Ranking {
			fmt.Fprintf(tw, "  %d\t%s\t%d\t%s\n", j+1, c.Name, c.Priority, c.Reason)
		}
		tw.Flush()
	}
	if r.Evict != nil {
		fmt.Fprintf(w, "  Evict: %s (grace %s)\n", r.Evict.Pod, r.Evict.GracePeriod)
		fmt.Fprintf(w, "  Message: %q\n", r.Evict.Message)
	} else {
		fmt.Fprintln(w, "  Evict: nobody")
	}
}
