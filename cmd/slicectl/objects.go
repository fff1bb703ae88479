package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/internal/api"
)

// objectKinds maps what kubectl accepts for ConfigMaps and Secrets to the API's path segment.
var objectKinds = map[string]string{
	"configmap": api.KindConfigMaps, "configmaps": api.KindConfigMaps, "cm": api.KindConfigMaps,
	"secret": api.KindSecrets, "secrets": api.KindSecrets,
}

// getObjectsCmd: get configmaps|secrets [-A] — NAMESPACE (with -A), NAME, DATA (the number of
// keys, as kubectl shows it), SOURCE. Secret values are never shown.
func (c *cli) getObjectsCmd(kind string, pos []string) error {
	all := c.global.allNamespaces
	if len(pos) > 1 {
		return usageErr("get %s: names are not supported; list them all", pos[0])
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	items, err := cl.ListObjects(c.ctx, kind)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 8, 3, ' ', 0)
	if all {
		fmt.Fprint(tw, "NAMESPACE\t")
	}
	fmt.Fprintln(tw, "NAME\tDATA\tSOURCE")
	n := 0
	for _, it := range items {
		if !all && it.Namespace != c.global.namespace {
			continue
		}
		n++
		if all {
			fmt.Fprintf(tw, "%s\t", it.Namespace)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", it.Name, it.Keys, it.Source)
	}
	if n == 0 {
		if all {
			fmt.Fprintln(c.stderr, "No resources found")
		} else {
			fmt.Fprintf(c.stderr, "No resources found in %s namespace.\n", c.global.namespace)
		}
		return nil
	}
	return tw.Flush()
}

// documentObjectKind is the API kind of a ConfigMap or Secret document; "" for any other.
func documentObjectKind(doc []byte) string {
	var tm struct {
		Kind string `json:"kind"`
	}
	if yaml.Unmarshal(doc, &tm) != nil {
		return ""
	}
	return api.KindPath(tm.Kind)
}

// applyObject applies one ConfigMap or Secret document and prints what kubectl prints
// (configmap/NAME created).
func (c *cli) applyObject(cl *api.Client, kind string, data []byte, dryRun bool) error {
	res, err := cl.ApplyObject(c.ctx, kind, data, dryRun)
	if err != nil {
		return err
	}
	suffix := ""
	if res.DryRun {
		suffix = " (server dry run)"
	}
	fmt.Fprintf(c.stdout, "%s/%s %s%s\n", strings.ToLower(res.Kind), res.Name, res.Action, suffix)
	return nil
}
