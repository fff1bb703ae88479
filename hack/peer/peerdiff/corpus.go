package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	resourcehelper "k8s.io/component-helpers/resource"
	k8sv1 "k8s.io/kubernetes/pkg/apis/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/hack/peer/corpus"
	"github.com/slicelet/slicelet/hack/peer/peerrun"
	"github.com/slicelet/slicelet/hack/peer/podgen"
	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/pods/podfields"
	"github.com/slicelet/slicelet/internal/testharness/critest"
)

// maxManifestBytes bounds one corpus file: a directory written for real clusters may hold
// anything.
const maxManifestBytes = 1 << 20

// entry is one pod of the prepared corpus: one Pod document, rewritten to run offline.
type entry struct {
	// Origin is where it came from: the corpus file (with "#n" for the n-th document of a
	// multi-document file) or the generated pod's name.
	Origin string `json:"origin"`
	// Key is its namespace and name, unique in the corpus.
	Key peerrun.PodKey `json:"key"`
	// Containers are its regular containers' names (the ones that must be running).
	Containers []string `json:"containers"`
	// CPUMilli and MemoryBytes are its effective requests (pod-level resources included, as
	// admission counts them); zero when it does not decode as a Pod.
	CPUMilli    int64 `json:"cpuMilli"`
	MemoryBytes int64 `json:"memoryBytes"`
	// Scalar is set when it requests or limits a resource other than cpu, memory and
	// ephemeral-storage (hugepages, extended resources), which the node has none of.
	Scalar bool `json:"scalar,omitempty"`
	// ByDesign is set when one agent refuses it by design: it reads a ConfigMap or Secret
	// (the kubelet refuses such static pods, slicelet serves them), has a field slicelet
	// does not implement yet (NotYet) or a volume slicelet has no plugin for (NoPlugin).
	ByDesign bool `json:"byDesign,omitempty"`
	// Objects is set when it reads a ConfigMap or Secret: the corpus has Pod documents only,
	// so under neither agent does it come up (slicelet waits for the object, the kubelet
	// refuses the static pod), and no batch waits for it.
	Objects bool `json:"objects,omitempty"`
	// NoVolume names a volume no node here can give the pod (its type needs an API server or
	// a volume plugin: a claim, CSI, NFS, ...): under an agent that admits it, it waits for
	// it, with no sandbox, and no batch waits for it.
	NoVolume string `json:"noVolume,omitempty"`
	// NotYet lists the fields of the pod slicelet refuses because it does not implement them
	// yet (internal/pods/podfields), as slicelet reports them.
	NotYet string `json:"notYet,omitempty"`
	// NoPlugin lists the volumes of the pod slicelet refuses because it has no plugin for
	// their type (internal/pods/podfields), as slicelet reports them.
	NoPlugin string `json:"noPlugin,omitempty"`
	// Refused lists slicelet's refusals of what the kubelet accepts and then mishandles: a pod
	// its pod worker never starts (metadata.deletionTimestamp, a terminal status.phase) and a
	// status.qosClass outside its three values (the kubelet runs the pod outside every QoS
	// cgroup), as slicelet reports them.
	Refused string `json:"refused,omitempty"`
	// Skip, when set, is why the pod is not run (see skipReason).
	Skip string `json:"skip,omitempty"`
	// YAML is the rewritten manifest.
	YAML []byte `json:"yaml"`
	// Pod is the manifest decoded (for the divergence rules).
	Pod *v1.Pod `json:"-"`
}

// loadCorpus reads the pods of the manifests under dir: every Pod document, and the pod each
// workload (Deployment, DaemonSet, StatefulSet, Job, CronJob, ReplicaSet,
// ReplicationController) makes from its template (podsOf); other kinds, and files that are not
// Kubernetes manifests (a top-level list or scalar: an index, a values file), are skipped.
func loadCorpus(dir string) ([]entry, error) {
	var out []entry
	err := corpus.WalkManifests(dir, func(path string) error {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, maxManifestBytes+1))
		if err != nil {
			return err
		}
		if len(data) > maxManifestBytes {
			return fmt.Errorf("%s: larger than %d bytes", path, maxManifestBytes)
		}
		docs, err := splitDocuments(data)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for n, doc := range docs {
			pods, err := podsOf(doc)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			origin := path
			if len(docs) > 1 {
				origin = fmt.Sprintf("%s#%d", path, n+1)
			}
			for _, pod := range pods {
				out = append(out, entry{Origin: origin, Key: keyOf(pod), YAML: mustYAML(pod)})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("corpus %s: %w", dir, err)
	}
	return out, nil
}

// splitDocuments decodes every YAML (or JSON) document of data into a generic tree; a document
// that is not an object (a list, a scalar) is left out.
func splitDocuments(data []byte) ([]map[string]any, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []map[string]any
	for {
		var doc any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if m, ok := doc.(map[string]any); ok {
			out = append(out, m)
		}
	}
}

// generated returns n pods of podgen's stream for seed.
func generated(seed uint64, n int) []entry {
	out := make([]entry, 0, n)
	for i := range n {
		m := podgen.Pod(seed, i)
		out = append(out, entry{Origin: "generated " + m.Name(), Key: keyOf(m), YAML: m.YAML()})
	}
	return out
}

func keyOf(doc map[string]any) peerrun.PodKey {
	md, _ := doc["metadata"].(map[string]any)
	k := peerrun.PodKey{Namespace: "default"}
	k.Name, _ = md["name"].(string)
	if ns, _ := md["namespace"].(string); ns != "" {
		k.Namespace = ns
	}
	return k
}

func mustYAML(doc map[string]any) []byte {
	out, err := yaml.Marshal(doc)
	if err != nil {
		// A tree decoded from YAML always marshals.
		panic(fmt.Sprintf("peerdiff: marshal: %v", err))
	}
	return out
}

// prepare rewrites every entry to run offline ([rewrite]), gives pods whose namespace/name
// another already has a unique name, and computes their requests.
func prepare(entries []entry, applets []string) ([]entry, error) {
	seen := map[peerrun.PodKey]bool{}
	out := make([]entry, 0, len(entries))
	for _, e := range entries {
		docs, err := splitDocuments(e.YAML)
		if err != nil || len(docs) != 1 {
			return nil, fmt.Errorf("%s: not one document: %v", e.Origin, err)
		}
		doc := docs[0]
		md, _ := doc["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			doc["metadata"] = md
		}
		if e.Key.Name == "" {
			e.Key.Name = "unnamed"
		}
		for n := 2; seen[e.Key]; n++ {
			e.Key.Name = fmt.Sprintf("%s-%d", keyOf(doc).Name, n)
		}
		seen[e.Key] = true
		md["name"] = e.Key.Name
		rewrite(doc, applets)
		e.YAML = mustYAML(doc)
		var pod v1.Pod
		// What does not decode is left to the agents to refuse.
		if err := yaml.Unmarshal(e.YAML, &pod); err == nil {
			e.Pod = &pod
			e.Skip = skipReason(&pod)
			e.NotYet = refusals(e.Key.Name, e.YAML, podfields.NotYet)
			e.NoPlugin = refusals(e.Key.Name, e.YAML, podfields.NoPlugin)
			e.Objects = referencesObjects(&pod)
			e.NoVolume = offlineVolume(&pod)
			e.Refused = strings.Join(slices.DeleteFunc([]string{
				refusals(e.Key.Name, e.YAML, "is never started"),
				refusals(e.Key.Name, e.YAML, "status.qosClass: Unsupported value"),
			}, func(s string) bool { return s == "" }), "; ")
			e.ByDesign = e.NotYet != "" || e.NoPlugin != "" || e.Objects || e.Refused != ""
			requests(&e)
		}
		out = append(out, e)
	}
	return out, nil
}

// skipReason is why a pod cannot run under both agents at all, or "": the standalone kubelet
// v1.37.2 panics (and exits) syncing a pod with spec.runtimeClassName, because without an API
// server its RuntimeClass manager is nil (pkg/kubelet/runtimeclass/runtimeclass_manager.go
// LookupRuntimeHandler dereferences it); the pods of the same batch would go with it.
func skipReason(pod *v1.Pod) string {
	if pod.Spec.RuntimeClassName != nil {
		return "spec.runtimeClassName: the standalone kubelet v1.37.2 panics on it (its RuntimeClass manager is nil without an API server)"
	}
	return ""
}

// offlineVolume names the first volume of pod a node without an API server or volume plugins
// cannot set up, "" when there is none: emptyDir, hostPath and downwardAPI volumes are set up
// from the node alone (configMap, secret and projected ones are Objects).
func offlineVolume(pod *v1.Pod) string {
	for _, v := range pod.Spec.Volumes {
		s := v.VolumeSource
		if s.EmptyDir == nil && s.HostPath == nil && s.DownwardAPI == nil && s.ConfigMap == nil && s.Secret == nil && s.Projected == nil {
			return v.Name
		}
	}
	return ""
}

// refusals returns the refusals slicelet makes of the manifest whose reason contains why (a
// field it does not implement yet, a volume it has no plugin for): its own decoding
// (internal/manifest: the API's defaults, validation) and its field registry
// (internal/pods/podfields).
func refusals(name string, data []byte, why string) string {
	pods, err := manifest.Parse(name+".yaml", "/etc/slicelet/pods/"+name+".yaml", data)
	var out []string
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			if strings.Contains(line, why) {
				out = append(out, line)
			}
		}
		return strings.Join(out, "; ")
	}
	if len(pods) != 1 {
		return ""
	}
	for _, e := range podfields.Refusals(pods[0]) {
		if strings.Contains(e.Error(), why) {
			out = append(out, e.Error())
		}
	}
	return strings.Join(out, "; ")
}

// requests fills e's requests from its pod as the agents admit it: with the API's defaults
// (requests default to limits) and component-helpers' PodRequests (the larger of the init
// containers' and the regular containers' sums, sidecars counted, pod-level resources where
// set).
func requests(e *entry) {
	for _, c := range e.Pod.Spec.Containers {
		e.Containers = append(e.Containers, c.Name)
	}
	pod := e.Pod.DeepCopy()
	k8sv1.SetObjectDefaults_Pod(pod)
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	e.CPUMilli = req.Cpu().MilliValue()
	e.MemoryBytes = req.Memory().Value()
	lim := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	for _, rl := range []v1.ResourceList{req, lim} {
		for name, q := range rl {
			switch name {
			case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage:
			default:
				e.Scalar = e.Scalar || !q.IsZero()
			}
		}
	}
}

// containerLists are the lists of containers a pod spec has.
var containerLists = []string{"initContainers", "containers"}

// probes and hooks whose handlers are replaced by a command that succeeds: they test programs
// of the images the manifest names, which the test image does not have.
var (
	probeFields = []string{"livenessProbe", "readinessProbe", "startupProbe"}
	hookFields  = []string{"postStart", "preStop"}
)

// sleepForever is the command of a container whose program the test image does not have.
var sleepForever = []string{"/bin/sleep", "infinity"}

// rewrite makes a Pod document run on the node with the test image alone: every container's
// image becomes [peerrun.TestImage] with imagePullPolicy IfNotPresent; an init container that
// is not a sidecar runs `true` (offline, what it waits for or fetches is not there, and the pod
// must proceed to its containers); any other container keeps its command (command and args)
// when the program is one of the image's busybox applets and runs `sleep infinity` otherwise;
// probes and lifecycle hooks run `true`. Resources and everything else stay as
// written.
func rewrite(doc map[string]any, applets []string) {
	spec, _ := doc["spec"].(map[string]any)
	if spec == nil {
		return
	}
	for _, list := range containerLists {
		cs, _ := spec[list].([]any)
		for _, item := range cs {
			c, _ := item.(map[string]any)
			if c == nil {
				continue
			}
			c["image"], c["imagePullPolicy"] = peerrun.TestImage, "IfNotPresent"
			exits := list == "initContainers" && c["restartPolicy"] != "Always"
			argv := append(stringList(c["command"]), stringList(c["args"])...)
			if exits || len(argv) == 0 || !isApplet(argv[0], applets) {
				delete(c, "args")
				c["command"] = []any{sleepForever[0], sleepForever[1]}
				if exits {
					c["command"] = []any{"/bin/true"}
				}
			}
			for _, f := range probeFields {
				if p, ok := c[f].(map[string]any); ok {
					succeed(p)
				}
			}
			if lc, ok := c["lifecycle"].(map[string]any); ok {
				for _, f := range hookFields {
					if h, ok := lc[f].(map[string]any); ok {
						succeed(h)
					}
				}
			}
		}
	}
}

// succeed replaces a probe's or hook's handler with exec true.
func succeed(h map[string]any) {
	for _, k := range []string{"exec", "httpGet", "tcpSocket", "grpc", "sleep"} {
		delete(h, k)
	}
	h["exec"] = map[string]any{"command": []any{"/bin/true"}}
}

func stringList(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// isApplet reports whether program runs in the test image: a busybox applet by name or as
// /bin/<applet>.
func isApplet(program string, applets []string) bool {
	name, ok := strings.CutPrefix(program, "/bin/")
	if !ok && strings.Contains(program, "/") {
		return false
	}
	return slices.Contains(applets, name)
}

// allocatable is what the node offers pods under both agents.
type allocatable struct {
	CPUMilli, MemoryBytes int64
	Pods                  int
}

// misfit reports whether at least one agent refuses e, by its resources or by design (the
// deliberate divergences): its requests exceed a by themselves; it needs hugepages or
// extended resources (the node has neither; slicelet refuses extended resources outright, the
// kubelet admits a pod short of one its node never had); or e.ByDesign.
func misfit(e entry, a allocatable) bool {
	return e.Scalar || e.CPUMilli > a.CPUMilli || e.MemoryBytes > a.MemoryBytes || e.ByDesign
}

// batch is a set of pods run together.
type batch struct {
	pods []entry
	// misfits: its pods are refused, at least by one agent (see batches); its kubepods and
	// QoS levels are not compared.
	misfits bool
}

// batches splits the corpus into batches whose requests fit a, at most maxPods each, in
// corpus order, first fit. Misfits run in batches of their own, where what is compared is
// each pod's admission and, for a pod both admit, its own cgroups. (Mixed with pods that run,
// a pod one agent refuses would show in the QoS levels; and the kubelet's pod workers update
// the QoS cgroups from its active pods concurrently with admission, so even a pod both refuse
// is counted there for a moment.)
func batches(entries []entry, a allocatable, maxPods int) []batch {
	type open struct {
		pods     []entry
		cpu, mem int64
	}
	limit := min(maxPods, a.Pods)
	var bs []*open
	var misfits []entry
	for _, e := range entries {
		if e.Skip != "" {
			continue
		}
		if misfit(e, a) {
			misfits = append(misfits, e)
			continue
		}
		placed := false
		for _, b := range bs {
			if len(b.pods) < limit && b.cpu+e.CPUMilli <= a.CPUMilli && b.mem+e.MemoryBytes <= a.MemoryBytes {
				b.pods, b.cpu, b.mem = append(b.pods, e), b.cpu+e.CPUMilli, b.mem+e.MemoryBytes
				placed = true
				break
			}
		}
		if !placed {
			bs = append(bs, &open{pods: []entry{e}, cpu: e.CPUMilli, mem: e.MemoryBytes})
		}
	}
	out := make([]batch, 0, len(bs)+1)
	for _, b := range bs {
		out = append(out, batch{pods: b.pods})
	}
	for len(misfits) > 0 {
		n := min(limit, len(misfits))
		out = append(out, batch{pods: misfits[:n], misfits: true})
		misfits = misfits[n:]
	}
	return out
}

// testApplets are the programs of the test image.
func testApplets() []string { return critest.Applets() }
