// Command slicelet is the node agent: the kubelet's node resource management
// (QoS cgroup tree, node allocatable, pods, garbage collection, eviction) as a
// systemd-native service.
//
//	slicelet [--config F] [--log-level L] [--log-format F] [run]
//	slicelet --version
//	slicelet config check [--config F]
//	slicelet config print [--config F]
package main

import (
	"os"
	"runtime"
)

func main() {
	// The daemon serves no profiles, so the allocation samples Go keeps for a heap profile by
	// default would never be read: they cost memory (the profile's buckets, about 1.5 MiB at
	// 1000 pods) and CPU on every sampled allocation. Set before anything allocates much, as
	// the runtime asks.
	runtime.MemProfileRate = 0
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}
