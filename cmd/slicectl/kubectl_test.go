package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCLIStdin is runCLI with the standard input given.
func runCLIStdin(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runIO(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// TestGetPrinters compares every printer's output with testdata/get (go test -update rewrites).
func TestGetPrinters(t *testing.T) {
	sock := startDaemon(t, newFakeDaemon())
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"table", []string{"get", "pods"}},
		{"wide", []string{"get", "pods", "-o", "wide"}},
		{"all-namespaces", []string{"get", "pods", "-A"}},
		{"no-headers", []string{"get", "pods", "--no-headers"}},
		{"show-labels", []string{"get", "pods", "--show-labels"}},
		{"name", []string{"get", "pods", "-o", "name"}},
		{"jsonpath", []string{"get", "pods", "-o", `jsonpath={range .items[*]}{.metadata.name}{"\t"}{.status.qosClass}{"\n"}{end}`}},
		{"jsonpath one pod", []string{"get", "pod", "web", "-o", "jsonpath={.spec.containers[0].env[0].value}"}},
		{"go-template", []string{"get", "pods", "-o", `go-template={{range .items}}{{.metadata.name}} {{.status.phase}}{{"\n"}}{{end}}`}},
		{"custom-columns", []string{"get", "pods", "-o", "custom-columns=NAME:.metadata.name,PHASE:.status.phase,APP:.metadata.labels.app"}},
		{"custom-columns no headers", []string{"get", "pods", "-o", "custom-columns=NAME:metadata.name,RESTARTS:.status.containerStatuses[*].restartCount", "--no-headers"}},
		{"sort-by restarts", []string{"get", "pods", "--sort-by", ".status.containerStatuses[0].restartCount", "-o", "name"}},
		{"sort-by phase", []string{"get", "pods", "-A", "--sort-by", "{.status.phase}"}},
		{"label selector", []string{"get", "pods", "-l", "app=web"}},
		{"field selector", []string{"get", "pods", "-A", "--field-selector", "status.phase=Running", "-o", "name"}},
		{"field selector not", []string{"get", "pods", "-A", "--field-selector=status.phase!=Running,metadata.name!=big", "-oname"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, append(tc.args, "--socket", sock)...)
			if code != 0 {
				t.Fatalf("exit %d, stderr %s", code, errOut)
			}
			golden(t, filepath.Join("testdata", "get", strings.ReplaceAll(tc.name, " ", "_")+".txt"), out)
		})
	}
	runCases(t, sock, []cliCase{
		{name: "json list", args: []string{"get", "pods", "-o", "json"}, out: []string{`"kind": "List"`, `"apiVersion": "v1"`, `"name": "web"`, `"kind": "Pod"`}},
		{name: "yaml pod", args: []string{"get", "pod", "web", "-oyaml"}, out: []string{"apiVersion: v1\nkind: Pod\n", "  name: web\n"}},
		{name: "empty selection", args: []string{"get", "pods", "-l", "app=nothing"}, errOut: []string{"No resources found in default namespace.\n"}},
		{name: "bad selector", args: []string{"get", "pods", "-l", "app=(x"}, code: exitFailure, errOut: []string{`labelSelector "app=(x"`}},
		{name: "unknown field", args: []string{"get", "pods", "--field-selector", "spec.priority=1"}, code: exitFailure, errOut: []string{"field label not supported: spec.priority"}},
		{name: "bad jsonpath", args: []string{"get", "pods", "-o", "jsonpath={.items[}"}, code: exitUsage, errOut: []string{"get: -o jsonpath="}},
		{name: "bad custom columns", args: []string{"get", "pods", "-o", "custom-columns=NAME"}, code: exitUsage, errOut: []string{`column "NAME": want HEADER:FIELD`}},
		{name: "names and selector", args: []string{"get", "pod", "web", "-l", "app=web"}, code: exitUsage, errOut: []string{"names cannot be combined with -l"}},
	})
}

// TestManifestInputs: -f - reads the standard input, a kind: List is its items, -R reads
// subdirectories, and delete takes the same input.
func TestManifestInputs(t *testing.T) {
	f := newFakeDaemon()
	sock := startDaemon(t, f)
	pod := func(name string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n  containers:\n  - {name: app, command: [/bin/sleep, infinity]}\n"
	}
	list := `{"apiVersion": "v1", "kind": "List", "items": [` +
		`{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "l1"}, "spec": {"containers": [{"name": "app"}]}},` +
		`{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "l2"}, "spec": {"containers": [{"name": "app"}]}}]}`
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tree", "sub", "deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "tree"), "top.yaml", pod("top"))
	writeFile(t, filepath.Join(dir, "tree", "sub", "deeper"), "deep.yaml", pod("deep"))
	tree := filepath.Join(dir, "tree")

	for _, tc := range []struct {
		name, stdin string
		args        []string
		code        int
		out, errOut string
	}{
		{name: "stdin", stdin: pod("in1") + "---\n" + pod("in2"), args: []string{"apply", "-f", "-"}, out: "pod/in1 created\npod/in2 created\n"},
		{name: "stdin twice", stdin: pod("x"), args: []string{"apply", "-f", "-", "-f", "-"}, code: exitUsage, errOut: "the standard input can be read only once"},
		{name: "kind List", stdin: list, args: []string{"apply", "-f", "-"}, out: "pod/l1 created\npod/l2 created\n"},
		{name: "directory without -R", args: []string{"apply", "-f", tree}, out: "pod/top created\n"},
		{name: "directory with -R", args: []string{"apply", "-R", "-f", tree}, out: "pod/deep created\npod/top unchanged\n"},
		{name: "bad item of a List", stdin: strings.Replace(list, `"name": "l2"}, "spec"`, `"name": "l2"}, "bogus": 1, "spec"`, 1),
			args: []string{"apply", "-f", "-"}, code: exitFailure, out: "pod/l1 unchanged\n", errOut: "<stdin>: items[1]"},
		{name: "client dry run of stdin", stdin: pod("dry"), args: []string{"apply", "-f", "-", "--dry-run=client"}, out: "pod/dry created (dry run)\n"},
		{name: "delete from stdin", stdin: list, args: []string{"delete", "-f", "-"}, out: "pod \"l1\" deleted\npod \"l2\" deleted\n"},
		{name: "delete -R without waiting", args: []string{"delete", "-R", "-f", tree, "--wait=false"}, out: "pod \"deep\" deleted\npod \"top\" deleted\n"},
		{name: "delete by label", args: []string{"delete", "pods", "-l", "app=web"}, out: "pod \"web\" deleted\n"},
		{name: "delete by label, none left", args: []string{"delete", "pods", "-l", "app=web"}, errOut: "No resources found in default namespace.\n"},
		{name: "delete --all of a namespace", args: []string{"delete", "pods", "--all", "-n", "kube-system"}, out: "pod \"dns\" deleted\n"},
		{name: "delete names and -f", args: []string{"delete", "pod", "a", "-f", tree}, code: exitUsage, errOut: "give one of names, -f, --all and -l"},
		{name: "grace period", args: []string{"delete", "pod", "in1", "--grace-period", "5", "--wait=false"}, out: "pod \"in1\" deleted\n"},
		{name: "bad grace period", args: []string{"delete", "pod", "in2", "--grace-period", "-2"}, code: exitUsage, errOut: "--grace-period -2: want -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLIStdin(t, tc.stdin, append(tc.args, "--socket", sock)...)
			if code != tc.code || out != tc.out || !strings.Contains(errOut, tc.errOut) {
				t.Errorf("exit %d (want %d)\nstdout:\n%s\nwant:\n%s\nstderr:\n%s\nwant it to contain %q", code, tc.code, out, tc.out, errOut, tc.errOut)
			}
		})
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	for _, gone := range []string{"default/l1", "default/deep", "default/web", "kube-system/dns"} {
		if _, ok := f.Pods[gone]; ok {
			t.Errorf("%s was not deleted", gone)
		}
	}
	for _, kept := range []string{"default/in2", "default/static"} {
		if _, ok := f.Pods[kept]; !ok {
			t.Errorf("%s is gone", kept)
		}
	}
	if strings.Join(f.Graces, ",") != "default/in1 5s" {
		t.Errorf("graces the daemon got: %v, want default/in1 5s", f.Graces)
	}
}

// TestVersionCmd: the client's version always, the daemon's when it answers.
func TestVersionCmd(t *testing.T) {
	sock := startDaemon(t, newFakeDaemon())
	runCases(t, sock, []cliCase{
		{name: "both", args: []string{"version"}, out: []string{"Client Version: ", "Server Version: "}},
		{name: "json", args: []string{"version", "-o", "json"}, out: []string{`"clientVersion": {`, `"serverVersion": {`, `"goVersion": "go`}},
		{name: "client yaml", args: []string{"version", "--client", "-oyaml"}, out: []string{"clientVersion:\n  buildDate: "}},
		{name: "bad output", args: []string{"version", "-o", "wide"}, code: exitUsage, errOut: []string{`version: -o "wide": must be json or yaml`}},
	})
	code, out, errOut := runCLI(t, "version", "--socket", filepath.Join(t.TempDir(), "none.sock"))
	if code != exitDaemonDown || !strings.Contains(out, "Client Version: ") || strings.Contains(out, "Server") || !strings.Contains(errOut, "systemctl status slicelet") {
		t.Errorf("daemon down: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// TestCompletion: the shells' scripts, and pod, namespace and container names from the daemon
// (cobra's __complete is what the scripts call).
func TestCompletion(t *testing.T) {
	sock := startDaemon(t, newFakeDaemon())
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		code, out, errOut := runCLI(t, "completion", shell)
		if code != 0 || !strings.Contains(out, "slicectl") {
			t.Errorf("completion %s: exit %d, %d bytes, stderr %s", shell, code, len(out), errOut)
		}
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"pod names", []string{"get", "pods", "w"}, "web\n:4\n"},
		{"pod names of a namespace", []string{"-n", "kube-system", "describe", "pod", ""}, "dns\n:4\n"},
		{"logs pod", []string{"logs", "s"}, "static\n:4\n"},
		{"logs container argument", []string{"logs", "static", "h"}, "helper\n:4\n"},
		{"-c", []string{"logs", "static", "-c", ""}, "setup\nproxy\napp\nhelper\n:4\n"},
		{"namespaces", []string{"get", "pods", "-n", ""}, "default\nkube-system\n:4\n"},
		{"resource", []string{"delete", ""}, "pods\n:4\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, append([]string{"__complete", "--socket", sock}, tc.args...)...)
			if code != 0 || out != tc.want {
				t.Errorf("exit %d, completions %q, want %q (stderr %s)", code, out, tc.want, errOut)
			}
		})
	}
}

// TestEvents: events lists and filters the daemon's events as kubectl events does; describe
// ends with the pod's events as kubectl describe does.
func TestEvents(t *testing.T) {
	sock := startDaemon(t, newFakeDaemon())
	runCases(t, sock, []cliCase{
		{name: "namespace", args: []string{"events"}, golden: true, out: []string{
			"LAST SEEN   TYPE      REASON     OBJECT    MESSAGE\n",
			"3h          Normal    Admitted   pod/web   Admitted from api\n",
			"3h          Warning   OutOfcpu   pod/big   Node didn't have enough resource: cpu, requested: 8000, used: 100, capacity: 3800\n",
			"30m         Warning   BackOff    pod/web   Back-off restarting failed container app in pod web_default(aaaaaaaa-0000-0000-0000-000000000001)\n",
		}},
		{name: "for a pod, warnings", args: []string{"events", "--for", "pod/web", "--types", "Warning", "--no-headers"}, out: []string{"30m Warning BackOff pod/web Back-off restarting"}},
		{name: "other namespace", args: []string{"events", "-n", "kube-system"}, errOut: []string{"No resources found in kube-system namespace."}},
		{name: "all namespaces", args: []string{"events", "-A", "-o", "json"}, out: []string{`"reason": "OutOfcpu"`}},
		{name: "bad type", args: []string{"events", "--types", "Error"}, code: exitUsage, errOut: []string{`--types "Error": want Normal or Warning`}},
		{name: "describe", args: []string{"describe", "pod", "web"}, out: []string{
			"Events:\n",
			" Type Reason Age From Message\n",
			" ---- ------ ---- ---- -------\n",
			" Normal Admitted 3h slicelet Admitted from api\n",
			" Warning BackOff 30m (x5 over 60m) slicelet Back-off restarting failed container app",
		}},
		{name: "describe without events", args: []string{"describe", "pod", "crash"}, out: []string{"Events: <none>\n"}},
	})
}
