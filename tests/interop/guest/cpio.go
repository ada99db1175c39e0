package guest

import (
	"fmt"
	"io"
	"path"
	"strings"
)

// cpioWriter writes the "newc" (SVR4, no CRC) cpio format the kernel's
// initramfs unpacker reads. It is written here rather than driving the cpio
// tool so that an entry's mode, owner and device numbers are exactly what
// the guest needs (root-owned files, a /dev/console node) regardless of the
// host's file system, and so that symlinks are stored as they are in the
// packages instead of being resolved through the host.
type cpioWriter struct {
	w     io.Writer
	ino   uint32
	dirs  map[string]bool // directories already written, so parents appear once
	err   error
	names map[string]bool // every entry written, to refuse duplicates
}

func newCPIOWriter(w io.Writer) *cpioWriter {
	return &cpioWriter{w: w, ino: 1, dirs: map[string]bool{}, names: map[string]bool{}}
}

// Mode bits of the cpio format (the same as st_mode).
const (
	cpioDir     = 0o040000
	cpioFile    = 0o100000
	cpioSymlink = 0o120000
	cpioChar    = 0o020000
)

func (c *cpioWriter) header(name string, mode uint32, size int, rdevMajor, rdevMinor uint32) {
	if c.err != nil {
		return
	}
	nlink := uint32(1)
	if mode&0o170000 == cpioDir {
		nlink = 2
	}
	// Field order: magic, ino, mode, uid, gid, nlink, mtime, filesize,
	// devmajor, devminor, rdevmajor, rdevminor, namesize, check. Times are
	// zero so that the same inputs give the same archive.
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, size, 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
	c.ino++
	c.write([]byte(hdr))
	c.write([]byte(name))
	c.write([]byte{0})
	c.pad(len(hdr) + len(name) + 1)
}

func (c *cpioWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	_, c.err = c.w.Write(b)
}

// pad aligns to the 4-byte boundary the format requires after the header
// plus name and after the data.
func (c *cpioWriter) pad(n int) {
	if r := n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

// clean turns a path into the relative form the kernel expects ("a/b", no
// leading slash) and rejects escapes from the archive root.
func cleanArchivePath(p string) (string, error) {
	q := strings.TrimPrefix(path.Clean("/"+p), "/")
	if q == "" || q == "." {
		return "", fmt.Errorf("cpio: empty path %q", p)
	}
	return q, nil
}

// mkdirAll writes every missing parent directory of name (not name itself).
func (c *cpioWriter) mkdirAll(name string) {
	dir := path.Dir(name)
	if dir == "." || dir == "/" || c.dirs[dir] {
		return
	}
	c.mkdirAll(dir)
	c.dirs[dir] = true
	c.names[dir] = true
	c.header(dir, cpioDir|0o755, 0, 0, 0)
}

func (c *cpioWriter) claim(p string) (string, error) {
	name, err := cleanArchivePath(p)
	if err != nil {
		return "", err
	}
	if c.names[name] {
		return "", fmt.Errorf("cpio: %s written twice", name)
	}
	c.mkdirAll(name)
	c.names[name] = true
	return name, nil
}

// Dir writes a directory with the given permission bits (0o1777 for a
// sticky directory).
func (c *cpioWriter) Dir(p string, perm uint32) error {
	name, err := cleanArchivePath(p)
	if err != nil {
		return err
	}
	if c.dirs[name] {
		return c.err
	}
	c.mkdirAll(name)
	c.dirs[name] = true
	c.names[name] = true
	c.header(name, cpioDir|perm&0o7777, 0, 0, 0)
	return c.err
}

// File writes a regular file.
func (c *cpioWriter) File(p string, perm uint32, data []byte) error {
	name, err := c.claim(p)
	if err != nil {
		return err
	}
	c.header(name, cpioFile|perm&0o7777, len(data), 0, 0)
	c.write(data)
	c.pad(len(data))
	return c.err
}

// Symlink writes a symbolic link; target is stored verbatim, so an absolute
// target resolves against the guest's root, as it would on an installed
// system.
func (c *cpioWriter) Symlink(p, target string) error {
	name, err := c.claim(p)
	if err != nil {
		return err
	}
	c.header(name, cpioSymlink|0o777, len(target), 0, 0)
	c.write([]byte(target))
	c.pad(len(target))
	return c.err
}

// CharDev writes a character device node. The kernel opens /dev/console
// for init's standard streams before anything can mount devtmpfs, so the
// node has to be in the archive.
func (c *cpioWriter) CharDev(p string, perm uint32, major, minor uint32) error {
	name, err := c.claim(p)
	if err != nil {
		return err
	}
	c.header(name, cpioChar|perm&0o7777, 0, major, minor)
	return c.err
}

// Close writes the trailer. It does not close the underlying writer.
func (c *cpioWriter) Close() error {
	c.header("TRAILER!!!", 0, 0, 0, 0)
	return c.err
}
