package worker

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

func testObjects() *pods.Objects {
	o := pods.NewObjects()
	o.Set(pods.SourceAPI,
		[]*v1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default"}, Data: map[string]string{"mode": "fast", "level": "3"}}},
		[]*v1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"}, Data: map[string][]byte{"password": []byte("hunter2")}}})
	return o
}

func ref(name string) v1.LocalObjectReference { return v1.LocalObjectReference{Name: name} }

// TestContainerEnv: env resolved as the kubelet's makeEnvironmentVariables does: envFrom with
// prefixes, key references, the Downward API (fieldRef, resourceFieldRef with node allocatable
// for unset limits), $(VAR) expansion against what came before, optional references skipped.
func TestContainerEnv(t *testing.T) {
	w, _ := newTestWorkerWith(t, newFakeRT(), "", func(o *Options) {
		// On the host's network: status.podIP(s) are the node's.
		o.Objects, o.NodeName, o.NodeIPs, o.HostNetwork = testObjects(), "node-1", []string{"10.0.0.5", "fd00::5"}, true
		o.Allocatable = v1.ResourceList{v1.ResourceMemory: resource.MustParse("4Gi"), v1.ResourceCPU: resource.MustParse("2")}
	})
	pod := testPod("env-1", "", "app")
	pod.Labels = map[string]string{"app": "web"}
	pod.Spec.ServiceAccountName = "sa"
	c := &pod.Spec.Containers[0]
	c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("256Mi")}
	c.Args = []string{"--mode=$(CFG_mode)"}
	c.EnvFrom = []v1.EnvFromSource{
		{Prefix: "CFG_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: ref("app")}},
		{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: ref("absent"), Optional: ptr(true)}},
	}
	field := func(path string) *v1.EnvVarSource {
		return &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}
	}
	res := func(r, div string) *v1.EnvVarSource {
		return &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: r, Divisor: resource.MustParse(div)}}
	}
	c.Env = []v1.EnvVar{
		{Name: "POD", ValueFrom: field("metadata.name")},
		{Name: "NS", ValueFrom: field("metadata.namespace")},
		{Name: "UID", ValueFrom: field("metadata.uid")},
		{Name: "APP", ValueFrom: field("metadata.labels['app']")},
		{Name: "NODE", ValueFrom: field("spec.nodeName")},
		{Name: "SA", ValueFrom: field("spec.serviceAccountName")},
		{Name: "HOST_IP", ValueFrom: field("status.hostIP")},
		{Name: "POD_IPS", ValueFrom: field("status.podIPs")},
		{Name: "MEM_MI", ValueFrom: res("limits.memory", "1Mi")},
		{Name: "CPU", ValueFrom: res("limits.cpu", "1m")},
		{Name: "PASSWORD", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: ref("db"), Key: "password"}}},
		{Name: "LEVEL", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: ref("app"), Key: "level"}}},
		{Name: "GONE", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: ref("app"), Key: "nope", Optional: ptr(true)}}},
		{Name: "URL", Value: "db://$(POD):$(PASSWORD)"},
	}
	env, _, args, err := w.containerEnv(pod, c)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var names []string
	for _, e := range env {
		got[e.Name] = e.Value
		names = append(names, e.Name)
	}
	want := map[string]string{
		"CFG_level": "3", "CFG_mode": "fast", "POD": "web", "NS": "default", "UID": "env-1", "APP": "web",
		"NODE": "node-1", "SA": "sa", "HOST_IP": "10.0.0.5", "POD_IPS": "10.0.0.5,fd00::5",
		"MEM_MI": "256", "CPU": "2000", "PASSWORD": "hunter2", "LEVEL": "3", "URL": "db://web:hunter2",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("env %v,\n want %v", got, want)
	}
	if names[0] != "CFG_level" || names[len(names)-1] != "URL" {
		t.Errorf("order %v: want envFrom first, then env in spec order", names)
	}
	if !reflect.DeepEqual(args, []string{"--mode=fast"}) {
		t.Errorf("args %q", args)
	}
}

// TestContainerEnvMissing: a missing ConfigMap, Secret or key holds the container back with
// CreateContainerConfigError and the kubelet's message (event Failed "Error: ...").
func TestContainerEnvMissing(t *testing.T) {
	tests := []struct {
		name string
		env  v1.EnvVar
		from []v1.EnvFromSource
		want string
	}{
		{name: "configmap", from: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: ref("absent")}}}, want: `configmap "absent" not found`},
		{name: "secret", env: v1.EnvVar{Name: "P", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: ref("nope"), Key: "k"}}}, want: `secret "nope" not found`},
		{name: "key", env: v1.EnvVar{Name: "P", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: ref("app"), Key: "k"}}}, want: "couldn't find key k in ConfigMap default/app"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFakeRT()
				w, events := newTestWorkerWith(t, f, "", func(o *Options) { o.Objects = testObjects() })
				pod := testPod("miss-1", "", "app")
				pod.Spec.Containers[0].EnvFrom = tc.from
				if tc.env.Name != "" {
					pod.Spec.Containers[0].Env = []v1.EnvVar{tc.env}
				}
				st := mustSync(t, w, pod)
				wt := st.ContainerStatuses[0].State.Waiting
				if wt == nil || wt.Reason != lifecycle.ReasonCreateContainerConfigError || wt.Message != tc.want {
					t.Errorf("state %+v, want CreateContainerConfigError %q", st.ContainerStatuses[0].State, tc.want)
				}
				if got := drain(events); !slices.Contains(got, "Warning Failed Error: "+tc.want) {
					t.Errorf("events %q", got)
				}
				if f.callsTo("CreateContainer") != 0 {
					t.Error("the container was created")
				}
			})
		})
	}
}

// readVolumeFile reads a file of a written volume through its user-visible symlink.
func readVolumeFile(t *testing.T, dir, name string) (string, os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data), fi.Mode().Perm()
}

// TestObjectVolumes: configMap, secret, projected and downwardAPI volumes are written with the
// atomic writer's layout, items and modes, mounted read-only, and updated in place when the
// ConfigMap changes.
func TestObjectVolumes(t *testing.T) {
	f := newFakeRT()
	objs := testObjects()
	state := t.TempDir()
	w, _ := newTestWorkerWith(t, f, state, func(o *Options) { o.Objects = objs })
	pod := testPod("vol-1", "", "app")
	pod.Labels = map[string]string{"app": "web", "tier": "front"}
	mode := int32(0o600)
	pod.Spec.Volumes = []v1.Volume{
		{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: ref("app")}}},
		{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "db", DefaultMode: &mode,
			Items: []v1.KeyToPath{{Key: "password", Path: "db/password"}}}}},
		{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
		}}}},
		{Name: "all", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: ref("app"), Items: []v1.KeyToPath{{Key: "mode", Path: "mode"}}}},
			{Secret: &v1.SecretProjection{LocalObjectReference: ref("db")}},
		}}}},
	}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "config", MountPath: "/etc/app"}, {Name: "creds", MountPath: "/creds"}}
	if errs := w.Validate(pod); len(errs) > 0 {
		t.Fatal(errs)
	}
	st := mustSync(t, w, pod)
	if !running(st) {
		t.Fatalf("not running: %+v", st)
	}
	vol := func(name string) string { return w.volumePath("vol-1", emptyDirPlugin, name) }
	for _, tc := range []struct {
		vol, file, data string
		mode            os.FileMode
	}{
		{"config", "mode", "fast", 0o644},
		{"config", "level", "3", 0o644},
		{"creds", "db/password", "hunter2", 0o600},
		{"info", "labels", "app=\"web\"\ntier=\"front\"", 0o644},
		{"info", "name", "web", 0o644},
		{"all", "mode", "fast", 0o644},
		{"all", "password", "hunter2", 0o644},
	} {
		if data, mode := readVolumeFile(t, vol(tc.vol), tc.file); data != tc.data || mode != tc.mode {
			t.Errorf("%s/%s = %q %o, want %q %o", tc.vol, tc.file, data, mode, tc.data, tc.mode)
		}
	}
	if target, err := os.Readlink(filepath.Join(vol("config"), "mode")); err != nil || target != "..data/mode" {
		t.Errorf("user-visible entry: %q, %v; want a symlink to ..data/mode", target, err)
	}
	f.mu.Lock()
	for _, cfg := range f.configs {
		for _, m := range cfg.Mounts {
			if !m.Readonly {
				t.Errorf("mount %s is writable", m.ContainerPath)
			}
		}
	}
	f.mu.Unlock()

	before, _ := os.Readlink(filepath.Join(vol("config"), dataDir))
	mustSync(t, w, pod)
	if same, _ := os.Readlink(filepath.Join(vol("config"), dataDir)); same != before {
		t.Errorf("an unchanged payload was written again: %s → %s", before, same)
	}
	objs.Set(pods.SourceAPI, []*v1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default"}, Data: map[string]string{"mode": "slow"}}}, nil)
	mustSync(t, w, pod)
	if data, _ := readVolumeFile(t, vol("config"), "mode"); data != "slow" {
		t.Errorf("after the ConfigMap changed: mode = %q, want slow", data)
	}
	if _, err := os.Lstat(filepath.Join(vol("config"), "level")); !os.IsNotExist(err) {
		t.Errorf("a key removed from the ConfigMap is still there: %v", err)
	}
	ents, _ := os.ReadDir(vol("config"))
	var dots []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "..") {
			dots = append(dots, e.Name())
		}
	}
	if len(dots) != 2 {
		t.Errorf("entries %v: want ..data and one timestamped directory", dots)
	}
}

// TestMissingVolumeObject: a volume whose ConfigMap is missing keeps every container from
// starting (ContainerCreating) with FailedMount in the kubelet's words, once; an optional one
// does not; the pod starts once the ConfigMap exists.
func TestMissingVolumeObject(t *testing.T) {
	f := newFakeRT()
	objs := pods.NewObjects()
	w, events := newTestWorkerWith(t, f, "", func(o *Options) { o.Objects = objs })
	pod := testPod("mv-1", "", "app")
	pod.Spec.Volumes = []v1.Volume{
		{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: ref("app-config")}}},
		{Name: "extra", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: ref("extra"), Optional: ptr(true)}}},
	}
	st := mustSync(t, w, pod)
	mustSync(t, w, pod)
	if wt := st.ContainerStatuses[0].State.Waiting; wt == nil || wt.Reason != lifecycle.ReasonContainerCreating || st.Phase != v1.PodPending {
		t.Errorf("status %s %+v, want Pending, ContainerCreating", st.Phase, st.ContainerStatuses[0].State)
	}
	want := `Warning FailedMount MountVolume.SetUp failed for volume "config" : configmap "app-config" not found`
	if got := drain(events); !reflect.DeepEqual(got, []string{want}) {
		t.Errorf("events %q, want once %q", got, want)
	}
	objs.Set(pods.SourceFile, []*v1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Name: "app-config", Namespace: "default"}, Data: map[string]string{"a": "b"}}}, nil)
	if st := mustSync(t, w, pod); !running(st) {
		t.Errorf("with the ConfigMap: %+v", st)
	}
}

// TestWritePayloadPaths: paths that would leave the volume are refused.
func TestWritePayloadPaths(t *testing.T) {
	for _, p := range []string{"/etc/passwd", "../x", "a/../../x", "..data", "a//b", ""} {
		if _, err := writePayload(t.TempDir(), map[string]fileProjection{p: {Data: []byte("x"), Mode: 0o644}}, -1, time.Now()); err == nil {
			t.Errorf("path %q accepted", p)
		}
	}
}

// TestContainerEnvLiteral: literal values expand against the values before them only; command
// and args against the final env; a later definition of a name wins, in the first one's place.
func TestContainerEnvLiteral(t *testing.T) {
	w, _ := newTestWorker(t, newFakeRT(), "")
	cases := []struct {
		name          string
		c             v1.Container
		wantEnv       []v1.EnvVar
		wantCmd, wArg []string
	}{
		{name: "nothing", c: v1.Container{}},
		{name: "env values refer to earlier ones only",
			c:       v1.Container{Env: []v1.EnvVar{{Name: "B", Value: "$(A)"}, {Name: "A", Value: "a"}, {Name: "C", Value: "$(A)c"}}},
			wantEnv: []v1.EnvVar{{Name: "B", Value: "$(A)"}, {Name: "A", Value: "a"}, {Name: "C", Value: "ac"}}},
		{name: "command and args expand against the final env",
			c: v1.Container{
				Env:     []v1.EnvVar{{Name: "A", Value: "a"}, {Name: "B", Value: "$(A)b"}},
				Command: []string{"/bin/$(B)"}, Args: []string{"$(A)", "$(Z)", "$$(A)"},
			},
			wantEnv: []v1.EnvVar{{Name: "A", Value: "a"}, {Name: "B", Value: "ab"}},
			wantCmd: []string{"/bin/ab"}, wArg: []string{"a", "$(Z)", "$(A)"}},
		{name: "a later value wins",
			c:       v1.Container{Env: []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "A", Value: "2"}}, Args: []string{"$(A)"}},
			wantEnv: []v1.EnvVar{{Name: "A", Value: "2"}}, wArg: []string{"2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, cmd, args, err := w.containerEnv(testPod("lit-1", "", "app"), &c.c)
			if err != nil || !reflect.DeepEqual(env, c.wantEnv) || !reflect.DeepEqual(cmd, c.wantCmd) || !reflect.DeepEqual(args, c.wArg) {
				t.Errorf("containerEnv = %v %q %q %v, want %v %q %q", env, cmd, args, err, c.wantEnv, c.wantCmd, c.wArg)
			}
		})
	}
}
