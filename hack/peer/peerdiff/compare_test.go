package main

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/hack/peer/peerrun"
)

// withStatuses sets the agents' statuses of the first batch.
func withStatuses(rs []batchResult, s, k map[string]peerrun.PodStatus) []batchResult {
	ss, ks := rs[0].Snapshot[peerrun.Slicelet], rs[0].Snapshot[peerrun.Kubelet]
	ss.Statuses, ks.Statuses = s, k
	rs[0].Snapshot[peerrun.Slicelet], rs[0].Snapshot[peerrun.Kubelet] = ss, ks
	return rs
}

func TestCompareRun(t *testing.T) {
	key := peerrun.PodKey{Namespace: "default", Name: "web"}
	entries := []entry{{Origin: "web.yaml", Key: key, Pod: &v1.Pod{Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever}}}}
	pod := func(qos, shares, adj string, containers ...string) peerrun.Pod {
		p := peerrun.Pod{Ready: true, Cgroup: "kubepods.slice/pod.slice", QOS: qos, Values: peerrun.Values{"cpu.shares": shares}, Containers: map[string]peerrun.Container{}}
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
			want: []string{"v1 web.yaml default/web pod admitted: slicelet=yes kubelet=no"}},
		{name: "refused by one with its reason", results: withStatuses(run(nil, map[string]peerrun.Pod{"default/web": pod("Burstable", "102", "996", "a")}, node, node),
			map[string]peerrun.PodStatus{"default/web": {Phase: "Failed", Reason: "OutOfcpu", Message: "Node didn't have enough resource: cpu"}}, nil),
			want: []string{"v1 web.yaml default/web pod admitted: slicelet=no (Failed OutOfcpu: Node didn't have enough resource: cpu) kubelet=yes"}},
		{name: "admitted by both, a sandbox under one", results: withStatuses(run(nil, map[string]peerrun.Pod{"default/web": pod("Burstable", "102", "996", "a")}, node, node),
			map[string]peerrun.PodStatus{"default/web": {Phase: "Pending"}}, nil),
			want: []string{"v1 web.yaml default/web pod sandbox: slicelet=no kubelet=yes"}},
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
		{name: "the kubelet's cgroup manager failed", results: func() []batchResult {
			rs := run(nil, nil, node, node)
			rs[0].KubeletCgroupErrors = []string{`E1129 02:37:21.641436   16561 cgroup_manager_linux.go:408] "Unhandled Error" err="cgroup manager.Set failed: The maximum number of pending replies per connection has been reached"`}
			return rs
		}(),
			want: []string{`v1 batch-1 - run kubelet cgroup manager: slicelet=- kubelet="E1129 02:37:21.641436   16561 cgroup_manager_linux.go:408] \"Unhandled Error\" err=\"cgroup manager.Set failed: The maximum number of pending replies per connection has been reached\""`}},
		{name: "misfit batches compare no node levels", results: misfits(run(nil, nil, node, map[string]peerrun.Values{"kubepods": {"cpu.shares": "1"}}))},
		{name: "exited containers are not compared", results: run(
			map[string]peerrun.Pod{"default/web": {Ready: true, QOS: "BestEffort", Containers: map[string]peerrun.Container{"i": {State: "CONTAINER_EXITED"}}}},
			map[string]peerrun.Pod{"default/web": {Ready: true, QOS: "BestEffort", Containers: map[string]peerrun.Container{"i": {State: "CONTAINER_EXITED"}}}}, node, node)},
		{name: "finished under both: sandboxes stopped, slices gone", results: run(
			map[string]peerrun.Pod{"default/web": {}}, map[string]peerrun.Pod{"default/web": {}}, node, node)},
		{name: "a finished pod's sandbox and slice kept by one", results: run(
			map[string]peerrun.Pod{"default/web": pod("BestEffort", "2", "1000", "a")}, map[string]peerrun.Pod{"default/web": {}}, node, node),
			want: []string{
				"v1 web.yaml default/web pod sandbox ready: slicelet=yes kubelet=no",
				"v1 web.yaml default/web pod pod slice: slicelet=yes kubelet=no",
			}},
		{name: "a pod not settled under the kubelet is not compared", results: unsettled(run(
			map[string]peerrun.Pod{"default/web": pod("Burstable", "102", "999", "a", "b")}, map[string]peerrun.Pod{"default/web": pod("Burstable", "2", "1", "a")},
			node, map[string]peerrun.Values{"kubepods": {"cpu.shares": "1000"}}), peerrun.Kubelet, "default/web", "status Pending not settled, running [a]"),
			want: []string{
				"not settled: v1 batch-1 - kubepods cpu.shares: slicelet=1894 kubelet=1000 (1 pods or levels not settled under kubelet)",
				"not settled: v1 web.yaml default/web pod settled: slicelet=yes kubelet=no (kubelet: status Pending not settled, running [a])",
			}},
		{name: "a pod that runs to completion read running under one, finished under the other", results: withStatuses(run(
			map[string]peerrun.Pod{"default/web": pod("Burstable", "102", "999", "a")}, map[string]peerrun.Pod{"default/web": {}}, node, node),
			map[string]peerrun.PodStatus{"default/web": {Phase: "Running", Settled: true, Running: []string{"a"}}}, map[string]peerrun.PodStatus{"default/web": {Phase: "Succeeded", Settled: true}}),
			want: []string{"not settled: v1 web.yaml default/web pod phase: slicelet=Running kubelet=Succeeded (runs to completion: Succeeded under the kubelet, its containers [a] still running under slicelet when read)"}},
		{name: "a finished pod's sandbox kept with its containers ended is a difference", results: withStatuses(run(
			map[string]peerrun.Pod{"default/web": pod("Burstable", "102", "999")}, map[string]peerrun.Pod{"default/web": {}}, node, node),
			map[string]peerrun.PodStatus{"default/web": {Phase: "Succeeded", Settled: true}}, map[string]peerrun.PodStatus{"default/web": {Phase: "Succeeded", Settled: true}}),
			want: []string{"v1 web.yaml default/web pod sandbox ready: slicelet=yes kubelet=no", "v1 web.yaml default/web pod pod slice: slicelet=yes kubelet=no"}},
		{name: "a settled batch with a numbered batch", results: func() []batchResult {
			rs := run(nil, nil, node, map[string]peerrun.Values{"kubepods": {"cpu.shares": "1"}})
			rs[0].Batch, rs[0].Batches = 7, 9
			return rs
		}(),
			want: []string{"v1 batch-7 - kubepods cpu.shares: slicelet=1894 kubelet=1"}},
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

// unsettled marks pod key of the first batch not settled under kind.
func unsettled(rs []batchResult, kind peerrun.Kind, key, why string) []batchResult {
	rs[0].Unsettled = map[peerrun.Kind]map[string]string{kind: {key: why}}
	return rs
}

// TestSummary: a difference, a pod not settled or a batch not run each fail the run; the
// last line says which.
func TestSummary(t *testing.T) {
	for _, tc := range []struct {
		name     string
		counts   map[string]int
		versions []string
		want     string
		code     int
	}{
		{name: "clean", counts: map[string]int{}, versions: []string{"v1", "v2"}, want: "peer-diff: 9 manifests, 0 differences (v1), 0 differences (v2)\n"},
		{name: "v2 not run", counts: map[string]int{}, versions: []string{"v1"}, want: "peer-diff: 9 manifests, 0 differences (v1), - differences (v2)\n"},
		{name: "a difference", counts: map[string]int{"v2": 2}, versions: []string{"v2"}, want: "peer-diff: 9 manifests, - differences (v1), 2 differences (v2)\n", code: 1},
		{name: "not settled", counts: map[string]int{"v2 not settled": 3}, versions: []string{"v2"},
			want: "peer-diff: 9 manifests, - differences (v1), 0 differences (v2); incomplete: 3 not settled (v2)\n", code: 1},
		{name: "shards missing", counts: map[string]int{"v2 missing": 1}, versions: []string{"v2"},
			want: "peer-diff: 9 manifests, - differences (v1), 0 differences (v2); incomplete: batches not run (v2)\n", code: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			if code := summary(&out, 9, tc.counts, tc.versions); code != tc.code || out.String() != tc.want {
				t.Errorf("summary: %q, exit %d; want %q, exit %d", out.String(), code, tc.want, tc.code)
			}
		})
	}
}

// TestChangedCgroups: what readSettled waits on is what compareRun compares; a crash loop's
// container, running at one reading and not at the next, does not hold it.
func TestChangedCgroups(t *testing.T) {
	key := peerrun.PodKey{Namespace: "default", Name: "web"}
	running := peerrun.Container{State: "CONTAINER_RUNNING", Values: peerrun.Values{"cpu.max": "5000 100000"}, OOMScoreAdj: "999"}
	exited := peerrun.Container{State: "CONTAINER_EXITED"}
	pod := func(vals peerrun.Values, cs map[string]peerrun.Container) peerrun.Snapshot {
		return peerrun.Snapshot{Node: map[string]peerrun.Values{"kubepods": {"cpu.weight": "77"}}, Pods: map[peerrun.PodKey]peerrun.Pod{key: {Ready: true, Cgroup: "p", Values: vals, Containers: cs}}}
	}
	base := peerrun.Values{"cpu.weight": "2"}
	for _, tc := range []struct {
		name string
		a, b peerrun.Snapshot
		want []peerrun.PodKey
	}{
		{name: "same", a: pod(base, map[string]peerrun.Container{"a": running}), b: pod(base, map[string]peerrun.Container{"a": running})},
		{name: "a crash loop's container between runs", a: pod(base, map[string]peerrun.Container{"a": running}), b: pod(base, map[string]peerrun.Container{"a": exited})},
		{name: "a container's value written late", a: pod(base, map[string]peerrun.Container{"a": {State: "CONTAINER_RUNNING", Values: peerrun.Values{"cpu.max": "max 100000"}, OOMScoreAdj: "1"}}),
			b: pod(base, map[string]peerrun.Container{"a": running}), want: []peerrun.PodKey{key}},
		{name: "a container created", a: pod(base, map[string]peerrun.Container{"a": running}), b: pod(base, map[string]peerrun.Container{"a": running, "b": running}), want: []peerrun.PodKey{key}},
		{name: "the pod slice's value", a: pod(base, nil), b: pod(peerrun.Values{"cpu.weight": "100"}, nil), want: []peerrun.PodKey{key}},
		{name: "a pod appears", a: peerrun.Snapshot{Node: pod(base, nil).Node}, b: pod(base, nil), want: []peerrun.PodKey{key}},
		{name: "the node's levels", a: pod(base, nil), b: func() peerrun.Snapshot {
			s := pod(base, nil)
			s.Node = map[string]peerrun.Values{"kubepods": {"cpu.weight": "78"}}
			return s
		}(), want: []peerrun.PodKey{nodeLevels}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := changedCgroups(tc.a, tc.b); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("changedCgroups = %v, want %v", got, tc.want)
			}
		})
	}
}

// misfits marks the first batch as a batch of misfits.
func misfits(rs []batchResult) []batchResult {
	rs[0].Misfits = true
	return rs
}

func TestDeliberate(t *testing.T) {
	decode := func(y string) *v1.Pod {
		var p v1.Pod
		if err := yaml.Unmarshal([]byte(y), &p); err != nil {
			t.Fatal(err)
		}
		return &p
	}
	secret := decode("spec: {containers: [{name: a, env: [{name: X, valueFrom: {secretKeyRef: {name: s, key: k}}}]}]}")
	widget := decode("spec: {containers: [{name: a, resources: {limits: {example.com/widget: '1'}}}]}")
	plain := decode("spec: {containers: [{name: a}]}")
	for _, tc := range []struct {
		name string
		d    difference
		e    entry
		want bool
	}{
		{"secret reference admitted by slicelet alone", difference{field: "admitted", slicelet: "yes", kubelet: "no"}, entry{Pod: secret}, true},
		{"secret reference the other way round", difference{field: "admitted", slicelet: "no", kubelet: "yes"}, entry{Pod: secret}, false},
		{"extended resource refused by slicelet", difference{field: "admitted", slicelet: "no", kubelet: "yes"}, entry{Pod: widget}, true},
		{"extended resource refused by slicelet, its reason shown", difference{field: "admitted", slicelet: "no (Failed UnexpectedAdmissionError: Allocate failed due to cannot allocate unregistered device example.com/widget, which is unexpected)", kubelet: "yes"}, entry{Pod: widget}, true},
		{"secret reference refused by the kubelet, its reason shown", difference{field: "admitted", slicelet: "yes", kubelet: "no (Failed Rejected: static pods may not reference secrets)"}, entry{Pod: secret}, true},
		{"field not implemented yet", difference{field: "admitted", slicelet: "no", kubelet: "yes"}, entry{Pod: plain, NotYet: "spec.dnsConfig: Forbidden: pod DNS configuration is not implemented by slicelet yet"}, true},
		{"volume without a plugin refused by slicelet", difference{field: "admitted", slicelet: "no", kubelet: "yes"}, entry{Pod: plain, NoPlugin: "spec.volumes[0].cinder: Forbidden: needs a volume plugin slicelet does not have; use hostPath or emptyDir"}, true},
		{"volume without a plugin admitted by slicelet alone", difference{field: "admitted", slicelet: "yes", kubelet: "no"}, entry{Pod: plain, NoPlugin: "x"}, false},
		{"plain refusal is a difference", difference{field: "admitted", slicelet: "no", kubelet: "yes"}, entry{Pod: plain}, false},
		{"a pod the kubelet never starts, refused by slicelet", difference{field: "admitted", slicelet: "no", kubelet: "yes"}, entry{Pod: plain, Refused: "metadata.deletionTimestamp: Forbidden: a pod marked for deletion is never started"}, true},
		{"a bad qosClass refused by slicelet, whatever the kubelet did", difference{field: "admitted", slicelet: "no (refused)", kubelet: "no (Pending)"}, entry{Pod: plain, Refused: "status.qosClass: Unsupported value"}, true},
		{"refused by the kubelet alone", difference{field: "admitted", slicelet: "yes", kubelet: "no"}, entry{Pod: plain, Refused: "x"}, false},
		{"a value is never deliberate", difference{field: "cpu.shares", slicelet: "2", kubelet: "3"}, entry{Pod: secret, NotYet: "x"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := deliberate(tc.d, tc.e) != ""; got != tc.want {
				t.Errorf("deliberate = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCheckAlone(t *testing.T) {
	plain := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}, {Name: "b"}}}}
	withSecret := &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}}}}}
	entries := []entry{
		{Origin: "up.yaml", Key: peerrun.PodKey{Namespace: "default", Name: "up"}, Containers: []string{"a", "b"}, Pod: plain},
		{Origin: "stuck.yaml", Key: peerrun.PodKey{Namespace: "default", Name: "stuck"}, Containers: []string{"a", "b"}, Pod: plain},
		{Origin: "secret.yaml", Key: peerrun.PodKey{Namespace: "default", Name: "secret"}, Containers: []string{"a"}, Pod: withSecret},
		{Origin: "finished.yaml", Key: peerrun.PodKey{Namespace: "default", Name: "finished"}, Containers: []string{"a"}, Pod: plain},
	}
	results := []batchResult{{Snapshot: map[peerrun.Kind]snapshot{peerrun.Slicelet: {Pods: map[string]peerrun.Pod{
		"default/up":       {Ready: true, Containers: map[string]peerrun.Container{"a": {State: "CONTAINER_RUNNING"}, "b": {State: "CONTAINER_EXITED"}}},
		"default/stuck":    {Ready: true, Containers: map[string]peerrun.Container{"a": {State: "CONTAINER_CREATED"}}},
		"default/secret":   {Ready: true, Containers: map[string]peerrun.Container{}},
		"default/finished": {},
	}}}}}
	var out strings.Builder
	if n := checkAlone(&out, "v1", entries, results); n != 1 {
		t.Errorf("%d pods not up, want 1:\n%s", n, out.String())
	}
	want := "v1 stuck.yaml default/stuck not up under slicelet: containers a=\"CONTAINER_CREATED\" b=\"\"\n"
	if out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

// TestCheckAloneSkipsWhatCannotStart: a pod the batch did not wait for (it cannot come up on
// the node) is not reported.
func TestCheckAloneSkipsWhatCannotStart(t *testing.T) {
	plain := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}}
	up, stuck := peerrun.PodKey{Namespace: "default", Name: "up"}, peerrun.PodKey{Namespace: "default", Name: "nohostpath"}
	entries := []entry{{Origin: "up.yaml", Key: up, Containers: []string{"a"}, Pod: plain}, {Origin: "nohostpath.yaml", Key: stuck, Containers: []string{"a"}, Pod: plain}}
	results := []batchResult{{Waited: []peerrun.PodKey{up}, Snapshot: map[peerrun.Kind]snapshot{peerrun.Slicelet: {Pods: map[string]peerrun.Pod{
		"default/up":         {Ready: true, Containers: map[string]peerrun.Container{"a": {State: "CONTAINER_RUNNING"}}},
		"default/nohostpath": {Ready: true, Containers: map[string]peerrun.Container{}},
	}}}}}
	var out strings.Builder
	if n := checkAlone(&out, "v1", entries, results); n != 0 {
		t.Errorf("%d pods not up, want none:\n%s", n, out.String())
	}
}

func TestKubeletCgroupErrors(t *testing.T) {
	journal := strings.Join([]string{
		`I1129 02:37:21.508786   16561 generic.go:406] "Generic (PLEG): container finished"`,
		`E1129 02:37:21.641436   16561 cgroup_manager_linux.go:408] "Unhandled Error" err="cgroup manager.Set failed: The maximum number of pending replies per connection has been reached" logger="UnhandledError"`,
		`E1129 02:37:21.641531   16561 kubelet_node_status.go:721] "Failed to set some node status fields"`,
		`I1129 02:37:22.000000   16561 cgroup_manager_linux.go:300] "an info line of the cgroup manager"`,
	}, "\n")
	got := kubeletCgroupErrors(journal)
	want := []string{`E1129 02:37:21.641436   16561 cgroup_manager_linux.go:408] "Unhandled Error" err="cgroup manager.Set failed: The maximum number of pending replies per connection has been reached" logger="UnhandledError"`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("kubeletCgroupErrors = %q, want %q", got, want)
	}
}
