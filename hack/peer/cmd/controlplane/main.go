// Command controlplane runs a local Kubernetes control plane (etcd, kube-apiserver and, unless
// turned off, kube-scheduler and kube-controller-manager) on 127.0.0.1 for tests and demos, from
// the binaries make peer-build caches (package hack/peer/controlplane).
//
//	go run ./cmd/controlplane up   [FLAGS]        start it, print where its kubeconfigs are, exit
//	go run ./cmd/controlplane run  [FLAGS]        the same, then stop it on SIGINT or SIGTERM
//	go run ./cmd/controlplane node [FLAGS] NAME   issue node NAME's credentials on a running one
//	go run ./cmd/controlplane down [FLAGS]        stop the one recorded in the run dir
//
// (from hack/peer). Flags:
//
//	-dir DIR            the run dir (PKI, etcd data, kubeconfigs); default <sandbox state>/controlplane
//	                    with -sandbox, required otherwise
//	-bin DIR            the binaries; default build/peer/v1.37.2 of the repository
//	-nodes a,b          nodes to issue credentials for (nodes/<name>.conf)
//	-scheduler=false, -controller-manager=false   run only etcd and the API server
//	-sandbox NAME       run the components inside sandbox NAME (go run ./hack/sandbox start NAME),
//	                    whose network namespace is private; without it they run in the caller's
//	                    (a shell or test inside the sandbox already)
//	-sandbox-root DIR   the sandbox state root (default /var/lib/slicelet-sandbox)
//	-apiserver-port N, -etcd-port N, -etcd-peer-port N, -ready-timeout D
//
// up, run and node print one JSON object: server, ca, admin_kubeconfig, node_kubeconfigs,
// units. Every kubeconfig names https://127.0.0.1:<port>, reachable inside the sandbox only.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/slicelet/slicelet/hack/peer/controlplane"
	"github.com/slicelet/slicelet/internal/testharness/sandbox"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = "usage: controlplane up|run|down [FLAGS]\n       controlplane node [FLAGS] NAME"

// summary is what up, run and node print.
type summary struct {
	Server          string            `json:"server"`
	CA              string            `json:"ca"`
	AdminKubeconfig string            `json:"admin_kubeconfig"`
	NodeKubeconfigs map[string]string `json:"node_kubeconfigs,omitempty"`
	Units           []string          `json:"units,omitempty"`
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	verb := args[0]
	fs := flag.NewFlagSet("controlplane "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg         controlplane.Config
		nodes       string
		sandboxName string
		sandboxRoot string
	)
	fs.StringVar(&cfg.Dir, "dir", "", "run dir")
	fs.StringVar(&cfg.BinDir, "bin", "", "directory of etcd, kube-apiserver, kube-scheduler, kube-controller-manager (default build/peer/v1.37.2 of the repository)")
	fs.StringVar(&nodes, "nodes", "", "comma-separated node names to issue credentials for")
	fs.BoolVar(&cfg.Scheduler, "scheduler", true, "run kube-scheduler")
	fs.BoolVar(&cfg.ControllerManager, "controller-manager", true, "run kube-controller-manager")
	fs.StringVar(&sandboxName, "sandbox", "", "run inside this sandbox")
	fs.StringVar(&sandboxRoot, "sandbox-root", sandbox.DefaultStateRoot, "sandbox state root")
	fs.IntVar(&cfg.APIServerPort, "apiserver-port", controlplane.DefaultAPIServerPort, "API server port on 127.0.0.1")
	fs.IntVar(&cfg.EtcdPort, "etcd-port", controlplane.DefaultEtcdPort, "etcd client port on 127.0.0.1")
	fs.IntVar(&cfg.EtcdPeerPort, "etcd-peer-port", controlplane.DefaultEtcdPeerPort, "etcd peer port on 127.0.0.1")
	fs.DurationVar(&cfg.ReadyTimeout, "ready-timeout", controlplane.DefaultReadyTimeout, "bound on the wait for /readyz")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	cfg.Log = slog.New(slog.NewTextHandler(stderr, nil))
	if nodes != "" {
		cfg.Nodes = strings.Split(nodes, ",")
	}
	if err := setup(&cfg, sandboxName, sandboxRoot); err != nil {
		fmt.Fprintln(stderr, "controlplane:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case verb == "up" && fs.NArg() == 0:
		err = up(ctx, cfg, stdout, false)
	case verb == "run" && fs.NArg() == 0:
		err = up(ctx, cfg, stdout, true)
	case verb == "down" && fs.NArg() == 0:
		var cp *controlplane.ControlPlane
		if cp, err = controlplane.Open(cfg); err == nil {
			err = cp.Stop(context.Background())
		}
	case verb == "node" && fs.NArg() == 1:
		err = node(cfg, fs.Arg(0), stdout)
	default:
		fmt.Fprintln(stderr, usage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "controlplane:", err)
		return 1
	}
	return 0
}

// setup resolves the run dir, the binaries and, with a sandbox, the runner and the dialer.
func setup(cfg *controlplane.Config, sandboxName, sandboxRoot string) error {
	if sandboxName != "" {
		inst, err := sandbox.Attach(sandboxRoot, sandboxName)
		if err != nil {
			return err
		}
		cfg.Runner = inst
		cfg.Dial = controlplane.NetnsDialer(inst.InitPID())
		if cfg.Dir == "" {
			cfg.Dir = filepath.Join(inst.StateDir(), "controlplane")
		}
	}
	if cfg.Dir == "" {
		return errors.New("-dir: required without -sandbox")
	}
	if cfg.BinDir == "" {
		root, err := repoRoot()
		if err != nil {
			return err
		}
		cfg.BinDir = filepath.Join(root, "build", "peer", "v1.37.2")
	}
	var err error
	for _, p := range []*string{&cfg.Dir, &cfg.BinDir} {
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	if resolved, err := filepath.EvalSymlinks(cfg.BinDir); err == nil {
		cfg.BinDir = resolved // a symlink to another checkout's build: the target is what is visible inside
	}
	return nil
}

// repoRoot is the nearest directory above the working directory holding the product's go.mod
// (module github.com/slicelet/slicelet).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			slices.Contains(strings.Split(string(data), "\n"), "module github.com/slicelet/slicelet") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("-bin: no slicelet repository above the working directory; give -bin")
		}
		dir = parent
	}
}

// up starts the control plane and prints its summary; with wait it then stops it on a signal.
func up(ctx context.Context, cfg controlplane.Config, stdout io.Writer, wait bool) error {
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		return err
	}
	s := summary{Server: cp.Server(), CA: cp.CAFile(), AdminKubeconfig: cp.AdminKubeconfig(), Units: cp.Units()}
	for _, n := range cfg.Nodes {
		if s.NodeKubeconfigs == nil {
			s.NodeKubeconfigs = map[string]string{}
		}
		s.NodeKubeconfigs[n] = cp.NodeKubeconfig(n)
	}
	if err := json.NewEncoder(stdout).Encode(s); err != nil {
		return errors.Join(err, cp.Stop(context.Background()))
	}
	if !wait {
		return nil
	}
	<-ctx.Done()
	return cp.Stop(context.Background())
}

// node issues a node's credentials on the control plane recorded in the run dir.
func node(cfg controlplane.Config, name string, stdout io.Writer) error {
	cp, err := controlplane.Open(cfg)
	if err != nil {
		return err
	}
	path, err := cp.AddNode(name)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(summary{Server: cp.Server(), CA: cp.CAFile(), AdminKubeconfig: cp.AdminKubeconfig(),
		NodeKubeconfigs: map[string]string{name: path}})
}
