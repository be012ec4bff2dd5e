package sdk

import (
	"io"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// stdinReader returns what Serve reads stdin through. A pipe or socket is
// read after blocking in select(2) on it and on a wake pipe, not through
// the runtime poller: the poller's park and wake-up per request was the
// third largest cost of a sidecar's round trip profiled under exthost
// bench (a prototype with everything else in place measured 2.08x the
// bare ping-pong with the poller against 1.52x without). Close wakes a read in progress, so Serve
// can still end while the host keeps stdin open. Anything else, or a
// descriptor select(2) cannot watch, is read as pollable makes it.
func stdinReader(f *os.File) io.ReadCloser {
	info, err := f.Stat()
	if err != nil || info.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return pollable(f)
	}
	var wake [2]int
	if err := syscall.Pipe2(wake[:], syscall.O_CLOEXEC); err != nil {
		return pollable(f)
	}
	fd := int(f.Fd()) // Fd leaves the descriptor in blocking mode...
	if max(fd, wake[0]) >= fdSetSize || syscall.SetNonblock(fd, true) != nil {
		syscall.Close(wake[0])
		syscall.Close(wake[1])
		return pollable(f)
	}
	// ...and non-blocking now, as pollable would leave it: a read after
	// select(2) that finds nothing (another process took the bytes) gets
	// EAGAIN instead of blocking where Close cannot reach it.
	return &selectReader{f: f, fd: fd, wakeR: wake[0], wakeW: wake[1]}
}

// fdSetSize is how many descriptors a syscall.FdSet holds.
const fdSetSize = int(unsafe.Sizeof(syscall.FdSet{}) * 8)

// selectReader reads a descriptor after select(2) says it is readable.
type selectReader struct {
	f         *os.File // keeps the descriptor open; closed by Close
	fd        int
	wakeW     int
	closeOnce sync.Once

	mu    sync.Mutex // held by Read; protects wakeR
	wakeR int        // -1 once closed
}

func (r *selectReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.wakeR >= 0 {
		var set syscall.FdSet
		add(&set, r.fd)
		add(&set, r.wakeR)
		if _, err := syscall.Select(max(r.fd, r.wakeR)+1, &set, nil, nil, nil); err != nil {
			if err == syscall.EINTR {
				continue
			}
			return 0, err
		}
		if has(&set, r.wakeR) {
			break // Close was called
		}
		n, err := syscall.Read(r.fd, p)
		switch {
		case err == syscall.EINTR || err == syscall.EAGAIN:
			continue
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
	r.closeWake()
	return 0, os.ErrClosed
}

// Close wakes a Read in progress, waits for it to return, and closes the
// descriptors.
func (r *selectReader) Close() error {
	var err error
	r.closeOnce.Do(func() {
		syscall.Close(r.wakeW) // the wake pipe's read end is readable now
		r.mu.Lock()
		r.closeWake()
		r.mu.Unlock()
		err = r.f.Close()
	})
	return err
}

// closeWake closes the wake pipe's read end, with mu held.
func (r *selectReader) closeWake() {
	if r.wakeR >= 0 {
		syscall.Close(r.wakeR)
		r.wakeR = -1
	}
}

// add and has set and test fd in set, whatever the width of its words on
// this architecture.
func add(set *syscall.FdSet, fd int) {
	bits := int(unsafe.Sizeof(set.Bits[0]) * 8)
	set.Bits[fd/bits] |= 1 << (uint(fd) % uint(bits))
}

func has(set *syscall.FdSet, fd int) bool {
	bits := int(unsafe.Sizeof(set.Bits[0]) * 8)
	return set.Bits[fd/bits]&(1<<(uint(fd)%uint(bits))) != 0
}
