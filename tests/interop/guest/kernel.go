package guest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// rootModules are the modules the guest loads by name; their dependencies
// come from modules.dep. crc32_generic is not a symbol dependency of
// rdma_rxe: rxe asks the crypto API for "crc32" when a device is added, and
// the initramfs has no modprobe to autoload it.
var rootModules = []string{
	"virtio_pci", "virtio_net", // the guest NIC
	"crc32_generic",         // rxe's ICRC
	"ib_uverbs", "rdma_rxe", // verbs and the soft-RoCE device
	"rdma_ucm", // rdma_cm for rping and rdmacm-utils
}

// kernelModule is one module to put in the image, in load order.
type kernelModule struct {
	Name string `json:"name"`
	Path string `json:"path"` // guest path of the decompressed .ko
	src  string
}

// stagedKernel is what the image takes from the kernel package.
type stagedKernel struct {
	release string
	bzImage string
	modules []kernelModule
}

// stageKernel unpacks the kernel package into dir, generates modules.dep if
// the package lacks it (Debian's does: its postinst runs depmod), and
// resolves rootModules with their dependencies in load order.
func stageKernel(ctx context.Context, deb, dir string) (*stagedKernel, error) {
	if err := extractDeb(ctx, deb, dir); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(filepath.Join(dir, "lib/modules"))
	if err != nil {
		return nil, err
	}
	if len(ents) != 1 {
		return nil, fmt.Errorf("%s: expected one lib/modules/<release>, found %d", filepath.Base(deb), len(ents))
	}
	k := &stagedKernel{release: ents[0].Name()}
	k.bzImage = filepath.Join(dir, "boot", "vmlinuz-"+k.release)
	if _, err := os.Stat(k.bzImage); err != nil {
		return nil, err
	}
	modDir := filepath.Join(dir, "lib/modules", k.release)
	depFile := filepath.Join(modDir, "modules.dep")
	if _, err := os.Stat(depFile); err != nil {
		depmod, lerr := lookPathSbin("depmod")
		if lerr != nil {
			return nil, fmt.Errorf("the kernel package has no modules.dep and depmod is missing (install Debian's kmod): %v", lerr)
		}
		if out, err := exec.CommandContext(ctx, depmod, "-b", dir, k.release).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("depmod -b: %w: %s", err, out)
		}
	}
	dep, err := readModulesDep(depFile)
	if err != nil {
		return nil, err
	}
	builtin := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(modDir, "modules.builtin")); err == nil {
		for _, l := range strings.Fields(string(b)) {
			builtin[moduleName(l)] = true
		}
	}
	order, err := moduleOrder(dep, builtin, rootModules)
	if err != nil {
		return nil, err
	}
	for _, rel := range order {
		k.modules = append(k.modules, kernelModule{
			Name: moduleName(rel),
			Path: path.Join("lib/modules", k.release, stripCompression(rel)),
			src:  filepath.Join(modDir, rel),
		})
	}
	return k, nil
}

// lookPathSbin finds a tool in PATH or the sbin directories, which a
// non-login root shell's PATH may lack.
func lookPathSbin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH, /usr/sbin or /sbin", name)
}

// readModulesDep parses "path: dep dep …" lines into name -> [path, deps…].
func readModulesDep(file string) (map[string][]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dep := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		mod, deps, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		dep[moduleName(mod)] = append([]string{mod}, strings.Fields(deps)...)
	}
	return dep, sc.Err()
}

// moduleName turns "kernel/x/rdma_rxe.ko.xz" into "rdma_rxe"; the kernel
// treats '-' and '_' in module names alike.
func moduleName(p string) string {
	b := stripCompression(path.Base(p))
	return strings.ReplaceAll(strings.TrimSuffix(b, ".ko"), "-", "_")
}

func stripCompression(p string) string {
	for _, ext := range []string{".xz", ".zst", ".gz"} {
		if strings.HasSuffix(p, ".ko"+ext) {
			return strings.TrimSuffix(p, ext)
		}
	}
	return p
}

// moduleOrder returns module paths so that every module comes after the
// modules it depends on (a depth-first post-order from the roots).
func moduleOrder(dep map[string][]string, builtin map[string]bool, roots []string) ([]string, error) {
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(name string) error
	visit = func(name string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("module dependency cycle at %s", name)
		case 2:
			return nil
		}
		entry, ok := dep[name]
		if !ok {
			if builtin[name] {
				state[name] = 2
				return nil
			}
			return fmt.Errorf("module %s is neither in modules.dep nor built in", name)
		}
		state[name] = 1
		// modules.dep lists dependencies so that the last is loaded first;
		// walking them in reverse keeps that order among siblings.
		for i := len(entry) - 1; i >= 1; i-- {
			if err := visit(moduleName(entry[i])); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, entry[0])
		return nil
	}
	for _, r := range roots {
		if err := visit(strings.ReplaceAll(r, "-", "_")); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// readModule returns a module's bytes, decompressed: busybox insmod loads
// plain ELF only.
func readModule(ctx context.Context, src string) ([]byte, error) {
	switch {
	case strings.HasSuffix(src, ".ko.xz"):
		return runDecompressor(ctx, "xz", src)
	case strings.HasSuffix(src, ".ko.zst"):
		return runDecompressor(ctx, "zstd", src)
	case strings.HasSuffix(src, ".ko.gz"):
		f, err := os.Open(src)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, err
		}
		return io.ReadAll(zr)
	}
	return os.ReadFile(src)
}

func runDecompressor(ctx context.Context, tool, src string) ([]byte, error) {
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, tool, "-dc", src)
	cmd.Stdout = &out
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s -dc %s: %w: %s (Debian package xz-utils or zstd)", tool, filepath.Base(src), err, stderr.String())
	}
	return out.Bytes(), nil
}
