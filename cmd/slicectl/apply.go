package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/slices"
)

// document is one manifest document of a file.
type document struct {
	// where names it in messages: the file, plus "document N" in multi-document files.
	where string
	data  []byte
}

// meta decodes the document leniently, for its name and namespace (the daemon does the strict
// decoding); the namespace defaults to "default".
func (d document) meta() *v1.Pod {
	var pod v1.Pod
	_ = yaml.Unmarshal(d.data, &pod)
	if pod.Namespace == "" {
		pod.Namespace = slices.DefaultNamespace
	}
	return &pod
}

// readDocuments reads the files (a directory stands for its *.yaml, *.yml and *.json files in
// lexical order) and splits them into documents, skipping empty ones.
func readDocuments(paths []string) ([]document, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("pod manifest %s: %w", p, err)
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("pod manifest directory %s: %w", p, err)
		}
		var in []string
		for _, e := range entries {
			switch filepath.Ext(e.Name()) {
			case ".yaml", ".yml", ".json":
				if !e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
					in = append(in, filepath.Join(p, e.Name()))
				}
			}
		}
		sort.Strings(in)
		if len(in) == 0 {
			return nil, fmt.Errorf("pod manifest directory %s: no *.yaml, *.yml or *.json file", p)
		}
		files = append(files, in...)
	}
	var docs []document
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("pod manifest %s: %w", f, err)
		}
		parts, err := splitDocuments(data)
		if err != nil {
			return nil, fmt.Errorf("pod manifest %s: %w", f, err)
		}
		if len(parts) == 0 {
			return nil, fmt.Errorf("pod manifest %s: no pod in the file", f)
		}
		for i, part := range parts {
			where := f
			if len(parts) > 1 {
				where = fmt.Sprintf("%s: document %d", f, i)
			}
			docs = append(docs, document{where: where, data: part})
		}
	}
	return docs, nil
}

// splitDocuments splits a "---"-separated YAML stream (or one JSON object) into its non-empty
// documents, numbered as slices.DecodePods numbers them.
func splitDocuments(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if j, err := yaml.YAMLToJSON(doc); err == nil {
			if t := bytes.TrimSpace(j); len(t) == 0 || string(t) == "null" {
				continue
			}
		}
		docs = append(docs, doc)
	}
}

// applyCmd: apply -f FILE ... — each document is sent on its own; every result is printed as
// kubectl prints it (pod/NAME created|configured|unchanged), every failure on stderr, and the
// exit code is 1 if any document failed. A daemon that is down stops at the first document.
func (c *cli) applyCmd(pos []string, files []string, dryRun string) error {
	server, err := parseDryRun(dryRun)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("apply: unexpected argument %q (use -f FILE)", pos[0])
	}
	if len(files) == 0 {
		return usageErr("apply: -f FILE is required")
	}
	docs, err := readDocuments(files)
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	nsSet := c.global.namespaceSet
	failed := false
	for _, d := range docs {
		data := d.data
		if nsSet {
			if data, err = withNamespace(data, c.global.namespace); err != nil {
				failed = true
				fmt.Fprintf(c.stderr, "slicectl: %s: %v\n", d.where, err)
				continue
			}
		}
		apply := cl.ApplyPod
		if server {
			apply = cl.ApplyPodDryRun
		}
		res, err := apply(c.ctx, data)
		if err != nil {
			if isFatal(err) {
				return err
			}
			failed = true
			c.reportDocError(d.where, err)
			continue
		}
		fmt.Fprintf(c.stdout, "pod/%s %s%s\n", res.Pod.Name, res.Action, dryRunSuffix(res.DryRun))
	}
	if failed {
		return errReported
	}
	return nil
}

// parseDryRun reads apply's --dry-run as kubectl takes it: "none" or "server" (true for
// server). "client" is refused: only the daemon can say what it would decide.
func parseDryRun(v string) (server bool, err error) {
	switch v {
	case "none", "":
		return false, nil
	case "server":
		return true, nil
	case "client":
		return false, usageErr(`apply: --dry-run=client is not supported: use --dry-run=server, which has slicelet check everything and store nothing`)
	}
	return false, usageErr(`apply: --dry-run=%q: want "none" or "server"`, v)
}

// dryRunSuffix is what kubectl adds to the result of a dry run.
func dryRunSuffix(dry bool) string {
	if dry {
		return " (server dry run)"
	}
	return ""
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

// deleteCmd: delete pod NAME ...
func (c *cli) deleteCmd(pos []string) error {
	names, err := podArgs("delete", pos)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return usageErr("delete pod: NAME is required")
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	failed := false
	for _, name := range names {
		if err := cl.DeletePod(c.ctx, c.global.namespace, name); err != nil {
			if isFatal(err) {
				return err
			}
			failed = true
			fmt.Fprintf(c.stderr, "slicectl: %v\n", err)
			continue
		}
		fmt.Fprintf(c.stdout, "pod %q deleted\n", name)
	}
	if failed {
		return errReported
	}
	return nil
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
