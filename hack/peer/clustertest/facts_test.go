package clustertest

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// facts are what the API showed of one scenario on one node, flattened to JSON paths
// ("pod/crash status.containerStatuses[0].lastState.terminated.reason") with values
// normalised: what depends on the run or the machine (names made by controllers, UIDs,
// timestamps, IPs, container IDs and digests, durations, quantities) is a placeholder, so
// that a kubelet node's facts and a slicelet node's are equal where the two behave alike.
type facts map[string]string

// placeholders replace, in order, what differs from run to run in a string value.
var placeholders = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?( ?(Z|[+-]\d{2}:?\d{2}))?( [A-Z]{3,4})?`), "<time>"},
	{regexp.MustCompile(`[0-9a-f]{64}`), "<hex>"},
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "<uid>"},
	{regexp.MustCompile(`\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b`), "<ip>"},
	// A Deployment's pods: web-<ReplicaSet hash>-<pod suffix>, its ReplicaSets web-<hash>.
	{regexp.MustCompile(`\bweb-[bcdfghjklmnpqrstvwxz2456789]{6,10}-[bcdfghjklmnpqrstvwxz2456789]{5}\b`), "web-<rs>-<pod>"},
	{regexp.MustCompile(`\bweb-[bcdfghjklmnpqrstvwxz2456789]{6,10}\b`), "web-<rs>"},
	{regexp.MustCompile(`\b\d+(\.\d+)?(h|m|s|ms|µs|ns)(\d+(\.\d+)?(m|s|ms|µs|ns))*\b`), "<dur>"},
	{regexp.MustCompile(`\b\d+(\.\d+)?(Ki|Mi|Gi|K|M|G|k)\b`), "<qty>"},
	{regexp.MustCompile(`\b\d{4,}\b`), "<n>"},
}

// normalise replaces the run's and the machine's values in s by placeholders.
func normalise(s string) string {
	for _, p := range placeholders {
		s = p.re.ReplaceAllString(s, p.with)
	}
	return s
}

// add flattens v (any JSON-marshalable value) under prefix into f, each string normalised.
// drop names the paths (below prefix, "status.images") left out with what is under them;
// keysOnly the paths whose map values are replaced by "<set>" (capacity: the keys matter,
// the machine's numbers do not).
func (f facts) add(prefix string, v any, drop, keysOnly []string) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("facts %s: %w", prefix, err)
	}
	var tree any
	if err := json.Unmarshal(data, &tree); err != nil {
		return fmt.Errorf("facts %s: %w", prefix, err)
	}
	f.flatten(prefix+" ", "", tree, drop, keysOnly)
	return nil
}

// flatten writes tree's leaves below path into f.
func (f facts) flatten(prefix, path string, tree any, drop, keysOnly []string) {
	if slices.Contains(drop, path) {
		return
	}
	switch t := tree.(type) {
	case map[string]any:
		if len(t) == 0 {
			f[prefix+path] = "{}"
		}
		for k, v := range t {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if slices.Contains(keysOnly, path) {
				v = "<set>"
			}
			f.flatten(prefix, p, v, drop, keysOnly)
		}
	case []any:
		if len(t) == 0 {
			f[prefix+path] = "[]"
		}
		for i, v := range t {
			f.flatten(prefix, path+"["+strconv.Itoa(i)+"]", v, drop, keysOnly)
		}
	case string:
		f[prefix+path] = normalise(t)
	case nil:
		f[prefix+path] = "null"
	default:
		f[prefix+path] = fmt.Sprint(t)
	}
}

// difference is one path whose value differs between the two nodes ("" where one has none).
type difference struct {
	Path, Kubelet, Slicelet string
}

// String is the difference as a line of the test's report.
func (d difference) String() string {
	return fmt.Sprintf("%s: kubelet %q, slicelet %q", d.Path, d.Kubelet, d.Slicelet)
}

// compare lists the paths whose values differ between the kubelet node's facts and the
// slicelet node's, sorted by path.
func compare(kubelet, slicelet facts) []difference {
	var out []difference
	keys := slices.AppendSeq(slices.Collect(maps.Keys(kubelet)), maps.Keys(slicelet))
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		kv, kok := kubelet[k]
		sv, sok := slicelet[k]
		if kok && sok && kv == sv {
			continue
		}
		if !kok {
			kv = "<absent>"
		}
		if !sok {
			sv = "<absent>"
		}
		out = append(out, difference{Path: k, Kubelet: kv, Slicelet: sv})
	}
	return out
}

// divergence is a difference between the nodes that is deliberate (docs/cluster.md, "Side
// by side with a kubelet node"): the paths it covers and why.
type divergence struct {
	path   *regexp.Regexp
	reason string
}

// explained splits diffs into those a divergence covers (with its reason) and the rest.
func explained(diffs []difference, known []divergence) (covered map[string][]difference, rest []difference) {
	covered = map[string][]difference{}
	for _, d := range diffs {
		i := slices.IndexFunc(known, func(k divergence) bool { return k.path.MatchString(d.Path) })
		if i < 0 {
			rest = append(rest, d)
			continue
		}
		covered[known[i].reason] = append(covered[known[i].reason], d)
	}
	return covered, rest
}

func TestNormalise(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"RFC 3339 time", "2026-11-28T05:46:46Z", "<time>"},
		{"container ID", "containerd://" + strings.Repeat("ab", 32), "containerd://<hex>"},
		{"image ID", "sha256:" + strings.Repeat("0f", 32), "sha256:<hex>"},
		{"UID", "pod 0b8e4c2a-1f2e-4b7a-9c3d-5e6f7a8b9c0d", "pod <uid>"},
		{"IP and port", "dial tcp 10.88.0.3:443: refused", "dial tcp <ip>: refused"},
		{"Deployment pod", "web-5d8f7c9b4-x7kq2", "web-<rs>-<pod>"},
		{"ReplicaSet", "replicaset web-5d8f7c9b4", "replicaset web-<rs>"},
		{"back-off", "back-off 10s restarting failed container=main", "back-off <dur> restarting failed container=main"},
		{"composite duration", "took 1m2.5s", "took <dur>"},
		{"quantity", "Threshold quantity: 250Mi, available: 201836Ki.", "Threshold quantity: <qty>, available: <qty>."},
		{"plain words kept", "Started container main", "Started container main"},
		{"exit code kept", "exit code 3", "exit code 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := normalise(tc.in); got != tc.want {
				t.Errorf("normalise(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestCompareFacts(t *testing.T) {
	type status struct {
		Phase      string            `json:"phase"`
		StartTime  string            `json:"startTime,omitempty"`
		Capacity   map[string]string `json:"capacity,omitempty"`
		Conditions []string          `json:"conditions"`
		Images     []string          `json:"images,omitempty"`
	}
	k, s := facts{}, facts{}
	if err := k.add("pod/a", status{Phase: "Running", StartTime: "2026-11-28T05:46:46Z", Capacity: map[string]string{"cpu": "2"},
		Conditions: []string{"Ready", "PodScheduled"}, Images: []string{"x"}}, []string{"images"}, []string{"capacity"}); err != nil {
		t.Fatal(err)
	}
	if err := s.add("pod/a", status{Phase: "Running", StartTime: "2026-11-28T06:00:00Z", Capacity: map[string]string{"cpu": "4"},
		Conditions: []string{"PodScheduled", "Ready"}}, []string{"images"}, []string{"capacity"}); err != nil {
		t.Fatal(err)
	}
	got := compare(k, s)
	want := []difference{
		{Path: "pod/a conditions[0]", Kubelet: "Ready", Slicelet: "PodScheduled"},
		{Path: "pod/a conditions[1]", Kubelet: "PodScheduled", Slicelet: "Ready"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("compare = %v, want %v (times, capacity numbers and dropped images equal)", got, want)
	}
	covered, rest := explained(got, []divergence{{regexp.MustCompile(`conditions\[0\]`), "first condition"}})
	if len(covered["first condition"]) != 1 || len(rest) != 1 || rest[0] != want[1] {
		t.Errorf("explained: covered %v, rest %v", covered, rest)
	}
	s2 := facts{}
	if err := s2.add("pod/a", status{Phase: "Pending", Conditions: []string{}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	d := compare(facts{"pod/a phase": "Running", "pod/a startTime": "<time>"}, s2)
	if len(d) != 3 || d[0].Path != "pod/a conditions" || d[0].Kubelet != "<absent>" || d[2].Slicelet != "<absent>" {
		t.Errorf("compare with absent paths = %v", d)
	}
}
