package main

import (
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/slicelet/slicelet/internal/pods"
)

// The verbs of slicectl: each constructor declares the command's flags and hands the parsed
// values to the command's function (getCmd, applyCmd, ...), which checks them.

func newGetCmd(c *cli) *cobra.Command {
	var o getOptions
	cmd := &cobra.Command{
		Use:   "get pods [NAME ...]",
		Short: "List pods, or show some by name",
		Long: `List the pods of the namespace (-n, default "default"; -A for every namespace), or the pods
named, as kubectl get pods does. NAME may also be written pod/NAME.`,
		Example: `  slicectl get pods
  slicectl get pods -A -o wide
  slicectl get pod web -oyaml
  slicectl -n kube-system get pods -o name
  slicectl get pods -l app=web --field-selector status.phase=Running
  slicectl get pods -w
  slicectl get pods -o custom-columns=NAME:.metadata.name,QOS:.status.qosClass --sort-by .metadata.creationTimestamp
  slicectl get pod web -o jsonpath='{.status.podIP}'`,
		Aliases: []string{"list"},
		Args:    cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			return c.getCmd(args, o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.selector, "selector", "l", "", "label selector (e.g. app=web,tier!=db, env in (a,b)), evaluated by slicelet")
	f.StringVar(&o.fieldSelector, "field-selector", "", "field selector (e.g. status.phase=Running, metadata.name=web), evaluated by slicelet")
	f.BoolVarP(&o.watch, "watch", "w", false, "after listing, print every change, as slicelet pushes it")
	f.BoolVar(&o.watchOnly, "watch-only", false, "print the changes only, not the pods as they are")
	f.BoolVar(&o.print.noHeaders, "no-headers", false, "leave out the table's header (and custom-columns')")
	f.BoolVar(&o.print.showLabels, "show-labels", false, "add a LABELS column to the table")
	f.StringVar(&o.print.sortBy, "sort-by", "", "sort by a field (JSONPath, e.g. .metadata.creationTimestamp or .status.startTime)")
	return cmd
}

func newDescribeCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "describe pod NAME [NAME ...]",
		Short: "Show a pod in detail: containers, conditions, slice and resources",
		Example: `  slicectl describe pod web
  slicectl describe pod/web -n shop`,
		Args: cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			if err := c.checkOutput("describe"); err != nil {
				return err
			}
			return c.describeCmd(args)
		},
	}
}

func newApplyCmd(c *cli) *cobra.Command {
	var o applyOptions
	cmd := &cobra.Command{
		Use:   "apply -f FILE [-f FILE ...]",
		Short: "Create or update pods from manifests",
		Long: `Create or update API pods from manifests: YAML (multi-document) or JSON files, or directories of
*.yaml, *.yml and *.json files (-R: and of its subdirectories), or - for the standard input.
Each document, and each item of a kind: List, is sent on its own and reported as kubectl does
(pod/NAME created|configured|unchanged); the exit code is 1 if any failed.

--dry-run=server has slicelet decode, validate, check Pod Security and the runtime and admit the
pod against the node as it is now, storing nothing; --dry-run=client only decodes and validates
here.`,
		Example: `  slicectl apply -f web.yaml
  cat web.yaml | slicectl apply -f -
  slicectl apply -R -f pods/ --dry-run=server
  slicectl apply -n shop -f web.yaml`,
		Args: cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			if err := c.checkOutput("apply"); err != nil {
				return err
			}
			return c.applyCmd(args, o)
		},
	}
	cmd.Flags().StringArrayVarP(&o.files, "filename", "f", nil, "pod manifest file or directory, - for the standard input; repeatable")
	cmd.Flags().BoolVarP(&o.recursive, "recursive", "R", false, "read the directories of -f recursively")
	cmd.Flags().StringVar(&o.dryRun, "dry-run", dryRunNone, `"server": slicelet checks and admits everything and stores nothing; "client": decode and validate here`)
	return cmd
}

func newDeleteCmd(c *cli) *cobra.Command {
	var o deleteOptions
	cmd := &cobra.Command{
		Use:   "delete pod NAME [NAME ...] | -f FILE | pods --all | pods -l SELECTOR",
		Short: "Delete API pods",
		Long: `Delete API pods by name, those of manifests (-f, as apply reads them), every pod of the
namespace (--all) or those a label selector selects (-l). Pods of manifest files are deleted by
removing their file. With --wait (the default) slicectl returns when the pods are gone.`,
		Example: `  slicectl delete pod web
  slicectl delete pod/web pod/db -n shop
  slicectl delete -f web.yaml
  cat web.yaml | slicectl delete -f - --wait=false
  slicectl delete pods -l app=web`,
		Args: cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			if err := c.checkOutput("delete"); err != nil {
				return err
			}
			return c.deleteCmd(args, o)
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&o.files, "filename", "f", nil, "pod manifest file or directory, - for the standard input; repeatable")
	f.BoolVarP(&o.recursive, "recursive", "R", false, "read the directories of -f recursively")
	f.BoolVar(&o.all, "all", false, "every pod of the namespace (-A: of every namespace)")
	f.StringVarP(&o.selector, "selector", "l", "", "label selector of the pods to delete")
	f.IntVar(&o.gracePeriod, "grace-period", -1, "seconds the containers get to stop (-1: the pod's terminationGracePeriodSeconds; 0: at once)")
	f.BoolVar(&o.wait, "wait", true, "wait until the pods are gone")
	f.DurationVar(&o.timeout, "timeout", 0, "how long --wait waits (0: as long as it takes)")
	return cmd
}

// logsOptions are the flags of logs.
type logsOptions struct {
	container             string
	opts                  pods.LogOptions
	tail                  int
	since                 time.Duration
	sinceTime             string
	allContainers, prefix bool
}

func newLogsCmd(c *cli) *cobra.Command {
	var o logsOptions
	cmd := &cobra.Command{
		Use:     "logs NAME [CONTAINER]",
		Aliases: []string{"log"},
		Short:   "Print the output of a pod's container",
		Long: `Print the output of a container of a pod. Without -c the container is the one the
kubectl.kubernetes.io/default-container annotation names, else the first one.`,
		Example: `  slicectl logs web
  slicectl logs web -c sidecar --tail 20
  slicectl logs -f web
  slicectl logs web --previous
  slicectl logs web --since 10m --timestamps
  slicectl logs web --all-containers --prefix -f`,
		Args: cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			if err := c.checkOutput("logs"); err != nil {
				return err
			}
			return c.logsCmd(args, o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.container, "container", "c", "", "container (default: the only one, or the default one)")
	f.BoolVarP(&o.opts.Follow, "follow", "f", false, "follow the output")
	f.BoolVarP(&o.opts.Previous, "previous", "p", false, "the previous instance of the container")
	f.IntVar(&o.tail, "tail", -1, "only the last N lines (N ≥ 1; default: all)")
	f.DurationVar(&o.since, "since", 0, "only lines newer than this, e.g. 5s, 2m or 3h")
	f.StringVar(&o.sinceTime, "since-time", "", "only lines written at or after this RFC 3339 time")
	f.BoolVar(&o.opts.Timestamps, "timestamps", false, "start every line with the time it was written (RFC 3339)")
	f.BoolVar(&o.allContainers, "all-containers", false, "every container of the pod, init containers first")
	f.BoolVar(&o.prefix, "prefix", false, "start every line with [pod/NAME/CONTAINER]")
	return cmd
}

func newNodeCmd(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "node",
		Short: "Show the node: conditions, health, capacity, allocatable and pod counts",
		Long:  `Show the node: conditions, health, capacity, allocatable and pod counts (-o json|yaml).`,
		Example: `  slicectl node
  slicectl node -o yaml`,
		Args: cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			return c.nodeCmd(args)
		},
	}
}

func newTopCmd(c *cli) *cobra.Command {
	cmd := subjectCmd(&cobra.Command{
		Use:   "top pods|node",
		Short: "Show CPU and memory use, as kubectl top does",
	}, "top: what to show: top pods or top node", "top: unknown resource %q: slicectl top knows pods and node")
	sub := func(use, short string, aliases []string, pods bool) *cobra.Command {
		var o topPodOptions
		what := strings.Fields(use)[0]
		s := &cobra.Command{
			Use:     use,
			Aliases: aliases,
			Short:   short,
			Args:    cobra.ArbitraryArgs,
			RunE: func(_ *cobra.Command, args []string) error {
				return c.topCmd(what, args, o)
			},
		}
		s.Flags().BoolVar(&o.noHeaders, "no-headers", false, "leave out the header line")
		s.Flags().StringVar(&o.sortBy, "sort-by", "", "sort by cpu or memory")
		if pods {
			s.Flags().BoolVar(&o.containers, "containers", false, "one line per container")
			s.Flags().BoolVar(&o.sum, "sum", false, "print the sum of the resource usage")
		}
		return s
	}
	pods := sub("pods [NAME]", "CPU(cores) and MEMORY(bytes) of pods", []string{"pod", "po"}, true)
	pods.Example = `  slicectl top pods
  slicectl top pods -A --containers --sort-by memory`
	node := sub("node [NAME]", "CPU(cores) and MEMORY(bytes) of the node", []string{"nodes", "no"}, false)
	node.Example = `  slicectl top node`
	cmd.AddCommand(pods, node)
	return cmd
}

func newGCCmd(c *cli) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "gc images|containers",
		Short: "Collect images or dead containers now, or preview it (--dry-run)",
		Long: `Have the running slicelet collect now (what the GC timers run), or with --dry-run say what it
would remove. The exit code is 1 when the collection reported an error.`,
		Example: `  slicectl gc images --dry-run
  slicectl gc containers -o json`,
		Args:      cobra.ArbitraryArgs,
		ValidArgs: []string{"images", "containers"},
		RunE: func(_ *cobra.Command, args []string) error {
			return c.gcCmd(args, dryRun)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "plan only: remove nothing")
	return cmd
}

// explainLong is the help of explain.
const explainLong = `Explain what slicelet would do or did.

explain pod is offline unless --online: it computes what slicelet would create from the
configuration, the manifests and the node's capacity (read from this machine unless --capacity
is given, e.g. --capacity cpu=4,memory=16Gi,pids=4194304), and what the node the configuration
makes would decide at every stage, each said even when an earlier one refuses: validation (of a
static pod, or with [cluster] enabled what the API server refuses at create and then what the
node refuses of a pod from it), Pod Security, the runtime
on runtime.network, admission against that capacity (each pod of the input counting against
the next). A pod that fails validation makes it exit 1. With --online the running slicelet
explains the manifests with its own configuration, capacity and cgroup mode.
explain node asks the running slicelet (its real configuration, capacity and pods) when no -f,
--config, --capacity or --cgroup-mode is given; if slicelet is not reachable it explains offline
and says so. --offline always explains offline; --online requires the daemon.`

func newExplainCmd(c *cli) *cobra.Command {
	cmd := subjectCmd(&cobra.Command{
		Use:   "explain pod|node|gc|eviction",
		Short: "Explain slices, node allocatable, garbage collection and eviction",
		Long:  explainLong,
	}, "explain: what to explain: pod or node", "explain: unknown subject %q (pod, node, gc or eviction)")
	subject := func(what, use, short, example string) *cobra.Command {
		o := explainOptions{}
		s := &cobra.Command{
			Use:     use,
			Short:   short,
			Example: example,
			Args:    cobra.ArbitraryArgs,
			RunE: func(cmd *cobra.Command, args []string) error {
				o.set = map[string]bool{}
				cmd.Flags().Visit(func(f *pflag.Flag) { o.set[f.Name] = true })
				return c.explainCmd(what, args, o)
			},
		}
		f := s.Flags()
		f.StringVar(&o.cgroupMode, "cgroup-mode", "", "cgroup mode to explain for: v1 or v2 (default: this machine's)")
		f.StringVar(&o.capacity, "capacity", "", "node capacity, e.g. cpu=4,memory=16Gi,pids=4194304, extended resources too (nvidia.com/gpu=2) (default: this machine's)")
		f.StringArrayVarP(&o.files, "filename", "f", nil, "pod manifest (YAML or JSON), directory or - for the standard input; repeatable")
		f.BoolVarP(&o.recursive, "recursive", "R", false, "read the directories of -f recursively")
		f.BoolVar(&o.online, "online", false, "ask the running slicelet")
		f.BoolVar(&o.offline, "offline", false, "never ask the running slicelet")
		return s
	}
	pod := subject("pod", "pod -f POD.yaml", "The slices, cgroup values and systemd properties of pods",
		`  slicectl explain pod -f web.yaml
  slicectl explain pod -f web.yaml --cgroup-mode v1 --capacity cpu=4,memory=16Gi
  slicectl explain pod -f web.yaml --online -o json`)
	node := subject("node", "node", "Node allocatable and the QoS tree, with the pods",
		`  slicectl explain node
  slicectl explain node --offline --config /etc/slicelet/config.toml -f web.yaml`)

	var obsPath string
	var offline bool
	eviction := &cobra.Command{
		Use:   "eviction [--observations FILE]",
		Short: "The daemon's last eviction decision, or an offline replay of recorded observations",
		Example: `  slicectl explain eviction
  slicectl explain eviction --observations episode.yaml --config /etc/slicelet/config.toml -o json`,
		Args: cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			return c.explainEviction(args, obsPath, offline)
		},
	}
	eviction.Flags().StringVar(&obsPath, "observations", "", "observations file (JSON or YAML) with samples to replay")
	eviction.Flags().BoolVar(&offline, "offline", false, "never ask the running slicelet (needs --observations)")

	gc := subjectCmd(&cobra.Command{
		Use:   "gc images|containers --state FILE",
		Short: "Plan one image or container garbage collection offline",
		Long:  explainGCUsage,
	}, "explain gc: what to plan: images or containers", "explain gc: unknown subject %q (images or containers)")
	for _, what := range []string{"images", "containers"} {
		var statePath string
		s := &cobra.Command{
			Use:     what + " --state FILE",
			Short:   "Plan a " + strings.TrimSuffix(what, "s") + " garbage collection from a state file",
			Example: "  slicectl explain gc " + what + " --state state.json -o json",
			Args:    cobra.ArbitraryArgs,
			RunE: func(_ *cobra.Command, args []string) error {
				return c.explainGCCmd(what, args, statePath)
			},
		}
		s.Flags().StringVar(&statePath, "state", "", "state file (JSON)")
		gc.AddCommand(s)
	}
	cmd.AddCommand(pod, node, gc, eviction)
	return cmd
}
