package attach_test

import (
	"bytes"
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/irdma-emu/irdma-emu/attach"
)

// echoNL answers every datagram with two: the datagram reversed and a
// fixed one, and records the HELLO's port id.
type echoNL struct{ port chan uint32 }

func (e echoNL) OpenNetlink(p *attach.Peer) (attach.NetlinkSession, error) {
	e.port <- p.Hello.Port
	return echoSess{}, nil
}

type echoSess struct{}

func (echoSess) Request(m []byte) [][]byte {
	r := make([]byte, len(m))
	for i := range m {
		r[i] = m[len(m)-1-i]
	}
	return [][]byte{r, []byte("done")}
}
func (echoSess) Close() {}

type refuseHandler struct{}

func (refuseHandler) Open(*attach.Peer) (attach.Session, attach.Welcome, error) {
	return nil, attach.Welcome{}, syscall.EACCES
}

func netlinkHello(t *testing.T, c net.Conn, port uint32) attach.HelloReply {
	t.Helper()
	h := attach.Hello{Version: attach.Version, PID: 1, Flags: attach.HelloNetlink, Port: port, Program: "nl.test"}
	if _, err := c.Write(attach.AppendMessage(nil, attach.TypeHello, 1, h.Append(nil))); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	hd, payload, err := attach.ParseMessage(buf[:n])
	if err != nil || hd.Type != attach.TypeHello {
		t.Fatalf("reply %x: %v", buf[:n], err)
	}
	rep, err := attach.ParseHelloReply(payload)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestNetlinkConnection: a HELLO with HelloNetlink makes the connection a
// raw datagram channel to the NetlinkHandler (no attach header after the
// reply); the port id reaches the handler; without a handler the HELLO is
// refused with EPROTONOSUPPORT and the connection closed.
func TestNetlinkConnection(t *testing.T) {
	dir := t.TempDir()
	ports := make(chan uint32, 1)
	s, err := attach.ListenConfig{Netlink: echoNL{ports}}.Listen(filepath.Join(dir, "a.sock"), refuseHandler{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := net.Dial("unixpacket", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rep := netlinkHello(t, c, 0xfffff000)
	if rep.Status != 0 || rep.Features != attach.FeatureNetlink {
		t.Fatalf("HELLO reply %+v, want status 0 features FeatureNetlink", rep)
	}
	if p := <-ports; p != 0xfffff000 {
		t.Fatalf("port %#x reached the handler", p)
	}
	if _, err := c.Write([]byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	for _, want := range [][]byte{{3, 2, 1}, []byte("done")} {
		n, err := c.Read(buf)
		if err != nil || !bytes.Equal(buf[:n], want) {
			t.Fatalf("read %x (%v), want %x", buf[:n], err, want)
		}
	}

	s2, err := attach.Listen(filepath.Join(dir, "b.sock"), refuseHandler{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	c2, err := net.Dial("unixpacket", s2.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if rep := netlinkHello(t, c2, 7); rep.Status != -int32(syscall.EPROTONOSUPPORT) || rep.Features != 0 {
		t.Fatalf("without a netlink handler: %+v", rep)
	}
	if n, err := c2.Read(buf); err == nil && n > 0 {
		t.Fatalf("connection still open: read %x", buf[:n])
	}
}
