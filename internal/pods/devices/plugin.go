package devices

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// maxPluginMessage bounds a message from a plugin or a registering client (gRPC's default
// receive limit, stated): a ListAndWatch response of 4 MiB lists tens of thousands of devices.
const maxPluginMessage = 4 << 20

// maxConcurrentRegistrations bounds the registration server's concurrent streams: plugins
// register one call each, rarely at once.
const maxConcurrentRegistrations = 16

// DialUnix connects to a plugin's unix socket (the kubelet's dial: insecure, blocking until
// connected or ctx ends).
func DialUnix(ctx context.Context, socket string) (Conn, error) {
	cc, err := grpc.NewClient("passthrough:///"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxPluginMessage)),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}))
	if err != nil {
		return nil, err
	}
	// NewClient connects lazily; the kubelet's blocking dial fails at once on a plugin that is
	// not there, so Register answers it with the error.
	cc.Connect()
	for {
		s := cc.GetState()
		if s == connectivity.Ready {
			break
		}
		if s == connectivity.TransientFailure {
			// Nothing serves the socket: the plugin registers once it serves, so this is
			// an answer, not a state to wait out.
			cc.Close()
			return nil, fmt.Errorf("%s: nothing serves the socket", socket)
		}
		if !cc.WaitForStateChange(ctx, s) {
			cc.Close()
			return nil, fmt.Errorf("%s: %w", socket, ctx.Err())
		}
	}
	return conn{DevicePluginClient: pluginapi.NewDevicePluginClient(cc), cc: cc}, nil
}

type conn struct {
	pluginapi.DevicePluginClient
	cc *grpc.ClientConn
}

func (c conn) Close() error { return c.cc.Close() }

// registrationServer is the Registration service on the registration socket.
type registrationServer struct {
	pluginapi.UnimplementedRegistrationServer
	m    *Manager
	grpc *grpc.Server
	wg   sync.WaitGroup
}

// Register implements pluginapi.RegistrationServer.
func (s *registrationServer) Register(ctx context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	if err := s.m.Register(ctx, r); err != nil {
		s.m.log.Warn("device plugin registration refused", "resource", r.GetResourceName(), "endpoint", r.GetEndpoint(), "error", err)
		return &pluginapi.Empty{}, err
	}
	return &pluginapi.Empty{}, nil
}

// Start reads the checkpoint, removes the sockets left in the plugin directory (making every
// plugin register again: they watch for the registration socket to be created) and serves the
// registration socket until Stop. The directory is created (0750) when missing.
func (m *Manager) Start() error {
	dir := m.opts.Dir
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("device plugin directory: %w", err)
	}
	if err := m.LoadCheckpoint(); err != nil {
		m.log.Error("device checkpoint not read: allocations of the last run are lost", "error", err)
	}
	if err := cleanupDir(dir); err != nil {
		return fmt.Errorf("device plugin directory %s: %w", dir, err)
	}
	sock := filepath.Join(dir, KubeletSocket)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("device plugin registration socket: %w", err)
	}
	srv := &registrationServer{m: m, grpc: grpc.NewServer(grpc.MaxRecvMsgSize(maxPluginMessage), grpc.MaxConcurrentStreams(maxConcurrentRegistrations))}
	pluginapi.RegisterRegistrationServer(srv.grpc, srv)
	m.mu.Lock()
	m.server = srv
	m.mu.Unlock()
	srv.wg.Add(1)
	go func() {
		defer srv.wg.Done()
		if err := srv.grpc.Serve(ln); err != nil {
			m.log.Error("device plugin registration server stopped", "error", err)
		}
	}()
	m.log.Info("device plugin registration socket serving", "socket", sock)
	return nil
}

// Stop stops serving the registration socket and closes the plugins' connections.
func (m *Manager) Stop() {
	m.mu.Lock()
	srv := m.server
	m.server = nil
	eps := m.endpoints
	m.endpoints = map[string]*endpoint{}
	m.mu.Unlock()
	if srv != nil {
		srv.grpc.Stop()
		srv.wg.Wait()
	}
	for _, ep := range eps {
		ep.conn.Close()
	}
}
