package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/internal/manifest"
)

// maxListItems bounds the items of one kind: List that -f reads (a file is bounded by
// manifest.MaxInputBytes).
const maxListItems = 10000

// stdinName is how -f - appears in messages.
const stdinName = "<stdin>"

// document is one manifest document of -f's input.
type document struct {
	// where names it in messages: the file, plus "document N" in multi-document files and
	// "items[I]" in a kind: List.
	where string
	// source is what the UID of a pod without one is derived from offline (the file's absolute
	// path, as the daemon's file source derives it).
	source string
	data   []byte
}

// meta decodes the document leniently, for its name and namespace (the daemon does the strict
// decoding); the namespace defaults to "default".
func (d document) meta() *v1.Pod {
	var pod v1.Pod
	_ = yaml.Unmarshal(d.data, &pod)
	if pod.Namespace == "" {
		pod.Namespace = manifest.DefaultNamespace
	}
	return &pod
}

// readDocuments is the one place -f input is read (apply, delete, explain): "-" is the standard
// input (once), a directory stands for its *.yaml, *.yml and *.json files in lexical order (with
// recursive, those of its subdirectories too, as kubectl -R), every file is split into its YAML
// documents (empty ones skipped) and a kind: List document into its items. It returns the raw
// documents; decoding is the caller's (the daemon's, or slices' decoder offline).
func readDocuments(stdin io.Reader, paths []string, recursive bool) ([]document, error) {
	type input struct{ name, source string }
	var inputs []input
	stdinUsed := false
	for _, p := range paths {
		if p == "-" {
			if stdinUsed {
				return nil, usageErr("-f -: the standard input can be read only once")
			}
			stdinUsed = true
			inputs = append(inputs, input{stdinName, "stdin"})
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("pod manifest %s: %w", p, err)
		}
		if !st.IsDir() {
			inputs = append(inputs, input{p, absPath(p)})
			continue
		}
		files, err := manifestFiles(p, recursive)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			inputs = append(inputs, input{f, absPath(f)})
		}
	}
	var docs []document
	for _, in := range inputs {
		data, err := readBounded(in.name, stdin)
		if err != nil {
			return nil, err
		}
		// Bounded before anything is decoded: splitting a List and reading a document's name
		// expand YAML aliases.
		if err := manifest.CheckBounds(data); err != nil {
			return nil, fmt.Errorf("%s: %w", in.name, err)
		}
		parts, err := splitDocuments(data)
		if err != nil {
			return nil, fmt.Errorf("pod manifest %s: %w", in.name, err)
		}
		if len(parts) == 0 {
			return nil, fmt.Errorf("pod manifest %s: no pod in the file", in.name)
		}
		for i, part := range parts {
			where := in.name
			if len(parts) > 1 {
				where = fmt.Sprintf("%s: document %d", in.name, i)
			}
			items, err := listItems(part)
			if err != nil {
				return nil, fmt.Errorf("pod manifest %s: %w", where, err)
			}
			if items == nil {
				docs = append(docs, document{where: where, source: in.source, data: part})
				continue
			}
			for j, item := range items {
				docs = append(docs, document{where: fmt.Sprintf("%s: items[%d]", where, j), source: in.source, data: item})
			}
		}
	}
	return docs, nil
}

// absPath is p made absolute (p itself if that fails).
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// readBounded reads a file, or the standard input for stdinName, refusing more than
// manifest.MaxInputBytes (the daemon's limit) before holding more than one byte past it.
func readBounded(name string, stdin io.Reader) ([]byte, error) {
	r := stdin
	if name != stdinName {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("pod manifest %s: %w", name, err)
		}
		defer f.Close()
		r = f
	}
	data, err := manifest.ReadAll(r)
	if errors.Is(err, manifest.ErrTooLarge) {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err != nil {
		return nil, fmt.Errorf("pod manifest %s: %w", name, err)
	}
	return data, nil
}

// manifestFiles lists a directory's *.yaml, *.yml and *.json files (not hidden ones) in
// lexical order; with recursive, its subdirectories' too (hidden directories skipped).
func manifestFiles(dir string, recursive bool) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if path != dir && (!recursive || strings.HasPrefix(e.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(e.Name()) {
		case ".yaml", ".yml", ".json":
			if !strings.HasPrefix(e.Name(), ".") {
				files = append(files, path)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pod manifest directory %s: %w", dir, err)
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("pod manifest directory %s: no *.yaml, *.yml or *.json file", dir)
	}
	return files, nil
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

// listItems returns the items of a kind: List (or PodList) document as JSON documents, nil for
// any other document (which is left to the decoder, errors included).
func listItems(doc []byte) ([][]byte, error) {
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, nil
	}
	var list struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	if json.Unmarshal(j, &list) != nil || (list.Kind != "List" && list.Kind != "PodList") {
		return nil, nil
	}
	if len(list.Items) > maxListItems {
		return nil, fmt.Errorf("kind: %s with %d items: at most %d", list.Kind, len(list.Items), maxListItems)
	}
	items := make([][]byte, len(list.Items))
	for i, item := range list.Items {
		items[i] = item
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("kind: %s without items", list.Kind)
	}
	return items, nil
}

// readPods decodes every document offline with the daemon's decoder (manifest.Read: explain);
// ConfigMap and Secret documents are decoded and checked too, as the manifest directory reads
// them, and left out of the pods.
func readPods(stdin io.Reader, files []string, recursive bool) ([]*v1.Pod, error) {
	docs, err := readDocuments(stdin, files, recursive)
	if err != nil {
		return nil, err
	}
	var pods []*v1.Pod
	var errs []error
	for _, d := range docs {
		got, err := manifest.Read(d.where, d.source, d.data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		pods = append(pods, got.Pods...)
	}
	return pods, errors.Join(errs...)
}
