package cluster

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/pods"
)

// References are the ConfigMaps and Secrets a pod names (in its namespace).
type References struct {
	ConfigMaps, Secrets []string
}

// PodReferences are the ConfigMaps and Secrets pod names in its volumes (configMap, secret,
// their projections) and its containers' env and envFrom, init and ephemeral containers
// included (the kubelet's podutil.VisitPodConfigmapNames and VisitPodSecretNames, less
// imagePullSecrets, which slicelet refuses).
func PodReferences(pod *v1.Pod) References {
	var r References
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			r.ConfigMaps = append(r.ConfigMaps, v.ConfigMap.Name)
		case v.Secret != nil:
			r.Secrets = append(r.Secrets, v.Secret.SecretName)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.ConfigMap != nil {
					r.ConfigMaps = append(r.ConfigMaps, src.ConfigMap.Name)
				}
				if src.Secret != nil {
					r.Secrets = append(r.Secrets, src.Secret.Name)
				}
			}
		}
	}
	env := func(envFrom []v1.EnvFromSource, env []v1.EnvVar) {
		for _, from := range envFrom {
			if from.ConfigMapRef != nil {
				r.ConfigMaps = append(r.ConfigMaps, from.ConfigMapRef.Name)
			}
			if from.SecretRef != nil {
				r.Secrets = append(r.Secrets, from.SecretRef.Name)
			}
		}
		for _, e := range env {
			if e.ValueFrom == nil {
				continue
			}
			if ref := e.ValueFrom.ConfigMapKeyRef; ref != nil {
				r.ConfigMaps = append(r.ConfigMaps, ref.Name)
			}
			if ref := e.ValueFrom.SecretKeyRef; ref != nil {
				r.Secrets = append(r.Secrets, ref.Name)
			}
		}
	}
	for _, c := range pod.Spec.InitContainers {
		env(c.EnvFrom, c.Env)
	}
	for _, c := range pod.Spec.Containers {
		env(c.EnvFrom, c.Env)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		env(c.EnvFrom, c.Env)
	}
	return r
}

// register notes the pods of a snapshot: a pod not seen before (by UID and resourceVersion)
// has the objects it names fetched afresh at their next use, as the kubelet's managers do when
// a pod is registered (cache_based_manager.go, AddReference): a pod created right after its
// ConfigMap changed sees the change.
func (o *Objects) register(run []pods.Desired) {
	seen := make(map[string]bool, len(run))
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, d := range run {
		key := string(d.Pod.UID) + "@" + d.Pod.ResourceVersion
		seen[key] = true
		if o.seen[key] {
			continue
		}
		refs := PodReferences(d.Pod)
		for _, name := range refs.ConfigMaps {
			o.configMaps.invalidate(d.Pod.Namespace, name)
		}
		for _, name := range refs.Secrets {
			o.secrets.invalidate(d.Pod.Namespace, name)
		}
	}
	o.seen = seen
	o.podCerts.forget(run)
}

// invalidate makes the next get of namespace/name fetch it.
func (c *objectCache[T]) invalidate(namespace, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[namespace+"/"+name]; ok {
		e.expires = time.Time{}
	}
}
