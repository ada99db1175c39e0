package guest

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// recipeVersion changes whenever the way the image is assembled changes in
// a way the package versions and embedded scripts do not capture, so that
// cached images built by older code are not reused.
const recipeVersion = "1"

const kernelMetaPackage = "linux-image-amd64"

// toolPackages are installed whole (less documentation): the guest's shell
// and the RDMA user space. Their ELF files are the roots of the library walk.
var toolPackages = []string{
	"busybox-static",
	"libibverbs1", "ibverbs-providers", "ibverbs-utils",
	"librdmacm1", "rdmacm-utils",
	"libibumad3",
	"perftest",
	"iproute2", // the rdma tool and a full ip
}

// libraryPackages are where the tools' shared libraries come from; only
// the files the ELF walk reaches (and /etc) go into the image. When Debian
// adds a dependency, the build fails naming the missing library: add its
// package here.
var libraryPackages = []string{
	"libc6", "libgcc-s1",
	"libnl-3-200", "libnl-route-3-200",
	"libpci3", "libudev1", "zlib1g",
	"libbpf1", "libelf1", "libmnl0",
	"libbsd0", "libmd0", "libcap2",
}

// forcedFiles are loaded with dlopen, so no DT_NEEDED names them: glibc
// needs libgcc_s for thread cancellation (pthread_exit), rping aborts
// without it.
var forcedFiles = []string{"lib/x86_64-linux-gnu/libgcc_s.so.1"}

// onlyFiles narrows a tool package to the files the guest uses: iproute2's
// other tools (tc, ss, arpd) need libxtables, libselinux, libatm and
// Berkeley DB, which would double the image for nothing.
var onlyFiles = map[string][]string{
	"iproute2": {"bin/ip", "sbin/ip", "usr/bin/rdma", "sbin/rdma", "etc/iproute2/"},
}

// Paths of the tool packages left out of the image.
var excludedPrefixes = []string{
	"usr/share/doc/", "usr/share/man/", "usr/share/locale/", "usr/share/lintian/",
	"usr/share/bash-completion/", "usr/share/info/", "usr/share/initramfs-tools/",
	"usr/share/perl5/", "lib/udev/", "usr/lib/udev/", "lib/systemd/", "usr/lib/systemd/",
}

//go:embed initfs/init.sh
var initScript []byte

//go:embed initfs/lib.sh
var libScript []byte

// Image is a bootable guest: a kernel and a base initramfs.
type Image struct {
	Dir           string        `json:"-"`
	Kernel        string        `json:"-"` // bzImage, booted with -kernel
	Initrd        string        `json:"-"` // gzipped newc cpio
	Key           string        `json:"key"`
	KernelRelease string        `json:"kernel_release"`
	Packages      []debFile     `json:"packages"`
	Modules       []string      `json:"modules"` // load order
	InitrdSize    int64         `json:"initrd_size"`
	Files         int           `json:"files"`
	BuildTime     time.Duration `json:"build_time_ns"`
	// Cached is true when the image came from the cache as it was; then
	// LookupTime is how long finding it took.
	Cached     bool          `json:"-"`
	LookupTime time.Duration `json:"-"`
	Downloaded int           `json:"-"` // debs fetched for this build
}

// BuildOptions configure BuildImage.
type BuildOptions struct {
	// CacheDir holds downloaded debs and built images; DefaultCacheDir
	// when empty.
	CacheDir string
	// Logf receives progress lines; none when nil.
	Logf func(format string, args ...any)
}

// CacheEnv overrides the default cache directory.
const CacheEnv = "IRDMA_EMU_INTEROP_CACHE"

// DefaultCacheDir is $IRDMA_EMU_INTEROP_CACHE, or tests/interop/cache in
// the module (gitignored). It finds the module root from the working
// directory, which go test sets to the package directory.
func DefaultCacheDir() string {
	if d := os.Getenv(CacheEnv); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		return filepath.Join(os.TempDir(), "irdma-emu-interop-cache")
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "tests", "interop", "cache")
		}
		if filepath.Dir(d) == d {
			return filepath.Join(os.TempDir(), "irdma-emu-interop-cache")
		}
	}
}

// BuildImage returns the guest image for the packages apt currently
// offers, building it if the cache does not have it. Concurrent callers
// (several test binaries) serialise on a lock file in the cache.
func BuildImage(ctx context.Context, opts BuildOptions) (*Image, error) {
	start := time.Now()
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	cache := opts.CacheDir
	if cache == "" {
		cache = DefaultCacheDir()
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	unlock, err := lockFile(ctx, filepath.Join(cache, ".lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()

	apt := &aptRunner{logf: logf}
	kpkg, err := apt.kernelPackage(ctx)
	if err != nil {
		return nil, err
	}
	pkgs := append(append([]string{kpkg}, toolPackages...), libraryPackages...)
	debs, err := apt.resolve(ctx, pkgs)
	if err != nil {
		return nil, err
	}
	key := imageKey(debs)
	imgDir := filepath.Join(cache, "images", key)
	if img, err := loadImage(imgDir); err == nil {
		img.Cached = true
		img.LookupTime = time.Since(start)
		logf("image: cache hit %s (kernel %s, initramfs %.1f MB) in %v",
			key, img.KernelRelease, float64(img.InitrdSize)/1e6, img.LookupTime.Round(time.Millisecond))
		return img, nil
	}

	logf("image: building %s (kernel package %s) in %s", key, kpkg, cache)
	debDir := filepath.Join(cache, "debs")
	if err := os.MkdirAll(debDir, 0o755); err != nil {
		return nil, err
	}
	dlStart := time.Now()
	fetched, err := apt.download(ctx, debDir, debs)
	if err != nil {
		return nil, err
	}
	logf("image: %d of %d packages downloaded in %v", fetched, len(debs), time.Since(dlStart).Round(time.Millisecond))

	work, err := os.MkdirTemp(cache, "work-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	img, err := assemble(ctx, work, debDir, debs, key, logf)
	if err != nil {
		return nil, err
	}
	img.Downloaded = fetched
	img.BuildTime = time.Since(start)

	// Publish atomically: a reader sees a complete image directory or none.
	manifest, err := json.MarshalIndent(img, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(work, "out", "manifest.json"), manifest, 0o644); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(cache, "images"), 0o755); err != nil {
		return nil, err
	}
	_ = os.RemoveAll(imgDir)
	if err := os.Rename(filepath.Join(work, "out"), imgDir); err != nil {
		return nil, err
	}
	pruneImages(filepath.Join(cache, "images"), key)
	if err := pruneDebs(debDir, debs); err != nil {
		logf("image: pruning old debs: %v", err)
	}
	img, err = loadImage(imgDir)
	if err != nil {
		return nil, err
	}
	img.Downloaded = fetched
	logf("image: built %s in %v (%d files, kernel %s, initramfs %.1f MB, %d packages downloaded)",
		key, img.BuildTime.Round(time.Millisecond), img.Files, img.KernelRelease, float64(img.InitrdSize)/1e6, fetched)
	return img, nil
}

// imageKey identifies an image by everything that goes into it.
func imageKey(debs []debFile) string {
	h := sha256.New()
	fmt.Fprintf(h, "recipe %s\n", recipeVersion)
	sorted := append([]debFile(nil), debs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Package < sorted[j].Package })
	for _, d := range sorted {
		fmt.Fprintf(h, "deb %s %s %s\n", d.Package, d.Version, d.SHA256)
	}
	fmt.Fprintf(h, "modules %s\n", strings.Join(rootModules, " "))
	fmt.Fprintf(h, "forced %s\n", strings.Join(forcedFiles, " "))
	fmt.Fprintf(h, "excluded %s\n", strings.Join(excludedPrefixes, " "))
	for _, p := range sortedKeys(onlyFiles) {
		fmt.Fprintf(h, "only %s %s\n", p, strings.Join(onlyFiles[p], " "))
	}
	h.Write(initScript)
	h.Write(libScript)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func loadImage(dir string) (*Image, error) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, err
	}
	img := &Image{}
	if err := json.Unmarshal(b, img); err != nil {
		return nil, err
	}
	img.Dir = dir
	img.Kernel = filepath.Join(dir, "bzImage")
	img.Initrd = filepath.Join(dir, "initramfs.cpio.gz")
	for _, f := range []string{img.Kernel, img.Initrd} {
		if _, err := os.Stat(f); err != nil {
			return nil, err
		}
	}
	return img, nil
}

func pruneImages(dir, keep string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.Name() != keep {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// assemble unpacks the debs under work and writes work/out/{bzImage,
// initramfs.cpio.gz}.
func assemble(ctx context.Context, work, debDir string, debs []debFile, key string, logf func(string, ...any)) (*Image, error) {
	t0 := time.Now()
	byPkg := map[string]debFile{}
	for _, d := range debs {
		byPkg[d.Package] = d
	}
	kdeb := debs[0]
	for _, d := range debs {
		if strings.HasPrefix(d.Package, "linux-image-") {
			kdeb = d
		}
	}
	k, err := stageKernel(ctx, filepath.Join(debDir, kdeb.FileName), filepath.Join(work, "kernel"))
	if err != nil {
		return nil, err
	}
	logf("image: kernel %s unpacked, %d modules resolved in %v", k.release, len(k.modules), time.Since(t0).Round(time.Millisecond))

	st := newStage()
	for _, p := range append(append([]string(nil), toolPackages...), libraryPackages...) {
		d, ok := byPkg[p]
		if !ok {
			return nil, fmt.Errorf("package %s was not resolved", p)
		}
		dir := filepath.Join(work, "pkgs", p)
		if err := extractDeb(ctx, filepath.Join(debDir, d.FileName), dir); err != nil {
			return nil, err
		}
		if err := st.add(p, dir); err != nil {
			return nil, err
		}
	}
	tool := map[string]bool{}
	for _, p := range toolPackages {
		tool[p] = true
	}
	var roots []string
	for gp, f := range st.files {
		switch {
		case tool[f.pkg] && !hasAnyPrefix(gp, excludedPrefixes):
			if only, ok := onlyFiles[f.pkg]; !ok || hasAnyPrefix(gp, only) {
				roots = append(roots, gp)
			}
		case strings.HasPrefix(gp, "etc/"):
			roots = append(roots, gp) // small configuration (libnl, ld.so.conf.d)
		}
	}
	roots = append(roots, forcedFiles...)
	sort.Strings(roots)
	need, err := st.closure(roots)
	if err != nil {
		return nil, err
	}

	out := filepath.Join(work, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	if err := copyFile(k.bzImage, filepath.Join(out, "bzImage")); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(out, "initramfs.cpio.gz"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	cw := newCPIOWriter(zw)
	files := 0
	if err := writeBase(ctx, cw, st, need, k, &files); err != nil {
		return nil, err
	}
	if err := cw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	info, err := os.Stat(filepath.Join(out, "initramfs.cpio.gz"))
	if err != nil {
		return nil, err
	}
	img := &Image{Key: key, KernelRelease: k.release, Packages: debs, InitrdSize: info.Size(), Files: files}
	for _, m := range k.modules {
		img.Modules = append(img.Modules, m.Name)
	}
	return img, nil
}

// writeBase writes the base initramfs: the fixed directories and device
// node, /init and its library, the kernel modules with their load order,
// and the selected package files.
func writeBase(ctx context.Context, cw *cpioWriter, st *stage, need map[string]bool, k *stagedKernel, files *int) error {
	for _, d := range []string{"proc", "sys", "dev", "run", "root", "scenario", "etc/irdma-emu"} {
		if err := cw.Dir(d, 0o755); err != nil {
			return err
		}
	}
	if err := cw.Dir("tmp", 0o1777); err != nil {
		return err
	}
	if err := cw.CharDev("dev/console", 0o600, 5, 1); err != nil {
		return err
	}
	if err := cw.File("init", 0o755, initScript); err != nil {
		return err
	}
	if err := cw.File("etc/irdma-emu/lib.sh", 0o644, libScript); err != nil {
		return err
	}
	if err := cw.File("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n")); err != nil {
		return err
	}
	if err := cw.File("etc/group", 0o644, []byte("root:x:0:\n")); err != nil {
		return err
	}
	var order bytes.Buffer
	for _, m := range k.modules {
		b, err := readModule(ctx, m.src)
		if err != nil {
			return err
		}
		if err := cw.File(m.Path, 0o644, b); err != nil {
			return err
		}
		fmt.Fprintf(&order, "/%s\n", m.Path)
	}
	if err := cw.File("etc/irdma-emu/modules", 0o644, order.Bytes()); err != nil {
		return err
	}
	paths := make([]string, 0, len(need))
	for p := range need {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		sf := st.files[p]
		if sf.link != "" {
			if err := cw.Symlink(p, sf.link); err != nil {
				return err
			}
			continue
		}
		b, err := os.ReadFile(sf.src)
		if err != nil {
			return err
		}
		if err := cw.File(p, unixPerm(sf.mode), b); err != nil {
			return err
		}
		*files++
	}
	// Programs that run /bin/sh (system(), popen) get busybox's shell.
	if !need["bin/sh"] {
		if err := cw.Symlink("bin/sh", "busybox"); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// lockFile takes an exclusive flock, waiting for ctx.
func lockFile(ctx context.Context, name string) (func(), error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if err != syscall.EWOULDBLOCK {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// unixPerm turns Go's file mode into the permission bits of st_mode.
func unixPerm(m os.FileMode) uint32 {
	p := uint32(m.Perm())
	if m&os.ModeSetuid != 0 {
		p |= 0o4000
	}
	if m&os.ModeSetgid != 0 {
		p |= 0o2000
	}
	if m&os.ModeSticky != 0 {
		p |= 0o1000
	}
	return p
}
