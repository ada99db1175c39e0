package attach

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// oobSize is room for more descriptors than any message may carry, so that
// a message with too many arrives whole and is rejected, instead of being
// cut by the kernel with MSG_CTRUNC.
var oobSize = unix.CmsgSpace(4 * (MaxFDs + 8))

// rawFD returns f's descriptor number without changing its blocking mode
// (os.File.Fd would make a non-blocking file blocking, and O_NONBLOCK is
// shared with every copy of the descriptor, the receiver's included).
func rawFD(f *os.File) (int, error) {
	if f == nil {
		return -1, errors.New("attach: nil file")
	}
	sc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	if err := sc.Control(func(p uintptr) { fd = int(p) }); err != nil {
		return -1, err
	}
	return fd, nil
}

// sendMsg sends one message with files attached by SCM_RIGHTS.
func sendMsg(c *net.UnixConn, msg []byte, files []*os.File) error {
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fd, err := rawFD(f)
			if err != nil {
				return err
			}
			fds[i] = fd
		}
		oob = unix.UnixRights(fds...)
	}
	n, _, err := c.WriteMsgUnix(msg, oob, nil)
	runtime.KeepAlive(files)
	if err != nil {
		return err
	}
	if n != len(msg) {
		return io.ErrShortWrite
	}
	return nil
}

// received is one message read from a connection.
type received struct {
	msg   []byte     // aliases the read buffer
	files []*os.File // every descriptor that came with it, close-on-exec
	trunc bool       // the message or its control data was cut: too long
}

// closeFiles closes every file of fs, ignoring nils.
func closeFiles(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// recvMsg reads one message into buf. It returns io.EOF when the peer has
// closed the connection. Received descriptors are always returned (and must
// be closed by the caller), even when the message is rejected.
func recvMsg(c *net.UnixConn, buf, oob []byte) (received, error) {
	n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
	var r received
	if oobn > 0 {
		r.files = parseRights(oob[:oobn])
	}
	if err != nil {
		closeFiles(r.files)
		return received{}, err
	}
	if n == 0 && oobn == 0 {
		return received{}, io.EOF // a SOCK_SEQPACKET read of 0 is end of file
	}
	r.msg = buf[:n]
	r.trunc = flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0
	return r, nil
}

// parseRights takes every SCM_RIGHTS descriptor out of control data. The Go
// runtime reads with MSG_CMSG_CLOEXEC, so they are close-on-exec.
func parseRights(oob []byte) []*os.File {
	cmsgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var files []*os.File
	for i := range cmsgs {
		fds, err := unix.ParseUnixRights(&cmsgs[i])
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "attach-fd"))
		}
	}
	return files
}

// DupFile returns a new descriptor for f's open file (close-on-exec), for a
// Session that hands f to the server in a reply and keeps using it.
func DupFile(f *os.File) (*os.File, error) {
	fd, err := rawFD(f)
	if err != nil {
		return nil, err
	}
	nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	runtime.KeepAlive(f)
	if err != nil {
		return nil, os.NewSyscallError("fcntl F_DUPFD_CLOEXEC", err)
	}
	return os.NewFile(uintptr(nfd), f.Name()), nil
}
