package worker

import (
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// fakeCluster is cluster mode's objects as the worker sees them.
type fakeCluster struct {
	cms      map[string]*v1.ConfigMap
	tokens   []string // the pods' token requests: namespace/name/serviceAccount/audience
	services map[string]string
	svcErr   error
	handlers map[string]string // RuntimeClass name → handler
	claims   map[string]*v1.PersistentVolumeClaim
	volumes  map[string]*v1.PersistentVolume
	reads    int      // claim and volume reads
	patches  []string // the claims' status patches
}

func (c *fakeCluster) PersistentVolumeClaim(ns, name string) (*v1.PersistentVolumeClaim, error) {
	c.reads++
	if pvc, ok := c.claims[ns+"/"+name]; ok {
		return pvc.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("persistentvolumeclaims"), name)
}

// PatchClaimStatus applies a strategic merge patch to a stored claim, refusing it when it names
// another resourceVersion (the API server's conflict), as the status subresource does: only the
// status changes.
func (c *fakeCluster) PatchClaimStatus(ns, name string, patch []byte) (*v1.PersistentVolumeClaim, error) {
	pvc, ok := c.claims[ns+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(v1.Resource("persistentvolumeclaims"), name)
	}
	c.patches = append(c.patches, string(patch))
	var p struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, err
	}
	if rv := p.Metadata.ResourceVersion; rv != "" && rv != pvc.ResourceVersion {
		return nil, apierrors.NewConflict(v1.Resource("persistentvolumeclaims"), name, errors.New("the object has been modified"))
	}
	old, err := json.Marshal(pvc)
	if err != nil {
		return nil, err
	}
	merged, err := strategicpatch.StrategicMergePatch(old, patch, &v1.PersistentVolumeClaim{})
	if err != nil {
		return nil, err
	}
	out := &v1.PersistentVolumeClaim{}
	if err := json.Unmarshal(merged, out); err != nil {
		return nil, err
	}
	updated := pvc.DeepCopy()
	updated.Status = out.Status
	n, _ := strconv.Atoi(pvc.ResourceVersion)
	updated.ResourceVersion = strconv.Itoa(n + 1)
	c.claims[ns+"/"+name] = updated
	return updated.DeepCopy(), nil
}

func (c *fakeCluster) PersistentVolume(name string) (*v1.PersistentVolume, error) {
	c.reads++
	if pv, ok := c.volumes[name]; ok {
		return pv.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("persistentvolumes"), name)
}

func (c *fakeCluster) ConfigMap(ns, name string) (*v1.ConfigMap, error) {
	if cm, ok := c.cms[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("configmaps"), name)
}

func (c *fakeCluster) Secret(_, name string) (*v1.Secret, error) {
	return nil, apierrors.NewNotFound(v1.Resource("secrets"), name)
}

func (c *fakeCluster) ServiceAccountToken(pod *v1.Pod, src *v1.ServiceAccountTokenProjection) ([]byte, error) {
	c.tokens = append(c.tokens, pod.Namespace+"/"+pod.Name+"/"+pod.Spec.ServiceAccountName+"/"+src.Audience)
	return []byte("jwt-of-" + pod.Spec.ServiceAccountName), nil
}

func (c *fakeCluster) TrustAnchors(src *v1.ClusterTrustBundleProjection) ([]byte, error) {
	if src.Name != nil && *src.Name == "ctb-1" {
		return []byte("CTB-PEM"), nil
	}
	return nil, errors.New("combination of signerName and labelSelector matched zero ClusterTrustBundles")
}

func (c *fakeCluster) PodCertificate(pod *v1.Pod, volume string, index int, src *v1.PodCertificateProjection) ([]byte, []byte, error) {
	if src.SignerName != "example.com/issued" {
		return nil, nil, errors.New("credential bundle is not issued yet")
	}
	return []byte("KEY-" + volume + "-" + strconv.Itoa(index) + "\n"), []byte("CHAIN-" + pod.Name + "\n"), nil
}

func (c *fakeCluster) ServiceEnv(string, bool) (map[string]string, error) {
	return c.services, c.svcErr
}

func (c *fakeCluster) RuntimeHandler(name string) (string, error) {
	if h, ok := c.handlers[name]; ok {
		return h, nil
	}
	return "", apierrors.NewNotFound(schema.GroupResource{Group: "node.k8s.io", Resource: "runtimeclasses"}, name)
}

// clusterPod is testPod from cluster mode's API server.
func clusterPod(uid string) *v1.Pod {
	p := testPod(uid, "", "app")
	p.Annotations = map[string]string{pods.AnnotationSource: pods.SourceCluster}
	p.Spec.ServiceAccountName = "builder"
	return p
}

// TestClusterPodObjects: a cluster pod's ConfigMaps, token and namespace come from cluster
// mode (the kube-api-access-* volume the API server's admission adds), not from the node's
// stores, which a manifest pod of the same namespace still reads.
func TestClusterPodObjects(t *testing.T) {
	f := newFakeRT()
	cl := &fakeCluster{cms: map[string]*v1.ConfigMap{
		"default/app":              {Data: map[string]string{"mode": "from-api"}},
		"default/kube-root-ca.crt": {Data: map[string]string{"ca.crt": "PEM"}},
	}}
	w, _ := newTestWorkerWith(t, f, "", func(o *Options) { o.Objects, o.Cluster = testObjects(), cl })
	pod := clusterPod("cl-1")
	exp := int64(3607)
	pod.Spec.Volumes = []v1.Volume{
		{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: ref("app")}}},
		{Name: "kube-api-access-x1", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &exp}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: ref("kube-root-ca.crt"), Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		}}}},
	}
	if st := mustSync(t, w, pod); !running(st) {
		t.Fatalf("not running: %+v", st)
	}
	for _, tc := range []struct{ vol, file, want string }{
		{"config", "mode", "from-api"},
		{"kube-api-access-x1", "token", "jwt-of-builder"},
		{"kube-api-access-x1", "ca.crt", "PEM"},
		{"kube-api-access-x1", "namespace", "default"},
	} {
		if got, _ := readVolumeFile(t, w.volumePath("cl-1", emptyDirPlugin, tc.vol), tc.file); got != tc.want {
			t.Errorf("%s/%s = %q, want %q", tc.vol, tc.file, got, tc.want)
		}
	}
	if !slices.Equal(cl.tokens, []string{"default/web/builder/"}) {
		t.Errorf("token requests %q", cl.tokens)
	}
	// A manifest pod of the same namespace reads the node's own ConfigMap.
	local := testPod("lo-1", "", "app")
	local.Spec.Volumes = pod.Spec.Volumes[:1]
	mustSync(t, w, local)
	if got, _ := readVolumeFile(t, w.volumePath("lo-1", emptyDirPlugin, "config"), "mode"); got != "fast" {
		t.Errorf("manifest pod's config/mode = %q, want the local store's fast", got)
	}
}

// TestClusterPodServiceEnv: a cluster pod's containers get the service variables after their
// own, which override them and may refer to them; until cluster mode listed the services the
// container waits (CreateContainerConfigError); manifest pods get none.
func TestClusterPodServiceEnv(t *testing.T) {
	cl := &fakeCluster{services: map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1", "WEB_SERVICE_PORT": "80"}}
	w, _ := newTestWorkerWith(t, newFakeRT(), "", func(o *Options) { o.Cluster = cl })
	pod := clusterPod("se-1")
	c := &pod.Spec.Containers[0]
	c.Env = []v1.EnvVar{{Name: "WEB_SERVICE_PORT", Value: "8080"}, {Name: "API", Value: "https://$(KUBERNETES_SERVICE_HOST)"}}
	env, _, _, err := w.containerEnv(pod, c)
	if err != nil {
		t.Fatal(err)
	}
	want := []v1.EnvVar{{Name: "WEB_SERVICE_PORT", Value: "8080"}, {Name: "API", Value: "https://10.0.0.1"}, {Name: "KUBERNETES_SERVICE_HOST", Value: "10.0.0.1"}}
	if !slices.Equal(env, want) {
		t.Errorf("env %v, want %v", env, want)
	}
	if env, _, _, _ := w.containerEnv(testPod("lo-2", "", "app"), c); len(env) != 2 || env[1].Value != "https://$(KUBERNETES_SERVICE_HOST)" {
		t.Errorf("manifest pod env %v, want its own two, unexpanded", env)
	}
	synctest.Test(t, func(t *testing.T) {
		cl := &fakeCluster{svcErr: errors.New("services have not yet been read at least once, cannot construct envvars")}
		w, _ := newTestWorkerWith(t, newFakeRT(), "", func(o *Options) { o.Cluster = cl })
		st := mustSync(t, w, clusterPod("se-2"))
		if wt := st.ContainerStatuses[0].State.Waiting; wt == nil || wt.Reason != lifecycle.ReasonCreateContainerConfigError || wt.Message != cl.svcErr.Error() {
			t.Errorf("state %+v, want CreateContainerConfigError", st.ContainerStatuses[0].State)
		}
	})
}

// TestTokenNeedsCluster: a token projection of a pod that is not cluster mode's fails the
// volume (validation refuses it before; this is the worker's own guard).
func TestTokenNeedsCluster(t *testing.T) {
	w, _ := newTestWorkerWith(t, newFakeRT(), "", func(o *Options) { o.Cluster = &fakeCluster{} })
	pod := testPod("tk-1", "", "app")
	pod.ObjectMeta = metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID}
	err := w.tokenPayload(map[string]fileProjection{}, pod, &v1.ServiceAccountTokenProjection{Path: "token"}, nil)
	if err == nil {
		t.Error("a manifest pod got a token")
	}
}

// TestValidateTokenProjection: a token projection is valid for cluster pods only, with a
// relative path no other source of the projection writes.
func TestValidateTokenProjection(t *testing.T) {
	vol := func(paths ...string) []v1.Volume {
		var srcs []v1.VolumeProjection
		for _, p := range paths {
			srcs = append(srcs, v1.VolumeProjection{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: p}})
		}
		return []v1.Volume{{Name: "t", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: srcs}}}}
	}
	tests := []struct {
		name    string
		cluster bool
		paths   []string
		want    string
	}{
		{"cluster pod", true, []string{"token"}, ""},
		{"manifest pod", false, []string{"token"}, "spec.volumes[0].projected.sources[0].serviceAccountToken: Forbidden"},
		{"path leaving the volume", true, []string{"../token"}, "spec.volumes[0].projected.sources[0].serviceAccountToken.path: Invalid"},
		{"same path twice", true, []string{"token", "token"}, "spec.volumes[0].projected.sources[1].serviceAccountToken.path: Duplicate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("v-1", "", "app")
			if tc.cluster {
				pod = clusterPod("v-1")
			}
			pod.Spec.Volumes = vol(tc.paths...)
			errs := validateObjectVolumes(pod)
			if got := errs.ToAggregate(); (tc.want == "") != (got == nil) || got != nil && !strings.Contains(got.Error(), tc.want) {
				t.Errorf("errors %v, want %q", got, tc.want)
			}
		})
	}
}

// TestTokenMode: a token file has the projection's default mode, 0640 with an fsGroup.
func TestTokenMode(t *testing.T) {
	mode := int32(0o444)
	tests := []struct {
		name    string
		fsGroup *int64
		def     *int32
		want    os.FileMode
	}{
		{"default", nil, nil, 0o644},
		{"projection's default mode", nil, &mode, 0o444},
		{"fsGroup", ptr(int64(2000)), &mode, 0o640},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := clusterPod("m-1")
			if tc.fsGroup != nil {
				pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: tc.fsGroup}
			}
			if got := tokenMode(pod, tc.def); got != tc.want {
				t.Errorf("mode %o, want %o", got, tc.want)
			}
		})
	}
}

// TestRuntimeClassHandler: a cluster pod's sandbox runs with its RuntimeClass's handler; an
// unknown RuntimeClass fails the sandbox with FailedCreatePodSandBox (the kubelet's
// LookupRuntimeHandler) and nothing starts.
func TestRuntimeClassHandler(t *testing.T) {
	tests := []struct {
		name        string
		class       string
		wantHandler string
		wantErr     string
	}{
		{name: "no class", wantHandler: ""},
		{name: "known class", class: "preconfigured-handler", wantHandler: "test-handler"},
		{name: "unknown class", class: "gone", wantErr: `Warning FailedCreatePodSandBox Failed to create pod sandbox: runtimeclasses.node.k8s.io "gone" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeRT()
			cl := &fakeCluster{handlers: map[string]string{"preconfigured-handler": "test-handler"}}
			w, events := newTestWorkerWith(t, f, "", func(o *Options) { o.Cluster = cl })
			pod := clusterPod("rc-1")
			if tt.class != "" {
				pod.Spec.RuntimeClassName = &tt.class
			}
			_, err := w.SyncPod(t.Context(), pod, testSlice(pod))
			if tt.wantErr != "" {
				if err == nil || !slices.Contains(drain(events), tt.wantErr) {
					t.Errorf("SyncPod = %v, want an error and the event %q", err, tt.wantErr)
				}
				if n := f.callsTo("CreateContainer"); n != 0 {
					t.Errorf("%d containers created", n)
				}
				return
			}
			if err != nil || !slices.Equal(f.handlers, []string{tt.wantHandler}) {
				t.Errorf("SyncPod = %v, handlers %q, want [%q]", err, f.handlers, tt.wantHandler)
			}
		})
	}
}

// TestClusterPodClaim: a cluster pod's claim waits (FailedMount, the kubelet's words) until it
// is bound; then its hostPath volume is created, mounted in the container (read-only when the
// claim says so) and not read again at the next syncs.
func TestClusterPodClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRT()
		dir := filepath.Join(t.TempDir(), "pv-1")
		dirOrCreate := v1.HostPathDirectoryOrCreate
		cl := &fakeCluster{
			claims: map[string]*v1.PersistentVolumeClaim{"default/data-0": {ObjectMeta: metav1.ObjectMeta{Name: "data-0", Namespace: "default", UID: "claim-uid"},
				Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending}}},
			volumes: map[string]*v1.PersistentVolume{"pv-1": {ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
				Spec: v1.PersistentVolumeSpec{ClaimRef: &v1.ObjectReference{UID: "claim-uid"},
					PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir, Type: &dirOrCreate}}}}},
		}
		w, events := newTestWorkerWith(t, f, "", func(o *Options) { o.Cluster = cl })
		pod := clusterPod("pvc-1")
		pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0", ReadOnly: true}}}}
		pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
		st := mustSync(t, w, pod)
		if running(st) || f.callsTo("CreateContainer") != 0 {
			t.Fatalf("a pod whose claim is pending started: %+v", st)
		}
		want := "Warning FailedMount Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data], failed to process volumes=[data]: error processing PVC default/data-0: PVC is not bound"
		if got := drain(events); !slices.Contains(got, want) {
			t.Errorf("events %q, want %q", got, want)
		}

		pvc := cl.claims["default/data-0"]
		pvc.Spec.VolumeName, pvc.Status.Phase = "pv-1", v1.ClaimBound
		mustSync(t, w, pod)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Fatalf("the hostPath volume's directory was not created: %v", err)
		}
		cfg := f.onlyConfig(t)
		var found bool
		for _, m := range cfg.Mounts {
			if m.ContainerPath == "/data" {
				found = m.HostPath == dir && m.Readonly
			}
		}
		if !found {
			t.Errorf("mounts %v: want %s read-only at /data", cfg.Mounts, dir)
		}
		reads := cl.reads
		mustSync(t, w, pod)
		if cl.reads != reads {
			t.Errorf("the claim was read again after its volume was set up (%d reads, then %d)", reads, cl.reads)
		}
	})
}

// TestClusterPodLocalVolumeAffinity: a local persistent volume whose node affinity names
// another node is not mounted (FailedMount, the kubelet's NodeAffinity words) and the pod
// waits; once the Node's labels match, it runs.
func TestClusterPodLocalVolumeAffinity(t *testing.T) {
	f := newFakeRT()
	dir := t.TempDir()
	cl := &fakeCluster{
		claims: map[string]*v1.PersistentVolumeClaim{"default/data-0": {ObjectMeta: metav1.ObjectMeta{Name: "data-0", Namespace: "default", UID: "claim-uid"},
			Spec: v1.PersistentVolumeClaimSpec{VolumeName: "local-pv"}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}},
		volumes: map[string]*v1.PersistentVolume{"local-pv": {ObjectMeta: metav1.ObjectMeta{Name: "local-pv"},
			Spec: v1.PersistentVolumeSpec{ClaimRef: &v1.ObjectReference{UID: "claim-uid"},
				PersistentVolumeSource: v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: dir}},
				NodeAffinity: &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
					MatchExpressions: []v1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{"node-b"}}},
				}}}}}}},
	}
	labels := map[string]string{"kubernetes.io/hostname": "node-a"}
	w, events := newTestWorkerWith(t, f, "", func(o *Options) {
		o.Cluster = cl
		o.NodeLabels = func() map[string]string { return labels }
	})
	pod := clusterPod("aff-1")
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0"}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	if st := mustSync(t, w, pod); running(st) || f.callsTo("CreateContainer") != 0 {
		t.Fatalf("a pod whose local volume is another node's started: %+v", st)
	}
	want := `Warning FailedMount Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data], failed to process volumes=[data]: MountVolume.NodeAffinity check failed for volume "local-pv" : no matching NodeSelectorTerms`
	if got := drain(events); !slices.Contains(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	labels = map[string]string{"kubernetes.io/hostname": "node-b"}
	if st := mustSync(t, w, pod); !running(st) {
		t.Fatalf("not running once the node matches: %+v", st)
	}
}

// TestClusterTrustBundleAndPodCertificate: a cluster pod's projected clusterTrustBundle and
// podCertificate sources are written with the projection's mode (0640 with an fsGroup); the
// credential bundle is the key then the chain. A source not available yet fails the volume
// with its error, as the kubelet's FailedMount.
func TestClusterTrustBundleAndPodCertificate(t *testing.T) {
	ctb, mode := "ctb-1", int32(0o444)
	proj := func(srcs ...v1.VolumeProjection) []v1.Volume {
		return []v1.Volume{{Name: "creds", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: srcs, DefaultMode: &mode}}}}
	}
	issued := v1.VolumeProjection{PodCertificate: &v1.PodCertificateProjection{SignerName: "example.com/issued", KeyType: "ED25519",
		CredentialBundlePath: "bundle.pem", KeyPath: "key.pem", CertificateChainPath: "chain.pem"}}
	tests := []struct {
		name    string
		volumes []v1.Volume
		fsGroup *int64
		files   map[string]string
		wantErr string
	}{
		{"trust bundle by name", proj(v1.VolumeProjection{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: &ctb, Path: "ca.pem"}}), nil,
			map[string]string{"ca.pem": "CTB-PEM"}, ""},
		{"no matching trust bundle", proj(v1.VolumeProjection{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{SignerName: &ctb, Path: "ca.pem"}}), nil,
			nil, "matched zero ClusterTrustBundles"},
		{"pod certificate issued", proj(v1.VolumeProjection{DownwardAPI: &v1.DownwardAPIProjection{}}, issued), nil,
			map[string]string{"bundle.pem": "KEY-creds-1\nCHAIN-web\n", "key.pem": "KEY-creds-1\n", "chain.pem": "CHAIN-web\n"}, ""},
		{"pod certificate with an fsGroup", proj(issued), ptr(int64(2000)), map[string]string{"key.pem": "KEY-creds-0\n"}, ""},
		{"pod certificate not issued yet", proj(v1.VolumeProjection{PodCertificate: &v1.PodCertificateProjection{SignerName: "example.com/slow", KeyType: "ED25519", KeyPath: "k"}}), nil,
			nil, "not issued yet"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, _ := newTestWorkerWith(t, newFakeRT(), "", func(o *Options) { o.Cluster = &fakeCluster{} })
			uid := "pc-" + strconv.Itoa(i)
			pod := clusterPod(uid)
			pod.Spec.Volumes = tc.volumes
			if tc.fsGroup != nil {
				pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: tc.fsGroup}
			}
			if errs := validateObjectVolumes(pod); len(errs) > 0 {
				t.Fatalf("validation: %v", errs.ToAggregate())
			}
			payload, err := w.volumePayload(pod, &pod.Spec.Volumes[0])
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := os.FileMode(0o444)
			if tc.fsGroup != nil {
				want = 0o640
			}
			for f, data := range tc.files {
				if got := payload[f]; string(got.Data) != data || got.Mode != want {
					t.Errorf("%s = %q %v, want %q %v", f, got.Data, got.Mode, data, want)
				}
			}
		})
	}
}

// TestValidateCertificateProjections: clusterTrustBundle and podCertificate sources are valid
// for cluster pods only, each path relative and written by one source.
func TestValidateCertificateProjections(t *testing.T) {
	signer := "example.com/s"
	tests := []struct {
		name    string
		cluster bool
		srcs    []v1.VolumeProjection
		want    string
	}{
		{"cluster pod's trust bundle", true, []v1.VolumeProjection{{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{SignerName: &signer, Path: "ca.pem"}}}, ""},
		{"manifest pod's trust bundle", false, []v1.VolumeProjection{{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{SignerName: &signer, Path: "ca.pem"}}},
			"spec.volumes[0].projected.sources[0].clusterTrustBundle: Forbidden"},
		{"manifest pod's certificate", false, []v1.VolumeProjection{{PodCertificate: &v1.PodCertificateProjection{SignerName: signer, KeyPath: "k"}}},
			"spec.volumes[0].projected.sources[0].podCertificate: Forbidden"},
		{"certificate paths", true, []v1.VolumeProjection{{PodCertificate: &v1.PodCertificateProjection{SignerName: signer, KeyPath: "k", CertificateChainPath: "c"}}}, ""},
		{"certificate path leaving the volume", true, []v1.VolumeProjection{{PodCertificate: &v1.PodCertificateProjection{SignerName: signer, KeyPath: "../k"}}},
			"spec.volumes[0].projected.sources[0].podCertificate.keyPath: Invalid"},
		{"trust bundle over a token", true, []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "ca.pem"}},
			{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{SignerName: &signer, Path: "ca.pem"}}},
			"spec.volumes[0].projected.sources[1].clusterTrustBundle.path: Duplicate"},
		{"key over the chain", true, []v1.VolumeProjection{{PodCertificate: &v1.PodCertificateProjection{SignerName: signer, KeyPath: "x", CertificateChainPath: "x"}}},
			"spec.volumes[0].projected.sources[0].podCertificate.certificateChainPath: Duplicate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("v-1", "", "app")
			if tc.cluster {
				pod = clusterPod("v-1")
			}
			pod.Spec.Volumes = []v1.Volume{{Name: "p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: tc.srcs}}}}
			errs := validateObjectVolumes(pod)
			if got := errs.ToAggregate(); (tc.want == "") != (got == nil) || got != nil && !strings.Contains(got.Error(), tc.want) {
				t.Errorf("errors %v, want %q", got, tc.want)
			}
		})
	}
}

// TestClusterPodLocalDevice: a local persistent volume on a block device, in Filesystem mode,
// is mounted once at the kubelet's device mount path under PluginsDir (formatted when it has
// no file system: Mounter.FormatAndMount), shared by two pods, given to their containers
// from there, and unmounted once the last pod is gone.
func TestClusterPodLocalDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("mknod of a block device needs root")
		}
		t.Skip("mknod of a block device needs root")
	}
	dev := filepath.Join(t.TempDir(), "loop")
	if err := unix.Mknod(dev, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 250))); err != nil {
		t.Fatal(err)
	}
	claim := func(name string) *v1.PersistentVolumeClaim {
		return &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: "claim-uid"},
			Spec: v1.PersistentVolumeClaimSpec{VolumeName: "local-pv"}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}
	}
	cl := &fakeCluster{
		claims: map[string]*v1.PersistentVolumeClaim{"default/data-0": claim("data-0")},
		volumes: map[string]*v1.PersistentVolume{"local-pv": {ObjectMeta: metav1.ObjectMeta{Name: "local-pv"},
			Spec: v1.PersistentVolumeSpec{ClaimRef: &v1.ObjectReference{UID: "claim-uid"}, MountOptions: []string{"noatime"},
				PersistentVolumeSource: v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: dev}}}}},
	}
	f := newFakeRT()
	m := &fakeMounter{mounted: map[string]int64{}}
	plugins := t.TempDir()
	w, _ := newTestWorkerWith(t, f, "", func(o *Options) {
		o.Cluster, o.Mounter, o.PluginsDir = cl, m, plugins
	})
	mount := filepath.Join(plugins, "kubernetes.io/local-volume/mounts/local-pv")
	var pods []*v1.Pod
	for _, name := range []string{"dev-1", "dev-2"} {
		pod := clusterPod(name)
		pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0"}}}}
		pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
		if st := mustSync(t, w, pod); !running(st) {
			t.Fatalf("%s not running: %+v", name, st)
		}
		pods = append(pods, pod)
	}
	if m.mounts != 1 || m.devices[mount] != dev+" ext4 noatime" {
		t.Fatalf("%d mounts, %v: want one of %s at %s", m.mounts, m.devices, dev, mount)
	}
	f.mu.Lock()
	configs := maps.Clone(f.configs)
	f.mu.Unlock()
	for _, c := range configs {
		for _, cm := range c.Mounts {
			if cm.ContainerPath == "/data" && cm.HostPath != mount {
				t.Errorf("the container's /data is %s, want %s", cm.HostPath, mount)
			}
		}
	}
	if err := w.releaseVolumes(string(pods[0].UID)); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.mounted[mount]; !ok {
		t.Fatal("the device was unmounted while another pod uses it")
	}
	if err := w.releaseVolumes(string(pods[1].UID)); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.mounted[mount]; ok {
		t.Error("the device is still mounted after its last pod")
	}
	if _, err := os.Stat(mount); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the device mount directory is left: %v", err)
	}
}
