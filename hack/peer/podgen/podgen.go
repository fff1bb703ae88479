// Package podgen generates Pod manifests from a seed over the resource grammar the kubelet's
// decisions depend on (containers, init containers, sidecars, requests and limits in every
// subset including zero and limits-only, pod-level resources, hugepages, ephemeral storage,
// extended resources, priority and priorityClassName, API-object references, odd quantity
// spellings), and shrinks a manifest that shows a difference to a minimal one.
//
// A manifest is kept as a generic YAML tree (Manifest), not a v1.Pod: quantities stay exactly
// as written ("1001m", "0.5Gi", "1e3"), so both decoders see the same text, and the shrinker can
// drop any node.
package podgen

import (
	"fmt"
	"math/rand/v2"

	"sigs.k8s.io/yaml"
)

// Manifest is a pod manifest as a YAML tree: maps are map[string]any, lists []any, leaves
// strings, integers and booleans.
type Manifest map[string]any

// YAML renders the manifest.
func (m Manifest) YAML() []byte {
	out, err := yaml.Marshal(map[string]any(m))
	if err != nil {
		// A tree of maps, lists, strings and integers always marshals.
		panic(fmt.Sprintf("podgen: marshal: %v", err))
	}
	return out
}

// Name is metadata.name.
func (m Manifest) Name() string {
	md, _ := m["metadata"].(map[string]any)
	s, _ := md["name"].(string)
	return s
}

// Quantity spellings, deliberately odd: millis that do not divide into shares or quota evenly,
// decimal fractions of binary units, exponents, zero.
var (
	cpuValues    = []string{"0", "1m", "10m", "100m", "250m", "500m", "1001m", "1", "0.5", "1.5", "2", "3", "1e-1", "0.1", "7m", "999m"}
	memoryValues = []string{"0", "1", "4097", "64Mi", "128Mi", "129M", "0.5Gi", "1Gi", "1.5Gi", "1G", "1e3", "1e9", "100M", "256Mi", "2Gi", "3Mi"}
	ephemeral    = []string{"0", "1Gi", "500Mi", "2G", "1e9"}
	hugepage2Mi  = []string{"0", "2Mi", "4Mi", "6Mi", "1Gi"}
	hugepage1Gi  = []string{"1Gi", "2Gi"}
	priorities   = []int{0, 1000, -5, 1000000, 2000000000, 2000001000}
	classes      = []string{"system-node-critical", "system-cluster-critical", "high-priority"}
)

// Pod returns manifest number index of the stream seeded by seed; the same (seed, index)
// always gives the same manifest. Its name is "g<seed>-<index>".
func Pod(seed uint64, index int) Manifest {
	g := &gen{r: rand.New(rand.NewPCG(seed, uint64(index)))}
	return g.pod(fmt.Sprintf("g%d-%d", seed, index))
}

type gen struct{ r *rand.Rand }

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

func (g *gen) pick(list []string) string { return list[g.r.IntN(len(list))] }

func (g *gen) pod(name string) Manifest {
	spec := map[string]any{}
	n := 1 + g.r.IntN(3)
	var containers []any
	for i := 0; i < n; i++ {
		containers = append(containers, g.container(fmt.Sprintf("c%d", i), false))
	}
	spec["containers"] = containers
	if g.chance(0.35) {
		var inits []any
		for i := 0; i < 1+g.r.IntN(2); i++ {
			inits = append(inits, g.container(fmt.Sprintf("i%d", i), g.chance(0.5)))
		}
		spec["initContainers"] = inits
	}
	if g.chance(0.2) {
		res := g.podLevelResources()
		if len(res) > 0 {
			spec["resources"] = res
		}
	}
	if g.chance(0.15) {
		spec["priority"] = priorities[g.r.IntN(len(priorities))]
	}
	if g.chance(0.15) {
		spec["priorityClassName"] = g.pick(classes)
	}
	if g.chance(0.04) {
		g.apiReference(spec)
	}
	md := map[string]any{"name": name}
	if g.chance(0.2) {
		md["namespace"] = "kube-system"
	}
	return Manifest{"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}
}

// apiReference adds one reference to an API object a static pod may not have.
func (g *gen) apiReference(spec map[string]any) {
	switch g.r.IntN(4) {
	case 0:
		spec["serviceAccountName"] = "default"
	case 1:
		spec["volumes"] = []any{map[string]any{"name": "cfg", "configMap": map[string]any{"name": "cfg"}}}
	case 2:
		spec["volumes"] = []any{map[string]any{"name": "sec", "secret": map[string]any{"secretName": "sec"}}}
	default:
		spec["imagePullSecrets"] = []any{map[string]any{"name": "regcred"}}
	}
}

func (g *gen) container(name string, sidecar bool) map[string]any {
	c := map[string]any{"name": name, "image": "registry.k8s.io/pause:3.10"}
	if sidecar {
		c["restartPolicy"] = "Always"
	}
	if g.chance(0.85) {
		if res := g.resources(false); len(res) > 0 {
			c["resources"] = res
		}
	}
	return c
}

// podLevelResources are pod-level requests and limits: mostly large enough to cover the
// containers (validation refuses less), sometimes anything.
func (g *gen) podLevelResources() map[string]any {
	if g.chance(0.3) {
		return g.resources(true)
	}
	req, lim := map[string]any{}, map[string]any{}
	for _, r := range []struct {
		name   string
		values []string
	}{{"cpu", []string{"8", "16", "10001m"}}, {"memory", []string{"16Gi", "20G", "17179869184"}}} {
		switch g.r.IntN(5) {
		case 1:
			req[r.name] = g.pick(r.values)
		case 2:
			lim[r.name] = g.pick(r.values)
		case 3:
			v := g.pick(r.values)
			req[r.name], lim[r.name] = v, v
		case 4:
			req[r.name], lim[r.name] = r.values[0], r.values[1]
		}
	}
	out := map[string]any{}
	if len(req) > 0 {
		out["requests"] = req
	}
	if len(lim) > 0 {
		out["limits"] = lim
	}
	return out
}

// resources returns a requests/limits pair: for cpu and memory every subset (absent, request
// only, limit only, equal, different), sometimes hugepages (with memory or cpu, as validation
// requires), ephemeral storage and an extended resource. Pod-level resources get only what the
// kubelet supports there (cpu, memory, hugepages).
func (g *gen) resources(podLevel bool) map[string]any {
	req, lim := map[string]any{}, map[string]any{}
	for _, r := range []struct {
		name   string
		values []string
	}{{"cpu", cpuValues}, {"memory", memoryValues}} {
		switch g.r.IntN(6) {
		case 1:
			req[r.name] = g.pick(r.values)
		case 2:
			lim[r.name] = g.pick(r.values)
		case 3, 4:
			v := g.pick(r.values)
			req[r.name], lim[r.name] = v, v
		case 5:
			req[r.name], lim[r.name] = g.pick(r.values), g.pick(r.values)
		}
	}
	if g.chance(0.12) {
		v := g.pick(hugepage2Mi)
		if g.chance(0.8) {
			req["hugepages-2Mi"], lim["hugepages-2Mi"] = v, v
		} else {
			lim["hugepages-2Mi"] = v
		}
	}
	if g.chance(0.04) {
		v := g.pick(hugepage1Gi)
		req["hugepages-1Gi"], lim["hugepages-1Gi"] = v, v
	}
	if !podLevel && g.chance(0.1) {
		switch g.r.IntN(3) {
		case 0:
			req["ephemeral-storage"] = g.pick(ephemeral)
		case 1:
			lim["ephemeral-storage"] = g.pick(ephemeral)
		default:
			v := g.pick(ephemeral)
			req["ephemeral-storage"], lim["ephemeral-storage"] = v, v
		}
	}
	if !podLevel && g.chance(0.03) {
		req["example.com/widget"], lim["example.com/widget"] = "1", "1"
	}
	out := map[string]any{}
	if len(req) > 0 {
		out["requests"] = req
	}
	if len(lim) > 0 {
		out["limits"] = lim
	}
	return out
}
