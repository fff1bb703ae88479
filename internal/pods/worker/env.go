package worker

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubectl/pkg/util/fieldpath"
	"k8s.io/kubectl/pkg/util/resource"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// ObjectGetter gives the ConfigMaps and Secrets pods refer to (pods.Objects): the API's
// NotFound error when there is none.
type ObjectGetter interface {
	ConfigMap(namespace, name string) (*v1.ConfigMap, error)
	Secret(namespace, name string) (*v1.Secret, error)
}

// ClusterObjects gives the pods of cluster mode (kubernetes.io/config.source: cluster) what
// they reference from the API server (internal/cluster.Objects): ConfigMaps and Secrets, the
// projected service-account tokens, ClusterTrustBundles and pod certificates, and the
// services' environment variables.
type ClusterObjects interface {
	ObjectGetter
	// ServiceAccountToken is the token src projects for pod (a TokenRequest bound to it).
	ServiceAccountToken(pod *v1.Pod, src *v1.ServiceAccountTokenProjection) ([]byte, error)
	// TrustAnchors are the certificates a clusterTrustBundle projection src projects.
	TrustAnchors(src *v1.ClusterTrustBundleProjection) ([]byte, error)
	// PodCertificate is the private key and certificate chain of the podCertificate source
	// at index of pod's volume, once a signer issued them.
	PodCertificate(pod *v1.Pod, volume string, index int, src *v1.PodCertificateProjection) (key, chain []byte, err error)
	// ServiceEnv is the service variables of a pod of namespace (the kubelet's
	// getServiceEnvVarMap).
	ServiceEnv(namespace string, enableServiceLinks bool) (map[string]string, error)
	// RuntimeHandler is the CRI runtime handler of the RuntimeClass name.
	RuntimeHandler(name string) (string, error)
	// PersistentVolumeClaim and PersistentVolume read a claim of the pods and the volume it
	// is bound to (or the API's error).
	PersistentVolumeClaim(namespace, name string) (*v1.PersistentVolumeClaim, error)
	PersistentVolume(name string) (*v1.PersistentVolume, error)
	// PatchClaimStatus applies the strategic merge patch to the status of the claim
	// namespace/name (a node expansion's progress) and returns the claim as updated.
	PatchClaimStatus(namespace, name string, patch []byte) (*v1.PersistentVolumeClaim, error)
}

// configError is a container configuration that cannot be built now (a missing ConfigMap,
// Secret or key): the container waits (CreateContainerConfigError) and is tried again.
type configError struct{ err error }

func (e configError) Error() string { return e.err.Error() }
func (e configError) Unwrap() error { return e.err }

// fromCluster reports whether pod came from cluster mode's API server.
func fromCluster(pod *v1.Pod) bool {
	return pod.Annotations[pods.AnnotationSource] == pods.SourceCluster
}

// objects is where pod's ConfigMaps and Secrets come from: the API server for cluster pods,
// the node's own stores for the others; nil when there is none.
func (w *Worker) objects(pod *v1.Pod) ObjectGetter {
	if fromCluster(pod) {
		if w.opts.Cluster == nil {
			return nil
		}
		return w.opts.Cluster
	}
	return w.opts.Objects
}

// configMap and secret look an object of pod's namespace up; no ObjectGetter is as if none
// existed.
func (w *Worker) configMap(pod *v1.Pod, name string) (*v1.ConfigMap, error) {
	o := w.objects(pod)
	if o == nil {
		return nil, apierrors.NewNotFound(v1.Resource("configmap"), name)
	}
	return o.ConfigMap(pod.Namespace, name)
}

func (w *Worker) secret(pod *v1.Pod, name string) (*v1.Secret, error) {
	o := w.objects(pod)
	if o == nil {
		return nil, apierrors.NewNotFound(v1.Resource("secret"), name)
	}
	return o.Secret(pod.Namespace, name)
}

// serviceEnv is the service variables of a cluster pod (none for the others: a node without
// an API server has no Services).
func (w *Worker) serviceEnv(pod *v1.Pod) (map[string]string, error) {
	if !fromCluster(pod) || w.opts.Cluster == nil {
		return nil, nil
	}
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	return w.opts.Cluster.ServiceEnv(pod.Namespace, links)
}

// containerEnv is the kubelet's makeEnvironmentVariables for container c: envFrom sources in
// order (keys with their prefix; an optional source that is missing is skipped), then env in
// order, each literal value $(VAR)-expanded against what came before, each valueFrom resolved
// locally (fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef; optional ones that are
// missing are left out); then command and args expanded against the result. Variables come
// out in the order they were first defined (envFrom keys sorted per source). A missing ConfigMap, Secret or key is a configError with the kubelet's
// message.
func (w *Worker) containerEnv(pod *v1.Pod, c *v1.Container) (env []v1.EnvVar, command, args []string, err error) {
	svc, err := w.serviceEnv(pod)
	if err != nil {
		return nil, nil, nil, configError{err}
	}
	// The service variables are there for $(VAR) expansion from the start; the container's
	// own variables override them (the kubelet's MappingFuncFor(tmpEnv, serviceEnv)).
	vars := maps.Clone(svc)
	if vars == nil {
		vars = map[string]string{}
	}
	defined := map[string]bool{}
	var order []string
	set := func(k, v string) {
		if !defined[k] {
			defined[k] = true
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm, err := w.configMap(pod, from.ConfigMapRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && isTrue(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, nil, nil, configError{err}
			}
			for _, k := range sortedKeys(cm.Data) {
				set(from.Prefix+k, cm.Data[k])
			}
		case from.SecretRef != nil:
			s, err := w.secret(pod, from.SecretRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && isTrue(from.SecretRef.Optional) {
					continue
				}
				return nil, nil, nil, configError{err}
			}
			for _, k := range sortedKeys(s.Data) {
				set(from.Prefix+k, string(s.Data[k]))
			}
		}
	}
	for _, e := range c.Env {
		value := e.Value
		switch {
		case value != "":
			value = lifecycle.Expand(value, vars)
		case e.ValueFrom != nil:
			var ok bool
			if value, ok, err = w.envValueFrom(pod, c, e.ValueFrom); err != nil {
				return nil, nil, nil, err
			}
			if !ok {
				continue
			}
		}
		set(e.Name, value)
	}
	for _, k := range order {
		env = append(env, v1.EnvVar{Name: k, Value: vars[k]})
	}
	// Then the service variables the container does not define itself, sorted.
	for _, k := range sortedKeys(svc) {
		if !defined[k] {
			env = append(env, v1.EnvVar{Name: k, Value: svc[k]})
		}
	}
	for _, s := range c.Command {
		command = append(command, lifecycle.Expand(s, vars))
	}
	for _, s := range c.Args {
		args = append(args, lifecycle.Expand(s, vars))
	}
	return env, command, args, nil
}

// envValueFrom resolves one env valueFrom; ok is false for an optional reference that is
// missing (the variable is left out).
func (w *Worker) envValueFrom(pod *v1.Pod, c *v1.Container, from *v1.EnvVarSource) (string, bool, error) {
	switch {
	case from.FieldRef != nil:
		v, err := w.podFieldValue(pod, from.FieldRef.FieldPath)
		return v, err == nil, err
	case from.ResourceFieldRef != nil:
		v, err := w.resourceFieldValue(pod, c, from.ResourceFieldRef)
		return v, err == nil, err
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		cm, err := w.configMap(pod, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && isTrue(ref.Optional) {
				return "", false, nil
			}
			return "", false, configError{err}
		}
		v, found := cm.Data[ref.Key]
		if !found {
			if isTrue(ref.Optional) {
				return "", false, nil
			}
			return "", false, configError{fmt.Errorf("couldn't find key %v in ConfigMap %v/%v", ref.Key, pod.Namespace, ref.Name)}
		}
		return v, true, nil
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		s, err := w.secret(pod, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && isTrue(ref.Optional) {
				return "", false, nil
			}
			return "", false, configError{err}
		}
		v, found := s.Data[ref.Key]
		if !found {
			if isTrue(ref.Optional) {
				return "", false, nil
			}
			return "", false, configError{fmt.Errorf("couldn't find key %v in Secret %v/%v", ref.Key, pod.Namespace, ref.Name)}
		}
		return string(v), true, nil
	}
	return "", false, nil
}

func isTrue(b *bool) bool { return b != nil && *b }

// sortedKeys are the keys of m, sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// podFieldValue is the kubelet's podFieldSelectorRuntimeValue (pkg/kubelet/kubelet_pods.go):
// spec.nodeName, spec.serviceAccountName, status.hostIP(s) and status.podIP(s) from what the
// node knows, the rest (metadata.name, namespace, uid, labels, annotations, one label or
// annotation by key) from the pod.
func (w *Worker) podFieldValue(pod *v1.Pod, path string) (string, error) {
	switch path {
	case "spec.nodeName":
		if pod.Spec.NodeName != "" {
			return pod.Spec.NodeName, nil
		}
		return w.opts.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return w.hostIPs()[0], nil
	case "status.hostIPs":
		return strings.Join(w.hostIPs(), ","), nil
	case "status.podIP":
		return w.podIPs(pod)[0], nil
	case "status.podIPs":
		return strings.Join(w.podIPs(pod), ","), nil
	}
	return fieldpath.ExtractFieldPathAsString(pod, path)
}

// hostIPs are the node's IPs, the loopback when none is configured.
func (w *Worker) hostIPs() []string {
	if len(w.opts.NodeIPs) > 0 {
		return w.opts.NodeIPs
	}
	return []string{loopback}
}

// podIPs are the pod's IPs as the Downward API gives them: the node's in the host's network
// namespace, else those of the sandbox its containers start in ("" before it has one or when the
// runtime cannot say, as the kubelet's podFieldSelectorRuntimeValue gives).
func (w *Worker) podIPs(pod *v1.Pod) []string {
	if w.hostNetwork(pod) {
		return w.hostIPs()
	}
	w.mu.Lock()
	e := w.pods[string(pod.UID)]
	w.mu.Unlock()
	var ips []string
	if e != nil {
		e.recMu.Lock()
		ips = e.podIPs
		e.recMu.Unlock()
	}
	if len(ips) == 0 {
		return []string{""}
	}
	return ips
}

// resourceFieldValue is the kubelet's containerResourceRuntimeValue on the pod with its
// containers' unset limits defaulted to the node's allocatable (defaultPodLimitsForDownwardAPI).
func (w *Worker) resourceFieldValue(pod *v1.Pod, c *v1.Container, fs *v1.ResourceFieldSelector) (string, error) {
	target := c
	if fs.ContainerName != "" {
		t, _ := lifecycle.ContainerByName(pod, fs.ContainerName)
		if t == nil {
			return "", fmt.Errorf("container %s not found", fs.ContainerName)
		}
		target = t
	}
	dc := target.DeepCopy()
	for name, q := range w.opts.Allocatable {
		if _, set := dc.Resources.Limits[name]; !set {
			if dc.Resources.Limits == nil {
				dc.Resources.Limits = v1.ResourceList{}
			}
			dc.Resources.Limits[name] = q.DeepCopy()
		}
	}
	return resource.ExtractContainerResourceValue(fs, dc)
}

// validateEnvSources checks what containerEnv resolves: one source per valueFrom, field paths
// the kubelet resolves, resources it extracts; fileKeyRef (files in the container's volumes)
// is refused.
func validateEnvSources(p *field.Path, c *v1.Container) field.ErrorList {
	var errs field.ErrorList
	for i, e := range c.Env {
		if e.ValueFrom == nil {
			continue
		}
		vp := p.Child("env").Index(i).Child("valueFrom")
		from := e.ValueFrom
		n := 0
		for _, set := range []bool{from.FieldRef != nil, from.ResourceFieldRef != nil, from.ConfigMapKeyRef != nil, from.SecretKeyRef != nil, from.FileKeyRef != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			errs = append(errs, field.Invalid(vp, "", "must specify exactly one of fieldRef, resourceFieldRef, configMapKeyRef or secretKeyRef"))
			continue
		}
		switch {
		case from.FileKeyRef != nil:
			errs = append(errs, field.Forbidden(vp.Child("fileKeyRef"), "env values from files are not supported by slicelet"))
		case from.FieldRef != nil:
			errs = append(errs, validateFieldRef(vp.Child("fieldRef"), from.FieldRef, envFieldPaths)...)
		case from.ResourceFieldRef != nil:
			errs = append(errs, validateResourceFieldRef(vp.Child("resourceFieldRef"), from.ResourceFieldRef)...)
		case from.ConfigMapKeyRef != nil && (from.ConfigMapKeyRef.Name == "" || from.ConfigMapKeyRef.Key == ""):
			errs = append(errs, field.Required(vp.Child("configMapKeyRef"), "name and key are required"))
		case from.SecretKeyRef != nil && (from.SecretKeyRef.Name == "" || from.SecretKeyRef.Key == ""):
			errs = append(errs, field.Required(vp.Child("secretKeyRef"), "name and key are required"))
		}
	}
	for i, from := range c.EnvFrom {
		if (from.ConfigMapRef == nil) == (from.SecretRef == nil) {
			errs = append(errs, field.Invalid(p.Child("envFrom").Index(i), "", "must specify exactly one of configMapRef or secretRef"))
		}
	}
	return errs
}

// envFieldPaths are the field paths env fieldRef takes besides one label or annotation by key
// (the API's validEnvDownwardAPIFieldPathExpressions).
var envFieldPaths = []string{"metadata.name", "metadata.namespace", "metadata.uid",
	"spec.nodeName", "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"}

// volumeFieldPaths are the field paths downwardAPI volume items take besides one label or
// annotation by key (validVolumeDownwardAPIFieldPathExpressions).
var volumeFieldPaths = []string{"metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels", "metadata.annotations"}

// validateFieldRef checks a fieldRef: apiVersion v1 and one of the valid paths, or one label
// or annotation by key (metadata.labels['key']).
func validateFieldRef(p *field.Path, ref *v1.ObjectFieldSelector, valid []string) field.ErrorList {
	if ref.APIVersion != "" && ref.APIVersion != "v1" {
		return field.ErrorList{field.NotSupported(p.Child("apiVersion"), ref.APIVersion, []string{"v1"})}
	}
	if path, sub, ok := fieldpath.SplitMaybeSubscriptedPath(ref.FieldPath); ok && sub != "" && (path == "metadata.labels" || path == "metadata.annotations") {
		return nil
	}
	for _, v := range valid {
		if ref.FieldPath == v {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(p.Child("fieldPath"), ref.FieldPath, valid)}
}

// validateResourceFieldRef checks a resourceFieldRef: a resource the kubelet extracts.
func validateResourceFieldRef(p *field.Path, ref *v1.ResourceFieldSelector) field.ErrorList {
	switch r := v1.ResourceName(ref.Resource); {
	case r == v1.ResourceLimitsCPU, r == v1.ResourceLimitsMemory, r == v1.ResourceLimitsEphemeralStorage,
		r == v1.ResourceRequestsCPU, r == v1.ResourceRequestsMemory, r == v1.ResourceRequestsEphemeralStorage,
		strings.HasPrefix(string(r), "limits.hugepages-"), strings.HasPrefix(string(r), "requests.hugepages-"):
		return nil
	}
	return field.ErrorList{field.NotSupported(p.Child("resource"), ref.Resource,
		[]string{"limits.cpu", "limits.memory", "limits.ephemeral-storage", "requests.cpu", "requests.memory", "requests.ephemeral-storage", "limits.hugepages-<size>", "requests.hugepages-<size>"})}
}
