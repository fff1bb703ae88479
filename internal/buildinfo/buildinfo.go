// Package buildinfo holds the version stamped into the binaries at link time.
package buildinfo

// Version is set with -ldflags "-X github.com/slicelet/slicelet/internal/buildinfo.Version=...".
var Version = "dev"
