package source

import (
	"sort"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/pods"
)

// Kinds of objects other than pods that manifests may hold.
const (
	KindConfigMap = manifest.KindConfigMap
	KindSecret    = manifest.KindSecret
)

// parsedObjects are the ConfigMaps and Secrets of a manifest.
type parsedObjects struct {
	configMaps []*v1.ConfigMap
	secrets    []*v1.Secret
}

// parseFile reads a manifest that may hold ConfigMaps and Secrets besides pods (manifest.Read,
// which bounds the whole input); a file of objects only has no pods.
func parseFile(name, source string, data []byte) ([]*v1.Pod, parsedObjects, error) {
	m, err := manifest.Read(name, source, data)
	if err != nil {
		return nil, parsedObjects{}, err
	}
	return m.Pods, parsedObjects{configMaps: m.ConfigMaps, secrets: m.Secrets}, nil
}

// publishObjects passes the ConfigMaps and Secrets of the manifest directory's good files on to
// objects: files in lexical order, the first object of a namespace/name wins.
func (m *ManifestDir) publishObjects() {
	if m.objects == nil {
		return
	}
	paths := make([]string, 0, len(m.files))
	for p := range m.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	seenCM, seenS := map[string]bool{}, map[string]bool{}
	var cms []*v1.ConfigMap
	var secs []*v1.Secret
	for _, p := range paths {
		for _, cm := range m.files[p].objects.configMaps {
			if k := objectKey(cm.Namespace, cm.Name); !seenCM[k] {
				seenCM[k] = true
				cms = append(cms, cm)
			}
		}
		for _, s := range m.files[p].objects.secrets {
			if k := objectKey(s.Namespace, s.Name); !seenS[k] {
				seenS[k] = true
				secs = append(secs, s)
			}
		}
	}
	m.objects.Set(pods.SourceFile, cms, secs)
}
