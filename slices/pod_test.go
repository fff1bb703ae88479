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
		{"bad uid", func(p *v1.Pod) { p.UID = "a_b" }, []string{`metadata.uid: Invalid value: "a_b"`}},
		{"too many containers", func(p *v1.Pod) {
			for i := range MaxContainers {
				p.Spec.InitContainers = append(p.Spec.InitContainers, c("i"+strconv.Itoa(i), "—", "—"))
			}
		}, []string{`spec.containers: Too many: 257: must have at most 256 items`}},
		{"absurd cpu", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Limits = rl("2000001/200Mi") },
			[]string{`spec.containers[0].resources.limits.cpu: Invalid value: "2000001": must be at most 1000000 cpus`}},
		{"absurd memory", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Limits = rl("1/5Ei") },
			[]string{`spec.containers[0].resources.limits.memory: Invalid value: "5Ei": must be at most 4Ei`}},
		{"unsupported limit", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Limits = rl("1/1Gi,kubernetes.io/batteries=1") },
			[]string{`spec.containers[0].resources.limits.kubernetes.io/batteries: Invalid value: "kubernetes.io/batteries": slicelet can only enforce limits on cpu, memory, ephemeral-storage, hugepages-<size> and extended resources`}},
		{"an extended resource's limit: a device plugin's devices", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Limits = rl("1/1Gi,nvidia.com/gpu=1") }, nil},
		{"supported limits", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits = rl("1/1Gi,ephemeral-storage=1Gi,hugepages-2Mi=4Mi")
			p.Spec.Containers[0].Resources.Requests = rl("1/1Gi,hugepages-2Mi=4Mi")
		}, nil},
		{"bad hugepage size", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests = rl("1/1Gi,hugepages-big=4Mi") },
			[]string{`spec.containers[0].resources.requests.hugepages-big: Invalid value: "hugepages-big": page size must be a positive quantity`}},
		{"empty pod-level resources", func(p *v1.Pod) { p.Spec.Resources = &v1.ResourceRequirements{} }, nil},
		{"empty pod-level maps", func(p *v1.Pod) {
			p.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}
		}, nil},
		{"bad qos class", func(p *v1.Pod) { p.Status.QOSClass = "Gold" }, []string{`status.qosClass: Unsupported value: "Gold"`}},
		{"several problems at once", func(p *v1.Pod) {
			p.UID = "x/y"
			p.Spec.Containers[0].Resources.Limits = rl("2000001/5Ei")
		}, []string{"metadata.uid: Invalid", `limits.cpu: Invalid value: "2000001"`, `limits.memory: Invalid value: "5Ei"`}},
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
