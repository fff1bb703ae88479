package conformance

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SIGSpecs are the Conformance suite's SIGs with the number of [Conformance] specs each has
// in v1.37.2 (test/conformance/testdata/conformance.yaml: 462 in all), in the order of the
// table docs/cluster.md shows.
var SIGSpecs = []struct {
	SIG   string
	Specs int
}{
	{"sig-architecture", 1}, {"sig-instrumentation", 4}, {"sig-scheduling", 11}, {"sig-cli", 17},
	{"sig-auth", 27}, {"sig-network", 47}, {"sig-apps", 60}, {"sig-storage", 91},
	{"sig-api-machinery", 100}, {"sig-node", 104},
}

// ShardFocus is the ginkgo --focus of a shard: the [Conformance] specs of the SIGs listed
// (comma-separated, "sig-network" or "network"), and the SIGs' canonical names.
func ShardFocus(list string) (string, []string, error) {
	var sigs []string
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.HasPrefix(s, "sig-") {
			s = "sig-" + s
		}
		if !slices.ContainsFunc(SIGSpecs, func(e struct {
			SIG   string
			Specs int
		}) bool {
			return e.SIG == s
		}) {
			return "", nil, fmt.Errorf("shard %q: SIG %q is none of the Conformance suite's (%s)", list, s, strings.Join(sigNames(), ", "))
		}
		if !slices.Contains(sigs, s) {
			sigs = append(sigs, s)
		}
	}
	if len(sigs) == 0 {
		return "", nil, fmt.Errorf("shard %q: no SIG", list)
	}
	return `\[(` + strings.Join(sigs, "|") + `)\].*\[Conformance\]`, sigs, nil
}

// NarrowFocus is the focus of a shard's re-run of chosen specs: the shard's [Conformance]
// specs whose text, between the SIG and [Conformance], matches only (a regular expression).
func NarrowFocus(focus, only string) (string, error) {
	if _, err := regexp.Compile(only); err != nil {
		return "", fmt.Errorf("specs %q: %w", only, err)
	}
	head, tail, ok := strings.Cut(focus, `.*\[Conformance\]`)
	if !ok {
		return "", fmt.Errorf("focus %q is no shard's", focus)
	}
	return head + `.*(?:` + only + `).*\[Conformance\]` + tail, nil
}

func sigNames() []string {
	out := make([]string, len(SIGSpecs))
	for i, e := range SIGSpecs {
		out[i] = e.SIG
	}
	return out
}

// ClusterKind names a cluster by its nodes' agents: "kubelet" or "slicelet" when all nodes run
// that agent, "mixed" otherwise.
func ClusterKind(nodes []string) string {
	kinds := slices.Compact(slices.Sorted(slices.Values(nodes)))
	if len(kinds) == 1 {
		return kinds[0]
	}
	return "mixed"
}

// ShardRun is one shard's run on one multi-node cluster: what make peer-conformance SHARD=...
// records (docs/conformance/*.json) and the report is rendered from.
type ShardRun struct {
	// Nodes are the nodes' agents in order ("kubelet", "slicelet").
	Nodes []string `json:"nodes"`
	// NodeVersions are the Nodes' nodeInfo.kubeletVersion, by node name.
	NodeVersions map[string]string `json:"node_versions,omitempty"`
	// SIGs are the shard's SIGs; Focus and Skip its ginkgo expressions (Skip empty: nothing
	// is skipped by the runner).
	SIGs  []string `json:"sigs"`
	Focus string   `json:"focus"`
	Skip  string   `json:"skip,omitempty"`
	// Started is when the suite started; Duration how long it ran (time.Duration's text);
	// Procs ginkgo's parallel processes.
	Started  time.Time `json:"started"`
	Duration string    `json:"duration"`
	Procs    int       `json:"procs"`
	// Commit is the tree's commit (git describe --always --dirty): slicelet's on slicelet
	// nodes, the harness's on all.
	Commit string `json:"commit"`
	// Error is why the suite did not finish as it should (ginkgo's exit, a timeout), when it
	// did not.
	Error string `json:"error,omitempty"`
	// Specs are the results of the focused specs (and failed suite-level nodes, SuitePrefix).
	Specs Results `json:"specs"`
	// Only, when set, narrowed the run to the shard's specs matching it (NarrowFocus): a
	// re-run of chosen specs, which never stands for the whole shard.
	Only string `json:"only,omitempty"`
	// Part, "i/n" with Only set, makes the run the i-th of n parts of the shard (a shard too
	// long for one run, split by the specs' texts): the newest run of each of the n parts,
	// together, stand for the whole shard ([CombineParts]).
	Part string `json:"part,omitempty"`
	// Name, when set, makes the run a focus run (FocusSection): Focus and Skip chosen, any
	// specs, no SIGs.
	Name string `json:"name,omitempty"`
	// parts are the part runs a combined run was made of (CombineParts).
	parts []ShardRun
}

// ParsePart reads a part "i/n" (1 <= i <= n, n >= 2).
func ParsePart(part string) (i, n int, err error) {
	a, b, ok := strings.Cut(part, "/")
	if ok {
		i, err = strconv.Atoi(a)
		if err == nil {
			n, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || n < 2 || i < 1 || i > n {
		return 0, 0, fmt.Errorf("part %q: want i/n with 1 <= i <= n and n >= 2", part)
	}
	return i, n, nil
}

// Kind is the run's [ClusterKind].
func (r ShardRun) Kind() string { return ClusterKind(r.Nodes) }

// FileName is the run's file name in the results directory: one per cluster kind and shard,
// a newer run of the same shard on the same kind replacing the older (and one for its newest
// re-run of chosen specs).
func (r ShardRun) FileName() string {
	if r.Name != "" {
		if r.Only != "" {
			return r.Kind() + "_" + r.Name + "_rerun.json"
		}
		return r.Kind() + "_" + r.Name + ".json"
	}
	if i, n, err := ParsePart(r.Part); err == nil && r.Only != "" {
		return fmt.Sprintf("%s_%s_part%dof%d.json", r.Kind(), strings.Join(r.SIGs, "+"), i, n)
	}
	if r.Only != "" {
		return r.Kind() + "_" + strings.Join(r.SIGs, "+") + "_rerun.json"
	}
	return r.Kind() + "_" + strings.Join(r.SIGs, "+") + ".json"
}

// maxRunFile bounds a results file read.
const maxRunFile = 16 << 20

// ReadRuns reads every *.json of dir as a ShardRun, sorted by file name.
func ReadRuns(dir string) ([]ShardRun, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	slices.Sort(paths)
	var runs []ShardRun
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(io.LimitReader(f, maxRunFile+1))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if len(data) > maxRunFile {
			return nil, fmt.Errorf("%s: larger than %d bytes", p, maxRunFile)
		}
		var r ShardRun
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if len(r.Nodes) == 0 || len(r.SIGs) == 0 && r.Name == "" {
			return nil, fmt.Errorf("%s: no nodes, or neither SIGs nor a focus run's name", p)
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// WriteRun writes run into dir as its FileName.
func WriteRun(dir string, run ShardRun) (string, error) {
	data, err := json.MarshalIndent(run, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, run.FileName())
	return path, os.WriteFile(path, append(data, '\n'), 0o644)
}

// Kinds are the cluster kinds the report shows, in its columns' order.
var Kinds = []string{"kubelet", "slicelet", "mixed"}

// sigOf is the SIG a spec's text starts with ("[sig-cli] Kubectl ..." is sig-cli's), "" for
// none.
func sigOf(spec string) string {
	if !strings.HasPrefix(spec, "[sig-") {
		return ""
	}
	if i := strings.Index(spec, "]"); i > 0 {
		return spec[1:i]
	}
	return ""
}

// sigResults are a run's results of one SIG's specs.
func sigResults(r ShardRun, sig string) Results {
	out := Results{}
	for name, res := range r.Specs {
		if sigOf(name) == sig {
			out[name] = res
		}
	}
	return out
}

// CombineParts joins, for each shard and cluster kind, the newest run of each of its n parts
// into one run standing for the whole shard, when every part from 1 to n has run and no spec
// ran in two parts: its specs are the parts' together, its start the first part's, its
// duration the parts' summed, its commits and errors each part's. The parts' runs themselves
// are returned as they are; a shard with a part missing is not combined.
func CombineParts(runs []ShardRun) []ShardRun {
	type key struct {
		kind, sigs string
		n          int
	}
	newest := map[key]map[int]ShardRun{}
	for _, r := range runs {
		i, n, err := ParsePart(r.Part)
		if err != nil || r.Only == "" {
			continue
		}
		k := key{r.Kind(), strings.Join(r.SIGs, ","), n}
		if newest[k] == nil {
			newest[k] = map[int]ShardRun{}
		}
		if old, ok := newest[k][i]; !ok || r.Started.After(old.Started) {
			newest[k][i] = r
		}
	}
	var out []ShardRun
	for _, k := range slices.SortedFunc(maps.Keys(newest), func(a, b key) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.sigs, b.sigs), cmp.Compare(a.n, b.n))
	}) {
		parts := newest[k]
		if len(parts) != k.n {
			continue
		}
		var whole ShardRun
		var total time.Duration
		var commits, errs []string
		overlap := false
		for i := 1; i <= k.n; i++ {
			p := parts[i]
			if i == 1 {
				whole = ShardRun{Nodes: p.Nodes, NodeVersions: map[string]string{}, SIGs: p.SIGs, Skip: p.Skip, Started: p.Started,
					Procs: p.Procs, Specs: Results{}, Part: fmt.Sprintf("%d parts", k.n)}
			}
			if p.Started.Before(whole.Started) {
				whole.Started = p.Started
			}
			whole.parts = append(whole.parts, p)
			maps.Copy(whole.NodeVersions, p.NodeVersions)
			d, _ := time.ParseDuration(p.Duration)
			total += d
			if !slices.Contains(commits, p.Commit) {
				commits = append(commits, p.Commit)
			}
			if p.Error != "" {
				errs = append(errs, fmt.Sprintf("part %d: %s", i, p.Error))
			}
			for name, res := range p.Specs {
				if _, dup := whole.Specs[name]; dup && !strings.HasPrefix(name, SuitePrefix) {
					overlap = true
				}
				whole.Specs[name] = res
			}
			whole.Focus = strings.TrimPrefix(whole.Focus+" + "+p.Focus, " + ")
		}
		if overlap {
			continue
		}
		whole.Duration = total.String()
		whole.Commit = strings.Join(commits, ", ")
		whole.Error = strings.Join(errs, "; ")
		out = append(out, whole)
	}
	return out
}

// latest is, for each SIG and cluster kind, the newest whole-shard run that covered the SIG:
// a run of the whole shard or its parts combined ([CombineParts]).
func latest(runs []ShardRun) map[string]map[string]ShardRun {
	out := map[string]map[string]ShardRun{}
	for _, r := range append(slices.Clip(runs), CombineParts(runs)...) {
		if r.Only != "" {
			continue
		}
		for _, sig := range r.SIGs {
			if out[sig] == nil {
				out[sig] = map[string]ShardRun{}
			}
			if old, ok := out[sig][r.Kind()]; !ok || r.Started.After(old.Started) {
				out[sig][r.Kind()] = r
			}
		}
	}
	return out
}

// Note is a cause found for a spec's failure (a regular expression of its text), shown beside
// it in the report.
type Note struct {
	Pattern, Why string
}

// noteFor is the first note whose pattern matches spec, "" for none.
func noteFor(notes []Note, spec string) string {
	for _, n := range notes {
		if regexp.MustCompile(n.Pattern).MatchString(spec) {
			return n.Why
		}
	}
	return ""
}

// ShardSection renders the runs as the body of docs/cluster.md's conformance-by-SIG section:
// intro, then per SIG and cluster kind ran / passed / failed / skipped of the newest run, each
// run's nodes, date, commit and duration, every spec whose result differs between the kubelet
// and the slicelet cluster, and every spec failing on a cluster, with the notes' causes.
func ShardSection(runs []ShardRun, notes []Note, intro string) string {
	var b strings.Builder
	b.WriteString(intro)
	by := latest(runs)
	writeCountsHeader(&b, "SIG", "specs")
	for _, e := range SIGSpecs {
		fmt.Fprintf(&b, "| %s | %d |", e.SIG, e.Specs)
		for _, k := range Kinds {
			r, ok := by[e.SIG][k]
			if !ok {
				b.WriteString(" not run |")
				continue
			}
			c := Count(sigResults(r, e.SIG))
			fmt.Fprintf(&b, " %d / %d / %d / %d |", c.Ran, c.Passed, c.Failed, c.Skipped)
		}
		kr, kok := by[e.SIG]["kubelet"]
		sr, sok := by[e.SIG]["slicelet"]
		if kok && sok {
			fmt.Fprintf(&b, " %d |\n", len(differences(sigResults(kr, e.SIG), sigResults(sr, e.SIG))))
		} else {
			b.WriteString(" — |\n")
		}
	}
	b.WriteString("\nThe runs (the newest of each shard and cluster kind):\n\n" +
		"| SIGs | cluster | nodes | started (UTC) | commit | duration | procs | selected | suite error |\n|---|---|---|---|---|---|---|---|---|\n")
	var shown []ShardRun
	for _, r := range runs {
		for _, sig := range r.SIGs {
			l := by[sig][r.Kind()]
			if l.Started.Equal(r.Started) && l.FileName() == r.FileName() || slices.ContainsFunc(l.parts, func(p ShardRun) bool {
				return p.Started.Equal(r.Started) && p.FileName() == r.FileName()
			}) {
				shown = append(shown, r)
				break
			}
		}
	}
	slices.SortStableFunc(shown, func(a, b ShardRun) int {
		return cmp.Or(cmp.Compare(strings.Join(a.SIGs, ","), strings.Join(b.SIGs, ",")), cmp.Compare(slices.Index(Kinds, a.Kind()), slices.Index(Kinds, b.Kind())),
			cmp.Compare(a.Part, b.Part))
	})
	for _, r := range shown {
		sigs := strings.Join(r.SIGs, ", ")
		if r.Part != "" {
			sigs += fmt.Sprintf(", part %s (SPECS=%s)", r.Part, r.Only)
		}
		fmt.Fprintf(&b, "| %s | %s |", cell(sigs), r.Kind())
		b.WriteString(runCells(r))
	}
	var diffs, fails []string
	for _, e := range SIGSpecs {
		kr, kok := by[e.SIG]["kubelet"]
		sr, sok := by[e.SIG]["slicelet"]
		if kok && sok {
			for _, row := range differences(sigResults(kr, e.SIG), sigResults(sr, e.SIG)) {
				diffs = append(diffs, fmt.Sprintf("| %s | %s | %s | %s |\n", cell(row.Spec), row.Kubelet.Status, row.Slicelet.Status,
					cell(cmp.Or(noteFor(notes, row.Spec), strings.Trim(row.Kubelet.Message+"; "+row.Slicelet.Message, "; ")))))
			}
		}
		for _, k := range Kinds {
			r, ok := by[e.SIG][k]
			if !ok {
				continue
			}
			rs := sigResults(r, e.SIG)
			for _, name := range slices.Sorted(maps.Keys(rs)) {
				if res := rs[name]; res.Failed() {
					fails = append(fails, fmt.Sprintf("| %s | %s | %s | %s |\n", cell(name), k, res.Status, cell(cmp.Or(noteFor(notes, name), res.Message))))
				}
			}
		}
	}
	for _, r := range shown {
		for _, name := range slices.Sorted(maps.Keys(r.Specs)) {
			if strings.HasPrefix(name, SuitePrefix) {
				fails = append(fails, fmt.Sprintf("| %s (%s) | %s | %s | %s |\n", cell(name), strings.Join(r.SIGs, ","), r.Kind(), r.Specs[name].Status, cell(r.Specs[name].Message)))
			}
		}
	}
	writeTail(&b, rerunRows(runs, shown), diffs, fails)
	return b.String()
}

// runCells are a run's cells of a runs table after its name and cluster: nodes (with their
// versions), start, commit, duration, procs, specs selected and the suite's error.
func runCells(r ShardRun) string {
	nodes := strings.Join(r.Nodes, ",")
	if vs := slices.Compact(slices.Sorted(maps.Values(r.NodeVersions))); len(vs) > 0 {
		nodes += " (`" + strings.Join(vs, "`, `") + "`)"
	}
	return fmt.Sprintf(" %s | %s | %s | %s | %d | %d | %s |\n", nodes, r.Started.UTC().Format("2006-01-02 15:04"), cell(r.Commit), r.Duration,
		r.Procs, Count(r.Specs).Selected, cmp.Or(cell(r.Error), "—"))
}

// rerunRows are the table rows of every spec of the runs of chosen specs (Only set) that are
// not among the runs shown (a part counted in a whole shard's).
func rerunRows(runs, shown []ShardRun) []string {
	var reruns []string
	for _, r := range runs {
		if r.Only == "" || slices.ContainsFunc(shown, func(s ShardRun) bool { return s.Started.Equal(r.Started) && s.FileName() == r.FileName() }) {
			continue
		}
		c := Count(r.Specs)
		for _, name := range slices.Sorted(maps.Keys(r.Specs)) {
			res := r.Specs[name]
			reruns = append(reruns, fmt.Sprintf("| %s | %s | %s | %s | %s | %s |\n", cell(name), r.Kind(), res.Status,
				r.Started.UTC().Format("2006-01-02 15:04"), cell(r.Commit), cell(fmt.Sprintf("%s, %d ran, %d passed, %d failed", r.Duration, c.Ran, c.Passed, c.Failed))))
		}
	}
	return reruns
}

// writeTail ends a report: the re-runs' table (when any), the differences' and the failures'.
func writeTail(b *strings.Builder, reruns, diffs, fails []string) {
	if len(reruns) > 0 {
		fmt.Fprintf(b, "\nRe-runs of chosen specs (`SPECS=`; they do not count in the tables above) (%d):\n\n"+
			"| spec | cluster | status | started (UTC) | commit | the re-run |\n|---|---|---|---|---|---|\n%s", len(reruns), strings.Join(reruns, ""))
	}
	fmt.Fprintf(b, "\nSpecs whose result differs between the kubelet cluster and the slicelet cluster (%d)", len(diffs))
	if len(diffs) > 0 {
		b.WriteString(":\n\n| spec | kubelet cluster | slicelet cluster | cause |\n|---|---|---|---|\n" + strings.Join(diffs, ""))
	} else {
		b.WriteString(".\n")
	}
	fmt.Fprintf(b, "\nSpecs that failed, per cluster (%d)", len(fails))
	if len(fails) > 0 {
		b.WriteString(":\n\n| spec | cluster | status | cause |\n|---|---|---|---|\n" + strings.Join(fails, ""))
	} else {
		b.WriteString(".\n")
	}
}

// differences are the specs whose status differs between the two results, a spec one side
// lacks counting as "not run" there.
func differences(kubelet, slicelet Results) []Row {
	var out []Row
	for _, r := range All(kubelet, slicelet) {
		if r.Kubelet.Status != r.Slicelet.Status {
			out = append(out, r)
		}
	}
	return out
}

// writeCountsHeader writes the header of a counts table: the first columns, then each cluster
// kind's ran / passed / failed / skipped, then the differences between kubelet and slicelet.
func writeCountsHeader(b *strings.Builder, first ...string) {
	b.WriteString("\n|")
	for _, c := range first {
		b.WriteString(" " + c + " |")
	}
	for _, k := range Kinds {
		fmt.Fprintf(b, " %s cluster: ran / passed / failed / skipped |", k)
	}
	b.WriteString(" differences, kubelet vs slicelet |\n|")
	for range len(first) + len(Kinds) + 1 {
		b.WriteString("---|")
	}
	b.WriteString("\n")
}
