// Command slicectl is slicelet's client, in the habits of kubectl and systemctl.
//
//	slicectl explain pod -f POD.yaml [--config F] [--cgroup-mode v1|v2] [--capacity ...] [-o json]
//	slicectl explain node [--config F] [--capacity cpu=4,memory=16Gi,pids=4194304] [-f POD.yaml ...] [-o json]
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
