package podfields

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var update = flag.Bool("update", false, "rewrite docs/pod-fields.md")

// TestRegistryCoversPod walks v1.Pod to its leaves: every leaf needs an entry (its own or an
// ancestor's), and every entry must name a field of v1.Pod.
func TestRegistryCoversPod(t *testing.T) {
	leaves := Leaves()
	if len(leaves) < 500 {
		t.Fatalf("walked %d leaves of v1.Pod; the walk is broken", len(leaves))
	}
	used := map[string]bool{}
	for _, l := range leaves {
		l = strings.TrimSuffix(l, "[*]")
		e, ok := Lookup(l)
		if !ok {
			t.Errorf("%s: no registry entry: say in internal/pods/podfields/registry.go whether slicelet implements it (where), refuses it (why) or it has no node effect (why)", l)
			continue
		}
		used[e.Path] = true
	}
	for p, e := range registry {
		if !used[p] {
			t.Errorf("%s: stale registry entry (no such field in v1.Pod)", p)
		}
		if e.Note == "" {
			t.Errorf("%s: entry without a note", p)
		}
		if e.Allowed != nil && e.Handling != Refused {
			t.Errorf("%s: Allowed is for refused fields", p)
		}
		if e.ClusterHandling != "" && (e.ClusterHandling == e.Handling || e.Cluster == "") {
			t.Errorf("%s: ClusterHandling is for a handling that differs in cluster mode, with a Cluster note saying where or why", p)
		}
		// A pod from the API server is no static pod: its refusals give the reason that
		// holds on a cluster node.
		if h, note := e.In(APIServer); h == Refused && strings.Contains(note, "static pod") {
			t.Errorf("%s: refused in cluster mode with a static pods' reason %q: give the Cluster note the reason that holds there", p, note)
		}
	}
}

// TestMarkdown checks docs/pod-fields.md against the registry.
func TestMarkdown(t *testing.T) {
	path := filepath.Join("..", "..", "..", "docs", "pod-fields.md")
	want := Markdown()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is out of date: run go test ./internal/pods/podfields -run TestMarkdown -update", path)
	}
}

func TestRefusals(t *testing.T) {
	base := func() *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a", Command: []string{"/bin/true"}}}}}
	}
	f := false
	tests := []struct {
		name string
		mod  func(*v1.Pod)
		want []string
	}{
		{"plain pod", func(*v1.Pod) {}, nil},
		{"persistent volume claim", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "e", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}, {Name: "s", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "x"}}}}
		}, []string{"spec.volumes[1].persistentVolumeClaim: Forbidden: a persistent volume claim is bound to its volume by an API server's controllers, and a stand-alone node has no API server"}},
		{"secret volume and env (served from slicelet's own sources)", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "x"}}}}
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "P", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{Key: "k"}}}}
		}, nil},
		{"service account", func(p *v1.Pod) { p.Spec.ServiceAccountName = "default" },
			[]string{"spec.serviceAccountName: Forbidden: static pods may not reference serviceaccounts"}},
		{"env from a file key", func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A", Value: "b"}, {Name: "P", ValueFrom: &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{Key: "k"}}}}
		}, []string{"spec.containers[0].env[1].valueFrom.fileKeyRef: Forbidden"}},
		{"host port without host network (mapped, or refused by the node's network: worker)", func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
		}, nil},
		{"host port with host network", func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
		}, nil},
		{"empty lists and maps are unset", func(p *v1.Pod) {
			p.Spec.ImagePullSecrets = []v1.LocalObjectReference{}
			p.Spec.NodeSelector = map[string]string{}
			p.Spec.ResourceClaims = []v1.PodResourceClaim{}
		}, nil},
		{"image pull secrets with empty names reference no secret", func(p *v1.Pod) {
			p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: ""}}
		}, nil},
		{"image pull secret", func(p *v1.Pod) {
			p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: ""}, {Name: "regcred"}}
		}, []string{"spec.imagePullSecrets: Forbidden: static pods may not reference secrets"}},
		{"hostUsers true is the default", func(p *v1.Pod) { tr := true; p.Spec.HostUsers = &tr }, nil},
		{"hostUsers false", func(p *v1.Pod) { p.Spec.HostUsers = &f }, []string{"spec.hostUsers: Forbidden: user namespaces"}},
		{"emptyDir size limit", func(p *v1.Pod) {
			q := resource.MustParse("1Gi")
			p.Spec.Volumes = []v1.Volume{{Name: "e", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: &q}}}}
		}, []string{"spec.volumes[0].emptyDir.sizeLimit: Forbidden"}},
		{"projected: downward API (implemented) and a token", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{DownwardAPI: &v1.DownwardAPIProjection{}}, {ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "t"}}}}}}}
		}, []string{"spec.volumes[0].projected.sources[1].serviceAccountToken: Forbidden: static pods may not reference serviceaccounts"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base()
			tt.mod(p)
			errs := Refusals(p)
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors %v, want %d %v", len(errs), errs, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d = %q, want it to contain %q", i, errs[i], w)
				}
			}
		})
	}
}

// TestRefusalsFromAPIServer: a pod from the API server is refused only for what a cluster node
// cannot do, in words true there; what cluster mode serves is no refusal.
func TestRefusalsFromAPIServer(t *testing.T) {
	base := func() *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a", Image: "busybox"}}}}
	}
	tests := []struct {
		name string
		mod  func(*v1.Pod)
		want []string
	}{
		{"plain pod", func(*v1.Pod) {}, nil},
		{"served in cluster mode", func(p *v1.Pod) {
			p.GenerateName = "web-"
			p.Spec.ServiceAccountName, p.Spec.DeprecatedServiceAccount = "default", "default"
			p.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
			p.Spec.Volumes = []v1.Volume{{Name: "t", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}}}}}}}
			p.Spec.Containers[0].Stdin, p.Spec.Containers[0].TTY = true, true
		}, nil},
		{"persistent volume claim: its volume from the API server", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "d", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
		}, nil},
		{"an inline CSI volume: published by its registered driver", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "d", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "x"}}}}
		}, nil},
		{"a raw block device: mapped from its claim's Block volume", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "d", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "disk"}}}}
			p.Spec.Containers[0].VolumeDevices = []v1.VolumeDevice{{Name: "d", DevicePath: "/dev/xvda"}}
		}, nil},
		{"resource claims", func(p *v1.Pod) { p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu"}} },
			[]string{"spec.resourceClaims: Forbidden: dynamic resource allocation is not implemented"}},
		{"image pull secrets", func(p *v1.Pod) { p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "regcred"}} },
			[]string{"spec.imagePullSecrets: Forbidden: pulling images with credentials from Secrets"}},
		{"the same reason as a static pod where it holds in both", func(p *v1.Pod) { f := false; p.Spec.HostUsers = &f },
			[]string{"spec.hostUsers: Forbidden: user namespaces"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base()
			tt.mod(p)
			errs := RefusalsFrom(p, APIServer)
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors %v, want %d %v", len(errs), errs, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d = %q, want it to contain %q", i, errs[i], w)
				}
				if !IsRefusal(errs[i], APIServer) {
					t.Errorf("IsRefusal(%q, APIServer) = false", errs[i])
				}
			}
			for _, e := range Refusals(p) {
				if !IsRefusal(e, Manifest) {
					t.Errorf("IsRefusal(%q, Manifest) = false", e)
				}
			}
		})
	}
	// Another wording of the same refusal (the kubelet's static-pod checks) is the refusal; a
	// field served in cluster mode is none there; another kind of error is none.
	sa := field.Forbidden(field.NewPath("spec", "serviceAccountName"), "another wording")
	if !IsRefusal(sa, Manifest) || IsRefusal(sa, APIServer) {
		t.Errorf("IsRefusal(%q): want a static pods' refusal only", sa)
	}
	if claim := field.Invalid(field.NewPath("spec", "volumes").Index(2).Child("persistentVolumeClaim"), "x", "bad"); IsRefusal(claim, Manifest) {
		t.Errorf("IsRefusal(%q): an Invalid error is no refusal", claim)
	}
}
