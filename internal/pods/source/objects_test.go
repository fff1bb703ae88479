package source

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slicelet/slicelet/internal/pods"
)

const (
	cmDoc = `apiVersion: v1
kind: ConfigMap
metadata: {name: app-config}
data: {mode: fast, "app.properties": "a=1"}
`
	secretDoc = `apiVersion: v1
kind: Secret
metadata: {name: db, namespace: prod}
stringData: {password: hunter2}
data: {user: YWRtaW4=}
`
	podDoc = `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: app, command: ["/bin/sleep", "infinity"]}]
`
)

// TestManifestDirObjects: ConfigMap and Secret documents are taken from the manifests, next to
// pods or alone, and passed on; a bad one is the file's problem.
func TestManifestDirObjects(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a.yaml":   cmDoc + "---\n" + podDoc + "---\n" + secretDoc,
		"b.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-config}\ndata: {mode: slow}\n",
		"bad.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad}\ndata: {\"no/slash\": x}\n",
	})
	objs := pods.NewObjects()
	m, err := NewManifestDir(ManifestDirOptions{Dir: dir, Objects: objs})
	if err != nil {
		t.Fatal(err)
	}
	s := m.Scan()
	if len(s.Pods) != 1 || s.Pods[0].Pod.Name != "web" {
		t.Errorf("pods %+v, want web", s.Pods)
	}
	if len(s.Problems) != 1 || !strings.Contains(s.Problems[0].Error, `data[no/slash]: Invalid value`) {
		t.Errorf("problems %+v, want bad.yaml's key", s.Problems)
	}
	cm, err := objs.ConfigMap("default", "app-config")
	if err != nil || cm.Data["mode"] != "fast" {
		t.Errorf("ConfigMap = %+v, %v; want a.yaml's (the first file wins)", cm, err)
	}
	sec, err := objs.Secret("prod", "db")
	if err != nil || string(sec.Data["password"]) != "hunter2" || string(sec.Data["user"]) != "admin" || sec.Type != "Opaque" {
		t.Errorf("Secret = %+v, %v; want stringData merged into data", sec, err)
	}
	if _, err := objs.Secret("default", "db"); err == nil || err.Error() != `secret "db" not found` {
		t.Errorf("missing secret: %v, want the kubelet's wording", err)
	}
}

// TestObjectStore: API ConfigMaps and Secrets are stored (secrets mode 0600), survive a reopen,
// are deleted, and secret values are never logged.
func TestObjectStore(t *testing.T) {
	state := t.TempDir()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	objs := pods.NewObjects()
	s, err := OpenObjectStore(state, objs, log)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{cmDoc, secretDoc} {
		if res, err := s.ApplyObject([]byte(doc), "", false); err != nil || res.Action != "created" {
			t.Fatal(res, err)
		}
	}
	if res, err := s.ApplyObject([]byte(cmDoc), "", false); err != nil || res.Action != "unchanged" {
		t.Errorf("the same ConfigMap again: %+v, %v; want unchanged", res, err)
	}
	if _, err := s.ApplyObject([]byte(cmDoc), KindSecret, false); !errors.Is(err, ErrInvalid) {
		t.Errorf("a ConfigMap sent as a Secret: %v, want ErrInvalid", err)
	}
	if _, err := s.ApplyObject([]byte(podDoc), "", false); !errors.Is(err, ErrInvalid) {
		t.Errorf("a pod applied as an object: %v, want ErrInvalid", err)
	}
	fi, err := os.Stat(filepath.Join(state, ObjectStoreDir, "secret_prod_db.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("secret file: %v, %v; want mode 0600", fi, err)
	}
	if strings.Contains(logs.String(), "hunter2") || strings.Contains(logs.String(), "YWRtaW4") {
		t.Errorf("a secret value was logged: %s", logs.String())
	}
	objs2 := pods.NewObjects()
	if _, err := OpenObjectStore(state, objs2, nil); err != nil {
		t.Fatal(err)
	}
	if cm, err := objs2.ConfigMap("default", "app-config"); err != nil || cm.Data["mode"] != "fast" {
		t.Errorf("after reopen: %+v, %v", cm, err)
	}
	if err := s.DeleteObject(KindSecret, "prod", "db"); err != nil {
		t.Fatal(err)
	}
	if _, err := objs.Secret("prod", "db"); err == nil {
		t.Error("a deleted secret is still there")
	}
	if err := s.DeleteObject(KindSecret, "prod", "db"); !errors.Is(err, ErrObjectNotFound) {
		t.Errorf("second delete: %v, want ErrObjectNotFound", err)
	}
}
