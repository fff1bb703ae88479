package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/slicelet/slicelet/hack/peer/peerrun"
	"github.com/slicelet/slicelet/internal/testharness/critest"
)

// gcImages is how many unused images each image GC round imports: gcImageName(i) with a random
// layer of i+1 MiB, so that every image has its own size and ID.
const gcImages = 10

func gcImageName(i int) string { return fmt.Sprintf("slicelet.test/gc-%02d:1", i) }

// imageGCPolicy makes both agents collect every unused image at once: a high threshold of 1 %
// of the image filesystem (always crossed), a low one of 0 % (free everything unused), no
// minimum age (for the kubelet through its flag: peerrun StartAgent). The kubelet's image GC loop runs at its start (pkg/kubelet/kubelet.go
// StartGarbageCollection, wait.Until, then every ImageGCPeriod); slicelet's timer fires its
// first run one gc.images.period after the start, so that period is 1 s.
var imageGCPolicy = peerrun.ImageGCPolicy{HighThresholdPercent: 1, LowThresholdPercent: 0, MinimumAge: 0, SliceletPeriod: time.Second}

// imageGCRound imports the image set (and the test and sandbox images again, which the previous
// agent may have collected), starts the agent with imageGCPolicy and no pods, and times its
// start until none of the set is left. It records how many images the agent removed, the bytes
// they held (their CRI sizes) and which images other than the set it removed.
func (b *bench) imageGCRound(ctx context.Context, k peerrun.Kind, rep int) error {
	c := b.node.Containerd
	imgs := []critest.Image{{Name: peerrun.TestImage, Cmd: []string{"/bin/sleep", "infinity"}}, {Name: c.SandboxImage, Cmd: []string{"/bin/sleep", "infinity"}}}
	for i := range gcImages {
		imgs = append(imgs, critest.Image{Name: gcImageName(i), Cmd: []string{"/bin/sleep", "infinity"}, RandomMiB: i + 1})
	}
	for _, img := range imgs {
		if err := c.ImportImage(ctx, img); err != nil {
			return err
		}
	}
	before, err := b.images(ctx)
	if err != nil {
		return err
	}
	for i := range gcImages {
		if _, ok := before[gcImageName(i)]; !ok {
			return fmt.Errorf("%s not listed after its import", gcImageName(i))
		}
	}
	cfg := peerrun.DefaultNodeConfig()
	policy := imageGCPolicy
	cfg.ImageGC = &policy
	t0 := time.Now()
	a, err := b.node.StartAgent(ctx, peerrun.AgentOptions{Kind: k, Binary: b.binary(k), ManifestDir: b.manifests, Config: cfg})
	if err != nil {
		return err
	}
	defer func() { _ = a.Stop(context.WithoutCancel(ctx)) }()
	// The kubelet's second run would come 5 minutes after its first: 6 minutes bound a round.
	deadline := t0.Add(6 * time.Minute)
	var done time.Duration
	for done == 0 {
		now, err := b.images(ctx)
		if err != nil {
			return err
		}
		left := 0
		for i := range gcImages {
			if _, ok := now[gcImageName(i)]; ok {
				left++
			}
		}
		switch {
		case left == 0:
			done = time.Since(t0)
		case time.Now().After(deadline):
			return fmt.Errorf("%d of %d unused images left 6m after the start; %s journal: %s", left, gcImages, a.Unit, a.Journal(context.WithoutCancel(ctx), 10))
		default:
			if err := sleep(ctx, 50*time.Millisecond); err != nil {
				return err
			}
		}
	}
	// A run that removes images one by one may still be going for images outside the set.
	if err := sleep(ctx, 3*time.Second); err != nil {
		return err
	}
	after, err := b.images(ctx)
	if err != nil {
		return err
	}
	// Counted by image ID: the test and sandbox images are the same image under two names.
	var others []string
	removed := map[string]uint64{}
	for name, img := range before {
		if _, ok := after[name]; !ok {
			removed[img.id] = img.size
			if !strings.HasPrefix(name, "slicelet.test/gc-") {
				others = append(others, name)
			}
		}
	}
	var bytes uint64
	for _, size := range removed {
		bytes += size
	}
	slices.Sort(others)
	b.res.add("imagegc", k, ms(done))
	b.res.add("imagegc-removed", k, float64(len(removed)))
	b.res.add("imagegc-freed", k, float64(bytes)/(1<<20))
	if b.res.GCOthers == nil {
		b.res.GCOthers = map[peerrun.Kind][]string{}
	}
	for _, o := range others {
		if !slices.Contains(b.res.GCOthers[k], o) {
			b.res.GCOthers[k] = append(b.res.GCOthers[k], o)
		}
	}
	logf("%s image GC round %d: %d unused images gone %s after the start; removed %d images (%d MiB), names besides the set: %v (of %v)",
		k, rep, gcImages, done.Round(time.Millisecond), len(removed), bytes>>20, others, slices.Sorted(maps.Keys(before)))
	return nil
}

// listed is one image as CRI lists it.
type listed struct {
	id   string
	size uint64
}

// images maps every image reference containerd lists to the image.
func (b *bench) images(ctx context.Context) (map[string]listed, error) {
	list, err := b.is.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return nil, fmt.Errorf("ListImages: %w", err)
	}
	out := map[string]listed{}
	for _, img := range list.Images {
		for _, tag := range img.RepoTags {
			out[tag] = listed{id: img.Id, size: img.GetSize()}
		}
	}
	return out, nil
}
