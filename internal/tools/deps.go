//go:build tools

// Package tools pins dependencies that later work needs before code imports them.
package tools

import (
	_ "github.com/BurntSushi/toml"
	_ "github.com/coreos/go-systemd/v22/daemon"
	_ "github.com/coreos/go-systemd/v22/dbus"
	_ "github.com/coreos/go-systemd/v22/journal"
	_ "github.com/godbus/dbus/v5"
	_ "github.com/lmittmann/tint"
	_ "github.com/opencontainers/cgroups"
	_ "github.com/opencontainers/cgroups/systemd"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "golang.org/x/sys/unix"
	_ "google.golang.org/grpc"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/api/resource"
	_ "k8s.io/component-helpers/resource"
	_ "k8s.io/cri-api/pkg/apis/runtime/v1"
	_ "sigs.k8s.io/yaml"
)
