package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// The fake sysfs tree under absolute /sys/class paths.
//
// libibverbs and librdmacm read the tree through SYSFS_PATH, but programs
// and scripts around them read /sys/class/infiniband/<dev>/... by absolute
// path (rdma-core's tests: device/net to find the interface, ports/N/pkeys
// with `cat`; tools: `ls`, Python's os.listdir and glob). Intercepting every
// path call in the preload cannot cover them: opendir, fopen, glob, realpath
// and readdir call libc internals that no LD_PRELOAD symbol sees, and each
// program in a pipeline would need the preload. A private mount namespace
// covers them all with no per-call cost: exec unshares the mount namespace,
// and over /sys/class mounts a read-only overlay whose upper layer holds
// the tree's classes (infiniband, infiniband_verbs, misc/rdma_cm, …) and
// whose lower layer is the host's own /sys/class, so every other class
// (net, misc/…) stays the kernel's. The tree's classes are symbolic links
// into the daemon's run directory, resolved at each lookup: the daemon's
// atomic rewrites of the tree (port state, GIDs) are seen at once, as
// sysfs attributes are. Only the program and its children see it.
//
// It needs CAP_SYS_ADMIN (root, or a user namespace that owns the mount
// namespace) and overlayfs; without them exec warns and runs the program
// without it (SYSFS_PATH still works). /sys/class/infiniband is then a
// symbolic link where the kernel has a directory: an lstat of it differs.

// mountSysClass makes /sys/class show the classes of the tree at sysfsDir
// over the host's, in a new mount namespace of the calling thread. The
// thread stays locked: the exec that follows must run on it.
func mountSysClass(sysfsDir string) error {
	classes, err := os.ReadDir(filepath.Join(sysfsDir, "class"))
	if err != nil {
		return err
	}
	upper, err := os.MkdirTemp("", "irdma-emu-sysclass-")
	if err != nil {
		return err
	}
	defer os.Remove(upper)
	if strings.ContainsAny(upper, ",:") || strings.ContainsAny(sysfsDir, ",:") {
		return fmt.Errorf("path with ',' or ':' cannot be an overlay layer: %s", upper)
	}
	runtime.LockOSThread() // never unlocked: exec replaces the process from this thread
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare(CLONE_NEWNS): %w", err)
	}
	// Nothing mounted from here on reaches the host's namespace.
	if err := unix.Mount("none", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	// The layer lives on a private tmpfs: no file of it is left on disk,
	// and it goes away with the namespace.
	if err := unix.Mount("tmpfs", upper, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755"); err != nil {
		return fmt.Errorf("tmpfs: %w", err)
	}
	for _, c := range classes {
		src := filepath.Join(sysfsDir, "class", c.Name())
		host := filepath.Join("/sys/class", c.Name())
		if fi, err := os.Stat(host); err == nil && fi.IsDir() && c.IsDir() {
			// A class the host has too (misc): a directory of links,
			// merged with the host's by the overlay.
			if err := os.Mkdir(filepath.Join(upper, c.Name()), 0o755); err != nil {
				return err
			}
			ents, err := os.ReadDir(src)
			if err != nil {
				return err
			}
			for _, e := range ents {
				if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(upper, c.Name(), e.Name())); err != nil {
					return err
				}
			}
			continue
		}
		if err := os.Symlink(src, filepath.Join(upper, c.Name())); err != nil {
			return err
		}
	}
	opts := "lowerdir=" + upper + ":/sys/class"
	if err := unix.Mount("overlay", "/sys/class", "overlay", unix.MS_RDONLY, opts); err != nil {
		return fmt.Errorf("overlay on /sys/class: %w", err)
	}
	// The overlay holds the layer; its mount point is not needed any more.
	if err := unix.Unmount(upper, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the layer: %w", err)
	}
	return nil
}
