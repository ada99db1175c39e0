package preload

import (
	"fmt"
	"os"
	"syscall"
)

// checkPrivate verifies that d is a directory owned by us that nobody else
// can write, so that no other user can plant a library in it.
func checkPrivate(d string) error {
	fi, err := os.Lstat(d)
	if err != nil {
		return fmt.Errorf("preload: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("preload: %s is not a private directory of uid %d; set %s", d, os.Geteuid(), EnvCacheDir)
	}
	return nil
}
