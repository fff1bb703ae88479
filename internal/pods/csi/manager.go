package csi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilversion "k8s.io/apimachinery/pkg/util/version"
)

// callTimeout bounds one call to a driver (the kubelet's csiTimeout, 2 minutes; a stage or
// publish may format and mount a disk).
const callTimeout = 2 * time.Minute

// API is what the node reads from the API server for CSI volumes: the driver's CSIDriver
// object (the API's NotFound when it has none), the VolumeAttachment of an attached volume,
// and the Secrets a volume names.
type API interface {
	CSIDriver(name string) (*storagev1.CSIDriver, error)
	VolumeAttachment(name string) (*storagev1.VolumeAttachment, error)
	Secret(namespace, name string) (*v1.Secret, error)
}

// NodeInfo keeps the node's API objects in step with its drivers (the kubelet's
// nodeinfomanager): the CSINode object's drivers, the Node's csi.volume.kubernetes.io/nodeid
// annotation and topology labels.
type NodeInfo interface {
	InstallDriver(ctx context.Context, driver, nodeID string, maxVolumes int64, topology map[string]string) error
	UninstallDriver(ctx context.Context, driver string) error
}

// Options configure a Manager.
type Options struct {
	// RegistryDir is the plugin-registration directory (the kubelet's
	// /var/lib/kubelet/plugins_registry) watched for registration sockets.
	RegistryDir string
	// PluginsDir holds the staging paths (the kubelet's /var/lib/kubelet/plugins).
	PluginsDir string
	// PodsDir holds the pods' directories, <uid>/volumes under each (the kubelet's
	// /var/lib/kubelet/pods).
	PodsDir string
	// NodeName names the node in VolumeAttachments.
	NodeName string
	// API reads CSIDriver, VolumeAttachment and Secret objects; nil without an API server.
	API API
	// NodeInfo records the drivers in the node's objects; nil without an API server.
	NodeInfo NodeInfo
	// Tokens gives a pod's service account token for an audience (the API server's when
	// empty) and a lifetime (nil: the API server's default), bound to the pod, for drivers
	// whose CSIDriver has tokenRequests; nil without an API server.
	Tokens func(pod *v1.Pod, audience string, expirationSeconds *int64) (authenticationv1.TokenRequestStatus, error)
	Logger *slog.Logger
}

// driver is a registered CSI node plugin.
type driver struct {
	name     string
	endpoint string
	socket   string // the registration socket it came through
	version  *utilversion.Version
	conn     *grpc.ClientConn
	node     csipb.NodeClient
}

// Manager is the node's CSI plugin: registered drivers, and the setup and teardown of the
// pods' CSI volumes.
type Manager struct {
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	drivers map[string]*driver
	pending map[string]context.CancelFunc // registrations under way, by socket
	volumes map[string]*volumeLock        // one operation at a time on a volume, by driver and handle
}

// volumeLock serializes the operations on one volume (the kubelet's nestedpendingoperations):
// a pod's teardown deciding to unstage does not race another pod's stage and publish.
type volumeLock struct {
	mu    sync.Mutex
	users int
}

// lockVolume takes the volume's lock; the returned function releases it.
func (m *Manager) lockVolume(driver, handle string) func() {
	key := driver + "\x00" + handle
	m.mu.Lock()
	l := m.volumes[key]
	if l == nil {
		l = &volumeLock{}
		m.volumes[key] = l
	}
	l.users++
	m.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		m.mu.Lock()
		if l.users--; l.users == 0 {
			delete(m.volumes, key)
		}
		m.mu.Unlock()
	}
}

// New returns a Manager; Start watches the registration directory.
func New(opts Options) *Manager {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{opts: opts, log: log, drivers: map[string]*driver{}, pending: map[string]context.CancelFunc{}, volumes: map[string]*volumeLock{}}
}

// Drivers are the names of the registered drivers.
func (m *Manager) Drivers() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.drivers))
	for n := range m.drivers {
		out = append(out, n)
	}
	return out
}

// RequiresRepublish reports whether the driver's CSIDriver asks for its volumes to be
// published again periodically (requiresRepublish); false when it cannot be read.
func (m *Manager) RequiresRepublish(driver string) bool {
	pol, err := m.policy(driver)
	return err == nil && pol.RequiresRepublish
}

// errNotRegistered is the kubelet's word for a driver it does not know (csi_client.go).
func errNotRegistered(name string) error {
	return fmt.Errorf("driver name %s not found in the list of registered CSI drivers", name)
}

// nodeClient is the node service of the registered driver name.
func (m *Manager) nodeClient(name string) (csipb.NodeClient, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.drivers[name]
	if !ok {
		return nil, errNotRegistered(name)
	}
	return d.node, nil
}

// policy is the driver's CSIDriver policy, read from the API server (the kubelet's defaults
// without one, or without an API server).
func (m *Manager) policy(name string) (Policy, error) {
	if m.opts.API == nil {
		return PolicyOf(nil), nil
	}
	d, err := m.opts.API.CSIDriver(name)
	if apierrors.IsNotFound(err) {
		return PolicyOf(nil), nil
	}
	if err != nil {
		return Policy{}, fmt.Errorf("CSIDriver %s: %w", name, err)
	}
	return PolicyOf(d), nil
}

// secret is the data of the Secret ref names, as strings (getCredentialsFromSecret).
func (m *Manager) secret(ref *v1.SecretReference) (map[string]string, error) {
	if ref == nil {
		return nil, nil
	}
	if m.opts.API == nil {
		return nil, fmt.Errorf("secret %s/%s: no API server", ref.Namespace, ref.Name)
	}
	s, err := m.opts.API.Secret(ref.Namespace, ref.Name)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out, nil
}

// SetUp makes the CSI volume vol of pod available at its publish path, which it returns: the
// kubelet's MountDevice (NodeStageVolume at the staging path, for a persistent volume whose
// driver has STAGE_UNSTAGE_VOLUME) then SetUp (NodePublishVolume), each with its
// vol_data.json beside it for the teardown, then the pod's fsGroup applied when the driver's
// policy says so (and the driver does not apply it itself). Calls are idempotent, as the CSI
// spec requires of drivers: a pod synced again, or after a restart, publishes again.
func (m *Manager) SetUp(ctx context.Context, pod *v1.Pod, vol Volume) (string, error) {
	for _, name := range []string{vol.Driver, vol.SpecName} {
		if err := pathElement(name); err != nil {
			return "", err
		}
	}
	node, err := m.nodeClient(vol.Driver)
	if err != nil {
		return "", err
	}
	pol, err := m.policy(vol.Driver)
	if err != nil {
		return "", err
	}
	if err := pol.CheckMode(vol.Driver, vol.Mode); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	caps, err := nodeCapabilities(ctx, node)
	if err != nil {
		return "", fmt.Errorf("driver %s: NodeGetCapabilities: %w", vol.Driver, err)
	}
	var fsGroup *int64
	if sc := pod.Spec.SecurityContext; sc != nil {
		fsGroup = sc.FSGroup
	}
	mountGroup := ""
	if caps.mountGroup && fsGroup != nil {
		mountGroup = fmt.Sprint(*fsGroup)
	}
	capability := volumeCapability(vol.FSType, vol.MountOptions, accessMode(vol.AccessModes), mountGroup)
	defer m.lockVolume(vol.Driver, vol.Handle)()

	var publishContext map[string]string
	staging := ""
	if vol.Mode == storagev1.VolumeLifecyclePersistent {
		if publishContext, err = m.publishContext(vol, pol); err != nil {
			return "", err
		}
		if caps.stageUnstage {
			staging = DeviceMountPath(m.opts.PluginsDir, vol.Driver, vol.Handle)
			if err := m.stage(ctx, node, vol, staging, capability, publishContext); err != nil {
				return "", err
			}
		}
	}

	target := PublishPath(m.opts.PodsDir, string(pod.UID), vol.SpecName)
	parent := filepath.Dir(target)
	if err := os.MkdirAll(parent, 0o750); err != nil {
		return "", fmt.Errorf("volume %s: %w", vol.SpecName, err)
	}
	attrs, secrets, err := m.publishInputs(pod, vol, pol)
	if err != nil {
		return "", err
	}
	if err := saveVolData(parent, map[string]string{
		keySpecVolID:    vol.SpecName,
		keyVolHandle:    vol.Handle,
		keyDriverName:   vol.Driver,
		keyNodeName:     m.opts.NodeName,
		keyLifecycle:    string(vol.Mode),
		keyAttachmentID: AttachmentName(vol.Handle, vol.Driver, m.opts.NodeName),
	}); err != nil {
		return "", err
	}
	_, err = node.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{
		VolumeId:          vol.Handle,
		PublishContext:    publishContext,
		StagingTargetPath: staging,
		TargetPath:        target,
		VolumeCapability:  capability,
		Readonly:          vol.ReadOnly,
		Secrets:           secrets,
		VolumeContext:     attrs,
	})
	if err != nil {
		return "", fmt.Errorf("rpc error: NodePublishVolume of volume %s: %w", vol.Handle, err)
	}
	if fsGroup != nil && !caps.mountGroup && pol.AppliesFSGroup(vol) {
		if err := setVolumeOwnership(target, *fsGroup, fsGroupChangePolicy(pod)); err != nil {
			return "", fmt.Errorf("applyFSGroup failed for vol %s: %w", vol.Handle, err)
		}
	}
	m.log.Info("csi volume published", "pod_uid", string(pod.UID), "volume", vol.SpecName, "driver", vol.Driver, "volume_handle", vol.Handle, "staged", staging != "", "path", target)
	return target, nil
}

// stage is MountDevice: the staging directory and its vol_data.json, then NodeStageVolume.
func (m *Manager) stage(ctx context.Context, node csipb.NodeClient, vol Volume, staging string, capability *csipb.VolumeCapability, publishContext map[string]string) error {
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return fmt.Errorf("attacher.MountDevice failed to create dir %q: %w", staging, err)
	}
	if err := saveVolData(filepath.Dir(staging), map[string]string{keyVolHandle: vol.Handle, keyDriverName: vol.Driver}); err != nil {
		return err
	}
	secrets, err := m.secret(vol.StageSecret)
	if err != nil {
		return fmt.Errorf("fetching NodeStageSecretRef %s/%s failed: %w", vol.StageSecret.Namespace, vol.StageSecret.Name, err)
	}
	_, err = node.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{
		VolumeId:          vol.Handle,
		PublishContext:    publishContext,
		StagingTargetPath: staging,
		VolumeCapability:  capability,
		Secrets:           secrets,
		VolumeContext:     vol.Attributes,
	})
	if err != nil {
		return fmt.Errorf("rpc error: NodeStageVolume of volume %s: %w", vol.Handle, err)
	}
	return nil
}

// TearDown unpublishes every CSI volume of the pod uid (the kubelet's TearDownAt:
// NodeUnpublishVolume, then the mount directory and its vol_data.json removed, the directory
// only when nothing is left on it), then unstages each persistent volume no other pod
// publishes any more (UnmountDevice: NodeUnstageVolume, then the staging directory
// removed). What cannot be torn down (its driver not registered, a call failing, a directory
// still mounted) is an error and is kept, to be tried again: the volume's data is never
// removed.
func (m *Manager) TearDown(ctx context.Context, uid string) error {
	if err := m.tearDownBlock(ctx, uid); err != nil {
		return err
	}
	dir := podVolumesDir(m.opts.PodsDir, uid)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("csi volumes: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if err := m.unpublish(ctx, uid, filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, fmt.Errorf("volume %s: %w", e.Name(), err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return removeEmpty(dir)
}

// unpublish tears down one published volume directory of pod uid.
func (m *Manager) unpublish(ctx context.Context, uid, volDir string) error {
	data, err := loadVolData(volDir)
	if errors.Is(err, fs.ErrNotExist) {
		// Set up no further than its directory: nothing was published there.
		return os.Remove(volDir)
	}
	if err != nil {
		return err
	}
	name, handle, node, err := m.dataNode(data)
	if err != nil {
		return err
	}
	defer m.lockVolume(name, handle)()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	target := filepath.Join(volDir, mountDir)
	if err := nodeUnpublish(ctx, node, handle, target, "mount directory"); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(volDir, volDataFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := removeEmpty(volDir); err != nil {
		return err
	}
	m.log.Info("csi volume unpublished", "pod_uid", uid, "volume", filepath.Base(volDir), "driver", name, "volume_handle", handle)
	if data[keyLifecycle] == string(storagev1.VolumeLifecycleEphemeral) {
		return nil
	}
	return m.unstageUnused(ctx, node, name, handle)
}

// nodeUnpublish asks the driver to unpublish volume handle from target, then removes target,
// which the unpublish leaves empty (what names it in an error: "mount directory").
func nodeUnpublish(ctx context.Context, node csipb.NodeClient, handle, target, what string) error {
	if _, err := node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: handle, TargetPath: target}); err != nil {
		return fmt.Errorf("rpc error: NodeUnpublishVolume of volume %s: %w", handle, err)
	}
	if err := removeEmpty(target); err != nil {
		return fmt.Errorf("%s %s after NodeUnpublishVolume: %w", what, target, err)
	}
	return nil
}

// nodeUnstage asks the driver to unstage volume handle from staging, then removes staging.
func nodeUnstage(ctx context.Context, node csipb.NodeClient, handle, staging string) error {
	if _, err := node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: handle, StagingTargetPath: staging}); err != nil {
		return fmt.Errorf("rpc error: NodeUnstageVolume of volume %s: %w", handle, err)
	}
	if err := removeEmpty(staging); err != nil {
		return fmt.Errorf("staging directory %s after NodeUnstageVolume: %w", staging, err)
	}
	return nil
}

// unstageUnused unstages the persistent volume handle of driver name when it was staged and
// no pod's volume directory publishes it any more.
func (m *Manager) unstageUnused(ctx context.Context, node csipb.NodeClient, name, handle string) error {
	staging := DeviceMountPath(m.opts.PluginsDir, name, handle)
	if _, err := loadVolData(filepath.Dir(staging)); errors.Is(err, fs.ErrNotExist) {
		return nil // never staged (a driver without STAGE_UNSTAGE_VOLUME)
	}
	used, err := m.published(name, handle)
	if err != nil || used {
		return err
	}
	if err := nodeUnstage(ctx, node, handle, staging); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(filepath.Dir(staging), volDataFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	m.log.Info("csi volume unstaged", "driver", name, "volume_handle", handle)
	return removeEmpty(filepath.Dir(staging))
}

// published reports whether any pod's volume directory still holds the persistent volume
// handle of driver name (the kubelet's actual state of the world, read from the disk so a
// restart loses nothing).
func (m *Manager) published(name, handle string) (bool, error) {
	matches, err := filepath.Glob(filepath.Join(m.opts.PodsDir, "*", "volumes", pluginDirName, "*", volDataFile))
	if err != nil {
		return false, err
	}
	for _, p := range matches {
		data, err := loadVolData(filepath.Dir(p))
		if err != nil {
			continue
		}
		if data[keyDriverName] == name && data[keyVolHandle] == handle {
			return true, nil
		}
	}
	return false, nil
}

// publishInputs are the volume context and the secrets of vol's NodePublishVolume for pod:
// the volume's attributes, the pod's information when the driver's policy asks, the publish
// secret's data, the service account tokens the driver asks for.
func (m *Manager) publishInputs(pod *v1.Pod, vol Volume, pol Policy) (attrs, secrets map[string]string, _ error) {
	secrets, err := m.secret(vol.PublishSecret)
	if err != nil {
		return nil, nil, fmt.Errorf("fetching NodePublishSecretRef %s/%s failed: %w", vol.PublishSecret.Namespace, vol.PublishSecret.Name, err)
	}
	attrs = vol.Attributes
	if pol.PodInfoOnMount {
		attrs = mergeMap(attrs, PodInfo(pod, vol.Mode))
	}
	return m.addTokens(pod, pol, attrs, secrets)
}

// tokensKey is the volume context (or secrets) key of the pod's service account tokens
// (csi_mounter.go podServiceAccountTokenAttrs).
const tokensKey = "csi.storage.k8s.io/serviceAccount.tokens"

// addTokens adds the service account tokens the driver's CSIDriver asks for to a publish's
// volume context, or to its secrets when the CSIDriver says serviceAccountTokenInSecrets: a
// JSON object of each audience's TokenRequest status (token, expirationTimestamp), the
// kubelet's podServiceAccountTokenAttrs. The maps given are not modified.
func (m *Manager) addTokens(pod *v1.Pod, pol Policy, attrs, secrets map[string]string) (map[string]string, map[string]string, error) {
	if len(pol.TokenRequests) == 0 {
		return attrs, secrets, nil
	}
	if m.opts.Tokens == nil {
		return nil, nil, errors.New("service account tokens for the driver: no API server")
	}
	out := make(map[string]authenticationv1.TokenRequestStatus, len(pol.TokenRequests))
	for _, tr := range pol.TokenRequests {
		st, err := m.opts.Tokens(pod, tr.Audience, tr.ExpirationSeconds)
		if err != nil {
			return nil, nil, fmt.Errorf("service account token for audience %q: %w", tr.Audience, err)
		}
		out[tr.Audience] = st
	}
	tokens, err := json.Marshal(out)
	if err != nil {
		return nil, nil, err
	}
	add := map[string]string{tokensKey: string(tokens)}
	if pol.TokensInSecrets {
		return attrs, mergeMap(secrets, add), nil
	}
	return mergeMap(attrs, add), secrets, nil
}

// publishContext is what a persistent volume's VolumeAttachment gives its stage and
// publish, when its driver attaches volumes: the attachment's metadata once it is attached.
func (m *Manager) publishContext(vol Volume, pol Policy) (map[string]string, error) {
	if !pol.AttachRequired {
		return nil, nil
	}
	if m.opts.API == nil {
		return nil, fmt.Errorf("driver %s requires attaching volumes, and without an API server no VolumeAttachment can attach one", vol.Driver)
	}
	name := AttachmentName(vol.Handle, vol.Driver, m.opts.NodeName)
	va, err := m.opts.API.VolumeAttachment(name)
	return PublishContext(name, va, err)
}

// dataNode is the driver and the volume handle a vol_data.json names, with the driver's node
// service.
func (m *Manager) dataNode(data map[string]string) (name, handle string, _ csipb.NodeClient, _ error) {
	name, handle = data[keyDriverName], data[keyVolHandle]
	if err := pathElement(name); err != nil {
		return "", "", nil, err
	}
	node, err := m.nodeClient(name)
	if err != nil {
		return "", "", nil, err
	}
	return name, handle, node, nil
}

// pathElement refuses a name that is not one element of a path (a driver's or a volume's name
// names a directory; the API validates both, this holds whatever a vol_data.json says).
func pathElement(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("name %q cannot name a directory", name)
	}
	return nil
}
