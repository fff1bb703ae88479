package slices

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	sigsyaml "sigs.k8s.io/yaml"
)

// Test notation: "cpu/memory" with "—" (or "-") for an absent value;
// "—" or "" alone for an absent list. Extra entries may follow after a comma, e.g.
// "0/0,hugepages-2Mi=1Gi".
func rl(spec string) v1.ResourceList {
	spec = strings.TrimSpace(spec)
	if spec == "" || spec == "—" || spec == "-" {
		return nil
	}
	parts := strings.Split(spec, ",")
	out := v1.ResourceList{}
	cpu, mem, ok := strings.Cut(parts[0], "/")
	if !ok {
		panic("bad resource spec " + spec)
	}
	if cpu != "—" && cpu != "-" {
		out[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "—" && mem != "-" {
		out[v1.ResourceMemory] = resource.MustParse(mem)
	}
	for _, extra := range parts[1:] {
		k, v, _ := strings.Cut(extra, "=")
		out[v1.ResourceName(k)] = resource.MustParse(v)
	}
	return out
}

// c is a container c(req; lim).
func c(name, req, lim string) v1.Container {
	return v1.Container{Name: name, Image: "registry.example/app:1", Resources: v1.ResourceRequirements{Requests: rl(req), Limits: rl(lim)}}
}

// sidecar is a restartable init container.
func sidecar(name, req, lim string) v1.Container {
	ctr := c(name, req, lim)
	always := v1.ContainerRestartPolicyAlways
	ctr.RestartPolicy = &always
	return ctr
}

// podOf builds a pod with the given containers.
func podOf(containers ...v1.Container) *v1.Pod {
	return &v1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "0f1c-22"},
		Spec:       v1.PodSpec{Containers: containers},
	}
}

// withInit adds init containers.
func withInit(p *v1.Pod, init ...v1.Container) *v1.Pod {
	p.Spec.InitContainers = append(p.Spec.InitContainers, init...)
	return p
}

// withPodLevel sets pod-level resources pod(req; lim).
func withPodLevel(p *v1.Pod, req, lim string) *v1.Pod {
	p.Spec.Resources = &v1.ResourceRequirements{Requests: rl(req), Limits: rl(lim)}
	return p
}

func u64(v uint64) *uint64 { return &v }
func i64(v int64) *int64   { return &v }

const (
	mi = int64(1) << 20
	gi = int64(1) << 30
)

func fatalIf(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func typesUID(s string) types.UID { return types.UID(s) }

// decodeTestPod decodes a test manifest strictly, as written (no defaults: the package's
// functions are given pods as their callers decoded them).
func decodeTestPod(t testing.TB, data []byte) *v1.Pod {
	t.Helper()
	var pod v1.Pod
	if err := sigsyaml.UnmarshalStrict(data, &pod); err != nil {
		t.Fatal(err)
	}
	return &pod
}
