package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	bootstraptokenv1 "k8s.io/kubernetes/cmd/kubeadm/app/apis/bootstraptoken/v1"
	kubeadmconstants "k8s.io/kubernetes/cmd/kubeadm/app/constants"
	"k8s.io/kubernetes/cmd/kubeadm/app/phases/bootstraptoken/node"
	kubeconfigutil "k8s.io/kubernetes/cmd/kubeadm/app/util/kubeconfig"
)

// BootstrapToken prepares the TLS bootstrap of a node as kubeadm init and kubeadm join do, and
// writes the node's bootstrap kubeconfig to path: a bootstrap token Secret in kube-system (id
// and secret of token, "abcdef.0123456789abcdef" form, group
// system:bootstrappers:kubeadm:default-node-token, valid for ttl), and kubeadm's RBAC bindings:
// the token's group may create CertificateSigningRequests (system:node-bootstrapper) and has
// them auto-approved by the controller manager's csrapproving (nodeclient), and nodes have the
// renewal of their own client certificate auto-approved (selfnodeclient). admin is a cluster
// admin's client.
func (cp *ControlPlane) BootstrapToken(ctx context.Context, admin kubernetes.Interface, token string, ttl time.Duration, path string) error {
	ts, err := bootstraptokenv1.NewBootstrapTokenString(token)
	if err != nil {
		return fmt.Errorf("bootstrap token: %w", err)
	}
	bt := &bootstraptokenv1.BootstrapToken{Token: ts, Description: "hack/peer TLS bootstrap",
		TTL: &metav1.Duration{Duration: ttl}, Usages: []string{"signing", "authentication"},
		Groups: []string{kubeadmconstants.NodeBootstrapTokenAuthGroup}}
	if _, err := admin.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, bootstraptokenv1.BootstrapTokenToSecret(bt), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("bootstrap token secret: %w", err)
	}
	for _, grant := range []func(kubernetes.Interface) error{node.AllowBootstrapTokensToPostCSRs, node.AutoApproveNodeBootstrapTokens, node.AutoApproveNodeCertificateRotation} {
		if err := grant(admin); err != nil {
			return fmt.Errorf("bootstrap RBAC: %w", err)
		}
	}
	ca, err := os.ReadFile(cp.CAFile())
	if err != nil {
		return fmt.Errorf("bootstrap kubeconfig: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("bootstrap kubeconfig: %w", err)
	}
	kc := kubeconfigutil.CreateWithToken(cp.server, "peer", "tls-bootstrap-token-user", ca, token)
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("bootstrap kubeconfig %s: %w", path, err)
	}
	return nil
}
