package source

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slicelet/slicelet/internal/atomicfile"
	"github.com/slicelet/slicelet/internal/pods"
)

// Errors of the API store, wrapped with the pod's namespace/name.
var (
	// ErrNotFound: no API pod of that namespace and name.
	ErrNotFound = errors.New("pod not found")
	// ErrTooManyPods: the store already holds its maximum number of pods.
	ErrTooManyPods = errors.New("too many pods")
	// ErrInvalid wraps every manifest problem Apply reports.
	ErrInvalid = errors.New("invalid pod manifest")
)

// APIStoreDir is where API pods are stored, relative to the state directory.
const APIStoreDir = "pods/api"

// tempPrefix starts the name of a file being written (atomicfile); one left over is from a crash.
const tempPrefix = atomicfile.TempPrefix

// APIStoreOptions configure an APIStore.
type APIStoreOptions struct {
	// MaxPods bounds the stored pods (DefaultMaxPods).
	MaxPods int
	// Log receives state changes.
	Log *slog.Logger
	// NewUID returns a fresh pod UID (a random version-4 UUID by default).
	NewUID func() string
	// Now stamps metadata.creationTimestamp of created and replaced pods (time.Now by default).
	Now func() time.Time
}

// APIStore holds the pods created through the local API, one JSON file per pod in
// <state_dir>/pods/api/<namespace>_<name>.json (namespaces are DNS labels and names DNS
// subdomains, neither has "_", so the file name is unambiguous).
//
// Every write is atomic and durable: a temporary file in the same directory is written and
// fsynced, renamed over the pod's file, and the directory is fsynced. A crash at any point leaves
// either the old or the new pod, never a torn one; a leftover temporary file is removed (and
// reported) at the next open.
//
// UIDs follow kubectl-apply semantics: Apply of a new name creates a pod with a random UID;
// Apply of an existing name with the same content (metadata and spec, ignoring metadata.uid and
// metadata.creationTimestamp) changes nothing and keeps the UID; with different content it replaces
// the pod — new UID, so the old pod is stopped and the new one started, exactly as editing a
// static pod's file does. metadata.uid in a manifest is ignored, as the API server ignores it
// on create.
//
// All methods are safe for concurrent use.
type APIStore struct {
	dir     string
	maxPods int
	log     *slog.Logger
	newUID  func() string
	now     func() time.Time

	mu       sync.Mutex
	pods     map[string]*v1.Pod // by namespace/name
	problems map[string]pods.Problem
	changed  chan struct{}
}

// OpenAPIStore creates <stateDir>/pods/api if needed and loads every stored pod. A file that
// does not load (truncated or corrupt JSON, invalid pod, name not matching its content) is a
// Problem, not an error, and stays on disk for inspection until the pod is applied or deleted
// again; leftover temporary files are removed and reported. Only an unusable directory is an
// error.
func OpenAPIStore(stateDir string, opts APIStoreOptions) (*APIStore, error) {
	s := &APIStore{
		dir:      filepath.Join(stateDir, APIStoreDir),
		maxPods:  opts.MaxPods,
		log:      opts.Log,
		newUID:   opts.NewUID,
		now:      opts.Now,
		pods:     map[string]*v1.Pod{},
		problems: map[string]pods.Problem{},
		changed:  make(chan struct{}, 1),
	}
	if s.maxPods <= 0 {
		s.maxPods = DefaultMaxPods
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.newUID == nil {
		s.newUID = randomUID
	}
	if s.now == nil {
		s.now = time.Now
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("api pod store %s: %w", s.dir, err)
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("api pod store %s: %w", s.dir, err)
	}
	for _, e := range entries {
		s.load(e)
	}
	return s, nil
}

// load loads one directory entry at open.
func (s *APIStore) load(e fs.DirEntry) {
	path := filepath.Join(s.dir, e.Name())
	if strings.HasPrefix(e.Name(), tempPrefix) {
		// A write that crashed before its rename: the pod's previous file (if any) is intact.
		err := os.Remove(path)
		msg := fmt.Sprintf("%s: leftover temporary file of an interrupted write, removed", path)
		if err != nil {
			msg = fmt.Sprintf("%s: leftover temporary file of an interrupted write, not removed: %v", path, err)
		}
		s.problems[path] = pods.Problem{Origin: path, Error: msg}
		s.log.Warn("api pod store: leftover temporary file", "path", path, "err", err)
		return
	}
	if e.IsDir() || filepath.Ext(e.Name()) != ".json" {
		s.problems[path] = pods.Problem{Origin: path, Error: fmt.Sprintf("%s: unexpected entry in the api pod store, ignored", path)}
		return
	}
	pod, err := s.readStored(path, e.Name())
	if err != nil {
		s.problems[path] = pods.Problem{Origin: path, Error: err.Error()}
		s.log.Warn("api pod store: stored pod does not load", "path", path, "err", err)
		return
	}
	if len(s.pods) >= s.maxPods {
		s.problems[path] = pods.Problem{Origin: path, Error: fmt.Sprintf("%s: pod %s: %v: the store holds at most %d", path, podKey(pod), ErrTooManyPods, s.maxPods)}
		return
	}
	s.pods[podKey(pod)] = pod
}

// readStored decodes and checks one stored pod file.
func (s *APIStore) readStored(path, name string) (*v1.Pod, error) {
	// Indented JSON of a pod applied from at most DefaultMaxFileSize bytes of YAML can be
	// larger than that; allow for it.
	data, err := readManifest(path, 4*DefaultMaxFileSize)
	if err != nil {
		return nil, err
	}
	list, err := parseManifest(path, path, data)
	if err != nil {
		return nil, err
	}
	if len(list) != 1 {
		return nil, fmt.Errorf("%s: %d pods in a stored pod file, want 1", path, len(list))
	}
	pod := list[0]
	if want := fileName(pod.Namespace, pod.Name); want != name {
		return nil, fmt.Errorf("%s: holds pod %s, whose file would be %s", path, podKey(pod), want)
	}
	return annotate(pod, pods.SourceAPI, ""), nil
}

// fileName is the store's file name of a pod.
func fileName(namespace, name string) string { return namespace + "_" + name + ".json" }

// ApplyOptions modify Apply.
type ApplyOptions struct {
	// DryRun checks everything and returns the pod as it would be stored, storing nothing.
	DryRun bool
	// Annotations are set on the pod, replacing the manifest's values of those keys (who applied
	// it). They are not content: re-applying the same manifest with other Annotations changes
	// nothing and keeps the stored values.
	Annotations map[string]string
}

// Apply creates or replaces the pod of a manifest (YAML or JSON, exactly one pod, at most
// DefaultMaxFileSize bytes) and returns it as stored (namespace, UID, creation time and
// annotation filled in). Invalid input is an error wrapping
// ErrInvalid with field paths and values ("api: spec.containers[0].name: Required value: ...");
// a full store is ErrTooManyPods. The pod is on disk when Apply returns (unless opts.DryRun).
func (s *APIStore) Apply(manifest []byte, opts ApplyOptions) (*v1.Pod, error) {
	if len(manifest) > DefaultMaxFileSize {
		return nil, fmt.Errorf("%w: api: manifest too large: %d bytes, at most %d", ErrInvalid, len(manifest), DefaultMaxFileSize)
	}
	list, err := parseManifest("api", "api", manifest)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(list) != 1 {
		return nil, fmt.Errorf("%w: api: %d pods in the manifest, apply one at a time", ErrInvalid, len(list))
	}
	pod := annotate(list[0], pods.SourceAPI, "")
	for k, v := range opts.Annotations {
		pod.Annotations[k] = v
	}
	k := podKey(pod)

	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.pods[k]
	if exists && sameContent(old, pod, opts.Annotations) {
		return old.DeepCopy(), nil
	}
	if !exists && len(s.pods) >= s.maxPods {
		return nil, fmt.Errorf("pod %s: %w: the store holds at most %d", k, ErrTooManyPods, s.maxPods)
	}
	pod.UID = types.UID(s.newUID())
	pod.CreationTimestamp = metav1.NewTime(s.now().Truncate(time.Second)) // what JSON keeps
	if pod.APIVersion == "" {
		pod.APIVersion, pod.Kind = "v1", "Pod"
	}
	if opts.DryRun {
		return pod, nil
	}
	if err := s.write(pod); err != nil {
		return nil, err
	}
	s.pods[k] = pod
	delete(s.problems, filepath.Join(s.dir, fileName(pod.Namespace, pod.Name)))
	if exists {
		s.log.Info("api pod replaced", "pod", k, "pod_uid", pod.UID, "old_pod_uid", old.UID)
	} else {
		s.log.Info("api pod created", "pod", k, "pod_uid", pod.UID)
	}
	s.notify()
	return pod.DeepCopy(), nil
}

// sameContent reports whether two pods are equal apart from UID, creation time and the
// annotations named in ignore (Apply's own, which are not content).
func sameContent(a, b *v1.Pod, ignore map[string]string) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	a.UID, b.UID = "", ""
	a.CreationTimestamp, b.CreationTimestamp = metav1.Time{}, metav1.Time{}
	for k := range ignore {
		delete(a.Annotations, k)
		delete(b.Annotations, k)
	}
	return apiequality.Semantic.DeepEqual(a, b)
}

// Delete removes the pod (ErrNotFound when there is none). A stored file of that name that did
// not load is removed too, and its problem dropped; that alone is not ErrNotFound.
func (s *APIStore) Delete(namespace, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := namespace + "/" + name
	path := filepath.Join(s.dir, fileName(namespace, name))
	_, exists := s.pods[k]
	_, broken := s.problems[path]
	if !exists && !broken {
		return fmt.Errorf("pod %s: %w", k, ErrNotFound)
	}
	if err := removeFileDurable(s.dir, fileName(namespace, name)); err != nil {
		return fmt.Errorf("pod %s: delete %s: %w", k, path, err)
	}
	delete(s.pods, k)
	delete(s.problems, path)
	s.log.Info("api pod deleted", "pod", k)
	s.notify()
	return nil
}

// Get returns a copy of the pod, or ErrNotFound.
func (s *APIStore) Get(namespace, name string) (*v1.Pod, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pod, ok := s.pods[namespace+"/"+name]
	if !ok {
		return nil, fmt.Errorf("pod %s/%s: %w", namespace, name, ErrNotFound)
	}
	return pod.DeepCopy(), nil
}

// List returns copies of all pods, sorted by namespace/name.
func (s *APIStore) List() []*v1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listLocked()
}

func (s *APIStore) listLocked() []*v1.Pod {
	keys := make([]string, 0, len(s.pods))
	for k := range s.pods {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*v1.Pod, 0, len(keys))
	for _, k := range keys {
		out = append(out, s.pods[k].DeepCopy())
	}
	return out
}

// Snapshot returns the store's complete snapshot: pods sorted by namespace/name (Origin "api"),
// problems sorted by origin.
func (s *APIStore) Snapshot() pods.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := pods.Snapshot{Source: pods.SourceAPI}
	for _, pod := range s.listLocked() {
		snap.Pods = append(snap.Pods, pods.Desired{Pod: pod, Source: pods.SourceAPI, Origin: pods.SourceAPI})
	}
	origins := make([]string, 0, len(s.problems))
	for o := range s.problems {
		origins = append(origins, o)
	}
	sort.Strings(origins)
	for _, o := range origins {
		snap.Problems = append(snap.Problems, s.problems[o])
	}
	return snap
}

// Run calls send with the current snapshot at once and again after every change (Apply that
// created or replaced a pod, Delete), until ctx ends. Changes in quick succession may be
// coalesced into one snapshot; each snapshot is complete. send is called from Run's goroutine,
// one call at a time.
func (s *APIStore) Run(ctx context.Context, send func(pods.Snapshot)) error {
	send(s.Snapshot())
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.changed:
			send(s.Snapshot())
		}
	}
}

func (s *APIStore) notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// write stores pod atomically and durably (writeFileAtomic).
func (s *APIStore) write(pod *v1.Pod) error {
	data, err := json.MarshalIndent(pod, "", "  ")
	if err != nil {
		return fmt.Errorf("pod %s: encode: %w", podKey(pod), err)
	}
	if err := writeFileAtomic(s.dir, fileName(pod.Namespace, pod.Name), append(data, '\n')); err != nil {
		return fmt.Errorf("pod %s: %w", podKey(pod), err)
	}
	return nil
}

// randomUID returns a random version-4 UUID.
func randomUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
