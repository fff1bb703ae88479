package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/slicelet/slicelet/internal/api"
)

// objectDaemon is the fake daemon with ConfigMaps and Secrets; a key is a value starting with
// "v" (apiVersion aside).
type objectDaemon struct {
	*fakeDaemon
	mu    sync.Mutex
	items []api.ObjectSummary
}

func (d *objectDaemon) ListObjects(_ context.Context, kind string) ([]api.ObjectSummary, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []api.ObjectSummary
	for _, it := range d.items {
		if api.KindPath(it.Kind) == kind {
			out = append(out, it)
		}
	}
	return out, nil
}

func (d *objectDaemon) ApplyObject(_ context.Context, kind string, manifest []byte, dryRun bool) (api.ObjectSummary, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := map[string]string{api.KindConfigMaps: "ConfigMap", api.KindSecrets: "Secret"}[kind]
	it := api.ObjectSummary{Kind: k, Namespace: "default", Name: "app-" + strings.ToLower(k), Source: "api", Keys: strings.Count(string(manifest), ": v") - 1, Action: api.ActionCreated, DryRun: dryRun}
	if !dryRun {
		d.items = append(d.items, it)
	}
	return it, nil
}

func (d *objectDaemon) DeleteObject(context.Context, string, string, string) error {
	return fmt.Errorf("delete: %w", api.ErrNotFound)
}

// TestObjects: apply sends ConfigMap and Secret documents to their routes (pods to theirs) and
// get configmaps|secrets lists them as kubectl does.
func TestObjects(t *testing.T) {
	sock := startDaemon(t, &objectDaemon{fakeDaemon: newFakeDaemon()})
	file := filepath.Join(t.TempDir(), "all.yaml")
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-configmap}\ndata: {a: va}\n---\n" +
		"apiVersion: v1\nkind: Secret\nmetadata: {name: app-secret}\nstringData: {b: vb, c: vc}\n"
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	runCases(t, sock, []cliCase{
		{name: "apply", args: []string{"apply", "-f", file}, golden: true, out: []string{"configmap/app-configmap created\n", "secret/app-secret created\n"}},
		{name: "get configmaps", args: []string{"get", "configmaps"}, golden: true, out: []string{"NAME            DATA   SOURCE\n", "app-configmap   1      api\n"}},
		{name: "get secrets -A", args: []string{"get", "secrets", "-A"}, out: []string{"NAMESPACE NAME DATA SOURCE\n", "default app-secret 2 api\n"}},
		{name: "get cm in another namespace", args: []string{"get", "cm", "-n", "other"}, errOut: []string{"No resources found in other namespace."}},
	})
}
