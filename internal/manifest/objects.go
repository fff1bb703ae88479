package manifest

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
)

// Kinds of objects other than pods that a manifest may hold: pods reference them, and slicelet
// serves them from its own sources.
const (
	KindConfigMap = "ConfigMap"
	KindSecret    = "Secret"
)

// MaxObjectBytes bounds the data of one ConfigMap or Secret: the API server's 1 MiB
// (pkg/apis/core/validation MaxSecretSize, and the ConfigMap limit).
const MaxObjectBytes = 1 << 20

// decodeConfigMap decodes one ConfigMap document (JSON) strictly.
func decodeConfigMap(j []byte) (*v1.ConfigMap, error) {
	var cm v1.ConfigMap
	strictErrs, err := sigsjson.UnmarshalStrict(j, &cm, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err == nil && len(strictErrs) > 0 {
		err = errors.Join(strictErrs...)
	}
	if err != nil {
		return nil, fmt.Errorf("configmap: %w", err)
	}
	return &cm, nil
}

// decodeSecret decodes one Secret document (JSON) strictly. Its error never quotes the
// document, which holds the secret's values.
func decodeSecret(j []byte) (*v1.Secret, error) {
	var s v1.Secret
	strictErrs, err := sigsjson.UnmarshalStrict(j, &s, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil || len(strictErrs) > 0 {
		return nil, errors.New("secret: the document does not decode as a v1 Secret (unknown field or bad base64 in data)")
	}
	return &s, nil
}

// checkConfigMap defaults (the namespace) and validates a decoded ConfigMap as the API server
// does: metadata, keys, a key in both data and binaryData, at most MaxObjectBytes.
func checkConfigMap(cm *v1.ConfigMap) error {
	if cm.Namespace == "" {
		cm.Namespace = DefaultNamespace
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
	if size > MaxObjectBytes {
		errs = append(errs, field.TooLong(field.NewPath(""), "", MaxObjectBytes))
	}
	if len(errs) > 0 {
		return fmt.Errorf("configmap %s/%s: %w", cm.Namespace, cm.Name, errs.ToAggregate())
	}
	return nil
}

// checkSecret defaults a decoded Secret as the API server does on write (the namespace, type
// Opaque, stringData merged into data) and validates it (metadata, keys, at most
// MaxObjectBytes of data).
func checkSecret(s *v1.Secret) error {
	if s.Namespace == "" {
		s.Namespace = DefaultNamespace
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
	if size > MaxObjectBytes {
		errs = append(errs, field.TooLong(field.NewPath("data"), "", MaxObjectBytes))
	}
	if len(errs) > 0 {
		return fmt.Errorf("secret %s/%s: %w", s.Namespace, s.Name, errs.ToAggregate())
	}
	return nil
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
