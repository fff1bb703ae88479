package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// fieldsV1 is the API server's record of the fields set in v (a JSON object): "f:<name>" for
// each field, "k:{...}" for a list item with a name or a port, "v:" for a scalar item, "." for
// the item itself.
func fieldsV1(v any) map[string]any {
	out := map[string]any{}
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			out["f:"+k] = fieldsV1(sub)
		}
	case []any:
		for _, item := range v {
			switch it := item.(type) {
			case map[string]any:
				key := map[string]any{}
				for _, k := range []string{"name", "containerPort", "port", "type", "mountPath"} {
					if kv, ok := it[k]; ok {
						key[k] = kv
						break
					}
				}
				b, _ := json.Marshal(key)
				sub := fieldsV1(it)
				sub["."] = map[string]any{}
				out["k:"+string(b)] = sub
			default:
				b, _ := json.Marshal(it)
				out["v:"+string(b)] = map[string]any{}
			}
		}
	}
	return out
}

// withManagedFields gives obj the managedFields the API server would record: its creator's
// (metadata and spec) and, when it has a status, its status writer's.
func withManagedFields(t testing.TB, obj metav1.Object, creator, statusWriter string) {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	entry := func(manager string, fields map[string]any, sub string) metav1.ManagedFieldsEntry {
		raw, _ := json.Marshal(fields)
		ts := metav1.NewTime(time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC))
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			Time: &ts, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(string(raw)), Subresource: sub}
	}
	meta, _ := m["metadata"].(map[string]any)
	spec := map[string]any{"f:spec": fieldsV1(m["spec"])}
	if meta != nil {
		spec["f:metadata"] = fieldsV1(map[string]any{"labels": meta["labels"], "annotations": meta["annotations"], "ownerReferences": meta["ownerReferences"]})
	}
	mf := []metav1.ManagedFieldsEntry{entry(creator, spec, "")}
	if st, ok := m["status"]; ok && statusWriter != "" {
		mf = append(mf, entry(statusWriter, map[string]any{"f:status": fieldsV1(st)}, "status"))
	}
	obj.SetManagedFields(mf)
}

// fullAPIPod is a pod as a Deployment's ReplicaSet makes it and the API server returns it once the
// kubelet reported it Running: two containers, probes, env, volumes, its status.
func fullAPIPod(t testing.TB, i int) *v1.Pod {
	t.Helper()
	start := metav1.NewTime(time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC))
	probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10}
	ctr := func(name string) v1.Container {
		return v1.Container{Name: name, Image: "registry.example/team/" + name + ":1.2.3",
			Args:  []string{"--listen=:8080", "--log-level=info"},
			Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: v1.ProtocolTCP}},
			Env: []v1.EnvVar{{Name: "MODE", Value: "production"},
				{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}},
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
				Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")}},
			VolumeMounts:   []v1.VolumeMount{{Name: "config", MountPath: "/etc/app"}, {Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			LivenessProbe:  probe,
			ReadinessProbe: probe, TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile, ImagePullPolicy: v1.PullIfNotPresent}
	}
	status := func(name string) v1.ContainerStatus {
		return v1.ContainerStatus{Name: name, Ready: true, Image: "registry.example/team/" + name + ":1.2.3", ImageID: "registry.example/team/" + name + "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			ContainerID: fmt.Sprintf("containerd://%064d", i), State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: start}}}
	}
	grace := int64(30)
	pod := &v1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-7d4b9c8f6-%05d", i), Namespace: "shop", UID: types.UID(fmt.Sprintf("uid-%05d", i)), ResourceVersion: fmt.Sprint(1000 + i),
			GenerateName: "web-7d4b9c8f6-", CreationTimestamp: start,
			Labels:          map[string]string{"app.kubernetes.io/name": "web", "pod-template-hash": "7d4b9c8f6"},
			Annotations:     map[string]string{"prometheus.io/scrape": "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d4b9c8f6", UID: "rs-uid", Controller: new(bool), BlockOwnerDeletion: new(bool)}}},
		Spec: v1.PodSpec{NodeName: "node-1", ServiceAccountName: "web", Containers: []v1.Container{ctr("app"), ctr("sidecar")},
			Volumes: []v1.Volume{{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "web-config"}}}},
				{Name: "kube-api-access", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
					{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: new(int64)}},
					{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}}}}}}},
			RestartPolicy: v1.RestartPolicyAlways, DNSPolicy: v1.DNSClusterFirst, SchedulerName: "default-scheduler", TerminationGracePeriodSeconds: &grace,
			Tolerations: []v1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, HostIP: "192.0.2.10", PodIP: fmt.Sprintf("10.88.%d.%d", i/250, i%250+2), StartTime: &start, QOSClass: v1.PodQOSBurstable,
			Conditions:        []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: start}, {Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: start}},
			ContainerStatuses: []v1.ContainerStatus{status("app"), status("sidecar")}},
	}
	withManagedFields(t, pod, "kube-controller-manager", "slicelet")
	return pod
}

// apiService is a service as a Helm chart makes it.
func apiService(t testing.TB, ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
	t.Helper()
	s := &v1.Service{TypeMeta: metav1.TypeMeta{Kind: "Service", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("svc-uid-" + name), ResourceVersion: "7",
			Labels:      map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "Helm", "helm.sh/chart": name + "-1.0.0"},
			Annotations: map[string]string{"meta.helm.sh/release-name": name, "meta.helm.sh/release-namespace": ns}},
		Spec: v1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}, Ports: ports, Selector: map[string]string{"app.kubernetes.io/name": name},
			Type: v1.ServiceTypeClusterIP, SessionAffinity: v1.ServiceAffinityNone, IPFamilies: []v1.IPFamily{v1.IPv4Protocol}}}
	withManagedFields(t, s, "helm", "")
	return s
}

// TestInformerTransformsKeepWhatIsRead: what the transforms leave is what slicelet reads of
// each object — the pod whole but its managedFields, the service environment variables, the
// node's admission (labels, name, taints) — and they are idempotent.
func TestInformerTransformsKeepWhatIsRead(t *testing.T) {
	pod := fullAPIPod(t, 1)
	got, _ := stripPod(pod.DeepCopy())
	want := pod.DeepCopy()
	want.ManagedFields = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stripped pod differs beyond managedFields")
	}
	if again, _ := stripPod(got); !reflect.DeepEqual(again, want) {
		t.Error("stripPod is not idempotent")
	}

	svcs := []*v1.Service{
		apiService(t, "default", "kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(6443)}),
		apiService(t, "shop", "web", "10.96.3.4", v1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromString("http")},
			v1.ServicePort{Name: "metrics", Port: 9090, Protocol: v1.ProtocolTCP}),
		apiService(t, "shop", "dns-cache", "10.96.3.5", v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}),
		apiService(t, "shop", "headless", v1.ClusterIPNone, v1.ServicePort{Port: 5432}),
		apiService(t, "other", "db", "10.96.9.9", v1.ServicePort{Port: 5432}),
	}
	var stripped []*v1.Service
	for _, s := range svcs {
		o, _ := stripService(s.DeepCopy())
		again, _ := stripService(o)
		if !reflect.DeepEqual(o, again) {
			t.Errorf("stripService is not idempotent for %s", s.Name)
		}
		stripped = append(stripped, o.(*v1.Service))
	}
	for _, ns := range []string{"shop", "other", "default"} {
		for _, links := range []bool{true, false} {
			if a, b := ServiceEnvVars(svcs, ns, links), ServiceEnvVars(stripped, ns, links); !reflect.DeepEqual(a, b) || len(a) == 0 {
				t.Errorf("namespace %s, links %v: service variables %v from the stripped services, %v from the whole ones", ns, links, b, a)
			}
		}
	}

	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "n1", ResourceVersion: "9",
		Labels:      map[string]string{"kubernetes.io/hostname": "node-1", "topology.kubernetes.io/zone": "a", "disktype": "ssd"},
		Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"}},
		Spec: v1.NodeSpec{PodCIDR: "10.88.0.0/24", Taints: []v1.Taint{{Key: "dedicated", Value: "db", Effect: v1.TaintEffectNoSchedule}}},
		Status: v1.NodeStatus{Images: []v1.ContainerImage{{Names: []string{"registry.example/team/app:1.2.3"}, SizeBytes: 1 << 20}},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}}}
	withManagedFields(t, node, "slicelet", "slicelet")
	o, _ := stripNode(node.DeepCopy())
	sn := o.(*v1.Node)
	if again, _ := stripNode(sn); !reflect.DeepEqual(again, sn) {
		t.Error("stripNode is not idempotent")
	}
	if sn.Name != node.Name || !reflect.DeepEqual(sn.Labels, node.Labels) || !reflect.DeepEqual(sn.Spec, node.Spec) ||
		len(sn.ManagedFields) != 0 || len(sn.Status.Images) != 0 || len(sn.Annotations) != 0 {
		t.Errorf("stripped node %+v", sn)
	}
	for _, term := range []v1.NodeSelectorRequirement{
		{Key: "disktype", Operator: v1.NodeSelectorOpIn, Values: []string{"ssd"}},
		{Key: "disktype", Operator: v1.NodeSelectorOpIn, Values: []string{"hdd"}},
	} {
		p := &v1.Pod{Spec: v1.PodSpec{Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{term}, MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"node-1"}}}}}}}}}}
		a, _ := nodeaffinity.GetRequiredNodeAffinity(p).Match(node)
		b, _ := nodeaffinity.GetRequiredNodeAffinity(p).Match(sn)
		if a != b {
			t.Errorf("affinity %v: %v on the whole node, %v on the stripped one", term, a, b)
		}
	}
}

// TestPodInformerKeepsNoManagedFields: the pod and node informers cluster mode runs store
// their objects transformed.
func TestPodInformerKeepsNoManagedFields(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"a": "b"}}, Status: v1.NodeStatus{Images: []v1.ContainerImage{{Names: []string{"x"}}}}}
	withManagedFields(t, node, "slicelet", "slicelet")
	f := newFixture(t, fullAPIPod(t, 1), node)
	// The fake API has no streaming lists (no bookmark ends the initial events): refused, the
	// reflectors list and watch.
	f.cs.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		if w, ok := a.(k8stesting.WatchActionImpl); ok && w.ListOptions.SendInitialEvents != nil && *w.ListOptions.SendInitialEvents {
			return true, nil, errors.New("streaming lists not supported")
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for _, inf := range []cache.SharedIndexInformer{f.agent.podInformer(), f.agent.nodeInformer()} {
		go inf.RunWithContext(ctx)
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatal("not synced")
		}
		objs := inf.GetStore().List()
		if len(objs) != 1 {
			t.Fatalf("%d objects stored", len(objs))
		}
		m := objs[0].(metav1.Object)
		if len(m.GetManagedFields()) != 0 {
			t.Errorf("%s stored with its managedFields", m.GetName())
		}
		if n, ok := objs[0].(*v1.Node); ok && (len(n.Status.Images) != 0 || n.Labels["a"] != "b") {
			t.Errorf("node stored as %+v", n)
		}
	}
}

// retained is the heap the objects an informer's cache holds take, per object: the list the
// API server sends (JSON) decoded, each item passed through transform (nil for none) and
// stored, as the reflector and the informer's indexer do.
func retained(t testing.TB, objs []k8sruntime.Object, transform cache.TransformFunc) (perObject float64) {
	t.Helper()
	var list k8sruntime.Object
	switch objs[0].(type) {
	case *v1.Pod:
		l := &v1.PodList{}
		for _, o := range objs {
			l.Items = append(l.Items, *o.(*v1.Pod))
		}
		list = l
	case *v1.Service:
		l := &v1.ServiceList{}
		for _, o := range objs {
			l.Items = append(l.Items, *o.(*v1.Service))
		}
		list = l
	}
	wire, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	decoded := list.DeepCopyObject()
	reflect.ValueOf(decoded).Elem().Set(reflect.Zero(reflect.TypeOf(decoded).Elem()))
	if err := json.Unmarshal(wire, decoded); err != nil {
		t.Fatal(err)
	}
	items, err := meta.ExtractList(decoded)
	if err != nil {
		t.Fatal(err)
	}
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, it := range items {
		var o any = it
		if transform != nil {
			if o, err = transform(o); err != nil {
				t.Fatal(err)
			}
		}
		if err := store.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	decoded, items = nil, nil
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	after := ms.HeapAlloc
	if n := len(store.List()); n != len(objs) {
		t.Fatalf("%d objects stored, want %d", n, len(objs))
	}
	runtime.KeepAlive(store)
	runtime.KeepAlive(wire)
	runtime.KeepAlive(list)
	runtime.KeepAlive(objs)
	return (float64(after) - float64(before)) / float64(len(objs))
}

// TestInformerRetainedBytes measures what the pod and service informers' caches hold per
// object, whole and transformed, and fails if the transforms save nothing. The numbers are
// heap bytes after a GC (go test -run TestInformerRetainedBytes -v ./internal/cluster).
func TestInformerRetainedBytes(t *testing.T) {
	const n = 2000
	var pods, svcs []k8sruntime.Object
	for i := range n {
		pods = append(pods, fullAPIPod(t, i))
		svcs = append(svcs, apiService(t, fmt.Sprintf("ns-%d", i%20), fmt.Sprintf("svc-%d", i), fmt.Sprintf("10.96.%d.%d", i/250, i%250+1),
			v1.ServicePort{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}))
	}
	var lines []string
	for _, c := range []struct {
		name      string
		objs      []k8sruntime.Object
		transform cache.TransformFunc
	}{{"pod", pods, stripPod}, {"service", svcs, stripService}} {
		whole := retained(t, c.objs, nil)
		kept := retained(t, c.objs, c.transform)
		lines = append(lines, fmt.Sprintf("%s: %.0f bytes retained per object whole, %.0f transformed", c.name, whole, kept))
		if kept >= whole {
			t.Errorf("%s: the transform saves nothing: %.0f bytes per object whole, %.0f transformed", c.name, whole, kept)
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		t.Log(l)
	}
}
