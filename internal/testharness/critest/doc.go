// Package critest runs a private containerd for tests: one per
// test run, everything (root, state, sockets, CNI dirs, logs) in one short run directory,
// config version 2, the CRI plugin with a locally imported sandbox image (never pulled),
// restrict_oom_score_adj, stats_collect_period = 1 and the systemd cgroup driver. It also writes
// OCI image layouts (WriteImage) and imports them with ctr, so no registry is needed. Its CNI
// configuration is empty (host-network sandboxes only) unless Options.CNIBridge asks for a bridge
// with host-local IPAM and the portmap plugin (host ports) from Debian's
// containernetworking-plugins, in the sandbox's network namespace.
//
// containerd may only be started inside the throwaway systemd sandbox (internal/testharness/systemdtest):
// outside it, Start skips the test, or fails it with CI=true, as a missing containerd or runc
// does.
package critest
