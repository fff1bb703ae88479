package source

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/pods"
)

// ObjectStoreDir is where API ConfigMaps and Secrets are stored, relative to the state
// directory.
const ObjectStoreDir = "objects/api"

// ErrObjectNotFound: no API object of that kind, namespace and name.
var ErrObjectNotFound = errors.New("not found")

// DefaultMaxObjects bounds the stored objects of each kind.
const DefaultMaxObjects = 1000

// ObjectStore holds the ConfigMaps and Secrets created through the local API, one JSON file
// each in <state_dir>/objects/api (configmap_<namespace>_<name>.json,
// secret_<namespace>_<name>.json; mode 0600, the directory 0700), written atomically and
// durably like API pods. Every change is passed on to the pods' Objects (source "api"). Secret
// values are never logged. Its methods are safe for concurrent use.
type ObjectStore struct {
	dir     string
	log     *slog.Logger
	objects *pods.Objects

	mu         sync.Mutex
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
	problems   []pods.Problem
}

// OpenObjectStore creates the directory if needed, loads what is stored and publishes it to
// objects. A file that does not load is a Problem (left on disk); only an unusable directory is
// an error.
func OpenObjectStore(stateDir string, objects *pods.Objects, log *slog.Logger) (*ObjectStore, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &ObjectStore{dir: filepath.Join(stateDir, ObjectStoreDir), log: log, objects: objects,
		configMaps: map[string]*v1.ConfigMap{}, secrets: map[string]*v1.Secret{}}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("api object store %s: %w", s.dir, err)
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("api object store %s: %w", s.dir, err)
	}
	for _, e := range entries {
		path := filepath.Join(s.dir, e.Name())
		if strings.HasPrefix(e.Name(), tempPrefix) {
			_ = os.Remove(path)
			continue
		}
		if err := s.load(path, e.Name()); err != nil {
			s.problems = append(s.problems, pods.Problem{Origin: path, Error: err.Error()})
			log.Warn("api object store: stored object does not load", "path", path, "error", err)
		}
	}
	s.publish()
	return s, nil
}

// load reads one stored object.
func (s *ObjectStore) load(path, name string) error {
	data, err := readManifest(path, 4*manifest.MaxObjectBytes)
	if err != nil {
		return err
	}
	podList, objs, err := parseFile(path, path, data)
	if err != nil {
		return err
	}
	switch {
	case len(podList) > 0:
		return fmt.Errorf("%s: not one ConfigMap or Secret named as its file", path)
	case len(objs.configMaps) == 1 && len(objs.secrets) == 0 && objectFile(KindConfigMap, objs.configMaps[0].Namespace, objs.configMaps[0].Name) == name:
		cm := objs.configMaps[0]
		s.configMaps[objectKey(cm.Namespace, cm.Name)] = cm
	case len(objs.secrets) == 1 && len(objs.configMaps) == 0 && objectFile(KindSecret, objs.secrets[0].Namespace, objs.secrets[0].Name) == name:
		sec := objs.secrets[0]
		s.secrets[objectKey(sec.Namespace, sec.Name)] = sec
	default:
		return fmt.Errorf("%s: not one ConfigMap or Secret named as its file", path)
	}
	return nil
}

func objectKey(namespace, name string) string { return namespace + "/" + name }

// objectFile is the file name of an object (namespaces and names have no "_").
func objectFile(kind, namespace, name string) string {
	return strings.ToLower(kind) + "_" + namespace + "_" + name + ".json"
}

// publish passes the stored objects on. Call with s.mu held (or before s is shared).
func (s *ObjectStore) publish() {
	if s.objects == nil {
		return
	}
	cms := make([]*v1.ConfigMap, 0, len(s.configMaps))
	for _, cm := range s.configMaps {
		cms = append(cms, cm)
	}
	secs := make([]*v1.Secret, 0, len(s.secrets))
	for _, sec := range s.secrets {
		secs = append(secs, sec)
	}
	s.objects.Set(pods.SourceAPI, cms, secs)
}

// Problems are the stored files that did not load.
func (s *ObjectStore) Problems() []pods.Problem {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]pods.Problem(nil), s.problems...)
}

// AppliedObject is what ApplyObject did.
type AppliedObject struct {
	// Kind is KindConfigMap or KindSecret.
	Kind, Namespace, Name string
	// Keys counts its data entries.
	Keys int
	// Action is "created", "configured" or "unchanged", as kubectl apply prints it.
	Action string
}

// ApplyObject creates or replaces the ConfigMap or Secret of a manifest (YAML or JSON, exactly
// one object, of kind wantKind unless it is "", at most DefaultMaxFileSize bytes). Invalid
// input wraps ErrInvalid. With dryRun nothing is stored.
func (s *ObjectStore) ApplyObject(manifest []byte, wantKind string, dryRun bool) (AppliedObject, error) {
	var res AppliedObject
	if len(manifest) > DefaultMaxFileSize {
		return res, fmt.Errorf("%w: api: manifest too large: %d bytes, at most %d", ErrInvalid, len(manifest), DefaultMaxFileSize)
	}
	podList, objs, err := parseFile("api", "api", manifest)
	if err != nil {
		return res, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(podList) > 0 || len(objs.configMaps)+len(objs.secrets) != 1 {
		return res, fmt.Errorf("%w: api: want exactly one ConfigMap or Secret", ErrInvalid)
	}
	var (
		obj    any
		exists bool
		same   bool
		count  int
	)
	if len(objs.configMaps) == 1 {
		cm := objs.configMaps[0]
		res = AppliedObject{Kind: KindConfigMap, Namespace: cm.Namespace, Name: cm.Name, Keys: len(cm.Data) + len(cm.BinaryData)}
		s.mu.Lock()
		defer s.mu.Unlock()
		var old *v1.ConfigMap
		old, exists = s.configMaps[objectKey(cm.Namespace, cm.Name)]
		same, obj, count = exists && apiequality.Semantic.DeepEqual(old, cm), cm, len(s.configMaps)
	} else {
		sec := objs.secrets[0]
		res = AppliedObject{Kind: KindSecret, Namespace: sec.Namespace, Name: sec.Name, Keys: len(sec.Data)}
		s.mu.Lock()
		defer s.mu.Unlock()
		var old *v1.Secret
		old, exists = s.secrets[objectKey(sec.Namespace, sec.Name)]
		same, obj, count = exists && apiequality.Semantic.DeepEqual(old, sec), sec, len(s.secrets)
	}
	kind := strings.ToLower(res.Kind)
	if wantKind != "" && res.Kind != wantKind {
		return res, fmt.Errorf("%w: api: a %s, want a %s", ErrInvalid, res.Kind, wantKind)
	}
	switch {
	case same:
		res.Action = "unchanged"
	case exists:
		res.Action = "configured"
	default:
		res.Action = "created"
		if count >= DefaultMaxObjects {
			return res, fmt.Errorf("%s %s/%s: too many %ss: at most %d", kind, res.Namespace, res.Name, kind, DefaultMaxObjects)
		}
	}
	if dryRun || same {
		return res, nil
	}
	if err := s.write(res.Kind, res.Namespace, res.Name, obj); err != nil {
		return res, err
	}
	switch o := obj.(type) {
	case *v1.ConfigMap:
		s.configMaps[objectKey(o.Namespace, o.Name)] = o
	case *v1.Secret:
		s.secrets[objectKey(o.Namespace, o.Name)] = o
	}
	// Names and key counts only: values are never logged.
	s.log.Info("api object stored", "kind", res.Kind, "object", objectKey(res.Namespace, res.Name), "keys", res.Keys, "action", res.Action)
	s.publish()
	return res, nil
}

// write stores one object atomically and durably with mode 0600.
func (s *ObjectStore) write(kind, namespace, name string, obj any) error {
	data, err := json.MarshalIndent(obj, "", "  ")
	if err != nil {
		return fmt.Errorf("%s %s/%s: encode: %w", strings.ToLower(kind), namespace, name, err)
	}
	if err := writeFileAtomic(s.dir, objectFile(kind, namespace, name), append(data, '\n')); err != nil {
		return fmt.Errorf("%s %s/%s: %w", strings.ToLower(kind), namespace, name, err)
	}
	return nil
}

// DeleteObject removes the ConfigMap or Secret (kind KindConfigMap or KindSecret);
// ErrObjectNotFound when there is none.
func (s *ObjectStore) DeleteObject(kind, namespace, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := objectKey(namespace, name)
	var exists bool
	switch kind {
	case KindConfigMap:
		_, exists = s.configMaps[k]
	case KindSecret:
		_, exists = s.secrets[k]
	default:
		return fmt.Errorf("kind %q: want ConfigMap or Secret", kind)
	}
	if !exists {
		return fmt.Errorf("%s %q: %w", strings.ToLower(kind), name, ErrObjectNotFound)
	}
	if err := removeFileDurable(s.dir, objectFile(kind, namespace, name)); err != nil {
		return fmt.Errorf("%s %s: %w", strings.ToLower(kind), k, err)
	}
	delete(s.configMaps, k)
	delete(s.secrets, k)
	s.log.Info("api object deleted", "kind", kind, "object", k)
	s.publish()
	return nil
}
