package cluster

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
)

// TestNewClientsProtobuf: the clients ask for and decode protobuf, as the kubelet's do, and
// send a status patch in its own patch type.
func TestNewClientsProtobuf(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pb := protobuf.NewSerializer(scheme, scheme)
	var mu sync.Mutex
	var seen []string // method, Accept and Content-Type of each request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" accept="+r.Header.Get("Accept")+" content-type="+r.Header.Get("Content-Type"))
		mu.Unlock()
		node := &v1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "u1"}}
		var buf bytes.Buffer
		if err := pb.Encode(node, &buf); err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", ContentTypeProtobuf)
		_, _ = w.Write(buf.Bytes())
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: " + srv.URL + "}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n"
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := NewClients(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Nodes.Get(t.Context(), "node-1", metav1.GetOptions{})
	if err != nil || got.Name != "node-1" || got.UID != "u1" {
		t.Fatalf("get: %v, %+v", err, got.ObjectMeta)
	}
	if _, err := c.Nodes.Patch(t.Context(), "node-1", types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("patch: %v", err)
	}
	want := []string{
		"GET accept=" + ContentTypeProtobuf + ",application/json content-type=",
		"PATCH accept=" + ContentTypeProtobuf + ",application/json content-type=" + string(types.StrategicMergePatchType),
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != len(want) {
		t.Fatalf("requests %q, want %q", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("request %d: %q, want %q", i, seen[i], want[i])
		}
	}
}
