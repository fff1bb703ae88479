package critest

import (
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

func TestRegistryHostsFile(t *testing.T) {
	for _, tc := range []struct {
		name, host, mirror string
		wantPath, wantHost string
		wantErr            string
	}{
		{name: "http mirror", host: "registry.k8s.io", mirror: "http://10.250.0.1:5000",
			wantPath: "/d/registry.k8s.io/hosts.toml", wantHost: "http://10.250.0.1:5000"},
		{name: "trailing slash", host: "docker.io", mirror: "https://mirror.example:443/",
			wantPath: "/d/docker.io/hosts.toml", wantHost: "https://mirror.example:443"},
		{name: "registry with a port", host: "localhost:5000", mirror: "http://127.0.0.1:5001",
			wantPath: "/d/localhost:5000/hosts.toml", wantHost: "http://127.0.0.1:5001"},
		{name: "host with a path", host: "../etc", mirror: "http://127.0.0.1:5000", wantErr: `registry host "../etc"`},
		{name: "empty host", host: "", mirror: "http://127.0.0.1:5000", wantErr: `registry host ""`},
		{name: "no scheme", host: "registry.k8s.io", mirror: "10.250.0.1:5000", wantErr: "want http(s)://host[:port]"},
		{name: "a path on the mirror", host: "registry.k8s.io", mirror: "http://10.250.0.1:5000/v2", wantErr: "want http(s)://host[:port]"},
		{name: "other scheme", host: "registry.k8s.io", mirror: "oci://10.250.0.1", wantErr: "want http(s)://host[:port]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, data, err := registryHostsFile("/d", tc.host, tc.mirror)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if path != tc.wantPath {
				t.Errorf("path %s, want %s", path, tc.wantPath)
			}
			// Read back as containerd reads it (remotes/docker/config: host tables keyed by URL).
			var got struct {
				Server string `toml:"server"`
				Host   map[string]struct {
					Capabilities []string `toml:"capabilities"`
				} `toml:"host"`
			}
			if _, err := toml.Decode(string(data), &got); err != nil {
				t.Fatalf("hosts.toml %q: %v", data, err)
			}
			h, ok := got.Host[tc.wantHost]
			if len(got.Host) != 1 || !ok || strings.Join(h.Capabilities, ",") != "pull,resolve" || got.Server != "" {
				t.Errorf("hosts.toml %q: want only host %s with pull and resolve", data, tc.wantHost)
			}
		})
	}
}
