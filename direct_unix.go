//go:build unix

package extension

import (
	"errors"
	"io"
	"syscall"
	"time"
)

// directWriter returns one non-blocking write to w for Conn's direct
// writes, or nil when w cannot make one. Only a descriptor in
// non-blocking mode qualifies: an *os.File whose SetWriteDeadline works is
// registered with the runtime poller, which puts it in that mode (pipes
// from os.Pipe, sockets, and the SDK's pollable stdout). A write on any
// other descriptor could block its caller past a deadline (D18).
func directWriter(w io.Writer) func([]byte) (int, error) {
	f, ok := w.(interface {
		syscall.Conn
		SetWriteDeadline(time.Time) error
	})
	if !ok || f.SetWriteDeadline(time.Time{}) != nil {
		return nil
	}
	raw, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	return func(p []byte) (int, error) {
		var n int
		var werr error
		// Returning true makes the poller never wait: one attempt.
		err := raw.Write(func(fd uintptr) bool {
			n, werr = syscall.Write(int(fd), p)
			return true
		})
		if n < 0 {
			n = 0
		}
		if errors.Is(werr, syscall.EAGAIN) || errors.Is(werr, syscall.EINTR) {
			werr = nil // the pipe is full: the writer takes the rest
		}
		if err != nil {
			return n, err // w is closed
		}
		return n, werr
	}
}
