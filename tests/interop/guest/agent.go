package guest

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Result is the outcome of a command run in the guest.
type Result struct {
	RC       int           // exit status of the script (128+N for signal N)
	Output   string        // standard output and error, interleaved
	Duration time.Duration // as seen from the host
}

// agentConn is the host end of the command channel on the guest's second
// serial port (see agent in initfs/lib.sh for the protocol).
type agentConn struct {
	conn net.Conn
	wmu  sync.Mutex // one request line at a time

	mu      sync.Mutex
	pending map[string]chan Result
	err     error // set when the channel broke; fails every waiter
	seq     atomic.Uint64
	done    chan struct{}
}

func newAgentConn(conn net.Conn) *agentConn {
	a := &agentConn{conn: conn, pending: map[string]chan Result{}, done: make(chan struct{})}
	go a.readLoop()
	return a
}

func (a *agentConn) readLoop() {
	sc := bufio.NewScanner(a.conn)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	var id string
	var b64 strings.Builder
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if rest, ok := strings.CutPrefix(line, Marker+" begin "); ok {
			id = rest
			b64.Reset()
			continue
		}
		if rest, ok := strings.CutPrefix(line, Marker+" end "); ok && id != "" {
			f := strings.Fields(rest)
			rc := -1
			if len(f) == 2 && f[0] == id {
				rc, _ = strconv.Atoi(strings.TrimPrefix(f[1], "rc="))
			}
			out, err := base64.StdEncoding.DecodeString(b64.String())
			if err != nil {
				out = []byte(fmt.Sprintf("(undecodable agent output: %v)", err))
			}
			a.deliver(id, Result{RC: rc, Output: string(out)})
			id = ""
			continue
		}
		if id != "" {
			b64.WriteString(strings.TrimSpace(line))
		}
	}
	err := sc.Err()
	if err == nil {
		err = errors.New("agent channel closed")
	}
	a.mu.Lock()
	a.err = err
	a.mu.Unlock()
	close(a.done)
}

func (a *agentConn) deliver(id string, r Result) {
	a.mu.Lock()
	ch := a.pending[id]
	delete(a.pending, id)
	a.mu.Unlock()
	if ch != nil {
		ch <- r
	}
}

func (a *agentConn) send(line string) error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	_ = a.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := a.conn.Write([]byte(line + "\n"))
	return err
}

// GuestProc is a script running in the guest, started with VM.Start.
type GuestProc struct {
	a      *agentConn
	id     string
	start  time.Time
	result chan Result
	got    *Result
}

func (a *agentConn) start(script string) (*GuestProc, error) {
	id := "c" + strconv.FormatUint(a.seq.Add(1), 10)
	p := &GuestProc{a: a, id: id, start: time.Now(), result: make(chan Result, 1)}
	a.mu.Lock()
	if a.err != nil {
		a.mu.Unlock()
		return nil, a.err
	}
	a.pending[id] = p.result
	a.mu.Unlock()
	if err := a.send("RUN " + id + " " + base64.StdEncoding.EncodeToString([]byte(script))); err != nil {
		a.mu.Lock()
		delete(a.pending, id)
		a.mu.Unlock()
		return nil, fmt.Errorf("agent: send: %w", err)
	}
	return p, nil
}

// Wait waits for the script to end. When ctx ends first, the script's
// session is killed in the guest and ctx's error returned.
func (p *GuestProc) Wait(ctx context.Context) (Result, error) {
	if p.got != nil {
		return *p.got, nil
	}
	select {
	case r := <-p.result:
		r.Duration = time.Since(p.start)
		p.got = &r
		return r, nil
	case <-p.a.done:
		p.a.mu.Lock()
		err := p.a.err
		p.a.mu.Unlock()
		return Result{RC: -1}, fmt.Errorf("agent: %w", err)
	case <-ctx.Done():
		_ = p.Kill()
		return Result{RC: -1}, ctx.Err()
	}
}

// Kill sends SIGTERM, then SIGKILL two seconds later, to the script's
// session in the guest; Wait then returns its result.
func (p *GuestProc) Kill() error { return p.a.send("KILL " + p.id) }

func (a *agentConn) close() {
	_ = a.conn.Close()
	<-a.done
}
