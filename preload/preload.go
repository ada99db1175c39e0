// Package preload builds libirdma-emu-preload.so, the C library that stands
// in for the kernel's uverbs device under an unmodified rdma-core program
// (docs/preload.md).
//
// The C sources (c/) are embedded in the Go binary and compiled with gcc on first
// use into a cache directory, keyed by a hash of the sources and the
// compiler flags, so `go run ./cmd/irdma-emu exec …` works from a clean
// checkout and a changed source is rebuilt. Path returns the library.
package preload

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

//go:embed c/*.c c/*.h c/*.map
var sources embed.FS

// Environment variables the build honours.
const (
	// EnvCacheDir overrides the cache directory.
	EnvCacheDir = "IRDMA_EMU_CACHE_DIR"
	// EnvCC overrides the compiler (default gcc).
	EnvCC = "IRDMA_EMU_CC"
)

// cflags are the compiler flags; they are part of the cache key.
var cflags = []string{
	"-std=gnu11", "-O2", "-g", "-fPIC", "-shared",
	"-Wall", "-Wextra", "-Werror",
	"-fvisibility=hidden", "-U_FORTIFY_SOURCE", "-pthread",
}

// ldflags: iemu.map versions the libibverbs interposers IBVERBS_1.1
// (notify.c); the libc ones stay unversioned, which binds any version.
var ldflags = []string{"-ldl", "-Wl,--version-script=iemu.map"}

var (
	mu       sync.Mutex
	built    string
	buildErr error
)

// Path returns the path of the built library, compiling it on the first
// call if the cache does not hold the current version. A failed build is
// retried on the next call.
func Path() (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if built != "" {
		if _, err := os.Stat(built); err == nil {
			return built, nil
		}
	}
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	built, buildErr = Build(dir)
	return built, buildErr
}

// Key is the cache key: a hash of the sources, the compiler and its flags.
func Key() string {
	h := sha256.New()
	names, _ := fs.Glob(sources, "c/*")
	sort.Strings(names)
	for _, n := range names {
		b, _ := sources.ReadFile(n)
		fmt.Fprintf(h, "%s %d\n", n, len(b))
		h.Write(b)
	}
	fmt.Fprintf(h, "cc=%s\nflags=%s\nld=%s\n", compiler(), strings.Join(cflags, " "), strings.Join(ldflags, " "))
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func compiler() string {
	if cc := os.Getenv(EnvCC); cc != "" {
		return cc
	}
	return "gcc"
}

// FileName is the library's file name for the current sources.
func FileName() string { return "libirdma-emu-preload-" + Key() + ".so" }

// CacheDir returns the directory the library is built into, creating it:
// $IRDMA_EMU_CACHE_DIR, else $XDG_CACHE_HOME/irdma-emu (or
// ~/.cache/irdma-emu), else /var/cache/irdma-emu for root, else a private
// directory under the temporary directory.
func CacheDir() (string, error) {
	if d := os.Getenv(EnvCacheDir); d != "" {
		return d, os.MkdirAll(d, 0o755)
	}
	var tried []string
	if d, err := os.UserCacheDir(); err == nil {
		d = filepath.Join(d, "irdma-emu")
		if err := os.MkdirAll(d, 0o755); err == nil {
			return d, nil
		}
		tried = append(tried, d)
	}
	if os.Geteuid() == 0 {
		d := "/var/cache/irdma-emu"
		if err := os.MkdirAll(d, 0o755); err == nil {
			return d, nil
		}
		tried = append(tried, d)
	}
	// A shared temporary directory: only a directory we own and nobody
	// else can write is safe to load a library from.
	d := filepath.Join(os.TempDir(), fmt.Sprintf("irdma-emu-%d", os.Geteuid()))
	if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("preload: no cache directory (tried %s, %s): %w", strings.Join(tried, ", "), d, err)
	}
	if err := checkPrivate(d); err != nil {
		return "", err
	}
	return d, nil
}

// Build compiles the library into dir unless it is already there, and
// returns its path. The library is written under a temporary name and
// renamed, so concurrent builds and running programs never see half a file.
func Build(dir string) (string, error) {
	out := filepath.Join(dir, FileName())
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	cc := compiler()
	if _, err := exec.LookPath(cc); err != nil {
		return "", fmt.Errorf("preload: %s not found: the preload library is compiled on first use (install gcc and libc6-dev): %w", cc, err)
	}
	src, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return "", fmt.Errorf("preload: %w", err)
	}
	defer os.RemoveAll(src)
	names, _ := fs.Glob(sources, "c/*")
	var cfiles []string
	for _, n := range names {
		b, err := sources.ReadFile(n)
		if err != nil {
			return "", err
		}
		base := filepath.Base(n)
		if err := os.WriteFile(filepath.Join(src, base), b, 0o644); err != nil {
			return "", fmt.Errorf("preload: %w", err)
		}
		if strings.HasSuffix(base, ".c") {
			cfiles = append(cfiles, base)
		}
	}
	sort.Strings(cfiles)
	tmp := filepath.Join(src, "out.so")
	args := append(append(append([]string{}, cflags...), "-o", tmp), cfiles...)
	args = append(args, ldflags...)
	cmd := exec.Command(cc, args...)
	cmd.Dir = src
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("preload: %s %s: %w\n%s", cc, strings.Join(args, " "), err, msg)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("preload: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", fmt.Errorf("preload: %w", err)
	}
	return out, nil
}
