package attach

import (
	"os"
	"syscall"
	"testing"

	"go.uber.org/zap"
)

// fuzzSession answers everything and counts what it was given.
type fuzzSession struct{ mems, closes int }

func (s *fuzzSession) Command(cmd []byte) CmdReply {
	// Echo the command as a response with one descriptor patch when it is
	// long enough, to exercise the reply path.
	r := CmdReply{Status: int32(len(cmd)), RespAddr: 0x1000, Resp: append([]byte(nil), cmd...)}
	if len(cmd) >= 4 && cmd[0]&1 == 1 {
		if f, err := os.Open(os.DevNull); err == nil {
			r.FDs = []FD{{File: f, Offset: uint32(cmd[1])}} // maybe out of range: must be caught
		}
	}
	return r
}

func (s *fuzzSession) Mmap(req MmapRequest) (*os.File, uint64, error) {
	if req.Length == 0 {
		return nil, 0, syscall.EINVAL
	}
	f, err := os.Open(os.DevNull)
	return f, 0, err
}

func (s *fuzzSession) Mem(req MemRequest, f *os.File) error {
	s.mems++
	return f.Close()
}

func (s *fuzzSession) Close() { s.closes++ }

func (s *fuzzSession) Notify(req NotifyRequest) (NotifyGrant, error) {
	e, err := os.Open(os.DevNull)
	if err != nil {
		return NotifyGrant{}, err
	}
	p, err := os.Open(os.DevNull)
	if err != nil {
		e.Close()
		return NotifyGrant{}, err
	}
	g := NotifyGrant{EventFD: e, Page: p, CountersOff: 64}
	if req.Flags&NotifyQPBits != 0 {
		g.Flags, g.QPBitsOff, g.QPBits = NotifyQPBits, 128, 8*(NotifyPageSize-128)
	}
	return g, nil
}

type fuzzHandler struct{ sess *fuzzSession }

func (h *fuzzHandler) Open(p *Peer) (Session, Welcome, error) {
	if p.Mem != nil {
		p.Mem.Close()
	}
	return h.sess, Welcome{Device: "irdma0", ABIVersion: 5}, nil
}

// FuzzServerMessage drives the server's per-connection state machine with
// arbitrary messages: it must never panic, must answer with a well-formed
// reply echoing what it could read of the header, and must keep the
// connection only for well-formed requests.
func FuzzServerMessage(f *testing.F) {
	f.Add(AppendMessage(nil, TypeHello, 1, Hello{Version: 1, Program: "x"}.Append(nil)), false, uint8(0))
	f.Add(AppendMessage(nil, TypeHello, 1, Hello{Version: 1}.Append(nil)), false, uint8(1))
	f.Add(AppendMessage(nil, TypeCmd, 2, []byte{1, 4, 0, 0, 0, 0, 0, 0}), true, uint8(0))
	f.Add(AppendMessage(nil, TypeCmd, 2, []byte{1, 0, 0, 0}), true, uint8(0))
	f.Add(AppendMessage(nil, TypeMmap, 3, MmapRequest{Length: 4096}.Append(nil)), true, uint8(0))
	f.Add(AppendMessage(nil, TypeMem, 4, MemRequest{Length: 4096}.Append(nil)), true, uint8(1))
	f.Add(AppendMessage(nil, TypeNotify, 5, NotifyRequest{}.Append(nil)), true, uint8(0))
	f.Add(AppendMessage(nil, TypeNotify, 5, []byte{1, 0, 0, 0, 0, 0, 0, 0}), true, uint8(0))
	f.Add(AppendMessage(nil, TypeNotify, 5, []byte{2, 0, 0, 0, 0, 0, 0, 0}), true, uint8(0))
	f.Add([]byte{0x49, 0x44, 0x45, 0x41}, true, uint8(3))
	f.Fuzz(func(t *testing.T, msg []byte, opened bool, nfds uint8) {
		sess := &fuzzSession{}
		cs := &connState{h: &fuzzHandler{sess: sess}, log: zap.NewNop()}
		if opened {
			cs.sess = sess
		}
		var files []*os.File
		for range int(nfds % 4) {
			fd, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, fd)
		}
		reply, out, keep := cs.handle(received{msg: msg, files: files})
		defer closeFiles(out)
		for _, fd := range files {
			// Every received descriptor was consumed: closed, or handed on
			// (Mem closes it, Open closes it).
			if err := fd.Close(); err == nil {
				t.Fatalf("received descriptor left open")
			}
		}
		rh, payload, err := ParseMessage(reply)
		if err != nil {
			t.Fatalf("reply % x: %v", reply, err)
		}
		// The reply echoes the request's type and seq (zero when the header
		// could not be read at all).
		ih, _ := ParseHeader(msg)
		if rh.Type != ih.Type || rh.Seq != ih.Seq {
			t.Fatalf("reply header %+v to %+v", rh, ih)
		}
		if !keep {
			if len(payload) != StatusSize && rh.Type != TypeHello {
				t.Fatalf("dropping with a %d-byte reply", len(payload))
			}
			return
		}
		switch rh.Type {
		case TypeHello:
			if r, err := ParseHelloReply(payload); err != nil || r.Status != 0 {
				t.Fatalf("HELLO reply %+v, %v", r, err)
			}
		case TypeCmd:
			w, err := ParseCmdReply(payload)
			if err != nil || len(w.FDOffsets) != len(out) {
				t.Fatalf("CMD reply %+v (%d files), %v", w, len(out), err)
			}
		case TypeMmap:
			r, err := ParseMmapReply(payload)
			if err != nil || (r.Status == 0) != (len(out) == 1) {
				t.Fatalf("MMAP reply %+v (%d files), %v", r, len(out), err)
			}
		case TypeNotify:
			r, err := ParseNotifyReply(payload)
			if err != nil || (r.Status == 0) != (len(out) == 2) {
				t.Fatalf("NOTIFY reply %+v (%d files), %v", r, len(out), err)
			}
		case TypeMem:
			if len(payload) != StatusSize || sess.mems != 1 {
				t.Fatalf("MEM reply % x, %d mems", payload, sess.mems)
			}
		default:
			t.Fatalf("kept the connection after type %d", rh.Type)
		}
	})
}
