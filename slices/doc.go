// Package slices is slicelet's kubepods hierarchy: the pod model (validation, content UID), QoS
// classification, the kubelet's resource math (shares, quota, weights, hugepages, pod and QoS
// cgroup values), cgroup and slice names, node capacity and allocatable, OOM score adjustment and
// the systemd form of all of it.
//
// Everything in the files of this package that do not talk to systemd is a pure function over
// plain data, mirroring the kubelet's pkg/kubelet/cm and pkg/kubelet/qos. The actuation (creating slices through units/) lives
// in separate files and consumes the data computed here.
package slices
