package api

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// fakeObjects is a fakeBackend that keeps ConfigMaps and Secrets by kind/namespace/name.
type fakeObjects struct {
	*fakeBackend
	mu    sync.Mutex
	items map[string]ObjectSummary
}

func (f *fakeObjects) ListObjects(_ context.Context, kind string) ([]ObjectSummary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []ObjectSummary
	for k, it := range f.items {
		if strings.HasPrefix(k, kind+"/") {
			out = append(out, it)
		}
	}
	return out, nil
}

func (f *fakeObjects) ApplyObject(_ context.Context, kind string, manifest []byte, dryRun bool) (ObjectSummary, error) {
	if !strings.Contains(string(manifest), "kind: "+kindOf[kind]) {
		return ObjectSummary{}, &InvalidError{Problems: []string{"want a " + kindOf[kind]}}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	it := ObjectSummary{Kind: kindOf[kind], Namespace: "default", Name: "app", Source: "api", Keys: 1, Action: ActionCreated, DryRun: dryRun}
	f.items[kind+"/default/app"] = it
	return it, nil
}

func (f *fakeObjects) DeleteObject(_ context.Context, kind, ns, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := kind + "/" + ns + "/" + name
	if _, ok := f.items[k]; !ok {
		return fmt.Errorf("%s %q: %w", kind, name, ErrNotFound)
	}
	delete(f.items, k)
	return nil
}

// TestObjects: POST, GET and DELETE of /v1/configmaps and /v1/secrets through the client; a
// backend without objects answers 404.
func TestObjects(t *testing.T) {
	f := &fakeObjects{fakeBackend: newFakeBackend(), items: map[string]ObjectSummary{}}
	_, c := startServer(t, f, 0)
	ctx := context.Background()
	res, err := c.ApplyObject(ctx, KindConfigMaps, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n"), false)
	if err != nil || res.Action != ActionCreated || res.Kind != "ConfigMap" {
		t.Fatalf("ApplyObject = %+v, %v", res, err)
	}
	if _, err := c.ApplyObject(ctx, KindSecrets, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n"), false); statusOf(err) != 422 {
		t.Errorf("a ConfigMap posted as a Secret: %v, want 422", err)
	}
	list, err := c.ListObjects(ctx, KindConfigMaps)
	if err != nil || len(list) != 1 || list[0].Name != "app" {
		t.Errorf("ListObjects = %+v, %v", list, err)
	}
	if err := c.DeleteObject(ctx, KindConfigMaps, "default", "app"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteObject(ctx, KindConfigMaps, "default", "app"); statusOf(err) != 404 || !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v, want 404", err)
	}
	_, plain := startServer(t, newFakeBackend(), 0)
	if _, err := plain.ListObjects(ctx, KindSecrets); statusOf(err) != 404 {
		t.Errorf("a backend without objects: %v, want 404", err)
	}
}
