package main

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slicelet/slicelet/internal/api"
)

// squeeze collapses runs of blanks in every line, so assertions do not depend on column widths.
func squeeze(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lead := len(l) - len(strings.TrimLeft(l, " "))
		lines[i] = strings.Repeat(" ", lead) + strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

// cliCase is one CLI invocation against the fake daemon.
type cliCase struct {
	name string
	args []string
	code int
	// out is the exact stdout when golden is set, else substrings of the squeezed stdout.
	out    []string
	golden bool
	// errOut are substrings of stderr.
	errOut []string
}

func runCases(t *testing.T, sock string, cases []cliCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, append(tc.args, "--socket", sock)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
			if tc.golden {
				if want := strings.Join(tc.out, ""); out != want {
					t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
				}
			} else {
				for _, w := range tc.out {
					if !strings.Contains(squeeze(out), w) {
						t.Errorf("stdout lacks %q:\n%s", w, out)
					}
				}
			}
			for _, w := range tc.errOut {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if len(tc.errOut) == 0 && tc.code == 0 && errOut != "" {
				t.Errorf("unexpected stderr:\n%s", errOut)
			}
		})
	}
}

func TestGetPods(t *testing.T) {
	sock := startDaemon(t, newFakeDaemon())
	runCases(t, sock, []cliCase{
		{name: "table", args: []string{"get", "pods"}, golden: true, out: []string{
			"NAME     READY   STATUS             RESTARTS      AGE\n",
			"big      0/1     OutOfcpu           0             3h\n",
			"crash    0/1     CrashLoopBackOff   5 (30m ago)   3h\n",
			"static   3/3     Running            0             3h\n",
			"web      1/1     Running            3 (30m ago)   3h\n",
		}},
		{name: "wide", args: []string{"get", "pods", "-o", "wide"}, out: []string{
			"NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE READINESS GATES QOS SLICE SOURCE\n",
			"static 3/3 Running 0 3h <none> <none> <none> <none> BestEffort kubepods-besteffort-podaaaaaaaa_0000_0000_0000_000000000002.slice file:/etc/slicelet/pods.d/static.yaml\n",
			"web 1/1 Running 3 (30m ago) 3h <none> <none> <none> <none> Burstable kubepods-burstable-podaaaaaaaa_0000_0000_0000_000000000001.slice api\n",
		}},
		{name: "all namespaces", args: []string{"get", "pods", "-A"}, out: []string{
			"NAMESPACE NAME READY STATUS RESTARTS AGE\n",
			"kube-system dns 0/1 ContainerCreating 0 3h\n",
		}},
		{name: "namespace", args: []string{"get", "pods", "-n", "kube-system"}, golden: true, out: []string{
			"NAME   READY   STATUS              RESTARTS   AGE\n",
			"dns    0/1     ContainerCreating   0          3h\n",
		}},
		{name: "empty namespace", args: []string{"get", "pods", "--namespace", "nothing"}, errOut: []string{"No resources found in nothing namespace.\n"}},
		{name: "one pod", args: []string{"get", "pod", "web"}, out: []string{"NAME READY STATUS RESTARTS AGE\nweb 1/1 Running 3 (30m ago) 3h\n"}},
		{name: "pod/name", args: []string{"get", "pod/big"}, out: []string{"big 0/1 OutOfcpu 0 3h\n"}},
		{name: "names", args: []string{"get", "pods", "-o", "name"}, golden: true, out: []string{"pod/big\npod/crash\npod/static\npod/web\n"}},
		{name: "yaml", args: []string{"get", "pod", "web", "-o", "yaml"}, out: []string{"apiVersion: v1\nkind: Pod\n", "name: web\n", "reason: OOMKilled\n"}},
		{name: "yaml list", args: []string{"get", "pods", "-o", "yaml"}, out: []string{"apiVersion: v1\nitems:\n", "kind: List\n"}},
		{name: "missing pod", args: []string{"get", "pod", "nope"}, code: exitFailure, errOut: []string{`slicectl: pod "default/nope": not found`}},
		{name: "one missing of two", args: []string{"get", "pods", "web", "nope"}, code: exitFailure, out: []string{"web 1/1"}, errOut: []string{"nope"}},
		{name: "bad output", args: []string{"get", "pods", "-o", "xml"}, code: exitUsage, errOut: []string{`get: -o "xml": must be wide, json, yaml, name, jsonpath=..., go-template=..., custom-columns=...`}},
		{name: "unknown resource", args: []string{"get", "deployments"}, code: exitUsage, errOut: []string{`unknown resource "deployments"`}},
		{name: "nothing", args: []string{"get"}, code: exitUsage, errOut: []string{"get: what to get"}},
	})

	t.Run("json", func(t *testing.T) {
		code, out, _ := runCLI(t, "get", "pods", "-o", "json", "--socket", sock)
		var list struct {
			Kind  string `json:"kind"`
			Items []struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
				Status struct {
					Reason string `json:"reason"`
				} `json:"status"`
			} `json:"items"`
		}
		if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil {
			t.Fatalf("exit %d, %v\n%s", code, err, out)
		}
		if list.Kind != "List" || len(list.Items) != 4 || list.Items[0].Kind != "Pod" || list.Items[0].Metadata.Name != "big" || list.Items[0].Status.Reason != "OutOfcpu" {
			t.Errorf("list = %+v", list)
		}
	})
}

func TestDescribePod(t *testing.T) {
	sock := startDaemon(t, newFakeDaemon())
	runCases(t, sock, []cliCase{
		{name: "running with an OOM kill behind it", args: []string{"describe", "pod", "web"}, out: []string{
			"Name: web\nNamespace: default\nUID: aaaaaaaa-0000-0000-0000-000000000001\n",
			"Labels: app=web\nAnnotations: kubernetes.io/config.source: api\n", "slicelet.io/origin: api\nSource: api\n",
			"Status: Running\nQoS Class: Burstable\nSlice: kubepods-burstable-podaaaaaaaa_0000_0000_0000_000000000001.slice\n",
			"Containers:\n  app:\n    Command:\n      /bin/sleep\n      infinity\n    State: Running\n",
			"    Last State: Terminated\n      Reason: OOMKilled\n      Exit Code: 137\n",
			"    Ready: True\n    Restart Count: 3\n    Limits:\n      memory: 64Mi\n    Requests:\n      cpu: 100m\n      memory: 64Mi\n",
			"    Environment:\n      MODE: prod\n",
			"Conditions:\n  Type Status Reason\n  Initialized True -\n  Ready True -\n",
		}},
		{name: "file pod with init containers", args: []string{"describe", "pod", "static"}, out: []string{
			"Source: file (/etc/slicelet/pods.d/static.yaml)\n",
			"Init Containers:\n  setup:\n    Command:\n      /bin/true\n    State: Terminated\n      Reason: Completed\n      Exit Code: 0\n",
			"  proxy:\n    Restart Policy: Always (sidecar)\n    State: Running\n",
			"Containers:\n  app:\n",
		}},
		{name: "rejected by admission", args: []string{"describe", "pod", "big"}, out: []string{
			"Status: Failed\nReason: OutOfcpu\nMessage: Pod was rejected: Node didn't have enough resource: cpu, requested: 8000, used: 100, capacity: 3800\n",
			"    State: Waiting\n      Reason: <no status yet>\n",
		}},
		{name: "crash loop", args: []string{"describe", "pod", "crash"}, out: []string{
			"    State: Waiting\n      Reason: CrashLoopBackOff\n      Message: back-off 5m0s restarting failed container\n    Last State: Terminated\n      Reason: Error\n      Exit Code: 1\n",
			"    Restart Count: 5\n",
		}},
		{name: "other namespace", args: []string{"describe", "pod", "dns", "-n", "kube-system"}, out: []string{"Namespace: kube-system\n"}},
		{name: "missing", args: []string{"describe", "pod", "nope"}, code: exitFailure, errOut: []string{`pod "default/nope": not found`}},
		{name: "no name", args: []string{"describe", "pod"}, code: exitUsage, errOut: []string{"describe pod: NAME is required"}},
		{name: "not a pod", args: []string{"describe", "node"}, code: exitUsage, errOut: []string{`describe: unknown resource "node"`}},
	})
}

func TestApplyAndDelete(t *testing.T) {
	f := newFakeDaemon()
	sock := startDaemon(t, f)
	dir := t.TempDir()
	pod := func(name, mem string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n  containers:\n  - name: app\n    command: [/bin/sleep, infinity]\n    resources:\n      requests: {memory: " + mem + "}\n"
	}
	multi := writeFile(t, dir, "multi.yaml", pod("a", "64Mi")+"---\n# just a comment\n---\n"+pod("b", "-1Mi")+"---\n"+pod("static", "1Mi")+"---\n"+pod("c", "1Mi"))
	single := writeFile(t, dir, "a.yaml", pod("a", "64Mi"))
	changed := writeFile(t, dir, "a2.yaml", pod("a", "128Mi"))
	manifests := filepath.Join(dir, "pods.d")
	os.Mkdir(manifests, 0o755)
	writeFile(t, manifests, "d1.yaml", pod("d1", "1Mi"))
	writeFile(t, manifests, "d2.json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"d2"},"spec":{"containers":[{"name":"app"}]}}`)
	writeFile(t, manifests, "README", "not a manifest")
	empty := writeFile(t, dir, "empty.yaml", "# nothing\n")
	hostnet := writeFile(t, dir, "hostnet.yaml", strings.Replace(pod("hostnet", "1Mi"), "spec:\n", "spec:\n  hostNetwork: true\n  hostPID: true\n", 1)+"---\n"+pod("e", "1Mi"))

	runCases(t, sock, []cliCase{
		{name: "multi-document with failures", args: []string{"apply", "-f", multi}, code: exitFailure,
			out: []string{"pod/a created\npod/c created\n"},
			errOut: []string{
				"slicectl: " + multi + ": document 1: invalid pod manifest:\n  manifest: spec.containers[0].resources.requests[memory]: Invalid value: \"-1Mi\": must be greater than or equal to 0",
				"slicectl: " + multi + `: document 2: pod "default/static" comes from the manifest file /etc/slicelet/pods.d/static.yaml: conflict`,
			}},
		{name: "unchanged", args: []string{"apply", "-f", single}, golden: true, out: []string{"pod/a unchanged\n"}},
		{name: "configured", args: []string{"apply", "-f", changed}, golden: true, out: []string{"pod/a configured\n"}},
		{name: "directory", args: []string{"apply", "-f", manifests}, golden: true, out: []string{"pod/d1 created\npod/d2 created\n"}},
		{name: "empty file", args: []string{"apply", "-f", empty}, code: exitFailure, errOut: []string{"empty.yaml: no pod in the file"}},
		{name: "missing file", args: []string{"apply", "-f", filepath.Join(dir, "nope.yaml")}, code: exitFailure, errOut: []string{"nope.yaml: no such file or directory"}},
		{name: "no file", args: []string{"apply"}, code: exitUsage, errOut: []string{"apply: -f FILE is required"}},
		{name: "namespace", args: []string{"apply", "-f", single, "-n", "team"}, golden: true, out: []string{"pod/a created\n"}},
		{name: "namespace mismatch", args: []string{"apply", "-f", writeFile(t, dir, "ns.yaml", strings.Replace(pod("n", "1Mi"), "{name: n}", "{name: n, namespace: other}", 1)), "-n", "team"},
			code: exitFailure, errOut: []string{`ns.yaml: the manifest's namespace "other" does not match -n "team"`}},
		{name: "get in namespace", args: []string{"get", "pods", "-n", "team", "-o", "name"}, golden: true, out: []string{"pod/a\n"}},
		{name: "get after apply", args: []string{"get", "pods", "a", "d2", "-o", "name"}, golden: true, out: []string{"pod/a\npod/d2\n"}},

		{name: "pod security refuses, the next document still applies", args: []string{"apply", "-f", hostnet}, code: exitFailure,
			out:    []string{"pod/e created\n"},
			errOut: []string{"slicectl: " + hostnet + `: document 0: pods "hostnet" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true, hostPID=true)` + "\n"}},
		{name: "dry run", args: []string{"apply", "-f", writeFile(t, dir, "dry.yaml", pod("dry", "1Mi")), "--dry-run=server"}, golden: true,
			out: []string{"pod/dry created (server dry run)\n"}},
		{name: "dry run stored nothing", args: []string{"get", "pod", "dry"}, code: exitFailure, errOut: []string{`pod "default/dry": not found`}},
		{name: "dry run of a refused pod", args: []string{"apply", "-f", hostnet, "--dry-run", "server"}, code: exitFailure,
			out: []string{"pod/e unchanged (server dry run)\n"}, errOut: []string{`pods "hostnet" is forbidden: violates PodSecurity`}},
		{name: "client dry run", args: []string{"apply", "-f", single, "--dry-run=client"}, out: []string{"pod/a configured (dry run)\n"}},
		{name: "unknown dry run", args: []string{"apply", "-f", single, "--dry-run=maybe"}, code: exitUsage, errOut: []string{`--dry-run="maybe": want "none", "client" or "server"`}},

		{name: "delete", args: []string{"delete", "pod", "a", "d1"}, golden: true, out: []string{"pod \"a\" deleted\npod \"d1\" deleted\n"}},
		{name: "delete again", args: []string{"delete", "pod", "a"}, code: exitFailure, errOut: []string{`slicectl: pod "default/a": not found`}},
		{name: "delete file pod", args: []string{"delete", "pod/static"}, code: exitFailure,
			errOut: []string{"remove the manifest file /etc/slicelet/pods.d/static.yaml"}},
		{name: "delete without kind", args: []string{"delete", "web"}, code: exitUsage, errOut: []string{`delete: unknown resource "web"`}},
		{name: "delete nothing", args: []string{"delete"}, code: exitUsage, errOut: []string{"delete: what to delete: delete pod NAME"}},
		{name: "delete without name", args: []string{"delete", "pod"}, code: exitUsage, errOut: []string{"delete pod: NAME is required"}},
	})
	if _, ok := f.Pods["default/static"]; !ok {
		t.Error("the file pod was deleted")
	}
}

func TestLogs(t *testing.T) {
	f := newFakeDaemon()
	sock := startDaemon(t, f)
	runCases(t, sock, []cliCase{
		{name: "only container", args: []string{"logs", "web"}, golden: true, out: []string{"one\ntwo\nthree\n"}},
		{name: "default container noted", args: []string{"logs", "static"}, golden: true, out: []string{"static app\n"},
			errOut: []string{`Defaulted container "app" out of: setup (init), proxy (init), app, helper`}},
		{name: "-c", args: []string{"logs", "static", "-c", "helper"}, golden: true, out: []string{"static helper\n"}},
		{name: "container argument", args: []string{"logs", "static", "helper"}, golden: true, out: []string{"static helper\n"}},
		{name: "unknown container", args: []string{"logs", "web", "-c", "nope"}, code: exitFailure, errOut: []string{`slicectl: container "nope" of pod default/web: not found`}},
		{name: "unknown pod", args: []string{"logs", "nope"}, code: exitFailure, errOut: []string{`pod "default/nope": not found`}},
		{name: "tail 0", args: []string{"logs", "web", "--tail", "0"}, code: exitUsage, errOut: []string{"--tail 0 would print nothing"}},
		{name: "no name", args: []string{"logs"}, code: exitUsage, errOut: []string{"logs: pod NAME is required"}},
		{name: "all containers with prefixes", args: []string{"logs", "static", "--all-containers", "--prefix"}, golden: true,
			out: []string{"[pod/static/app] static app\n[pod/static/helper] static helper\n"}},
		{name: "prefix", args: []string{"logs", "web", "--prefix", "--tail=2"}, golden: true, out: []string{"[pod/web/app] one\n[pod/web/app] two\n[pod/web/app] three\n"}},
		{name: "all containers and a name", args: []string{"logs", "static", "app", "--all-containers"}, code: exitUsage, errOut: []string{"cannot be combined with a container name"}},
		{name: "since and since-time", args: []string{"logs", "web", "--since", "1m", "--since-time", "2026-11-28T09:30:00Z"}, code: exitUsage, errOut: []string{"exclude each other"}},
		{name: "bad since-time", args: []string{"logs", "web", "--since-time", "yesterday"}, code: exitUsage, errOut: []string{`--since-time "yesterday": want an RFC 3339 time`}},
		{name: "bad since", args: []string{"logs", "web", "--since", "soon"}, code: exitUsage, errOut: []string{`invalid argument "soon" for "--since"`}},
	})
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"follow, previous, tail", []string{"-f", "--previous", "--tail", "2"}, "app follow=true previous=true tail=2 since=- timestamps=false"},
		{"since-time and timestamps", []string{"--since-time", "2026-11-28T09:30:00+01:00", "--timestamps"}, "app follow=false previous=false tail=0 since=2026-11-28T08:30:00Z timestamps=true"},
	} {
		t.Run("options reach the daemon: "+tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, append([]string{"logs", "web", "--socket", sock}, tc.args...)...)
			f.Mu.Lock()
			got := f.LastLogs
			f.Mu.Unlock()
			if code != 0 || got != tc.want {
				t.Errorf("exit %d (%s), daemon got %q, want %q", code, errOut, got, tc.want)
			}
		})
	}
	t.Run("--since is a time before now", func(t *testing.T) {
		before := time.Now()
		code, _, errOut := runCLI(t, "logs", "web", "--since", "1h", "--socket", sock)
		f.Mu.Lock()
		got := f.LastLogs
		f.Mu.Unlock()
		_, s, _ := strings.Cut(got, "since=")
		s, _, _ = strings.Cut(s, " ")
		at, err := time.Parse(time.RFC3339Nano, s)
		if code != 0 || err != nil || at.After(before.Add(-time.Hour+time.Second)) || at.Before(before.Add(-time.Hour-time.Minute)) {
			t.Errorf("exit %d (%s), daemon got %q", code, errOut, got)
		}
	})
}

func TestNodeCommand(t *testing.T) {
	sock := startDaemon(t, newFakeDaemon())
	runCases(t, sock, []cliCase{
		{name: "table", args: []string{"node"}, out: []string{
			"Name: node1\nConditions:\n  TYPE STATUS SINCE REASON MESSAGE\n  MemoryPressure False 3h KubeletHasSufficientMemory kubelet has sufficient memory available\n",
			"Capacity:\n  cpu: 4\n  memory: 16Gi\n  pods: 110\nAllocatable:\n  cpu: 3800m\n  memory: 14760Mi\n  pods: 110\n",
			"Pods: 4 active (max 110), 5 in total\n  By phase: Pending 1, Running 3, Failed 1 (1 rejected by admission)\n  By QoS: Burstable 1, BestEffort 3\n",
		}},
		{name: "yaml", args: []string{"node", "-o", "yaml"}, out: []string{"node:\n", "rejected: 1\n"}},
		{name: "bad output", args: []string{"node", "-o", "wide"}, code: exitUsage},
	})
	t.Run("json", func(t *testing.T) {
		code, out, _ := runCLI(t, "node", "-o", "json", "--socket", sock)
		var n api.NodeInfo
		if err := json.Unmarshal([]byte(out), &n); code != 0 || err != nil {
			t.Fatalf("exit %d, %v", code, err)
		}
		if n.Pods.Active != 4 || n.Node.Name != "node1" {
			t.Errorf("node = %+v", n)
		}
	})
}

func TestExplainOnline(t *testing.T) {
	sock := startDaemon(t, newFakeDaemon())
	dir := t.TempDir()
	pod := writeFile(t, dir, "b.yaml", burstablePod)
	cfg := writeFile(t, dir, "config.toml", "")
	strictCfg := writeFile(t, dir, "strict.toml", "[pods.security.api]\nenforce = \"restricted\"\nenforce_version = \"v1.30\"\n")
	hostnet := writeFile(t, dir, "hostnet.yaml", strings.Replace(burstablePod, "spec:\n", "spec:\n  hostNetwork: true\n", 1))
	runCases(t, sock, []cliCase{
		{name: "node asks the daemon", args: []string{"explain", "node"}, out: []string{
			"Explained by slicelet at " + sock + ".\nCgroup mode: v2\n",
			"QoS slices (for 4 pods):\n",
			"  MemoryMax=17179869184\n", // exact integers, not 1.7179869184e+10
		}},
		{name: "node json", args: []string{"explain", "node", "-o", "json"}, out: []string{`"cpuWeight": 157`}},
		{name: "pod online", args: []string{"explain", "pod", "--online", "-f", pod}, out: []string{
			"Pod: default/nginx-b (uid 22222222-aaaa-bbbb-cccc-000000000001)\n",
			"Slice: kubepods-burstable-pod22222222_aaaa_bbbb_cccc_000000000001.slice\n",
			"Cgroup mode: v2\n", "  CPUWeight=4\n",
		}},
		{name: "pod offline by default", args: []string{"explain", "pod", "-f", pod, "--config", cfg, "--cgroup-mode", "v1", "--capacity", "cpu=4,memory=16Gi"}, out: []string{
			"Pod: default/nginx-b (uid 11111111-aaaa-bbbb-cccc-000000000003)\n", "Cgroup mode: hybrid\n",
		}},
		{name: "pod security verdicts from the configuration", args: []string{"explain", "pod", "-f", hostnet, "--config", strictCfg, "--cgroup-mode", "v2", "--capacity", "cpu=4,memory=16Gi"}, out: []string{
			"Pod Security:\n  SOURCE LEVEL VERDICT\n",
			"  api restricted:v1.30 violates PodSecurity \"restricted:v1.30\": host namespaces (hostNetwork=true), allowPrivilegeEscalation != false",
			"  file privileged:latest allowed\n",
		}},
		{name: "pod security verdicts in json", args: []string{"explain", "pod", "-f", pod, "--config", cfg, "--cgroup-mode", "v2", "--capacity", "cpu=4,memory=16Gi", "-o", "json"}, out: []string{
			`"podSecurity": [`, `"level": "baseline:latest",`, `"level": "privileged:latest",`,
		}},
		{name: "node offline with --capacity", args: []string{"explain", "node", "--config", cfg, "--cgroup-mode", "v1", "--capacity", "cpu=2,memory=4Gi"}, out: []string{
			"Cgroup mode: hybrid\n", "capacity 2000 4294967296 0\n",
		}},
		{name: "online and offline", args: []string{"explain", "node", "--online", "--offline"}, code: exitUsage, errOut: []string{"--online and --offline exclude each other"}},
		{name: "online with capacity", args: []string{"explain", "pod", "--online", "-f", pod, "--capacity", "cpu=1,memory=1Gi"}, code: exitUsage,
			errOut: []string{"--capacity is for offline explanations"}},
		{name: "online node with files", args: []string{"explain", "node", "--online", "-f", pod}, code: exitUsage, errOut: []string{"-f is for offline explanations"}},
	})

	down := filepath.Join(dir, "down.sock")
	t.Run("online required but daemon down", func(t *testing.T) {
		code, _, errOut := runCLI(t, "explain", "node", "--online", "--socket", down)
		if code != exitDaemonDown || !strings.Contains(errOut, "cannot reach slicelet at "+down) {
			t.Errorf("exit %d, stderr %q", code, errOut)
		}
	})
	t.Run("node falls back to offline", func(t *testing.T) {
		code, out, errOut := runCLI(t, "explain", "node", "--socket", down)
		if !strings.Contains(errOut, "slicectl: slicelet is not running (nothing answers at "+down+"); explaining offline") {
			t.Errorf("stderr %q", errOut)
		}
		// Offline reads this machine's capacity and cgroup mode.
		if code != exitOK || !strings.Contains(out, "Cgroup mode: ") || strings.Contains(out, "Explained by slicelet") {
			t.Errorf("exit %d\n%s%s", code, out, errOut)
		}
	})
}

func TestDaemonDown(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.sock")
	refused := filepath.Join(dir, "refused.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: refused, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	for _, sock := range []struct{ name, path, reason string }{
		{"missing socket", missing, "no such file or directory"},
		{"refused", refused, "connection refused"},
	} {
		want := "slicectl: cannot reach slicelet at " + sock.path + ": " + sock.reason +
			"\n  is it running? systemctl status slicelet; journalctl -u slicelet\n"
		for _, args := range [][]string{
			{"get", "pods"}, {"get", "pod", "web"}, {"describe", "pod", "web"}, {"delete", "pod", "web"},
			{"logs", "web"}, {"logs", "web", "-c", "app"}, {"node"}, {"apply", "-f", writeFile(t, dir, "p.yaml", burstablePod)},
		} {
			t.Run(sock.name+"/"+strings.Join(args, " "), func(t *testing.T) {
				code, out, errOut := runCLI(t, append(args, "--socket", sock.path)...)
				if code != exitDaemonDown || errOut != want || out != "" {
					t.Errorf("exit %d, stdout %q, stderr\n%s\nwant exit %d, stderr\n%s", code, out, errOut, exitDaemonDown, want)
				}
			})
		}
	}
}

func TestSocketFromConfig(t *testing.T) {
	sock := startDaemon(t, newFakeDaemon())
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.toml", "[api]\nsocket = \""+sock+"\"\n")
	code, out, errOut := runCLI(t, "get", "pods", "-o", "name", "--config", cfg)
	if code != 0 || !strings.Contains(out, "pod/web") {
		t.Errorf("exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = runCLI(t, "get", "pods", "--config", filepath.Join(dir, "nope.toml"))
	if code != exitFailure || !strings.Contains(errOut, "nope.toml") {
		t.Errorf("missing --config: exit %d, stderr %q", code, errOut)
	}
}

func TestExitCodes(t *testing.T) {
	c := &cli{ctx: t.Context(), stdout: &strings.Builder{}, stderr: &strings.Builder{}}
	for _, tc := range []struct {
		name string
		err  error
		code int
	}{
		{"ok", nil, exitOK},
		{"usage", usageErr("bad"), exitUsage},
		{"failure", errors.New("boom"), exitFailure},
		{"already reported", errReported, exitFailure},
		{"not found", &api.StatusError{Code: 404, Message: "x"}, exitFailure},
		{"daemon down", &api.DaemonDownError{Socket: "/s", Err: errors.New("connection refused")}, exitDaemonDown},
		{"socket permission", &api.SocketPermissionError{Socket: "/s", Err: os.ErrPermission}, exitPermission},
		{"forbidden", &api.StatusError{Code: 403, Message: "permission denied: uid 1000 is neither root nor in group \"slicelet\""}, exitPermission},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.exit(tc.err); got != tc.code {
				t.Errorf("exit(%v) = %d, want %d", tc.err, got, tc.code)
			}
		})
	}
}
