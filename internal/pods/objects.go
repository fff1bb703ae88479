package pods

import (
	"fmt"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Objects holds the ConfigMaps and Secrets pods use, from every source (the manifest
// directory and the local API): what the kubelet's configmap and secret managers fetch from the
// API server. A source replaces its whole set at each change; on a name clash the file source
// wins (as for pods). Its methods are safe for concurrent use.
type Objects struct {
	mu         sync.Mutex
	configMaps map[string]map[string]*v1.ConfigMap // source → namespace/name → object
	secrets    map[string]map[string]*v1.Secret
}

// NewObjects returns an empty Objects.
func NewObjects() *Objects {
	return &Objects{configMaps: map[string]map[string]*v1.ConfigMap{}, secrets: map[string]map[string]*v1.Secret{}}
}

func objectKey(namespace, name string) string { return namespace + "/" + name }

// Set replaces the objects of source (SourceFile or SourceAPI). The objects must not be
// changed afterwards.
func (o *Objects) Set(source string, configMaps []*v1.ConfigMap, secrets []*v1.Secret) {
	cms := make(map[string]*v1.ConfigMap, len(configMaps))
	for _, cm := range configMaps {
		cms[objectKey(cm.Namespace, cm.Name)] = cm
	}
	ss := make(map[string]*v1.Secret, len(secrets))
	for _, s := range secrets {
		ss[objectKey(s.Namespace, s.Name)] = s
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.configMaps[source], o.secrets[source] = cms, ss
}

// sourceOrder is the order in which sources are looked up: the file source wins a clash.
var sourceOrder = []string{SourceFile, SourceAPI}

// ConfigMap returns the ConfigMap namespace/name, or the API's NotFound error
// (`configmap "name" not found`, as the kubelet reports it).
func (o *Objects) ConfigMap(namespace, name string) (*v1.ConfigMap, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, src := range sourceOrder {
		if cm := o.configMaps[src][objectKey(namespace, name)]; cm != nil {
			return cm, nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmap"}, name)
}

// Secret returns the Secret namespace/name, or the API's NotFound error
// (`secret "name" not found`).
func (o *Objects) Secret(namespace, name string) (*v1.Secret, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, src := range sourceOrder {
		if s := o.secrets[src][objectKey(namespace, name)]; s != nil {
			return s, nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secret"}, name)
}

// ObjectRef names one object and where it comes from, for listings.
type ObjectRef struct {
	Namespace, Name, Source string
	// Keys counts its data entries.
	Keys int
}

// List lists the objects of kind "configmaps" or "secrets" of every source, sorted by
// namespace/name, the winner of a clash only.
func (o *Objects) List(kind string) ([]ObjectRef, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	seen := map[string]bool{}
	var out []ObjectRef
	for _, src := range sourceOrder {
		switch kind {
		case "configmaps":
			for k, cm := range o.configMaps[src] {
				if !seen[k] {
					seen[k] = true
					out = append(out, ObjectRef{Namespace: cm.Namespace, Name: cm.Name, Source: src, Keys: len(cm.Data) + len(cm.BinaryData)})
				}
			}
		case "secrets":
			for k, s := range o.secrets[src] {
				if !seen[k] {
					seen[k] = true
					out = append(out, ObjectRef{Namespace: s.Namespace, Name: s.Name, Source: src, Keys: len(s.Data) + len(s.StringData)})
				}
			}
		default:
			return nil, fmt.Errorf("kind %q: want configmaps or secrets", kind)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return objectKey(out[i].Namespace, out[i].Name) < objectKey(out[j].Namespace, out[j].Name)
	})
	return out, nil
}
