// Command slicectl is slicelet's client, in the habits of kubectl and systemctl: get, describe,
// apply, delete and logs for pods, node status, and explain (online through slicelet's local API,
// or offline from the configuration and this machine). `slicectl help` prints the usage, the
// online/offline rule of explain and the exit codes.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
