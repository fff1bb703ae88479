package cluster

import (
	"bytes"
	"embed"
	"fmt"
	"net"
	"strconv"
	"text/template"

	"github.com/slicelet/slicelet/hack/peer/controlplane"
)

//go:embed addons/*.yaml
var addonFS embed.FS

// Addon names one add-on manifest (addons/<name>.yaml), in the order they are applied:
// kube-proxy first (flannel reaches the API server through the kubernetes Service), then the
// pod network, then cluster DNS, then the resource metrics API (kubectl top).
var Addons = []string{"kube-proxy", "flannel", "coredns", "metrics-server"}

// addonData fills the manifests' templates.
type addonData struct {
	Server, ClusterCIDR, DNSServiceIP, Domain                      string
	KubeProxyImage, FlannelImage, CoreDNSImage, MetricsServerImage string
}

// RenderAddon is the manifest of add-on name for this cluster's networks and images.
func RenderAddon(name string) ([]byte, error) {
	tmpl, err := template.ParseFS(addonFS, "addons/"+name+".yaml")
	if err != nil {
		return nil, fmt.Errorf("add-on %s: %w", name, err)
	}
	d := addonData{
		Server:      "https://" + net.JoinHostPort(ControlPlaneIP, strconv.Itoa(controlplane.DefaultAPIServerPort)),
		ClusterCIDR: ClusterCIDR, DNSServiceIP: DNSServiceIP, Domain: Domain,
		KubeProxyImage: KubeProxyImage, FlannelImage: FlannelImage, CoreDNSImage: CoreDNSImage,
		MetricsServerImage: MetricsServerImage,
	}
	var b bytes.Buffer
	if err := tmpl.Option("missingkey=error").Execute(&b, d); err != nil {
		return nil, fmt.Errorf("add-on %s: %w", name, err)
	}
	return b.Bytes(), nil
}
