package csi

import (
	"context"
	"errors"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/kubernetes/test/e2e/storage/drivers/csi-test/mock/service"
	"k8s.io/utils/ptr"
)

// The tests run Kubernetes' own CSI mock driver (the e2e suite's, test/e2e/storage/drivers/
// csi-test/mock) on a unix socket, and a registrar serving the pluginregistration v1
// Registration service as node-driver-registrar does. The mock keeps its ephemeral volumes in
// a package variable, so these tests do not run in parallel.

const mockDriver = "io.kubernetes.storage.mock"

// startMock serves the e2e mock CSI driver on dir/csi.sock and returns the socket.
func startMock(t *testing.T, dir string, cfg service.Config) (string, *ephemeralNode) {
	t.Helper()
	cfg.DriverName = mockDriver
	sock := filepath.Join(dir, "csi.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	svc := service.New(cfg)
	srv := grpc.NewServer()
	csipb.RegisterIdentityServer(srv, svc)
	csipb.RegisterControllerServer(srv, svc)
	node := &ephemeralNode{Service: svc, published: map[string]*csipb.NodePublishVolumeRequest{}}
	csipb.RegisterNodeServer(srv, node)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return sock, node
}

// ephemeralNode is the mock's node service with inline (ephemeral) volumes of its own: the
// mock's NodePublishVolume dereferences a nil volume for them. Like csi-driver-host-path, it
// creates the target directory of an ephemeral volume and removes it at unpublish.
type ephemeralNode struct {
	service.Service
	mu        sync.Mutex
	published map[string]*csipb.NodePublishVolumeRequest // ephemeral volumes by target path
	noStats   atomic.Bool                                // GET_VOLUME_STATS left out of the capabilities
	expands   []*csipb.NodeExpandVolumeRequest           // the NodeExpandVolume requests
}

func (n *ephemeralNode) NodeExpandVolume(ctx context.Context, req *csipb.NodeExpandVolumeRequest) (*csipb.NodeExpandVolumeResponse, error) {
	n.mu.Lock()
	n.expands = append(n.expands, req)
	n.mu.Unlock()
	return n.Service.NodeExpandVolume(ctx, req)
}

func (n *ephemeralNode) NodeGetCapabilities(ctx context.Context, req *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	resp, err := n.Service.NodeGetCapabilities(ctx, req)
	if err != nil || !n.noStats.Load() {
		return resp, err
	}
	var caps []*csipb.NodeServiceCapability
	for _, c := range resp.GetCapabilities() {
		if c.GetRpc().GetType() != csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS {
			caps = append(caps, c)
		}
	}
	return &csipb.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (n *ephemeralNode) NodePublishVolume(ctx context.Context, req *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	if req.GetVolumeContext()[attrEphemeral] != "true" {
		return n.Service.NodePublishVolume(ctx, req)
	}
	if err := os.MkdirAll(req.GetTargetPath(), 0o750); err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.published[req.GetTargetPath()] = req
	n.mu.Unlock()
	return &csipb.NodePublishVolumeResponse{}, nil
}

func (n *ephemeralNode) NodeUnpublishVolume(ctx context.Context, req *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	n.mu.Lock()
	_, ok := n.published[req.GetTargetPath()]
	delete(n.published, req.GetTargetPath())
	n.mu.Unlock()
	if !ok {
		return n.Service.NodeUnpublishVolume(ctx, req)
	}
	return &csipb.NodeUnpublishVolumeResponse{}, os.RemoveAll(req.GetTargetPath())
}

// registrar is node-driver-registrar's Registration service.
type registrar struct {
	registerapi.UnimplementedRegistrationServer
	info   *registerapi.PluginInfo
	status chan *registerapi.RegistrationStatus
}

func (r *registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return r.info, nil
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.status <- s
	return &registerapi.RegistrationStatusResponse{}, nil
}

// startRegistrar serves a Registration service on socket; stop removes the socket, as a
// registrar that exits does. It listens on a hidden name and renames it into place once it
// accepts, so the manager's first attempt finds it serving (a registrar that binds in place
// is registered by a later attempt).
func startRegistrar(t *testing.T, socket string, info *registerapi.PluginInfo) (r *registrar, stop func()) {
	t.Helper()
	r = &registrar{info: info, status: make(chan *registerapi.RegistrationStatus, 4)}
	hidden := filepath.Join(filepath.Dir(socket), "."+filepath.Base(socket))
	ln, err := net.Listen("unix", hidden)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, r)
	go func() { _ = srv.Serve(ln) }()
	if err := os.Rename(hidden, socket); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { srv.Stop(); _ = os.Remove(socket) }) }
	t.Cleanup(stop)
	return r, stop
}

// waitStatus is the registration status the registrar is told (the test fails after a
// minute without one: the registration runs in the background).
func waitStatus(t *testing.T, r *registrar) *registerapi.RegistrationStatus {
	t.Helper()
	select {
	case s := <-r.status:
		return s
	case <-time.After(time.Minute):
		t.Fatal("no registration status")
		return nil
	}
}

// fakeNodeInfo records the drivers installed in the node's objects.
type fakeNodeInfo struct {
	mu      sync.Mutex
	drivers map[string]string
	removed chan string
}

func (f *fakeNodeInfo) InstallDriver(_ context.Context, driver, nodeID string, _ int64, _ map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.drivers == nil {
		f.drivers = map[string]string{}
	}
	f.drivers[driver] = nodeID
	return nil
}

func (f *fakeNodeInfo) UninstallDriver(_ context.Context, driver string) error {
	f.mu.Lock()
	delete(f.drivers, driver)
	f.mu.Unlock()
	f.removed <- driver
	return nil
}

// fakeAPI serves CSIDriver, VolumeAttachment and Secret objects.
type fakeAPI struct {
	drivers     map[string]*storagev1.CSIDriver
	attachments map[string]*storagev1.VolumeAttachment
	secrets     map[string]*v1.Secret
}

func (f *fakeAPI) CSIDriver(name string) (*storagev1.CSIDriver, error) {
	if d, ok := f.drivers[name]; ok {
		return d, nil
	}
	return nil, apierrors.NewNotFound(storagev1.Resource("csidrivers"), name)
}

func (f *fakeAPI) VolumeAttachment(name string) (*storagev1.VolumeAttachment, error) {
	if a, ok := f.attachments[name]; ok {
		return a, nil
	}
	return nil, apierrors.NewNotFound(storagev1.Resource("volumeattachments"), name)
}

func (f *fakeAPI) Secret(namespace, name string) (*v1.Secret, error) {
	if s, ok := f.secrets[namespace+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("secrets"), name)
}

// env is a node's directories, a running mock driver registered with a Manager.
type env struct {
	m         *Manager
	registrar *registrar
	driver    *ephemeralNode
	api       *fakeAPI
	node      *fakeNodeInfo
	root      string
}

func newEnv(t *testing.T, cfg service.Config) *env {
	t.Helper()
	root := t.TempDir()
	sock, driver := startMock(t, root, cfg)
	e := &env{api: &fakeAPI{}, node: &fakeNodeInfo{removed: make(chan string, 1)}, root: root, driver: driver}
	e.m = New(Options{
		RegistryDir: filepath.Join(root, "reg"),
		PluginsDir:  filepath.Join(root, "plugins"),
		PodsDir:     filepath.Join(root, "pods"),
		NodeName:    "node-a",
		API:         e.api,
		NodeInfo:    e.node,
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	t.Cleanup(e.m.Stop)
	if err := e.m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r, _ := startRegistrar(t, filepath.Join(root, "reg", "mock.sock"), &registerapi.PluginInfo{
		Type: registerapi.CSIPlugin, Name: mockDriver, Endpoint: sock, SupportedVersions: []string{"1.0.0"},
	})
	if s := waitStatus(t, r); !s.PluginRegistered {
		t.Fatalf("mock driver not registered: %s", s.Error)
	}
	e.registrar = r
	return e
}

func testPod(uid string, fsGroup *int64) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "ns", UID: k8stypes.UID("uid-" + uid)},
		Spec:       v1.PodSpec{ServiceAccountName: "sa", SecurityContext: &v1.PodSecurityContext{FSGroup: fsGroup}},
	}
}

func csiPV(name, handle string) *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PersistentVolumeSpec{
			AccessModes:  []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			MountOptions: []string{"noatime"},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
				Driver: mockDriver, VolumeHandle: handle, FSType: "ext4", VolumeAttributes: map[string]string{"k": "v"},
			}},
		},
	}
}

func readVolData(t *testing.T, dir string) map[string]string {
	t.Helper()
	d, err := loadVolData(dir)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestRegistration: a registrar's socket registers the driver (NodeGetInfo into the node's
// objects, status told to the registrar); its removal deregisters it; a plugin of another type
// or CSI version is refused and told why.
func TestRegistration(t *testing.T) {
	e := newEnv(t, service.Config{DisableAttach: true})
	if got := e.node.drivers[mockDriver]; got != mockDriver {
		t.Errorf("node ID in the node's objects = %q, want the mock's %q", got, mockDriver)
	}
	if got := e.m.Drivers(); len(got) != 1 || got[0] != mockDriver {
		t.Errorf("drivers = %v", got)
	}

	for _, tc := range []struct {
		name string
		info *registerapi.PluginInfo
		want string
	}{
		{"a device plugin", &registerapi.PluginInfo{Type: registerapi.DevicePlugin, Name: "x", SupportedVersions: []string{"v1beta1"}}, "no handler registered for plugin type: DevicePlugin"},
		{"CSI 0.3", &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "old.csi", Endpoint: "/nonexistent", SupportedVersions: []string{"0.3.0"}}, `None of the versions specified ["0.3.0"] are supported`},
		{"no versions", &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "none.csi", Endpoint: "/nonexistent"}, "Plugin returned an empty list for supported versions"},
		{"the same name, no higher version", &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: mockDriver, Endpoint: "/nonexistent", SupportedVersions: []string{"1.0.0"}}, "Another driver with the same name is already registered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := startRegistrar(t, filepath.Join(e.root, "reg", strings.ReplaceAll(tc.name, " ", "")[:6]+".sock"), tc.info)
			s := waitStatus(t, r)
			if s.PluginRegistered || !strings.Contains(s.Error, tc.want) {
				t.Errorf("status %+v, want refused with %q", s, tc.want)
			}
		})
	}
	if got := e.m.Drivers(); len(got) != 1 {
		t.Errorf("drivers after refusals = %v", got)
	}

	// The registrar exits: its socket goes, and the driver with it.
	if err := os.Remove(filepath.Join(e.root, "reg", "mock.sock")); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-e.node.removed:
		if d != mockDriver {
			t.Errorf("removed %q", d)
		}
	case <-time.After(time.Minute):
		t.Fatal("driver not deregistered")
	}
	if got := e.m.Drivers(); len(got) != 0 {
		t.Errorf("drivers after deregistration = %v", got)
	}
	_, err := e.m.SetUp(context.Background(), testPod("1", nil), Volume{Driver: mockDriver, SpecName: "pv", Mode: storagev1.VolumeLifecyclePersistent})
	if err == nil || err.Error() != "driver name io.kubernetes.storage.mock not found in the list of registered CSI drivers" {
		t.Errorf("set up on a deregistered driver: %v", err)
	}
}

// TestPersistentVolume: a persistent volume with spec.csi is staged at the kubelet's global
// path and published in the pod's directory, each with its vol_data.json; a second pod
// shares the staging; the volume is unstaged only after the last pod's teardown.
func TestPersistentVolume(t *testing.T) {
	e := newEnv(t, service.Config{DisableAttach: true})
	e.api.drivers = map[string]*storagev1.CSIDriver{mockDriver: {Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}}}
	pv := csiPV("pv-data", "1")
	vol, ok := FromPod(testPod("a", nil), &v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}, pv, false)
	if !ok {
		t.Fatal("not a CSI volume")
	}
	ctx := context.Background()
	podA, podB := testPod("a", nil), testPod("b", nil)
	pathA, err := e.m.SetUp(ctx, podA, vol)
	if err != nil {
		t.Fatal(err)
	}
	wantA := filepath.Join(e.root, "pods", "uid-a", "volumes", "kubernetes.io~csi", "pv-data", "mount")
	if pathA != wantA {
		t.Errorf("path = %s, want %s", pathA, wantA)
	}
	if !exists(pathA) {
		t.Errorf("the mock driver did not create %s", pathA)
	}
	// sha256("1")
	staging := filepath.Join(e.root, "plugins", "kubernetes.io", "csi", mockDriver, "6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b", "globalmount")
	if !exists(staging) {
		t.Errorf("no staging directory %s", staging)
	}
	if got := readVolData(t, filepath.Dir(staging)); !maps.Equal(got, map[string]string{"volumeHandle": "1", "driverName": mockDriver}) {
		t.Errorf("staging vol_data.json = %v", got)
	}
	want := map[string]string{"specVolID": "pv-data", "volumeHandle": "1", "driverName": mockDriver, "nodeName": "node-a",
		"volumeLifecycleMode": "Persistent", "attachmentID": AttachmentName("1", mockDriver, "node-a")}
	if got := readVolData(t, filepath.Dir(pathA)); !maps.Equal(got, want) {
		t.Errorf("pod vol_data.json = %v, want %v", got, want)
	}
	pathB, err := e.m.SetUp(ctx, podB, vol)
	if err != nil {
		t.Fatal(err)
	}

	if err := e.m.TearDown(ctx, "uid-a"); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Dir(pathA)) {
		t.Errorf("pod a's volume directory left after teardown")
	}
	if !exists(staging) || !exists(pathB) {
		t.Errorf("pod a's teardown unstaged the volume pod b still uses")
	}
	if err := e.m.TearDown(ctx, "uid-b"); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Dir(staging)) {
		t.Errorf("staging directory left after the last pod's teardown")
	}
	if exists(filepath.Join(e.root, "pods", "uid-b", "volumes", "kubernetes.io~csi")) {
		t.Errorf("pod b's CSI directory left")
	}
	// Torn down again (a pod forgotten after it finished): nothing to do.
	if err := e.m.TearDown(ctx, "uid-b"); err != nil {
		t.Errorf("second teardown: %v", err)
	}
}

// TestAttachRequired: a driver that attaches (no CSIDriver object, or attachRequired) waits
// for its VolumeAttachment; the attachment's metadata is the publish context (the mock
// refuses a stage without its "device").
func TestAttachRequired(t *testing.T) {
	e := newEnv(t, service.Config{})
	vol, _ := FromPod(testPod("a", nil), &v1.Volume{Name: "data"}, csiPV("pv-data", "2"), false)
	ctx := context.Background()
	name := AttachmentName("2", mockDriver, "node-a")
	_, err := e.m.SetUp(ctx, testPod("a", nil), vol)
	if err == nil || !strings.Contains(err.Error(), "volume attachment "+name) || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("no attachment: %v", err)
	}
	e.api.attachments = map[string]*storagev1.VolumeAttachment{name: {}}
	if _, err := e.m.SetUp(ctx, testPod("a", nil), vol); err == nil || err.Error() != "volume attachment "+name+" is not attached yet" {
		t.Fatalf("not attached yet: %v", err)
	}
	e.api.attachments[name].Status = storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"device": "/dev/mock"}}
	if _, err := e.m.SetUp(ctx, testPod("a", nil), vol); err != nil {
		t.Fatalf("attached: %v", err)
	}
	if err := e.m.TearDown(ctx, "uid-a"); err != nil {
		t.Fatal(err)
	}
}

// TestInlineVolume: an inline csi volume is published only when the driver's CSIDriver
// object declares the Ephemeral mode, with the pod's information when it asks for it, and
// read-only as the volume says.
func TestInlineVolume(t *testing.T) {
	e := newEnv(t, service.Config{DisableAttach: true})
	pod := testPod("a", nil)
	v := &v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: mockDriver, VolumeAttributes: map[string]string{"size": "1Gi"}}}}
	vol, ok := FromPod(pod, v, nil, false)
	if !ok || vol.Handle != EphemeralHandle("uid-a", "scratch") || vol.Mode != storagev1.VolumeLifecycleEphemeral {
		t.Fatalf("inline volume = %+v", vol)
	}
	ctx := context.Background()
	_, err := e.m.SetUp(ctx, pod, vol)
	if want := `volume mode "Ephemeral" not supported by driver io.kubernetes.storage.mock (no CSIDriver object)`; err == nil || err.Error() != want {
		t.Errorf("without a CSIDriver: %v, want %s", err, want)
	}
	e.api.drivers = map[string]*storagev1.CSIDriver{mockDriver: {Spec: storagev1.CSIDriverSpec{
		PodInfoOnMount: ptr.To(true), VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}}}}
	path, err := e.m.SetUp(ctx, pod, vol)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(e.root, "pods", "uid-a", "volumes", "kubernetes.io~csi", "scratch", "mount"); path != want {
		t.Errorf("path = %s, want %s", path, want)
	}
	e.driver.mu.Lock()
	req := e.driver.published[path]
	e.driver.mu.Unlock()
	if req == nil {
		t.Fatalf("no ephemeral volume published at %s", path)
	}
	wantCtx := map[string]string{"size": "1Gi", "csi.storage.k8s.io/pod.name": "p-a", "csi.storage.k8s.io/pod.namespace": "ns",
		"csi.storage.k8s.io/pod.uid": "uid-a", "csi.storage.k8s.io/serviceAccount.name": "sa", "csi.storage.k8s.io/ephemeral": "true"}
	if !maps.Equal(req.GetVolumeContext(), wantCtx) || req.GetVolumeId() != vol.Handle || req.GetStagingTargetPath() != "" {
		t.Errorf("publish request %v, want volume context %v, no staging", req, wantCtx)
	}
	if got := readVolData(t, filepath.Dir(path))["volumeLifecycleMode"]; got != "Ephemeral" {
		t.Errorf("lifecycle mode in vol_data.json = %q", got)
	}
	if err := e.m.TearDown(ctx, "uid-a"); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Dir(path)) || len(e.driver.published) != 0 {
		t.Errorf("ephemeral volume not unpublished")
	}
}

// TestFSGroup: with the File policy the published volume is the pod's fsGroup's, setgid.
func TestFSGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("chown to another group needs root")
		}
		t.Skip("chown to another group needs root")
	}
	e := newEnv(t, service.Config{DisableAttach: true})
	e.api.drivers = map[string]*storagev1.CSIDriver{mockDriver: {Spec: storagev1.CSIDriverSpec{
		AttachRequired: ptr.To(false), FSGroupPolicy: ptr.To(storagev1.FileFSGroupPolicy)}}}
	pod := testPod("a", ptr.To[int64](4321))
	vol, _ := FromPod(pod, &v1.Volume{Name: "data"}, csiPV("pv-data", "3"), false)
	path, err := e.m.SetUp(context.Background(), pod, vol)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if gid := st.Sys().(*syscall.Stat_t).Gid; gid != 4321 || st.Mode()&os.ModeSetgid == 0 || st.Mode().Perm()&0o070 != 0o070 {
		t.Errorf("volume root: gid %d mode %v, want gid 4321, setgid, group rwx", gid, st.Mode())
	}
	if err := e.m.TearDown(context.Background(), "uid-a"); err != nil {
		t.Fatal(err)
	}
}

// TestTearDownKeepsWhatItCannotTearDown: a volume whose driver is gone is kept, with an
// error, and torn down once the driver is back.
func TestTearDownKeepsWhatItCannotTearDown(t *testing.T) {
	e := newEnv(t, service.Config{DisableAttach: true})
	e.api.drivers = map[string]*storagev1.CSIDriver{mockDriver: {Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}}}
	vol, _ := FromPod(testPod("a", nil), &v1.Volume{Name: "data"}, csiPV("pv-data", "1"), false)
	path, err := e.m.SetUp(context.Background(), testPod("a", nil), vol)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path, "data"), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.m.Stop() // every driver forgotten, as after a restart before the registrar is back
	err = e.m.TearDown(context.Background(), "uid-a")
	if err == nil || !strings.Contains(err.Error(), "not found in the list of registered CSI drivers") {
		t.Errorf("teardown without the driver: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(path, "data")); err != nil || string(b) != "keep" {
		t.Errorf("the volume's data was touched: %q %v", b, err)
	}
	if !errors.Is(func() error { _, err := loadVolData(filepath.Dir(path)); return err }(), nil) {
		t.Errorf("vol_data.json removed")
	}

	// slicelet starts again: the registrar's socket is found at start, and the volume, read
	// from its vol_data.json, is unpublished and unstaged.
	m2 := New(e.m.opts)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer m2.Stop()
	if err := m2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if s := waitStatus(t, e.registrar); !s.PluginRegistered {
		t.Fatalf("not registered again: %s", s.Error)
	}
	if err := m2.TearDown(ctx, "uid-a"); err != nil {
		t.Fatalf("teardown after the restart: %v", err)
	}
	if exists(filepath.Dir(path)) || exists(filepath.Dir(DeviceMountPath(e.m.opts.PluginsDir, mockDriver, "1"))) {
		t.Errorf("volume left after the teardown that followed the restart")
	}
}
