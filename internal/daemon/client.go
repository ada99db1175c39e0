package daemon

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/irdma-emu/irdma-emu/attach"
)

// Client talks to a daemon's control socket (the tools use it).
type Client struct {
	mu   sync.Mutex
	c    net.Conn
	r    *bufio.Reader
	seq  int
	path string
}

// ErrNoDaemon is returned by Dial when nothing answers on the control socket.
var ErrNoDaemon = errors.New("no daemon answers")

// RemoteError is an error response from the daemon.
type RemoteError struct{ Msg string }

func (e *RemoteError) Error() string { return e.Msg }

// Dial connects to the control socket at path.
func Dial(path string) (*Client, error) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("%w on %s: %v", ErrNoDaemon, path, err)
	}
	return &Client{c: c, r: bufio.NewReaderSize(c, 64<<10), path: path}, nil
}

// DialDevice connects to the control socket of the named device under
// runDir ("" for RunDir()). With no run directory given it also looks in
// the per-user fallback, where an unprivileged daemon runs.
func DialDevice(runDir, device string) (*Client, error) {
	if device == "" {
		device = os.Getenv(attach.EnvDevice)
	}
	if device == "" {
		device = attach.DefaultDevice
	}
	if err := CheckName(device); err != nil {
		return nil, err
	}
	if runDir != "" {
		return Dial(ControlPath(runDir, device))
	}
	first := RunDir()
	c, err := Dial(ControlPath(first, device))
	if err == nil {
		return c, nil
	}
	if fb := FallbackRunDir(); fb != first && os.Getenv(attach.EnvRunDir) == "" {
		if c2, err2 := Dial(ControlPath(fb, device)); err2 == nil {
			return c2, nil
		}
	}
	return nil, fmt.Errorf("device %s: %w (is `irdma-emu run --name %s` running?)", device, err, device)
}

// Close closes the connection.
func (c *Client) Close() error { return c.c.Close() }

// Call sends req and decodes the result into result (which may be nil).
func (c *Client) Call(req Request, result any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	req.ID, _ = json.Marshal(c.seq)
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	_ = c.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.c.Write(append(b, '\n')); err != nil {
		return err
	}
	resp, err := c.read()
	if err != nil {
		return err
	}
	if !resp.OK {
		return &RemoteError{resp.Error}
	}
	if result != nil {
		return json.Unmarshal(resp.Result, result)
	}
	return nil
}

func (c *Client) read() (Response, error) {
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		return Response{}, fmt.Errorf("control socket %s: %w", c.path, err)
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return Response{}, fmt.Errorf("control socket %s: bad response: %w", c.path, err)
	}
	return resp, nil
}

// Ping checks that the daemon answers.
func (c *Client) Ping() (PingResult, error) {
	var r PingResult
	return r, c.Call(Request{Cmd: "ping"}, &r)
}

// Stats fetches the statistics; qpn < 0 for every QP.
func (c *Client) Stats(qpn int64) (Stats, error) {
	var s Stats
	req := Request{Cmd: "stats"}
	if qpn >= 0 {
		req.QP = &qpn
	}
	return s, c.Call(req, &s)
}

// DevInfo fetches the device attributes.
func (c *Client) DevInfo() (DevInfo, error) {
	var d DevInfo
	return d, c.Call(Request{Cmd: "devinfo"}, &d)
}

// SetFaults sets (spec non-empty) or clears the faults.
func (c *Client) SetFaults(spec string) (FaultResult, error) {
	var r FaultResult
	req := Request{Cmd: "fault", Op: "clear"}
	if spec != "" {
		req = Request{Cmd: "fault", Op: "set", Spec: spec}
	}
	return r, c.Call(req, &r)
}

// SetLink takes the link down or gives it back.
func (c *Client) SetLink(up bool) (LinkResult, error) {
	var r LinkResult
	op := "down"
	if up {
		op = "up"
	}
	return r, c.Call(Request{Cmd: "link", Op: op}, &r)
}

// Events turns the connection into the event stream: fn gets every kept
// event after seq `after`, then each new one, until it returns false or the
// connection ends (the returned error; nil when fn stopped).
func (c *Client) Events(after uint64, timeout time.Duration, fn func(PortEvent) bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, _ := json.Marshal(Request{Cmd: "events", After: after})
	_ = c.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.c.Write(append(b, '\n')); err != nil {
		return err
	}
	for {
		if timeout > 0 {
			_ = c.c.SetReadDeadline(time.Now().Add(timeout))
		} else {
			_ = c.c.SetReadDeadline(time.Time{})
		}
		resp, err := c.read()
		if err != nil {
			return err
		}
		if !resp.OK {
			return &RemoteError{resp.Error}
		}
		var ev PortEvent
		if err := json.Unmarshal(resp.Result, &ev); err != nil {
			return err
		}
		if !fn(ev) {
			return nil
		}
	}
}
