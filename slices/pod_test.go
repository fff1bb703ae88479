package slices

import (
	"errors"
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

func TestDecodePod(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr []string
		check   func(t *testing.T, p *v1.Pod)
	}{
		{"yaml", burstableYAML, nil, func(t *testing.T, p *v1.Pod) {
			if p.Name != "web" || len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Resources.Limits.Memory().Value() != 200*mi {
				t.Errorf("decoded %+v", p)
			}
		}},
		{"json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","uid":"abc"},"spec":{"containers":[{"name":"a","image":"i","resources":{"limits":{"cpu":1,"memory":"1Gi"}}}]}}`, nil,
			func(t *testing.T, p *v1.Pod) {
				if p.UID != "abc" || p.Spec.Containers[0].Resources.Limits.Cpu().MilliValue() != 1000 {
					t.Errorf("decoded %+v", p)
				}
			}},
		{"unknown fields all reported", strings.Replace(burstableYAML, "    image: nginx:1.27\n", "    image: nginx:1.27\n    imagePullPolicyy: Always\n    cpus: 2\n", 1),
			[]string{`unknown field "spec.containers[0].imagePullPolicyy"`, `unknown field "spec.containers[0].cpus"`}, nil},
		{"case mismatch is unknown", strings.Replace(burstableYAML, "kind: Pod", "Kind: Pod", 1), []string{`unknown field "Kind"`}, nil},
		{"duplicate key", strings.Replace(burstableYAML, "  name: web\n", "  name: web\n  name: web2\n", 1), []string{"already set in map"}, nil},
		{"wrong kind", strings.Replace(burstableYAML, "kind: Pod", "kind: Deployment", 1), []string{`kind: must be "Pod", got "Deployment"`}, nil},
		{"missing apiVersion and kind", "metadata: {name: x}\nspec: {containers: [{name: a, image: i}]}\n",
			[]string{`kind: must be "Pod", got ""`, `apiVersion: must be "v1", got ""`}, nil},
		{"apps/v1", strings.Replace(burstableYAML, "apiVersion: v1", "apiVersion: apps/v1", 1), []string{`apiVersion: must be "v1"`}, nil},
		{"empty", "# nothing here\n", []string{"empty document"}, nil},
		{"bad quantity", strings.Replace(burstableYAML, "cpu: 200m", "cpu: lots", 1), []string{"quantities must match"}, nil},
		{"syntax error", "kind: [Pod\n", []string{"pod manifest"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := DecodePod([]byte(tt.in))
			if len(tt.wantErr) == 0 {
				fatalIf(t, err)
				tt.check(t, p)
				return
			}
			if err == nil {
				t.Fatalf("decoded %+v, want error", p)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	t.Run("ErrNotPod", func(t *testing.T) {
		_, err := DecodePod([]byte(strings.Replace(burstableYAML, "kind: Pod", "kind: Service", 1)))
		if !errors.Is(err, ErrNotPod) {
			t.Errorf("err = %v, want ErrNotPod", err)
		}
	})
}

func TestDecodePods(t *testing.T) {
	second := strings.Replace(burstableYAML, "name: web", "name: db", 1)
	bad := strings.Replace(burstableYAML, "kind: Pod", "kind: Job", 1)
	stream := "---\n# leading comment document\n---\n" + burstableYAML + "---\n" + bad + "---\n" + second + "---\n"
	docs, err := DecodePods([]byte(stream))
	if err == nil || !strings.Contains(err.Error(), "document 1: pod manifest: kind") {
		t.Errorf("err = %v, want document 1 kind error", err)
	}
	if len(docs) != 2 || docs[0].Index != 0 || docs[0].Pod.Name != "web" || docs[1].Index != 2 || docs[1].Pod.Name != "db" {
		t.Errorf("docs = %+v", docs)
	}
	docs, err = DecodePods([]byte(burstableYAML))
	if err != nil || len(docs) != 1 {
		t.Errorf("single document: %v, %+v", err, docs)
	}
	docs, err = DecodePods(nil)
	if err != nil || len(docs) != 0 {
		t.Errorf("empty stream: %v, %+v", err, docs)
	}
}

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
		p, err := DecodePod([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return p
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
