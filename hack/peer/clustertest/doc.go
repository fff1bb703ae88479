// Package clustertest holds cluster mode's integration test: a slicelet node (CRI runtime on a
// private containerd, [cluster] enabled with a system:node client certificate) registered with
// the local control plane (hack/peer/controlplane: etcd, kube-apiserver with the Node
// authorizer and NodeRestriction, kube-scheduler, kube-controller-manager), all inside the
// throwaway sandbox hack/peer/peerrun boots.
package clustertest
