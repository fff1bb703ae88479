package source

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/clock"

	"github.com/slicelet/slicelet/internal/manifest"
	"github.com/slicelet/slicelet/internal/pods"
)

// Defaults of the manifest directory source.
const (
	// DefaultManifestDir is where static pod manifests live.
	DefaultManifestDir = "/etc/slicelet/pods.d"
	// DefaultRescan is the periodic rescan interval, the kubelet's fileCheckFrequency (20 s).
	DefaultRescan = 20 * time.Second
	// DefaultDebounce is how long the directory must be quiet after an inotify event that does
	// not mark a completed write (a file created or removed) before it is read: vim's
	// move-away-then-write does not remove the pod in between. A completed write (IN_CLOSE_WRITE,
	// IN_MOVED_TO) is read at once; a file still open for writing is never read (holdBack).
	DefaultDebounce = 100 * time.Millisecond
	// DefaultMaxDelay bounds the debounce: a directory that never goes quiet is still read at
	// least this often.
	DefaultMaxDelay = time.Second
	// DefaultMaxFileSize is the largest manifest file read; a bigger one is a Problem.
	DefaultMaxFileSize = manifest.MaxInputBytes
	// DefaultMaxPods bounds the pods one source offers; pods beyond it (in file and document
	// order) are Problems.
	DefaultMaxPods = 1000
)

// ManifestDirOptions configure a ManifestDir. Zero fields take the defaults above.
type ManifestDirOptions struct {
	// Dir is the watched directory (DefaultManifestDir). It may not exist yet, and may be
	// removed and created again.
	Dir string
	// Rescan is the periodic full rescan interval (DefaultRescan). The rescan catches what
	// inotify cannot see (e.g. a changed file behind a symlink) and retries watches.
	Rescan time.Duration
	// Debounce and MaxDelay shape how inotify events that do not mark a completed write turn
	// into scans; a completed write (a manifest closed after writing, or renamed into the
	// directory) is read at once.
	Debounce, MaxDelay time.Duration
	// MaxFileSize bounds one manifest file in bytes.
	MaxFileSize int64
	// MaxPods bounds the pods of the whole directory.
	MaxPods int
	// Log receives state changes (pods added and removed, problems found and fixed).
	Log *slog.Logger
	// StateDir, when set, keeps the last good content of every manifest in
	// <StateDir>/pods/file, so that a file found broken when slicelet starts still yields the
	// pods it had before (which are still running): a broken file changes nothing, across
	// restarts too. Empty disables this.
	StateDir string
	// Clock times the debounce and the rescans; the real clock when nil.
	Clock clock.WithTicker
	// Objects receives the ConfigMaps and Secrets of the manifests (source "file") after
	// every scan; nil ignores them.
	Objects *pods.Objects
	// NodeName, when set, names each pod as the kubelet names a static pod on that node:
	// "<name>-<node>", the node lower-cased (pkg/kubelet/config/common.go, generatePodName), the
	// name of its mirror pod. Cluster mode sets it, so the static pods, their mirrors, CRI
	// labels and log directories are the kubelet's and a node changing agent keeps them.
	// Empty keeps the manifest's name (stand-alone). The UID does not change with it: the
	// kubelet hashes the pod as decoded, before the name.
	NodeName string
}

// LastGoodDir is where the last good manifests are kept, relative to the state directory.
const LastGoodDir = "pods/file"

// ManifestDir is the static pod source: every *.yaml, *.yml and *.json file of a directory
// (multi-document YAML allowed) is a set of pods.
//
// Files whose name starts with "." or ends with "~", other extensions, subdirectories and
// anything that is not a regular file (after following symlinks) are ignored.
//
// Static pod semantics, as the kubelet's file source: a pod without metadata.uid gets the
// kubelet's static-pod UID (internal/manifest: a hash of the pod, the node's name and the file's
// path, the directory's absolute path joined with the file's name), so editing a file replaces
// its pods (new content, new UID) and removing it removes them. Each pod carries
// the annotations kubernetes.io/config.source=file and slicelet.io/origin=<absolute path>.
//
// A file that cannot be used (unreadable, larger than MaxFileSize, bad YAML, unknown field,
// invalid pod) is a Problem{Origin: path, Error: "<path>: document N: <field>: ..."} and changes
// nothing: the pods that file produced at its last good read stay in the snapshot (none if it
// never was good). Among pods with the same namespace/name (or the same explicit metadata.uid)
// the first (files in lexical order, then documents in order) wins; every other one is a
// Problem naming both origins.
type ManifestDir struct {
	dir                        string
	rescan, debounce, maxDelay time.Duration
	maxFileSize                int64
	maxPods                    int
	log                        *slog.Logger
	clock                      clock.WithTicker
	newWatcher                 func(dir string) (watcher, error)
	files                      map[string]*fileState
	dirProblem                 string
	last                       *pods.Snapshot
	// lastGoodDir and saved are the kept last good manifests (by file path); lastGoodDir is ""
	// when they are not kept.
	lastGoodDir string
	saved       map[string][]byte
	objects     *pods.Objects
	// nodeName is ManifestDirOptions.NodeName, lower-cased.
	nodeName string
}

// lastGood is one kept manifest, as stored in LastGoodDir.
type lastGood struct {
	Path     string `json:"path"`
	Manifest []byte `json:"manifest"`
}

// fileState is what the source remembers of one manifest file.
type fileState struct {
	// hash is the SHA-256 of the content last parsed (good or bad); hashed is false until then.
	hash   [sha256.Size]byte
	hashed bool
	// pods are the annotated pods of the last good read, objects its ConfigMaps and Secrets.
	pods    []*v1.Pod
	objects parsedObjects
	// problem is why the last read could not be used; "" when it was good.
	problem string
	// restored is set once the kept last good manifest was tried for a file broken at start.
	restored bool
	// writingSince is when a scan first found the file open for writing (zero when it was
	// not): such a file is held back, see holdBack.
	writingSince  time.Time
	writingLogged bool
}

// watcher tells the source that the directory may have changed.
type watcher interface {
	// Events fires (coalesced) after changes that do not mark a completed write (a file
	// created or removed, the directory created); the source reads the directory once they
	// quiet down. A nil channel never fires.
	Events() <-chan struct{}
	// Written fires (coalesced) after a completed write: a manifest closed after writing
	// (IN_CLOSE_WRITE) or renamed into the directory (IN_MOVED_TO), or the directory moved into
	// place; the source reads the directory at once. A nil channel never fires.
	Written() <-chan struct{}
	// Ensure (re)establishes the watches after the directory appeared, vanished or was
	// replaced. It is called before every scan.
	Ensure() error
	Close() error
}

// NewManifestDir returns the source; Run starts it.
func NewManifestDir(opts ManifestDirOptions) (*ManifestDir, error) {
	if opts.Dir == "" {
		opts.Dir = DefaultManifestDir
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("manifest directory %s: %w", opts.Dir, err)
	}
	m := &ManifestDir{
		dir:         filepath.Clean(dir),
		rescan:      orDefault(opts.Rescan, DefaultRescan),
		debounce:    orDefault(opts.Debounce, DefaultDebounce),
		maxDelay:    orDefault(opts.MaxDelay, DefaultMaxDelay),
		maxFileSize: opts.MaxFileSize,
		clock:       opts.Clock,
		maxPods:     opts.MaxPods,
		log:         opts.Log,
		newWatcher:  newInotifyWatcher,
		files:       map[string]*fileState{},
		objects:     opts.Objects,
		nodeName:    strings.ToLower(opts.NodeName),
	}
	if m.maxFileSize <= 0 {
		m.maxFileSize = DefaultMaxFileSize
	}
	if m.clock == nil {
		m.clock = clock.RealClock{}
	}
	if m.maxPods <= 0 {
		m.maxPods = DefaultMaxPods
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if opts.StateDir != "" {
		if err := m.loadLastGood(filepath.Join(opts.StateDir, LastGoodDir)); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// loadLastGood reads the kept manifests. They are a cache of files that were good once: one
// that does not decode is dropped (logged), as are leftovers of interrupted writes.
func (m *ManifestDir) loadLastGood(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("manifest state %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("manifest state %s: %w", dir, err)
	}
	m.lastGoodDir, m.saved = dir, map[string][]byte{}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		data, err := readManifest(path, 2*m.maxFileSize+4096) // base64 inside JSON
		var rec lastGood
		if err == nil {
			err = json.Unmarshal(data, &rec)
		}
		if err == nil && recordName(rec.Path) != e.Name() {
			err = fmt.Errorf("record of %s under the wrong name", rec.Path)
		}
		if err != nil {
			m.log.Warn("manifest state: dropping an unusable record", "path", path, "err", err)
			_ = os.RemoveAll(path)
			continue
		}
		m.saved[rec.Path] = rec.Manifest
	}
	return nil
}

// recordName is the file name of the kept manifest of path: a hash, as paths can be longer than
// a file name and hold any character.
func recordName(path string) string {
	h := sha256.Sum256([]byte(path))
	return hex.EncodeToString(h[:16]) + ".json"
}

// keepLastGood stores data as the last good content of path (when kept and changed).
func (m *ManifestDir) keepLastGood(path string, data []byte) {
	if m.lastGoodDir == "" || bytes.Equal(m.saved[path], data) {
		return
	}
	rec, err := json.Marshal(lastGood{Path: path, Manifest: data})
	if err == nil {
		err = writeFileAtomic(m.lastGoodDir, recordName(path), rec)
	}
	if err != nil {
		m.log.Warn("manifest state: cannot keep the last good manifest", "origin", path, "err", err)
		return
	}
	m.saved[path] = bytes.Clone(data)
}

// static is a pod of the manifest at path as the source hands it on: annotated with its
// source and origin and, on a named node, named as the kubelet names a static pod.
func (m *ManifestDir) static(pod *v1.Pod, path string) *v1.Pod {
	if m.nodeName != "" {
		pod.Name = StaticPodName(pod.Name, m.nodeName)
	}
	return annotate(pod, pods.SourceFile, path)
}

// StaticPodName is the name the kubelet gives a static pod named name in its manifest on node
// nodeName (pkg/kubelet/config/common.go, generatePodName): "<name>-<node>", the node
// lower-cased.
func StaticPodName(name, nodeName string) string {
	return name + "-" + strings.ToLower(nodeName)
}

// forgetLastGood drops the kept manifest of a file that is gone.
func (m *ManifestDir) forgetLastGood(path string) {
	if _, ok := m.saved[path]; !ok {
		return
	}
	if err := removeFileDurable(m.lastGoodDir, recordName(path)); err != nil {
		m.log.Warn("manifest state: cannot drop the last good manifest", "origin", path, "err", err)
		return
	}
	delete(m.saved, path)
}

// restoreLastGood gives a file that is broken on its first read the pods of its kept last good
// content, if any: those pods are still running from before the restart.
func (m *ManifestDir) restoreLastGood(path string, st *fileState) {
	if st.restored || st.pods != nil {
		return
	}
	st.restored = true
	data, ok := m.saved[path]
	if !ok {
		return
	}
	list, objs, err := parseFile(path, path, data)
	if err != nil {
		m.log.Warn("manifest state: the kept last good manifest does not parse any more", "origin", path, "err", err)
		return
	}
	st.objects = objs
	for _, pod := range list {
		st.pods = append(st.pods, m.static(pod, path))
	}
	m.log.Warn("manifest broken at start, running its last good version", "origin", path, "pods", len(list))
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Dir is the absolute path of the watched directory.
func (m *ManifestDir) Dir() string { return m.dir }

// Run reads the directory and calls send with the complete snapshot at once (also when it is
// empty, so the caller knows the source has reported), then again after every change that
// alters the snapshot (pods or problems): a completed write at once, other inotify events
// debounced, and a full rescan every Rescan interval. send is called from Run's goroutine, one
// call at a time; the snapshot's pods are shared with the source, read-only (pods.Snapshot).
// Run returns nil when ctx ends. If inotify is unavailable, the
// periodic rescan alone keeps the snapshot current.
func (m *ManifestDir) Run(ctx context.Context, send func(pods.Snapshot)) error {
	w, err := m.newWatcher(m.dir)
	if err != nil {
		m.log.Warn("manifest directory not watched, rescanning periodically only", "dir", m.dir, "rescan", m.rescan, "err", err)
		w = noWatcher{}
	}
	defer func() { _ = w.Close() }()

	m.scanAndSend(w, send)
	ticker := m.clock.NewTicker(m.rescan)
	defer ticker.Stop()
	var (
		timer  clock.Timer
		timerC <-chan time.Time
		first  time.Time
	)
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return nil
		case <-w.Written():
			// A completed write is read at once; the read covers the events being debounced.
			if timer != nil {
				timer.Stop()
			}
			timerC = nil
			m.scanAndSend(w, send)
		case <-w.Events():
			now := m.clock.Now()
			switch {
			case timerC == nil:
				first = now
				timer = m.clock.NewTimer(m.debounce)
				timerC = timer.C()
			case now.Sub(first)+m.debounce <= m.maxDelay:
				timer.Reset(m.debounce)
			}
		case <-timerC:
			timerC = nil
			m.scanAndSend(w, send)
		case <-ticker.C():
			m.scanAndSend(w, send)
		}
	}
}

// scanAndSend re-establishes the watches, scans, and sends the snapshot if it differs from the
// last one sent (always the first time).
func (m *ManifestDir) scanAndSend(w watcher, send func(pods.Snapshot)) {
	if err := w.Ensure(); err != nil {
		m.log.Debug("manifest directory watch", "dir", m.dir, "err", err)
	}
	s := m.Scan()
	if m.last != nil && apiequality.Semantic.DeepEqual(*m.last, s) {
		return
	}
	m.logChanges(m.last, s)
	m.last = &s
	send(s)
}

// logChanges logs pods added and removed and problems found and fixed.
func (m *ManifestDir) logChanges(prev *pods.Snapshot, cur pods.Snapshot) {
	var before pods.Snapshot
	if prev != nil {
		before = *prev
	}
	old := map[string]bool{}
	for _, d := range before.Pods {
		old[string(d.Pod.UID)] = true
	}
	now := map[string]bool{}
	for _, d := range cur.Pods {
		now[string(d.Pod.UID)] = true
		if !old[string(d.Pod.UID)] {
			m.log.Info("manifest pod added", "pod", podKey(d.Pod), "pod_uid", d.Pod.UID, "origin", d.Origin)
		}
	}
	for _, d := range before.Pods {
		if !now[string(d.Pod.UID)] {
			m.log.Info("manifest pod removed", "pod", podKey(d.Pod), "pod_uid", d.Pod.UID, "origin", d.Origin)
		}
	}
	oldP := map[pods.Problem]bool{}
	for _, p := range before.Problems {
		oldP[p] = true
	}
	nowP := map[pods.Problem]bool{}
	for _, p := range cur.Problems {
		nowP[p] = true
		if !oldP[p] {
			m.log.Warn("manifest problem", "origin", p.Origin, "err", p.Error)
		}
	}
	for _, p := range before.Problems {
		if !nowP[p] {
			m.log.Info("manifest problem resolved", "origin", p.Origin)
		}
	}
}

// Scan reads the directory once and returns the snapshot. Files whose content did not change
// since the previous scan are not parsed again. Run calls it; it is exported for one-shot use
// (e.g. `slicelet config check`) and must not be called while Run runs.
func (m *ManifestDir) Scan() pods.Snapshot {
	entries, err := os.ReadDir(m.dir)
	switch {
	case err == nil:
		m.dirProblem = ""
		m.scanFiles(entries)
	case errors.Is(err, fs.ErrNotExist):
		// No directory, no manifests: every pod it had is gone, as if each file was removed.
		m.dirProblem = ""
		clear(m.files)
		for path := range m.saved {
			m.forgetLastGood(path)
		}
	default:
		// Unreadable for another reason (permissions, I/O, not a directory): change nothing.
		m.dirProblem = fmt.Sprintf("manifest directory %s: %v", m.dir, err)
	}
	m.publishObjects()
	return m.snapshot()
}

// scanFiles updates the per-file state from a directory listing.
func (m *ManifestDir) scanFiles(entries []fs.DirEntry) {
	now := m.clock.Now()
	seen := map[string]bool{}
	for _, e := range entries {
		if !isManifestName(e.Name()) || e.IsDir() {
			continue
		}
		path := filepath.Join(m.dir, e.Name())
		data, writing, err := readFile(path, m.maxFileSize, true)
		if errors.Is(err, errNotRegular) || errors.Is(err, fs.ErrNotExist) {
			continue // a subdirectory behind a symlink, a FIFO, or removed since the listing
		}
		seen[path] = true
		st := m.files[path]
		if st == nil {
			st = &fileState{}
			m.files[path] = st
		}
		if m.holdBack(path, st, writing, now) {
			m.restoreLastGood(path, st) // as for a broken file, at start
			continue
		}
		if err != nil {
			st.problem = err.Error()
			st.hashed = false // parse again once it reads, even if the content is the same
			m.restoreLastGood(path, st)
			continue
		}
		h := sha256.Sum256(data)
		if st.hashed && h == st.hash {
			continue
		}
		st.hash, st.hashed = h, true
		list, objs, err := parseFile(path, path, data)
		if err != nil {
			st.problem = err.Error()
			m.restoreLastGood(path, st)
			continue
		}
		m.keepLastGood(path, data)
		st.problem = ""
		st.objects = objs
		st.pods = make([]*v1.Pod, 0, len(list))
		for _, pod := range list {
			st.pods = append(st.pods, m.static(pod, path))
		}
	}
	for path := range m.files {
		if !seen[path] {
			delete(m.files, path)
		}
	}
	for path := range m.saved {
		if !seen[path] {
			m.forgetLastGood(path)
		}
	}
}

// holdBack reports whether the content of path just read is left unused because a writer still
// has the file open: it may be partial, and a truncated manifest can be a valid, different pod.
// The file keeps what its last complete read gave (nothing if it never had one); the writer's
// close (IN_CLOSE_WRITE) triggers the next scan. A file held open for writing longer than the
// rescan interval is read as it is, so a writer that never closes cannot hide it for ever.
func (m *ManifestDir) holdBack(path string, st *fileState, writing bool, now time.Time) bool {
	if !writing {
		st.writingSince, st.writingLogged = time.Time{}, false
		return false
	}
	if st.writingSince.IsZero() {
		st.writingSince = now
		m.log.Debug("manifest being written, read once closed", "origin", path)
	}
	if now.Sub(st.writingSince) < m.rescan {
		return true
	}
	if !st.writingLogged {
		st.writingLogged = true
		m.log.Warn("manifest open for writing since long, reading it as it is", "origin", path, "since", st.writingSince)
	}
	return false
}

// snapshot builds the snapshot from the per-file state: files in lexical order, documents in
// order, first pod of a namespace/name wins, at most maxPods pods.
func (m *ManifestDir) snapshot() pods.Snapshot {
	s := pods.Snapshot{Source: pods.SourceFile}
	if m.dirProblem != "" {
		s.Problems = append(s.Problems, pods.Problem{Origin: m.dir, Error: m.dirProblem})
	}
	paths := make([]string, 0, len(m.files))
	for p := range m.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	type firstSeen struct {
		origin string
		doc, n int
	}
	byKey := map[string]firstSeen{}
	byUID := map[string]firstSeen{}
	for _, path := range paths {
		st := m.files[path]
		if st.problem != "" {
			s.Problems = append(s.Problems, pods.Problem{Origin: path, Error: st.problem})
		}
		for i, pod := range st.pods {
			k := podKey(pod)
			if prev, dup := byKey[k]; dup {
				s.Problems = append(s.Problems, pods.Problem{Origin: path, Error: fmt.Sprintf(
					"%s: pod %s: duplicate name: already defined by %s", where(path, i, len(st.pods)), k, where(prev.origin, prev.doc, prev.n))})
				continue
			}
			// Two files may set the same metadata.uid; the controller tells pods apart by UID.
			if prev, dup := byUID[string(pod.UID)]; dup {
				s.Problems = append(s.Problems, pods.Problem{Origin: path, Error: fmt.Sprintf(
					"%s: pod %s: metadata.uid: Duplicate value: %q: already used by %s", where(path, i, len(st.pods)), k, pod.UID, where(prev.origin, prev.doc, prev.n))})
				continue
			}
			if len(s.Pods) >= m.maxPods {
				s.Problems = append(s.Problems, pods.Problem{Origin: path, Error: fmt.Sprintf(
					"%s: pod %s: too many pods: the manifest directory holds at most %d", where(path, i, len(st.pods)), k, m.maxPods)})
				continue
			}
			byKey[k] = firstSeen{origin: path, doc: i, n: len(st.pods)}
			byUID[string(pod.UID)] = byKey[k]
			s.Pods = append(s.Pods, pods.Desired{Pod: pod, Source: pods.SourceFile, Origin: path})
		}
	}
	return s
}

// isManifestName reports whether a directory entry name is a manifest: *.yaml, *.yml or *.json,
// not a dotfile (editor swap and lock files, hidden temp files) and not a backup ("~").
func isManifestName(name string) bool {
	if strings.HasPrefix(name, ".") || strings.HasSuffix(name, "~") {
		return false
	}
	switch filepath.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// errNotRegular marks a path that is not a regular file after following symlinks.
var errNotRegular = errors.New("not a regular file")

// readManifest reads a regular file of at most max bytes. It opens with O_NONBLOCK and checks
// the opened file, so a FIFO put in place of a manifest can neither block the source nor be
// read.
func readManifest(path string, max int64) ([]byte, error) {
	data, _, err := readFile(path, max, false)
	return data, err
}

// readFile is readManifest that, with checkWriters, also reports whether another open file
// description has the file open for writing (a write in progress: its content may be partial).
// The check takes a read lease on the opened file (fcntl F_SETLEASE, F_RDLCK), which the kernel
// refuses with EAGAIN while the file is open for writing and which, once granted, makes a later
// open for writing wait until this read is done and the file closed; where leases are not
// available, writing is false.
func readFile(path string, max int64, checkWriters bool) (data []byte, writing bool, err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false, err
	}
	defer f.Close() // also releases the lease
	fi, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, false, errNotRegular
	}
	if checkWriters {
		writing = openForWriting(f)
	}
	if fi.Size() > max {
		return nil, writing, fmt.Errorf("%s: file too large: %d bytes, at most %d", path, fi.Size(), max)
	}
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(f, max+1))
	if err != nil {
		return nil, writing, fmt.Errorf("%s: %w", path, err)
	}
	if n > max {
		return nil, writing, fmt.Errorf("%s: file too large: more than %d bytes", path, max)
	}
	return buf.Bytes(), writing, nil
}

// noWatcher is the watcher when inotify is unavailable: the periodic rescan does everything.
type noWatcher struct{}

func (noWatcher) Events() <-chan struct{}  { return nil }
func (noWatcher) Written() <-chan struct{} { return nil }
func (noWatcher) Ensure() error            { return nil }
func (noWatcher) Close() error             { return nil }
