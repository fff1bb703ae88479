package source

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slicelet/slicelet/internal/pods"
)

func desired(src, origin, ns, name string) pods.Desired {
	return pods.Desired{Source: src, Origin: origin, Pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("u-" + src + "-" + ns + "-" + name)}}}
}

func TestMerge(t *testing.T) {
	file := pods.Snapshot{Source: pods.SourceFile, Pods: []pods.Desired{
		desired("file", "/etc/slicelet/pods.d/a.yaml", "default", "a"),
		desired("file", "/etc/slicelet/pods.d/b.yaml", "default", "b"),
	}, Problems: []pods.Problem{{Origin: "/etc/slicelet/pods.d/c.yaml", Error: "broken"}}}
	api := pods.Snapshot{Source: pods.SourceAPI, Pods: []pods.Desired{
		desired("api", "api", "default", "b"),
		desired("api", "api", "default", "c"),
		desired("api", "api", "other", "a"),
	}, Problems: []pods.Problem{{Origin: "/var/lib/slicelet/pods/api/x.json", Error: "corrupt"}}}
	tests := []struct {
		name      string
		in        []pods.Snapshot
		wantPods  []string
		wantProbs []string
	}{
		{
			name:      "file wins over api, whatever the argument order",
			in:        []pods.Snapshot{api, file},
			wantPods:  []string{"default/a@a.yaml", "default/b@b.yaml", "default/c@api", "other/a@api"},
			wantProbs: []string{"broken", "corrupt", "api:default/b: pod default/b: duplicate name across sources: /etc/slicelet/pods.d/b.yaml (file source) is used, this one (api source) is not"},
		},
		{
			name:      "file first",
			in:        []pods.Snapshot{file, api},
			wantPods:  []string{"default/a@a.yaml", "default/b@b.yaml", "default/c@api", "other/a@api"},
			wantProbs: []string{"broken", "corrupt", "api:default/b: pod default/b: duplicate name across sources: /etc/slicelet/pods.d/b.yaml (file source) is used, this one (api source) is not"},
		},
		{name: "api alone", in: []pods.Snapshot{api}, wantPods: []string{"default/b@api", "default/c@api", "other/a@api"}, wantProbs: []string{"corrupt"}},
		{name: "nothing", in: nil},
		{
			name:      "duplicate inside one source",
			in:        []pods.Snapshot{{Source: pods.SourceAPI, Pods: []pods.Desired{desired("api", "api", "default", "x"), desired("api", "api", "default", "x")}}},
			wantPods:  []string{"default/x@api"},
			wantProbs: []string{"api:default/x: pod default/x: duplicate name: already defined by api:default/x"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, p := Merge(tt.in...)
			got := names(pods.Snapshot{Pods: d})
			if strings.Join(got, " ") != strings.Join(tt.wantPods, " ") {
				t.Errorf("pods = %v, want %v", got, tt.wantPods)
			}
			var probs []string
			for _, pr := range p {
				if pr.Origin == "api:default/b" || pr.Origin == "api:default/x" {
					probs = append(probs, pr.Origin+": "+pr.Error)
				} else {
					probs = append(probs, pr.Error)
				}
			}
			if strings.Join(probs, "|") != strings.Join(tt.wantProbs, "|") {
				t.Errorf("problems = %q, want %q", probs, tt.wantProbs)
			}
		})
	}
}
