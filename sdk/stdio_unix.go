//go:build unix

package sdk

import (
	"os"
	"syscall"
)

// pollable returns f, or a pollable *os.File on the same descriptor when f
// is a pipe or a socket. A sidecar's stdin and stdout are inherited in
// blocking mode, and closing a blocking file does not interrupt a Read or
// Write in progress, so Serve could not end (on ctx, or a stalled host)
// until the host closed its side. A pollable file's Close does. Terminals
// and regular files are left as they are: their mode is shared with other
// processes.
func pollable(f *os.File) *os.File {
	info, err := f.Stat()
	if err != nil || info.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return f
	}
	raw, err := f.SyscallConn()
	if err != nil {
		return f
	}
	var fd uintptr
	var serr error
	if err := raw.Control(func(d uintptr) {
		fd = d
		serr = syscall.SetNonblock(int(d), true)
	}); err != nil || serr != nil {
		return f
	}
	// os.NewFile makes a file on a non-blocking descriptor pollable.
	return os.NewFile(fd, f.Name())
}
