package podfields

import (
	"fmt"
	"strings"
)

// Markdown renders the registry as docs/pod-fields.md: one table row per entry, sorted by path.
func Markdown() string {
	var b strings.Builder
	b.WriteString("# Pod fields\n\n")
	b.WriteString("Generated from `internal/pods/podfields` (`go test ./internal/pods/podfields -run TestMarkdown -update`); do not edit.\n\n")
	b.WriteString("Every leaf field of `v1.Pod` is covered by one row (a row covers the fields below its path; the\n")
	b.WriteString("longest path wins). **implemented**: it has its effect, where said. **refused**: a manifest that\n")
	b.WriteString("sets it is invalid, with the field's path and this reason. **no node effect**: it changes\n")
	b.WriteString("nothing on the node, for the reason given. Rows under `spec.containers[*]` apply to\n")
	b.WriteString("`spec.initContainers[*]` too. **Cluster mode** says what differs for the pods a Kubernetes API\n")
	b.WriteString("server binds to a slicelet node (docs/cluster.md): their handling, and where the field takes effect\n")
	b.WriteString("or why it is refused there.\n\n")
	b.WriteString("| field | handling | where / why |\n|---|---|---|\n")
	for _, e := range Entries() {
		note := e.Note
		if e.Cluster != "" {
			note += ". **Cluster mode:** " + e.Cluster
		}
		note = strings.ReplaceAll(note, "|", "\\|")
		handling := string(e.Handling)
		if h, _ := e.In(APIServer); h != e.Handling {
			handling += "; cluster mode: " + string(h)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", e.Path, handling, note)
	}
	return b.String()
}
