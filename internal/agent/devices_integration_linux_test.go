package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/pods/devices"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// samplePluginResource is the resource Kubernetes' sample device plugin serves (two devices,
// Dev-1 and Dev-2, each answered with a mount of a file /tmp/<id>).
const samplePluginResource = "example.com/resource"

// sampleDevicePlugin returns the sample device plugin (k8s.io/kubernetes/test/images/
// sample-device-plugin) make device-plugin-build built, which TestMain hands into the sandbox.
func sampleDevicePlugin(t *testing.T) string {
	t.Helper()
	p := filepath.Join(os.Getenv(systemdtest.FilesEnv), "sample-device-plugin")
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("build/sample-device-plugin is missing: run make device-plugin-build")
	}
	t.Skip("build/sample-device-plugin is missing: run make device-plugin-build")
	return ""
}

// TestIntegrationDevicePlugin: Kubernetes' sample device plugin, built from source, registers
// with slicelet (its registration socket at the kubelet's path, /var/lib/kubelet/device-plugins,
// which the plugin alone sees as slicelet's plugin directory); its two devices become the
// node's capacity and allocatable; a pod asking for one runs with the plugin's mount; the
// PodResources API lists the pod's device. slicelet restarts: the plugin registers again (it
// watches for the registration socket), the pod keeps running with its device (the
// checkpoint), and the next pod gets the other device.
func TestIntegrationDevicePlugin(t *testing.T) {
	// The VM gets no host binaries (Options.Files), and the sample plugin's devices are file
	// mounts: nothing in registration, allocation or the checkpoint depends on the cgroup layout.
	systemdtest.SandboxOnly(t, systemdtest.Require(t), "the sample device plugin is a host binary the VM does not get, and its devices are mounts, the same on both layouts")
	// The plugin's own mount namespace hides /var/lib, where the sandbox's files are: it runs
	// from a copy.
	plugin := filepath.Join(t.TempDir(), "sample-device-plugin")
	if b, err := os.ReadFile(sampleDevicePlugin(t)); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(plugin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	pluginDir := t.TempDir()
	prSock := filepath.Join(t.TempDir(), "podresources.sock")
	d := newDaemonEnv(t, fmt.Sprintf("[devices]\nplugin_dir = %q\npod_resources_socket = %q", pluginDir, prSock))
	ctx := t.Context()
	unit := "slicelet-devices-it.service"
	t.Cleanup(func() { _ = d.sd.Stop(context.Background(), unit) })
	agentService(t, d.sd, unit, d.cfgPath)
	client := api.NewClient(d.sock)

	// The plugin in a mount namespace of its own where slicelet's plugin directory is the
	// kubelet's: it registers on /var/lib/kubelet/device-plugins/kubelet.sock and serves its
	// socket beside it (PLUGIN_SOCK_DIR).
	var out lockedBuffer
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-ec",
		`mount -t tmpfs tmpfs /var/lib; mkdir -p /var/lib/kubelet/device-plugins; mount --bind "$1" /var/lib/kubelet/device-plugins; exec "$2"`,
		"sh", pluginDir, plugin)
	cmd.Env = append(os.Environ(), "PLUGIN_SOCK_DIR=/var/lib/kubelet/device-plugins")
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("sample device plugin:\n%s", out.String())
			o, _ := run("journalctl", "--no-pager", "-u", unit, "-n", "80")
			t.Logf("slicelet:\n%s", o)
		}
	})

	// waitResource polls the node until its allocatable of the resource is want.
	waitResource := func(what string, want int64) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			n, err := client.Node(ctx)
			if err == nil {
				q, ok := n.Node.Status.Allocatable[samplePluginResource]
				c := n.Node.Status.Capacity[samplePluginResource]
				if ok && q.Value() == want && c.Value() == 2 {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s allocatable never %d (node %+v, %v)", what, samplePluginResource, want, n.Node.Status, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitResource("after the plugin registered", 2)

	podManifest := func(name string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: c\n    command: [/bin/sleep, infinity]\n    resources: {limits: {%s: 1}}\n", name, samplePluginResource)
	}
	// running waits for a pod to run and returns its container's unit.
	running := func(name string) (v1.Pod, string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			p, err := client.GetPod(ctx, "default", name)
			if err == nil && p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil {
				id := p.Status.ContainerStatuses[0].ContainerID
				return p, id[strings.Index(id, "://")+3:]
			}
			if time.Now().After(deadline) {
				t.Fatalf("pod %s not running after 60 s: %+v %v", name, p.Status, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// deviceOf is the device PodResources lists for a pod's container.
	deviceOf := func(name string) string {
		t.Helper()
		cc, err := grpc.NewClient("unix://"+prSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		resp, err := podresourcesapi.NewPodResourcesListerClient(cc).Get(ctx, &podresourcesapi.GetPodResourcesRequest{PodName: name, PodNamespace: "default"})
		if err != nil {
			t.Fatalf("PodResources Get %s: %v", name, err)
		}
		c := resp.GetPodResources().GetContainers()
		if len(c) != 1 || len(c[0].GetDevices()) != 1 || c[0].GetDevices()[0].GetResourceName() != samplePluginResource || len(c[0].GetDevices()[0].GetDeviceIds()) != 1 {
			t.Fatalf("PodResources Get %s = %v, want one %s device", name, resp, samplePluginResource)
		}
		return c[0].GetDevices()[0].GetDeviceIds()[0]
	}
	// bound checks the container's unit binds the plugin's mount of dev.
	bound := func(unit, dev string) {
		t.Helper()
		o, err := run("systemctl", "show", "-p", "BindPaths", unit)
		if err != nil || !strings.Contains(o, "/tmp/"+dev) {
			t.Errorf("unit %s BindPaths = %q (%v), want the plugin's mount /tmp/%s", unit, o, err, dev)
		}
	}

	if err := os.WriteFile(filepath.Join(d.podsDir, "gpu-a.yaml"), []byte(podManifest("gpu-a")), 0o644); err != nil {
		t.Fatal(err)
	}
	_, unitA := running("gpu-a")
	devA := deviceOf("gpu-a")
	bound(unitA, devA)
	if _, err := os.Stat(filepath.Join(pluginDir, devices.CheckpointFile)); err != nil {
		t.Errorf("no checkpoint: %v", err)
	}
	waitResource("with gpu-a running", 2) // allocatable counts devices, not free ones

	// slicelet restarts; the plugin registers again; gpu-a keeps its container and device.
	if err := d.sd.Stop(ctx, unit); err != nil {
		t.Fatal(err)
	}
	agentService(t, d.sd, unit, d.cfgPath)
	waitResource("after slicelet restarted and the plugin registered again", 2)
	if _, u := running("gpu-a"); u != unitA {
		t.Errorf("gpu-a's container changed across the restart: %s, was %s", u, unitA)
	}
	if dev := deviceOf("gpu-a"); dev != devA {
		t.Errorf("gpu-a's device after the restart = %s, was %s", dev, devA)
	}
	if err := os.WriteFile(filepath.Join(d.podsDir, "gpu-b.yaml"), []byte(podManifest("gpu-b")), 0o644); err != nil {
		t.Fatal(err)
	}
	_, unitB := running("gpu-b")
	devB := deviceOf("gpu-b")
	if devB == devA {
		t.Errorf("gpu-b got gpu-a's device %s: the allocation did not survive the restart", devA)
	}
	bound(unitB, devB)
	// Both devices are taken: a third pod is refused with the kubelet's reason.
	if err := os.WriteFile(filepath.Join(d.podsDir, "gpu-c.yaml"), []byte(podManifest("gpu-c")), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := client.GetPod(ctx, "default", "gpu-c")
		if err == nil && p.Status.Phase == v1.PodFailed {
			if p.Status.Reason != "OutOf"+samplePluginResource {
				t.Errorf("gpu-c refused with %q %q, want OutOf%s", p.Status.Reason, p.Status.Message, samplePluginResource)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gpu-c not refused after 30 s: %+v %v", p.Status, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
