package source

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/slicelet/slicelet/internal/atomicfile"
	"github.com/slicelet/slicelet/internal/manifest"
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

// Where API pods are stored, relative to the state directory, and the bounds of a record.
const (
	// APIStoreDir holds one record (compact JSON) per API pod.
	APIStoreDir = "pods/api"
	// APIAsideDir holds the records that did not load, moved there from APIStoreDir: each is
	// reported (Problem.Hold, its pod kept running) at every start until an apply or delete of
	// its pod removes it.
	APIAsideDir = "pods/api-aside"
	// MaxRecordBytes bounds a stored record, for Apply (which refuses a pod whose record would
	// be larger) and the loader alike, so that every pod accepted loads again: a pod of
	// manifest.MaxDocumentJSONBytes as JSON plus what the store adds (UID, creation time,
	// annotations) fits.
	MaxRecordBytes = manifest.MaxDocumentJSONBytes + 512<<10
	// maxFileNameBytes bounds a record's file name: with atomicfile's temporary name around it
	// (".tmp-" NAME "-" and ten digits) it stays within NAME_MAX (255) on every filesystem.
	maxFileNameBytes = 200
)

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
// subdomains, neither has "_", so the file name is unambiguous; a pair too long for NAME_MAX
// is shortened and hashed, see fileName).
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

	aside string

	mu       sync.Mutex
	pods     map[string]*v1.Pod // by namespace/name
	problems map[string]pods.Problem
	changed  chan struct{}
}

// OpenAPIStore creates <stateDir>/pods/api if needed and loads every stored pod. A file that
// does not load (truncated or corrupt JSON, invalid pod, name not matching its content) is a
// held Problem, not an error: it is moved to <stateDir>/pods/api-aside for inspection, its pod
// keeps running, and it is reported at every start until the pod is applied or deleted again;
// leftover temporary files are removed and reported. Only an unusable directory is an error.
func OpenAPIStore(stateDir string, opts APIStoreOptions) (*APIStore, error) {
	s := &APIStore{
		dir:      filepath.Join(stateDir, APIStoreDir),
		aside:    filepath.Join(stateDir, APIAsideDir),
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
	// The records set aside at earlier starts: their pods may still run.
	aside, err := os.ReadDir(s.aside)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("api pod store %s: %w", s.aside, err)
	}
	for _, e := range aside {
		path := filepath.Join(s.aside, e.Name())
		if _, ok := s.problems[path]; !ok && !e.IsDir() {
			s.problems[path] = pods.Problem{Origin: path, Pod: podOfFileName(e.Name()), Hold: true,
				Error: fmt.Sprintf("%s: a stored pod that did not load, set aside; its pod keeps running until it is applied or deleted again", path)}
		}
	}
	return s, nil
}

// setAside moves a record that does not load (problem err) to the aside directory, where it
// stays, reported at every start, until an apply or delete of its pod; the pod it stood for
// keeps running meanwhile (Problem.Hold). A record that cannot be moved is reported where it is.
func (s *APIStore) setAside(path, name string, err error) {
	p := pods.Problem{Origin: path, Pod: podOfFileName(name), Hold: true}
	aside := filepath.Join(s.aside, name)
	moveErr := os.MkdirAll(s.aside, 0o700)
	if moveErr == nil {
		moveErr = os.Rename(path, aside)
	}
	if moveErr == nil {
		moveErr = errors.Join(atomicfile.SyncDir(s.aside), atomicfile.SyncDir(s.dir))
		p.Origin = aside
		p.Error = fmt.Sprintf("%v; set aside as %s: its pod keeps running until it is applied or deleted again", err, aside)
	} else {
		p.Error = fmt.Sprintf("%v; not set aside (%v): its pod keeps running until it is applied or deleted again", err, moveErr)
	}
	s.problems[p.Origin] = p
	s.log.Warn("api pod store: stored pod does not load, its pod keeps running", "path", path, "aside", p.Origin, "pod", p.Pod, "err", err, "move_err", moveErr)
}

// podOfFileName is the namespace/name a record's file name stands for ("" when it is not one
// of the store's names); a hashed long name gives its readable prefix only.
func podOfFileName(name string) string {
	base, ok := strings.CutSuffix(name, ".json")
	ns, pod, ok2 := strings.Cut(base, "_")
	if !ok || !ok2 || ns == "" || pod == "" || strings.Contains(pod, "_") {
		return ""
	}
	return ns + "/" + pod
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
		s.setAside(path, e.Name(), err)
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
	data, err := readManifest(path, MaxRecordBytes)
	if err != nil {
		return nil, err
	}
	list, err := parseRecord(path, data)
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

// fileName is the store's file name of a pod: <namespace>_<name>.json, or for a pair too long
// for maxFileNameBytes, its beginning, "_" and a hash of the whole (names have no "_", so the
// two forms never meet).
func fileName(namespace, name string) string {
	base := namespace + "_" + name
	if len(base)+len(".json") <= maxFileNameBytes {
		return base + ".json"
	}
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	hash := hex.EncodeToString(sum[:16])
	return base[:maxFileNameBytes-len(".json")-1-len(hash)] + "_" + hash + ".json"
}

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
	pod, _, err := s.ApplyAction(manifest, opts)
	return pod, err
}

// What an Apply did, decided under the store's lock: of concurrent applies of a new name
// exactly one creates the pod.
const (
	// Created: no pod of that namespace/name was stored.
	Created = "created"
	// Configured: the stored pod was replaced (new UID).
	Configured = "configured"
	// Unchanged: the stored pod had the same content.
	Unchanged = "unchanged"
)

// ApplyAction is Apply, also returning what it did (Created, Configured, Unchanged; a dry run
// says what it would have done).
func (s *APIStore) ApplyAction(manifest []byte, opts ApplyOptions) (*v1.Pod, string, error) {
	if len(manifest) > DefaultMaxFileSize {
		return nil, "", fmt.Errorf("%w: api: manifest too large: %d bytes, at most %d", ErrInvalid, len(manifest), DefaultMaxFileSize)
	}
	list, err := parseManifest("api", "api", manifest)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(list) != 1 {
		return nil, "", fmt.Errorf("%w: api: %d pods in the manifest, apply one at a time", ErrInvalid, len(list))
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
		return old.DeepCopy(), Unchanged, nil
	}
	action := Created
	if exists {
		action = Configured
	}
	if !exists && len(s.pods) >= s.maxPods {
		return nil, "", fmt.Errorf("pod %s: %w: the store holds at most %d", k, ErrTooManyPods, s.maxPods)
	}
	pod.UID = types.UID(s.newUID())
	pod.CreationTimestamp = metav1.NewTime(s.now().Truncate(time.Second)) // what JSON keeps
	if pod.APIVersion == "" {
		pod.APIVersion, pod.Kind = "v1", "Pod"
	}
	data, err := encodeRecord(pod)
	if err != nil {
		return nil, "", err
	}
	if opts.DryRun {
		return pod, action, nil
	}
	if err := writeFileAtomic(s.dir, fileName(pod.Namespace, pod.Name), data); err != nil {
		return nil, "", fmt.Errorf("pod %s: %w", k, err)
	}
	s.pods[k] = pod
	if err := s.resolveLocked(pod.Namespace, pod.Name); err != nil {
		// The pod is stored; the old record stays aside and is reported again at the next start.
		s.log.Warn("api pod store: record set aside not removed", "pod", k, "err", err)
	}
	if exists {
		s.log.Info("api pod replaced", "pod", k, "pod_uid", pod.UID, "old_pod_uid", old.UID)
	} else {
		s.log.Info("api pod created", "pod", k, "pod_uid", pod.UID)
	}
	s.notify()
	return pod.DeepCopy(), action, nil
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
	_, aside := s.problems[filepath.Join(s.aside, fileName(namespace, name))]
	if !exists && !broken && !aside {
		return fmt.Errorf("pod %s: %w", k, ErrNotFound)
	}
	if err := removeFileDurable(s.dir, fileName(namespace, name)); err != nil {
		return fmt.Errorf("pod %s: delete %s: %w", k, path, err)
	}
	delete(s.pods, k)
	if err := s.resolveLocked(namespace, name); err != nil {
		return fmt.Errorf("pod %s: %w", k, err)
	}
	s.log.Info("api pod deleted", "pod", k)
	s.notify()
	return nil
}

// resolveLocked forgets the problems of a pod's record (in the store and aside) and removes
// its record set aside, if any: an apply or delete of the pod resolves them.
func (s *APIStore) resolveLocked(namespace, name string) error {
	delete(s.problems, filepath.Join(s.dir, fileName(namespace, name)))
	aside := filepath.Join(s.aside, fileName(namespace, name))
	if _, ok := s.problems[aside]; !ok {
		return nil
	}
	if err := removeFileDurable(s.aside, fileName(namespace, name)); err != nil {
		return fmt.Errorf("remove %s: %w", aside, err)
	}
	delete(s.problems, aside)
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
	// The stored pods themselves, read-only (pods.Snapshot): a stored pod is replaced, never
	// changed in place.
	for _, k := range slices.Sorted(maps.Keys(s.pods)) {
		snap.Pods = append(snap.Pods, pods.Desired{Pod: s.pods[k], Source: pods.SourceAPI, Origin: pods.SourceAPI})
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

// encodeRecord is a pod's record: compact JSON without HTML escaping ('<' stays one byte), at
// most MaxRecordBytes.
func encodeRecord(pod *v1.Pod) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(pod); err != nil {
		return nil, fmt.Errorf("pod %s: encode: %w", podKey(pod), err)
	}
	if buf.Len() > MaxRecordBytes {
		return nil, fmt.Errorf("%w: pod %s: %d bytes stored, at most %d", ErrInvalid, podKey(pod), buf.Len(), MaxRecordBytes)
	}
	return buf.Bytes(), nil
}

// randomUID returns a random version-4 UUID.
func randomUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
