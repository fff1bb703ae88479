// Package peermetrics compares the metrics endpoints of two node agents serving the same pods
// — the real kubelet and slicelet — family by family: which families each serves, and for the
// families both serve their type, their label names and a histogram's buckets. A difference is
// "noticed" when the monitoring operators run reads the family: a name the kubernetes-mixin's
// rules or dashboards (kube-prometheus' rendering) mention. make peer-metrics runs it
// (hack/peer/clustertest TestMetricsSideBySide); docs/peer.md holds the last result.
package peermetrics

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Endpoints are the kubelet's metrics paths on its API (pkg/kubelet/server/server.go), in the
// order the report lists them.
var Endpoints = []string{"/metrics", "/metrics/cadvisor", "/metrics/probes", "/metrics/resource", "/metrics/slis"}

// Family is what the comparison looks at of one metric family.
type Family struct {
	Name string
	// Type is the exposition's type in lower case (counter, gauge, histogram, summary, untyped).
	Type string
	// Help is the family's help, its stability level ("[ALPHA] ") included.
	Help string
	// Labels are the label names any of the family's series has, sorted.
	Labels []string
	// Buckets are a histogram's upper bounds, as exposed (le), in order.
	Buckets []string
	// Series is the number of series.
	Series int
}

// Scrape is one endpoint's answer: its HTTP status and, for 200, its families by name.
type Scrape struct {
	Status   int
	Families map[string]Family
}

// Parse reads a text exposition (version 0.0.4) into families.
func Parse(text []byte) (map[string]Family, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("metrics exposition: %w", err)
	}
	out := make(map[string]Family, len(mfs))
	for name, mf := range mfs {
		f := Family{Name: name, Type: strings.ToLower(mf.GetType().String()), Help: mf.GetHelp(), Series: len(mf.GetMetric())}
		labels := map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		f.Labels = slices.Sorted(maps.Keys(labels))
		if mf.GetType() == dto.MetricType_HISTOGRAM && len(mf.GetMetric()) > 0 {
			for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
				f.Buckets = append(f.Buckets, strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))
			}
		}
		out[name] = f
	}
	return out, nil
}

// What a difference is.
const (
	KubeletOnly   = "kubelet only"
	SliceletOnly  = "slicelet only"
	TypeDiffers   = "type"
	LabelsDiffer  = "labels"
	BucketsDiffer = "buckets"
	HelpDiffers   = "help"
	// NotServed: the endpoint answers 200 on one agent and not on the other.
	NotServed = "endpoint"
)

// Difference is one difference between the kubelet's and slicelet's answer on one endpoint.
type Difference struct {
	Endpoint string
	// Family is the family's name; empty for an endpoint's difference (NotServed).
	Family string
	// What is KubeletOnly, SliceletOnly, TypeDiffers, LabelsDiffer, BucketsDiffer, HelpDiffers
	// or NotServed.
	What string
	// Kubelet and Slicelet are each side's value for TypeDiffers, LabelsDiffer, BucketsDiffer
	// and NotServed.
	Kubelet, Slicelet string
	// Noticed tells that the kubernetes-mixin's rules or dashboards read the family.
	Noticed bool
}

// String is the difference in one line: "ENDPOINT FAMILY: WHAT[: kubelet K, slicelet S]", the
// text divergences' patterns match.
func (d Difference) String() string {
	s := d.Endpoint + " " + cmp.Or(d.Family, "-") + ": " + d.What
	if d.Kubelet != "" || d.Slicelet != "" {
		s += ": kubelet " + d.Kubelet + ", slicelet " + d.Slicelet
	}
	return s
}

// Compare lists the differences between the kubelet's scrapes and slicelet's, endpoint by
// endpoint (Endpoints' order, then any other path) and family by family (by name). noticed
// holds the names the monitoring reads (MixinNames).
func Compare(kubelet, slicelet map[string]Scrape, noticed map[string]bool) []Difference {
	var out []Difference
	paths := slices.Clone(Endpoints)
	for _, p := range slices.Sorted(maps.Keys(kubelet)) {
		if !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	for _, path := range paths {
		k, s := kubelet[path], slicelet[path]
		if k.Status != s.Status {
			// A path the monitoring scrapes that answers on one node and not on the other is a
			// target down there.
			out = append(out, Difference{Endpoint: path, What: NotServed, Kubelet: strconv.Itoa(k.Status), Slicelet: strconv.Itoa(s.Status),
				Noticed: noticed[path]})
		}
		names := map[string]bool{}
		for n := range k.Families {
			names[n] = true
		}
		for n := range s.Families {
			names[n] = true
		}
		for _, n := range slices.Sorted(maps.Keys(names)) {
			kf, inK := k.Families[n]
			sf, inS := s.Families[n]
			d := Difference{Endpoint: path, Family: n, Noticed: Referenced(noticed, n)}
			switch {
			case !inS:
				d.What = KubeletOnly
				out = append(out, d)
			case !inK:
				d.What = SliceletOnly
				out = append(out, d)
			default:
				if kf.Type != sf.Type {
					d.What, d.Kubelet, d.Slicelet = TypeDiffers, kf.Type, sf.Type
					out = append(out, d)
				}
				if !slices.Equal(kf.Labels, sf.Labels) {
					d.What, d.Kubelet, d.Slicelet = LabelsDiffer, "{"+strings.Join(kf.Labels, ",")+"}", "{"+strings.Join(sf.Labels, ",")+"}"
					out = append(out, d)
				}
				if kf.Type == sf.Type && !slices.Equal(kf.Buckets, sf.Buckets) {
					d.What, d.Kubelet, d.Slicelet = BucketsDiffer, strings.Join(kf.Buckets, ","), strings.Join(sf.Buckets, ",")
					out = append(out, d)
				}
				if kf.Help != sf.Help {
					d.What, d.Kubelet, d.Slicelet = HelpDiffers, kf.Help, sf.Help
					out = append(out, d)
				}
			}
		}
	}
	return out
}

// Referenced tells whether the monitoring reads family: its name, or for a histogram or
// summary one of its series' names (_bucket, _sum, _count), is in names.
func Referenced(names map[string]bool, family string) bool {
	for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
		if names[family+suffix] {
			return true
		}
	}
	return false
}

// identifier is a PromQL metric name (or any word that could be one); metricsPath a metrics
// endpoint's path (a ServiceMonitor's path, a rule's metrics_path).
var (
	identifier  = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	metricsPath = regexp.MustCompile(`/metrics(/[a-z]+)?\b`)
)

// MixinNames are the words of the monitoring's rule files, dashboards and scrape configuration
// that could be metric names (containing '_': PromQL's functions and keywords that are single
// words do not collide), and the metrics paths they name. A word that is no metric name costs
// nothing: only families' names and endpoints' paths are looked up.
func MixinNames(files ...[]byte) map[string]bool {
	out := map[string]bool{}
	for _, f := range files {
		for _, w := range identifier.FindAll(f, -1) {
			if bytes.IndexByte(w, '_') >= 0 {
				out[string(w)] = true
			}
		}
		for _, p := range metricsPath.FindAll(f, -1) {
			out[string(p)] = true
		}
	}
	return out
}

// Divergence explains the differences whose String matches Pattern. Only one with Noticed
// explains a noticed difference: a difference the monitoring sees needs its own reason.
type Divergence struct {
	Pattern *regexp.Regexp
	Reason  string
	Noticed bool
}

// Explain groups the differences by the first divergence that explains them; rest are those
// none explains.
func Explain(diffs []Difference, divergences []Divergence) (explained map[string][]Difference, rest []Difference) {
	explained = map[string][]Difference{}
next:
	for _, d := range diffs {
		for _, dv := range divergences {
			if dv.Pattern.MatchString(d.String()) && (!d.Noticed || dv.Noticed) {
				explained[dv.Reason] = append(explained[dv.Reason], d)
				continue next
			}
		}
		rest = append(rest, d)
	}
	return explained, rest
}

// Report is one side-by-side run, as Markdown writes it.
type Report struct {
	// Date, Commit and Command say when, on what and how it ran.
	Date, Commit, Command string
	Kubelet, Slicelet     map[string]Scrape
	// Explained are the differences by reason (Explain), in Reasons' order; Open the others.
	Explained map[string][]Difference
	Reasons   []string
	Open      []Difference
}

// Markdown is the report: per endpoint the families each side serves, those only one serves,
// those both serve with another type, labels or buckets, and how many of these the monitoring
// notices; then the differences by reason, then those without one.
func Markdown(r Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, commit %s: `%s`.\n\n", r.Date, r.Commit, r.Command)
	b.WriteString("| endpoint | kubelet | slicelet | both | kubelet only | slicelet only | type, labels, buckets or help differ | noticed by the mixin, unexplained |\n|---|---|---|---|---|---|---|---|\n")
	all := append(slices.Concat(slices.Collect(maps.Values(r.Explained))...), r.Open...)
	for _, path := range Endpoints {
		k, s := r.Kubelet[path], r.Slicelet[path]
		both := 0
		for n := range k.Families {
			if _, ok := s.Families[n]; ok {
				both++
			}
		}
		count := func(what ...string) int {
			n := 0
			for _, d := range all {
				if d.Endpoint == path && slices.Contains(what, d.What) {
					n++
				}
			}
			return n
		}
		open := 0
		for _, d := range r.Open {
			if d.Endpoint == path && d.Noticed {
				open++
			}
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %d | %d | %d | %d | %d |\n", path, served(k), served(s), both,
			count(KubeletOnly), count(SliceletOnly), count(TypeDiffers, LabelsDiffer, BucketsDiffer, HelpDiffers), open)
	}
	list := func(ds []Difference) {
		byPath := map[string][]string{}
		for _, d := range ds {
			item := "`" + cmp.Or(d.Family, "the endpoint") + "`"
			if d.What == HelpDiffers {
				item += " (help)"
			} else if d.What != KubeletOnly && d.What != SliceletOnly {
				item += " (" + d.What
				if d.Kubelet != "" || d.Slicelet != "" {
					item += ": kubelet `" + d.Kubelet + "`, slicelet `" + d.Slicelet + "`"
				}
				item += ")"
			}
			if d.Noticed {
				item += " ★"
			}
			byPath[d.Endpoint] = append(byPath[d.Endpoint], item)
		}
		for _, p := range slices.Sorted(maps.Keys(byPath)) {
			fmt.Fprintf(&b, "  - `%s`: %s\n", p, strings.Join(byPath[p], ", "))
		}
	}
	b.WriteString("\nThe differences, by reason (★: a family the kubernetes-mixin's rules or dashboards read):\n\n")
	for _, reason := range r.Reasons {
		if ds := r.Explained[reason]; len(ds) > 0 {
			fmt.Fprintf(&b, "- %s\n", reason)
			list(ds)
		}
	}
	if len(r.Open) > 0 {
		b.WriteString("- **No reason yet:**\n")
		list(r.Open)
	}
	return b.String()
}

// served is an endpoint's family count, or its status when it did not answer 200.
func served(s Scrape) string {
	if s.Status != 200 {
		return fmt.Sprintf("not served (%d)", s.Status)
	}
	return strconv.Itoa(len(s.Families))
}
