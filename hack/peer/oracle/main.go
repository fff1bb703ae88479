// Command oracle checks slicelet's pod decisions against the kubelet's own Go packages
// (k8s.io/kubernetes v1.37.2): every manifest of a corpus directory and, for each seed, N pods
// of the resource generator (podgen.Pod) and S of the structural generator
// (podgen.StructuralPod) go through both, and every field on which they disagree is printed,
// one line each:
//
//	<pod>: <field>: slicelet=<value> kubelet=<value> [bent: <leaf> <class> <value>; ...]
//
// then "oracle-diff: N pods, D differences" and the seeds, "random" being drawn afresh and
// printed so that a run can be replayed. The exit status is 1 on any difference. A generated
// pod that differs is shrunk to a minimal manifest, written to -regressions.
//
// The kubelet side of each batch runs in a child process (the same binary with -kubelet-batch):
// the kubelet's file source keeps an inotify instance per directory for the life of the
// process, and the machine allows 128.
package main

import (
	"bytes"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/hack/peer/corpus"
	"github.com/slicelet/slicelet/hack/peer/podgen"
	"github.com/slicelet/slicelet/internal/pods/podfields"
	"github.com/slicelet/slicelet/slices"
)

// batchSize bounds the manifests one kubelet file source reads.
const batchSize = 2500

// input is one manifest to check.
type input struct {
	label    string // how lines name it: the corpus path or the generated pod's name
	data     []byte
	key      string          // namespace/name, to match the kubelet's renamed pod
	manifest podgen.Manifest // generated pods only
	bends    []podgen.Bend   // structural pods only: what was bent
}

// bent says what a structural pod's bends were, for its difference lines.
func (in input) bent() string {
	if len(in.bends) == 0 {
		return ""
	}
	var parts []string
	for _, b := range in.bends {
		parts = append(parts, b.String())
	}
	return " [bent: " + strings.Join(parts, "; ") + "]"
}

// outcome is one side's verdict: refused with a reason, or facts. The kubelet's side also
// carries the pod as it decoded it (defaults applied), so that slicelet's decisions can be
// taken on it too: a difference that disappears then comes from decoding, not from the
// decision.
type outcome struct {
	Refused string  `json:"refused,omitempty"`
	Facts   facts   `json:"facts,omitempty"`
	Pod     *v1.Pod `json:"pod,omitempty"`
}

func main() {
	var (
		corpus      = flag.String("corpus", "", "directory of Pod manifests (searched recursively for *.yaml, *.yml, *.json)")
		n           = flag.Int("n", 2000, "pods of the resource generator per seed")
		structural  = flag.Int("structural", 0, "pods of the structural generator per seed")
		seedList    = flag.String("seed", "1", "generator seeds, separated by spaces or commas; \"random\" is a fresh one, printed")
		maxShrunk   = flag.Int("max-shrunk", 8, "generated pods shrunk per run at most (one per kind of difference)")
		work        = flag.String("work", "build/oracle-work", "scratch directory (emptied first)")
		regressions = flag.String("regressions", "", "directory for shrunk failing generated pods (none when empty)")
		batchDir    = flag.String("kubelet-batch", "", "internal: decide one batch directory with the kubelet's packages")
		bench       = flag.String("bench", "", "append the run's figures to this Markdown file")
		print       = flag.String("print", "", "print generated pod g<seed>-<i> or s<seed>-<i> (or number <i> of the first -seed) and exit")
	)
	klog.InitFlags(nil)
	flag.Parse()
	seeds, err := parseSeeds(*seedList)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		os.Exit(2)
	}
	if *print != "" {
		m, bends, err := printPod(*print, seeds[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, "oracle:", err)
			os.Exit(2)
		}
		for _, b := range bends {
			fmt.Printf("# bent: %s\n", b)
		}
		os.Stdout.Write(m.YAML())
		return
	}
	node := defaultNode()
	if *batchDir != "" {
		if err := kubeletBatch(*batchDir, node); err != nil {
			fmt.Fprintln(os.Stderr, "oracle:", err)
			os.Exit(2)
		}
		return
	}
	start := time.Now()
	inputs, err := loadCorpus(*corpus)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		os.Exit(2)
	}
	corpusCount := len(inputs)
	fmt.Printf("oracle-diff: seeds %s\n", seedsString(seeds))
	for _, seed := range seeds {
		for i := 0; i < *n; i++ {
			m := podgen.Pod(seed, i)
			inputs = append(inputs, input{label: m.Name(), data: m.YAML(), key: podKey(m), manifest: m})
		}
	}
	resourceCount := len(inputs) - corpusCount
	for _, seed := range seeds {
		for i := 0; i < *structural; i++ {
			m, bends := podgen.StructuralPod(seed, i)
			inputs = append(inputs, input{label: fmt.Sprintf("s%d-%d", seed, i), data: m.YAML(), key: podKey(m), manifest: m, bends: bends})
		}
	}
	structuralDiffs := 0
	if err := os.RemoveAll(*work); err != nil {
		fmt.Fprintln(os.Stderr, "oracle:", err)
		os.Exit(2)
	}
	r := &runner{work: *work, node: node}
	total, shrunk, decoding, deliberate := 0, 0, 0, 0
	shrunkKinds := map[string]bool{}
	for b, batch := range batches(inputs) {
		diffs, err := r.run(fmt.Sprintf("batch-%03d", b), batch)
		if err != nil {
			fmt.Fprintln(os.Stderr, "oracle:", err)
			os.Exit(2)
		}
		for i, in := range batch {
			var kept []difference
			for _, d := range diffs[i] {
				if why := deliberateDivergence(d); why != "" {
					deliberate++
					continue
				}
				kept = append(kept, d)
				suffix := ""
				if d.decoding {
					suffix = " [decoding]"
					decoding++
				}
				fmt.Printf("%s: %s: slicelet=%s kubelet=%s%s%s\n", in.label, d.field, d.slicelet, d.kubelet, suffix, in.bent())
			}
			if len(in.bends) > 0 {
				structuralDiffs += len(kept)
			}
			diffs[i] = kept
			total += len(diffs[i])
			if len(diffs[i]) == 0 || *regressions == "" {
				continue
			}
			// A kind the corpus (which comes first) already shows needs no new regression.
			if in.manifest == nil {
				for _, d := range diffs[i] {
					shrunkKinds[diffKind(d)] = true
				}
				continue
			}
			kind := diffKind(diffs[i][0])
			if shrunkKinds[kind] || shrunk >= *maxShrunk {
				continue
			}
			shrunkKinds[kind] = true
			shrunk++
			path, err := r.shrink(in, diffs[i][0], *regressions)
			if err != nil {
				fmt.Fprintln(os.Stderr, "oracle: shrink:", err)
				os.Exit(2)
			}
			fmt.Fprintf(os.Stderr, "oracle: %s shrunk to %s\n", in.label, path)
		}
	}
	for _, d := range configDefaults() {
		fmt.Printf("config: %s: slicelet=%s kubelet=%s\n", d.field, d.slicelet, d.kubelet)
		total++
	}
	for _, seed := range seeds {
		for i := 0; i < *n; i++ {
			for _, d := range compareEvictionCase(genEvictionCase(seed, i)) {
				fmt.Printf("node-%d-%d: %s: slicelet=%s kubelet=%s\n", seed, i, d.field, d.slicelet, d.kubelet)
				total++
			}
		}
	}
	elapsed := time.Since(start)
	fmt.Printf("oracle-diff: %d differences come from decoding (slicelet decides like the kubelet on the kubelet's decoded pod), %d are in decisions; %d deliberate divergences not counted (docs/oracle.md)\n", decoding, total-decoding, deliberate)
	fmt.Printf("oracle-diff: %d pods (%d from the corpus, %d of the resource generator, %d structural), %d differences (%d on structural pods)\n",
		len(inputs), corpusCount, resourceCount, len(inputs)-corpusCount-resourceCount, total, structuralDiffs)
	fmt.Printf("oracle-diff: seeds %s; replay one with make oracle-diff SEED=<seed>\n", seedsString(seeds))
	if *bench != "" {
		if err := writeBench(*bench, len(inputs), corpusCount, resourceCount, seedsString(seeds), total, elapsed); err != nil {
			fmt.Fprintln(os.Stderr, "oracle:", err)
			os.Exit(2)
		}
	}
	if total > 0 {
		os.Exit(1)
	}
}

func defaultNode() nodeSetup {
	n := nodeSetup{memoryCapacity: 16 << 30}
	if c, err := slices.ReadCapacity("/proc", "/sys", ""); err == nil {
		n.hostPageSizes = c.PageSizes()
	}
	return n
}

// parseSeeds reads -seed: numbers and "random", each a fresh seed from crypto/rand.
func parseSeeds(list string) ([]uint64, error) {
	var out []uint64
	for _, f := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' }) {
		if f == "random" {
			var b [8]byte
			if _, err := crand.Read(b[:]); err != nil {
				return nil, fmt.Errorf("random seed: %w", err)
			}
			// Below 2^53, so that the seed survives any tool that reads it as a float.
			out = append(out, binary.LittleEndian.Uint64(b[:])>>11)
			continue
		}
		s, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("seed %q: want a number or random", f)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, errors.New("no seed")
	}
	return out, nil
}

func seedsString(seeds []uint64) string {
	var parts []string
	for _, s := range seeds {
		parts = append(parts, strconv.FormatUint(s, 10))
	}
	return strings.Join(parts, " ")
}

// printPod is the generated pod a -print name names: g<seed>-<i>, s<seed>-<i>, or <i> (of the
// resource generator with seed).
func printPod(name string, seed uint64) (podgen.Manifest, []podgen.Bend, error) {
	if i, err := strconv.Atoi(name); err == nil {
		return podgen.Pod(seed, i), nil, nil
	}
	bad := fmt.Errorf("-print %q: want g<seed>-<i>, s<seed>-<i> or <i>", name)
	if len(name) < 2 {
		return nil, nil, bad
	}
	sv, iv, ok := strings.Cut(name[1:], "-")
	s, err1 := strconv.ParseUint(sv, 10, 64)
	i, err2 := strconv.Atoi(iv)
	if !ok || err1 != nil || err2 != nil {
		return nil, nil, bad
	}
	switch name[0] {
	case 'g':
		return podgen.Pod(s, i), nil, nil
	case 's':
		m, bends := podgen.StructuralPod(s, i)
		return m, bends, nil
	}
	return nil, nil, bad
}

// podKey is a generated pod's namespace/name.
func podKey(m podgen.Manifest) string {
	ns := namespaceOf(m)
	if ns == "" {
		ns = "default"
	}
	return ns + "/" + m.Name()
}

func namespaceOf(m podgen.Manifest) string {
	md, _ := m["metadata"].(map[string]any)
	s, _ := md["namespace"].(string)
	return s
}

// loadCorpus reads every manifest under dir; "" means none.
func loadCorpus(dir string) ([]input, error) {
	if dir == "" {
		return nil, nil
	}
	var out []input
	err := corpus.WalkManifests(dir, func(path string) error {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out = append(out, input{label: path, data: data, key: manifestKey(data)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("corpus %s: %w", dir, err)
	}
	return out, nil
}

// manifestKey is namespace/name of the (first) document, read leniently; "" if there is none.
func manifestKey(data []byte) string {
	var m struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	first := data
	if i := bytes.Index(data, []byte("\n---")); i >= 0 {
		first = data[:i]
	}
	if err := yaml.Unmarshal(first, &m); err != nil || m.Metadata.Name == "" {
		return ""
	}
	if m.Metadata.Namespace == "" {
		m.Metadata.Namespace = "default"
	}
	return m.Metadata.Namespace + "/" + m.Metadata.Name
}

// batches splits inputs into batches of at most batchSize whose keys are unique (the file
// source keys its store by namespace/name, so two files naming one pod cannot share a batch).
func batches(inputs []input) [][]input {
	var out [][]input
	var cur []input
	seen := map[string]bool{}
	var rest []input
	for len(inputs) > 0 {
		for _, in := range inputs {
			if len(cur) >= batchSize || (in.key != "" && seen[in.key]) {
				rest = append(rest, in)
				continue
			}
			seen[in.key] = true
			cur = append(cur, in)
		}
		out = append(out, cur)
		cur, seen, inputs, rest = nil, map[string]bool{}, rest, nil
	}
	return out
}

// runner runs batches through both sides.
type runner struct {
	work string
	node nodeSetup
	runs int
}

// run decides one batch on both sides and returns the differences per input.
func (r *runner) run(name string, batch []input) ([][]difference, error) {
	dir := filepath.Join(r.work, name)
	if err := os.MkdirAll(filepath.Join(dir, "manifests"), 0o755); err != nil {
		return nil, err
	}
	keys := map[string]string{}
	for i, in := range batch {
		f := fmt.Sprintf("%06d.yaml", i)
		keys[f] = in.key
		if err := os.WriteFile(filepath.Join(dir, "manifests", f), in.data, 0o644); err != nil {
			return nil, err
		}
	}
	kj, _ := json.Marshal(keys)
	if err := os.WriteFile(filepath.Join(dir, "keys.json"), kj, 0o644); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-kubelet-batch", dir)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kubelet side of %s: %w", dir, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "kubelet.json"))
	if err != nil {
		return nil, err
	}
	var kubelet map[string]outcome
	if err := json.Unmarshal(data, &kubelet); err != nil {
		return nil, fmt.Errorf("kubelet side of %s: %w", dir, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	out := make([][]difference, len(batch))
	for i, in := range batch {
		k := kubelet[fmt.Sprintf("%06d.yaml", i)]
		f := fmt.Sprintf("%06d.yaml", i)
		s := sliceletOutcome(f, filepath.Join(dir, "manifests", f), in.data, r.node)
		onlyReached(s.Facts, k.Facts)
		out[i] = compareOutcomes(s, k)
		if k.Pod != nil && len(out[i]) > 0 && s.Refused == "" {
			onKubeletPod := sliceletFacts(k.Pod, r.node)
			onlyReached(onKubeletPod, k.Facts)
			for j, d := range out[i] {
				if onKubeletPod[d.field] == k.Facts[d.field] {
					out[i][j].decoding = true
				}
			}
		}
	}
	return out, nil
}

// sliceletOutcome is slicelet's verdict on one manifest, read from path as the kubelet's side
// reads it. A multi-document manifest is judged by its first pod, the only one the kubelet's
// file source reads.
func sliceletOutcome(name, path string, data []byte, node nodeSetup) outcome {
	pods, err := sliceletDecode(name, path, data)
	if err != nil {
		return outcome{Refused: err.Error()}
	}
	f := sliceletFacts(pods[0], node)
	f.set("uid", string(pods[0].UID))
	return outcome{Facts: f}
}

// refusalDivergences are the errors slicelet refuses a pod with on purpose where the kubelet
// accepts it (docs/oracle.md), each with the test that recognises one error of the refusal.
var refusalDivergences = []struct {
	why   string
	match func(err string) bool
}{
	{
		"a limit on a resource slicelet cannot enforce (neither cpu, memory, ephemeral-storage, hugepages-<size> nor an extended resource: kubernetes.io/bogus) is refused with its path, not accepted and ignored: the kubelet accepts it",
		func(err string) bool {
			return strings.Contains(err, "slicelet can only enforce limits on cpu, memory, ephemeral-storage, hugepages-<size> and extended resources")
		},
	},
	{
		"a field slicelet does not implement yet is refused with its path (docs/pod-fields.md), never accepted and ignored: the kubelet implements it",
		func(err string) bool { return strings.Contains(err, "not implemented by slicelet yet") },
	},
	{
		"a field slicelet refuses by its registry (a volume plugin it does not have, generateName, ...), with the registry's reason (docs/pod-fields.md): the kubelet accepts it",
		registryRefusal,
	},
	{
		"a manifest's status.qosClass outside Guaranteed, Burstable and BestEffort is refused: the kubelet takes it as the pod's class (GetPodQOS) and would run the pod outside every QoS cgroup",
		func(err string) bool { return strings.Contains(err, "status.qosClass: Unsupported value") },
	},
	{
		"a NUL byte in a command, argument, env value, working directory or mount path is refused: execve and systemd unit properties cannot carry it (the API lets it through)",
		func(err string) bool { return strings.Contains(err, "must not contain NUL bytes") },
	},
}

// deliberateDivergences are the other differences slicelet makes on purpose (docs/oracle.md),
// each with the test that recognises it.
var deliberateDivergences = []struct {
	why   string
	match func(d difference) bool
}{
	{
		"a static pod asking for an extended resource no device plugin of the node provides is refused at admission (the device manager's UnexpectedAdmissionError, \"cannot allocate unregistered device\"), not run without the device: the kubelet admits it (pkg/kubelet/lifecycle/predicate.go drops missing extended resources, noting a static pod should fail)",
		func(d difference) bool {
			return d.field == "admit" && d.slicelet == "reject UnexpectedAdmissionError" && d.kubelet == "admit"
		},
	},
	{
		"ConfigMaps and Secrets are served to pods from slicelet's own sources (the manifest directory and the API): the kubelet refuses static pods that reference them",
		func(d difference) bool {
			return d.field == "accepted" && strings.HasPrefix(d.slicelet, "yes") &&
				(strings.Contains(d.kubelet, "static pods may not reference configmaps") || strings.Contains(d.kubelet, "static pods may not reference secrets"))
		},
	},
	{
		"a container without an image is a host command to the built-in systemd runtime (the cri runtime refuses it when it validates the pod): the API requires an image",
		func(d difference) bool {
			return d.field == "accepted" && strings.HasPrefix(d.slicelet, "yes") && strings.Contains(d.kubelet, ".image: Required value")
		},
	},
	{
		"a pod short of several scalar resources (hugepages, extended): the kubelet names the first of a Go map iteration (random), slicelet the first by name",
		func(d difference) bool {
			s, sok := strings.CutPrefix(d.slicelet, "reject OutOf")
			k, kok := strings.CutPrefix(d.kubelet, "reject OutOf")
			scalar := func(r string) bool { return r != "cpu" && r != "memory" && r != "ephemeral-storage" && r != "pods" }
			return d.field == "admit" && sok && kok && scalar(s) && scalar(k)
		},
	},
}

// registryNotes are the reasons of the fields slicelet refuses by its registry (podfields).
var registryNotes = func() []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range podfields.Entries() {
		if n := "Forbidden: " + e.Note; e.Handling == podfields.Refused && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}()

// registryRefusal reports whether err refuses a field by slicelet's registry, with the
// registry's reason.
func registryRefusal(err string) bool {
	for _, note := range registryNotes {
		if strings.Contains(err, note) {
			return true
		}
	}
	return false
}

// refusalErrors splits a refusal into its field errors, each from its field path to the next
// error's; nil when it has none (a decoding error).
func refusalErrors(refusal string) []string {
	at := fieldError.FindAllStringIndex(refusal, -1)
	var out []string
	for i, m := range at {
		end := len(refusal)
		if i+1 < len(at) {
			end = at[i+1][0]
		}
		out = append(out, refusal[m[0]:end])
	}
	return out
}

// deliberateDivergence returns why d is deliberate, or "". A pod slicelet refuses and the
// kubelet accepts is deliberate when every error of slicelet's whole refusal is (one that is not
// hides nothing behind the others); its reasons are those of its errors.
func deliberateDivergence(d difference) string {
	if d.field == "accepted" && d.kubelet == "yes" && d.refusal != "" {
		errs := refusalErrors(d.refusal)
		var whys []string
		seen := map[string]bool{}
		for _, err := range errs {
			why := ""
			for _, rd := range refusalDivergences {
				if rd.match(err) {
					why = rd.why
					break
				}
			}
			if why == "" {
				return ""
			}
			if !seen[why] {
				seen[why] = true
				whys = append(whys, why)
			}
		}
		return strings.Join(whys, "; ")
	}
	for _, dd := range deliberateDivergences {
		if dd.match(d) {
			return dd.why
		}
	}
	return ""
}

// compareOutcomes: a pod one side refuses and the other accepts is one difference
// ("accepted", with the refusal's reason); otherwise every differing fact.
func compareOutcomes(s, k outcome) []difference {
	switch {
	case s.Refused != "" && k.Refused != "":
		return nil
	case s.Refused != "":
		return []difference{{field: "accepted", slicelet: "no (" + oneLine(s.Refused) + ")", kubelet: "yes", refusal: s.Refused, decoding: true}}
	case k.Refused != "":
		return []difference{{field: "accepted", slicelet: "yes", kubelet: "no (" + oneLine(k.Refused) + ")", decoding: true}}
	}
	return compare(s.Facts, k.Facts)
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", "; ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// kubeletBatch is the child process: decide every manifest of dir/manifests with the
// kubelet's packages and write dir/kubelet.json.
func kubeletBatch(dir string, node nodeSetup) error {
	kj, err := os.ReadFile(filepath.Join(dir, "keys.json"))
	if err != nil {
		return err
	}
	var keys map[string]string
	if err := json.Unmarshal(kj, &keys); err != nil {
		return err
	}
	decoded, err := kubeletDecode(filepath.Join(dir, "manifests"), keys)
	if err != nil {
		return err
	}
	// The runtime manager and its fakes log at level 0; the file source's errors were kept.
	klog.SetLogger(logr.Discard())
	out := map[string]outcome{}
	for name, d := range decoded {
		if d.pod == nil {
			out[name] = outcome{Refused: d.err}
			continue
		}
		if rc := d.pod.Spec.RuntimeClassName; rc != nil && *rc != "" {
			// A kubelet without an API server has no RuntimeClass objects: its sandbox config
			// cannot resolve the handler (kuberuntime's NamespacesForPod dereferences the
			// missing runtimeclass.Manager), so the pod never runs.
			out[name] = outcome{Refused: fmt.Sprintf("runtimeClassName %q: no RuntimeClass on a node without an API server", *rc)}
			continue
		}
		f := kubeletFacts(d.pod, node)
		// The static pod's UID (applyDefaults: the pod, this node's name and the file's path),
		// which slicelet derives the same way so that a node changing agent keeps its pods.
		f.set("uid", string(d.pod.UID))
		state := filepath.Join(dir, "runtime", name)
		cri, err := runtimeFacts(d.pod, node, state)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := os.RemoveAll(state); err != nil {
			return err
		}
		maps.Copy(f, cri)
		out[name] = outcome{Facts: f, Pod: d.pod}
	}
	data, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "kubelet.json"), data, 0o644)
}

var containerName = regexp.MustCompile(`\[[^]]*\]`)

// fieldKind is a field with container names removed: container[c1].oom_score_adj →
// container[].oom_score_adj (pod config names stay: they are part of the kind).
func fieldKind(field string) string {
	if strings.HasPrefix(field, "pod[") {
		return field
	}
	return containerName.ReplaceAllString(field, "[]")
}

// fieldError is the first "path: Type" of a validation error list, as field.Error prints it.
var fieldError = regexp.MustCompile(`([A-Za-z][A-Za-z0-9_.\[\]-]*): (Invalid value|Unsupported value|Required value|Forbidden|Duplicate value|Not found|Too long|Too many|Internal error)`)

var listIndex = regexp.MustCompile(`\[[0-9]+\]`)

// diffKind is the kind of a difference: its field's kind and, for a pod one side refuses, which
// side and the refusal's first field path (indices as [*]) and error type, so that each class of
// refusal gets its own regression case.
func diffKind(d difference) string {
	kind := fieldKind(d.field)
	if d.field != "accepted" {
		return kind
	}
	side, reason := "slicelet-accepts", d.kubelet
	if !strings.HasPrefix(d.slicelet, "yes") {
		side, reason = "kubelet-accepts", d.slicelet
	}
	kind += ":" + side
	if m := fieldError.FindStringSubmatch(reason); m != nil {
		kind += ":" + listIndex.ReplaceAllString(m[1], "[*]") + ": " + m[2]
	}
	return kind
}

// shrink reduces a generated pod to a minimal manifest that still differs as want does (the same
// field, for "accepted" the same side accepting, never a deliberate divergence: a pod shrunk to
// another reason, say a container without its image, would be no regression case) and writes
// it to dir as regression-<hash>.yaml.
func (r *runner) shrink(in input, want difference, dir string) (string, error) {
	field, kind := want.field, diffKind(want)
	sameKind := func(d difference) bool {
		return deliberateDivergence(d) == "" && diffKind(d) == kind
	}
	var runErr error
	fails := func(cands []podgen.Manifest) int {
		if runErr != nil {
			return -1
		}
		batch := make([]input, len(cands))
		for i, c := range cands {
			c = withName(c, fmt.Sprintf("s%d", i))
			batch[i] = input{label: c.Name(), data: c.YAML(), key: "default/" + c.Name()}
			if ns := namespaceOf(c); ns != "" {
				batch[i].key = ns + "/" + c.Name()
			}
		}
		r.runs++
		diffs, err := r.run(fmt.Sprintf("shrink-%04d", r.runs), batch)
		if err != nil {
			runErr = err
			return -1
		}
		for i, ds := range diffs {
			for _, d := range ds {
				if sameKind(d) {
					return i
				}
			}
		}
		return -1
	}
	m := podgen.Shrink(in.manifest, fails)
	if runErr != nil {
		return "", runErr
	}
	body := m.YAML()
	sum := sha256.Sum256(body)
	path := filepath.Join(dir, "regression-"+hex.EncodeToString(sum[:4])+".yaml")
	header := fmt.Sprintf("# Shrunk by hack/peer/oracle from generated pod %s: slicelet and the kubelet differ on %s.\n", in.label, field)
	if len(in.bends) > 0 {
		header = fmt.Sprintf("# Shrunk by hack/peer/oracle from generated pod %s%s: slicelet and the kubelet differ on %s (%s).\n", in.label, in.bent(), field, kind)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, append([]byte(header), body...), 0o644)
}

func withName(m podgen.Manifest, name string) podgen.Manifest {
	out := podgen.Manifest{}
	for k, v := range m {
		out[k] = v
	}
	md := map[string]any{}
	if old, ok := m["metadata"].(map[string]any); ok {
		for k, v := range old {
			md[k] = v
		}
	}
	md["name"] = name
	out["metadata"] = md
	return out
}

// writeBench replaces the "## Figures" section of a Markdown file with this run's numbers.
func writeBench(path string, pods, corpus, resource int, seeds string, diffs int, elapsed time.Duration) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	load, _ := os.ReadFile("/proc/loadavg")
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	cpu := time.Duration(self.Utime.Nano() + self.Stime.Nano() + children.Utime.Nano() + children.Stime.Nano())
	section := fmt.Sprintf("## Figures\n\n`make oracle-bench` (%s, on a 2-core machine shared with other builds, load average %s): %d pods (%d from the corpus, %d of the resource generator and %d structural, seed %s) and %d node configurations, %d differences; %s wall clock, %s of CPU (user+system, kubelet side in child processes of %d pods included), %.0f pods per CPU second.\n",
		time.Now().UTC().Format("2006-01-02"), strings.Join(strings.Fields(string(load))[:3], " "),
		pods, corpus, resource, pods-corpus-resource, seeds, resource, diffs, elapsed.Round(time.Second), cpu.Round(time.Second), batchSize, float64(pods)/cpu.Seconds())
	text := string(old)
	if i := strings.Index(text, "## Figures\n"); i >= 0 {
		end := len(text)
		if j := strings.Index(text[i+len("## Figures\n"):], "\n## "); j >= 0 {
			end = i + len("## Figures\n") + j + 1
		}
		text = text[:i] + section + text[end:]
	} else {
		text += "\n" + section
	}
	return os.WriteFile(path, []byte(text), 0o644)
}
