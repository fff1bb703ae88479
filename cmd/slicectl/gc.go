package main

import (
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/slicelet/slicelet/gc"
)

// gcCmd is "slicectl gc images|containers [--dry-run] [-o json]": the running slicelet
// collects now (the GC timers' services run exactly this), or with --dry-run says what it would
// remove. The exit code is 1 when the collection reported an error (so a timer's run shows as
// failed in systemctl), 0 otherwise.
func (c *cli) gcCmd(pos []string, dryRun bool) error {
	output := c.global.output
	switch {
	case len(pos) == 0:
		return usageErr("gc: what to collect: images or containers")
	case len(pos) > 1:
		return usageErr("gc: unexpected argument %q", pos[1])
	case pos[0] != "images" && pos[0] != "containers":
		return usageErr("gc: unknown kind %q (images or containers)", pos[0])
	case output != "" && output != "json":
		return usageErr("gc: -o %q: only json is supported", output)
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	var (
		res    any
		failed *string
	)
	if pos[0] == "images" {
		r, err := cl.CollectImages(c.ctx, dryRun)
		if err != nil {
			return err
		}
		res, failed = r, r.Error
		if output == "" {
			printImageGC(c.stdout, r)
		}
	} else {
		r, err := cl.CollectContainers(c.ctx, dryRun)
		if err != nil {
			return err
		}
		res, failed = r, r.Error
		if output == "" {
			printContainerGC(c.stdout, r)
		}
	}
	if output == "json" {
		if err := writeJSON(c.stdout, res); err != nil {
			return err
		}
	}
	if failed != nil {
		fmt.Fprintf(c.stderr, "slicectl: %s gc: %s\n", pos[0], *failed)
		return errReported
	}
	return nil
}

// bytesString writes a byte count the Kubernetes way (512Mi, 1536Ki).
func bytesString(n int64) string {
	if n < 0 {
		return "-" + resource.NewQuantity(-n, resource.BinarySI).String()
	}
	return resource.NewQuantity(n, resource.BinarySI).String()
}

func gcHeader(kind string, dryRun bool, d gc.Duration) string {
	if dryRun {
		return kind + " gc (dry run, nothing removed)"
	}
	return fmt.Sprintf("%s gc (%s)", kind, time.Duration(d).Round(time.Millisecond))
}

func printImageGC(w io.Writer, r gc.ImageResult) {
	fmt.Fprintf(w, "%s:", gcHeader("image", r.DryRun, r.Duration))
	if r.Skipped != "" {
		fmt.Fprintf(w, " skipped: %s\n", r.Skipped)
		return
	}
	if r.ImageFs != nil {
		fmt.Fprintf(w, " image filesystem %d%% used (%s of %s available)", r.UsagePercent, bytesString(r.ImageFs.AvailableBytes), bytesString(r.ImageFs.CapacityBytes))
	}
	if r.AmountToFree > 0 {
		fmt.Fprintf(w, ", %s to free", bytesString(r.AmountToFree))
	}
	fmt.Fprintln(w)
	verb := "removed"
	if r.DryRun {
		verb = "would remove"
	}
	removed := map[string]bool{}
	for _, id := range r.Removed {
		removed[id] = true
	}
	for _, rm := range r.Remove {
		if r.DryRun || removed[rm.ID] {
			fmt.Fprintf(w, "  %s %s (%s, %s)\n", verb, rm.ID, bytesString(rm.SizeBytes), rm.Reason)
		}
	}
	for _, f := range r.Failed {
		fmt.Fprintf(w, "  failed to remove %s: %s\n", f.ID, f.Error)
	}
	switch {
	case r.DryRun:
		fmt.Fprintf(w, "  %d images, %s as listed by the runtime\n", len(r.Remove), bytesString(r.PlannedFreedBytes))
	case r.Measured:
		fmt.Fprintf(w, "  %d images removed; the image filesystem shows %s freed (%d%% used now; %s as listed)\n", len(r.Removed), bytesString(r.FreedBytes), r.UsagePercentAfter, bytesString(r.RemovedBytes))
	case len(r.Removed) > 0:
		fmt.Fprintf(w, "  %d images removed, %s as listed; freed space not measured: %s\n", len(r.Removed), bytesString(r.RemovedBytes), r.MeasureError)
	default:
		fmt.Fprintln(w, "  nothing to remove")
	}
}

func printContainerGC(w io.Writer, r gc.ContainerResult) {
	fmt.Fprintf(w, "%s:", gcHeader("container", r.DryRun, r.Duration))
	if !r.AllSourcesReady {
		fmt.Fprint(w, " pod sources not ready yet, no pod counts as deleted;")
	}
	fmt.Fprintf(w, " %d deleted pods\n", len(r.DeletedPods))
	if r.DryRun {
		for _, rm := range r.Remove {
			fmt.Fprintf(w, "  would remove container %s (pod %s, %s: %s)\n", rm.ID, rm.PodUID, rm.Name, rm.Reason)
		}
		for _, rm := range r.RemoveSandboxes {
			fmt.Fprintf(w, "  would remove sandbox %s (pod %s: %s)\n", rm.ID, rm.PodUID, rm.Reason)
		}
		for _, d := range r.RemoveLogDirs {
			fmt.Fprintf(w, "  would remove log directory %s\n", d)
		}
	} else {
		byID := map[string]gc.ContainerRemoval{}
		for _, rm := range r.Remove {
			byID[rm.ID] = rm
		}
		for _, id := range r.Removed {
			rm := byID[id]
			fmt.Fprintf(w, "  removed container %s (pod %s, %s: %s)\n", id, rm.PodUID, rm.Name, rm.Reason)
		}
		for _, id := range r.RemovedSandboxes {
			fmt.Fprintf(w, "  removed sandbox %s\n", id)
		}
		for _, d := range r.RemovedLogDirs {
			fmt.Fprintf(w, "  removed log directory %s\n", d)
		}
	}
	for _, f := range r.Failed {
		fmt.Fprintf(w, "  failed: %s: %s\n", f.ID, f.Error)
	}
	n := len(r.Removed) + len(r.RemovedSandboxes) + len(r.RemovedLogDirs)
	if r.DryRun {
		n = len(r.Remove) + len(r.RemoveSandboxes) + len(r.RemoveLogDirs)
	}
	if n == 0 && len(r.Failed) == 0 {
		fmt.Fprintln(w, "  nothing to remove")
	}
}
