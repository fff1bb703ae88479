package source

import (
	"encoding/json"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/slices"
)

// parseManifest is manifest.CheckBounds (size and decoded size, before decoding),
// slices.ParsePodManifest (strict decode, namespace, content UID, validation) plus validateInput. name prefixes every error ("<name>: document <i>: <field>: ..." for
// multi-document input); source is what a missing UID is derived from. On any problem no pod is
// returned.
func parseManifest(name, source string, data []byte) ([]*v1.Pod, error) {
	if err := manifest.CheckBounds(data); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return parseChecked(name, source, data)
}

// parseRecord is parseManifest for a stored record (at most MaxRecordBytes): JSON, which has no
// aliases, is its own size as JSON and may exceed manifest.MaxDocumentJSONBytes by what the
// store added to an accepted pod; anything else (a hand-edited record) is bounded as a
// manifest.
func parseRecord(path string, data []byte) ([]*v1.Pod, error) {
	if !json.Valid(data) {
		if err := manifest.CheckBounds(data); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return parseChecked(path, path, data)
}

// parseChecked is parseManifest after the bounds.
func parseChecked(name, source string, data []byte) ([]*v1.Pod, error) {
	list, err := slices.ParsePodManifest(name, source, data)
	if err != nil {
		return nil, err
	}
	var errs []error
	for i, pod := range list {
		for _, e := range validateInput(pod) {
			errs = append(errs, fmt.Errorf("%s: %w", where(name, i, len(list)), e))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return list, nil
}

// where names document i of n in a manifest the way slices.ParsePodManifest does: the bare name
// for a single document, "<name>: document <i>" otherwise.
func where(name string, i, n int) string {
	if n <= 1 {
		return name
	}
	return fmt.Sprintf("%s: document %d", name, i)
}

// podKey is namespace/name, the identity sources deduplicate on.
func podKey(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

// annotate returns a deep copy of pod carrying the source (and, when non-empty, origin)
// annotations.
func annotate(pod *v1.Pod, src, origin string) *v1.Pod {
	cp := pod.DeepCopy()
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	cp.Annotations[pods.AnnotationSource] = src
	if origin != "" {
		cp.Annotations[pods.AnnotationOrigin] = origin
	}
	return cp
}
