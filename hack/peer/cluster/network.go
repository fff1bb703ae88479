package cluster

import (
	"fmt"
	"net/netip"
)

// The cluster's networks. Every address lives in network namespaces the harness creates: the
// bridge and the control plane's address in the control plane's sandbox, each node's address
// in its own sandbox. Nothing is routed to or from the machine's own network.
const (
	// BridgeName is the bridge that joins the nodes, in the control plane's namespace.
	BridgeName = "peerbr0"
	// NodeNetwork is the nodes' network on the bridge: the control plane is its first address
	// (ControlPlaneIP), node i (from 0) has address i+2 on its eth0.
	NodeNetwork = "10.250.0.0/24"
	// ControlPlaneIP is the API server's address (the bridge's in the control plane's
	// namespace), and each node's default gateway: a packet for anywhere else ends there.
	ControlPlaneIP = "10.250.0.1"
	// ClusterCIDR is the pod network; kube-controller-manager gives each node a /24 of it.
	ClusterCIDR = "10.244.0.0/16"
	// ServiceCIDR is the Service network.
	ServiceCIDR = "10.96.0.0/16"
	// DNSServiceIP is the kube-dns Service's cluster IP, the nodes' cluster DNS server.
	DNSServiceIP = "10.96.0.10"
	// Domain is the cluster domain.
	Domain = "cluster.local"
	// MaxNodes bounds the number of nodes (the addresses of NodeNetwork, and the time a
	// demo may take on a small machine).
	MaxNodes = 16
)

// NodeIP is the address of node i (from 0) on the bridge.
func NodeIP(i int) (string, error) {
	if i < 0 || i >= MaxNodes {
		return "", fmt.Errorf("node %d: want 0 to %d", i, MaxNodes-1)
	}
	p := netip.MustParsePrefix(NodeNetwork)
	a := p.Addr().As4()
	a[3] += byte(i + 2)
	return netip.AddrFrom4(a).String(), nil
}

// netStep is one command of the network set-up, run in the network namespace of the
// sandbox it names ("" is the control plane's) with the machine's own mount namespace (so
// /proc/sys/net is that namespace's, writable: the sandbox's own /proc/sys is read-only).
type netStep struct {
	// In is the node the command runs for ("" for the control plane).
	In   string
	Argv []string
}

// bridgeSteps sets up the bridge and the control plane's address in its namespace.
func bridgeSteps() []netStep {
	prefix := netip.MustParsePrefix(NodeNetwork)
	return []netStep{
		{"", []string{"ip", "link", "set", "lo", "up"}},
		{"", []string{"ip", "link", "add", BridgeName, "type", "bridge"}},
		{"", []string{"ip", "address", "add", fmt.Sprintf("%s/%d", ControlPlaneIP, prefix.Bits()), "dev", BridgeName}},
		{"", []string{"ip", "link", "set", BridgeName, "up"}},
	}
}

// nodeSteps connects node name (index i, its sandbox's init pid) to the bridge: a veth pair
// made in the control plane's namespace whose other end is the node's eth0, the node's address
// and default route, and the node's forwarding on (pods on other nodes are routed through it).
// bridge-nf-call-iptables makes bridged pod traffic pass the node's iptables, where kube-proxy's
// Service rules are, as kubeadm's preflight requires of a node.
func nodeSteps(name string, i, pid int) ([]netStep, error) {
	ip, err := NodeIP(i)
	if err != nil {
		return nil, err
	}
	prefix := netip.MustParsePrefix(NodeNetwork)
	host := fmt.Sprintf("veth%d", i)
	return []netStep{
		{"", []string{"ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", fmt.Sprint(pid)}},
		{"", []string{"ip", "link", "set", host, "master", BridgeName, "up"}},
		{name, []string{"ip", "link", "set", "lo", "up"}},
		{name, []string{"ip", "address", "add", fmt.Sprintf("%s/%d", ip, prefix.Bits()), "dev", "eth0"}},
		{name, []string{"ip", "link", "set", "eth0", "up"}},
		{name, []string{"ip", "route", "add", "default", "via", ControlPlaneIP}},
		{name, []string{"sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"}},
		{name, []string{"sh", "-c", "f=/proc/sys/net/bridge/bridge-nf-call-iptables; [ ! -e $f ] || echo 1 > $f"}},
	}, nil
}

// podRouteStep routes a node's pod CIDR to its address, in the control plane's namespace.
func podRouteStep(podCIDR, nodeIP string) netStep {
	return netStep{"", []string{"ip", "route", "replace", podCIDR, "via", nodeIP}}
}
