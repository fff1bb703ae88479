package cluster

import (
	"slices"
	"strings"
	"testing"
)

func TestParseTop(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		pods      bool
		want      []string // name cpu memory
		wantErr   string
	}{
		{name: "nodes", out: "slicelet-1   112m   0%   723Mi   1%\nkubelet-2   98m   0%   1024Mi   2%\n",
			want: []string{"slicelet-1 112m 723Mi", "kubelet-2 98m 1Gi"}},
		{name: "a node without metrics has no row", out: "slicelet-1   <unknown>   <unknown>   <unknown>   <unknown>\nkubelet-2   98m   0%   10Mi   2%\n",
			want: []string{"kubelet-2 98m 10Mi"}},
		{name: "pods of every namespace", pods: true, out: "kube-system   kube-proxy-abcde   1m   12Mi\ndefault   web-0   0m   1Mi\n",
			want: []string{"kube-system/kube-proxy-abcde 1m 12Mi", "default/web-0 0 1Mi"}},
		{name: "empty", out: "\n", want: nil},
		{name: "short row", out: "slicelet-1 112m\n", wantErr: `row "slicelet-1 112m": want at least 4 columns`},
		{name: "not a quantity", out: "slicelet-1 lots 0% 1Mi 0%\n", wantErr: `slicelet-1: CPU "lots"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := parseTop(tc.out, tc.pods)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rows {
				got = append(got, r.Name+" "+r.CPU.String()+" "+r.Memory.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("rows %q, want %q", got, tc.want)
			}
		})
	}
}

func TestTopProblems(t *testing.T) {
	rows := func(out string, pods bool) []topRow {
		r, err := parseTop(out, pods)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	nodes := []string{"kubelet-1", "slicelet-2"}
	pods := map[string]string{"kube-system/kube-proxy-a": "kubelet-1", "kube-system/kube-proxy-b": "slicelet-2", "default/web": "slicelet-2",
		"default/top-fill-kubelet-1": "kubelet-1", "default/top-fill-slicelet-2": "slicelet-2"}
	both := rows("kubelet-1 100m 1% 500Mi 1%\nslicelet-2 90m 1% 400Mi 1%\n", false)
	fills := "default top-fill-kubelet-1 0m 49Mi\ndefault top-fill-slicelet-2 1m 50Mi\n"
	for _, tc := range []struct {
		name         string
		nodes, pods  []topRow
		wantProblems []string
	}{
		{name: "every node and a pod of each", nodes: both,
			pods: rows("kube-system kube-proxy-a 1m 10Mi\ndefault web 0m 1Mi\n"+fills, true)},
		{name: "a node without metrics", nodes: rows("kubelet-1 100m 1% 500Mi 1%\nslicelet-2 <unknown> <unknown> <unknown> <unknown>\n", false),
			pods:         rows("kube-system kube-proxy-a 1m 10Mi\ndefault web 0m 1Mi\n"+fills, true),
			wantProblems: []string{"node slicelet-2: no metrics in kubectl top nodes"}},
		{name: "a node without memory", nodes: rows("kubelet-1 100m 1% 500Mi 1%\nslicelet-2 0m 0% 0Mi 0%\n", false),
			pods:         rows("kube-system kube-proxy-a 1m 10Mi\ndefault web 0m 1Mi\n"+fills, true),
			wantProblems: []string{"node slicelet-2: no memory in use"}},
		{name: "none of a node's pods", nodes: both, pods: rows("kube-system kube-proxy-a 1m 10Mi\ndefault top-fill-kubelet-1 0m 49Mi\n", true),
			wantProblems: []string{"node slicelet-2: none of its running pods [default/top-fill-slicelet-2 default/web kube-system/kube-proxy-b] in kubectl top pods",
				"node slicelet-2: no row for default/top-fill-slicelet-2 in kubectl top pods"}},
		{name: "a fill pod without what it wrote", nodes: both,
			pods:         rows("kube-system kube-proxy-a 1m 10Mi\ndefault web 0m 1Mi\ndefault top-fill-kubelet-1 0m 49Mi\ndefault top-fill-slicelet-2 1m 2Mi\n", true),
			wantProblems: []string{"node slicelet-2: default/top-fill-slicelet-2 uses 2Mi, want 48 to 72Mi (it wrote 48Mi to tmpfs)"}},
		{name: "a fill pod with far more", nodes: both,
			pods:         rows("kube-system kube-proxy-a 1m 10Mi\ndefault web 0m 1Mi\ndefault top-fill-kubelet-1 0m 200Mi\ndefault top-fill-slicelet-2 1m 50Mi\n", true),
			wantProblems: []string{"node kubelet-1: default/top-fill-kubelet-1 uses 200Mi, want 48 to 72Mi (it wrote 48Mi to tmpfs)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := topProblems(nodes, tc.nodes, tc.pods, pods)
			if !slices.Equal(got, tc.wantProblems) {
				t.Fatalf("problems %q, want %q", got, tc.wantProblems)
			}
		})
	}
}
