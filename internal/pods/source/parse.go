package source

import (
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/pods"
)

// parseManifest is manifest.Parse, the one decoding path (bounds before decoding, strict
// decode, the API's defaults, static-pod UID, namespace, validation). name prefixes every error
// ("<name>: document <i>: <field>: ..." for multi-document input); source is what a missing UID
// is derived from. On any problem no pod is returned.
func parseManifest(name, source string, data []byte) ([]*v1.Pod, error) {
	return manifest.Parse(name, source, data)
}

// parseRecord is parseManifest for a stored record (at most MaxRecordBytes): JSON, which has no
// aliases, is its own size as JSON and may exceed manifest.MaxDocumentJSONBytes by what the
// store added to an accepted pod; anything else (a hand-edited record) is bounded as a
// manifest.
func parseRecord(path string, data []byte) ([]*v1.Pod, error) {
	if json.Valid(data) {
		return manifest.ParseBounded(path, path, data)
	}
	return manifest.Parse(path, path, data)
}

// podKey is namespace/name, the identity sources deduplicate on.
func podKey(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

// annotate sets the source (and, when non-empty, origin) annotations on pod, a pod just
// parsed that nothing else holds, and returns it.
func annotate(pod *v1.Pod, src, origin string) *v1.Pod {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[pods.AnnotationSource] = src
	if origin != "" {
		pod.Annotations[pods.AnnotationOrigin] = origin
	}
	return pod
}

// where names document i of n in a manifest the way manifest.Parse does: the bare name for a
// single document, "<name>: document <i>" otherwise.
func where(name string, i, n int) string {
	if n <= 1 {
		return name
	}
	return fmt.Sprintf("%s: document %d", name, i)
}
