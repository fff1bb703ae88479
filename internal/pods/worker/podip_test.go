package worker

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// netRT is fakeRT with sandboxes that have a network of their own (SandboxNetwork).
type netRT struct {
	*fakeRT
	ips []string
	err error
}

func (n *netRT) PodSandboxIPs(context.Context, string) ([]string, error) { return n.ips, n.err }

// TestPodIPs: the status's podIP(s) are the node's IPs on the host's network (every pod of a
// host-network worker, or a pod with spec.hostNetwork), else the sandbox's, none when the
// runtime cannot say.
func TestPodIPs(t *testing.T) {
	nodeIPs := []string{"192.0.2.10", "2001:db8::10"}
	cases := []struct {
		name        string
		hostNetwork bool // the worker's Options.HostNetwork
		podHostNet  bool // the pod's spec.hostNetwork
		network     bool // the runtime implements SandboxNetwork
		sandboxIPs  []string
		sandboxErr  error
		want        []string
	}{
		{name: "host network worker", hostNetwork: true, network: true, sandboxIPs: []string{"10.88.0.5"}, want: nodeIPs},
		{name: "runtime without pod networks on the host network", hostNetwork: true, want: nodeIPs},
		{name: "pod network: the sandbox's IPs", network: true, sandboxIPs: []string{"10.88.0.5", "fd00::5"}, want: []string{"10.88.0.5", "fd00::5"}},
		{name: "pod with spec.hostNetwork keeps the node's", podHostNet: true, network: true, sandboxIPs: []string{"10.88.0.5"}, want: nodeIPs},
		{name: "sandbox status failing: none", network: true, sandboxErr: errors.New("rpc error"), want: nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeRT()
			w, _ := newTestWorkerWith(t, f, "", func(o *Options) {
				o.HostNetwork, o.NodeIPs = c.hostNetwork, nodeIPs
				if c.network {
					o.Runtime = &netRT{fakeRT: f, ips: c.sandboxIPs, err: c.sandboxErr}
				}
			})
			pod := testPod("ip-1", v1.RestartPolicyAlways, "app")
			pod.Spec.HostNetwork = c.podHostNet
			pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "POD_IPS", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIPs"}}}}
			st := mustSync(t, w, pod)
			var got []string
			for _, ip := range st.PodIPs {
				got = append(got, ip.IP)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("podIPs %v, want %v", got, c.want)
			}
			// The Downward API gives the container the same IPs.
			f.mu.Lock()
			for _, cfg := range f.configs {
				if env := cfg.GetEnvs(); len(env) != 1 || string(env[0].Value) != strings.Join(c.want, ",") {
					t.Errorf("container env %v, want POD_IPS=%s", env, strings.Join(c.want, ","))
				}
			}
			f.mu.Unlock()
			wantIP := ""
			if len(c.want) > 0 {
				wantIP = c.want[0]
			}
			if st.PodIP != wantIP {
				t.Errorf("podIP %q, want %q", st.PodIP, wantIP)
			}
		})
	}
}
