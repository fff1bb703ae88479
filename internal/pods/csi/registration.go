package csi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/fsnotify/fsnotify"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// registrationTimeout bounds one registration: GetInfo, NodeGetInfo, the node's objects and
// NotifyRegistrationStatus (the kubelet's pluginmanager dials with a 10 s timeout).
const registrationTimeout = 30 * time.Second

// Start watches the registration directory (the kubelet's pluginwatcher): every unix socket
// there, at start and as it appears, is a plugin's Registration service; a CSIPlugin one is
// registered, its removal deregisters the driver. Files whose names begin with a dot are
// skipped, as the kubelet skips them. It returns once the directory is watched; the watch
// ends with ctx.
func (m *Manager) Start(ctx context.Context) error {
	dir := m.opts.RegistryDir
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("plugin registration directory: %w", err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("plugin registration directory: %w", err)
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		return fmt.Errorf("plugin registration directory %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		w.Close()
		return fmt.Errorf("plugin registration directory: %w", err)
	}
	for _, e := range entries {
		m.socketAdded(ctx, filepath.Join(dir, e.Name()))
	}
	go func() {
		defer w.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				switch {
				case ev.Op&fsnotify.Create != 0:
					m.socketAdded(ctx, ev.Name)
				case ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0:
					m.socketRemoved(ctx, ev.Name)
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				m.log.Error("plugin registration directory", "error", err)
			}
		}
	}()
	return nil
}

// Registration retries: a registrar's socket exists from its bind, before it accepts, and a
// failed registration is tried again as the kubelet's reconciler tries it (every second, with
// exponential back-off) while the socket is there.
const (
	retryFirst = time.Second
	retryMax   = 2 * time.Minute
)

// Retry calls try until it succeeds or ctx ends, telling failed of each failure and of the
// wait before the next try: a second, doubling up to two minutes.
func Retry(ctx context.Context, try func() error, failed func(err error, wait time.Duration)) {
	for wait := retryFirst; ; wait = min(2*wait, retryMax) {
		err := try()
		if err == nil {
			return
		}
		failed(err, wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// socketAdded registers the plugin behind a new registration socket, in the background (a
// plugin that does not answer holds nothing else up), trying again until it registers or its
// socket goes. A socket created again replaces the earlier attempts.
func (m *Manager) socketAdded(ctx context.Context, path string) {
	if strings.HasPrefix(filepath.Base(path), ".") {
		return
	}
	st, err := os.Lstat(path)
	if err != nil || st.Mode().Type() != fs.ModeSocket {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	m.mu.Lock()
	if old := m.pending[path]; old != nil {
		old()
	}
	m.pending[path] = cancel
	m.mu.Unlock()
	go func() {
		defer func() {
			m.mu.Lock()
			// A later attempt for the path may have replaced this one.
			if ctx.Err() == nil {
				delete(m.pending, path)
			}
			m.mu.Unlock()
			cancel()
		}()
		Retry(ctx, func() error {
			if cur, err := os.Lstat(path); err != nil || !os.SameFile(cur, st) {
				return nil // the socket went, or is another one now
			}
			rctx, rcancel := context.WithTimeout(ctx, registrationTimeout)
			defer rcancel()
			return m.register(rctx, path)
		}, func(err error, wait time.Duration) {
			m.log.Error("plugin registration failed", "socket", path, "error", err, "retry_in", wait)
		})
	}()
}

// register is the kubelet's RegisterPlugin operation: GetInfo on the socket, the handler of
// its type (only CSIPlugin here) validating and registering it, then
// NotifyRegistrationStatus with the outcome.
func (m *Manager) register(ctx context.Context, socket string) error {
	cc, err := dial(socket)
	if err != nil {
		return err
	}
	defer cc.Close()
	reg := registerapi.NewRegistrationClient(cc)
	info, err := reg.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		return fmt.Errorf("failed to get plugin info using RPC GetInfo at socket %s, err: %w", socket, err)
	}
	notify := func(err error) error {
		st := &registerapi.RegistrationStatus{PluginRegistered: err == nil}
		if err != nil {
			st.Error = err.Error()
		}
		if _, nerr := reg.NotifyRegistrationStatus(ctx, st); nerr != nil {
			return errors.Join(err, fmt.Errorf("NotifyRegistrationStatus: %w", nerr))
		}
		return err
	}
	if info.Type != registerapi.CSIPlugin {
		return notify(fmt.Errorf("no handler registered for plugin type: %s at socket %s", info.Type, socket))
	}
	endpoint := info.Endpoint
	if endpoint == "" {
		endpoint = socket
	}
	if err := m.addDriver(ctx, info.Name, endpoint, socket, info.SupportedVersions); err != nil {
		return notify(err)
	}
	m.log.Info("csi driver registered", "driver", info.Name, "endpoint", endpoint, "versions", strings.Join(info.SupportedVersions, ","))
	return notify(nil)
}

// validateVersions picks the highest supported CSI version a driver offers (1.x; 0.x is no
// longer served), refusing a driver whose name is registered already with a version as high
// (the kubelet's RegistrationHandler.validateVersions, in its words).
func validateVersions(name string, versions []string, existing *utilversion.Version) (*utilversion.Version, error) {
	if len(versions) == 0 {
		return nil, fmt.Errorf("RegisterPlugin for CSI driver %q failed. Plugin returned an empty list for supported versions", name)
	}
	v, err := utilversion.HighestSupportedVersion(versions)
	if err != nil {
		return nil, fmt.Errorf("RegisterPlugin for CSI driver %q failed. None of the versions specified %q are supported. err=%v", name, versions, err)
	}
	if existing != nil && !existing.LessThan(v) {
		return nil, fmt.Errorf("RegisterPlugin for CSI driver %q failed. Another driver with the same name is already registered with a higher supported version: %q", name, existing)
	}
	return v, nil
}

// addDriver validates and registers a driver, asks it for the node's identity (NodeGetInfo)
// and records it in the node's objects; a failure leaves the driver unregistered.
func (m *Manager) addDriver(ctx context.Context, name, endpoint, socket string, versions []string) error {
	if name == "" {
		return errors.New("plugin name is empty")
	}
	m.mu.Lock()
	var existing *utilversion.Version
	if d, ok := m.drivers[name]; ok {
		existing = d.version
	}
	m.mu.Unlock()
	v, err := validateVersions(name, versions, existing)
	if err != nil {
		return err
	}
	cc, err := dial(endpoint)
	if err != nil {
		return err
	}
	d := &driver{name: name, endpoint: endpoint, socket: socket, version: v, conn: cc, node: csipb.NewNodeClient(cc)}
	ni, err := getNodeInfo(ctx, d.node)
	if err != nil {
		cc.Close()
		return fmt.Errorf("driver %s: NodeGetInfo: %w", name, err)
	}
	if m.opts.NodeInfo != nil {
		if err := m.opts.NodeInfo.InstallDriver(ctx, name, ni.NodeID, ni.MaxVolumes, ni.Topology); err != nil {
			cc.Close()
			return fmt.Errorf("error updating CSINode object with CSI driver node info: %w", err)
		}
	}
	m.mu.Lock()
	old := m.drivers[name]
	m.drivers[name] = d
	m.mu.Unlock()
	if old != nil {
		old.conn.Close()
	}
	return nil
}

// socketRemoved deregisters the driver that registered through the socket path (the
// kubelet's DeRegisterPlugin): it leaves the node's objects.
func (m *Manager) socketRemoved(ctx context.Context, path string) {
	m.mu.Lock()
	if cancel := m.pending[path]; cancel != nil {
		cancel()
		delete(m.pending, path)
	}
	var d *driver
	for _, x := range m.drivers {
		if x.socket == path {
			d = x
		}
	}
	if d != nil {
		delete(m.drivers, d.name)
	}
	m.mu.Unlock()
	if d == nil {
		return
	}
	d.conn.Close()
	m.log.Info("csi driver deregistered", "driver", d.name, "socket", path)
	if m.opts.NodeInfo != nil {
		ctx, cancel := context.WithTimeout(ctx, registrationTimeout)
		defer cancel()
		if err := m.opts.NodeInfo.UninstallDriver(ctx, d.name); err != nil {
			m.log.Error("csi driver deregistration: node objects", "driver", d.name, "error", err)
		}
	}
}

// Stop closes the drivers' connections.
func (m *Manager) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for n, d := range m.drivers {
		d.conn.Close()
		delete(m.drivers, n)
	}
}
