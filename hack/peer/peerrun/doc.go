// Package peerrun runs the real kubelet and slicelet, one at a time, on the same node: the same
// containerd, the same manifests, the same node settings, and reads back the cgroups each one
// made. It is the runner under make peer-diff (hack/peer/peerdiff) and the peer benchmarks.
//
// Two halves:
//
// On the host, [BootSandbox] boots a throwaway systemd (internal/testharness/sandbox) on this
// machine's cgroup v1 hybrid layout with what the kubelet needs there: a writable overlay root
// (it writes /var/lib/kubelet, /var/log/pods and /etc), /dev/kmsg as a symlink to /dev/console
// (its OOM watcher opens it), the kernel settings it checks (vm/overcommit_memory=1,
// kernel/panic=10, kernel/panic_on_oops=1) as read-only files bound over /proc/sys (the
// machine's stay as they are) and read-write binds of the work directories. [Sandbox.Command]
// runs a program inside with [InsideEnv] set. For cgroup v2, [RunVM] runs a program in a
// throwaway VM (internal/testharness/vmtest) with the files it needs copied in; the VM is its own
// machine, so the kubelet finds /dev/kmsg and sets the kernel settings itself there.
//
// Inside (the sandbox or the VM), [StartNode] starts a private containerd
// (internal/testharness/critest: a child process in its own run directory, so the machine's
// masked containerd.service is never involved) with the pause image and the test image
// [TestImage] (busybox) imported and a no-op CNI network plus loopback, so that containerd
// reports NetworkReady and pods without hostNetwork run. [Node.StartAgent] then starts either
// agent as a transient systemd service on a manifest directory:
//
//   - [Kubelet]: standalone (no API server), staticPodPath, cgroupDriver systemd,
//     failCgroupV1 false, failSwapOn false, --address=127.0.0.1, --node-ip=127.0.0.1, its
//     healthz on 127.0.0.1, no read-only port, a writable cert and root directory, the
//     containerRuntimeEndpoint of that containerd;
//   - [Slicelet]: runtime.type "cri" on the same containerd, runtime.network "cni" (pods
//     without hostNetwork on containerd's CNI network, as the kubelet's), its API on a unix
//     socket, no metrics listener.
//
// Both get the node settings of one [NodeConfig] (kube and system reserved, pod pids limit,
// hard eviction thresholds, max pods), written once as a KubeletConfiguration and once as
// slicelet's TOML, and the feature gates at their v1.37 defaults on both sides. Every server
// listens on loopback or a unix socket. [Agent.Stop] stops the agent and removes everything it
// left (pod sandboxes and containers through CRI, the kubepods slices, its state), so the other
// agent starts on a clean node. [Node.Read] reads, per pod, the cgroup values at the kubepods,
// QoS, pod and container levels and the oom_score_adj of each container's processes.
package peerrun
