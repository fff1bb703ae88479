package config

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// taintEffects are the effects a registered taint may have (k8s.io/api/core/v1).
var taintEffects = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}

// ParseTaint parses one taint in the kubelet's --register-with-taints syntax, "key=value:Effect"
// or "key:Effect" (pkg/util/taints/taints.go, parseTaint), with the API's rules for the key
// (a qualified name), the value (a label value) and the effect.
func ParseTaint(s string) (corev1.Taint, error) {
	i := strings.LastIndex(s, ":")
	if i < 0 || i == len(s)-1 {
		return corev1.Taint{}, fmt.Errorf("invalid taint %q: want key=value:Effect or key:Effect", s)
	}
	spec, effect := s[:i], s[i+1:]
	t := corev1.Taint{Effect: corev1.TaintEffect(effect)}
	t.Key, t.Value, _ = strings.Cut(spec, "=")
	if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
		return corev1.Taint{}, fmt.Errorf("invalid taint %q: key %q: %s", s, t.Key, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
		return corev1.Taint{}, fmt.Errorf("invalid taint %q: value %q: %s", s, t.Value, strings.Join(errs, "; "))
	}
	if !slices.Contains(taintEffects, t.Effect) {
		return corev1.Taint{}, fmt.Errorf("invalid taint %q: effect %q: want NoSchedule, PreferNoSchedule or NoExecute", s, effect)
	}
	return t, nil
}

// RegisterTaints returns [cluster] taints parsed. After a successful Load it cannot fail.
func (c Cluster) RegisterTaints() ([]corev1.Taint, error) {
	out := make([]corev1.Taint, 0, len(c.Taints))
	for _, s := range c.Taints {
		t, err := ParseTaint(s)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// validateCluster checks [cluster]. The keys are checked whether or not cluster mode is on (a
// mistake shows before it is turned on); the kubeconfig is required only when it is.
func (l *loader) validateCluster() {
	c := l.cfg.Cluster
	l.absolutePath(key("cluster", "kubeconfig"), c.Kubeconfig, c.Enabled)
	if c.NodeName != "" {
		if errs := validation.IsDNS1123Subdomain(c.NodeName); len(errs) > 0 {
			l.at(key("cluster", "node_name"), "invalid node name %q: %s", c.NodeName, strings.Join(errs, "; "))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.Labels)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			l.at(key("cluster", "labels", k), "invalid label key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(c.Labels[k]); len(errs) > 0 {
			l.at(key("cluster", "labels", k), "invalid label value %q: %s", c.Labels[k], strings.Join(errs, "; "))
		}
	}
	if c.NodeIP != "" && net.ParseIP(c.NodeIP) == nil {
		l.at(key("cluster", "node_ip"), "invalid IP address %q", c.NodeIP)
	}
	if c.KubeletPort < 0 || c.KubeletPort > 65535 {
		l.at(key("cluster", "kubelet_port"), "port %d is not between 0 and 65535", c.KubeletPort)
	}
	l.absolutePath(key("cluster", "tls_cert_file"), c.TLSCertFile, c.TLSPrivateKeyFile != "")
	l.absolutePath(key("cluster", "tls_private_key_file"), c.TLSPrivateKeyFile, c.TLSCertFile != "")
	l.absolutePath(key("cluster", "client_ca_file"), c.ClientCAFile, false)
	l.validateClusterCertificates()
	l.validateClusterDNS()
	seen := map[string]bool{}
	for _, s := range c.Taints {
		t, err := ParseTaint(s)
		if err != nil {
			l.at(key("cluster", "taints"), "%v", err)
			continue
		}
		// The API refuses two taints with the same key and effect (ValidateNodeSpec).
		if id := t.Key + ":" + string(t.Effect); seen[id] {
			l.at(key("cluster", "taints"), "taint %q: key %q with effect %s is listed twice", s, t.Key, t.Effect)
		} else {
			seen[id] = true
		}
	}
}

// validateClusterDNS checks the DNS keys of [cluster]: the servers are IP addresses, listed
// once; the domain is a DNS subdomain; the host resolver configuration an absolute path or "".
func (l *loader) validateClusterDNS() {
	c := l.cfg.Cluster
	seen := map[string]bool{}
	for _, s := range c.DNSServers {
		switch {
		case net.ParseIP(s) == nil:
			l.at(key("cluster", "dns_servers"), "invalid IP address %q", s)
		case seen[s]:
			l.at(key("cluster", "dns_servers"), "%q is listed twice", s)
		}
		seen[s] = true
	}
	if c.Domain != "" {
		if errs := validation.IsDNS1123Subdomain(c.Domain); len(errs) > 0 {
			l.at(key("cluster", "domain"), "invalid cluster domain %q: %s", c.Domain, strings.Join(errs, "; "))
		}
	}
	l.absolutePath(key("cluster", "resolv_conf"), c.ResolvConf, false)
}

// validateClusterCertificates checks the keys of the node's certificates: the TLS bootstrap,
// the cert directory and the rotation of the client and serving certificates.
func (l *loader) validateClusterCertificates() {
	c := l.cfg.Cluster
	l.absolutePath(key("cluster", "bootstrap_kubeconfig"), c.BootstrapKubeconfig, false)
	l.absolutePath(key("cluster", "cert_dir"), c.CertDir, false)
	switch {
	case c.BootstrapKubeconfig == "":
	case c.BootstrapKubeconfig == c.Kubeconfig:
		// The kubelet writes kubeconfig from the bootstrap one: the same file would lose the
		// bootstrap credentials at the first certificate.
		l.at(key("cluster", "bootstrap_kubeconfig"), "%q is also cluster.kubeconfig: the node's kubeconfig is written from the bootstrap one, so they must be two files", c.BootstrapKubeconfig)
	case !c.RotateCertificates:
		// The kubelet without rotation blocks its start until the bootstrap certificate is
		// signed, then lets it expire: the node is lost a year later.
		l.at(key("cluster", "bootstrap_kubeconfig"), "needs cluster.rotate_certificates = true: the client certificate is requested and then renewed by the certificate manager")
	}
	if c.ServerTLSBootstrap && c.KubeletPort == 0 {
		l.at(key("cluster", "server_tls_bootstrap"), "needs the kubelet API: cluster.kubelet_port is 0")
	}
}
