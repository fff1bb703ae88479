package conformance

import (
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/onsi/ginkgo/v2/reporters"
)

// maxReport bounds the JUnit report read (e2e.test lists every spec of the suite, most of them
// skipped by the focus: a few MB).
const maxReport = 64 << 20

// Result is one spec's outcome on one node.
type Result struct {
	// Status is ginkgo's state: passed, failed, skipped, timedout, panicked, interrupted, aborted.
	Status string `json:"status"`
	// Message is the failure's (or skip's) first line.
	Message string `json:"message,omitempty"`
}

// NotRun is the status of a spec one node's report does not list.
const NotRun = "not run"

// Failed tells whether the spec ran and did not pass.
func (r Result) Failed() bool {
	return r.Status != "passed" && r.Status != "skipped" && r.Status != NotRun
}

// Results maps a spec's full text (without ginkgo's "[It] " and the suite's name) to its result;
// a failed suite-level node is listed as SuitePrefix + its name.
type Results map[string]Result

// SuitePrefix starts the names of suite-level nodes in Results ("suite: [SynchronizedBeforeSuite]").
const SuitePrefix = "suite: "

// ReadJUnit reads e2e.test's JUnit report (junit_01.xml) and keeps the specs whose text focus
// matches (the others are listed as skipped by the focus), and suite-level nodes that failed
// ([SynchronizedBeforeSuite] and the like, named so).
func ReadJUnit(path string, focus *regexp.Regexp) (Results, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxReport+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxReport {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxReport)
	}
	return ParseJUnit(data, focus)
}

// ParseJUnit is ReadJUnit of the report's bytes.
func ParseJUnit(data []byte, focus *regexp.Regexp) (Results, error) {
	var suites reporters.JUnitTestSuites
	if err := xml.Unmarshal(data, &suites); err != nil {
		return nil, fmt.Errorf("junit report: %w", err)
	}
	out := Results{}
	for _, s := range suites.TestSuites {
		for _, tc := range s.TestCases {
			name, leaf := tc.Name, ""
			if strings.HasPrefix(name, "[") {
				if i := strings.Index(name, "] "); i > 0 {
					leaf, name = name[1:i], name[i+2:]
				}
			}
			name = strings.TrimSpace(strings.TrimPrefix(name, "Kubernetes e2e suite "))
			r := Result{Status: tc.Status}
			switch {
			case tc.Failure != nil:
				r.Message = firstLine(tc.Failure.Message, tc.Failure.Description)
			case tc.Error != nil:
				r.Message = firstLine(tc.Error.Message, tc.Error.Description)
			case tc.Skipped != nil:
				r.Message = firstLine(tc.Skipped.Message)
			}
			if leaf != "It" {
				// A suite-level node: kept only when it failed (then no spec ran as it should).
				if r.Failed() {
					out[SuitePrefix+"["+leaf+"] "+name] = r
				}
				continue
			}
			if focus.MatchString(name) {
				out[name] = r
			}
		}
	}
	return out, nil
}

// firstLine is the start of the first non-empty text: its first non-empty line, and the next
// ones while the text is shorter than 80 bytes (a gomega "Timed out after 300s." says why on
// the next line) up to ginkgo's "In [It] at:" line, without ginkgo's "[FAILED] " prefix, at
// most 300 bytes.
func firstLine(texts ...string) string {
	for _, t := range texts {
		var b strings.Builder
		for _, l := range strings.Split(t, "\n") {
			l = strings.TrimSpace(l)
			l = strings.TrimPrefix(strings.TrimPrefix(l, "[FAILED] "), "[PANICKED] ")
			if strings.HasPrefix(l, "In [") || b.Len() >= 80 {
				break
			}
			if l == "" || l == "Full Stack Trace" {
				continue
			}
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(l)
		}
		if l := b.String(); l != "" {
			if len(l) > 300 {
				l = l[:300] + "…"
			}
			return l
		}
	}
	return ""
}

// SuiteFailed tells whether a suite-level node failed (then specs may not have run as they should).
func (rs Results) SuiteFailed() bool {
	for name := range rs {
		if strings.HasPrefix(name, SuitePrefix) {
			return true
		}
	}
	return false
}

// Counts are a node's totals.
type Counts struct {
	Selected, Ran, Passed, Failed, Skipped int
}

// Count totals results (suite-level nodes excluded).
func Count(rs Results) Counts {
	var c Counts
	for name, r := range rs {
		if strings.HasPrefix(name, SuitePrefix) {
			continue
		}
		c.Selected++
		switch {
		case r.Status == "skipped":
			c.Skipped++
		case r.Status == "passed":
			c.Ran++
			c.Passed++
		default:
			c.Ran++
			c.Failed++
		}
	}
	return c
}

// Row is a spec whose result differs between the nodes or that failed on either.
type Row struct {
	Spec              string
	Kubelet, Slicelet Result
}

// All lists every spec of either node with both results, sorted by spec (a spec missing on
// one side has the status "not run" there).
func All(kubelet, slicelet Results) []Row {
	names := map[string]bool{}
	for n := range kubelet {
		names[n] = true
	}
	for n := range slicelet {
		names[n] = true
	}
	var rows []Row
	for _, n := range slices.Sorted(maps.Keys(names)) {
		k, kok := kubelet[n]
		s, sok := slicelet[n]
		if !kok {
			k.Status = NotRun
		}
		if !sok {
			s.Status = NotRun
		}
		rows = append(rows, Row{Spec: n, Kubelet: k, Slicelet: s})
	}
	return rows
}

// Compare is All's specs whose status differs between the two nodes or that failed on either.
func Compare(kubelet, slicelet Results) []Row {
	var rows []Row
	for _, r := range All(kubelet, slicelet) {
		if r.Kubelet.Status != r.Slicelet.Status || r.Kubelet.Failed() || r.Slicelet.Failed() {
			rows = append(rows, r)
		}
	}
	return rows
}

// cell escapes text for a markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "`", "'").Replace(s)
}

// Failures is the status file's body: one line per spec that failed on the slicelet node, with
// the failure's first line, and where the full log is.
func Failures(slicelet Results, log string) string {
	var b strings.Builder
	for _, n := range slices.Sorted(maps.Keys(slicelet)) {
		if r := slicelet[n]; r.Failed() {
			fmt.Fprintf(&b, "- %s — %s: %s\n", n, r.Status, r.Message)
		}
	}
	if b.Len() == 0 {
		b.WriteString("- none\n")
	}
	fmt.Fprintf(&b, "\nFull output: %s\n", log)
	return b.String()
}

// Section is the body of docs/cluster.md's "## Node conformance" section: the command, the
// counts of both nodes side by side, every spec that differs or fails with its reason, the
// skip list. Either node's results may be nil (not run).
func Section(kubelet, slicelet Results, skips []Skip, intro string) string {
	var b strings.Builder
	b.WriteString(intro)
	kc, sc := Count(kubelet), Count(slicelet)
	fmt.Fprintf(&b, "\n| specs | kubelet node | slicelet node |\n|---|---|---|\n")
	for _, row := range []struct {
		name string
		k, s int
	}{{"selected", kc.Selected, sc.Selected}, {"ran", kc.Ran, sc.Ran}, {"passed", kc.Passed, sc.Passed},
		{"failed", kc.Failed, sc.Failed}, {"skipped", kc.Skipped, sc.Skipped}} {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", row.name, countCell(kubelet, row.k), countCell(slicelet, row.s))
	}
	rows := Compare(kubelet, slicelet)
	fmt.Fprintf(&b, "\nEvery spec whose result differs between the nodes or that failed on either (%d):\n\n", len(rows))
	if len(rows) > 0 {
		b.WriteString("| spec | kubelet node | slicelet node | reason |\n|---|---|---|---|\n")
		for _, r := range rows {
			reason := r.Slicelet.Message
			if r.Kubelet.Failed() || reason == "" {
				reason = strings.Trim(r.Kubelet.Message+"; "+r.Slicelet.Message, "; ")
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(r.Spec), r.Kubelet.Status, r.Slicelet.Status, cell(reason))
		}
	}
	b.WriteString("\nSkipped on both nodes (`--skip`), and why:\n\n| specs matching | why |\n|---|---|\n")
	for _, s := range skips {
		fmt.Fprintf(&b, "| `%s` | %s |\n", cell(s.Pattern), cell(s.Why))
	}
	return b.String()
}

// countCell is n, or "not run" without results.
func countCell(rs Results, n int) string {
	if rs == nil {
		return "not run"
	}
	return fmt.Sprint(n)
}
