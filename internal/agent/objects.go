package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/slicelet/slicelet/internal/api"
	"github.com/slicelet/slicelet/internal/pods/source"
)

// The backend serves ConfigMaps and Secrets (api.ObjectBackend).
var _ api.ObjectBackend = (*backend)(nil)

// ListObjects lists the ConfigMaps or Secrets of both sources: names and key counts only.
func (b *backend) ListObjects(_ context.Context, kind string) ([]api.ObjectSummary, error) {
	refs, err := b.objects.List(kind)
	if err != nil {
		return nil, &api.InvalidError{Problems: []string{err.Error()}}
	}
	out := make([]api.ObjectSummary, 0, len(refs))
	for _, r := range refs {
		out = append(out, api.ObjectSummary{Kind: objectKind(kind), Namespace: r.Namespace, Name: r.Name, Source: r.Source, Keys: r.Keys})
	}
	return out, nil
}

// objectKind is the manifest kind of an API path segment.
func objectKind(kind string) string {
	if kind == api.KindSecrets {
		return source.KindSecret
	}
	return source.KindConfigMap
}

// ApplyObject stores an API ConfigMap or Secret.
func (b *backend) ApplyObject(_ context.Context, kind string, manifest []byte, dryRun bool) (api.ObjectSummary, error) {
	res, err := b.objStore.ApplyObject(manifest, objectKind(kind), dryRun)
	if errors.Is(err, source.ErrInvalid) {
		return api.ObjectSummary{}, &api.InvalidError{Problems: []string{err.Error()}}
	}
	if err != nil {
		return api.ObjectSummary{}, err
	}
	return api.ObjectSummary{Kind: res.Kind, Namespace: res.Namespace, Name: res.Name, Source: "api", Keys: res.Keys, Action: res.Action, DryRun: dryRun}, nil
}

// DeleteObject deletes an API ConfigMap or Secret.
func (b *backend) DeleteObject(_ context.Context, kind, namespace, name string) error {
	err := b.objStore.DeleteObject(objectKind(kind), namespace, name)
	if errors.Is(err, source.ErrObjectNotFound) {
		return fmt.Errorf("%w: %w", api.ErrNotFound, err)
	}
	return err
}

// nodeIPs are the node's global unicast addresses, IPv4 first: the IPs of host-network pods
// (status.podIP, status.hostIP in the Downward API, where their probes go). None when the
// interfaces cannot be read (the worker falls back to the loopback).
func nodeIPs(log *slog.Logger) []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		log.Warn("node IPs unknown; pods see 127.0.0.1", "error", err)
		return nil
	}
	var v4, v6 []string
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || !n.IP.IsGlobalUnicast() {
			continue
		}
		if n.IP.To4() != nil {
			v4 = append(v4, n.IP.String())
		} else {
			v6 = append(v6, n.IP.String())
		}
	}
	return append(v4, v6...)
}
