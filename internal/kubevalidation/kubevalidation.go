// Package kubevalidation is slicelet's one door to k8s.io/kubernetes: the API's own defaulting
// and validation of a Pod, called exactly as the kubelet's static-pod file source calls them
// (pkg/kubelet/config/common.go, tryDecodeSinglePod). It holds no rule of its own; every
// problem it returns carries the API's field path and wording.
package kubevalidation

import (
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	core "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/apis/core/helper"
	k8sv1 "k8s.io/kubernetes/pkg/apis/core/v1"
	"k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/capabilities"
	"k8s.io/kubernetes/pkg/util/hash"
)

func init() {
	// The kubelet allows privileged containers at start (cmd/kubelet/app/server.go); without
	// it the API's validation refuses them ("disallowed by cluster policy").
	capabilities.Initialize(capabilities.Capabilities{AllowPrivileged: true})
}

// configHashAnnotation is the annotation the kubelet's applyDefaults sets on every static pod
// (pkg/kubelet/types ConfigHashAnnotationKey).
const configHashAnnotation = "kubernetes.io/config.hash"

// SetDefaults applies the API's defaults to a v1 Pod, as the universal decoder applies them
// when the kubelet decodes a manifest (pkg/apis/core/v1 SetObjectDefaults_Pod, with the
// default feature gates of this Kubernetes version).
func SetDefaults(pod *v1.Pod) { k8sv1.SetObjectDefaults_Pod(pod) }

// ValidateStaticPod returns the problems the kubelet's file source finds in a decoded pod: a
// copy is defaulted (SetDefaults) and converted to the API's internal type, given what the kubelet's
// applyDefaults gives a static pod on node nodeName before it is validated (metadata.name
// suffixed with "-<nodeName>", so a name too long once suffixed is refused as the kubelet
// refuses it though slicelet keeps the pod's name; spec.nodeName, so a manifest's own nodeName
// is never judged and scheduling gates are refused; the config-hash annotation, the NoExecute
// toleration, the Pending phase), then checked by ValidatePodCreate with
// the options GetValidationOptionsFromPodSpecAndMeta derives from it, and for projected volume
// sources of no known kind (unknownProjections). pod is not changed.
func ValidateStaticPod(pod *v1.Pod, nodeName string) field.ErrorList {
	// The API's defaults again, on a copy (the generated conversion shares memory with its
	// input): what slicelet's own defaulting leaves out (deprecatedServiceAccount, say) is
	// judged as the kubelet judges it.
	cp := pod.DeepCopy()
	SetDefaults(cp)
	var in core.Pod
	if err := k8sv1.Convert_v1_Pod_To_core_Pod(cp, &in, nil); err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	applyStaticDefaults(&in, nodeName)
	opts := podutil.GetValidationOptionsFromPodSpecAndMeta(&in.Spec, nil, &in.ObjectMeta, nil)
	return append(validation.ValidatePodCreate(&in, opts), unknownProjections(&in)...)
}

// ValidateCreate returns the problems the API server finds when a client creates pod: a copy
// is defaulted (SetDefaults), converted to the API's internal type and checked by
// ValidatePodCreate with the options GetValidationOptionsFromPodSpecAndMeta derives from it —
// the strategy's validation (pkg/registry/core/pod/strategy.go, Validate), before admission
// plugins and with the default feature gates of this Kubernetes version. pod is not changed.
func ValidateCreate(pod *v1.Pod) field.ErrorList {
	cp := pod.DeepCopy()
	SetDefaults(cp)
	var in core.Pod
	if err := k8sv1.Convert_v1_Pod_To_core_Pod(cp, &in, nil); err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	opts := podutil.GetValidationOptionsFromPodSpecAndMeta(&in.Spec, nil, &in.ObjectMeta, nil)
	return validation.ValidatePodCreate(&in, opts)
}

// StaticPodUID is the UID the kubelet's file source gives a static pod read from the file path
// on node nodeName when the manifest names none (pkg/kubelet/config/common.go, applyDefaults):
// the FNV-128a hash of the pod as the kubelet's decoder hands it over — defaulted
// (SetDefaults), converted to the API's internal type, its name and namespace as written —
// printed by pkg/util/hash.DeepHashObject, then "host:<nodeName>" and "file:<path>", as 32
// lower-case hex digits. path is the file's path as the kubelet names it: its staticPodPath
// joined with the file's name. pod is the decoded manifest, before slicelet's own defaulting;
// it is not changed.
func StaticPodUID(pod *v1.Pod, nodeName, path string) (string, error) {
	cp := pod.DeepCopy()
	SetDefaults(cp)
	var in core.Pod
	if err := k8sv1.Convert_v1_Pod_To_core_Pod(cp, &in, nil); err != nil {
		return "", fmt.Errorf("pod %q: conversion for its uid: %w", pod.Name, err)
	}
	// The decoder hands over internal objects without apiVersion and kind.
	in.TypeMeta = metav1.TypeMeta{}
	h := fnv.New128a()
	hash.DeepHashObject(h, &in)
	fmt.Fprintf(h, "host:%s", nodeName)
	fmt.Fprintf(h, "file:%s", path)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// unknownProjections returns the projected volume sources the file source refuses after
// validation because it knows none of their kinds (an empty source "{}"): the error of
// podutil.HasAPIObjectReference (`unknown source for projected volume "proj0"`), at the
// source's path. HasAPIObjectReference is asked about each source alone, so the references
// slicelet resolves itself (configMap and secret sources) do not hide an unknown one.
func unknownProjections(pod *core.Pod) field.ErrorList {
	var errs field.ErrorList
	for i, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for j, src := range v.Projected.Sources {
			one := core.Pod{Spec: core.PodSpec{Volumes: []core.Volume{{Name: v.Name, VolumeSource: core.VolumeSource{
				Projected: &core.ProjectedVolumeSource{Sources: []core.VolumeProjection{src}}}}}}}
			if _, _, err := podutil.HasAPIObjectReference(&one); err != nil {
				p := field.NewPath("spec", "volumes").Index(i).Child("projected", "sources").Index(j)
				errs = append(errs, field.Required(p, err.Error()))
			}
		}
	}
	return errs
}

// applyStaticDefaults is the kubelet's applyDefaults for a file source on node nodeName
// (pkg/kubelet/config/common.go; the name as generatePodName makes it).
func applyStaticDefaults(pod *core.Pod, nodeName string) {
	pod.Name = pod.Name + "-" + strings.ToLower(nodeName)
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = nodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[configHashAnnotation] = string(pod.UID)
	helper.AddOrUpdateTolerationInPod(pod, &core.Toleration{Operator: core.TolerationOpExists, Effect: core.TaintEffectNoExecute})
	pod.Status.Phase = core.PodPending
}
