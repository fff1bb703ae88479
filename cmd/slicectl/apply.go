package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/manifest"
)

// applyOptions are apply's flags.
type applyOptions struct {
	files     []string
	recursive bool
	dryRun    string
}

// Dry-run modes of apply --dry-run, kubectl's.
const (
	dryRunNone   = "none"
	dryRunClient = "client"
	dryRunServer = "server"
)

// applyCmd: apply -f FILE ... — each document is sent on its own; every result is printed as
// kubectl prints it (pod/NAME created|configured|unchanged), every failure on stderr, and the
// exit code is 1 if any document failed. A daemon that is down stops at the first document.
// --dry-run=server has the daemon check and admit each pod and store nothing;
// --dry-run=client decodes and validates each pod here and asks the daemon only whether it
// exists.
func (c *cli) applyCmd(pos []string, o applyOptions) error {
	mode, err := parseDryRun(o.dryRun)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("apply: unexpected argument %q (use -f FILE)", pos[0])
	}
	if len(o.files) == 0 {
		return usageErr("apply: -f FILE is required")
	}
	docs, err := readDocuments(c.stdin, o.files, o.recursive)
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	failed := false
	for _, d := range docs {
		data := d.data
		if c.global.namespaceSet {
			if data, err = withNamespace(data, c.global.namespace); err != nil {
				failed = true
				fmt.Fprintf(c.stderr, "slicectl: %s: %v\n", d.where, err)
				continue
			}
		}
		if kind := documentObjectKind(data); kind != "" {
			if err := c.applyObject(cl, kind, data, mode != dryRunNone); err != nil {
				if isFatal(err) {
					return err
				}
				failed = true
				c.reportDocError(d.where, err)
			}
			continue
		}
		var res api.ApplyResult
		switch mode {
		case dryRunClient:
			res, err = c.applyClientDryRun(cl, document{where: d.where, source: d.source, data: data})
		case dryRunServer:
			res, err = cl.ApplyPodDryRun(c.ctx, data)
		default:
			res, err = cl.ApplyPod(c.ctx, data)
		}
		if err != nil {
			if isFatal(err) {
				return err
			}
			failed = true
			c.reportDocError(d.where, err)
			continue
		}
		suffix := ""
		switch {
		case mode == dryRunClient:
			suffix = " (dry run)"
		case res.DryRun:
			suffix = " (server dry run)"
		}
		fmt.Fprintf(c.stdout, "pod/%s %s%s\n", res.Pod.Name, res.Action, suffix)
		if res.DryRun && res.Pod.Status.Phase == v1.PodFailed && res.Pod.Status.Reason != "" {
			fmt.Fprintf(c.stderr, "slicectl: %s: admission would reject pod/%s: %s: %s\n", d.where, res.Pod.Name, res.Pod.Status.Reason, res.Pod.Status.Message)
			failed = true
		}
	}
	if failed {
		return errReported
	}
	return nil
}

// applyClientDryRun decodes and validates a document with the daemon's decoder (internal/manifest), then asks the daemon
// whether the pod exists (created or configured).
func (c *cli) applyClientDryRun(cl *api.Client, d document) (api.ApplyResult, error) {
	pods, err := manifest.Parse(d.where, d.source, d.data)
	if err != nil {
		return api.ApplyResult{}, &api.InvalidError{Problems: strings.Split(err.Error(), "\n")}
	}
	if len(pods) != 1 {
		return api.ApplyResult{}, fmt.Errorf("holds %d pods; apply one pod per document", len(pods))
	}
	res := api.ApplyResult{Action: api.ActionCreated, Pod: *pods[0]}
	_, err = cl.GetPod(c.ctx, pods[0].Namespace, pods[0].Name)
	switch {
	case err == nil:
		res.Action = api.ActionConfigured
	case !errors.Is(err, api.ErrNotFound):
		return res, err
	}
	return res, nil
}

// parseDryRun reads apply's --dry-run as kubectl takes it: none, client or server.
func parseDryRun(v string) (string, error) {
	switch v {
	case dryRunNone, "":
		return dryRunNone, nil
	case dryRunClient, dryRunServer:
		return v, nil
	}
	return "", usageErr(`apply: --dry-run=%q: want "none", "client" or "server"`, v)
}

// withNamespace puts a manifest into namespace ns, as kubectl apply -n does: a manifest without
// metadata.namespace gets ns (the document is sent as JSON then), one with another namespace is
// an error. A document that does not convert is sent unchanged, for the daemon to report.
func withNamespace(doc []byte, ns string) ([]byte, error) {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return doc, nil
	}
	var obj map[string]any
	if json.Unmarshal(j, &obj) != nil || obj == nil {
		return doc, nil
	}
	meta, ok := obj["metadata"].(map[string]any)
	if !ok {
		return doc, nil
	}
	switch have, _ := meta["namespace"].(string); have {
	case ns:
		return doc, nil
	case "":
		meta["namespace"] = ns
		return json.Marshal(obj)
	default:
		return nil, fmt.Errorf("the manifest's namespace %q does not match -n %q", have, ns)
	}
}

// isFatal is true for errors that will repeat for every further request.
func isFatal(err error) bool {
	var perm *api.SocketPermissionError
	return errors.Is(err, api.ErrDaemonDown) || errors.As(err, &perm) || isPeerRefused(err)
}

// isPeerRefused is a 403 for the caller (not root, not in the group); a *api.ForbiddenError (a
// pod Pod Security refuses) is about the request and is not.
func isPeerRefused(err error) bool {
	var status *api.StatusError
	var forbidden *api.ForbiddenError
	return errors.As(err, &status) && status.Code == 403 && !errors.As(err, &forbidden)
}

// reportDocError prints a failed document: an invalid manifest lists one problem per line.
func (c *cli) reportDocError(where string, err error) {
	var invalid *api.InvalidError
	if errors.As(err, &invalid) && len(invalid.Problems) > 0 {
		fmt.Fprintf(c.stderr, "slicectl: %s: invalid pod manifest:\n", where)
		for _, p := range invalid.Problems {
			fmt.Fprintf(c.stderr, "  %s\n", p)
		}
		return
	}
	fmt.Fprintf(c.stderr, "slicectl: %s: %v\n", where, err)
}

// deleteOptions are delete's flags.
type deleteOptions struct {
	files       []string
	recursive   bool
	all         bool
	selector    string
	gracePeriod int
	wait        bool
	timeout     time.Duration
}

// podKey names a pod to delete and where it came from.
type podKey struct{ namespace, name, where string }

// deleteCmd: delete pod NAME ..., delete -f FILE, delete pods --all or -l SELECTOR; with --wait
// (the default) it returns when the pods are gone, as kubectl does.
func (c *cli) deleteCmd(pos []string, o deleteOptions) error {
	targets, err := c.deleteTargets(pos, o)
	if err != nil {
		return err
	}
	if o.gracePeriod < -1 {
		return usageErr("delete: --grace-period %d: want -1 (the pod's own), 0 (at once) or a number of seconds", o.gracePeriod)
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	if targets == nil {
		pl, err := cl.ListPodList(c.ctx, c.listOptions(getOptions{selector: o.selector}))
		if err != nil {
			return err
		}
		sortByNamespaceName(pl.Items)
		for _, p := range pl.Items {
			targets = append(targets, podKey{namespace: p.Namespace, name: p.Name})
		}
		if len(targets) == 0 {
			c.noResources()
			return nil
		}
	}
	failed := false
	var deleted []podKey
	for _, t := range targets {
		del := cl.DeletePod
		if o.gracePeriod >= 0 {
			del = func(ctx context.Context, ns, name string) error {
				return cl.DeletePodGrace(ctx, ns, name, time.Duration(o.gracePeriod)*time.Second)
			}
		}
		if err := del(c.ctx, t.namespace, t.name); err != nil {
			if isFatal(err) {
				return err
			}
			failed = true
			if t.where != "" {
				fmt.Fprintf(c.stderr, "slicectl: %s: %v\n", t.where, err)
			} else {
				fmt.Fprintf(c.stderr, "slicectl: %v\n", err)
			}
			continue
		}
		deleted = append(deleted, t)
		fmt.Fprintf(c.stdout, "pod %q deleted\n", t.name)
	}
	if o.wait && len(deleted) > 0 {
		if err := c.waitDeleted(cl, deleted, o.timeout); err != nil {
			return err
		}
	}
	if failed {
		return errReported
	}
	return nil
}

// deleteTargets reads what to delete: names, or -f's documents; nil means the namespace's pods
// (--all) or those -l selects.
func (c *cli) deleteTargets(pos []string, o deleteOptions) ([]podKey, error) {
	ways := 0
	for _, b := range []bool{len(o.files) > 0, o.all, o.selector != "", len(pos) > 0 && !(len(pos) == 1 && isPodResource(pos[0]))} {
		if b {
			ways++
		}
	}
	switch {
	case ways == 0 && len(pos) == 0:
		return nil, usageErr("delete: what to delete: delete pod NAME, delete -f FILE, delete pods --all or -l SELECTOR")
	case ways > 1:
		return nil, usageErr("delete: give one of names, -f, --all and -l")
	case len(o.files) > 0 && len(pos) > 0:
		return nil, usageErr("delete: unexpected argument %q with -f", pos[0])
	}
	if len(o.files) > 0 {
		docs, err := readDocuments(c.stdin, o.files, o.recursive)
		if err != nil {
			return nil, err
		}
		var keys []podKey
		for _, d := range docs {
			m := d.meta()
			if m.Name == "" {
				return nil, fmt.Errorf("%s: metadata.name: required", d.where)
			}
			ns := m.Namespace
			if c.global.namespaceSet && !strings.Contains(string(d.data), "namespace:") && !strings.Contains(string(d.data), `"namespace"`) {
				ns = c.global.namespace
			}
			keys = append(keys, podKey{namespace: ns, name: m.Name, where: d.where})
		}
		return keys, nil
	}
	if o.all || o.selector != "" {
		if len(pos) > 0 && !(len(pos) == 1 && isPodResource(pos[0])) {
			return nil, usageErr("delete: --all and -l select pods; they cannot be combined with names")
		}
		return nil, nil
	}
	names, err := podArgs("delete", pos)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, usageErr("delete pod: NAME is required")
	}
	keys := make([]podKey, len(names))
	for i, n := range names {
		keys[i] = podKey{namespace: c.global.namespace, name: n}
	}
	return keys, nil
}

// waitDeleted waits until every pod is gone (its containers stopped and its slice removed by
// slicelet), through the daemon's watch; timeout 0 waits as long as it takes.
func (c *cli) waitDeleted(cl *api.Client, keys []podKey, timeout time.Duration) error {
	ctx := c.ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	left := map[string]bool{}
	for _, k := range keys {
		left[k.namespace+"/"+k.name] = true
	}
	present := map[string]bool{}
	errDone := errors.New("done")
	err := cl.WatchPods(ctx, api.ListOptions{}, func(e api.WatchEvent) error {
		key := e.Pod.Namespace + "/" + e.Pod.Name
		switch e.Type {
		case watch.Added, watch.Modified:
			present[key] = true
		case watch.Deleted:
			delete(present, key)
		}
		if e.Type == watch.Bookmark || e.Type == watch.Deleted {
			for k := range left {
				if !present[k] {
					delete(left, k)
				}
			}
			if len(left) == 0 {
				return errDone
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, errDone):
		return nil
	case c.ctx.Err() != nil:
		return c.ctx.Err()
	case ctx.Err() != nil:
		return fmt.Errorf("timed out after %s waiting for %d pods to be gone", timeout, len(left))
	case err == nil:
		return fmt.Errorf("slicelet ended the watch before %d pods were gone", len(left))
	}
	return err
}

// isPodResource accepts kubectl's names for pods.
func isPodResource(s string) bool {
	switch s {
	case "pod", "pods", "po":
		return true
	}
	return false
}

// podArgs reads the positional arguments of get, describe and delete: "pods NAME ...",
// "pod NAME ..." or "pod/NAME ...".
func podArgs(cmd string, pos []string) ([]string, error) {
	switch {
	case len(pos) == 0:
		return nil, usageErr("%s: what to %s: %s pod NAME", cmd, cmd, cmd)
	case strings.Contains(pos[0], "/"):
		return podNames(pos)
	case isPodResource(pos[0]):
		return podNames(pos[1:])
	}
	return nil, usageErr("%s: unknown resource %q: slicectl knows pods (and: slicectl node)", cmd, pos[0])
}

// podNames accepts NAME and pod/NAME.
func podNames(args []string) ([]string, error) {
	var names []string
	for _, a := range args {
		if kind, name, ok := strings.Cut(a, "/"); ok {
			if !isPodResource(kind) || name == "" {
				return nil, usageErr("%q: not a pod name (NAME or pod/NAME)", a)
			}
			a = name
		}
		names = append(names, a)
	}
	return names, nil
}
