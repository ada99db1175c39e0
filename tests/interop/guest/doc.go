// Package guest is the rdma_rxe peer of the interop tests: a QEMU guest
// built from Debian packages, in which Linux's soft-RoCE driver runs
// (this project's machines cannot load it on the host).
//
// BuildImage assembles and caches the image: kernel, modules, busybox,
// rdma-core, perftest, iproute2. Start boots the image in a private network
// namespace with a tap, and optionally captures on it. VM then gives a
// scenario its pieces:
//   - guest commands: Run and Start, through an agent on the second
//     serial port;
//   - the console: WaitMarker, Steps;
//   - host-side programs and sockets in the namespace: Netns;
//   - rxe's counters and kernel log: RxeCounters, Dmesg, EnableRxeDebug,
//     RxeDebugControl.
//
// StartT, WaitReadyT and RunT wrap these for tests. docs/interop.md has
// the overview.
package guest
