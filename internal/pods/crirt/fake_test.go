package crirt

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"
)

// fakeClock is a settable clock shared by the pod worker and the fake CRI server.
type fakeClock struct{ *testingclock.FakeClock }

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{testingclock.NewFakeClock(t)} }

// Advance moves the clock on by d.
func (c *fakeClock) Advance(d time.Duration) { c.Step(d) }

type fakeSandbox struct {
	sb  *runtimeapi.PodSandbox
	cfg *runtimeapi.PodSandboxConfig
}

type fakeContainer struct {
	c   *runtimeapi.Container
	st  *runtimeapi.ContainerStatus
	cfg *runtimeapi.ContainerConfig
}

// fakeCRI is an in-memory CRI runtime: containers run until the test ends them (exit).
type fakeCRI struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	clock *fakeClock

	mu         sync.Mutex
	features   *runtimeapi.RuntimeFeatures // what Status reports
	next       int
	sandboxes  map[string]*fakeSandbox
	containers map[string]*fakeContainer
	images     map[string]*runtimeapi.Image // by id
	pulls      []string
	removals   []string
	calls      map[string]int
	createErr  error
	pullErr    error
	// stopErrs are answered by the next StopContainer calls, in order; exitOnStop says
	// whether the container ends anyway (containerd's kill that raced the exit).
	stopErrs   []error
	exitOnStop bool
	fsInfo     *runtimeapi.ImageFsInfoResponse
	// streams are the Exec, Attach, PortForward and ExecSync requests received, in order;
	// execSync answers ExecSync (streaming_test.go).
	streams  []proto.Message
	execSync *runtimeapi.ExecSyncResponse
}

func newFakeCRI(clock *fakeClock) *fakeCRI {
	return &fakeCRI{
		clock: clock, sandboxes: map[string]*fakeSandbox{}, containers: map[string]*fakeContainer{},
		images: map[string]*runtimeapi.Image{}, calls: map[string]int{},
	}
}

func (f *fakeCRI) id(prefix string) string {
	f.next++
	return fmt.Sprintf("%s%04d", prefix, f.next)
}

func (f *fakeCRI) count(name string) {
	f.calls[name]++
}

func (f *fakeCRI) addImage(id string, size uint64, tags ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images[id] = &runtimeapi.Image{Id: id, RepoTags: tags, Size: size}
}

func matches(labels, sel map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func (f *fakeCRI) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "fake", RuntimeVersion: "1", RuntimeApiVersion: "v1"}, nil
}

func (f *fakeCRI) Status(_ context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	f.mu.Lock()
	resp := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{}, Features: f.features}
	f.mu.Unlock()
	if req.Verbose {
		resp.Info = map[string]string{"config": `{"sandboxImage":"example.test/pause:from-runtime","other":1}`}
	}
	return resp, nil
}

func (f *fakeCRI) RunPodSandbox(_ context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("RunPodSandbox")
	id := f.id("sb")
	f.sandboxes[id] = &fakeSandbox{cfg: req.Config, sb: &runtimeapi.PodSandbox{
		Id: id, Metadata: req.Config.Metadata, State: runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt: f.clock.Now().UnixNano(), Labels: req.Config.Labels, Annotations: req.Config.Annotations,
	}}
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

func (f *fakeCRI) StopPodSandbox(_ context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("StopPodSandbox")
	sb := f.sandboxes[req.PodSandboxId]
	if sb == nil {
		return nil, status.Error(codes.NotFound, "no such sandbox")
	}
	sb.sb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	for _, c := range f.containers {
		if c.c.PodSandboxId == sb.sb.Id && c.c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			f.exitLocked(c, 137, "Error")
		}
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

func (f *fakeCRI) RemovePodSandbox(_ context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removals = append(f.removals, "sandbox "+req.PodSandboxId)
	delete(f.sandboxes, req.PodSandboxId)
	for id, c := range f.containers {
		if c.c.PodSandboxId == req.PodSandboxId {
			delete(f.containers, id)
		}
	}
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

func (f *fakeCRI) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("ListPodSandbox")
	var out []*runtimeapi.PodSandbox
	for _, sb := range f.sandboxes {
		if fl := req.Filter; fl != nil && (!matches(sb.sb.Labels, fl.LabelSelector) || (fl.Id != "" && fl.Id != sb.sb.Id)) {
			continue
		}
		out = append(out, sb.sb)
	}
	return &runtimeapi.ListPodSandboxResponse{Items: out}, nil
}

func (f *fakeCRI) CreateContainer(_ context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("CreateContainer")
	if f.createErr != nil {
		return nil, f.createErr
	}
	sb := f.sandboxes[req.PodSandboxId]
	if sb == nil {
		return nil, status.Error(codes.NotFound, "no such sandbox")
	}
	id := f.id("c")
	now := f.clock.Now().UnixNano()
	c := &runtimeapi.Container{
		Id: id, PodSandboxId: req.PodSandboxId, Metadata: req.Config.Metadata, Image: req.Config.Image,
		ImageRef: req.Config.Image.Image, State: runtimeapi.ContainerState_CONTAINER_CREATED, CreatedAt: now,
		Labels: req.Config.Labels, Annotations: req.Config.Annotations,
	}
	st := &runtimeapi.ContainerStatus{
		Id: id, Metadata: req.Config.Metadata, State: c.State, CreatedAt: now, ImageRef: c.ImageRef,
		Labels: c.Labels, Annotations: c.Annotations, LogPath: filepath.Join(sb.cfg.LogDirectory, req.Config.LogPath),
	}
	f.containers[id] = &fakeContainer{c: c, st: st, cfg: req.Config}
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

func (f *fakeCRI) StartContainer(_ context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("StartContainer")
	c := f.containers[req.ContainerId]
	if c == nil {
		return nil, status.Error(codes.NotFound, "no such container")
	}
	c.c.State, c.st.State = runtimeapi.ContainerState_CONTAINER_RUNNING, runtimeapi.ContainerState_CONTAINER_RUNNING
	c.st.StartedAt = f.clock.Now().UnixNano()
	return &runtimeapi.StartContainerResponse{}, nil
}

func (f *fakeCRI) exitLocked(c *fakeContainer, code int32, reason string) {
	c.c.State, c.st.State = runtimeapi.ContainerState_CONTAINER_EXITED, runtimeapi.ContainerState_CONTAINER_EXITED
	c.st.ExitCode, c.st.Reason, c.st.FinishedAt = code, reason, f.clock.Now().UnixNano()
}

// exit ends the running container of a pod's container name.
func (f *fakeCRI) exit(t *testing.T, name string, code int32) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.containers {
		if c.cfg.Metadata.Name == name && c.c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			reason := "Completed"
			if code != 0 {
				reason = "Error"
			}
			f.exitLocked(c, code, reason)
			return
		}
	}
	t.Fatalf("fake: no running container %s", name)
}

func (f *fakeCRI) StopContainer(_ context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("StopContainer")
	c := f.containers[req.ContainerId]
	if c == nil {
		return nil, status.Error(codes.NotFound, "no such container")
	}
	if len(f.stopErrs) > 0 {
		err := f.stopErrs[0]
		f.stopErrs = f.stopErrs[1:]
		if f.exitOnStop && c.c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			f.exitLocked(c, 0, "Completed")
		}
		return nil, err
	}
	if c.c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		f.exitLocked(c, 0, "Completed")
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

func (f *fakeCRI) RemoveContainer(_ context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removals = append(f.removals, "container "+req.ContainerId)
	delete(f.containers, req.ContainerId)
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (f *fakeCRI) ListContainers(_ context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("ListContainers")
	var out []*runtimeapi.Container
	for _, c := range f.containers {
		if fl := req.Filter; fl != nil && (!matches(c.c.Labels, fl.LabelSelector) || (fl.Id != "" && fl.Id != c.c.Id)) {
			continue
		}
		out = append(out, proto.Clone(c.c).(*runtimeapi.Container))
	}
	return &runtimeapi.ListContainersResponse{Containers: out}, nil
}

func (f *fakeCRI) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("ContainerStatus")
	c := f.containers[req.ContainerId]
	if c == nil {
		return nil, status.Error(codes.NotFound, "no such container")
	}
	return &runtimeapi.ContainerStatusResponse{Status: proto.Clone(c.st).(*runtimeapi.ContainerStatus)}, nil
}

func (f *fakeCRI) findImage(ref string) *runtimeapi.Image {
	for _, img := range f.images {
		if img.Id == ref {
			return img
		}
		for _, t := range img.RepoTags {
			if t == ref {
				return img
			}
		}
	}
	return nil
}

func (f *fakeCRI) ImageStatus(_ context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &runtimeapi.ImageStatusResponse{Image: f.findImage(req.Image.Image)}, nil
}

func (f *fakeCRI) PullImage(_ context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pulls = append(f.pulls, req.Image.Image)
	if f.pullErr != nil {
		return nil, f.pullErr
	}
	img := f.findImage(req.Image.Image)
	if img == nil {
		img = &runtimeapi.Image{Id: "sha256:pulled-" + req.Image.Image, RepoTags: []string{req.Image.Image}, Size: 1}
		f.images[img.Id] = img
	}
	return &runtimeapi.PullImageResponse{ImageRef: img.Id}, nil
}

func (f *fakeCRI) ListImages(context.Context, *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*runtimeapi.Image
	for _, img := range f.images {
		out = append(out, img)
	}
	return &runtimeapi.ListImagesResponse{Images: out}, nil
}

func (f *fakeCRI) RemoveImage(_ context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removals = append(f.removals, "image "+req.Image.Image)
	if img := f.findImage(req.Image.Image); img != nil {
		delete(f.images, img.Id)
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

func (f *fakeCRI) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fsInfo == nil {
		return &runtimeapi.ImageFsInfoResponse{}, nil
	}
	return f.fsInfo, nil
}

// fakeServer serves a fakeCRI on a unix socket; it can be stopped and served again on the same
// socket (a runtime restart).
type fakeServer struct {
	cri    *fakeCRI
	socket string
	mu     sync.Mutex
	srv    *grpc.Server
}

// shortDir is a temporary directory with a short path (unix socket paths are limited to 107
// bytes, and t.TempDir's carries the test name).
func shortDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "crirt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func startFake(t testing.TB, cri *fakeCRI) *fakeServer {
	t.Helper()
	s := &fakeServer{cri: cri, socket: filepath.Join(shortDir(t), "cri.sock")}
	s.serve(t)
	t.Cleanup(s.stop)
	return s
}

func (s *fakeServer) endpoint() string { return "unix://" + s.socket }

func (s *fakeServer) serve(t testing.TB) {
	t.Helper()
	_ = os.Remove(s.socket)
	lis, err := net.Listen("unix", s.socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, s.cri)
	runtimeapi.RegisterImageServiceServer(srv, s.cri)
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	go func() { _ = srv.Serve(lis) }()
}

func (s *fakeServer) stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Stop()
	}
}

// removals returns what the fake was asked to remove.
func (f *fakeCRI) removed() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.removals, ",")
}
