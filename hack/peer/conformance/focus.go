package conformance

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// A focus run (make peer-conformance FOCUS=... FOCUS_NAME=...) runs chosen e2e specs, any,
// not a SIG's [Conformance] ones, on a multi-node cluster: a ShardRun with Name set and no
// SIGs, recorded in its own results directory and rendered by FocusSection.

// FocusSubdir is the focus runs' results directory inside the shards' (docs/conformance/focus):
// apart, so that the shards' report never reads them.
const FocusSubdir = "focus"

// validName is a focus run's name: it names the results file.
var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*$`)

// FocusRunFocus checks a focus run's name and expressions and returns ginkgo's --focus: the
// focus, or, for a re-run of chosen specs (only not empty), the specs matching both (only after
// or before the focus's match: RE2 has no intersection), which FocusKept then narrows exactly.
func FocusRunFocus(name, focus, skip, only string) (string, error) {
	if !validName.MatchString(name) {
		return "", fmt.Errorf("focus run name %q: want lower-case letters, digits, '.' and '-'", name)
	}
	for _, e := range []struct{ what, re string }{{"focus", focus}, {"skip", skip}, {"specs", only}} {
		if _, err := regexp.Compile(e.re); err != nil {
			return "", fmt.Errorf("%s %q: %w", e.what, e.re, err)
		}
	}
	if focus == "" {
		return "", fmt.Errorf("focus run %s: no focus", name)
	}
	if only == "" {
		return focus, nil
	}
	return `(?:` + focus + `).*(?:` + only + `)|(?:` + only + `).*(?:` + focus + `)`, nil
}

// FocusKept drops from rs the specs the skip matches, and, with only set, those it does not
// match.
func FocusKept(rs Results, skip, only string) Results {
	var skipRe, onlyRe *regexp.Regexp
	if skip != "" {
		skipRe = regexp.MustCompile(skip)
	}
	if only != "" {
		onlyRe = regexp.MustCompile(only)
	}
	out := Results{}
	for name, r := range rs {
		if !strings.HasPrefix(name, SuitePrefix) && (skipRe != nil && skipRe.MatchString(name) || onlyRe != nil && !onlyRe.MatchString(name)) {
			continue
		}
		out[name] = r
	}
	return out
}

// testpattern starts the storage test suites' pattern tag, which ends a spec's group.
const testpattern = " [Testpattern:"

// SpecGroup is the group a spec is counted in: its text (SIG tag included) before the storage
// suites' " [Testpattern:" tag, or else its first word after the SIG with the bracketed tags
// right after it ("[sig-storage] PersistentVolumes-local [LocalVolumeType: dir]",
// "[sig-storage] HostPath").
func SpecGroup(spec string) string {
	if i := strings.Index(spec, testpattern); i > 0 {
		return spec[:i]
	}
	rest, head := spec, ""
	if sigOf(spec) != "" {
		i := strings.Index(spec, "] ")
		if i < 0 {
			return spec
		}
		head, rest = spec[:i+2], spec[i+2:]
	}
	word, tail, _ := strings.Cut(rest, " ")
	group := head + word
	for strings.HasPrefix(tail, "[") {
		j := strings.Index(tail, "]")
		if j < 0 {
			break
		}
		group += " " + tail[:j+1]
		tail = strings.TrimPrefix(tail[j+1:], " ")
	}
	return group
}

// latestFocus is, for each focus run's name and cluster kind, its newest run of all its specs
// (not a re-run of chosen ones).
func latestFocus(runs []ShardRun) map[string]map[string]ShardRun {
	out := map[string]map[string]ShardRun{}
	for _, r := range runs {
		if r.Name == "" || r.Only != "" {
			continue
		}
		if out[r.Name] == nil {
			out[r.Name] = map[string]ShardRun{}
		}
		if old, ok := out[r.Name][r.Kind()]; !ok || r.Started.After(old.Started) {
			out[r.Name][r.Kind()] = r
		}
	}
	return out
}

// FocusSection renders the focus runs as the body of docs/cluster.md's section of chosen e2e
// specs: intro, then per focus run and cluster kind ran / passed / failed / skipped of its
// newest run, the same per spec group, the runs (focus, skip, nodes, date, commit, duration),
// the re-runs of chosen specs, every spec whose result differs between the kubelet and the
// slicelet cluster, and every spec failing on a cluster, with the notes' causes.
func FocusSection(runs []ShardRun, notes []Note, intro string) string {
	var b strings.Builder
	b.WriteString(intro)
	by := latestFocus(runs)
	names := slices.Sorted(maps.Keys(by))
	counts := func(r ShardRun, ok bool, group string) string {
		if !ok {
			return " not run |"
		}
		rs := r.Specs
		if group != "" {
			rs = Results{}
			for n, res := range r.Specs {
				if SpecGroup(n) == group {
					rs[n] = res
				}
			}
		}
		c := Count(rs)
		return fmt.Sprintf(" %d / %d / %d / %d |", c.Ran, c.Passed, c.Failed, c.Skipped)
	}
	diffCount := func(name, group string) string {
		kr, kok := by[name]["kubelet"]
		sr, sok := by[name]["slicelet"]
		if !kok || !sok {
			return " — |\n"
		}
		n := 0
		for _, row := range differences(kr.Specs, sr.Specs) {
			if group == "" || SpecGroup(row.Spec) == group {
				n++
			}
		}
		return fmt.Sprintf(" %d |\n", n)
	}
	writeCountsHeader(&b, "run")
	for _, name := range names {
		fmt.Fprintf(&b, "| %s |", name)
		for _, k := range Kinds {
			r, ok := by[name][k]
			b.WriteString(counts(r, ok, ""))
		}
		b.WriteString(diffCount(name, ""))
	}
	for _, name := range names {
		groups := map[string]bool{}
		for _, r := range by[name] {
			for n := range r.Specs {
				if !strings.HasPrefix(n, SuitePrefix) {
					groups[SpecGroup(n)] = true
				}
			}
		}
		fmt.Fprintf(&b, "\n%s by group of specs:\n", name)
		writeCountsHeader(&b, "group")
		for _, g := range slices.Sorted(maps.Keys(groups)) {
			fmt.Fprintf(&b, "| %s |", cell(g))
			for _, k := range Kinds {
				r, ok := by[name][k]
				b.WriteString(counts(r, ok, g))
			}
			b.WriteString(diffCount(name, g))
		}
	}
	b.WriteString("\nThe runs (the newest of each focus run and cluster kind):\n\n" +
		"| run | focus | skip | cluster | nodes | started (UTC) | commit | duration | procs | selected | suite error |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	var shown []ShardRun
	for _, name := range names {
		for _, k := range Kinds {
			if r, ok := by[name][k]; ok {
				shown = append(shown, r)
			}
		}
	}
	for _, r := range shown {
		fmt.Fprintf(&b, "| %s | `%s` | `%s` | %s |", r.Name, cell(r.Focus), cell(cmp.Or(r.Skip, "—")), r.Kind())
		b.WriteString(runCells(r))
	}
	var diffs, fails []string
	for _, name := range names {
		kr, kok := by[name]["kubelet"]
		sr, sok := by[name]["slicelet"]
		if kok && sok {
			for _, row := range differences(kr.Specs, sr.Specs) {
				diffs = append(diffs, fmt.Sprintf("| %s | %s | %s | %s |\n", cell(row.Spec), row.Kubelet.Status, row.Slicelet.Status,
					cell(cmp.Or(noteFor(notes, row.Spec), strings.Trim(row.Kubelet.Message+"; "+row.Slicelet.Message, "; ")))))
			}
		}
		for _, k := range Kinds {
			r, ok := by[name][k]
			if !ok {
				continue
			}
			for _, spec := range slices.Sorted(maps.Keys(r.Specs)) {
				if res := r.Specs[spec]; res.Failed() {
					fails = append(fails, fmt.Sprintf("| %s | %s | %s | %s |\n", cell(spec), k, res.Status, cell(cmp.Or(noteFor(notes, spec), res.Message))))
				}
			}
		}
	}
	writeTail(&b, rerunRows(runs, shown), diffs, fails)
	return b.String()
}
