package manifest

import (
	"regexp"
	"testing"

	"github.com/slicelet/slicelet/slices"
)

// TestUIDSchemes: under the kubelet's scheme a manifest pod's UID is 32 hex digits that
// change with the node's name and the file's path but not with the document's formatting,
// and a metadata.uid stays; under md5 it is slicelet's earlier UID (slices.PodUID over the
// defaulted pod); an unknown scheme is refused. (The kubelet's own file source is the judge of
// the kubelet scheme's values: hack/peer/oracle TestStaticPodUIDAsKubelet.)
func TestUIDSchemes(t *testing.T) {
	t.Cleanup(func() {
		_ = SetUIDScheme(UIDKubelet)
		SetNodeName("")
	})
	uid := func(node, path, doc string) string {
		t.Helper()
		SetNodeName(node)
		pods, err := Parse("web.yaml", path, []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		return string(pods[0].UID)
	}
	const flow = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: app, image: nginx:1.27}]}\n"
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	if err := SetUIDScheme(""); err != nil {
		t.Fatal(err)
	}
	base := uid("node-a", "/etc/kubernetes/manifests/web.yaml", burstableYAML)
	tests := []struct {
		name, node, path, doc string
		same                  bool
	}{
		{"same file, same node", "node-a", "/etc/kubernetes/manifests/web.yaml", burstableYAML, true},
		{"node name case", "NODE-A", "/etc/kubernetes/manifests/web.yaml", burstableYAML, true},
		{"another node", "node-b", "/etc/kubernetes/manifests/web.yaml", burstableYAML, false},
		{"another path", "node-a", "/etc/kubernetes/manifests/web2.yaml", burstableYAML, false},
		{"another content", "node-a", "/etc/kubernetes/manifests/web.yaml", flow, false},
	}
	block := "# the same pod\napiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - image: nginx:1.27\n    name: app\n"
	if a, b := uid("node-a", "/m/web.yaml", flow), uid("node-a", "/m/web.yaml", block); a != b {
		t.Errorf("the same pod reformatted: uid %s, was %s", b, a)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := uid(tt.node, tt.path, tt.doc)
			if !hex32.MatchString(got) || (got == base) != tt.same {
				t.Errorf("uid %s, base %s: want 32 hex digits, same=%v", got, base, tt.same)
			}
		})
	}
	if got := uid("node-a", "/m/web.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: web, uid: given}\nspec: {containers: [{name: app, image: nginx}]}\n"); got != "given" {
		t.Errorf("metadata.uid: got %s", got)
	}

	if err := SetUIDScheme(UIDMD5); err != nil {
		t.Fatal(err)
	}
	decoded, err := Decode([]byte(burstableYAML))
	if err != nil {
		t.Fatal(err)
	}
	pod := decoded[0].Pod
	SetDefaults(pod)
	want, err := slices.PodUID(pod, "/etc/slicelet/pods.d/web.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := uid("node-a", "/etc/slicelet/pods.d/web.yaml", burstableYAML); got != want {
		t.Errorf("md5 scheme: uid %s, want slicelet's earlier %s", got, want)
	}
	if got := uid("node-b", "/etc/slicelet/pods.d/web.yaml", burstableYAML); got != want {
		t.Errorf("md5 scheme on another node: uid %s, want %s (the node is not hashed)", got, want)
	}
	if err := SetUIDScheme("sha1"); err == nil {
		t.Error("scheme sha1 accepted")
	}
}
