package cluster

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"slices"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// ClusterTrustBundleClient is the node's access to ClusterTrustBundles (cluster-scoped; the
// system:node role reads them all).
type ClusterTrustBundleClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*certificatesv1.ClusterTrustBundle, error)
	List(ctx context.Context, opts metav1.ListOptions) (*certificatesv1.ClusterTrustBundleList, error)
}

// Bounds of a clusterTrustBundle projection: the kubelet's maxLabelSelectorLength
// (pkg/kubelet/clustertrustbundle), and what one projection may hold, as a ConfigMap or a
// Secret (1 MiB each) at most 16 of them.
const (
	maxTrustBundleSelector = 100 * 1024
	maxTrustAnchorsBytes   = 16 << 20
	// trustBundlePage is the page size of the list of a signer's bundles.
	trustBundlePage = 500
)

// TrustAnchors are the certificates src projects (the kubelet's clustertrustbundle manager,
// GetTrustAnchorsByName and GetTrustAnchorsBySigner): the bundle src names, or every bundle
// of src's signer its label selector matches (a nil selector matches none). A missing bundle,
// or a signer and selector that match none, is an error unless src is optional (then the
// file is empty).
func (o *Objects) TrustAnchors(src *v1.ClusterTrustBundleProjection) ([]byte, error) {
	if o.trustBundles == nil {
		return nil, errors.New("ClusterTrustBundle projection needs an API server's ClusterTrustBundles")
	}
	allowMissing := src.Optional != nil && *src.Optional
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	switch {
	case src.Name != nil:
		ctb, err := o.trustBundles.Get(ctx, *src.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && allowMissing {
			return []byte{}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("while getting ClusterTrustBundle: %w", err)
		}
		return NormalizeTrustAnchors([]string{ctb.Spec.TrustBundle}), nil
	case src.SignerName != nil:
		selector, err := metav1.LabelSelectorAsSelector(src.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("while parsing label selector: %w", err)
		}
		if n := len(selector.String()); n > maxTrustBundleSelector {
			return nil, fmt.Errorf("label selector length (%d) is larger than %d", n, maxTrustBundleSelector)
		}
		var bundles []string
		if src.LabelSelector != nil {
			// A nil selector is labels.Nothing(), which matches no bundle: nothing to ask.
			opts := metav1.ListOptions{LabelSelector: selector.String(), Limit: trustBundlePage,
				FieldSelector: fields.OneTermEqualSelector("spec.signerName", *src.SignerName).String()}
			size := 0
			for {
				list, err := o.trustBundles.List(ctx, opts)
				if err != nil {
					return nil, fmt.Errorf("while listing ClusterTrustBundles matching label selector %v: %w", src.LabelSelector, err)
				}
				for _, ctb := range list.Items {
					if ctb.Spec.SignerName != *src.SignerName {
						continue
					}
					if size += len(ctb.Spec.TrustBundle); size > maxTrustAnchorsBytes {
						return nil, fmt.Errorf("the ClusterTrustBundles of signer %s hold more than %d bytes", *src.SignerName, maxTrustAnchorsBytes)
					}
					bundles = append(bundles, ctb.Spec.TrustBundle)
				}
				if list.Continue == "" {
					break
				}
				opts.Continue = list.Continue
			}
		}
		if len(bundles) == 0 {
			if allowMissing {
				return []byte{}, nil
			}
			return nil, errors.New("combination of signerName and labelSelector matched zero ClusterTrustBundles")
		}
		return NormalizeTrustAnchors(bundles), nil
	}
	return nil, errors.New("ClusterTrustBundle projection requires either name or signerName to be set")
}

// NormalizeTrustAnchors is the certificates of the PEM bundles, each once, re-encoded as
// CERTIFICATE blocks without headers (the kubelet's normalizeTrustAnchors). The kubelet
// shuffles them once per cache entry so that no consumer relies on an order; they are in the
// order of their DER bytes here, so the projected file changes only when the set does.
func NormalizeTrustAnchors(bundles []string) []byte {
	set := map[string]bool{}
	for _, b := range bundles {
		rest := []byte(b)
		for {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			set[string(block.Bytes)] = true
		}
	}
	out := []byte{}
	for _, der := range slices.Sorted(maps.Keys(set)) {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte(der)})...)
	}
	return out
}
