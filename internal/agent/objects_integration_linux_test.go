package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/api"
)

// TestIntegrationObjectsProbesEvents: the daemon, as a service, runs a manifest pod whose env
// and volume come from a ConfigMap applied through the API and whose readiness probe reads the
// volume: the pod runs unready (READY 0/1) with Unhealthy events until the ConfigMap gains the
// key, which reaches the mounted volume and makes it ready.
func TestIntegrationObjectsProbesEvents(t *testing.T) {
	d := newDaemonEnv(t, "")
	ctx := t.Context()
	unit := "slicelet-objects-it.service"
	t.Cleanup(func() { _ = d.sd.Stop(context.Background(), unit) })
	agentService(t, d.sd, unit, d.cfgPath)
	client := api.NewClient(d.sock)

	cm := func(data string) []byte {
		return fmt.Appendf(nil, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {%s}\n", data)
	}
	if res, err := client.ApplyObject(ctx, api.KindConfigMaps, cm("mode: fast"), false); err != nil || res.Action != api.ActionCreated {
		t.Fatalf("apply ConfigMap: %+v, %v", res, err)
	}
	pod := `apiVersion: v1
kind: Pod
metadata: {name: probed}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{name: config, configMap: {name: app}}]
  containers:
  - name: c
    command: [/bin/sh, -c, 'test "$MODE" = fast && exec sleep 1000']
    env: [{name: MODE, valueFrom: {configMapKeyRef: {name: app, key: mode}}}]
    volumeMounts: [{name: config, mountPath: /srv}]
    readinessProbe: {exec: {command: [/bin/sh, -c, 'test -f /srv/ready']}, periodSeconds: 1}
`
	if err := os.WriteFile(filepath.Join(d.podsDir, "probed.yaml"), []byte(pod), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, cond func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			ok, state := cond()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s", what, state)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	state := func(p v1.Pod) string {
		var b strings.Builder
		fmt.Fprintf(&b, "phase %s", p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, "; %s ready=%v restarts=%d %+v", cs.Name, cs.Ready, cs.RestartCount, cs.State)
		}
		return b.String()
	}
	unhealthy := func() bool {
		evs, err := client.ListEvents(ctx, "involvedObject.name=probed,involvedObject.namespace=default")
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == "Unhealthy" && strings.HasPrefix(e.Message, "Readiness probe failed") {
				return true
			}
		}
		return false
	}
	waitFor("running unready with Unhealthy events", func() (bool, string) {
		p, err := client.GetPod(ctx, "default", "probed")
		if err != nil {
			return false, err.Error()
		}
		ok := p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1 &&
			p.Status.ContainerStatuses[0].State.Running != nil && !p.Status.ContainerStatuses[0].Ready && unhealthy()
		return ok, state(p)
	})
	if _, err := client.ApplyObject(ctx, api.KindConfigMaps, cm("mode: fast, ready: 'yes'"), false); err != nil {
		t.Fatal(err)
	}
	waitFor("ready once the ConfigMap has the key", func() (bool, string) {
		p, err := client.GetPod(ctx, "default", "probed")
		if err != nil {
			return false, err.Error()
		}
		ok := len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready && p.Status.ContainerStatuses[0].RestartCount == 0
		return ok, state(p)
	})
	list, err := client.ListObjects(ctx, api.KindConfigMaps)
	if err != nil || len(list) != 1 || list[0].Keys != 2 || list[0].Source != "api" {
		t.Errorf("ListObjects = %+v, %v", list, err)
	}
}
