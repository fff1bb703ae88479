package systemdrt

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/internal/atomicfile"
	"github.com/slicelet/slicelet/internal/pods/lifecycle"
)

// resolvConfPath is where a container's resolver configuration is read.
const resolvConfPath = "/etc/resolv.conf"

// sandboxResolvConf writes the sandbox's resolver configuration (PodSandboxConfig.DnsConfig,
// lifecycle.ResolvConf) to StateDir/pods/<uid>/resolv-<attempt>.conf, as containerd keeps one
// per sandbox, and returns its path; "" when the sandbox has none or it says what the host's
// own /etc/resolv.conf says (Options.HostResolvConf): host commands then read the host's file
// itself, as they always have.
func (r *Runtime) sandboxResolvConf(uid string, attempt uint32, dns *runtimeapi.DNSConfig) (string, error) {
	if dns == nil {
		return "", nil
	}
	want := lifecycle.DNSConfig{Servers: dns.GetServers(), Searches: dns.GetSearches(), Options: dns.GetOptions()}
	if data, err := os.ReadFile(r.opts.HostResolvConf); err == nil {
		if host, err := lifecycle.ParseResolvConf(data); err == nil && sameDNS(host, want) {
			return "", nil
		}
	}
	path := filepath.Join(r.podDir(uid), "resolv-"+strconv.FormatUint(uint64(attempt), 10)+".conf")
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return "", fmt.Errorf("resolv.conf: %w", err)
	}
	if err := atomicfile.WriteFile(path, lifecycle.ResolvConf(want)); err != nil {
		return "", fmt.Errorf("resolv.conf: %w", err)
	}
	// Readable by the containers' users, as the host's.
	if err := os.Chmod(path, 0o644); err != nil {
		return "", fmt.Errorf("resolv.conf: %w", err)
	}
	return path, nil
}

// sameDNS reports whether two resolver configurations say the same: servers and search
// domains in order, options as a set.
func sameDNS(a, b lifecycle.DNSConfig) bool {
	sa, sb := slices.Clone(a.Options), slices.Clone(b.Options)
	slices.Sort(sa)
	slices.Sort(sb)
	return slices.Equal(a.Servers, b.Servers) && slices.Equal(a.Searches, b.Searches) && slices.Equal(sa, sb)
}

// withResolvConf is the container's configuration with the sandbox's resolver configuration
// (path, "" for none) mounted read-only at /etc/resolv.conf, unless the container mounts a
// volume there itself (containerd's rule); config itself is not changed.
func withResolvConf(config *runtimeapi.ContainerConfig, path string) *runtimeapi.ContainerConfig {
	if path == "" {
		return config
	}
	for _, m := range config.GetMounts() {
		if m.GetContainerPath() == resolvConfPath {
			return config
		}
	}
	out := proto.Clone(config).(*runtimeapi.ContainerConfig)
	out.Mounts = append(out.Mounts, &runtimeapi.Mount{ContainerPath: resolvConfPath, HostPath: path, Readonly: true})
	return out
}
