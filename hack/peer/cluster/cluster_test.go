package cluster

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/slicelet/slicelet/hack/peer/peerrun"
	"github.com/slicelet/slicelet/internal/testharness/critest"
)

func TestNodeIP(t *testing.T) {
	for _, tc := range []struct {
		i       int
		want    string
		wantErr bool
	}{
		{0, "10.250.0.2", false},
		{1, "10.250.0.3", false},
		{MaxNodes - 1, "10.250.0.17", false},
		{MaxNodes, "", true},
		{-1, "", true},
	} {
		got, err := NodeIP(tc.i)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("NodeIP(%d) = %q, %v; want %q, error %v", tc.i, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseNodes(t *testing.T) {
	for _, tc := range []struct {
		name, list string
		want       []NodeSpec
		err        string
	}{
		{"two slicelet nodes", "slicelet,slicelet", []NodeSpec{{"slicelet-1", peerrun.Slicelet}, {"slicelet-2", peerrun.Slicelet}}, ""},
		{"mixed", "kubelet, slicelet", []NodeSpec{{"kubelet-1", peerrun.Kubelet}, {"slicelet-2", peerrun.Slicelet}}, ""},
		{"unknown agent", "kubelet,docker", nil, `node 2: agent "docker"`},
		{"empty entry", "kubelet,", nil, `node 2: agent ""`},
		{"too many", strings.Repeat("kubelet,", MaxNodes) + "kubelet", nil, "at most 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseNodes(tc.list)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("ParseNodes(%q) = %v, %v; want %v", tc.list, got, err, tc.want)
			}
		})
	}
}

// TestNodeSteps: the veth is made in the control plane's namespace and its peer moved into the
// node's as eth0; every other step runs in the node's namespace; the node's forwarding is on.
func TestNodeSteps(t *testing.T) {
	steps, err := nodeSteps("slicelet-2", 1, 4242)
	if err != nil {
		t.Fatal(err)
	}
	var cp, node []string
	for _, s := range steps {
		line := strings.Join(s.Argv, " ")
		switch s.In {
		case "":
			cp = append(cp, line)
		case "slicelet-2":
			node = append(node, line)
		default:
			t.Errorf("step %q in %q", line, s.In)
		}
	}
	for _, want := range []string{"ip link add veth1 type veth peer name eth0 netns 4242", "ip link set veth1 master peerbr0 up"} {
		if !slices.Contains(cp, want) {
			t.Errorf("control plane's steps %q lack %q", cp, want)
		}
	}
	for _, want := range []string{"ip address add 10.250.0.3/24 dev eth0", "ip route add default via 10.250.0.1",
		"sh -c echo 1 > /proc/sys/net/ipv4/ip_forward"} {
		if !slices.Contains(node, want) {
			t.Errorf("node's steps %q lack %q", node, want)
		}
	}
	if _, err := nodeSteps("n", MaxNodes, 1); err == nil {
		t.Error("a node beyond MaxNodes got steps")
	}
}

// TestPodRouteStep: a node's pod CIDR is routed to its address in the control plane's
// namespace (the API server reaching pods).
func TestPodRouteStep(t *testing.T) {
	s := podRouteStep("10.244.1.0/24", "10.250.0.3")
	if got, want := strings.Join(s.Argv, " "), "ip route replace 10.244.1.0/24 via 10.250.0.3"; s.In != "" || got != want {
		t.Errorf("step %q in %q, want %q in the control plane's namespace", got, s.In, want)
	}
}

// TestAddons: every add-on manifest renders and decodes strictly into API objects; the
// DaemonSets and the Deployments run the images built here, never pulled when present; the
// kube-dns Service has the cluster DNS address; the metrics API is served by the
// metrics-server Service.
func TestAddons(t *testing.T) {
	images := map[string]bool{}
	var dnsIP string
	var metricsAPI *apiregistrationv1.ServiceReference
	for _, name := range Addons {
		data, err := RenderAddon(name)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeAll(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, o := range objs {
			var spec *v1.PodSpec
			switch o := o.(type) {
			case *appsv1.DaemonSet:
				spec = &o.Spec.Template.Spec
			case *appsv1.Deployment:
				spec = &o.Spec.Template.Spec
			case *v1.Service:
				if o.Name == "kube-dns" {
					dnsIP = o.Spec.ClusterIP
				}
			case *apiregistrationv1.APIService:
				if o.Spec.Group == "metrics.k8s.io" {
					metricsAPI = o.Spec.Service
				}
			}
			if spec == nil {
				continue
			}
			for _, c := range spec.Containers {
				images[c.Image] = true
				if c.ImagePullPolicy != v1.PullIfNotPresent {
					t.Errorf("%s: container %s: pull policy %q", name, c.Name, c.ImagePullPolicy)
				}
			}
		}
	}
	for _, want := range []string{KubeProxyImage, FlannelImage, CoreDNSImage, MetricsServerImage} {
		if !images[want] {
			t.Errorf("no container runs %s (images: %v)", want, images)
		}
	}
	if dnsIP != DNSServiceIP {
		t.Errorf("kube-dns cluster IP %q, want %q", dnsIP, DNSServiceIP)
	}
	if metricsAPI == nil || metricsAPI.Namespace != "kube-system" || metricsAPI.Name != "metrics-server" {
		t.Errorf("metrics.k8s.io APIService served by %+v, want kube-system/metrics-server", metricsAPI)
	}
}

// addonScheme knows client-go's types and the APIService of the aggregation layer.
var addonScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := scheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := apiregistrationv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// decodeAll decodes a multi-document YAML manifest strictly into typed objects.
func decodeAll(data []byte) ([]runtime.Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	codecs := serializer.NewCodecFactory(addonScheme, serializer.EnableStrict).UniversalDeserializer()
	var out []runtime.Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := codecs.Decode(doc, nil, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	ok := Options{Work: dir, BinDir: dir, AddonsDir: dir, Prefix: "w", Nodes: []NodeSpec{{"kubelet-1", peerrun.Kubelet}}}
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no nodes", func(o *Options) { o.Nodes = nil }, "no nodes"},
		{"no prefix", func(o *Options) { o.Prefix = "" }, "no sandbox name prefix"},
		{"relative work", func(o *Options) { o.Work = "build" }, `"build": want an absolute path`},
		{"node twice", func(o *Options) { o.Nodes = append(o.Nodes, o.Nodes[0]) }, "node kubelet-1 twice"},
		{"unknown agent", func(o *Options) { o.Nodes[0].Kind = "crio" }, `agent "crio"`},
		{"missing binaries", func(o *Options) {}, "make peer-build peer-addons-build"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			o.Nodes = slices.Clone(ok.Nodes)
			tc.edit(&o)
			if err := o.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestIptablesFiles: the iptables layer holds the multi-call binaries, their extensions, the
// libraries they load (the C library and the dynamic loader among them) and the command
// names as links.
func TestIptablesFiles(t *testing.T) {
	if _, err := os.Stat(iptablesBinaries[0]); err != nil {
		t.Skipf("SKIP: %v (apt-get install iptables)", err)
	}
	files, err := IptablesFiles()
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]critest.File{}
	for _, f := range files {
		paths[f.Path] = f
	}
	for _, want := range []string{"usr/sbin/xtables-nft-multi", "lib64/ld-linux-x86-64.so.2", "usr/lib/x86_64-linux-gnu/xtables/libxt_comment.so"} {
		if _, ok := paths[want]; !ok {
			t.Errorf("no %s among %d files", want, len(files))
		}
	}
	if !slices.ContainsFunc(files, func(f critest.File) bool { return strings.HasSuffix(f.Path, "/libc.so.6") }) {
		t.Error("no libc.so.6")
	}
	if l := paths["usr/sbin/iptables"].Link; l != "xtables-nft-multi" {
		t.Errorf("usr/sbin/iptables links to %q", l)
	}
}
