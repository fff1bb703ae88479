package main

import (
	"reflect"
	"testing"

	"github.com/slicelet/slicelet/hack/peer/peerrun"
)

func TestCompareRun(t *testing.T) {
	key := peerrun.PodKey{Namespace: "default", Name: "web"}
	entries := []entry{{Origin: "web.yaml", Key: key}}
	pod := func(qos, shares, adj string, containers ...string) peerrun.Pod {
		p := peerrun.Pod{QOS: qos, Values: peerrun.Values{"cpu.shares": shares}, Containers: map[string]peerrun.Container{}}
		for _, c := range containers {
			p.Containers[c] = peerrun.Container{State: "CONTAINER_RUNNING", Values: peerrun.Values{"cpu.shares": shares}, OOMScoreAdj: adj}
		}
		return p
	}
	run := func(s, k map[string]peerrun.Pod, sNode, kNode map[string]peerrun.Values) []batchResult {
		return []batchResult{{
			Keys: []peerrun.PodKey{key},
			Snapshot: map[peerrun.Kind]snapshot{
				peerrun.Slicelet: {Node: sNode, Pods: s},
				peerrun.Kubelet:  {Node: kNode, Pods: k},
			},
		}}
	}
	node := map[string]peerrun.Values{"kubepods": {"cpu.shares": "1894"}}
	for _, tc := range []struct {
		name    string
		results []batchResult
		want    []string
	}{
		{name: "same", results: run(map[string]peerrun.Pod{"default/web": pod("Burstable", "102", "996", "a")}, map[string]peerrun.Pod{"default/web": pod("Burstable", "102", "996", "a")}, node, node)},
		{name: "ran under one only", results: run(map[string]peerrun.Pod{"default/web": pod("Burstable", "102", "996", "a")}, nil, node, node),
			want: []string{"v1 web.yaml default/web pod ran: slicelet=yes kubelet=no"}},
		{name: "values, qos, oom and a missing container", results: run(map[string]peerrun.Pod{"default/web": pod("Burstable", "102", "996", "a", "b")}, map[string]peerrun.Pod{"default/web": pod("Guaranteed", "104", "-997", "a")}, node, node),
			want: []string{
				"v1 web.yaml default/web pod qos: slicelet=Burstable kubelet=Guaranteed",
				"v1 web.yaml default/web pod cpu.shares: slicelet=102 kubelet=104",
				"v1 web.yaml default/web container a cpu.shares: slicelet=102 kubelet=104",
				"v1 web.yaml default/web container a oom_score_adj: slicelet=996 kubelet=-997",
				"v1 web.yaml default/web container b created: slicelet=yes kubelet=no",
			}},
		{name: "node level value and file", results: run(nil, nil, node, map[string]peerrun.Values{"kubepods": {"cpu.shares": "1894", "pids.max": "max"}, "burstable": {}}),
			want: []string{
				"v1 batch-1 - burstable created: slicelet=no kubelet=yes",
				"v1 batch-1 - kubepods pids.max: slicelet=(absent) kubelet=max",
			}},
		{name: "exited containers are not compared", results: run(
			map[string]peerrun.Pod{"default/web": {QOS: "BestEffort", Containers: map[string]peerrun.Container{"i": {State: "CONTAINER_EXITED"}}}},
			map[string]peerrun.Pod{"default/web": {QOS: "BestEffort", Containers: map[string]peerrun.Container{"i": {State: "CONTAINER_EXITED"}}}}, node, node)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, d := range compareRun("v1", entries, tc.results) {
				got = append(got, d.line())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
