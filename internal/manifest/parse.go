package manifest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slicelet/slicelet/slices"
)

// DefaultNamespace is the namespace of a manifest that names none (the kubelet's applyDefaults).
const DefaultNamespace = "default"

// ReadFile reads a manifest file and parses it with Parse, its absolute path as the source a
// missing UID is derived from: the same file gives the same pods, UIDs included, to the
// manifest directory and to `slicectl explain -f`.
func ReadFile(path string) ([]*v1.Pod, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("pod manifest %s: %w", path, err)
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return nil, fmt.Errorf("pod manifest %s: %w", path, err)
	}
	return Parse(path, abs, data)
}

// Parse turns a manifest (YAML, possibly multi-document, or JSON) into pods as the kubelet reads
// a static pod file (pkg/kubelet/config/common.go): Decode, SetDefaults, then applyDefaults — a
// pod without metadata.uid gets the content-derived UID (slices.PodUID over the defaulted pod
// and source, before the namespace is filled in, as the kubelet hashes it) and the default
// namespace — then Validate. name is how errors refer to the input; source is what a missing UID
// is derived from ("api" for API pods, the file's absolute path for files). Every problem is
// reported, each prefixed with name and, for multi-document input, the document index; on any
// problem no pod is returned, so a broken file never yields a partial set.
func Parse(name, source string, data []byte) ([]*v1.Pod, error) {
	docs, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: no pod in the file", name)
	}
	var (
		pods []*v1.Pod
		errs []error
	)
	for _, d := range docs {
		where := name
		if len(docs) > 1 {
			where = fmt.Sprintf("%s: document %d", name, d.Index)
		}
		pod := d.Pod
		SetDefaults(pod)
		if pod.UID == "" {
			uid, err := slices.PodUID(pod, source)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
				continue
			}
			pod.UID = types.UID(uid)
		}
		if pod.Namespace == "" {
			pod.Namespace = DefaultNamespace
		}
		if list := Validate(pod); len(list) > 0 {
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
