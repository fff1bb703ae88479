package crirt

import (
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/slicelet/slicelet/internal/testharness/critest"
)

// TestIntegrationPodNetwork: with containerd's CNI bridge (runtime.network = "cni"), a pod that
// is not on the host's network gets an IP of the bridge's subnet from its sandbox's status,
// reported as its podIP(s), and a server in it is reached at that IP from the node (the systemd
// sandbox's network namespace, where the bridge is), telling the IP the Downward API gave it.
func TestIntegrationPodNetwork(t *testing.T) {
	sandboxOnly(t)
	critest.RequireCNI(t)
	it := newIT(t, critest.Options{CNIBridge: true})
	it.podNetwork = true
	rt := it.runtime(t)
	server := container("server", `trap 'exit 0' TERM; while true; do echo "$POD_IP" | nc -l -p 8080; done`)
	server.Env = []v1.EnvVar{{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}
	pod := itPod("net", "it-net-1", server)
	slice := it.slice(t, pod)
	st := syncUntil(t, rt, pod, slice, "running with a pod IP", func(st v1.PodStatus, err error) bool {
		return running(st, err) && st.PodIP != ""
	})
	subnet := netip.MustParsePrefix(critest.CNISubnet)
	ip, err := netip.ParseAddr(st.PodIP)
	if err != nil || !subnet.Contains(ip) {
		t.Fatalf("podIP %q (%v): want an address of %s", st.PodIP, err, subnet)
	}
	t.Logf("pod IP %s", st.PodIP)
	if len(st.PodIPs) != 1 || st.PodIPs[0].IP != st.PodIP {
		t.Errorf("podIPs %v: want [%s]", st.PodIPs, st.PodIP)
	}
	// The server listens once its container runs; retry the connection until it answers, with
	// its Downward API status.podIP.
	var got []byte
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err = dialRead(net.JoinHostPort(st.PodIP, "8080"))
		if err == nil && string(got) == st.PodIP+"\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod at %s:8080: read %q, %v; want its IP and a newline", st.PodIP, got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := rt.KillPod(t.Context(), pod, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := rt.Forget(t.Context(), string(pod.UID)); err != nil {
		t.Fatal(err)
	}
}

// dialRead reads what the server at addr sends until it closes the connection.
func dialRead(addr string) ([]byte, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(c, 64))
}
