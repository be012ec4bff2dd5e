//go:build unix

package extension

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
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
	// One attempt's state, reused: the Conn makes one direct write at a
	// time (under its write lock), and a closure made per write would
	// allocate on the intercept's hot path.
	var (
		p    []byte
		n    int
		werr error
	)
	attempt := func(fd uintptr) bool {
		n, werr = syscall.Write(int(fd), p)
		return true // the poller never waits: one attempt
	}
	return func(data []byte) (int, error) {
		p = data
		defer func() { p = nil }() // the frame is not kept
		err := raw.Write(attempt)
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

// D12: on Unix the sidecar leads its own process group, and every kill
// targets the whole group. A full-trust sidecar that moves its children
// into another group or session escapes this; nothing short of a container
// can prevent that.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup sends SIGKILL to every process of the group cmd leads.
func killGroup(cmd *exec.Cmd) error {
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil // the group is already empty
	}
	return err
}

// groupAlive reports whether any live process is left in the group led by
// pid. On Linux it scans /proc, where a zombie that only waits for its
// reaper (init, once its parent is gone) no longer counts; where /proc
// cannot be read, any member counts, zombies included.
func groupAlive(pid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return syscall.Kill(-pid, 0) == nil
	}
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) >= 3 && f[0] != "Z" && f[2] == strconv.Itoa(pid) {
			return true
		}
	}
	return false
}
