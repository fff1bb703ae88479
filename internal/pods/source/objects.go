package source

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/pods"
)

// Kinds of objects other than pods that manifests may hold.
const (
	KindConfigMap = "ConfigMap"
	KindSecret    = "Secret"
)

// maxObjectSize bounds the data of one ConfigMap or Secret (the API server's 1 MiB,
// pkg/apis/core/validation MaxSecretSize and the ConfigMap limit).
const maxObjectSize = 1 << 20

// parsedObjects are the ConfigMaps and Secrets of a manifest.
type parsedObjects struct {
	configMaps []*v1.ConfigMap
	secrets    []*v1.Secret
}

func (p parsedObjects) empty() bool { return len(p.configMaps) == 0 && len(p.secrets) == 0 }

// splitObjects takes the ConfigMap and Secret documents out of a manifest: it returns the other
// documents (for the pod decoder) and the objects, decoded strictly and validated as the API
// server does (names, keys, size; a Secret's stringData merged into data, its type Opaque by
// default; the namespace "default" when unset). name prefixes errors.
func splitObjects(name string, data []byte) ([]byte, parsedObjects, error) {
	var (
		rest bytes.Buffer
		objs parsedObjects
		errs []error
	)
	// Bounded before any document is decoded: even the kind sniffing below expands aliases.
	if err := manifest.CheckBounds(data); err != nil {
		return nil, parsedObjects{}, fmt.Errorf("%s: %w", name, err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, parsedObjects{}, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil || (tm.Kind != KindConfigMap && tm.Kind != KindSecret) {
			rest.WriteString("---\n")
			rest.Write(doc)
			continue
		}
		where := fmt.Sprintf("%s: document %d", name, i)
		switch tm.Kind {
		case KindConfigMap:
			cm, err := decodeConfigMap(doc)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
				continue
			}
			objs.configMaps = append(objs.configMaps, cm)
		case KindSecret:
			s, err := decodeSecret(doc)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
				continue
			}
			objs.secrets = append(objs.secrets, s)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, parsedObjects{}, err
	}
	return rest.Bytes(), objs, nil
}

// decodeConfigMap decodes and validates one ConfigMap document.
func decodeConfigMap(doc []byte) (*v1.ConfigMap, error) {
	var cm v1.ConfigMap
	if err := yaml.UnmarshalStrict(doc, &cm); err != nil {
		return nil, fmt.Errorf("configmap: %w", err)
	}
	if cm.APIVersion != "v1" {
		return nil, fmt.Errorf("configmap %s: apiVersion: Unsupported value: %q: supported values: \"v1\"", cm.Name, cm.APIVersion)
	}
	if cm.Namespace == "" {
		cm.Namespace = manifest.DefaultNamespace
	}
	errs := validateObjectMeta(&cm.ObjectMeta)
	size := 0
	for k, v := range cm.Data {
		errs = append(errs, validateKey(field.NewPath("data"), k)...)
		size += len(k) + len(v)
	}
	for k, v := range cm.BinaryData {
		errs = append(errs, validateKey(field.NewPath("binaryData"), k)...)
		if _, dup := cm.Data[k]; dup {
			errs = append(errs, field.Duplicate(field.NewPath("binaryData").Key(k), k))
		}
		size += len(k) + len(v)
	}
	if size > maxObjectSize {
		errs = append(errs, field.TooLong(field.NewPath(""), "", maxObjectSize))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("configmap %s/%s: %w", cm.Namespace, cm.Name, errs.ToAggregate())
	}
	return &cm, nil
}

// decodeSecret decodes and validates one Secret document; stringData is merged into data, as
// the API server does on write.
func decodeSecret(doc []byte) (*v1.Secret, error) {
	var s v1.Secret
	if err := yaml.UnmarshalStrict(doc, &s); err != nil {
		// The decoder's message may quote the document; never a secret's values.
		return nil, errors.New("secret: the document does not decode as a v1 Secret (unknown field or bad base64 in data)")
	}
	if s.APIVersion != "v1" {
		return nil, fmt.Errorf("secret %s: apiVersion: Unsupported value: %q: supported values: \"v1\"", s.Name, s.APIVersion)
	}
	if s.Namespace == "" {
		s.Namespace = manifest.DefaultNamespace
	}
	if s.Type == "" {
		s.Type = v1.SecretTypeOpaque
	}
	if len(s.StringData) > 0 {
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
		s.StringData = nil
	}
	errs := validateObjectMeta(&s.ObjectMeta)
	size := 0
	for k, v := range s.Data {
		errs = append(errs, validateKey(field.NewPath("data"), k)...)
		size += len(v)
	}
	if size > maxObjectSize {
		errs = append(errs, field.TooLong(field.NewPath("data"), "", maxObjectSize))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("secret %s/%s: %w", s.Namespace, s.Name, errs.ToAggregate())
	}
	return &s, nil
}

// validateObjectMeta is the API's metadata validation of a namespaced object.
func validateObjectMeta(m *metav1.ObjectMeta) field.ErrorList {
	return validation.ValidateObjectMeta(m, true, validation.NameIsDNSSubdomain, field.NewPath("metadata"))
}

// validateKey is the API's check of a ConfigMap or Secret key (IsConfigMapKey).
func validateKey(p *field.Path, k string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsConfigMapKey(k) {
		errs = append(errs, field.Invalid(p.Key(k), k, msg))
	}
	return errs
}

// parseFile parses a manifest that may hold ConfigMaps and Secrets besides pods: the objects
// are split off (splitObjects, which bounds the whole input), the rest is parsed as
// parseManifest parses, without measuring its bounds again; a file of objects only has no pods.
func parseFile(name, source string, data []byte) ([]*v1.Pod, parsedObjects, error) {
	rest, objs, err := splitObjects(name, data)
	if err != nil {
		return nil, parsedObjects{}, err
	}
	if !objs.empty() && !hasDocuments(rest) {
		return nil, objs, nil
	}
	list, err := manifest.ParseBounded(name, source, rest)
	if err != nil {
		return nil, parsedObjects{}, err
	}
	return list, objs, nil
}

// hasDocuments reports whether a multi-document YAML stream holds a non-empty document.
func hasDocuments(data []byte) bool {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if err != nil {
			return false
		}
		if j, err := yaml.YAMLToJSON(doc); err != nil || (len(bytes.TrimSpace(j)) > 0 && string(bytes.TrimSpace(j)) != "null") {
			return true
		}
	}
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
