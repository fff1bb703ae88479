//go:build !linux

package hierarchy

import (
	"errors"
	"time"
)

// CgroupFS is the Linux cgroup filesystem; elsewhere every operation fails.
type CgroupFS struct{ Root string }

var errNoCgroups = errors.New("cgroup filesystem: only available on Linux")

// NewCgroupFS returns a CgroupFS that fails on this OS.
func NewCgroupFS(root string) *CgroupFS { return &CgroupFS{Root: root} }

// Dirs implements Cgroupfs.
func (c *CgroupFS) Dirs(string) []string { return nil }

// Pids implements Cgroupfs.
func (c *CgroupFS) Pids(string) ([]int, error) { return nil, errNoCgroups }

// Kill implements Cgroupfs.
func (c *CgroupFS) Kill(string, time.Duration) (KillResult, error) { return KillResult{}, errNoCgroups }

// Remove implements Cgroupfs.
func (c *CgroupFS) Remove(string) error { return errNoCgroups }

// HasController implements Cgroupfs.
func (c *CgroupFS) HasController(string) bool { return false }

// Write implements Cgroupfs.
func (c *CgroupFS) Write(string, string, string, string) error { return errNoCgroups }

// Read implements Cgroupfs.
func (c *CgroupFS) Read(string, string, string) (string, error) { return "", errNoCgroups }
