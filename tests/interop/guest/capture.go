package guest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Capture is a tcpdump running on an interface of a namespace.
type Capture struct {
	File string
	proc *HostProc

	stopOnce sync.Once
	stopErr  error
}

// StartCapture starts tcpdump on iface inside the namespace, writing
// file, and returns once tcpdump is capturing. -B 32768 gives the kernel
// a 32 MB buffer: with the default one, the tail of a burst is lost
// without tcpdump counting a drop. --immediate-mode has libpcap hand
// tcpdump each packet as it arrives (on Linux it then uses a TPACKET_V2
// ring, not TPACKET_V3, whose kernel hands over a partly filled block only
// when a timeout retires it, pcap-linux.c), and -U writes each packet
// as tcpdump gets it, so the file is never behind the tap by more than the
// packet in hand and Stop can tell when it has caught up.
func (n *Netns) StartCapture(ctx context.Context, iface, file string, filter ...string) (*Capture, error) {
	args := []string{"-i", iface, "-B", "32768", "--immediate-mode", "-U", "-n", "-s", "0",
		// Stay root: the file's directory may be writable by root only.
		"-Z", "root", "-w", file}
	args = append(args, filter...)
	n.mu.Lock()
	closed := n.closed
	n.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("%s: namespace closed", n.Name)
	}
	cmd := n.Command(context.Background(), "tcpdump", args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	p := &HostProc{Cmd: cmd, name: "tcpdump", out: &syncBuffer{}, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("tcpdump: %w", err)
	}
	listening := make(chan struct{})
	go func() {
		br := bufio.NewReader(stderr)
		once := sync.Once{}
		for {
			line, err := br.ReadString('\n')
			p.out.Write([]byte(line))
			if strings.Contains(line, "listening on") {
				once.Do(func() { close(listening) })
			}
			if err != nil {
				break
			}
		}
		p.err = cmd.Wait()
		close(p.done)
	}()
	n.mu.Lock()
	n.procs = append(n.procs, p)
	n.mu.Unlock()
	select {
	case <-listening:
		return &Capture{File: file, proc: p}, nil
	case <-p.done:
		return nil, fmt.Errorf("tcpdump exited: %v: %s", p.err, p.out.String())
	case <-ctx.Done():
		_ = p.Stop(time.Second)
		return nil, ctx.Err()
	case <-time.After(15 * time.Second):
		_ = p.Stop(time.Second)
		return nil, fmt.Errorf("tcpdump not capturing after 15 s: %s", p.out.String())
	}
}

// captureQuiet is how long the capture file must stay the same size
// before Stop ends tcpdump: SIGINT ends tcpdump's loop with whatever the
// ring still holds counted "received by filter" and never written. In
// TPACKET_V3 mode (before --immediate-mode) a 450 ms window lost 166
// packets and a 1.5 s one still lost one (TestRxeEmu/capture, CI): the
// file stood still while packets waited in a block for the 1 s timeout.
// Now a still file means that nothing arrived; the window stays longer
// than that timeout in case a libpcap ignores immediate mode.
const captureQuiet = 1500 * time.Millisecond

// Stop waits until the capture file has stopped growing for captureQuiet
// (tcpdump may still be writing what the kernel buffered), then stops
// tcpdump and waits for it to exit. Its summary ("N packets captured …
// dropped by kernel") is in Summary.
func (c *Capture) Stop() error {
	c.stopOnce.Do(func() {
		select {
		case <-c.proc.done:
			return
		default:
		}
		const poll = 150 * time.Millisecond
		last, stable := int64(-1), 0
		deadline := time.Now().Add(10 * time.Second)
		for stable < int(captureQuiet/poll) && time.Now().Before(deadline) {
			time.Sleep(poll)
			st, err := os.Stat(c.File)
			if err != nil {
				continue
			}
			if st.Size() == last {
				stable++
			} else {
				stable, last = 0, st.Size()
			}
		}
		_ = killGroup(c.proc.Cmd, syscall.SIGINT)
		select {
		case <-c.proc.done:
		case <-time.After(5 * time.Second):
			_ = killGroup(c.proc.Cmd, syscall.SIGKILL)
			<-c.proc.done
			c.stopErr = fmt.Errorf("tcpdump ignored SIGINT")
		}
	})
	return c.stopErr
}

// Summary is what tcpdump printed (its packet counts after Stop).
func (c *Capture) Summary() string { return strings.TrimSpace(c.proc.Output()) }

// Running reports whether tcpdump is still running.
func (c *Capture) Running() bool {
	select {
	case <-c.proc.done:
		return false
	default:
		return true
	}
}

// Pid is tcpdump's process id.
func (c *Capture) Pid() int { return c.proc.Cmd.Process.Pid }

// Tshark runs tshark on a capture file with a display filter and returns
// its output lines. With fields, it prints those fields tab-separated (one
// line per packet); without, the one-line packet summaries.
func Tshark(ctx context.Context, file, filter string, fields ...string) ([]string, error) {
	args := []string{"-n", "-r", file}
	if filter != "" {
		args = append(args, "-Y", filter)
	}
	if len(fields) > 0 {
		args = append(args, "-T", "fields")
		for _, f := range fields {
			args = append(args, "-e", f)
		}
	}
	cmd := exec.CommandContext(ctx, "tshark", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("tshark %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines, nil
}
