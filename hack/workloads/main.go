// Command workloads explains every pod manifest of a directory offline, each on its own, as a
// node configured by -config would take it (slicectl explain pod -o json: validation, the
// runtime on its network, admission against -capacity), and prints one line per pod that some
// stage refuses, then the count per stage:
//
//	go run ./hack/workloads [-slicectl bin/slicectl] [-config FILE] [-capacity LIST] DIR...
//
// Without -config the node is a cluster node with the cri runtime on a CNI network and cluster
// DNS, as a kubeadm-built cluster's. make workloads-explain runs it on the workload corpus.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// clusterNode is the default node: cluster mode, containerd over CRI, pods on a CNI network,
// cluster DNS. The kubeconfig is never read offline.
const clusterNode = `[runtime]
type = "cri"
endpoint = "unix:///run/containerd/containerd.sock"
network = "cni"
[cluster]
enabled = true
kubeconfig = "/etc/slicelet/kubeconfig"
node_name = "node-a"
dns_servers = ["10.96.0.10"]
domain = "cluster.local"
`

// stage is one stage of an explanation as slicectl explain -o json gives it.
type stage struct {
	Valid    *bool    `json:"valid"`
	Allowed  *bool    `json:"allowed"`
	Admit    *bool    `json:"admit"`
	Problems []string `json:"problems"`
	Reason   string   `json:"reason"`
	Message  string   `json:"message"`
}

type explanation struct {
	Validation stage `json:"validation"`
	Runtime    stage `json:"runtime"`
	Admission  stage `json:"admission"`
}

// verdict is one pod's outcome: the first stage that refuses it and why, "" when none does.
type verdict struct {
	file, stage, why string
}

func main() {
	slicectl := flag.String("slicectl", "bin/slicectl", "the slicectl binary")
	config := flag.String("config", "", "slicelet's configuration (default: a cluster node with the cri runtime on CNI)")
	capacity := flag.String("capacity", "cpu=64,memory=256Gi,ephemeral-storage=1Ti,pids=4194304", "the node's capacity (slicectl explain --capacity)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: workloads [-slicectl BIN] [-config FILE] [-capacity LIST] DIR...")
		os.Exit(2)
	}
	if err := run(os.Stdout, *slicectl, *config, *capacity, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "workloads:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, slicectl, config, capacity string, dirs []string) error {
	if config == "" {
		dir, err := os.MkdirTemp("", "workloads-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		config = filepath.Join(dir, "config.toml")
		if err := os.WriteFile(config, []byte(fmt.Sprintf("state_dir = %q\n%s", filepath.Join(dir, "state"), clusterNode)), 0o644); err != nil {
			return err
		}
	}
	var files []string
	for _, d := range dirs {
		got, err := filepath.Glob(filepath.Join(d, "*.yaml"))
		if err != nil {
			return err
		}
		files = append(files, got...)
	}
	if len(files) == 0 {
		return fmt.Errorf("no *.yaml in %s", strings.Join(dirs, ", "))
	}
	sort.Strings(files)
	counts := map[string]int{}
	for _, f := range files {
		v, err := explain(slicectl, config, capacity, f)
		if err != nil {
			return err
		}
		counts[v.stage]++
		if v.stage != "" {
			fmt.Fprintf(w, "%s: %s: %s\n", filepath.Base(f), v.stage, v.why)
		}
	}
	fmt.Fprintf(w, "\n%d pods: %d run (every stage admits them), %d refused by validation, %d by the runtime, %d by admission\n",
		len(files), counts[""], counts["validation"], counts["runtime"], counts["admission"])
	return nil
}

// explain runs slicectl explain on one file and returns the first stage that refuses the pod.
// A pod that fails validation makes slicectl exit 1 after its explanation; any other failure
// (no output) is an error naming the file.
func explain(slicectl, config, capacity, file string) (verdict, error) {
	var out, errOut bytes.Buffer
	cmd := exec.Command(slicectl, "explain", "pod", "--config", config, "--capacity", capacity, "--cgroup-mode", "v2", "-o", "json", "-f", file)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	runErr := cmd.Run()
	var x explanation
	if err := json.Unmarshal(out.Bytes(), &x); err != nil {
		return verdict{}, fmt.Errorf("%s: no explanation (%w; slicectl: %v): %s", file, err, runErr, strings.TrimSpace(errOut.String()))
	}
	v := verdict{file: file}
	switch {
	case x.Validation.Valid != nil && !*x.Validation.Valid:
		v.stage, v.why = "validation", strings.Join(x.Validation.Problems, "; ")
	case x.Runtime.Allowed != nil && !*x.Runtime.Allowed:
		v.stage, v.why = "runtime", strings.Join(x.Runtime.Problems, "; ")
	case x.Admission.Admit != nil && !*x.Admission.Admit:
		v.stage, v.why = "admission", x.Admission.Reason+": "+x.Admission.Message
	}
	return v, nil
}
