package slices

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// QOSClass returns the pod's QoS class: status.qosClass when it is set (the class is immutable
// once assigned, a resize cannot change it), otherwise ComputePodQOS. It is the kubelet's
// GetPodQOS.
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return ComputePodQOS(pod)
}

// ComputePodQOS classifies a pod from its resources alone (pkg/apis/core/v1/helper/qos, as
// component-helpers' qos package does). Only cpu and memory count;
// hugepages, ephemeral-storage and extended resources are ignored. No API defaulting is applied:
// a container with limits but no requests is not Guaranteed.
//
// With pod-level resources (spec.resources naming cpu, memory or hugepages; PodLevelResources is
// GA and PodLevelResourcesFixKubeletQOSClass on, so an empty spec.resources does not count) only
// the pod-level values are classified and containers are ignored. Otherwise the requests and limits of regular
// and init containers (sidecars included, ephemeral containers excluded) are summed:
//   - BestEffort: no positive cpu or memory request or limit anywhere;
//   - Guaranteed: every container has a positive cpu and memory limit and the summed requests
//     equal the summed limits for both;
//   - Burstable: everything else.
func ComputePodQOS(pod *v1.Pod) v1.PodQOSClass {
	requests := v1.ResourceList{}
	limits := v1.ResourceList{}
	guaranteed := true
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		addQOSResources(requests, pod.Spec.Resources.Requests)
		if len(pod.Spec.Resources.Limits) > 0 {
			if !addQOSResources(limits, pod.Spec.Resources.Limits) {
				guaranteed = false
			}
		}
	} else {
		containers := make([]v1.Container, 0, len(pod.Spec.Containers)+len(pod.Spec.InitContainers))
		containers = append(containers, pod.Spec.Containers...)
		containers = append(containers, pod.Spec.InitContainers...)
		for i := range containers {
			addQOSResources(requests, containers[i].Resources.Requests)
			if !addQOSResources(limits, containers[i].Resources.Limits) {
				guaranteed = false
			}
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

// addQOSResources adds the strictly positive cpu and memory values of list to sum and reports
// whether both cpu and memory were present with a positive value.
func addQOSResources(sum, list v1.ResourceList) (cpuAndMemory bool) {
	var cpu, mem bool
	for name, q := range list {
		if name != v1.ResourceCPU && name != v1.ResourceMemory {
			continue
		}
		if q.Sign() <= 0 {
			continue
		}
		if name == v1.ResourceCPU {
			cpu = true
		} else {
			mem = true
		}
		total, ok := sum[name]
		if !ok {
			total = resource.Quantity{}
		}
		total.Add(q)
		sum[name] = total
	}
	return cpu && mem
}
