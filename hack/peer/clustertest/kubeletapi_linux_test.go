package clustertest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/slicelet/slicelet/hack/peer/controlplane"
	"github.com/slicelet/slicelet/hack/peer/peerrun"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// otherNode is a second node whose credentials must not reach slicelet's kubelet API.
const otherNode = "other-node"

// TestKubeletAPI runs a slicelet node with its kubelet API on 127.0.0.1:10250 and drives it
// as its clients do: `kubectl logs` through the API server prints the container's output, the
// stats summary read as metrics-server reads it (a service account's token) lists the pod, and
// a client with another node's certificate (or none) is refused.
func TestKubeletAPI(t *testing.T) {
	if !systemdtest.Inside() {
		runInSandbox(t, "^TestKubeletAPI$")
		return
	}
	work, bin, slicelet := os.Getenv(workEnv), os.Getenv(binEnv), os.Getenv(sliceletEnv)
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	// The API server's kubelet client certificate is of the control plane's CA: the kubelet
	// API verifies it against that CA.
	c := startClusterNode(t, ctx, work, bin, slicelet, controlplane.Config{Nodes: []string{nodeName, otherNode}},
		func(cp *controlplane.ControlPlane) string {
			return clusterHead(cp) + fmt.Sprintf("node_ip = \"127.0.0.1\"\nclient_ca_file = %q\n", cp.CAFile())
		})
	cp, admin := c.cp, c.admin
	kubectl := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", cp.AdminKubeconfig()}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	poll(t, ctx, "node Ready with its kubelet endpoint", 2*time.Minute, func(ctx context.Context) (bool, error) {
		n, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
				return n.Status.DaemonEndpoints.KubeletEndpoint.Port == 10250, nil
			}
		}
		return false, nil
	})

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "talker", Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName:                      nodeName,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []v1.Container{{Name: "main", Image: peerrun.TestImage, ImagePullPolicy: v1.PullNever,
				Command: []string{"/bin/sh", "-c", "echo hello from slicelet; echo second line; trap 'exit 0' TERM; while true; do sleep 0.2; done"}}},
		},
	}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "pod Running", 2*time.Minute, func(ctx context.Context) (bool, error) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "talker", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase == v1.PodFailed {
			return false, fmt.Errorf("pod failed: %s: %s", p.Status.Reason, p.Status.Message)
		}
		return p.Status.Phase == v1.PodRunning, nil
	})

	// kubectl logs: the API server proxies pods/log to the node's kubelet API.
	var out string
	var err error
	poll(t, ctx, "kubectl logs", time.Minute, func(context.Context) (bool, error) {
		out, err = kubectl("logs", "talker")
		return err == nil && strings.Contains(out, "hello from slicelet") && strings.Contains(out, "second line"), nil
	})
	if out, err = kubectl("logs", "talker", "--tail=1"); err != nil || strings.TrimSpace(out) != "second line" {
		t.Errorf("kubectl logs --tail=1: %q, %v; want the last line", out, err)
	}
	if out, err = kubectl("logs", "talker", "--limit-bytes=5"); err != nil || out != "hello" {
		t.Errorf("kubectl logs --limit-bytes=5: %q, %v; want %q", out, err, "hello")
	}
	if out, err = kubectl("logs", "talker", "-c", "nope"); err == nil {
		t.Errorf("kubectl logs of an unknown container: %q, want an error", out)
	}

	// The stats summary as metrics-server reads it: straight from the kubelet API with a
	// service account's token (TokenReview) allowed nodes/stats by RBAC (SubjectAccessReview).
	// The API server's node proxy (kubectl get --raw /api/v1/nodes/NODE/proxy/...) refuses a
	// node whose address is not global unicast, so it cannot reach a node on 127.0.0.1
	// (pkg/registry/core/node/strategy.go, isProxyableHostname).
	token := statsReaderToken(t, ctx, admin)
	direct := func(path, bearer string, certs ...tls.Certificate) (int, string) {
		t.Helper()
		c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: certs}}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:10250"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	var sum statsv1alpha1.Summary
	var code int
	defer func() {
		if t.Failed() {
			t.Logf("last stats summary: %d\n%s", code, out)
		}
	}()
	poll(t, ctx, "stats summary lists the pod", time.Minute, func(context.Context) (bool, error) {
		code, out = direct("/stats/summary", token)
		if code != http.StatusOK {
			return false, nil
		}
		if err := json.Unmarshal([]byte(out), &sum); err != nil {
			return false, fmt.Errorf("summary %q: %w", out, err)
		}
		for _, p := range sum.Pods {
			if p.PodRef.Name == "talker" && p.CPU != nil && p.CPU.UsageCoreNanoSeconds != nil && p.Memory != nil && p.Memory.WorkingSetBytes != nil && p.Memory.UsageBytes != nil && *p.Memory.UsageBytes > 0 {
				return true, nil
			}
		}
		return false, nil
	})
	if sum.Node.NodeName != nodeName || sum.Node.CPU == nil || sum.Node.Memory == nil {
		t.Errorf("summary node %+v", sum.Node)
	}
	// metrics-server (v0.6 on) scrapes /metrics/resource (nodes/metrics): the container's
	// CPU and working set, parsed as Prometheus text.
	code, out = direct("/metrics/resource", token)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(out))
	if code != http.StatusOK || err != nil {
		t.Errorf("/metrics/resource: %d %v\n%s", code, err, out)
	} else {
		found := false
		for _, m := range families["container_cpu_usage_seconds_total"].GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			found = found || labels["pod"] == "talker" && labels["container"] == "main" && m.GetTimestampMs() > 0
		}
		if !found || families["node_memory_working_set_bytes"] == nil {
			t.Errorf("/metrics/resource lacks the container's CPU or the node's memory:\n%s", out)
		}
	}
	// The same token may not read logs (nodes/proxy) nor pods (nodes/pods, nodes/proxy).
	for _, path := range []string{"/containerLogs/default/talker/main", "/pods"} {
		if code, body := direct(path, token); code != http.StatusForbidden {
			t.Errorf("%s with the stats reader's token: %d %q, want 403", path, code, body)
		}
	}
	// The API server's kubelet client certificate (system:masters) may read everything.
	crt, key := cp.CertFiles("apiserver-kubelet-client")
	apiserver, err := tls.LoadX509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := direct("/pods", "", apiserver); code != http.StatusOK || !strings.Contains(body, `"talker"`) {
		t.Errorf("/pods with the API server's certificate: %d\n%s", code, body)
	}
	if code, body := direct("/healthz", "", apiserver); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz with the API server's certificate: %d %q", code, body)
	}
	if out, err = kubectl("get", "--raw", "/api/v1/nodes/"+nodeName+"/proxy/healthz"); err == nil || !strings.Contains(out, "address not allowed") {
		t.Errorf("node proxy to a loopback node: %q, %v; want the API server's refusal", out, err)
	}

	// Straight to the kubelet API: another node's certificate is authenticated but not
	// authorized (the Node authorizer gives a node no access to another's kubelet API); no
	// certificate is not authenticated.
	crt, key = cp.CertFiles("node-" + otherNode)
	other, err := tls.LoadX509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		certs []tls.Certificate
		want  int
	}{
		{name: "another node's certificate", certs: []tls.Certificate{other}, want: http.StatusForbidden},
		{name: "no certificate", want: http.StatusUnauthorized},
	} {
		code, body := direct("/containerLogs/default/talker/main", "", tc.certs...)
		if code != tc.want || strings.Contains(body, "hello from slicelet") {
			t.Errorf("%s: %d %q, want %d", tc.name, code, body, tc.want)
		}
		t.Logf("%s: %d %s", tc.name, code, strings.TrimSpace(body))
	}
}

// statsReaderToken is a token of a service account that RBAC allows get on nodes/stats and
// nodes/metrics only (what metrics-server's role allows on nodes).
func statsReaderToken(t *testing.T, ctx context.Context, admin kubernetes.Interface) string {
	t.Helper()
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "stats-reader", Namespace: "default"}}
	if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "stats-reader"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"nodes/stats", "nodes/metrics"}}}}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "stats-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "stats-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "stats-reader", Namespace: "default"}}}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "stats-reader",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}
