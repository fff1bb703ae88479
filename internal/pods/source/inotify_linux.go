package source

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Masks of the two watches. The directory watch sees files appear (IN_CREATE, IN_MOVED_TO — an
// editor's rename into place), change (IN_CLOSE_WRITE: only once the writer is done, not on
// every write; with IN_MOVED_TO it marks a completed write, read at once) and go (IN_DELETE, IN_MOVED_FROM), and the directory itself go
// (IN_DELETE_SELF, IN_MOVE_SELF). The parent watch sees the directory (or a symlink to it)
// appear, be replaced or go, so a directory that does not exist yet or is recreated is picked
// up without waiting for the rescan.
const (
	dirMask    = unix.IN_CREATE | unix.IN_CLOSE_WRITE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR
	parentMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR
)

// inotifyWatcher watches the manifest directory and its parent with one inotify instance.
type inotifyWatcher struct {
	dir, parent, base string
	f                 *os.File
	fd                int
	events, written   chan struct{}
	done              chan struct{}

	mu       sync.Mutex
	dirWd    int // -1 when the directory is not watched
	parentWd int // -1 when the parent is not watched
}

// newInotifyWatcher starts watching dir (and its parent). Neither has to exist: Ensure adds the
// watches once they do.
func newInotifyWatcher(dir string) (watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	w := &inotifyWatcher{
		dir: dir, parent: filepath.Dir(dir), base: filepath.Base(dir),
		// A non-blocking descriptor handed to os.NewFile goes to the runtime poller, so Read
		// parks the goroutine instead of a thread, and Close wakes it up.
		f: os.NewFile(uintptr(fd), "inotify"), fd: fd,
		events: make(chan struct{}, 1), written: make(chan struct{}, 1), done: make(chan struct{}),
		dirWd: -1, parentWd: -1,
	}
	_ = w.Ensure()
	go w.read()
	return w, nil
}

func (w *inotifyWatcher) Events() <-chan struct{}  { return w.events }
func (w *inotifyWatcher) Written() <-chan struct{} { return w.written }

// Ensure adds the watches that are missing and replaces the ones that watch a stale inode: the
// same path added again returns the existing descriptor, a new inode (directory recreated,
// symlink switched) a new one.
func (w *inotifyWatcher) Ensure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	if err := w.ensureLocked(&w.parentWd, w.parent, parentMask); err != nil {
		errs = append(errs, err)
	}
	if err := w.ensureLocked(&w.dirWd, w.dir, dirMask); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (w *inotifyWatcher) ensureLocked(wd *int, path string, mask uint32) error {
	n, err := unix.InotifyAddWatch(w.fd, path, mask)
	if err != nil {
		if *wd >= 0 {
			_, _ = unix.InotifyRmWatch(w.fd, uint32(*wd))
			*wd = -1
		}
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return nil // not there (yet): the parent watch or the rescan will bring it back
		}
		return fmt.Errorf("inotify watch %s: %w", path, err)
	}
	if *wd >= 0 && *wd != n {
		// The path now names another inode; the old watch would report a directory nobody
		// reads any more. (EINVAL if the kernel already dropped it: nothing to do.)
		_, _ = unix.InotifyRmWatch(w.fd, uint32(*wd))
	}
	*wd = n
	return nil
}

// read turns inotify events into (coalesced) notifications until Close. A buffer holding a
// completed write fires Written alone: the read it triggers covers the buffer's other events.
func (w *inotifyWatcher) read() {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return // closed
		}
		switch w.handle(buf[:n]) {
		case changeWritten:
			notify(w.written)
		case changeOther:
			notify(w.events)
		}
	}
}

// change is what a batch of inotify events means to the source; a larger value wins.
type change int

const (
	changeNone    change = iota // nothing the source reads
	changeOther                 // something changed; read once quiet
	changeWritten               // a write completed; read at once
)

// dirChange is what one event of the directory watch means: IN_CLOSE_WRITE and IN_MOVED_TO of a
// manifest name complete a write (the file is whole); the other events of manifest names and
// of subdirectories (a file created, removed or moved away) do not, nor does anything about
// ignored names (editors' swap and backup files, other extensions).
func dirChange(mask uint32, name string) change {
	switch {
	case name == "":
		return changeOther
	case mask&unix.IN_ISDIR != 0:
		return changeOther
	case !isManifestName(name):
		return changeNone
	case mask&(unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO) != 0:
		return changeWritten
	default:
		return changeOther
	}
}

// parentChange is what one event of the parent watch means: the directory moved into place is
// complete, created or removed it is not.
func parentChange(mask uint32, name, base string) change {
	switch {
	case name != base:
		return changeNone
	case mask&unix.IN_MOVED_TO != 0:
		return changeWritten
	default:
		return changeOther
	}
}

// handle processes a buffer of events and reports what they mean together.
func (w *inotifyWatcher) handle(buf []byte) change {
	w.mu.Lock()
	defer w.mu.Unlock()
	got := changeNone
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
		off += unix.SizeofInotifyEvent + int(ev.Len)
		name := string(nameBytes)
		if i := indexNUL(name); i >= 0 {
			name = name[:i] // the name is NUL-padded
		}
		wd := int(ev.Wd)
		switch {
		case ev.Mask&unix.IN_Q_OVERFLOW != 0:
			got = max(got, changeOther) // events were lost: rescan
		case wd == w.dirWd && w.dirWd >= 0:
			if ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED) != 0 {
				// The directory went away or moved (the watch follows the inode to its new
				// name); stop watching it, the parent watch sees it come back.
				if ev.Mask&unix.IN_IGNORED == 0 {
					_, _ = unix.InotifyRmWatch(w.fd, uint32(w.dirWd))
				}
				w.dirWd = -1
				got = max(got, changeOther)
				continue
			}
			got = max(got, dirChange(ev.Mask, name))
		case wd == w.parentWd && w.parentWd >= 0:
			if ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED) != 0 {
				if ev.Mask&unix.IN_IGNORED == 0 {
					_, _ = unix.InotifyRmWatch(w.fd, uint32(w.parentWd))
				}
				w.parentWd = -1
				got = max(got, changeOther)
				continue
			}
			got = max(got, parentChange(ev.Mask, name, w.base))
		}
	}
	return got
}

func indexNUL(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return i
		}
	}
	return -1
}

// notify fires ch unless a notification is already pending.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Close stops the watcher and waits for its reader.
func (w *inotifyWatcher) Close() error {
	err := w.f.Close()
	<-w.done
	return err
}
