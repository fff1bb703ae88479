package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/slicelet/slicelet"

// layer ranks: a package may import module packages of a lower rank only, except where group
// says otherwise.
const (
	leaf = iota
	adapter
	component
	configLayer
	wiring
	command
	harness // test-only helpers: imported by tests, never by product code
	tool    // developer commands under hack/ and packaging tests: import anything, imported by nothing
)

var layerNames = map[int]string{leaf: "leaf", adapter: "adapter", component: "component", configLayer: "config",
	wiring: "wiring", command: "command", harness: "test harness", tool: "tool"}

// pkgLayer is one package's (or package prefix's, ending in "/") place in the graph.
type pkgLayer struct {
	layer int
	// group names the component group; groups list which other groups they may import.
	group string
}

var layers = map[string]pkgLayer{
	"internal/health":     {layer: leaf},
	"internal/atomicfile": {layer: leaf},
	"internal/unixsock":   {layer: leaf},
	"internal/buildinfo":  {layer: leaf},
	"internal/logging":    {layer: leaf},
	"internal/execlimits": {layer: leaf},
	"internal/manpage":    {layer: leaf},

	"units":           {layer: adapter},
	"internal/procfs": {layer: adapter},
	// The API's own defaulting and Pod validation (k8s.io/kubernetes).
	"internal/kubevalidation": {layer: adapter},

	"slices": {layer: component, group: "core"},
	// The kubepods hierarchy's actuation (the manager over systemd and cgroupfs), apart from
	// the pure model and resource math it applies.
	"slices/hierarchy":       {layer: component, group: "hierarchy"},
	"eviction":               {layer: component, group: "core"},
	"gc":                     {layer: component, group: "core"},
	"internal/metrics":       {layer: component, group: "core"},
	"internal/pods":          {layer: component, group: "pods"},
	"internal/pods/":         {layer: component, group: "pods"},
	"internal/podstats":      {layer: component, group: "pods"},
	"internal/manifest":      {layer: component, group: "pods"},
	"internal/api":           {layer: component, group: "api"},
	"internal/cluster":       {layer: component, group: "cluster"},
	"internal/kubeletserver": {layer: component, group: "kubeletserver"},

	"config": {layer: configLayer},

	"internal/agent": {layer: wiring},

	"cmd/": {layer: command},

	// Every test harness lives under one test-only tree.
	"internal/testharness/": {layer: harness},
	"internal/layers":       {layer: harness},

	"hack/":                 {layer: tool},
	"packaging/installtest": {layer: tool},
	"packaging/mixin":       {layer: tool},
}

// groupImports says which component groups a component group may import ("core" components
// are independent of each other).
var groupImports = map[string][]string{
	"core": {},
	"pods": {"core", "pods"},
	"api":  {"core", "pods"},
	// Cluster mode feeds the pod controller and reads the pods' statuses.
	"cluster": {"core", "pods"},
	// The kubelet API serves the pod controller's pods, logs, streams and stats; it knows
	// nothing of the API-server client (its reviewers are interfaces it declares).
	"kubeletserver": {"core", "pods"},
	// The hierarchy's manager applies the pure model; the pod stack reaches it only through
	// the interface it declares (pods.Slices), never by import.
	"hierarchy": {"core"},
}

// confined are third-party imports only the given packages may use (their adapter).
var confined = []struct {
	prefix string
	owners []string
}{
	{"github.com/coreos/go-systemd/", []string{"units"}},
	{"github.com/godbus/dbus/", []string{"units"}},
	{"github.com/opencontainers/cgroups/systemd", []string{"units"}},
	{"github.com/prometheus/client_golang/", []string{"internal/metrics"}},
	// cAdvisor's model is what podstats describes the containers in for /metrics/cadvisor;
	// its collectors (lib/metrics) are the metrics package's.
	{"github.com/google/cadvisor/lib/model", []string{"internal/podstats", "internal/metrics"}},
	{"github.com/google/cadvisor/lib/metrics", []string{"internal/metrics"}},
	{"github.com/google/cadvisor/lib/container", []string{"internal/metrics"}},
	{"github.com/prometheus/procfs", []string{"internal/procfs"}},
	// The CRI's messages are the pod worker's vocabulary (its Runtime is CRI-shaped: sandbox and
	// container configurations): the worker and its two backends use them; gRPC stays crirt's.
	{"k8s.io/cri-api/", []string{"internal/pods/worker", "internal/pods/crirt", "internal/pods/systemdrt"}},
	// gRPC probes speak the gRPC health protocol (internal/pods/prober).
	// The device plugin and PodResources APIs (internal/pods/devices), CSI and plugin
	// registration (internal/pods/csi) are gRPC over unix sockets.
	{"google.golang.org/grpc", []string{"internal/pods/crirt", "internal/pods/prober", "internal/pods/devices", "internal/pods/csi"}},
	{"github.com/lmittmann/tint", []string{"internal/logging"}},
	// k8s.io/kubernetes is large and not meant as a library: one small adapter calls it.
	// The device manager's checkpoint is the kubelet's own format and checksum
	// (pkg/kubelet/cm/devicemanager/checkpoint), and its resource names the API's helper's.
	// Cluster mode's TLS bootstrap is the kubelet's own (pkg/kubelet/certificate/bootstrap).
	{"k8s.io/kubernetes/", []string{"internal/kubevalidation", "internal/pods/devices", "internal/cluster"}},
	// Talking to a Kubernetes API server is cluster mode's alone (slicectl's printers use
	// client-go's jsonpath, which talks to nothing); klog is how client-go logs, routed into
	// slog there.
	{"k8s.io/client-go/kubernetes", []string{"internal/cluster"}},
	{"k8s.io/client-go/rest", []string{"internal/cluster"}},
	{"k8s.io/client-go/gentype", []string{"internal/cluster"}},
	{"k8s.io/client-go/tools/", []string{"internal/cluster"}},
	{"k8s.io/client-go/informers", []string{"internal/cluster"}},
	{"k8s.io/klog/", []string{"internal/cluster"}},
}

// loggingPackages are what config must not import.
var loggingPackages = []string{"log", "log/slog", module + "/internal/logging", "github.com/lmittmann/tint",
	"github.com/go-logr/logr", "k8s.io/klog/v2", "github.com/coreos/go-systemd/v22/journal"}

// goPackage is what `go list -json` tells about one package.
type goPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// listPackages runs `go list -json ./...` at the module root.
func listPackages(t *testing.T) []goPackage {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the go command is needed to list the module's packages: %v", err)
		}
		t.Skipf("the go command is needed to list the module's packages: %v", err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goBin, "list", "-json", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages in %s; want the whole module", len(pkgs), root)
	}
	return pkgs
}

// classify returns the layer of a module package (relative path), and false when the table
// does not know it.
func classify(rel string) (pkgLayer, bool) {
	if l, ok := layers[rel]; ok {
		return l, true
	}
	best := ""
	for k := range layers {
		if strings.HasSuffix(k, "/") && strings.HasPrefix(rel, k) && len(k) > len(best) {
			best = k
		}
	}
	if best == "" {
		return pkgLayer{}, false
	}
	return layers[best], true
}

// allowed reports why importer may not import imported (module packages), or "".
func allowed(importer, imported pkgLayer) string {
	switch {
	case imported.layer == tool:
		return "a developer tool is imported by nothing"
	case importer.layer == tool || importer.layer == harness:
		return ""
	case imported.layer == harness:
		return "a test harness is for tests only"
	case imported.layer == command || imported.layer == wiring && importer.layer != command:
		return fmt.Sprintf("%s imports %s: only cmd imports the wiring", layerNames[importer.layer], layerNames[imported.layer])
	case imported.layer == configLayer && importer.layer < configLayer:
		return "components take their own options; only the wiring and cmd read config"
	case importer.layer == component && imported.layer == component:
		if !slices.Contains(groupImports[importer.group], imported.group) {
			return fmt.Sprintf("a %s component imports a %s component", importer.group, imported.group)
		}
		return ""
	case imported.layer >= importer.layer && importer.layer != command:
		return fmt.Sprintf("a %s imports a %s", layerNames[importer.layer], layerNames[imported.layer])
	}
	return ""
}

// TestImportRules checks every package's imports against the layers, the third-party
// boundaries and config's independence from logging.
func TestImportRules(t *testing.T) {
	for _, p := range listPackages(t) {
		rel, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok {
			t.Errorf("package %s is outside the module", p.ImportPath)
			continue
		}
		me, known := classify(rel)
		if !known {
			t.Errorf("package %s has no layer: add it to the table in internal/layers/layers_test.go", rel)
			continue
		}
		check := func(imports []string, test bool) {
			for _, imp := range imports {
				if other, ok := strings.CutPrefix(imp, module+"/"); ok {
					them, known := classify(other)
					if !known {
						continue // reported as its own package
					}
					if test && (them.layer == harness || me.layer == harness) {
						continue // tests may use any harness
					}
					if why := allowed(me, them); why != "" && !test {
						t.Errorf("%s imports %s: %s", rel, other, why)
					}
					if test && them.layer == configLayer && me.layer < configLayer {
						t.Errorf("%s (tests) imports config: %s", rel, "components take their own options; only the wiring and cmd read config")
					}
					continue
				}
				if test || me.layer == harness || me.layer == tool {
					continue
				}
				for _, c := range confined {
					if strings.HasPrefix(imp, c.prefix) && !slices.Contains(c.owners, rel) {
						t.Errorf("%s imports %s, which only %s may use", rel, imp, strings.Join(c.owners, ", "))
					}
				}
				if rel == "config" && slices.Contains(loggingPackages, imp) {
					t.Errorf("config imports the logging package %s", imp)
				}
			}
		}
		check(p.Imports, false)
		check(p.TestImports, true)
		check(p.XTestImports, true)
	}
}

// TestAllowed pins the rules on examples, so a change to allowed that breaks one shows here.
func TestAllowed(t *testing.T) {
	tests := []struct {
		from, to string
		ok       bool
	}{
		{"slices", "units", true},
		{"slices", "config", false},
		{"slices", "eviction", false},
		{"eviction", "internal/procfs", true},
		{"eviction", "internal/health", true},
		{"internal/pods/crirt", "slices", true},
		{"internal/pods", "eviction", true},
		{"internal/api", "internal/pods", true},
		{"internal/pods", "internal/api", false},
		{"units", "slices", false},
		{"internal/health", "units", false},
		{"config", "slices", true},
		{"config", "internal/agent", false},
		{"internal/agent", "config", true},
		{"cmd/slicectl", "config", true},
		{"cmd/slicelet", "internal/agent", true},
		{"internal/api", "internal/agent", false},
		{"slices", "internal/testharness/sandbox", false},
		{"internal/testharness/systemdtest", "internal/testharness/sandbox", true},
		{"hack/bench", "internal/agent", true},
		{"slices/hierarchy", "slices", true},
		{"slices", "slices/hierarchy", false},
		{"internal/pods", "slices/hierarchy", false},
		{"config", "slices/hierarchy", true},
		{"internal/kubeletserver", "internal/pods", true},
		{"internal/kubeletserver", "internal/cluster", false},
		{"internal/cluster", "internal/kubeletserver", false},
		{"internal/agent", "internal/kubeletserver", true},
	}
	for _, tt := range tests {
		from, _ := classify(tt.from)
		to, _ := classify(tt.to)
		if why := allowed(from, to); (why == "") != tt.ok {
			t.Errorf("%s → %s: allowed %v (%s), want %v", tt.from, tt.to, why == "", why, tt.ok)
		}
	}
}
