package conformance

import (
	"regexp"
	"strings"
	"testing"
)

// junit is a report as e2e.test writes it (framework/internal/junit: no message attribute,
// the failure's text in the body), with specs outside the focus and a suite-level node.
const junit = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="5" disabled="0" errors="0" failures="1" time="12.5">
  <testsuite name="Kubernetes e2e suite" package="/e2e" tests="5" disabled="0" skipped="2" errors="0" failures="1" time="12.5">
    <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="1"></testcase>
    <testcase name="[It] [sig-node] Pods should get a host IP [Conformance] [NodeConformance]" classname="Kubernetes e2e suite" status="passed" time="3"></testcase>
    <testcase name="[It] [sig-node] Pods should support remote command execution over websockets [Conformance] [NodeConformance]" classname="Kubernetes e2e suite" status="failed" time="5">
      <failure type="failed">[FAILED] Failed to open websocket to wss://127.0.0.1:6443/exec: bad status 404&#xA;In [It] at: pods.go:560</failure>
    </testcase>
    <testcase name="[It] [sig-node] Pods should be updated [Conformance] [NodeConformance]" classname="Kubernetes e2e suite" status="failed" time="5">
      <failure type="failed">[FAILED] Timed out after 300.001s.&#xA;&#xA;expected pod to be running&#xA;In [It] at: pods.go:60&#xA;more</failure>
    </testcase>
    <testcase name="[It] [sig-node] ImageVolume should succeed with pod and pull policy of Always [Conformance]" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
    <testcase name="[It] [sig-apps] Deployment should run [Conformance]" classname="Kubernetes e2e suite" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
  </testsuite>
</testsuites>`

func TestParseJUnit(t *testing.T) {
	rs, err := ParseJUnit([]byte(junit), regexp.MustCompile(Focus))
	if err != nil {
		t.Fatal(err)
	}
	want := Results{
		"[sig-node] Pods should get a host IP [Conformance] [NodeConformance]": {Status: "passed"},
		"[sig-node] Pods should support remote command execution over websockets [Conformance] [NodeConformance]": {Status: "failed",
			Message: "Failed to open websocket to wss://127.0.0.1:6443/exec: bad status 404"},
		"[sig-node] ImageVolume should succeed with pod and pull policy of Always [Conformance]": {Status: "skipped", Message: "skipped"},
		"[sig-node] Pods should be updated [Conformance] [NodeConformance]":                      {Status: "failed", Message: "Timed out after 300.001s. expected pod to be running"},
	}
	if len(rs) != len(want) {
		t.Fatalf("results %v, want %v", rs, want)
	}
	for n, w := range want {
		if rs[n] != w {
			t.Errorf("%s: %+v, want %+v", n, rs[n], w)
		}
	}
	if c := Count(rs); c != (Counts{Selected: 4, Ran: 3, Passed: 1, Failed: 2, Skipped: 1}) {
		t.Errorf("counts %+v", c)
	}
	if _, err := ParseJUnit([]byte("<testsuites"), regexp.MustCompile(Focus)); err == nil {
		t.Error("a truncated report: no error")
	}
}

func TestCompare(t *testing.T) {
	kubelet := Results{"a": {Status: "passed"}, "b": {Status: "passed"}, "c": {Status: "failed", Message: "timed out"}, "d": {Status: "skipped"}}
	slicelet := Results{"a": {Status: "passed"}, "b": {Status: "failed", Message: "no exec"}, "c": {Status: "failed", Message: "timed out too"}, "d": {Status: "skipped"}, "e": {Status: "passed"}}
	var got []string
	for _, r := range Compare(kubelet, slicelet) {
		got = append(got, r.Spec+":"+r.Kubelet.Status+"/"+r.Slicelet.Status)
	}
	if w := "b:passed/failed c:failed/failed e:not run/passed"; strings.Join(got, " ") != w {
		t.Errorf("Compare = %v, want %s", got, w)
	}
	section := Section(kubelet, slicelet, []Skip{{Pattern: "x|y", Why: "because"}}, "intro\n")
	for _, w := range []string{"intro\n", "| failed | 1 | 2 |", "| b | passed | failed | no exec |", "| c | failed | failed | timed out; timed out too |", "| `x\\|y` | because |"} {
		if !strings.Contains(section, w) {
			t.Errorf("section lacks %q:\n%s", w, section)
		}
	}
	if s := Section(kubelet, nil, nil, ""); !strings.Contains(s, "| passed | 2 | not run |") {
		t.Errorf("section without slicelet results:\n%s", s)
	}
	if f := Failures(slicelet, "/log"); f != "- b — failed: no exec\n- c — failed: timed out too\n\nFull output: /log\n" {
		t.Errorf("Failures = %q", f)
	}
}
