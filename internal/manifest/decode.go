// Package manifest is the one path from bytes to pods: every pod source (the manifest
// directory, the local API, `slicectl apply` and `slicectl explain`) decodes, defaults and
// validates a Pod manifest here, the way the kubelet reads a static pod file
// (pkg/kubelet/config/common.go, tryDecodeSinglePod): a strict decode of typed documents, the
// API's defaults (pkg/apis/core/v1/defaults.go, as the universal decoder applies them), the
// static pod's UID and default namespace (applyDefaults), then validation — the API's
// metadata rules, the static-pod rule that no API object may be referenced, the resource rules
// slicelet enforces, and the fields slicelet refuses (internal/pods/podfields).
package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// ErrNotPod is matched (errors.Is) by the decode errors of documents that are not a v1 Pod:
// another kind, or a missing or wrong kind/apiVersion.
var ErrNotPod = errors.New("not a v1 Pod")

// NotPodError is the decode error of a document that is not a v1 Pod; it names what was found.
type NotPodError struct {
	// APIVersion and Kind are the document's.
	APIVersion, Kind string
}

// Error says what the document is: "kind ConfigMap is not a Pod".
func (e *NotPodError) Error() string {
	switch {
	case e.Kind == "":
		return "kind: Required value: a manifest names its kind; slicelet runs kind Pod"
	case e.Kind == "Pod" || (e.Kind == KindConfigMap || e.Kind == KindSecret) && e.APIVersion != "v1":
		return fmt.Sprintf("apiVersion: Unsupported value: %q: supported values: \"v1\"", e.APIVersion)
	}
	return fmt.Sprintf("kind %s is not a Pod: slicelet runs Pods, and serves them ConfigMaps and Secrets", e.Kind)
}

// Is makes errors.Is(err, ErrNotPod) true.
func (e *NotPodError) Is(target error) bool { return target == ErrNotPod }

// Document is one decoded document of a manifest stream. Exactly one of the typed fields is set.
type Document struct {
	// Index is the 0-based position among the non-empty documents of the stream (documents
	// holding only comments or whitespace are skipped and not counted).
	Index int
	// APIVersion and Kind are the document's, as written.
	APIVersion, Kind string
	// Pod is the decoded pod, exactly as written: not defaulted, not validated.
	Pod *v1.Pod
	// ConfigMap and Secret are a decoded ConfigMap or Secret, as written.
	ConfigMap *v1.ConfigMap
	Secret    *v1.Secret
}

// Decode decodes a stream of "---"-separated YAML documents (or one JSON object; a leading
// UTF-8 byte-order mark is skipped, as the kubelet's decoder skips it) into typed documents,
// strictly: unknown fields, duplicate keys and case-mismatched field names are errors, every
// strict-decoding problem is reported, and a document of a kind other than Pod, ConfigMap and
// Secret is refused by name ("kind Deployment is not a Pod"). It returns the documents that decoded and, joined, one
// error per document that did not, each prefixed with "document <index>" when the stream holds
// more than one document.
func Decode(data []byte) ([]Document, error) {
	raw, err := split(data)
	if err != nil && len(raw) == 0 {
		return nil, err
	}
	var (
		docs []Document
		errs = []error{}
	)
	if err != nil {
		errs = append(errs, err)
	}
	for i, doc := range raw {
		d, derr := decodeOne(doc)
		if derr != nil {
			if len(raw) > 1 {
				derr = fmt.Errorf("document %d: %w", i, derr)
			}
			errs = append(errs, derr)
			continue
		}
		d.Index = i
		docs = append(docs, d)
	}
	return docs, errors.Join(errs...)
}

// split cuts a YAML stream into its non-empty documents, as JSON.
func split(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("document %d: %w", len(out), err)
		}
		j, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return out, fmt.Errorf("document %d: %w", len(out), err)
		}
		if t := bytes.TrimSpace(j); len(t) == 0 || bytes.Equal(t, []byte("null")) {
			continue
		}
		out = append(out, j)
	}
}

// decodeOne decodes one JSON document: its type first (leniently, to name what was found),
// then strictly into the type's Go struct.
func decodeOne(j []byte) (Document, error) {
	var tm metav1.TypeMeta
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(j, &tm); err != nil {
		return Document{}, fmt.Errorf("manifest: %w", err)
	}
	d := Document{APIVersion: tm.APIVersion, Kind: tm.Kind}
	if (tm.Kind == KindConfigMap || tm.Kind == KindSecret) && tm.APIVersion == "v1" {
		var err error
		if tm.Kind == KindConfigMap {
			d.ConfigMap, err = decodeConfigMap(j)
		} else {
			d.Secret, err = decodeSecret(j)
		}
		return d, err
	}
	if tm.Kind != "Pod" || tm.APIVersion != "v1" {
		err := error(&NotPodError{APIVersion: tm.APIVersion, Kind: tm.Kind})
		if tm.Kind == "" {
			// Perhaps a misspelt "Kind:"; the strict decode names it.
			var pod v1.Pod
			if strictErrs, _ := sigsjson.UnmarshalStrict(j, &pod, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields); len(strictErrs) > 0 {
				err = errors.Join(append([]error{err}, strictErrs...)...)
			}
		}
		return d, err
	}
	if errs := quantityProblems(j); len(errs) > 0 {
		// The strict decode's error for a bad quantity names no field; these do.
		return d, errs.ToAggregate()
	}
	var pod v1.Pod
	strictErrs, err := sigsjson.UnmarshalStrict(j, &pod, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return d, fmt.Errorf("pod manifest: %w", err)
	}
	if len(strictErrs) > 0 {
		return d, fmt.Errorf("pod manifest: %w", errors.Join(strictErrs...))
	}
	d.Pod = &pod
	return d, nil
}
