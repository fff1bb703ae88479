package manifest

import (
	"errors"
	"fmt"
	"io"
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
	data, err := ReadBounded(abs)
	if err != nil {
		return nil, fmt.Errorf("pod manifest %s: %w", path, err)
	}
	return Parse(path, abs, data)
}

// ReadBounded reads a file of at most MaxInputBytes (ReadAll).
func ReadBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAll(f)
}

// ReadAll reads r to its end, at most MaxInputBytes, never holding more than one byte past the
// limit: larger input is refused with an error wrapping ErrTooLarge.
func ReadAll(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxInputBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxInputBytes {
		return nil, fmt.Errorf("%w: more than %d bytes (3 MiB, the Kubernetes API server's request limit)", ErrTooLarge, MaxInputBytes)
	}
	return data, nil
}

// Parse bounds a manifest (CheckBounds: its size and each document's decoded size, before
// anything is decoded), then turns it (YAML, possibly multi-document, or JSON) into pods as the kubelet reads
// a static pod file (pkg/kubelet/config/common.go): Decode, SetDefaults, then applyDefaults — a
// pod without metadata.uid gets the content-derived UID (slices.PodUID over the defaulted pod
// and source, before the namespace is filled in, as the kubelet hashes it) and the default
// namespace — then Validate. name is how errors refer to the input; source is what a missing UID
// is derived from ("api" for API pods, the file's absolute path for files). Every problem is
// reported, each prefixed with name and, for multi-document input, the document index; on any
// problem no pod is returned, so a broken file never yields a partial set.
func Parse(name, source string, data []byte) ([]*v1.Pod, error) {
	if err := CheckBounds(data); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return ParseBounded(name, source, data)
}

// ParseBounded is Parse for input whose size the caller has already bounded by other means: a
// store record the store itself wrote as compact JSON (no aliases, so its size is its decoded
// size) may exceed MaxDocumentJSONBytes by what the store added to an accepted pod.
func ParseBounded(name, source string, data []byte) ([]*v1.Pod, error) {
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
