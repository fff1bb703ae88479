package eviction

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// readDirBatch is how many names are read from a directory at a time, so a huge directory
// does not need all its names in memory at once.
const readDirBatch = 1024

// fileID identifies an inode.
type fileID struct{ dev, ino uint64 }

// walker measures directory trees like `du -x`: allocated blocks, hard links counted once
// (across every tree it measures), never crossing into another filesystem, never following
// symlinks below the root. Files and directories that vanish during the walk are skipped.
type walker struct {
	ctx        context.Context
	maxEntries int
	entries    int
	truncated  bool
	roots      map[string]bool // every root being measured: not walked again inside another
	links      map[fileID]bool // files with more than one link already counted
	after      func(dir string, names []string)
}

func newWalker(ctx context.Context, maxEntries int, roots map[string]bool, after func(string, []string)) *walker {
	return &walker{ctx: ctx, maxEntries: maxEntries, roots: roots, links: map[fileID]bool{}, after: after}
}

// measure returns what the tree at root uses. A root that does not exist uses nothing; a root
// that is a symlink is followed (like `du -H`); a root that is a file is that file.
func (w *walker) measure(root string) (DiskUsage, error) {
	var st unix.Stat_t
	if err := unix.Stat(root, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return DiskUsage{}, nil
		}
		return DiskUsage{}, fmt.Errorf("directory %s: %w", root, err)
	}
	var u DiskUsage
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		w.count(&u, &st)
		return u, nil
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return DiskUsage{}, nil
		}
		return DiskUsage{}, fmt.Errorf("directory %s: %w", root, err)
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return DiskUsage{}, fmt.Errorf("directory %s: %w", root, err)
	}
	w.count(&u, &st)
	err = w.dir(fd, root, uint64(st.Dev), 1, &u)
	return u, err
}

// count adds one inode; a file with several links only the first time it is seen.
func (w *walker) count(u *DiskUsage, st *unix.Stat_t) {
	if st.Mode&unix.S_IFMT != unix.S_IFDIR && uint64(st.Nlink) > 1 {
		id := fileID{uint64(st.Dev), uint64(st.Ino)}
		if w.links[id] {
			return
		}
		w.links[id] = true
	}
	u.Bytes += st.Blocks * 512
	u.Inodes++
}

// dir adds the entries of the open directory fd (at path, on device dev) and descends into
// its subdirectories. It closes fd.
func (w *walker) dir(fd int, path string, dev uint64, depth int, u *DiskUsage) error {
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	for {
		if err := w.ctx.Err(); err != nil {
			return fmt.Errorf("directory %s: %w", path, err)
		}
		names, err := f.Readdirnames(readDirBatch)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			if errors.Is(err, unix.ENOENT) {
				return nil // the directory was removed while we read it
			}
			return fmt.Errorf("directory %s: %w", path, err)
		}
		if w.after != nil {
			w.after(path, names)
		}
		for _, name := range names {
			if w.entries >= w.maxEntries {
				w.truncated = true
				return nil
			}
			w.entries++
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				if errors.Is(err, unix.ENOENT) {
					continue // removed since readdir: not an error, it uses nothing now
				}
				return fmt.Errorf("file %s: %w", filepath.Join(path, name), err)
			}
			if uint64(st.Dev) != dev {
				continue // a mount point: another filesystem, not this pod's usage (du -x)
			}
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				w.count(u, &st)
				continue
			}
			sub := filepath.Join(path, name)
			if w.roots[sub] {
				continue // measured as a root of its own
			}
			if err := w.subdir(fd, name, sub, &st, depth, u); err != nil {
				return err
			}
		}
	}
}

// subdir counts the directory name of the open directory parent and descends into it.
func (w *walker) subdir(parent int, name, path string, st *unix.Stat_t, depth int, u *DiskUsage) error {
	w.count(u, st)
	if depth >= MaxStorageDepth {
		w.truncated = true
		return nil
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		// ENOENT: removed since the stat; ENOTDIR/ELOOP: replaced by a file or a symlink.
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return nil
		}
		return fmt.Errorf("directory %s: %w", path, err)
	}
	// The directory opened must be the one stat'ed: one swapped in between (a mount, a
	// rename) is skipped rather than counted or followed onto another filesystem.
	var now unix.Stat_t
	if err := unix.Fstat(fd, &now); err != nil || now.Dev != st.Dev || now.Ino != st.Ino {
		unix.Close(fd)
		return nil
	}
	return w.dir(fd, path, uint64(st.Dev), depth+1, u)
}
