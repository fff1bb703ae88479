package runtimetest

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slicelet/slicelet/internal/pods"
)

// needObjects skips a case when the harness gives no Objects.
func (s *suite) needObjects(t *testing.T) {
	t.Helper()
	if s.h.Objects == nil {
		t.Skip("the harness gives the workers no Objects")
	}
}

// putConfigMap adds or replaces a ConfigMap (namespace rtt) the workers see; putSecret a
// Secret. Parallel cases add theirs side by side.
func (s *suite) putConfigMap(name string, data map[string]string) {
	s.objMu.Lock()
	defer s.objMu.Unlock()
	s.configMaps[name] = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "rtt"}, Data: data}
	s.publish()
}

func (s *suite) putSecret(name string, data map[string][]byte) {
	s.objMu.Lock()
	defer s.objMu.Unlock()
	s.secrets[name] = &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "rtt"}, Data: data}
	s.publish()
}

// publish passes the suite's objects on. Call with objMu held.
func (s *suite) publish() {
	var cms []*v1.ConfigMap
	for _, cm := range s.configMaps {
		cms = append(cms, cm)
	}
	var secs []*v1.Secret
	for _, sec := range s.secrets {
		secs = append(secs, sec)
	}
	s.h.Objects.Set(pods.SourceAPI, cms, secs)
}

// execOut runs a shell command in a running container and returns its trimmed stdout and exit
// code.
func (s *suite) execOut(t *testing.T, pod *v1.Pod, container, cmd string) (string, int32) {
	t.Helper()
	res, err := s.rt.ExecSync(t.Context(), pod, container, []string{"/bin/sh", "-c", cmd}, 10*time.Second)
	if err != nil {
		t.Fatalf("exec %q in %s: %v", cmd, container, err)
	}
	return strings.TrimSpace(string(res.Stdout)), res.ExitCode
}

// untilExec syncs the pod (as the controller's resync does) until cmd prints want.
func (s *suite) untilExec(t *testing.T, pod *v1.Pod, container, cmd, want string) {
	t.Helper()
	deadline := time.Now().Add(s.h.Timeout)
	for {
		s.sync(t, s.rt, pod)
		got, _ := s.execOut(t, pod, container, cmd)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q printed %q, want %q within %s", cmd, got, want, s.h.Timeout)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// configMapVolume: a ConfigMap volume shows the ConfigMap's keys, read-only; a change of the
// ConfigMap reaches the running container's files (the kubelet's in-place update).
func (s *suite) configMapVolume(t *testing.T) {
	s.needObjects(t)
	c := s.h.Container("app", loop("up", true))
	c.VolumeMounts = []v1.VolumeMount{{Name: "config", MountPath: "/srv"}}
	pod := newPod("cmvol", v1.RestartPolicyAlways, c)
	cm := "cfg-" + string(pod.UID)
	s.putConfigMap(cm, map[string]string{"greeting": "hello"})
	pod.Spec.Volumes = []v1.Volume{{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: cm}}}}}
	s.cleanup(t, pod)
	s.until(t, s.rt, pod, "running", allRunning)
	if got, _ := s.execOut(t, pod, "app", "cat /srv/greeting"); got != "hello" {
		t.Errorf("/srv/greeting = %q, want hello", got)
	}
	if _, code := s.execOut(t, pod, "app", "touch /srv/new 2>/dev/null"); code == 0 {
		t.Error("the ConfigMap volume is writable")
	}
	s.putConfigMap(cm, map[string]string{"greeting": "bye"})
	s.untilExec(t, pod, "app", "cat /srv/greeting", "bye")
}

// missingConfigMap: a pod whose ConfigMap volume's ConfigMap is missing does not start
// (Pending, ContainerCreating); once the ConfigMap exists it runs.
func (s *suite) missingConfigMap(t *testing.T) {
	s.needObjects(t)
	c := s.h.Container("app", loop("up", true))
	c.VolumeMounts = []v1.VolumeMount{{Name: "config", MountPath: "/srv"}}
	pod := newPod("cmmissing", v1.RestartPolicyAlways, c)
	cm := "absent-" + string(pod.UID)
	pod.Spec.Volumes = []v1.Volume{{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: cm}}}}}
	s.cleanup(t, pod)
	for range 3 {
		st := s.sync(t, s.rt, pod)
		if w := status(st, "app").State.Waiting; st.Phase != v1.PodPending || w == nil || w.Reason != "ContainerCreating" {
			t.Fatalf("without its ConfigMap: phase %s, %s; want Pending, ContainerCreating", st.Phase, Describe(st))
		}
	}
	s.putConfigMap(cm, map[string]string{"k": "v"})
	s.until(t, s.rt, pod, "running once the ConfigMap exists", allRunning)
}

// envFromObjects: env from a ConfigMap (envFrom with a prefix), a Secret key and the Downward
// API, and a downwardAPI volume.
func (s *suite) envFromObjects(t *testing.T) {
	s.needObjects(t)
	c := s.h.Container("app", loop("up", true))
	pod := newPod("envobj", v1.RestartPolicyAlways, c)
	pod.Labels = map[string]string{"tier": "web"}
	cm, sec := "env-"+string(pod.UID), "sec-"+string(pod.UID)
	s.putConfigMap(cm, map[string]string{"mode": "fast"})
	s.putSecret(sec, map[string][]byte{"password": []byte("hunter2")})
	ctr := &pod.Spec.Containers[0]
	ctr.EnvFrom = []v1.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: cm}}}}
	ctr.Env = []v1.EnvVar{
		{Name: "PASSWORD", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: sec}, Key: "password"}}},
		{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "TIER", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['tier']"}}},
	}
	ctr.VolumeMounts = []v1.VolumeMount{{Name: "info", MountPath: "/srv"}}
	pod.Spec.Volumes = []v1.Volume{{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
		{Path: "uid", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.uid"}},
	}}}}}
	s.cleanup(t, pod)
	s.until(t, s.rt, pod, "running", allRunning)
	if got, _ := s.execOut(t, pod, "app", `echo "$CFG_mode $PASSWORD $POD_NAME $TIER $(cat /srv/uid)"`); got != "fast hunter2 envobj web "+string(pod.UID) {
		t.Errorf("env and volume: %q", got)
	}
}
