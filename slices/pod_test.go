package slices

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

const burstableYAML = `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: default
spec:
  containers:
  - name: app
    image: nginx:1.27
    resources:
      requests: {cpu: 100m, memory: 100Mi}
      limits: {cpu: 200m, memory: 200Mi}
`

func TestValidatePod(t *testing.T) {
	valid := func() *v1.Pod { return podOf(c("a", "100m/100Mi", "200m/200Mi")) }
	tests := []struct {
		name   string
		mutate func(p *v1.Pod)
		want   []string
	}{
		{"valid", func(*v1.Pod) {}, nil},
		{"negative memory limit", func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, c("b", "—", "—/-1Gi"))
		}, []string{`spec.containers[1].resources.limits.memory: Invalid value: "-1Gi": must be non-negative`}},
		{"bad name", func(p *v1.Pod) { p.Name = "Web_1" }, []string{`metadata.name: Invalid value: "Web_1": a lowercase RFC 1123 subdomain`}},
		{"missing name", func(p *v1.Pod) { p.Name = "" }, []string{`metadata.name: Required value`}},
		{"bad namespace", func(p *v1.Pod) { p.Namespace = "kube.system" }, []string{`metadata.namespace: Invalid value: "kube.system"`}},
		{"bad uid", func(p *v1.Pod) { p.UID = "a_b" }, []string{`metadata.uid: Invalid value: "a_b"`}},
		{"duplicate across init and regular", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{c("a", "—", "—")}
		}, []string{`spec.containers[0].name: Duplicate value: "a"`}},
		{"no containers", func(p *v1.Pod) { p.Spec.Containers = nil }, []string{`spec.containers: Required value`}},
		{"bad container name (no image is the runtime's business)", func(p *v1.Pod) { p.Spec.Containers[0].Image = ""; p.Spec.Containers[0].Name = "A" },
			[]string{`spec.containers[0].name: Invalid value: "A"`}},
		{"too many containers", func(p *v1.Pod) {
			for i := range MaxContainers {
				p.Spec.InitContainers = append(p.Spec.InitContainers, c("i"+strconv.Itoa(i), "—", "—"))
			}
		}, []string{`spec.containers: Too many: 257: must have at most 256 items`}},
		{"request above limit", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests = rl("300m/100Mi") },
			[]string{`spec.containers[0].resources.requests.cpu: Invalid value: "300m": must be less than or equal to cpu limit of 200m`}},
		{"absurd cpu", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Limits = rl("2000001/200Mi") },
			[]string{`spec.containers[0].resources.limits.cpu: Invalid value: "2000001": must be at most 1000000 cpus`}},
		{"absurd memory", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Limits = rl("1/5Ei") },
			[]string{`spec.containers[0].resources.limits.memory: Invalid value: "5Ei": must be at most 4Ei`}},
		{"unsupported limit", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Limits = rl("1/1Gi,nvidia.com/gpu=1") },
			[]string{`spec.containers[0].resources.limits.nvidia.com/gpu: Invalid value: "nvidia.com/gpu": slicelet can only enforce limits on cpu, memory, ephemeral-storage and hugepages-<size>`}},
		{"supported limits", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits = rl("1/1Gi,ephemeral-storage=1Gi,hugepages-2Mi=4Mi")
			p.Spec.Containers[0].Resources.Requests = rl("1/1Gi,hugepages-2Mi=4Mi")
		}, nil},
		{"bad hugepage size", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests = rl("1/1Gi,hugepages-big=4Mi") },
			[]string{`spec.containers[0].resources.requests.hugepages-big: Invalid value: "hugepages-big": page size must be a positive quantity`}},
		{"negative overhead", func(p *v1.Pod) { p.Spec.Overhead = rl("-1/—") },
			[]string{`spec.overhead.cpu: Invalid value: "-1": must be non-negative`}},
		{"pod-level unsupported and above limit", func(p *v1.Pod) {
			withPodLevel(p, "2/1Gi,ephemeral-storage=1Gi", "1/1Gi")
		}, []string{`spec.resources.requests.ephemeral-storage: Unsupported value: "ephemeral-storage"`,
			`spec.resources.requests.cpu: Invalid value: "2": must be less than or equal to cpu limit of 1`}},
		{"hugepages without cpu or memory (the API's rule)", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: rl("—/—,hugepages-2Mi=4Mi"), Limits: rl("—/—,hugepages-2Mi=4Mi")}
		}, []string{`spec.containers[0].resources: Forbidden: HugePages require cpu or memory`}},
		{"pod-level hugepages without cpu or memory", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{}
			withPodLevel(p, "—/—,hugepages-2Mi=4Mi", "—/—,hugepages-2Mi=4Mi")
		}, []string{`spec.resources: Forbidden: HugePages require cpu or memory`}},
		{"pod-level below the containers (the API's consistency rule)", func(p *v1.Pod) {
			withPodLevel(p, "50m/50Mi", "100m/1Gi")
		}, []string{`spec.resources.requests[cpu]: Invalid value: "50m": must be greater than or equal to aggregate container requests of 100m`,
			`spec.resources.requests[memory]: Invalid value: "50Mi": must be greater than or equal to aggregate container requests of 100Mi`,
			`spec.resources.containers[0][cpu].limits: Invalid value: "200m": must be less than or equal to pod limits of 100m`}},
		{"empty pod-level resources", func(p *v1.Pod) { p.Spec.Resources = &v1.ResourceRequirements{} },
			[]string{`spec.resources: Required value: set requests or limits`}},
		{"bad qos class", func(p *v1.Pod) { p.Status.QOSClass = "Gold" }, []string{`status.qosClass: Unsupported value: "Gold"`}},
		{"several problems at once", func(p *v1.Pod) {
			p.Name = ""
			p.UID = "x/y"
			p.Spec.Containers[0].Resources.Limits = rl("-1/-1")
		}, []string{"metadata.name: Required", "metadata.uid: Invalid", "limits.cpu: Invalid value: \"-1\"", "limits.memory: Invalid value: \"-1\""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := valid()
			tt.mutate(p)
			errs := ValidatePod(p)
			if len(tt.want) == 0 {
				if len(errs) != 0 {
					t.Errorf("unexpected errors: %v", errs)
				}
				return
			}
			agg := errs.ToAggregate()
			if agg == nil {
				t.Fatalf("no errors, want %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(agg.Error(), w) {
					t.Errorf("errors %q\nlack %q", agg.Error(), w)
				}
			}
		})
	}
}

func TestPodUID(t *testing.T) {
	decode := func(s string) *v1.Pod {
		return decodeTestPod(t, []byte(s))
	}
	a1, err := PodUID(decode(burstableYAML), "/etc/slicelet/pods/web.yaml")
	fatalIf(t, err)
	a2, err := PodUID(decode(burstableYAML), "/etc/slicelet/pods/web.yaml")
	fatalIf(t, err)
	otherSource, err := PodUID(decode(burstableYAML), "/etc/slicelet/pods/web2.yaml")
	fatalIf(t, err)
	otherContent, err := PodUID(decode(strings.Replace(burstableYAML, "200Mi", "300Mi", 1)), "/etc/slicelet/pods/web.yaml")
	fatalIf(t, err)
	if a1 != a2 {
		t.Errorf("same content and source gave %q and %q", a1, a2)
	}
	if a1 == otherSource || a1 == otherContent {
		t.Errorf("uid did not change: %q %q %q", a1, otherSource, otherContent)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(a1) {
		t.Errorf("uid %q is not UUID-shaped", a1)
	}
	if err := ValidateUID(a1); err != nil {
		t.Errorf("generated uid invalid: %v", err)
	}
	if _, err := PodSliceName(v1.PodQOSBurstable, a1); err != nil {
		t.Errorf("generated uid gives no slice: %v", err)
	}
	// Formatting-only changes of the manifest do not change the UID (the object is hashed).
	reformatted := strings.Replace(burstableYAML, "{cpu: 100m, memory: 100Mi}", "\n        memory: 100Mi\n        cpu: 100m", 1)
	a3, err := PodUID(decode(reformatted), "/etc/slicelet/pods/web.yaml")
	fatalIf(t, err)
	if a3 != a1 {
		t.Errorf("reformatted manifest changed uid: %q vs %q", a3, a1)
	}
	set := decode(burstableYAML)
	set.UID = "given-uid"
	if got, _ := PodUID(set, "x"); got != "given-uid" {
		t.Errorf("PodUID with metadata.uid = %q", got)
	}
}
