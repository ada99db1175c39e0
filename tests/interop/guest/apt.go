package guest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// debFile is one package file as apt would download it.
type debFile struct {
	Package  string `json:"package"`
	Version  string `json:"version"`
	FileName string `json:"file"` // as apt names it in the download directory
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
}

// aptRunner runs apt's command-line tools. apt-get download refuses to
// write as the unprivileged _apt user into a root-only directory and warns;
// running its download as root is what a root user of apt gets anyway.
type aptRunner struct {
	logf    func(format string, args ...any)
	updated bool // apt-get update already tried in this process
}

func (a *aptRunner) run(ctx context.Context, dir string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	// apt reports a missing package on stderr with "E:" but may still exit 0
	// for --print-uris; treat any E: line as failure.
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.HasPrefix(line, "E:") {
			return out, fmt.Errorf("%s %s: %s", name, strings.Join(args, " "), strings.TrimSpace(stderr.String()))
		}
	}
	return out, nil
}

// update refreshes apt's package lists once per process. A fresh machine
// may have no lists at all, and Debian's security archive removes the
// previous kernel's files as soon as a new one is published, so stale
// lists point at files that are gone.
func (a *aptRunner) update(ctx context.Context) error {
	a.updated = true
	a.logf("image: running apt-get update")
	_, err := a.run(ctx, "", "apt-get", "update", "-qq")
	return err
}

// withUpdate runs f, and if it fails, refreshes the package lists and runs
// it once more.
func (a *aptRunner) withUpdate(ctx context.Context, f func() error) error {
	err := f()
	if err == nil || a.updated {
		return err
	}
	a.logf("image: %v; refreshing package lists", err)
	if uerr := a.update(ctx); uerr != nil {
		return fmt.Errorf("%w (and apt-get update failed: %v)", err, uerr)
	}
	return f()
}

// kernelPackage returns the versioned kernel package that the
// linux-image-amd64 metapackage's candidate depends on.
func (a *aptRunner) kernelPackage(ctx context.Context) (string, error) {
	var name string
	err := a.withUpdate(ctx, func() error {
		out, err := a.run(ctx, "", "apt-cache", "show", "--no-all-versions", kernelMetaPackage)
		if err != nil {
			return err
		}
		name = ""
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "Depends:") {
				continue
			}
			for _, dep := range strings.Split(strings.TrimPrefix(line, "Depends:"), ",") {
				f := strings.Fields(dep)
				if len(f) > 0 && strings.HasPrefix(f[0], "linux-image-") {
					name = f[0]
					break
				}
			}
		}
		if name == "" {
			return fmt.Errorf("apt-cache show %s: no linux-image-* dependency", kernelMetaPackage)
		}
		return nil
	})
	return name, err
}

// resolve asks apt which files it would download for pkgs, without
// downloading: the file names carry the versions and the hashes identify
// the contents, which is what the image cache is keyed on.
func (a *aptRunner) resolve(ctx context.Context, pkgs []string) ([]debFile, error) {
	var debs []debFile
	err := a.withUpdate(ctx, func() error {
		out, err := a.run(ctx, "", "apt-get", append([]string{"download", "--print-uris"}, pkgs...)...)
		if err != nil {
			return err
		}
		debs, err = parsePrintURIs(out)
		if err != nil {
			return err
		}
		// apt prints the files in its own order; match them by name.
		got := map[string]bool{}
		for _, d := range debs {
			got[d.Package] = true
		}
		for _, p := range pkgs {
			if !got[p] {
				return fmt.Errorf("apt-get download --print-uris: no file for %s", p)
			}
		}
		return nil
	})
	return debs, err
}

// parsePrintURIs parses lines of the form
//
//	'http://…/name_1.0-1_amd64.deb' name_1%3a1.0-1_amd64.deb 12345 SHA256:…
func parsePrintURIs(out []byte) ([]debFile, error) {
	var debs []debFile
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || !strings.HasPrefix(f[0], "'") {
			continue
		}
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("print-uris line %q: %v", line, err)
		}
		sum, ok := strings.CutPrefix(f[3], "SHA256:")
		if !ok {
			return nil, fmt.Errorf("print-uris line %q: no SHA256", line)
		}
		d := debFile{FileName: f[1], Size: size, SHA256: strings.ToLower(sum)}
		// name_version_arch.deb, the version's colon escaped as %3a.
		parts := strings.Split(strings.TrimSuffix(f[1], ".deb"), "_")
		if len(parts) != 3 {
			return nil, fmt.Errorf("print-uris line %q: file name is not name_version_arch.deb", line)
		}
		d.Package = parts[0]
		d.Version = strings.ReplaceAll(parts[1], "%3a", ":")
		debs = append(debs, d)
	}
	return debs, nil
}

// download makes sure every deb is in dir with the expected hash, fetching
// the missing ones with apt-get download.
func (a *aptRunner) download(ctx context.Context, dir string, debs []debFile) (fetched int, err error) {
	var missing []debFile
	for _, d := range debs {
		if ok, _ := fileHasSHA256(filepath.Join(dir, d.FileName), d.SHA256); !ok {
			missing = append(missing, d)
		}
	}
	if len(missing) == 0 {
		return 0, nil
	}
	args := []string{"download", "-qq", "-o", "APT::Sandbox::User=root"}
	for _, d := range missing {
		args = append(args, d.Package+"="+d.Version)
	}
	err = a.withUpdate(ctx, func() error {
		_, err := a.run(ctx, dir, "apt-get", args...)
		return err
	})
	if err != nil {
		return 0, err
	}
	for _, d := range missing {
		ok, err := fileHasSHA256(filepath.Join(dir, d.FileName), d.SHA256)
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, fmt.Errorf("%s: SHA256 differs from apt's index", d.FileName)
		}
	}
	return len(missing), nil
}

func fileHasSHA256(name, want string) (bool, error) {
	f, err := os.Open(name)
	if err != nil {
		return false, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false, err
	}
	return hex.EncodeToString(h.Sum(nil)) == want, nil
}

// extractDeb unpacks a deb's file system tree into dir with dpkg -x, which
// recreates symlinks as they are in the package and never follows them.
func extractDeb(ctx context.Context, deb, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", deb, dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("dpkg-deb -x %s: %w: %s", filepath.Base(deb), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// pruneDebs removes package files that the current image does not use, so
// the cache does not grow by a kernel (70 MB) at every Debian update.
func pruneDebs(dir string, keep []debFile) error {
	want := map[string]bool{}
	for _, d := range keep {
		want[d.FileName] = true
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".deb") && !want[e.Name()] {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			return err
		}
	}
	return nil
}
