package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The baselines `irdma-emu bench` measures the emulator against, on the
// same machine in the same run (docs/performance.md): what plain UDP
// sockets carry on loopback, and what one thread copies in memory. Raw
// blocking sockets and one OS thread per side, so that the figures are the
// kernel's and not the Go scheduler's.

// udpBatch is the datagrams per sendmmsg/recvmmsg call.
const udpBatch = 64

// udpSocket is a blocking IPv4 UDP socket bound to 127.0.0.1 (any port).
func udpSocket() (int, unix.SockaddrInet4, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, unix.SockaddrInet4{}, err
	}
	// Room for a burst: a receiver behind its sender drops, it does not
	// throttle it. SO_RCVBUFFORCE needs CAP_NET_ADMIN; SO_RCVBUF is capped
	// by net.core.rmem_max.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
	}
	// A receiver wakes at least every 100 ms to see that the run ended.
	tv := unix.Timeval{Usec: 100_000}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return -1, unix.SockaddrInet4{}, err
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return -1, unix.SockaddrInet4{}, err
	}
	return fd, *sa.(*unix.SockaddrInet4), nil
}

// mmsgs is a vector of n message headers, each with one buffer of size
// bytes, for sendmmsg/recvmmsg on a connected socket.
func mmsgs(n, size int) []unix.Mmsghdr {
	hdrs := make([]unix.Mmsghdr, n)
	iovs := make([]unix.Iovec, n)
	buf := make([]byte, n*size)
	for i := range hdrs {
		iovs[i].Base = &buf[i*size]
		iovs[i].SetLen(size)
		hdrs[i].Hdr.Iov = &iovs[i]
		hdrs[i].Hdr.SetIovlen(1)
	}
	return hdrs
}

// mmsgCall runs sendmmsg or recvmmsg (blocking) over hdrs.
func mmsgCall(trap uintptr, fd int, hdrs []unix.Mmsghdr) (int, error) {
	n, _, e := unix.Syscall6(trap, uintptr(fd), uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// udpStream measures the datagrams per second one receiver takes from one
// sender over loopback, both batching udpBatch datagrams of size bytes per
// system call (sendmmsg, recvmmsg; no GSO/GRO), for d after a warm-up.
func udpStream(size int, d time.Duration) (float64, error) {
	rx, rxAddr, err := udpSocket()
	if err != nil {
		return 0, err
	}
	defer unix.Close(rx)
	tx, _, err := udpSocket()
	if err != nil {
		return 0, err
	}
	defer unix.Close(tx)
	if err := unix.Connect(tx, &rxAddr); err != nil {
		return 0, err
	}
	var got atomic.Uint64
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // receiver
		defer wg.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		hdrs := mmsgs(udpBatch, size)
		for !stop.Load() {
			n, err := mmsgCall(unix.SYS_RECVMMSG, rx, hdrs)
			if err == nil {
				got.Add(uint64(n))
			}
		}
	}()
	var sendErr error
	go func() { // sender
		defer wg.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		hdrs := mmsgs(udpBatch, size)
		for !stop.Load() {
			if _, err := mmsgCall(unix.SYS_SENDMMSG, tx, hdrs); err != nil && !errors.Is(err, unix.ENOBUFS) && !errors.Is(err, unix.EAGAIN) {
				sendErr = err
				stop.Store(true)
			}
		}
	}()
	time.Sleep(d / 4) // warm-up
	c0, t0 := got.Load(), time.Now()
	time.Sleep(d)
	c1, t1 := got.Load(), time.Now()
	stop.Store(true)
	wg.Wait()
	if sendErr != nil {
		return 0, sendErr
	}
	return float64(c1-c0) / t1.Sub(t0).Seconds(), nil
}

// udpRoundTrip measures the round trip of an 8-byte datagram over
// loopback, unbatched: one send and one receive per side per iteration.
// It returns the median and the 99th percentile.
func udpRoundTrip(iters int) (p50, p99 time.Duration, err error) {
	a, aAddr, err := udpSocket()
	if err != nil {
		return 0, 0, err
	}
	defer unix.Close(a)
	b, bAddr, err := udpSocket()
	if err != nil {
		return 0, 0, err
	}
	defer unix.Close(b)
	if err := unix.Connect(a, &bAddr); err != nil {
		return 0, 0, err
	}
	if err := unix.Connect(b, &aAddr); err != nil {
		return 0, 0, err
	}
	var stop atomic.Bool
	done := make(chan struct{})
	go func() { // the echo side
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var buf [64]byte
		for !stop.Load() {
			if n, err := readNoEINTR(b, buf[:]); err == nil {
				_, _ = unix.Write(b, buf[:n])
			}
		}
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	rtts := make([]time.Duration, 0, iters)
	var buf [8]byte
	warm := iters / 10
	for i := 0; i < iters+warm; i++ {
		t0 := time.Now()
		if _, err = unix.Write(a, buf[:]); err != nil {
			break
		}
		if _, err = readNoEINTR(a, buf[:]); err != nil {
			break // a lost datagram times out (SO_RCVTIMEO): report it
		}
		if i >= warm {
			rtts = append(rtts, time.Since(t0))
		}
	}
	stop.Store(true)
	<-done
	if err != nil {
		return 0, 0, fmt.Errorf("round trip: %v", err)
	}
	slices.Sort(rtts)
	return rtts[len(rtts)/2], rtts[len(rtts)*99/100], nil
}

// readNoEINTR is unix.Read again after a signal: a socket with
// SO_RCVTIMEO is not restarted after one (socket(7)), and the Go runtime's
// preemption signal arrives at any time — a bench run lost its round-trip
// baseline to an "interrupted system call".
func readNoEINTR(fd int, b []byte) (int, error) {
	for {
		n, err := unix.Read(fd, b)
		if err != unix.EINTR {
			return n, err
		}
	}
}

// memcpyRate is the bytes per second of one thread copying 1 MiB blocks
// (Go's copy, memmove) for d.
func memcpyRate(d time.Duration) float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const block = 1 << 20
	src, dst := make([]byte, block), make([]byte, block)
	for i := range src {
		src[i] = byte(i)
	}
	n := 0
	t0 := time.Now()
	for time.Since(t0) < d {
		for range 16 {
			copy(dst, src)
		}
		n += 16
	}
	return float64(n) * block / time.Since(t0).Seconds()
}

// benchSpinEnv makes `irdma-emu bench` a busy loop: the load the contended
// baselines run under (perftest's programs spin on their CQs).
const benchSpinEnv = "IRDMA_EMU_BENCH_SPIN"

// spinners starts n busy-looping processes (this binary with benchSpinEnv
// set); stop kills them.
func spinners(self string, n int) (stop func(), err error) {
	var cmds []*exec.Cmd
	stop = func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
	for range n {
		c := exec.Command(self, "bench")
		c.Env = append(os.Environ(), benchSpinEnv+"=1")
		if err := c.Start(); err != nil {
			stop()
			return nil, err
		}
		cmds = append(cmds, c)
	}
	time.Sleep(200 * time.Millisecond) // let them reach the loop
	return stop, nil
}

// spin never returns: the busy loop of a spinner process.
func spin() {
	x := uint64(1)
	for {
		x = x*6364136223846793005 + 1442695040888963407
		if x == 0 {
			fmt.Println(x)
		}
	}
}
