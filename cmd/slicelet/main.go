// Command slicelet is the node agent: the kubelet's node resource management
// (QoS cgroup tree, node allocatable, pods, garbage collection, eviction) as a
// systemd-native service.
//
//	slicelet [--config F] [--log-level L] [--log-format F] [run]
//	slicelet --version
//	slicelet config check [--config F]
//	slicelet config print [--config F]
package main

import "os"

func main() {
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}
