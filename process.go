package extension

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"
)

// process is one running sidecar: the child in its own process group (D12),
// the two protocol pipes, and the stderr tail.
//
// Goroutines: reap (waits for the child and closes exited) and drain (copies
// stderr into the tail until every writer of the pipe is gone or release
// closes it). release joins drain; reap ends when the child is reaped,
// which stop waits for.
type process struct {
	cmd    *exec.Cmd
	pid    int
	stdin  *os.File // our write end of the child's stdin
	stdout *os.File // our read end of the child's stdout
	stderr *os.File // our read end of the child's stderr
	tail   *tail

	exited  chan struct{} // closed once the child has been reaped
	waitErr error         // valid after exited is closed
	drained chan struct{} // closed when the stderr drain ends

	releaseOnce sync.Once
	groupGone   atomic.Bool // the group was seen empty after the leader exited: never signal it again
}

// startProcess spawns spec in exec form (never through a shell, D8) with
// env, and returns the stage that failed on error: "pipes" or "spawn".
func startProcess(spec *launchSpec, env []string, tail *tail) (*process, string, error) {
	var files []*os.File // the read and write ends of stdin, stdout and stderr, in order
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	for range 3 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			return nil, "pipes", err
		}
		files = append(files, r, w)
	}
	inR, inW, outR, outW, errR, errW := files[0], files[1], files[2], files[3], files[4], files[5]
	growPipe(inW)
	cmd := exec.Command(spec.Command, spec.Args...)
	cmd.Env = env
	cmd.Dir = spec.Root
	// The child gets the pipes' *os.File ends directly, so exec starts no
	// copying goroutine and Wait cannot hang on a grandchild that keeps a
	// pipe open (D12).
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, "spawn", err
	}
	inR.Close()
	outW.Close()
	errW.Close()
	p := &process{
		cmd: cmd, pid: cmd.Process.Pid,
		stdin: inW, stdout: outR, stderr: errR, tail: tail,
		exited: make(chan struct{}), drained: make(chan struct{}),
	}
	go p.reap()
	go p.drain()
	return p, "", nil
}

func (p *process) reap() {
	p.waitErr = p.cmd.Wait()
	close(p.exited)
}

// drain keeps reading stderr so that a chatty sidecar never blocks on a full
// pipe (D10: only the tail is kept).
func (p *process) drain() {
	defer close(p.drained)
	io.Copy(p.tail, p.stderr)
	p.tail.flush() // a last line without its "\n"
}

// kill terminates the whole process group, unless the group is known to be
// gone: its id could belong to another process by now.
func (p *process) kill() error {
	if p.groupGone.Load() {
		return nil
	}
	return killGroup(p.cmd)
}

// waitClosed waits up to d for ch to be closed and reports whether it was;
// with d <= 0 it only looks.
func waitClosed(ch <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// stop ends the process as D11 prescribes after the protocol part of a
// shutdown: close stdin, give the child grace to exit on its own, then
// kill the group and wait up to reap for the child to be reaped. Leftover
// members of the group (a grandchild holding a pipe) are killed too. It
// reports what had to be killed: the child itself (it overran grace), or
// only members it left behind. Once the group is gone, stderr is still
// read for up to drain, so the last lines the sidecar wrote reach the tail.
func (p *process) stop(grace, reap, drain time.Duration) (killed killedWhat, err error) {
	p.stdin.Close()
	if !waitClosed(p.exited, grace) {
		killed = killedChild
		p.kill()
		if !waitClosed(p.exited, reap) {
			err = fmt.Errorf("process %d was not reaped within %v of SIGKILL", p.pid, reap)
		}
	}
	if !p.groupGone.Load() && groupAlive(p.pid) {
		// D12: the sidecar is gone but members of its group live on.
		killed = max(killed, killedLeftovers)
		p.kill()
		if !p.waitGroupGone(reap) && err == nil {
			err = fmt.Errorf("process group %d still has live members %v after SIGKILL", p.pid, reap)
		}
	}
	if err == nil {
		p.groupGone.Store(true)
		// No member of the group holds stderr any more: what is left in
		// the pipe is read up to EOF, unless a process that left the group
		// (D12) still holds it, which drain bounds.
		waitClosed(p.drained, drain)
	}
	p.release()
	return killed, err
}

// killedWhat is what stop had to kill.
type killedWhat uint8

const (
	killedNothing   killedWhat = iota
	killedLeftovers            // members the child left in its group; it had exited
	killedChild                // the child itself, and its group
)

// groupPoll is how often waitGroupGone looks at the group again.
const groupPoll = 5 * time.Millisecond

// waitGroupGone waits up to d for the kernel to tear down every member of
// the killed group, so that nothing of it runs once stop returns.
func (p *process) waitGroupGone(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for groupAlive(p.pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(groupPoll)
	}
	return true
}

// release closes our pipe ends, which ends the stderr drain even when a
// grandchild still holds the write end, and joins it.
func (p *process) release() {
	p.releaseOnce.Do(func() {
		p.stdin.Close()
		p.stdout.Close()
		p.stderr.Close()
		<-p.drained
	})
}

// exitError describes how the child ended, for crash reports; it is
// called only once exited is closed.
func (p *process) exitError() error {
	return cmp.Or(p.waitErr, errors.New("exited with status 0"))
}
