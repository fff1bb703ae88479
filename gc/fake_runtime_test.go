package gc

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeRuntime is an in-memory ImageRuntime and ContainerRuntime. Its image filesystem behaves
// like containerd's: removals free space (freeRatio of the listed size, 1 when 0) only in a
// reading taken staleFor after the last removal; until then ImageFsInfo repeats the old
// reading with its old timestamp. It uses time.Now, so under testing/synctest it runs on the
// bubble's clock.
type fakeRuntime struct {
	mu         sync.Mutex
	images     []ListedImage
	fs         ImageFsInfo
	containers []Container
	sandboxes  []Sandbox

	staleFor  time.Duration
	freeRatio float64 // share of a removed image's size the disk really gets back
	pending   int64
	lastRm    time.Time

	fail  map[string]error // "Method id" → error
	calls []string         // "Method id", in order
	err   map[string]error // "Method" → error for list/info calls
}

func newFake() *fakeRuntime {
	return &fakeRuntime{fail: map[string]error{}, err: map[string]error{}}
}

func (f *fakeRuntime) call(method, id string) error {
	f.calls = append(f.calls, method+" "+id)
	return f.fail[method+" "+id]
}

// mutations returns the calls that change something, in order.
func (f *fakeRuntime) mutations() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if !slices.Contains([]string{"ListImages ", "ImageFsInfo ", "ListContainers ", "ListSandboxes "}, c) {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeRuntime) ListImages(context.Context) ([]ListedImage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_ = f.call("ListImages", "")
	if err := f.err["ListImages"]; err != nil {
		return nil, err
	}
	return slices.Clone(f.images), nil
}

func (f *fakeRuntime) ImageFsInfo(context.Context) (ImageFsInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_ = f.call("ImageFsInfo", "")
	if err := f.err["ImageFsInfo"]; err != nil {
		return ImageFsInfo{}, err
	}
	now := time.Now()
	if f.pending == 0 || now.Sub(f.lastRm) >= f.staleFor {
		f.fs.AvailableBytes += f.pending
		f.fs.UsedBytes -= f.pending
		f.pending = 0
		f.fs.Timestamp = now
	}
	return f.fs, nil
}

func (f *fakeRuntime) RemoveImage(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("RemoveImage", id); err != nil {
		return err
	}
	i := slices.IndexFunc(f.images, func(l ListedImage) bool { return l.ID == id })
	if i < 0 {
		return nil
	}
	ratio := f.freeRatio
	if ratio == 0 {
		ratio = 1
	}
	f.pending += int64(float64(f.images[i].SizeBytes) * ratio)
	f.lastRm = time.Now()
	f.images = slices.Delete(f.images, i, i+1)
	return nil
}

func (f *fakeRuntime) ListContainers(context.Context) ([]Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_ = f.call("ListContainers", "")
	if err := f.err["ListContainers"]; err != nil {
		return nil, err
	}
	return slices.Clone(f.containers), nil
}

func (f *fakeRuntime) StopContainer(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.call("StopContainer", id)
}

func (f *fakeRuntime) RemoveContainer(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("RemoveContainer", id); err != nil {
		return err
	}
	f.containers = slices.DeleteFunc(f.containers, func(c Container) bool { return c.ID == id })
	return nil
}

func (f *fakeRuntime) ListSandboxes(context.Context) ([]Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_ = f.call("ListSandboxes", "")
	if err := f.err["ListSandboxes"]; err != nil {
		return nil, err
	}
	return slices.Clone(f.sandboxes), nil
}

func (f *fakeRuntime) StopSandbox(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.call("StopSandbox", id)
}

func (f *fakeRuntime) RemoveSandbox(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("RemoveSandbox", id); err != nil {
		return err
	}
	f.sandboxes = slices.DeleteFunc(f.sandboxes, func(s Sandbox) bool { return s.ID == id })
	return nil
}

var (
	_ ImageRuntime     = (*fakeRuntime)(nil)
	_ ContainerRuntime = (*fakeRuntime)(nil)
)

func mib(n int64) int64 { return n << 20 }

// slogText is a logger writing text records to w.
func slogText(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// jsonObject marshals v and decodes it as a JSON object: the keys a result really has.
func jsonObject(t *testing.T, v any) (map[string]any, []byte) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m, data
}
