package guest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Marker starts every line the guest's scripts print for the host.
const Marker = "@@IRDMA-EMU"

// ansiEscape matches the terminal control sequences SeaBIOS and the kernel
// write to the serial port.
var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;?]*[a-zA-Z]|\x1bc`)

// console collects the guest's serial console: every line goes to a log
// file and into memory, and waiters are woken on each new line.
type console struct {
	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced on every new line
	eof     bool
	log     *os.File
}

func newConsole(logFile string) (*console, error) {
	f, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	return &console{changed: make(chan struct{}), log: f}, nil
}

// read consumes r until EOF; prefix marks lines from a second source
// (QEMU's own stderr).
func (c *console) read(r io.Reader, prefix string) {
	br := bufio.NewReaderSize(r, 64*1024)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			c.add(prefix + ansiEscape.ReplaceAllString(strings.TrimRight(line, "\r\n"), ""))
		}
		if err != nil {
			return
		}
	}
}

func (c *console) add(line string) {
	// A marker printed after output that lacked a newline (firmware
	// messages, a kernel message cut short) starts its own line, so that
	// markers are always at the start of a line.
	if i := strings.Index(line, Marker); i > 0 {
		c.add(line[:i])
		line = line[i:]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, line)
	fmt.Fprintln(c.log, line)
	close(c.changed)
	c.changed = make(chan struct{})
}

// close marks the end of the console (QEMU exited) and wakes waiters.
func (c *console) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.eof {
		return
	}
	c.eof = true
	c.log.Close()
	close(c.changed)
	c.changed = make(chan struct{})
}

// snapshot returns the lines so far, whether the console has ended, and
// a channel closed at the next change.
func (c *console) snapshot() ([]string, bool, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lines, c.eof, c.changed
}

func (c *console) String() string {
	lines, _, _ := c.snapshot()
	return strings.Join(lines, "\n")
}

// wait returns the first line matching re, waiting for it until ctx ends
// or the console ends. A line containing "@@IRDMA-EMU fatal" ends the wait
// with an error, since the guest powers off after it.
func (c *console) wait(ctx context.Context, re *regexp.Regexp) (string, error) {
	for i := 0; ; {
		lines, eof, changed := c.snapshot()
		for ; i < len(lines); i++ {
			if re.MatchString(lines[i]) {
				return lines[i], nil
			}
			if strings.Contains(lines[i], Marker+" fatal") {
				return "", fmt.Errorf("guest failed: %s", lines[i])
			}
		}
		if eof {
			return "", fmt.Errorf("console ended (QEMU exited) before a line matching %q", re)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for a console line matching %q: %w", re, ctx.Err())
		case <-changed:
		}
	}
}

// StepResult is what a scenario script's `step NAME CMD…` reported.
type StepResult struct {
	Name   string
	RC     int
	Output string
}

var stepRE = regexp.MustCompile(`^` + Marker + ` step (\S+) rc=(\d+)$`)

// steps parses the step blocks printed so far, in order.
func parseSteps(lines []string) []StepResult {
	var out []StepResult
	open := map[string][]string{}
	inside := map[string]bool{}
	for _, l := range lines {
		if name, ok := strings.CutPrefix(l, Marker+" begin "); ok {
			inside[name] = true
			open[name] = nil
			continue
		}
		if name, ok := strings.CutPrefix(l, Marker+" end "); ok && inside[name] {
			inside[name] = false
			continue
		}
		if m := stepRE.FindStringSubmatch(l); m != nil {
			rc, _ := strconv.Atoi(m[2])
			out = append(out, StepResult{Name: m[1], RC: rc, Output: strings.Join(open[m[1]], "\n")})
			delete(open, m[1])
			continue
		}
		for name, in := range inside {
			if in {
				open[name] = append(open[name], l)
			}
		}
	}
	return out
}
