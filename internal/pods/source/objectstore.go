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
	data, err := readManifest(path, 4*maxObjectSize)
	if err != nil {
		return err
	}
	_, objs, err := splitObjects(path, data)
	if err != nil {
		return err
	}
	switch {
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

// ApplyObject creates or replaces the ConfigMap or Secret of a manifest (YAML or JSON, exactly
// one object, at most DefaultMaxFileSize bytes) and returns its kind, namespace and name.
// Invalid input wraps ErrInvalid. With dryRun nothing is stored.
func (s *ObjectStore) ApplyObject(manifest []byte, dryRun bool) (kind, namespace, name string, err error) {
	if len(manifest) > DefaultMaxFileSize {
		return "", "", "", fmt.Errorf("%w: api: manifest too large: %d bytes, at most %d", ErrInvalid, len(manifest), DefaultMaxFileSize)
	}
	rest, objs, err := splitObjects("api", manifest)
	if err != nil {
		return "", "", "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(strings.TrimSpace(strings.ReplaceAll(string(rest), "---", ""))) > 0 || len(objs.configMaps)+len(objs.secrets) != 1 {
		return "", "", "", fmt.Errorf("%w: api: want exactly one ConfigMap or Secret", ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(objs.configMaps) == 1 {
		cm := objs.configMaps[0]
		kind, namespace, name = KindConfigMap, cm.Namespace, cm.Name
		old, exists := s.configMaps[objectKey(namespace, name)]
		if !exists && len(s.configMaps) >= DefaultMaxObjects {
			return "", "", "", fmt.Errorf("configmap %s/%s: too many configmaps: at most %d", namespace, name, DefaultMaxObjects)
		}
		if dryRun || (exists && apiequality.Semantic.DeepEqual(old, cm)) {
			return kind, namespace, name, nil
		}
		if err := s.write(kind, namespace, name, cm); err != nil {
			return "", "", "", err
		}
		s.configMaps[objectKey(namespace, name)] = cm
		s.log.Info("api configmap stored", "configmap", objectKey(namespace, name), "keys", len(cm.Data)+len(cm.BinaryData))
	} else {
		sec := objs.secrets[0]
		kind, namespace, name = KindSecret, sec.Namespace, sec.Name
		old, exists := s.secrets[objectKey(namespace, name)]
		if !exists && len(s.secrets) >= DefaultMaxObjects {
			return "", "", "", fmt.Errorf("secret %s/%s: too many secrets: at most %d", namespace, name, DefaultMaxObjects)
		}
		if dryRun || (exists && apiequality.Semantic.DeepEqual(old, sec)) {
			return kind, namespace, name, nil
		}
		if err := s.write(kind, namespace, name, sec); err != nil {
			return "", "", "", err
		}
		s.secrets[objectKey(namespace, name)] = sec
		// Keys only: values are never logged.
		s.log.Info("api secret stored", "secret", objectKey(namespace, name), "keys", len(sec.Data))
	}
	s.publish()
	return kind, namespace, name, nil
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
