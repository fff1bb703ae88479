package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/gc"
)

// explainGCUsage is the help of "slicectl explain gc".
const explainGCUsage = `Usage:
  slicectl explain gc images --state FILE [--config F] [-o json]
  slicectl explain gc containers --state FILE [--config F] [-o json]

Plans one image or container garbage collection offline, with the kubelet's rules and the
[gc.images] / [gc.containers] policy of the configuration, from a JSON state file:

  {
    "now": "2026-07-01T12:00:00Z",
    "started": "2026-07-01T00:00:00Z",            optional: slicelet's start (max age waits for it);
                                                   absent: long enough ago
    "imageFs": {"capacityBytes": 1000, "availableBytes": 100},     images only
    "sandboxImage": "registry.k8s.io/pause:3.10", optional: default [runtime] sandbox_image
    "images": [{"id": "sha256:…", "names": ["busybox:1"], "sizeBytes": 500,
                "firstDetected": "…", "lastUsed": "…" or null, "pinned": false}],  images only
    "containers": [{"id": "c1", "podUID": "…", "name": "web", "imageID": "sha256:…",
                    "state": "running|exited|created|unknown", "createdAt": "…"}],
    "deletedPods": ["<uid>", …],                  optional
    "terminatedPods": ["<uid>", …],               optional, used with evictNonDeletedPods
    "evictNonDeletedPods": false,                 optional
    "allSourcesReady": true                       optional
  }

Times are RFC 3339. Unknown fields are errors. The output (-o json) holds usagePercent,
amountToFree, remove (image IDs in deletion order), freedBytes and error (null, or the kubelet's
message) for images; remove (container IDs in removal order) for containers.
`

// explainGCCmd is "slicectl explain gc images|containers --state FILE [--config F] [-o json]".
func (c *cli) explainGCCmd(what string, pos []string, statePath string) error {
	configPath, configSet, output := c.global.configPath, c.global.configSet, c.global.output
	switch {
	case len(pos) > 0:
		return usageErr("explain gc %s: unexpected argument %q", what, pos[0])
	case output != "" && output != "json":
		return usageErr("explain gc %s: -o %q: only json is supported", what, output)
	case statePath == "":
		return usageErr("explain gc %s: --state FILE is required", what)
	}
	if !configSet {
		configPath = "" // the default file, which may be missing (then the defaults apply)
	}
	cfg, err := config.Load(configPath)
	if err != nil {
		return err
	}
	st, err := readGCState(statePath, what == "images")
	if err != nil {
		return err
	}
	if st.sandboxImage == "" {
		st.sandboxImage = cfg.Runtime.SandboxImage
	}
	if what == "images" {
		return explainImageGC(c.stdout, st, cfg.GC.Images, statePath, output == "json")
	}
	return explainContainerGC(c.stdout, st, cfg.GC.Containers, statePath, output == "json")
}

// gcState is a decoded, checked state file.
type gcState struct {
	now, started        time.Time
	fs                  gc.ImageFs
	sandboxImage        string
	images              []gc.Image
	containers          []gc.Container
	deleted, terminated map[string]bool
	evictNonDeletedPods bool
	allSourcesReady     bool
}

// The state file's JSON shapes. Pointers tell a missing field from a zero one.
type (
	gcStateJSON struct {
		Now                 *string           `json:"now"`
		Started             *string           `json:"started"`
		ImageFs             json.RawMessage   `json:"imageFs"`
		SandboxImage        string            `json:"sandboxImage"`
		Images              []json.RawMessage `json:"images"`
		Containers          []json.RawMessage `json:"containers"`
		DeletedPods         []string          `json:"deletedPods"`
		TerminatedPods      []string          `json:"terminatedPods"`
		EvictNonDeletedPods bool              `json:"evictNonDeletedPods"`
		AllSourcesReady     *bool             `json:"allSourcesReady"`
	}
	imageFsJSON struct {
		CapacityBytes  *int64 `json:"capacityBytes"`
		AvailableBytes *int64 `json:"availableBytes"`
	}
	imageJSON struct {
		ID            *string  `json:"id"`
		Names         []string `json:"names"`
		SizeBytes     *int64   `json:"sizeBytes"`
		FirstDetected *string  `json:"firstDetected"`
		LastUsed      *string  `json:"lastUsed"`
		Pinned        bool     `json:"pinned"`
	}
	containerJSON struct {
		ID        *string `json:"id"`
		PodUID    *string `json:"podUID"`
		Name      *string `json:"name"`
		ImageID   string  `json:"imageID"`
		SandboxID string  `json:"sandboxID"`
		State     *string `json:"state"`
		CreatedAt *string `json:"createdAt"`
	}
)

// readGCState reads and checks a state file; every error names the file and the field.
func readGCState(path string, images bool) (gcState, error) {
	var st gcState
	data, err := os.ReadFile(path)
	if err != nil {
		return st, fmt.Errorf("state file: %w", err)
	}
	wrap := func(err error) error { return fmt.Errorf("state file %s: %w", path, err) }
	var raw gcStateJSON
	if err := decodeStrict(data, &raw, ""); err != nil {
		return st, wrap(err)
	}
	if st.now, err = parseTime(raw.Now, "now", true); err != nil {
		return st, wrap(err)
	}
	if st.started, err = parseTime(raw.Started, "started", false); err != nil {
		return st, wrap(err)
	}
	st.sandboxImage = raw.SandboxImage
	st.evictNonDeletedPods = raw.EvictNonDeletedPods
	st.allSourcesReady = raw.AllSourcesReady == nil || *raw.AllSourcesReady
	st.deleted, st.terminated = set(raw.DeletedPods), set(raw.TerminatedPods)

	if raw.Containers == nil {
		return st, wrap(errors.New("containers: missing (use [] for none)"))
	}
	for i, m := range raw.Containers {
		c, err := decodeContainer(m, fmt.Sprintf("containers[%d]", i))
		if err != nil {
			return st, wrap(err)
		}
		st.containers = append(st.containers, c)
	}
	if !images {
		return st, nil
	}

	if isMissing(raw.ImageFs) {
		return st, wrap(errors.New("imageFs: missing"))
	}
	var fs imageFsJSON
	if err := decodeStrict(raw.ImageFs, &fs, "imageFs"); err != nil {
		return st, wrap(err)
	}
	if st.fs.CapacityBytes, err = nonNegative(fs.CapacityBytes, "imageFs.capacityBytes"); err != nil {
		return st, wrap(err)
	}
	if st.fs.AvailableBytes, err = nonNegative(fs.AvailableBytes, "imageFs.availableBytes"); err != nil {
		return st, wrap(err)
	}
	if raw.Images == nil {
		return st, wrap(errors.New("images: missing (use [] for none)"))
	}
	for i, m := range raw.Images {
		img, err := decodeImage(m, fmt.Sprintf("images[%d]", i))
		if err != nil {
			return st, wrap(err)
		}
		st.images = append(st.images, img)
	}
	return st, nil
}

func decodeImage(m json.RawMessage, where string) (gc.Image, error) {
	var img gc.Image
	var j imageJSON
	if isMissing(m) {
		return img, fmt.Errorf("%s: must be an object", where)
	}
	if err := decodeStrict(m, &j, where); err != nil {
		return img, err
	}
	if j.ID == nil || *j.ID == "" {
		return img, fmt.Errorf("%s.id: missing", where)
	}
	img.ID, img.Names, img.Pinned = *j.ID, j.Names, j.Pinned
	var err error
	if img.SizeBytes, err = nonNegative(j.SizeBytes, where+".sizeBytes"); err != nil {
		return img, err
	}
	if img.FirstDetected, err = parseTime(j.FirstDetected, where+".firstDetected", true); err != nil {
		return img, err
	}
	if img.LastUsed, err = parseTime(j.LastUsed, where+".lastUsed", false); err != nil {
		return img, err
	}
	return img, nil
}

func decodeContainer(m json.RawMessage, where string) (gc.Container, error) {
	var c gc.Container
	var j containerJSON
	if isMissing(m) {
		return c, fmt.Errorf("%s: must be an object", where)
	}
	if err := decodeStrict(m, &j, where); err != nil {
		return c, err
	}
	for _, f := range []struct {
		name string
		v    *string
		dst  *string
	}{{"id", j.ID, &c.ID}, {"podUID", j.PodUID, &c.PodUID}, {"name", j.Name, &c.Name}, {"state", j.State, &c.State}} {
		if f.v == nil || *f.v == "" {
			return c, fmt.Errorf("%s.%s: missing", where, f.name)
		}
		*f.dst = *f.v
	}
	switch c.State {
	case gc.StateRunning, gc.StateExited, gc.StateCreated, gc.StateUnknown:
	default:
		return c, fmt.Errorf("%s.state: %q: must be running, exited, created or unknown", where, c.State)
	}
	c.ImageID, c.SandboxID = j.ImageID, j.SandboxID
	var err error
	if c.CreatedAt, err = parseTime(j.CreatedAt, where+".createdAt", true); err != nil {
		return c, err
	}
	return c, nil
}

func isMissing(m json.RawMessage) bool {
	s := strings.TrimSpace(string(m))
	return s == "" || s == "null"
}

// parseTime parses an RFC 3339 time; absent or null is an error when required, else zero.
func parseTime(s *string, field string, required bool) (time.Time, error) {
	if s == nil {
		if required {
			return time.Time{}, fmt.Errorf("%s: missing", field)
		}
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %q is not an RFC 3339 time (e.g. 2026-07-01T12:00:00Z)", field, *s)
	}
	return t, nil
}

func nonNegative(v *int64, field string) (int64, error) {
	switch {
	case v == nil:
		return 0, fmt.Errorf("%s: missing", field)
	case *v < 0:
		return 0, fmt.Errorf("%s: %d must not be negative", field, *v)
	}
	return *v, nil
}

func set(list []string) map[string]bool {
	m := make(map[string]bool, len(list))
	for _, s := range list {
		m[s] = true
	}
	return m
}

// imageGCOutput is the JSON of "explain gc images".
type imageGCOutput struct {
	UsagePercent int                `json:"usagePercent"`
	AmountToFree int64              `json:"amountToFree"`
	Remove       []string           `json:"remove"`
	FreedBytes   int64              `json:"freedBytes"`
	Error        *string            `json:"error"`
	Removals     []imageRemovalJSON `json:"removals"`
	Kept         []keepJSON         `json:"kept"`
}

type imageRemovalJSON struct {
	ID        string    `json:"id"`
	SizeBytes int64     `json:"sizeBytes"`
	Reason    gc.Reason `json:"reason"`
}

type keepJSON struct {
	ID     string        `json:"id"`
	Reason gc.KeepReason `json:"reason"`
	Detail string        `json:"detail,omitempty"`
}

func explainImageGC(w io.Writer, st gcState, c config.ImageGC, path string, asJSON bool) error {
	policy := c.Policy()
	p := gc.PlanImageGC(st.fs, st.images, st.containers, st.sandboxImage, policy, st.now, st.started)
	if errors.Is(p.Err, gc.ErrInvalidInput) {
		return fmt.Errorf("state file %s: %w", path, p.Err)
	}
	out := imageGCOutput{
		UsagePercent: p.UsagePercent, AmountToFree: p.AmountToFree, FreedBytes: p.FreedBytes,
		Remove: []string{}, Removals: []imageRemovalJSON{}, Kept: []keepJSON{},
	}
	for _, r := range p.Remove {
		out.Remove = append(out.Remove, r.ID)
		out.Removals = append(out.Removals, imageRemovalJSON{r.ID, r.SizeBytes, r.Reason})
	}
	for _, k := range p.Kept {
		out.Kept = append(out.Kept, keepJSON{k.ID, k.Reason, k.Detail})
	}
	if p.Err != nil {
		msg := p.Err.Error()
		out.Error = &msg
	}
	if asJSON {
		return writeJSON(w, out)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Image filesystem:\tcapacity %d bytes, available %d bytes\n", st.fs.CapacityBytes, st.fs.AvailableBytes)
	fmt.Fprintf(tw, "Usage:\t%d%% (high threshold %d%%, low %d%%)\n", p.UsagePercent, policy.HighThresholdPercent, policy.LowThresholdPercent)
	fmt.Fprintf(tw, "Policy:\tminimum age %v, maximum age %v\n", policy.MinAge, orDisabled(policy.MaxAge))
	fmt.Fprintf(tw, "Amount to free:\t%d bytes\n", p.AmountToFree)
	fmt.Fprintf(tw, "Freed by the plan:\t%d bytes\n", p.FreedBytes)
	errText := "none"
	if out.Error != nil {
		errText = *out.Error
	}
	fmt.Fprintf(tw, "Error:\t%s\n", errText)
	tw.Flush()
	fmt.Fprintln(w)
	if len(p.Remove) == 0 {
		fmt.Fprintln(w, "Nothing to remove.")
	} else {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "#\tREMOVE\tSIZE\tREASON")
		for i, r := range p.Remove {
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\n", i+1, r.ID, r.SizeBytes, r.Reason)
		}
		tw.Flush()
	}
	if len(p.Kept) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEEP\tREASON\tDETAIL")
		for _, k := range p.Kept {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", k.ID, k.Reason, k.Detail)
		}
		tw.Flush()
	}
	return nil
}

func orDisabled(d time.Duration) string {
	if d == 0 {
		return "disabled"
	}
	return d.String()
}

// containerGCOutput is the JSON of "explain gc containers".
type containerGCOutput struct {
	Remove   []string               `json:"remove"`
	Removals []containerRemovalJSON `json:"removals"`
}

type containerRemovalJSON struct {
	ID        string    `json:"id"`
	PodUID    string    `json:"podUID"`
	Name      string    `json:"name"`
	Reason    gc.Reason `json:"reason"`
	StopFirst bool      `json:"stopFirst,omitempty"`
}

func explainContainerGC(w io.Writer, st gcState, c config.ContainerGC, path string, asJSON bool) error {
	policy := c.Policy()
	p := gc.PlanContainerGC(st.containers, st.deleted, policy, st.now, st.allSourcesReady, st.evictNonDeletedPods, st.terminated)
	if p.Err != nil {
		return fmt.Errorf("state file %s: %w", path, p.Err)
	}
	out := containerGCOutput{Remove: []string{}, Removals: []containerRemovalJSON{}}
	for _, r := range p.Remove {
		out.Remove = append(out.Remove, r.ID)
		out.Removals = append(out.Removals, containerRemovalJSON{r.ID, r.PodUID, r.Name, r.Reason, r.StopFirst})
	}
	if asJSON {
		return writeJSON(w, out)
	}
	fmt.Fprintf(w, "Policy: minimum age %v, max per pod container %s, max containers %s\n\n",
		policy.MinAge, limit(policy.MaxPerPodContainer), limit(policy.MaxContainers))
	if len(p.Remove) == 0 {
		fmt.Fprintln(w, "Nothing to remove.")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tREMOVE\tPOD UID\tCONTAINER\tREASON")
	for i, r := range p.Remove {
		reason := string(r.Reason)
		if r.StopFirst {
			reason += " (stop first: state unknown)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", i+1, r.ID, r.PodUID, r.Name, reason)
	}
	return tw.Flush()
}

func limit(n int) string {
	if n < 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}
