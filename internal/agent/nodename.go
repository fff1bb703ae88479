package agent

import "strings"

// nodeName is the Node's name: [cluster] node_name, else the host name lower-cased (the
// kubelet's default from os.Hostname).
func (d *daemon) nodeName() string {
	if n := d.cfg.Cluster.NodeName; n != "" {
		return n
	}
	return strings.ToLower(d.hostname)
}
