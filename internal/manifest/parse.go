package manifest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
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

// Manifest is what one manifest holds, every document decoded, defaulted and validated.
type Manifest struct {
	Pods       []*v1.Pod
	ConfigMaps []*v1.ConfigMap
	Secrets    []*v1.Secret
}

// Read is the one path from bytes to pods and objects, for every way a manifest arrives (the
// manifest directory, the local API, `slicectl apply` and `slicectl explain`): it bounds the
// manifest (CheckBounds: its size and each document's decoded size, before anything is
// decoded), then turns it (YAML, possibly multi-document, or JSON) into pods as the kubelet
// reads a static pod file (pkg/kubelet/config/common.go): Decode, SetDefaults, then
// applyDefaults — a pod without metadata.uid gets the kubelet's static-pod UID (the pod as
// decoded, the node's name and source, the file's path: kubevalidation.StaticPodUID; or
// slicelet's earlier scheme, SetUIDScheme) and the default namespace — then ValidatePod;
// ConfigMap and Secret documents are defaulted and validated as the API server does. name is
// how errors refer to the input; source is the path a missing UID is derived from (a file's
// path as the manifest directory names it, its absolute directory joined with the file's name,
// as the kubelet's staticPodPath joined with it; "api" for API pods, whose store gives them
// UIDs of their own). Every
// problem is reported, each prefixed with name and, for multi-document input, the document
// index; on any problem nothing is returned, so a broken file never yields a partial set.
func Read(name, source string, data []byte) (Manifest, error) {
	if err := CheckBounds(data); err != nil {
		return Manifest{}, fmt.Errorf("%s: %w", name, err)
	}
	return read(name, source, data, false)
}

// ReadBoundedInput is Read for input whose size the caller has already bounded by other means:
// a store record the store itself wrote as compact JSON (no aliases, so its size is its decoded
// size) may exceed MaxDocumentJSONBytes by what the store added to an accepted pod.
func ReadBoundedInput(name, source string, data []byte) (Manifest, error) {
	return read(name, source, data, false)
}

// read is Read without the bounds; with podsOnly, a ConfigMap or Secret document is refused by
// name.
func read(name, source string, data []byte, podsOnly bool) (Manifest, error) {
	return decode(name, source, data, podsOnly, true)
}

// decode is read, validating each pod (ValidatePod) only when validate is set.
func decode(name, source string, data []byte, podsOnly, validate bool) (Manifest, error) {
	docs, err := Decode(data)
	if err != nil {
		return Manifest{}, fmt.Errorf("%s: %w", name, err)
	}
	if len(docs) == 0 {
		return Manifest{}, fmt.Errorf("%s: no pod in the file", name)
	}
	var (
		m    Manifest
		errs []error
	)
	for _, d := range docs {
		where := name
		if len(docs) > 1 {
			where = fmt.Sprintf("%s: document %d", name, d.Index)
		}
		switch {
		case podsOnly && d.Pod == nil:
			errs = append(errs, fmt.Errorf("%s: %w", where, &NotPodError{APIVersion: d.APIVersion, Kind: d.Kind}))
			continue
		case d.ConfigMap != nil:
			if err := checkConfigMap(d.ConfigMap); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
				continue
			}
			m.ConfigMaps = append(m.ConfigMaps, d.ConfigMap)
			continue
		case d.Secret != nil:
			if err := checkSecret(d.Secret); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
				continue
			}
			m.Secrets = append(m.Secrets, d.Secret)
			continue
		}
		pod := d.Pod
		if err := prepare(pod, source); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			continue
		}
		if list := validated(pod, validate); len(list) > 0 {
			for _, e := range list {
				errs = append(errs, fmt.Errorf("%s: %w", where, e))
			}
			continue
		}
		m.Pods = append(m.Pods, pod)
	}
	if len(errs) > 0 {
		return Manifest{}, errors.Join(errs...)
	}
	return m, nil
}

// Parse is Read for input that must hold pods only (an API pod, a pod to explain): a ConfigMap
// or Secret document is refused by name.
func Parse(name, source string, data []byte) ([]*v1.Pod, error) {
	if err := CheckBounds(data); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	m, err := read(name, source, data, true)
	return m.Pods, err
}

// ParseBounded is ReadBoundedInput for input that must hold pods only.
func ParseBounded(name, source string, data []byte) ([]*v1.Pod, error) {
	m, err := read(name, source, data, true)
	return m.Pods, err
}

// prepare applies to a decoded pod what the kubelet's file source applies before validation:
// the API's defaults, the UID when the manifest names none (the kubelet's, over the pod as
// decoded from the file at path source on this node; or slicelet's earlier scheme, over the
// defaulted pod: SetUIDScheme) and the default namespace.
func prepare(pod *v1.Pod, source string) error {
	uid, err := kubeletUID(pod, source)
	if err != nil {
		return err
	}
	SetDefaults(pod)
	if uid == "" {
		if uid, err = md5UID(pod, source); err != nil {
			return err
		}
	}
	if uid != "" {
		pod.UID = types.UID(uid)
	}
	if pod.Namespace == "" {
		pod.Namespace = DefaultNamespace
	}
	return nil
}

// DecodePods is Parse without the validation, for `slicectl explain`, which reports
// validation as a stage of its own (ValidatePod for a static pod; Validate with the
// registry's cluster-mode handling for an API pod) and explains the other stages of a pod
// that fails it: the same bounds, decoding, defaults, UID and namespace as Read, on the same
// bytes.
func DecodePods(name, source string, data []byte) ([]*v1.Pod, error) {
	if err := CheckBounds(data); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	m, err := decode(name, source, data, true, false)
	return m.Pods, err
}

// validated is ValidatePod(pod) when validate is set, else no problem.
func validated(pod *v1.Pod, validate bool) field.ErrorList {
	if !validate {
		return nil
	}
	return ValidatePod(pod)
}
