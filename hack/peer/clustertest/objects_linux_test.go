package clustertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slicelet/slicelet/hack/peer/controlplane"
	"github.com/slicelet/slicelet/hack/peer/peerrun"
	"github.com/slicelet/slicelet/internal/testharness/systemdtest"
)

// inSandbox runs the test named name inside a fresh sandbox (with the control plane's
// binaries and slicelet's bound in) and reports its outcome; inside the sandbox it returns
// the work directory and the binaries, and ok true: the caller goes on there.
func inSandbox(t *testing.T, name string) (work, bin, slicelet string, ok bool) {
	if systemdtest.Inside() {
		return os.Getenv(workEnv), os.Getenv(binEnv), os.Getenv(sliceletEnv), true
	}
	runInSandbox(t, "^"+name+"$")
	return "", "", "", false
}

// TestClusterPodObjects: an API pod with a ConfigMap volume, a Secret env var and the default
// service-account token volume (kube-api-access-*, added by the API server's admission) runs
// on a slicelet node working with system:node credentials, and its container prints them; the
// token authenticates as the pod's service account, bound to the pod. A pod whose Secret is
// missing waits with CreateContainerConfigError; a pod of another namespace naming the same
// ConfigMap waits with FailedMount (objects are its namespace's). The Node authorizer is what bounds slicelet:
// its credentials get the ConfigMap a pod on the node references and not one no pod does.
func TestClusterPodObjects(t *testing.T) {
	work, bin, slicelet, ok := inSandbox(t, "TestClusterPodObjects")
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	c := startClusterNode(t, ctx, work, bin, slicelet, controlplane.Config{Nodes: []string{nodeName}, Scheduler: true, ControllerManager: true},
		clusterHead)
	cp, agent, admin := c.cp, c.agent, c.admin
	// The controller manager makes the default service account and kube-root-ca.crt.
	poll(t, ctx, "default service account and kube-root-ca.crt", 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err1 := admin.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		_, err2 := admin.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err1 == nil && err2 == nil, nil
	})
	for _, cm := range []*v1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "app-config", Namespace: "default"}, Data: map[string]string{"greeting": "hello from a ConfigMap"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "unreferenced", Namespace: "default"}, Data: map[string]string{"k": "v"}},
	} {
		if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.CoreV1().Secrets("default").Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-secret", Namespace: "default"},
		StringData: map[string]string{"password": "s3cret"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	script := `cat /etc/config/greeting; echo; echo "password=$PASSWORD"; sa=/var/run/secrets/kubernetes.io/serviceaccount
echo "namespace=$(cat $sa/namespace)"; test -s $sa/ca.crt && echo ca=ok; echo "token=$(cat $sa/token)"; echo "service_host=$KUBERNETES_SERVICE_HOST"
trap 'exit 0' TERM; while true; do sleep 0.2; done`
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "objects", Namespace: "default"},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: new(int64),
			Volumes: []v1.Volume{{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "app-config"}}}}},
			Containers: []v1.Container{{Name: "main", Image: peerrun.TestImage, ImagePullPolicy: v1.PullNever,
				Command:      []string{"/bin/sh", "-c", script},
				VolumeMounts: []v1.VolumeMount{{Name: "config", MountPath: "/etc/config"}},
				Env: []v1.EnvVar{{Name: "PASSWORD", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
					LocalObjectReference: v1.LocalObjectReference{Name: "app-secret"}, Key: "password"}}}}}},
		},
	}
	missing := pod.DeepCopy()
	missing.Name = "missing-secret"
	missing.Spec.Containers[0].Env[0].ValueFrom.SecretKeyRef.Name = "absent"
	for _, p := range []*v1.Pod{pod, missing} {
		if _, err := admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var running *v1.Pod
	var err error
	poll(t, ctx, "pod with objects Running", 2*time.Minute, func(ctx context.Context) (bool, error) {
		running, err = admin.CoreV1().Pods("default").Get(ctx, "objects", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if running.Status.Phase == v1.PodFailed {
			return false, fmt.Errorf("pod failed: %s: %s", running.Status.Reason, running.Status.Message)
		}
		return running.Status.Phase == v1.PodRunning, nil
	})
	hasTokenVolume := false
	for _, v := range running.Spec.Volumes {
		hasTokenVolume = hasTokenVolume || strings.HasPrefix(v.Name, "kube-api-access-") && v.Projected != nil
	}
	if !hasTokenVolume {
		t.Errorf("volumes %+v: the API server's admission added no kube-api-access-* volume", running.Spec.Volumes)
	}
	// The container's output, from its CRI log file.
	logFile := filepath.Join("/var/log/pods", fmt.Sprintf("default_objects_%s", running.UID), "main", "0.log")
	out := map[string]string{}
	poll(t, ctx, "the container's output", time.Minute, func(context.Context) (bool, error) {
		data, err := os.ReadFile(logFile)
		if err != nil {
			return false, nil
		}
		for _, line := range strings.Split(string(data), "\n") {
			// CRI log lines: <time> <stream> <tag> <message>.
			if f := strings.SplitN(line, " ", 4); len(f) == 4 {
				k, v, _ := strings.Cut(f[3], "=")
				out[k] = v
			}
		}
		_, done := out["service_host"]
		return done, nil
	})
	svc, err := admin.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ key, want string }{
		{"hello from a ConfigMap", ""},
		{"password", "s3cret"},
		{"namespace", "default"},
		{"ca", "ok"},
		{"service_host", svc.Spec.ClusterIP},
	}
	for _, tc := range tests {
		if got, ok := out[tc.key]; !ok || got != tc.want {
			t.Errorf("the container printed %s=%q (present %v), want %q; all: %v", tc.key, got, ok, tc.want, out)
		}
	}
	// The projected token is the pod's service account's, bound to the pod.
	review, err := admin.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: out["token"]}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := review.Status.User; !review.Status.Authenticated || u.Username != "system:serviceaccount:default:default" ||
		strings.Join(u.Extra["authentication.kubernetes.io/pod-name"], "") != "objects" {
		t.Errorf("token review %+v", review.Status)
	}
	t.Logf("token authenticated as %s (pod %v)", review.Status.User.Username, review.Status.User.Extra["authentication.kubernetes.io/pod-name"])

	// A missing Secret: the container waits with the kubelet's reason, the pod is not failed.
	poll(t, ctx, "pod with a missing Secret waiting", 2*time.Minute, func(ctx context.Context) (bool, error) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "missing-secret", metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) != 1 {
			return false, nil
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		if w != nil && w.Reason == "CreateContainerConfigError" {
			if !strings.Contains(w.Message, `"absent" not found`) {
				return false, fmt.Errorf("waiting message %q does not name the Secret", w.Message)
			}
			return true, nil
		}
		return false, nil
	})

	// A pod of another namespace naming the same ConfigMap: slicelet asks for it in the pod's
	// namespace (where it does not exist), never for default's; the pod waits with the
	// kubelet's FailedMount event.
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "other's default service account", time.Minute, func(ctx context.Context) (bool, error) {
		_, err := admin.CoreV1().ServiceAccounts("other").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	cross := pod.DeepCopy()
	cross.Name, cross.Namespace = "cross", "other"
	cross.Spec.Containers[0].Env = nil
	if _, err := admin.CoreV1().Pods("other").Create(ctx, cross, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "FailedMount of the pod in another namespace", 2*time.Minute, func(ctx context.Context) (bool, error) {
		list, err := admin.CoreV1().Events("other").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=cross"})
		if err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Reason == "FailedMount" && strings.Contains(e.Message, `configmaps "app-config" not found`) {
				return true, nil
			}
		}
		return false, nil
	})
	if p, err := admin.CoreV1().Pods("other").Get(ctx, "cross", metav1.GetOptions{}); err != nil || p.Status.Phase != v1.PodPending {
		t.Errorf("the pod without its ConfigMap: %v, %v; want Pending", p.Status, err)
	}

	// The Node authorizer's bound: the node's credentials read what its pods reference, not
	// the rest (slicelet asks only for objects its pods name, in their namespaces).
	nodeClient, err := cp.Client(cp.NodeKubeconfig(nodeName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nodeClient.CoreV1().ConfigMaps("default").Get(ctx, "app-config", metav1.GetOptions{}); err != nil {
		t.Errorf("the node reads the ConfigMap of its pod: %v", err)
	}
	if _, err := nodeClient.CoreV1().ConfigMaps("default").Get(ctx, "unreferenced", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the node reads a ConfigMap no pod of it references: %v, want Forbidden", err)
	}
	if j := agent.Journal(ctx, 400); strings.Contains(j, "forbidden") {
		t.Errorf("slicelet was refused something:\n%s", j)
	}
}
