// Package buildinfo holds the version stamped into the binaries at link time.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Version is set with -ldflags "-X github.com/slicelet/slicelet/internal/buildinfo.Version=...".
var Version = "dev"

// GitCommit and BuildDate may be set with -ldflags -X like Version; when empty, Get reads the
// commit and its time from the VCS stamp the go command embeds (debug.ReadBuildInfo).
var (
	GitCommit = ""
	BuildDate = ""
)

// Info is what `slicectl version` and `slicelet --version` show, in the fields of kubectl
// version's (k8s.io/apimachinery/pkg/version.Info).
type Info struct {
	// Version is the release version ("dev" for an unstamped build).
	Version string `json:"version"`
	// GitCommit is the commit the binary was built from ("" if unknown); a "-dirty" suffix means
	// the work tree had changes.
	GitCommit string `json:"gitCommit"`
	// BuildDate is the commit's time, RFC 3339 ("" if unknown).
	BuildDate string `json:"buildDate"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"goVersion"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

// Get returns this binary's Info.
func Get() Info {
	i := Info{Version: Version, GitCommit: GitCommit, BuildDate: BuildDate, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return i
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if i.GitCommit == "" {
				i.GitCommit = s.Value
			}
		case "vcs.time":
			if i.BuildDate == "" {
				i.BuildDate = s.Value
			}
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && GitCommit == "" && i.GitCommit != "" {
		i.GitCommit += "-dirty"
	}
	return i
}
