// Package slices is slicelet's model of the kubepods hierarchy: the pod model (validation,
// content UID), QoS classification, the kubelet's resource math (shares, quota, weights,
// hugepages, pod and QoS cgroup values), cgroup and slice names, node capacity and
// allocatable, OOM score adjustment and the systemd form of all of it.
//
// It is pure functions over plain data, mirroring the kubelet's pkg/kubelet/cm and
// pkg/kubelet/qos (ReadCapacity reads the node's numbers from roots it is given). The
// actuation, creating slices through units, is package slices/hierarchy, which consumes the
// data computed here.
//
// Import convention: this package is imported as slices, without an alias; a file that also
// needs the standard library's slices imports that one as stdslices.
package slices
