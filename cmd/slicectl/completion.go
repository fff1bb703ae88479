package main

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/api"
)

// completionTimeout bounds a completion's questions to the daemon: a shell waits for them.
const completionTimeout = 2 * time.Second

// addCompletions registers the dynamic completions (pod, namespace and container names from
// the daemon, output formats) on slicectl's tree; cobra's completion command turns them into
// bash, zsh, fish and PowerShell scripts.
func addCompletions(c *cli, root *cobra.Command) {
	_ = root.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return c.completeFromPods(cmd, toComplete, true, func(p *v1.Pod) string { return p.Namespace })
	})
	_ = root.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"wide", "json", "yaml", "name", "jsonpath=", "go-template=", "custom-columns="}, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	})
	for _, cmd := range root.Commands() {
		switch cmd.Name() {
		case "get", "describe", "delete":
			cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				if len(args) == 0 {
					return []string{"pods"}, cobra.ShellCompDirectiveNoFileComp
				}
				return c.completeFromPods(cmd, toComplete, false, func(p *v1.Pod) string { return p.Name })
			}
		case "logs":
			cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				if len(args) == 0 {
					return c.completeFromPods(cmd, toComplete, false, func(p *v1.Pod) string { return p.Name })
				}
				if len(args) == 1 {
					return c.completeContainers(cmd, args[0], toComplete)
				}
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			_ = cmd.RegisterFlagCompletionFunc("container", func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
				if len(args) == 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return c.completeContainers(cmd, args[0], toComplete)
			})
		}
	}
}

// completionClient is the client of a completion, whose flags were parsed but whose
// PersistentPreRunE did not run.
func (c *cli) completionClient(cmd *cobra.Command) (*api.Client, context.Context, context.CancelFunc, bool) {
	c.global.configSet = cmd.Flags().Changed("config")
	cl, err := c.client()
	if err != nil {
		return nil, nil, nil, false
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	return cl, ctx, cancel, true
}

// completeFromPods completes with one value per pod (its name, or its namespace): the pods of
// the namespace, or of every namespace with all.
func (c *cli) completeFromPods(cmd *cobra.Command, toComplete string, all bool, value func(*v1.Pod) string) ([]string, cobra.ShellCompDirective) {
	cl, ctx, cancel, ok := c.completionClient(cmd)
	if !ok {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer cancel()
	pods, err := cl.ListPods(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	seen := map[string]bool{}
	var out []string
	for i := range pods {
		p := &pods[i]
		if !all && !c.global.allNamespaces && p.Namespace != c.global.namespace {
			continue
		}
		if v := value(p); strings.HasPrefix(v, toComplete) && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeContainers completes the container names of pod (init containers too).
func (c *cli) completeContainers(cmd *cobra.Command, pod, toComplete string) ([]string, cobra.ShellCompDirective) {
	cl, ctx, cancel, ok := c.completionClient(cmd)
	if !ok {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer cancel()
	names, err := podNames([]string{pod})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	p, err := cl.GetPod(ctx, c.global.namespace, names[0])
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, list := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, ct := range list {
			if strings.HasPrefix(ct.Name, toComplete) {
				out = append(out, ct.Name)
			}
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
