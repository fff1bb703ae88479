package slices

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultNamespace is the namespace of a manifest that names none.
const DefaultNamespace = "default"

// ReadPodManifest reads a Pod manifest file (YAML, possibly multi-document, or JSON), decodes
// every document strictly, fills in the namespace ("default") and, for pods without
// metadata.uid, the content-derived UID of a static pod (PodUID, with the file's absolute path
// as source), and validates each pod. Every problem is reported, each prefixed with the file and
// (for multi-document files) the document index; on any problem no pod is returned, so a broken
// file never yields a partial set.
func ReadPodManifest(path string) ([]*v1.Pod, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("pod manifest %s: %w", path, err)
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return nil, fmt.Errorf("pod manifest %s: %w", path, err)
	}
	return ParsePodManifest(path, abs, data)
}

// ParsePodManifest is ReadPodManifest on data already read; name is how errors refer to the
// file, source is what the UID of a pod without one is derived from.
func ParsePodManifest(name, source string, data []byte) ([]*v1.Pod, error) {
	docs, err := DecodePods(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: no pod in the file", name)
	}
	var pods []*v1.Pod
	var errs []error
	for _, d := range docs {
		where := name
		if len(docs) > 1 {
			where = fmt.Sprintf("%s: document %d", name, d.Index)
		}
		pod := d.Pod
		if pod.Namespace == "" {
			pod.Namespace = DefaultNamespace
		}
		if pod.UID == "" {
			uid, err := PodUID(pod, source)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
				continue
			}
			pod.UID = types.UID(uid)
		}
		if list := ValidatePod(pod); len(list) > 0 {
			for _, e := range list {
				errs = append(errs, fmt.Errorf("%s: %w", where, e))
			}
			continue
		}
		pods = append(pods, pod)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return pods, nil
}
