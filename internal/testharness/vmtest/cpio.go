package vmtest

import (
	"fmt"
	"io"
)

// cpioWriter writes an initramfs archive in the kernel's "newc" cpio format
// (Documentation/driver-api/early-userspace/buffer-format.rst). It is written
// here rather than by the cpio tool so that the archive can hold device nodes
// and root-owned files without privileges, and so that its bytes depend only
// on its contents (every mtime is zero).
type cpioWriter struct {
	w   io.Writer
	ino uint32
	err error
}

// Mode bits of the entries the initramfs needs (see stat(2)).
const (
	cpioModeDir     = 0o040000
	cpioModeFile    = 0o100000
	cpioModeSymlink = 0o120000
	cpioModeCharDev = 0o020000
)

func newCPIOWriter(w io.Writer) *cpioWriter { return &cpioWriter{w: w} }

// Dir adds a directory.
func (c *cpioWriter) Dir(name string, perm uint32) {
	c.entry(name, cpioModeDir|perm, 0, 0, nil)
}

// File adds a regular file with the given contents.
func (c *cpioWriter) File(name string, perm uint32, data []byte) {
	c.entry(name, cpioModeFile|perm, 0, 0, data)
}

// Symlink adds a symbolic link to target.
func (c *cpioWriter) Symlink(name, target string) {
	c.entry(name, cpioModeSymlink|0o777, 0, 0, []byte(target))
}

// CharDev adds a character device node.
func (c *cpioWriter) CharDev(name string, perm, major, minor uint32) {
	c.entry(name, cpioModeCharDev|perm, major, minor, nil)
}

// Close writes the trailer entry and reports the first error of any call.
func (c *cpioWriter) Close() error {
	c.entry("TRAILER!!!", 0, 0, 0, nil)
	return c.err
}

func (c *cpioWriter) entry(name string, mode, rmajor, rminor uint32, data []byte) {
	if c.err != nil {
		return
	}
	c.ino++
	nlink := uint32(1)
	if mode&0o170000 == cpioModeDir {
		nlink = 2
	}
	ino := c.ino
	if name == "TRAILER!!!" {
		ino, nlink = 0, 1
	}
	// 13 eight-digit hex fields: ino, mode, uid, gid, nlink, mtime, filesize,
	// devmajor, devminor, rdevmajor, rdevminor, namesize (with its NUL), check.
	hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rmajor, rminor, len(name)+1, 0)
	buf := make([]byte, 0, len(hdr)+len(name)+4+len(data)+3)
	buf = append(buf, hdr...)
	buf = append(buf, name...)
	buf = append(buf, 0)
	buf = pad4(buf)
	buf = append(buf, data...)
	buf = pad4(buf)
	if _, err := c.w.Write(buf); err != nil {
		c.err = fmt.Errorf("cpio entry %q: %w", name, err)
	}
}

// pad4 pads b with NUL bytes to a multiple of four: newc aligns both the
// name and the data of every entry. The header is 110 bytes and each entry
// starts aligned, so aligning the running length of b is enough.
func pad4(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}
