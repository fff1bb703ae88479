package agent

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/eviction"
	"github.com/slicelet/slicelet/gc"
	"github.com/slicelet/slicelet/internal/buildinfo"
	"github.com/slicelet/slicelet/internal/pods"
	"github.com/slicelet/slicelet/internal/pods/crirt"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
	"github.com/slicelet/slicelet/internal/pods/systemdrt"
	"github.com/slicelet/slicelet/internal/pods/worker"
	"github.com/slicelet/slicelet/internal/podstats"
	"github.com/slicelet/slicelet/slices"
	"github.com/slicelet/slicelet/slices/hierarchy"
	"github.com/slicelet/slicelet/units"
)

// podRuntime is the configured container runtime behind the pod worker, with each part that
// another component needs given to it explicitly: nothing asks a runtime what it can do.
type podRuntime struct {
	worker *worker.Worker
	// containers is container GC's view (through the worker); sandboxes sandbox GC's, nil
	// when the runtime's pods have no sandboxes of their own (systemd).
	containers gc.ContainerRuntime
	sandboxes  gc.SandboxRuntime
	// images is image GC's view, nil without images (systemd).
	images gc.ImageRuntime
	// storage tells the eviction manager where pods keep local storage.
	storage eviction.FSStorageOptions
	// namer names the containers of a pod's child cgroups (podstats).
	namer podstats.Namer
	// imageFsPath is where the runtime keeps its images (imagefs.*), nil without images.
	imageFsPath func(ctx context.Context) (string, error)
	// close releases the runtime (the CRI connection).
	close func() error
	// version is the runtime's name://version for a Node's nodeInfo (the CRI runtime's
	// Version call; slicelet's own version for the built-in runtime).
	version func(ctx context.Context) (string, error)
	// streamer is the runtime's streaming for the kubelet API's exec, attach and
	// port-forward; nil without (systemd).
	streamer pods.Streamer
	// strictGroups reports whether the runtime applies supplementalGroupsPolicy Strict, for
	// admission; nil for a runtime that never does (systemd).
	strictGroups func() bool
	// network is nil while the runtime reports its pod network ready, else why not; nil
	// itself when pods use the host's network (runtime.network "host").
	network func(ctx context.Context) error
}

// workerOptions are the pod worker's options: extra, the worker's inputs from elsewhere in
// the daemon (probe and volume metrics, the objects pods use, the cluster's objects, the
// node's name, IPs, labels and allocatable, devices, CSI), whole, with what the
// configuration and the machine decide.
func workerOptions(cfg *config.Config, capacity slices.Capacity, mcfg hierarchy.Config, events worker.EventRecorder, extra worker.Options) worker.Options {
	wopts := extra
	wopts.Recorder = events
	wopts.MemoryCapacity = capacity.Memory
	wopts.HostPageSizes = capacity.PageSizes()
	wopts.Resources = mcfg.Pod
	// Every pod on the host's network unless the CRI runtime's CNI gives pods their own.
	wopts.HostNetwork = cfg.Runtime.Network != config.NetworkCNI
	// Localhost seccomp profiles, for either runtime (the kubelet's <root-dir>/seccomp).
	wopts.SeccompProfileRoot = filepath.Join(cfg.StateDir, "seccomp")
	// Local volumes on block devices are mounted beside the CSI plugin's staging paths (the
	// kubelet's <root-dir>/plugins).
	wopts.PluginsDir = filepath.Join(cfg.CSIRootDir(), "plugins")
	// Every pod's resolver configuration and FQDN, in either mode (the kubelet's
	// clusterDNS, clusterDomain and resolvConf).
	wopts.DNS = &lifecycle.NodeDNS{Servers: cfg.Cluster.DNSServers, Domain: cfg.Cluster.Domain, ResolvConf: cfg.Cluster.ResolvConf}
	return wopts
}

// newRuntime builds the configured container runtime and the pod worker over it. The CRI
// runtime connects lazily: an endpoint that is not up yet is retried with back-off (pods
// report Unknown meanwhile), so a daemon started before containerd comes up stays up.
func newRuntime(ctx context.Context, cfg *config.Config, sd *units.Manager, capacity slices.Capacity, mcfg hierarchy.Config, events worker.EventRecorder, extra worker.Options, log *slog.Logger) (*podRuntime, error) {
	wopts := workerOptions(cfg, capacity, mcfg, events, extra)
	pr := &podRuntime{close: func() error { return nil }}
	// logDirs are the runtime's log directories of a pod (CRI: under LogRoot; systemd: the
	// journal, none of the pod's own).
	var logDirs func(pod *v1.Pod) (containers map[string][]string, other []string)
	switch cfg.Runtime.Type {
	case config.RuntimeSystemd, "":
		state := filepath.Join(cfg.StateDir, "runtime")
		rt, err := systemdrt.New(systemdrt.Options{Systemd: sd, StateDir: state, Logger: log.With("runtime", "systemd"), SeccompProfileRoot: wopts.SeccompProfileRoot})
		if err != nil {
			return nil, err
		}
		wopts.Runtime, wopts.StateDir, wopts.Logger = rt, state, log.With("runtime", "systemd")
		pr.namer = rt
		pr.version = func(context.Context) (string, error) { return rt.Name() + "://" + buildinfo.Version, nil }
	case config.RuntimeCRI:
		rt, err := crirt.New(ctx, crirt.Options{
			Endpoint:     cfg.Runtime.Endpoint,
			SandboxImage: cfg.Runtime.SandboxImage,
			LogRoot:      podLogRoot,
			Logger:       log.With("runtime", "cri"),
		})
		if err != nil {
			return nil, err
		}
		wopts.Runtime, wopts.Images = rt, rt
		wopts.StateDir, wopts.Logger = filepath.Join(cfg.StateDir, "runtime-cri"), log.With("runtime", "cri")
		if cfg.Pods.KubeletRootDir != "" {
			wopts.KubeletPodsDir = filepath.Join(cfg.Pods.KubeletRootDir, "pods")
		}
		pr.images, pr.close, pr.namer, pr.version = rt, rt.Close, rt, rt.Version
		pr.imageFsPath = rt.ImageFsMountpoint
		pr.streamer = rt
		pr.strictGroups = rt.SupportsSupplementalGroupsPolicy
		if cfg.Runtime.Network == config.NetworkCNI {
			pr.network = rt.NetworkReady
		}
		pr.storage.Layers = func(ctx context.Context, pod *v1.Pod) (map[string]eviction.DiskUsage, error) {
			layers, err := rt.WritableLayers(ctx, pod)
			if err != nil {
				return nil, err
			}
			out := make(map[string]eviction.DiskUsage, len(layers))
			for name, u := range layers {
				out[name] = eviction.DiskUsage{Bytes: int64(min(u.Bytes, math.MaxInt64)), Inodes: int64(min(u.Inodes, math.MaxInt64))}
			}
			return out, nil
		}
		logDirs = rt.LogDirs
	default:
		return nil, fmt.Errorf("runtime.type %q: want \"systemd\" or \"cri\"", cfg.Runtime.Type)
	}
	w, err := worker.New(wopts)
	if err != nil {
		_ = pr.close()
		return nil, err
	}
	pr.worker, pr.containers = w, w.ContainerGC()
	pr.storage.Dirs = func(pod *v1.Pod) eviction.PodDirs {
		d := eviction.PodDirs{Volumes: w.EmptyDirs(pod)}
		if logDirs != nil {
			d.Containers, d.Other = logDirs(pod)
		}
		return d
	}
	if wopts.Images != nil {
		pr.sandboxes = w.SandboxGC()
	}
	return pr, nil
}

// teeRecorder hands every event to each of its recorders.
type teeRecorder []worker.EventRecorder

// Eventf records the event with every recorder.
func (t teeRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	for _, r := range t {
		r.Eventf(object, eventtype, reason, messageFmt, args...)
	}
}

// logRecorder is the recorder of the pods' events for now: they go to the log at debug level
// (the worker logs the same changes at info level). It is a worker.EventRecorder (the Eventf of
// client-go's record.EventRecorder).
type logRecorder struct{ log *slog.Logger }

// Eventf logs one event; object is the reference the worker records events with.
func (r logRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	attrs := []any{"type", eventtype, "reason", reason, "message", fmt.Sprintf(messageFmt, args...)}
	if ref, ok := object.(*v1.ObjectReference); ok {
		attrs = append(attrs, "pod", ref.Namespace+"/"+ref.Name, "pod_uid", string(ref.UID), "field", ref.FieldPath)
	}
	r.log.Debug("event", attrs...)
}
