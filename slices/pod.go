package slices

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	v1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// ErrNotPod is wrapped by decode errors for manifests that are not a v1 Pod (wrong or missing
// kind/apiVersion).
var ErrNotPod = errors.New("not a v1 Pod")

// DecodePod decodes one Pod manifest, YAML or JSON, strictly: unknown fields, duplicate keys and
// case-mismatched field names are errors, and kind "Pod" with apiVersion "v1" are required. Every
// strict-decoding problem is reported, not just the first. The pod is returned exactly as written:
// no defaulting and no validation (see ValidatePod).
func DecodePod(data []byte) (*v1.Pod, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("pod manifest: %w", err)
	}
	if isEmptyJSON(j) {
		return nil, fmt.Errorf("pod manifest: empty document")
	}
	var pod v1.Pod
	strictErrs, err := sigsjson.UnmarshalStrict(j, &pod, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("pod manifest: %w", err)
	}
	if len(strictErrs) > 0 {
		return nil, fmt.Errorf("pod manifest: %w", errors.Join(strictErrs...))
	}
	var problems []error
	if pod.Kind != "Pod" {
		problems = append(problems, fmt.Errorf("kind: must be \"Pod\", got %q: %w", pod.Kind, ErrNotPod))
	}
	if pod.APIVersion != "v1" {
		problems = append(problems, fmt.Errorf("apiVersion: must be \"v1\", got %q: %w", pod.APIVersion, ErrNotPod))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("pod manifest: %w", errors.Join(problems...))
	}
	return &pod, nil
}

// PodDocument is one pod of a multi-document manifest.
type PodDocument struct {
	// Index is the 0-based position of the document among the non-empty documents of the stream
	// (documents holding only comments or whitespace are skipped and not counted).
	Index int
	// Pod is the decoded pod.
	Pod *v1.Pod
}

// DecodePods decodes a stream of "---"-separated YAML documents (or one JSON object), each a Pod,
// with DecodePod's strictness. It returns the pods that decoded and, joined, one error per
// document that did not, each prefixed with "document <index>".
func DecodePods(data []byte) ([]PodDocument, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var (
		docs []PodDocument
		errs []error
	)
	for index := 0; ; {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("document %d: %w", index, err))
			break
		}
		j, err := yaml.YAMLToJSON(doc)
		if err == nil && isEmptyJSON(j) {
			continue
		}
		pod, err := DecodePod(doc)
		if err != nil {
			errs = append(errs, fmt.Errorf("document %d: %w", index, err))
		} else {
			docs = append(docs, PodDocument{Index: index, Pod: pod})
		}
		index++
	}
	return docs, errors.Join(errs...)
}

// isEmptyJSON reports whether a YAML→JSON conversion produced no object (empty or comment-only
// document).
func isEmptyJSON(j []byte) bool {
	t := bytes.TrimSpace(j)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}
