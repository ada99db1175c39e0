package guest

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// stagedFile is one non-directory entry of an unpacked package.
type stagedFile struct {
	pkg  string
	src  string      // where it is on the host, inside the staging tree
	mode fs.FileMode // from Lstat: regular file or symlink, with permissions
	link string      // symlink target, verbatim
}

// stage is the union of the unpacked packages, addressed by guest path
// ("usr/bin/rdma", no leading slash). Each package is unpacked into its own
// directory so that we know which package a file came from; lookups never
// go through the host's file system root, so an absolute symlink in a
// package (iproute2's sbin/ip -> /bin/ip) resolves to the package's file,
// not the host's.
type stage struct {
	files map[string]stagedFile
}

func newStage() *stage { return &stage{files: map[string]stagedFile{}} }

// add records every file and symlink under dir as belonging to pkg.
func (s *stage) add(pkg, dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		f := stagedFile{pkg: pkg, src: p, mode: info.Mode()}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			if f.link, err = os.Readlink(p); err != nil {
				return err
			}
		case info.Mode().IsRegular():
		default:
			return nil // packages ship no devices or fifos we could use
		}
		gp := filepath.ToSlash(rel)
		if old, ok := s.files[gp]; ok && old.pkg != pkg {
			return fmt.Errorf("%s is in both %s and %s", gp, old.pkg, pkg)
		}
		s.files[gp] = f
		return nil
	})
}

// resolve follows symlinks inside the staged tree, component by component,
// and returns the final path and every symlink passed on the way (they
// must be in the image too, or the guest cannot follow them).
func (s *stage) resolve(p string) (string, []string, error) {
	parts := strings.Split(p, "/")
	done := ""
	var links []string
	hops := 0
	for len(parts) > 0 {
		c := parts[0]
		parts = parts[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			done = path.Dir(done)
			if done == "." {
				done = ""
			}
			continue
		}
		next := path.Join(done, c)
		f, ok := s.files[next]
		if !ok || f.link == "" {
			done = next
			continue
		}
		if hops++; hops > 40 {
			return "", nil, fmt.Errorf("%s: too many levels of symbolic links", p)
		}
		links = append(links, next)
		if strings.HasPrefix(f.link, "/") {
			done = ""
		}
		parts = append(strings.Split(f.link, "/"), parts...)
	}
	if _, ok := s.files[done]; !ok {
		return "", links, fmt.Errorf("%s: resolves to %s, which no staged package ships", p, done)
	}
	return done, links, nil
}

// Directories the dynamic loader searches on Debian amd64 when there is no
// ld.so.cache (the initramfs has none).
var libraryDirs = []string{
	"lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib64", "usr/lib64", "lib", "usr/lib",
}

// closure returns roots plus everything they need at run time: symlink
// chains, the ELF interpreter and the DT_NEEDED libraries, recursively.
// Libraries that glibc loads with dlopen are not in DT_NEEDED; callers add
// them as roots (libgcc_s.so.1).
func (s *stage) closure(roots []string) (map[string]bool, error) {
	need := map[string]bool{}
	var missing []string
	queue := append([]string(nil), roots...)
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if need[p] {
			continue
		}
		final, links, err := s.resolve(p)
		if err != nil {
			missing = append(missing, err.Error())
			continue
		}
		for _, l := range links {
			need[l] = true
		}
		need[p] = true
		if need[final] && final != p {
			continue
		}
		need[final] = true
		deps, err := s.elfDeps(final)
		if err != nil {
			missing = append(missing, err.Error())
			continue
		}
		queue = append(queue, deps...)
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("unresolved run-time dependencies (add the Debian package that ships them to guest's package list):\n  %s",
			strings.Join(missing, "\n  "))
	}
	return need, nil
}

// elfDeps returns the guest paths of the interpreter and the libraries an
// ELF file needs; nil for a file that is not ELF (a script, a config file).
func (s *stage) elfDeps(p string) ([]string, error) {
	f := s.files[p]
	if !f.mode.IsRegular() {
		return nil, nil
	}
	magic := make([]byte, 4)
	fh, err := os.Open(f.src)
	if err != nil {
		return nil, err
	}
	n, _ := fh.Read(magic)
	fh.Close()
	if n < 4 || !bytes.Equal(magic, []byte("\x7fELF")) {
		return nil, nil
	}
	ef, err := elf.Open(f.src)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", p, err)
	}
	defer ef.Close()
	var deps []string
	for _, prog := range ef.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, prog.Filesz)
		if _, err := prog.ReadAt(b, 0); err != nil {
			return nil, fmt.Errorf("%s: PT_INTERP: %v", p, err)
		}
		deps = append(deps, strings.TrimPrefix(strings.TrimRight(string(b), "\x00"), "/"))
	}
	needed, err := ef.ImportedLibraries()
	if err != nil {
		// A static binary (busybox) has no dynamic section.
		if errors.Is(err, elf.ErrNoSymbols) {
			return deps, nil
		}
		return nil, fmt.Errorf("%s: DT_NEEDED: %v", p, err)
	}
	dirs := append(s.runpath(ef, p), libraryDirs...)
	for _, lib := range needed {
		found := ""
		for _, d := range dirs {
			cand := path.Join(d, lib)
			if _, _, err := s.resolve(cand); err == nil {
				found = cand
				break
			}
		}
		if found == "" {
			return nil, fmt.Errorf("%s (from %s) needs %s", p, f.pkg, lib)
		}
		deps = append(deps, found)
	}
	return deps, nil
}

// runpath returns the DT_RUNPATH/DT_RPATH directories of an ELF file with
// $ORIGIN expanded, as guest paths.
func (s *stage) runpath(ef *elf.File, p string) []string {
	var dirs []string
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		vals, _ := ef.DynString(tag)
		for _, v := range vals {
			for _, d := range strings.Split(v, ":") {
				d = strings.ReplaceAll(d, "${ORIGIN}", "/"+path.Dir(p))
				d = strings.ReplaceAll(d, "$ORIGIN", "/"+path.Dir(p))
				if d != "" {
					dirs = append(dirs, strings.TrimPrefix(path.Clean(d), "/"))
				}
			}
		}
	}
	return dirs
}
