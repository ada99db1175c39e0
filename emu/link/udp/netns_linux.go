package udp

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// inNetNS runs fn with the calling goroutine's thread in the network
// namespace at path ("" runs fn as is). A socket belongs to the namespace
// of the thread that created it for its whole life, so the link's sockets
// are created in fn and used from any goroutine afterwards. If the thread
// cannot be moved back it stays locked, and the runtime retires it when
// the goroutine exits instead of reusing it in the wrong namespace.
func inNetNS(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	target, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("udp: network namespace %s: %w", path, err)
	}
	defer target.Close()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("udp: current network namespace: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("udp: enter network namespace %s: %w", path, err)
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		return fmt.Errorf("udp: leave network namespace %s: %w (and %v)", path, err, ferr)
	}
	runtime.UnlockOSThread()
	return ferr
}
